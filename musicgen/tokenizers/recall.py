"""Recall: a returning phrase's last telling, placed in the model's context (never written).

A song model hears a chorus 24-40 bars after the last one, past its windowed softmax blocks
(docs/evaluation.md, "Memory"). With a vocabulary that has the recall marks (tokenizer option
`recall: true`), the model's context repeats the last phrase with the same label right after a
returning phrase's own phrase tokens:

    Bar Section_A SectionBars_8 | Recall_Start <the last A phrase's ids> Recall_End | Position_0 ...

The block is context only: training masks its targets (the model never learns to write it),
generation feeds it to the model without writing it or showing it to the sampling rules, and
scoring reports the NLL of the song's own ids. `RecallContext` is the one builder the three
share: it follows a song's ids one at a time and says what to place after each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from musicgen.tokenizers.remi_grammar import RemiTables

SECTION, SECTION_BARS = RemiTables.SECTION, RemiTables.SECTION_BARS
SECTION_DENSITY = RemiTables.SECTION_DENSITY
# a recalled phrase's ids beyond this are left out: the windowed softmax blocks (1,024 tokens)
# see a recalled id only while it is this close to its counterpart in the returning phrase
MAX_RECALL_IDS = 1000

Context = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # ids -> (context, is_song)


@dataclass
class _Phrase:
    label: str
    end_bar: int  # the bar index at which the phrase is over
    ids: list[int] = field(default_factory=list)


class RecallContext:
    """Follows one sequence's ids (`push`) and returns the ids to place after each in the
    model's context: a recall block after the phrase tokens of a label heard before."""

    def __init__(self, tokenizer) -> None:
        t = tokenizer.tables
        self.family, self.label, self.value = t.family, t.label, t.value
        self.bar_id = tokenizer.bar_id
        self.start_id = tokenizer.token_id("Recall_Start")
        self.end_id = tokenizer.token_id("Recall_End")
        self.bar = -1  # index of the current bar
        self.heard: dict[str, list[int]] = {}  # label -> the ids of its last phrase
        self.current: _Phrase | None = None
        self.pending: str | None = None  # a Section label waiting for its SectionBars

    def push(self, tok: int) -> list[int]:
        """Take the next id of the sequence; the ids to place after it (usually none)."""
        tok = int(tok)
        fam = self.family[tok]
        if tok == self.bar_id:
            self.bar += 1
            if self.current is not None and self.bar >= self.current.end_bar:
                self._close()
        elif fam == SECTION:
            self._close(drop_bar=True)  # a phrase shorter than it said: its next Bar is ours
            self.pending = self.label[tok]
            return []
        elif fam == SECTION_BARS and self.pending is not None:
            label, self.pending = self.pending, None
            self.current = _Phrase(label, self.bar + int(self.value[tok]))
            before = self.heard.get(label)
            if before:
                return [self.start_id, *before[:MAX_RECALL_IDS], self.end_id]
            return []
        if self.current is not None and fam != SECTION_DENSITY:
            self.current.ids.append(tok)
        return []

    def _close(self, drop_bar: bool = False) -> None:
        p, self.current = self.current, None
        if p is None:
            return
        ids = p.ids[:-1] if drop_bar and p.ids and p.ids[-1] == self.bar_id else p.ids
        if ids:
            self.heard[p.label] = ids

    def build(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(context ids (M,), is_song bool (M,)): `ids` with every recall block in place."""
        out: list[int] = []
        song: list[bool] = []
        for tok in np.asarray(ids, dtype=np.int64).tolist():
            out.append(tok)
            song.append(True)
            block = self.push(tok)
            out += block
            song += [False] * len(block)
        return np.asarray(out, dtype=np.int64), np.asarray(song, dtype=bool)


def has_recall(tokenizer) -> bool:
    return bool(getattr(tokenizer, "options", {}).get("recall"))


def recall_context(tokenizer) -> Context | None:
    """The builder of a whole sequence's context for a tokenizer with recall, else None."""
    if not has_recall(tokenizer):
        return None
    return lambda ids: RecallContext(tokenizer).build(ids)


def strip_recall(tokenizer, ids: np.ndarray) -> np.ndarray:
    """`ids` without their recall blocks (what a sequence writes)."""
    arr = np.asarray(ids, dtype=np.int64)
    if not has_recall(tokenizer) or len(arr) == 0:
        return arr
    opens = arr == tokenizer.token_id("Recall_Start")
    closes = arr == tokenizer.token_id("Recall_End")
    inside = (np.cumsum(opens) - np.cumsum(closes) + closes) > 0
    return arr[~inside]
