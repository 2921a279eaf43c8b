"""One sequence's grammar with its rules (`Steered`): the one place rule effects compose.

The tokenizer's grammar (wrapped by a caller's `grammar_wrap`, if any) says what is valid; the
rules (`generation.rules`) follow the same ids and narrow, add and choose. Their effects are
composed here in one fixed order (the registry's), generically: nothing asks a rule or a
grammar which hooks it has.
"""

from __future__ import annotations

import copy

import numpy as np

from musicgen.generation.rules import RULES, Controls, Rule, Start
from musicgen.tokenizers.base import Grammar, Tokenizer


class Steered:
    """A grammar and the rules that follow it, advanced together (`advance`)."""

    def __init__(self, grammar: Grammar, rules: list[Rule]) -> None:
        self.grammar, self.rules = grammar, rules
        self._controls = [r for r in rules if r.control]
        self.own_errors = 0  # ids a control forbade that the grammar took

    @classmethod
    def start(
        cls, tokenizer: Tokenizer, options, controls: Controls, ids: list[int], grammar: Grammar
    ) -> Steered:
        """The registry's rules that apply to this sequence, started over its `ids`."""
        at = Start(tokenizer, options, controls, list(ids), grammar)
        return cls(grammar, [r for r in (rule.start(at) for rule in RULES) if r is not None])

    @property
    def errors(self) -> int:
        return self.grammar.errors + self.own_errors

    def allowed(self) -> np.ndarray:
        """The grammar's mask narrowed by every rule's `force` (a copy)."""
        mask = np.array(self.grammar.allowed(), dtype=bool)
        for rule in self.rules:
            mask = rule.force(mask)
        return mask

    def narrowed(self, mask: np.ndarray) -> np.ndarray:
        """`mask` narrowed by the grammar's `sampling_mask` and each rule's `mask`, each only
        where it leaves an id (never an empty draw)."""
        for own in (self.grammar.sampling_mask(), *(r.mask() for r in self.rules)):
            if own is not None and (mask & own).any():
                mask &= own
        return mask

    def bonus(self) -> np.ndarray | None:
        """The rules' additive nats, summed; None where none has any."""
        parts = [b for b in (r.bonus() for r in self.rules) if b is not None]
        return np.sum(parts, axis=0, dtype=np.float32) if parts else None

    def choice(self, vocab: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The rules' choices, their nats summed and their groups joined; None: none."""
        nats, group, used = np.zeros(vocab, np.float32), np.zeros(vocab, bool), False
        for got in (r.choice() for r in self.rules):
            if got is not None:
                nats += got[0]
                group |= got[1]
                used = True
        return (nats, group) if used else None

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [*self.grammar.redirects(), *(p for r in self.rules for p in r.redirects())]

    def advance(self, tok: int) -> bool:
        """Take one id: the grammar, then every rule; a control that forbade it is an error."""
        rejected = self._rejections(tok) if self._controls else 0
        ok = self.grammar.advance(tok)
        if ok:
            self.own_errors += rejected
        for rule in self.rules:
            rule.push(tok)
        return ok and not rejected

    def _rejections(self, tok: int) -> int:
        """How many controls (in order, each over the ones before) forbid `tok`."""
        mask, count = np.array(self.grammar.allowed(), dtype=bool), 0
        for rule in self._controls:
            mask = rule.force(mask)
            count += not (0 <= tok < len(mask) and mask[tok])
        return count

    def finished(self) -> bool:
        return self.grammar.finished()

    def completion(self) -> list[int]:
        """What `close` would write, written nowhere (the grammar copied where rules owe)."""
        due = [int(t) for r in self.rules for t in r.due()]
        after = copy.deepcopy(self.grammar) if due else self.grammar
        for tok in due:
            after.advance(tok)
        return due + [int(t) for t in after.completion()]

    def close(self) -> list[int]:
        """Write what the rules owe, then the grammar's completion; the ids written."""
        due = [int(t) for r in self.rules for t in r.due()]
        for tok in due:
            self.advance(tok)
        rest = [int(t) for t in self.grammar.completion()]
        for tok in rest:
            self.advance(tok)
        return due + rest
