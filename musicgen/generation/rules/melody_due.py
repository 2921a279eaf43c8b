"""The melody-due rule: under a form, a bar of a melodic phrase does not close before its
melody sounds.
"""

from __future__ import annotations

import numpy as np

from musicgen.generation.rules.base import BarClock, Rule, Start
from musicgen.tokenizers.base import Tokenizer


class MelodyDue(Rule):
    """A bar of a melodic phrase (an upper-case label: "phrases with melody", Dai et al. 2020)
    does not close before its melody sounds, as in the songs (why: docs/generation.md, "The
    melody line"). Until a melody note starts in the bar, or one from before still sounds into
    it, the bar's `Bar` and the end token are not drawn, and at the bar's last position only a
    melody pitch may come (so the bar always can close). Constant work per id, prompt included.
    """

    def __init__(self, tokenizer: Tokenizer, melodic_bars: set[int], ids: list[int]) -> None:
        pitches = tokenizer.melody_pitches()
        if pitches is None:
            raise ValueError("MelodyDue: the vocabulary has no melody voice")
        tt = tokenizer.time_tables()
        self.clock = BarClock(tt)
        self._melody = pitches >= 0
        self._ends = tokenizer.note_end_mask()  # Duration ids
        self._beats = np.where(self._ends, tokenizer.tables.value, 0.0)  # a Duration's beats
        self._accompaniment = (np.asarray(tt.note) == 1) & ~self._melody
        self._closers = self.clock.opens_bar.copy()
        self._closers[tokenizer.eos_id] = True
        self.melodic = frozenset(melodic_bars)
        self.end = -1.0  # in positions from the first bar: where the melody so far stops
        self._onset: int | None = None  # a melody note's onset, until its Duration comes
        for tok in ids:
            self.push(int(tok))

    @classmethod
    def start(cls, at: Start) -> MelodyDue | None:
        """With a form, on a vocabulary with a melody voice: the bars of its melodic phrases."""
        sections = at.controls.sections
        if not sections or at.tokenizer.melody_pitches() is None:
            return None
        melodic = {b for s in sections if s.label.isupper() for b in range(s.bar, s.bar + s.bars)}
        return cls(at.tokenizer, melodic, list(at.ids))

    def push(self, tok: int) -> None:
        if not 0 <= tok < len(self._melody):
            return
        if self.clock.push(tok):
            return
        if self._melody[tok]:
            self._onset = self.clock.now()
            self.end = max(self.end, self._onset + 1.0)
        elif self._accompaniment[tok]:
            self._onset = None
        elif self._ends[tok] and self._onset is not None:
            self.end = max(self.end, self._onset + self._beats[tok] * self.clock.per_beat)
            self._onset = None

    def owed(self) -> bool:
        """The current bar is melodic and no melody note sounds in it yet."""
        bar = self.clock.bar
        return bar in self.melodic and self.end <= bar * self.clock.per_bar

    def mask(self) -> np.ndarray | None:
        """bool[V]: what may come next while the melody is owed (module doc); None otherwise."""
        if not self.owed():
            return None
        if self.clock.at_last_position():  # its melody note now
            return self._melody
        return ~self._closers
