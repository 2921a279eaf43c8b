"""The bar-copy rule (`repeat`): a logit bonus for the id that would continue an earlier bar
the current bar has copied so far (why, and why only these lags: docs/generation.md, "Bar
repeats").

The rule leaves the choice of *whether* to repeat to the model and helps it *finish* a repeat
it started: while the ids of the current bar equal the first ids of the bar `lag` bars back
(each lag in `LAGS`), the id that comes next in that bar gets `repeat` nats (after the
temperature). At a bar's first id the bars 4 and 8 back are the candidates; one id the model
picks that no candidate has ends the bonus for the rest of the bar. With the source bar's ids
all copied, its successor is the next bar's first id, so a finished copy ends where its source
ended.

In a song with phrase tokens (a form) the candidate is not a fixed lag: it is the same bar of
the last earlier phrase with the current phrase's label (bar 3 of the second A copies bar 3 of
the first A), and a bar of a phrase whose label has not come before has none. Phrase tokens
never end a copy (two A phrases of different lengths differ in their `SectionBars`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from musicgen.generation.rules.base import Option, Rule, Start
from musicgen.limits import Range
from musicgen.tokenizers.base import Tokenizer

LAGS = (8, 4)  # bars back: the phrase and the half phrase


class BarEcho(Rule):
    """One sequence's copy candidates, updated in constant time per id (`push`)."""

    option = Option(
        "repeat",
        0.0,
        Range(0.0, 100.0, note="nats; 0 = off"),
        "nats for the id that continues an earlier bar being copied (bar repeats)",
        studio=True,
        slider=(0.0, 8.0, 0.5),
        words="Repetition: How strongly a bar repeats one 4 or 8 bars back, as a song's "
        "phrases do; 0: off.",
        short="r",
        card="bar-copy bonus {:g} nats",
    )

    @classmethod
    def start(cls, at: Start) -> BarEcho | None:
        nats = at.value(cls.option)
        return cls(at.tokenizer, at.ids, nats) if nats > 0 else None

    def __init__(self, tokenizer: Tokenizer, ids: list[int], nats: float = 0.0) -> None:
        self.nats = float(nats)
        self._tok = tokenizer
        self._bars = tokenizer.bar_counter()
        self._phrase_ids = tokenizer.section_mask()
        self._phrases: list = []  # the song's phrases so far (tokenizers.form.Section)
        self._ids: list[int] = []
        self._sources: list[int] = []  # where each still-matching earlier bar starts
        for tok in ids:
            self.push(tok)

    def _candidates(self) -> list[int]:
        """Where the earlier bars the current bar may copy start: the same bar of the last
        phrase with this phrase's label, or (no phrases) the bars `LAGS` back."""
        starts = self._bars.starts
        bar = len(starts) - 1
        if not self._phrases:
            return [starts[-1 - lag] for lag in LAGS if lag < len(starts)]
        now = [p for p in self._phrases if p.bar <= bar < p.bar + p.bars]
        if not now:
            return []
        offset = bar - now[-1].bar
        same = [p for p in self._phrases if p.label == now[-1].label and p.bar < now[-1].bar]
        same = [p for p in same if offset < p.bars and p.bar + offset < bar]
        return [starts[same[-1].bar + offset]] if same else []

    def push(self, tok: int) -> None:
        """Append an id; a new bar resets the candidates, a phrase's tokens set them from the
        phrase, any other id keeps those it matches."""
        self._bars.push(tok)
        self._ids.append(int(tok))
        starts = self._bars.starts
        if starts and starts[-1] == len(self._ids) - 1:  # this id opens a bar
            self._sources = [s for s in self._candidates() if self._ids[s] == tok]
            return
        if not starts:
            return
        if 0 <= tok < len(self._phrase_ids) and self._phrase_ids[tok]:
            found = self._tok.sections(self._ids[starts[-1] :])  # complete after its length
            if found:
                self._phrases.append(replace(found[0], bar=len(starts) - 1))
                self._sources = self._candidates()
            return
        n = len(self._ids) - 1 - starts[-1]  # index of this id in its bar
        self._sources = [s for s in self._sources if s + n < starts[-1] and self._ids[s + n] == tok]

    def next_ids(self) -> list[int]:
        """The distinct ids that would continue a candidate copy (empty: no bonus)."""
        starts = self._bars.starts
        if not starts or not self._sources:
            return []
        n = len(self._ids) - starts[-1]  # index of the next id in its bar
        # a source copied to its end continues with a bar's first id: the copy ends there too
        return sorted({self._ids[s + n] for s in self._sources if s + n <= starts[-1]})

    def bonus(self) -> np.ndarray | None:
        """`repeat` nats on the ids that continue a copy; None where none does."""
        copies = self.next_ids()
        if not copies:
            return None
        out = np.zeros(len(self._phrase_ids), np.float32)
        out[copies] = self.nats
        return out
