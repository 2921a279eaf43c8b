"""The key rule (`in_key`): a piece keeps the key it has set (why: docs/generation.md, "The
key rule").

Once a piece, prompt included, has `MIN_NOTES` pitched notes, the rule finds the major scale
holding most of them, as the measure does (`measures.form.scale_root`), and gives the pitches
inside it `in_key` nats among the pitches, as the chord control gives its chord tones
(`filters.choose_within`): which pitch a note takes, not how many notes come. Notes outside the
scale stay possible (passing notes, borrowed chords), only less likely. Constant work per id.

A key a prompt has set (a prompt of `MIN_NOTES` pitched notes or more) is the user's, and is
held `PROMPT_HOLD` times harder (measured: docs/generation.md, "The key rule").
"""

from __future__ import annotations

import numpy as np

from musicgen.generation.rules.base import Need, Option, Rule, Start
from musicgen.limits import Range
from musicgen.measures.form import MAJOR, scale_sizes
from musicgen.tokenizers.base import Tokenizer

MIN_NOTES = 16  # about a bar of a pop song: fewer notes set no key
PROMPT_HOLD = 1.5  # times `in_key` for a key a prompt set (see above)


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


PITCH_CLASSES = Need("pitched notes", lambda t: pitch_classes(t) is not None)


class KeyKeep(Rule):
    """One sequence's pitch-class counts and the choice of the scale they set (`choice`).
    `ids`: the prompt; `nats`: the bonus, `PROMPT_HOLD` times that where the prompt sets a key."""

    option = Option(
        "in_key",
        0.0,
        Range(0.0, 100.0, note="nats; 0 = off"),
        f"nats for the pitches of the major scale (or relative minor) the piece has set, "
        f"prompt included, once it has {MIN_NOTES} notes (a piece that keeps its key); "
        f"{PROMPT_HOLD:g}x that for a key a prompt of {MIN_NOTES} notes set",
        short="key",
        model=PITCH_CLASSES,
    )

    @classmethod
    def start(cls, at: Start) -> KeyKeep | None:
        """Where the vocabulary's pitches have classes (`pitch_classes`) and `in_key` > 0."""
        nats = at.value(cls.option)
        if nats <= 0 or pitch_classes(at.tokenizer) is None:
            return None
        return cls(at.tokenizer, nats, at.ids)

    def __init__(self, tokenizer: Tokenizer, nats: float, ids: list[int]) -> None:
        pcs = pitch_classes(tokenizer)
        if pcs is None:
            raise ValueError("KeyKeep: the vocabulary has no pitch classes")
        self._pc, self._pitched = pcs, pcs >= 0
        self.counts = np.zeros(12, np.int64)
        for tok in ids:
            self.push(int(tok))
        self.nats = nats * (PROMPT_HOLD if self.root() is not None else 1.0)  # the prompt's key
        in_scale = [np.isin(pcs, (MAJOR + root) % 12) & (pcs >= 0) for root in range(12)]
        self._bonus = np.where(np.stack(in_scale), np.float32(self.nats), np.float32(0))  # [12, V]

    def push(self, tok: int) -> None:
        if 0 <= tok < len(self._pc) and self._pc[tok] >= 0:
            self.counts[self._pc[tok]] += 1

    def root(self) -> int | None:
        """The root (0 = C) of the major scale holding most notes so far (the lowest on a tie);
        None before `MIN_NOTES` notes."""
        if self.counts.sum() < MIN_NOTES:
            return None
        return int(np.argmax(scale_sizes(self.counts)))  # as `measures.form.scale_root`

    def choice(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(nats, group): `self.nats` on the pitches of the scale so far, chosen among all
        pitches (`filters.choose_within`: which pitch a note takes, not whether a note comes);
        None before the scale is set."""
        root = self.root()
        return None if root is None else (self._bonus[root], self._pitched)
