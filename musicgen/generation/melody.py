"""The melody's rules of the sampler: its range (`SamplingOptions.melody_range`: a melody voice
keeps to a singer's span) and, under a form, its presence in melodic phrases (`MelodyDue`).

A sung melody spans about an octave and a half: POP909's 850 melodies run a median 18 semitones
from their lowest to their highest note (95 % within 24; docs/evaluation.md, "Whole songs"). A
model sampled at T near 1 draws now and then a melody note one or two octaves off the line, and
one such note makes the whole song's melody span three octaves. The rule keeps the melody's
notes so far, prompt included, and lets a new melody note widen their span only up to
`melody_range` semitones: it is a mask on what is drawn, never on what a prompt holds (a prompt
wider than the range keeps its own span, and the melody stays inside it).
"""

from __future__ import annotations

import numpy as np

from musicgen.tokenizers.base import Tokenizer


class MelodyRange:
    """One sequence's melody span, updated in constant time per id (`push`)."""

    def __init__(self, tokenizer: Tokenizer, span: int, ids: list[int]) -> None:
        pitches = tokenizer.melody_pitches()
        if pitches is None:
            raise ValueError("MelodyRange: the vocabulary has no melody voice")
        self._pitch = pitches  # int[V]: melody pitch of each id, -1 elsewhere
        self._melody = pitches >= 0
        self.span = int(span)
        self.low: int | None = None  # the lowest and highest melody pitch so far
        self.high: int | None = None
        for tok in ids:
            self.push(tok)

    def push(self, tok: int) -> None:
        """Take one id; a melody note widens the span so far."""
        if not 0 <= tok < len(self._pitch) or self._pitch[tok] < 0:
            return
        p = int(self._pitch[tok])
        self.low = p if self.low is None else min(self.low, p)
        self.high = p if self.high is None else max(self.high, p)

    def mask(self) -> np.ndarray | None:
        """bool[V]: the ids that may come next (every id but the melody pitches that would
        widen the span past `span`); None before the first melody note."""
        if self.low is None or self.high is None:
            return None
        lowest = min(self.low, self.high - self.span)
        highest = max(self.high, self.low + self.span)
        outside = self._melody & ((self._pitch < lowest) | (self._pitch > highest))
        return ~outside


class MelodyDue:
    """The form's melody rule (`FormGrammar.sampling_mask`): a bar of a melodic phrase (an
    upper-case label: "phrases with melody", Dai et al. 2020) does not close before its melody
    sounds.

    POP909's melody sounds in 99.6 % of the bars of its melodic phrases; a sampled song left to
    itself now and then drops the melody for a phrase or the whole song (73 % of those bars
    sounded in 29 continued validation songs before this rule; docs/evaluation.md). Until a
    melody note starts in the bar, or one from before still sounds into it, the bar's `Bar` and
    the end token are not drawn, and at the bar's last position only a melody pitch may come
    (so the bar always can close). It reads only ids, in constant time per id (`push`), prompt
    included.
    """

    def __init__(self, tokenizer: Tokenizer, melodic_bars: set[int], ids: list[int]) -> None:
        pitches = tokenizer.melody_pitches()
        if pitches is None:
            raise ValueError("MelodyDue: the vocabulary has no melody voice")
        tt = tokenizer.time_tables()
        self._opens_bar = tt.bar.astype(bool)
        self._position = np.where(self._opens_bar, -1, tt.position)  # Position_p: p
        self._per_bar, self._per_beat = tt.positions_per_bar, tt.positions_per_beat
        self._melody = pitches >= 0
        self._ends = tokenizer.note_end_mask()  # Duration ids
        self._beats = np.where(self._ends, tokenizer.tables.value, 0.0)  # a Duration's beats
        self._accompaniment = (np.asarray(tt.note) == 1) & ~self._melody
        self._closers = self._opens_bar.copy()
        self._closers[tokenizer.eos_id] = True
        self.melodic = frozenset(melodic_bars)
        self.bar, self.pos = -1, 0
        self.end = -1.0  # in positions from the first bar: where the melody so far stops
        self._onset: int | None = None  # a melody note's onset, until its Duration comes
        for tok in ids:
            self.push(int(tok))

    def push(self, tok: int) -> None:
        if not 0 <= tok < len(self._melody):
            return
        if self._opens_bar[tok]:
            self.bar, self.pos = self.bar + 1, 0
        elif self._position[tok] >= 0:
            self.pos = int(self._position[tok])
        elif self._melody[tok]:
            self._onset = self.bar * self._per_bar + self.pos
            self.end = max(self.end, self._onset + 1.0)
        elif self._accompaniment[tok]:
            self._onset = None
        elif self._ends[tok] and self._onset is not None:
            self.end = max(self.end, self._onset + self._beats[tok] * self._per_beat)
            self._onset = None

    def owed(self) -> bool:
        """The current bar is melodic and no melody note sounds in it yet."""
        return self.bar in self.melodic and self.end <= self.bar * self._per_bar

    def mask(self) -> np.ndarray | None:
        """bool[V]: what may come next while the melody is owed (module doc); None otherwise."""
        if not self.owed():
            return None
        if self.pos == self._per_bar - 1:  # the bar's last position: its melody note now
            return self._melody
        return ~self._closers
