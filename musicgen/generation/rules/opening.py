"""The opening rule: a piece written from scratch sounds in its first bar (why:
docs/generation.md, "How sampling works").

Until the piece's first note, the ids that open the next bar and the end token are not drawn;
at the bar's last position only a note may come, so the bar can always close. It applies to
vocabularies that open bars with a token (REMI), with masking on, and reads only ids, in
constant time per id (`push`); a prompt with a note leaves it off.
"""

from __future__ import annotations

import numpy as np

from musicgen.generation.rules.base import BarClock, Rule, Start
from musicgen.tokenizers.base import TimeTables, Tokenizer


class MusicFirst(Rule):
    """One sequence's state: whether a note has come yet, and where the first bar stands."""

    def __init__(self, tokenizer: Tokenizer, ids: list[int], tt: TimeTables | None = None) -> None:
        tt = tokenizer.time_tables() if tt is None else tt
        self.clock = BarClock(tt)
        self._starts_note = np.asarray(tt.note, dtype=bool)
        self._closers = self.clock.opens_bar.copy()
        self._closers[tokenizer.eos_id] = True
        self.sounded = False
        for tok in ids:
            self.push(int(tok))

    @staticmethod
    def applies(tokenizer: Tokenizer, tt: TimeTables | None = None) -> bool:
        """Whether the vocabulary opens bars with a token and marks its notes' first ids."""
        tt = tokenizer.time_tables() if tt is None else tt
        return tt.note is not None and bool(np.asarray(tt.bar).any())

    @classmethod
    def start(cls, at: Start) -> MusicFirst | None:
        """The rule for a sequence, or None where it has nothing to do: masking off, a
        vocabulary without bar tokens, or ids that already hold a note."""
        if not at.options.grammar:
            return None
        tt = at.tokenizer.time_tables()
        if not cls.applies(at.tokenizer, tt):
            return None
        rule = cls(at.tokenizer, at.ids, tt)
        return None if rule.sounded else rule

    def push(self, tok: int) -> None:
        if self.sounded or not 0 <= tok < len(self.clock.opens_bar):
            return
        if not self.clock.push(tok) and self._starts_note[tok]:
            self.sounded = True

    def mask(self) -> np.ndarray | None:
        """bool[V]: what may come next while the first bar is still silent; None once a note
        has come (or before the first bar opens)."""
        if self.sounded or self.clock.bar < 0:
            return None
        if self.clock.at_last_position():  # its note now
            return self._starts_note.copy()
        return ~self._closers
