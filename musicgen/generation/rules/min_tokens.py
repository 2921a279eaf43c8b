"""The minimum-length rule (`min_tokens`): no end token before a sequence has sampled that many
ids, so that a long generation runs several context windows instead of stopping early.

Under a form the form's end takes precedence: the song ends where the form ends
(`form_control`), and `min_tokens` does nothing (masking the end token there would pile notes
onto the last bar's onsets)."""

from __future__ import annotations

import numpy as np

from musicgen.generation.rules.base import Option, Rule, Start
from musicgen.limits import MAX_NEW_TOKENS, Range


class MinTokens(Rule):
    """The ids still to sample before the end token may come."""

    option = Option(
        "min_tokens",
        0,
        Range(0, MAX_NEW_TOKENS, integer=True, note="0 = off"),
        "mask the end token until this many ids are sampled (long generations; none under a "
        "form, which ends the song)",
        kind=int,
    )

    def __init__(self, eos_id: int, count: int) -> None:
        self.eos_id, self.left = eos_id, count

    @classmethod
    def start(cls, at: Start) -> MinTokens | None:
        count = at.value(cls.option)
        if at.controls.sections:  # the form's end is the song's end
            return None
        return cls(at.tokenizer.eos_id, count) if count > 0 and at.tokenizer.eos_id >= 0 else None

    def push(self, tok: int) -> None:
        self.left -= 1

    def force(self, mask: np.ndarray) -> np.ndarray:
        if self.left > 0:
            mask[self.eos_id] = False
        return mask
