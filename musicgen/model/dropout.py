"""Dropout with a cheaper random mask on CPU.

On this project's CPU machine dropout was the largest cost of a training step after the matmuls
(docs/profile.md has the shares), and nearly all of it is the random draw: `bernoulli_` makes
one random number per element. Here one 64-bit draw (`random_` over the whole int64 range, 64
uniform bits) feeds four elements, each keeping 16 of its bits, and an element is kept when
those 16 bits, read as a signed int16, reach a threshold. The drop probability is therefore
quantised to 1/65536 (`effective_p`) and the kept values are scaled by 1 / (1 - effective_p), so
the output is an unbiased estimate of the input as with `nn.Dropout`. The scaled mask is made in
the input's dtype in one pass (`torch.where`), not by a cast and a multiply. Other devices use
`F.dropout` (CUDA's is fused already). The draw comes from torch's default generator, so
`torch.manual_seed` fixes it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LEVELS = 1 << 16  # 16 random bits per element


def effective_p(p: float) -> float:
    """The drop probability the 16-bit mask realises for a requested `p`."""
    return round(p * LEVELS) / LEVELS


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> Tensor:
    """A bool tensor of `shape`, True with probability 1 - effective_p(p) per element."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), None)  # 64 bits
    lanes = words.view(torch.int16)[:n]  # uniform on -32768..32767, a view
    return (lanes >= round(p * LEVELS) - LEVELS // 2).view(shape)


class Dropout(nn.Module):
    """`nn.Dropout(p)` with `keep_mask` on CPU (same interface, no parameters)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        scale = torch.tensor(1.0 / (1.0 - effective_p(self.p)), dtype=x.dtype)
        return x * torch.where(keep_mask(x.shape, self.p), scale, scale.new_zeros(()))

    def extra_repr(self) -> str:
        return f"p={self.p}"
