"""The melody range rule (`melody_range`): a melody voice keeps to a singer's span (why:
docs/generation.md, "The melody line").

The rule keeps the melody's notes so far, prompt included, and lets a new melody note widen
their span only up to `melody_range` semitones: it is a mask on what is drawn, never on what a
prompt holds (a prompt wider than the range keeps its own span, and the melody stays inside it).
"""

from __future__ import annotations

import numpy as np

from musicgen.generation.rules.base import MELODY_VOICE, Option, Rule, Start
from musicgen.limits import Range
from musicgen.tokenizers.base import Tokenizer


class MelodyRange(Rule):
    """One sequence's melody span, updated in constant time per id (`push`)."""

    option = Option(
        "melody_range",
        0,
        Range(0, 127, integer=True, note="semitones; 0 = off"),
        "the widest span a melody may reach, lowest to highest note, prompt included "
        "(models with a melody voice)",
        kind=int,
        short="m",
        model=MELODY_VOICE,
    )

    @classmethod
    def start(cls, at: Start) -> MelodyRange | None:
        span = at.value(cls.option)
        if span <= 0 or at.tokenizer.melody_pitches() is None:
            return None
        return cls(at.tokenizer, span, at.ids)

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
