"""Phrase guidance (`guidance`): what a phrase's label changes, played louder (why, and what
it was measured to do: docs/generation.md, "Phrase guidance").

The sampler guides the model as classifier-free guidance does (Ho & Salimans, 2022), against a
shadow of the same song in which every phrase carries the label of the phrase before it of its
own kind, with melody or without (upper or lower case): the logits are `l + w * (l - l_shadow)`,
so what the new label changes in the model's next id counts `1 + w` times, and where the label
changes nothing the model is unchanged. The kind is kept because the case says whether the
melody sounds. The shadow is fed the same ids as its piece, prompt included, except the label
ids (a phrase with no earlier one of its kind keeps its own). It runs as a second row of the
batch beside each piece: a step costs up to twice as much. This module is guidance's one place:
its option, the shadows (`LabelLag`) and the mix (`guide`), which the decoding loop calls.
"""

from __future__ import annotations

import torch

from musicgen.errors import MusicgenError
from musicgen.generation.rules.base import Need, Option
from musicgen.limits import Range
from musicgen.tokenizers.base import Tokenizer
from musicgen.tokenizers.form import SECTION_LABELS

PHRASE_LABELS = Need("phrase labels", lambda t: bool(label_ids(t)))

GUIDANCE = Option(
    "guidance",
    0.0,
    Range(0.0, 10.0, note="0 = off"),
    "weight of the phrase-label guidance: what a phrase's label changes, that much louder "
    "(models with phrase labels; each step costs up to twice as much)",
    short="g",
    model=PHRASE_LABELS,
)


def label_ids(tokenizer: Tokenizer) -> dict[int, bool]:
    """The ids of the phrase labels (`Section_A` ...), each with whether its phrases have a
    melody (upper case); empty for a vocabulary without them."""
    out = {}
    for label in SECTION_LABELS:
        try:
            out[int(tokenizer.section_ids(label, 1)[0])] = label.isupper()
        except MusicgenError:  # no section tokens, or not this label
            continue
    return out


class LabelLag:
    """Each row's shadow ids: every phrase label replaced by the last label of its kind."""

    def __init__(self, labels: dict[int, bool], rows: int) -> None:
        self.labels = labels
        self.last: list[dict[bool, int]] = [{} for _ in range(rows)]  # kind -> last label fed

    @classmethod
    def start(cls, tokenizer: Tokenizer, weight: float, rows: int) -> LabelLag | None:
        """The shadows of `rows` pieces; None without guidance (`weight` 0 or no labels)."""
        labels = label_ids(tokenizer) if weight > 0 else {}
        return cls(labels, rows) if labels else None

    def shadow(self, ids: list[int]) -> list[int]:
        """The shadow's next id of each row, from the pieces' next ids."""
        out = []
        for row, tok in enumerate(ids):
            if tok in self.labels:
                kind = self.labels[tok]
                tok, self.last[row][kind] = self.last[row].get(kind, tok), tok
            out.append(tok)
        return out


def guide(logits: torch.Tensor, weight: float) -> torch.Tensor:
    """[2B, V] logits (pieces, then their shadows) -> [B, V]: `l + weight * (l - l_shadow)`."""
    pieces, shadows = logits.float().chunk(2, dim=0)
    return pieces + weight * (pieces - shadows)
