"""The key rule of the sampler (`SamplingOptions.in_key`): a piece keeps the key it has set.

A pop song stays in one key: in POP909's validation songs 86 % of phrases hold most of their
notes in the whole song's major scale (or its relative minor; `measures.song.phrase_key_match`).
A model sampled phrase after phrase drifts, most often to a neighbouring key one sharp or flat
away (70 % of phrases written from scratch keep the song's key; docs/evaluation.md, "Whole
songs"). Once a piece, prompt included, has `MIN_NOTES` pitched notes, the rule finds the major
scale holding most of them, as the measure does, and adds `in_key` nats to the pitches inside
it: notes outside the scale stay possible (passing notes, borrowed chords), only less likely.
Constant work per id.
"""

from __future__ import annotations

import numpy as np

from musicgen.tokenizers.base import Tokenizer

MIN_NOTES = 16  # about a bar of a pop song: fewer notes set no key
MAJOR = np.array([0, 2, 4, 5, 7, 9, 11])


def pitch_classes(tokenizer: Tokenizer) -> np.ndarray | None:
    """int[V]: the pitch class of each pitched note id, -1 elsewhere; None for a vocabulary
    without pitch classes (`pitch_class_mask`)."""
    of = getattr(tokenizer, "pitch_class_mask", None)
    if of is None:
        return None
    out = np.full(tokenizer.vocab_size, -1, np.int64)
    for pc in range(12):
        out[of({pc})] = pc
    return out


class KeyKeep:
    """One sequence's pitch-class counts and the bonus of the scale they set (`bonus`)."""

    def __init__(self, tokenizer: Tokenizer, nats: float, ids: list[int]) -> None:
        pcs = pitch_classes(tokenizer)
        if pcs is None:
            raise ValueError("KeyKeep: the vocabulary has no pitch classes")
        self._pc = pcs
        in_scale = [np.isin(pcs, (MAJOR + root) % 12) & (pcs >= 0) for root in range(12)]
        self._bonus = np.where(np.stack(in_scale), np.float32(nats), np.float32(0))  # [12, V]
        self.counts = np.zeros(12, np.int64)
        for tok in ids:
            self.push(int(tok))

    def push(self, tok: int) -> None:
        if 0 <= tok < len(self._pc) and self._pc[tok] >= 0:
            self.counts[self._pc[tok]] += 1

    def root(self) -> int | None:
        """The root (0 = C) of the major scale holding most notes so far (the lowest on a tie);
        None before `MIN_NOTES` notes."""
        if self.counts.sum() < MIN_NOTES:
            return None
        return int(np.argmax([self.counts[(MAJOR + r) % 12].sum() for r in range(12)]))

    def bonus(self) -> np.ndarray | None:
        """float32[V]: `in_key` nats on the pitches of the scale so far; None before it is set."""
        root = self.root()
        return None if root is None else self._bonus[root]
