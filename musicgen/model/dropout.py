"""Dropout with a cheaper random mask on CPU.

On this project's CPU machine dropout was the largest cost of a training step after the
matmuls (12-21 %, docs/profile.md), and nearly all of it is the random draw: `bernoulli_` makes
one random number per element. Here one 64-bit draw (`random_`, 63 uniform bits) feeds three
elements, each keeping 16 of its bits, and an element is kept when those 16 bits, read as a
signed int16, reach a threshold. The drop probability is therefore quantised to 1/65536
(`effective_p`) and the kept values are scaled by 1 / (1 - effective_p), so the output is an
unbiased estimate of the input as with `nn.Dropout`. Other devices use `F.dropout` (CUDA's is
fused already). The draw comes from torch's default generator, so `torch.manual_seed` fixes it.
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
    words = torch.empty((n + 2) // 3, dtype=torch.int64).random_()  # bits 0..62 uniform
    lanes = words.view(torch.int16).view(-1, 4)[:, :3]  # the top lane holds only 15 random bits
    threshold = round(p * LEVELS) - LEVELS // 2  # lanes are uniform on -32768..32767
    return (lanes.reshape(-1)[:n] >= threshold).view(shape)


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
        scale = 1.0 / (1.0 - effective_p(self.p))
        return x * (keep_mask(x.shape, self.p).to(x.dtype) * scale)

    def extra_repr(self) -> str:
        return f"p={self.p}"
