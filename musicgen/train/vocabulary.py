"""A model grown into a vocabulary that extends its own (`train.init_from`, docs/training.md)."""

from __future__ import annotations

import torch
from torch import nn

from musicgen.tokenizers import Tokenizer


def extend_vocabulary(
    model: nn.Module, weights: dict, old_size: int, tok: Tokenizer
) -> dict[str, torch.Tensor]:
    """`weights` of a model whose vocabulary is the first `old_size` ids of `tok`'s: each
    per-token table (rows = tokens) keeps its rows, and a new token's row starts as a copy of
    the row of the token it refines (`tok.seed_ids()`: a melody pitch from its pitch) or as
    this model's initialisation."""
    seeds = tok.seed_ids()
    own = model.state_dict()
    out = dict(weights)
    for name, w in weights.items():
        mine = own.get(name)
        if mine is None or w.ndim == 0 or w.shape[0] != old_size or mine.shape[0] == old_size:
            continue
        grown = mine.detach().clone().to(w.dtype)
        grown[:old_size] = w
        for new, seed in seeds.items():
            if new >= old_size > seed:  # a new id only: an id the model had keeps its rows
                grown[new] = w[seed]
        out[name] = grown
    return out
