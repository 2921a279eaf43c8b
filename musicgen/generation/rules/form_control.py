"""Form control as a rule: a song's phrases forced as section tokens, and the song's end.

A form (`i4A8B8A8o4`, tokenizers.form) lays phrases end to end from the first bar. The rule
writes, right after the `Bar` that opens a phrase, its `Section_<label>` and `SectionBars_<n>`
tokens, forbids phrase tokens anywhere else, and ends the song after the form's last bar (no
further `Bar`: the end token closes it), as the training songs end after their outro. While
sampling, the song does not end before the form's last bar (`mask`), and in the last bar a
`Bar` the model wants is the song's end (`redirects`). The phrase tokens still due when a piece
is cut are written before the grammar's completion (`due`). See docs/generation.md.
"""

from __future__ import annotations

import numpy as np

from musicgen.generation.rules.base import Rule, Start


class FormControl(Rule):
    """One sequence's bar in the form and the phrase tokens it still has to write."""

    control = True

    def __init__(self, at: Start) -> None:
        tokenizer, sections, ids = at.tokenizer, at.controls.sections, at.ids
        self._phrase = tokenizer.section_mask()
        self._bar_ids = frozenset(tokenizer.bar_start_ids())
        self._eos = tokenizer.eos_id
        self._opens = {s.bar: tokenizer.section_ids(s.label, s.bars, density=s.density)
                       for s in sections}  # fmt: skip
        self._last_bar = max(s.bar + s.bars for s in sections) - 1
        self.bar = sum(int(t) in self._bar_ids for t in ids) - 1  # the current bar
        self.pending: list[int] = []
        written = tokenizer.sections(list(ids))
        if ids and int(ids[-1]) in self._bar_ids and self.bar not in {s.bar for s in written}:
            self.pending = list(self._opens.get(self.bar, []))
        self._bar_array = np.array(sorted(self._bar_ids), np.int64)
        self._eos_array = np.array([self._eos], np.int64)
        self._before_end = np.ones(len(self._phrase), bool)
        self._before_end[self._eos] = False

    @classmethod
    def start(cls, at: Start) -> FormControl | None:
        return cls(at) if at.controls.sections else None

    def force(self, mask: np.ndarray) -> np.ndarray:
        """The due phrase token alone; else no phrase token, and no new bar after the last."""
        if self.pending:
            one = np.zeros_like(mask)
            one[self.pending[0]] = True
            return one
        mask &= ~self._phrase
        if self.bar >= self._last_bar:  # the form's last bar: the song ends, no new bar
            for b in self._bar_ids:
                mask[b] = False
            if not mask.any():
                mask[self._eos] = True
        return mask

    def mask(self) -> np.ndarray | None:
        """No end before the form's last bar."""
        return self._before_end if self.bar < self._last_bar else None

    def redirects(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """In the form's last bar, a `Bar` the model wants is the song's end (masked, its
        probability would otherwise pile notes onto the bar's last onset)."""
        return [(self._bar_array, self._eos_array)] if self.bar >= self._last_bar else []

    def push(self, tok: int) -> None:
        if tok in self._bar_ids:
            self.bar += 1
            self.pending = list(self._opens.get(self.bar, []))
        elif self.pending and tok == self.pending[0]:
            self.pending.pop(0)

    def due(self) -> list[int]:
        return list(self.pending)
