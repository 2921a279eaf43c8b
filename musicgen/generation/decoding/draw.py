"""One id per sequence of the batch (`draw`): the model's logits with each sampling row's rules.

A row's effects come from its grammar and its rules, composed by `steer.Steered`;
`filters.filter_logits` applies them in their one order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from musicgen.generation.decoding.filters import filter_logits, sample_from_logits

if TYPE_CHECKING:
    from musicgen.generation.decoding.sample import SamplingOptions
    from musicgen.generation.decoding.sample import _Row as Row


def draw(
    logits: torch.Tensor,
    rows: list[Row],
    sampling: list[bool],
    options: SamplingOptions,
    vocab: int,
    generator: torch.Generator | None,
) -> list[int | None]:
    """One id per sampling row (None for the others), masked by each row's grammar."""
    allowed = None
    if options.grammar:
        ones = np.ones(vocab, dtype=bool)
        allowed = torch.from_numpy(
            np.stack([r.allowed() if s else ones for r, s in zip(rows, sampling, strict=True)])
        )
    bonus, choice = _bonus(rows, sampling, options, vocab), _choice(rows, sampling, options, vocab)
    redirects = _redirects(rows, sampling, options)
    logits = filter_logits(logits, options, allowed, bonus, choice, redirects)
    drawn = sample_from_logits(logits, generator).tolist()
    return [int(t) if s else None for t, s in zip(drawn, sampling, strict=True)]


def _bonus(
    rows: list[Row], sampling: list[bool], options: SamplingOptions, vocab: int
) -> torch.Tensor | None:
    """[B, V] nats added after the temperature: each sampling row's rules' (`Steered.bonus`);
    None where no row has any."""
    out, used = np.zeros((len(rows), vocab), dtype=np.float32), False
    for b, (row, s) in enumerate(zip(rows, sampling, strict=True)):
        extra = row.steer.bonus() if s else None
        if extra is not None:
            out[b] += extra
            used = True
    return torch.from_numpy(out) if used else None


def _choice(
    rows: list[Row], sampling: list[bool], options: SamplingOptions, vocab: int
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """([B, V] nats, [B, V] group) of each sampling row's rules' choices (`Steered.choice`):
    nats that choose among the group's ids (the Pitch ids), the group as likely as before
    (`filters.choose_within`); None where no row has any."""
    nats, group = np.zeros((len(rows), vocab), np.float32), np.zeros((len(rows), vocab), bool)
    used = False
    for b, (row, s) in enumerate(zip(rows, sampling, strict=True)):
        got = row.steer.choice(vocab) if s else None
        if got is not None:
            nats[b], group[b], used = got[0], got[1], True
    return (torch.from_numpy(nats), torch.from_numpy(group)) if used else None


def _redirects(rows: list[Row], sampling: list[bool], options: SamplingOptions) -> list | None:
    """Each sampling row's redirects (`Steered.redirects`) as tensors (with masking on); None
    where no row has any."""
    if not options.grammar:
        return None
    out = []
    for row, s in zip(rows, sampling, strict=True):
        pairs = row.steer.redirects() if s else []
        out.append([(torch.from_numpy(a), torch.from_numpy(b)) for a, b in pairs])
    return out if any(out) else None
