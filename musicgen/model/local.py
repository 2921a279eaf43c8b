"""Exact causal softmax attention over a sliding window: the layer that lets a Performer copy.

FAVOR+ linear attention cannot be sharp, so it does not learn to look back at an earlier bar
and copy it (docs/evaluation.md, "Does a model copy?": on a crop followed by itself, softmax
attention learns the copy in 600 steps, FAVOR+ does not). `model.local_layers` turns chosen
blocks into this layer, as linear attention beside a small sliding window of softmax attention
in Arora et al. 2024 ("Simple linear attention language models balance the recall-throughput
tradeoff", Based). Query n attends to keys n - window + 1 .. n, so the cost stays linear in N:
  parallel (x[B, N]): blocks of `window` queries, each against its own and the previous block's
                      keys under a banded causal mask;
  step (x[B, 1]):     a `WindowCache` of the last `window` keys and values.
With `model.local_rope` (the default) q and k are rotated by their token index (rotary
positions, Su et al. 2021, RoFormer), so a score depends on the distance between query and key:
the "previous token" step a copy needs. Without it the layer sees order only through the
causal mask and the position the other layers put into the residual stream. APE does; SPE does
not, so an SPE hybrid without rotary does not copy (docs/evaluation.md, "Does a model copy?").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musicgen.errors import MusicgenError


@dataclass
class WindowCache:
    """The last `window` keys and values of one layer: (B, H, <= window, D) each, and the
    token index of the next step (rotary positions)."""

    k: Tensor
    v: Tensor
    window: int
    pos: int = 0

    def step(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """q, k, v (B, H, 1, D) -> (B, H, 1, D); appends k, v and keeps the last `window`."""
        if self.k.shape[2] == 0:  # the first step sets the dtype (autocast) and the device
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)[:, :, -self.window :]
            self.v = torch.cat([self.v, v], dim=2)[:, :, -self.window :]
        self.pos += 1
        return F.scaled_dot_product_attention(q, self.k, self.v)


def rotary(x: Tensor, start: int, base: float = 10000.0) -> Tensor:
    """x (B, H, N, D), D even -> x with each pair (x[2i], x[2i+1]) of token n turned by the angle
    (start + n) * base^(-2i / D): q.k then depends only on the two tokens' distance."""
    n, d = x.shape[2], x.shape[3]
    freq = base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)  # (D/2,)
    pos = torch.arange(start, start + n, device=x.device, dtype=torch.float32)
    angle = pos[:, None] * freq[None, :]  # (N, D/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, H, N, D/2) each
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def local_causal_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """q, k, v (B, H, N, D) -> (B, H, N, D): query n attends to keys max(0, n - window + 1)..n."""
    n = q.shape[2]
    if n <= window:  # every earlier key is inside the window
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = []
    for start in range(0, n, window):
        end, lo = min(start + window, n), max(0, start - window)
        i = torch.arange(start, end, device=q.device)[:, None]
        j = torch.arange(lo, end, device=q.device)[None, :]
        mask = (j <= i) & (i - j < window)  # (end - start, end - lo)
        out.append(
            F.scaled_dot_product_attention(
                q[:, :, start:end], k[:, :, lo:end], v[:, :, lo:end], attn_mask=mask
            )
        )
    return torch.cat(out, dim=2)


class LocalAttention(nn.Module):
    """Multi-head causal softmax attention over the last `cfg.local_window` positions."""

    def __init__(self, cfg) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise MusicgenError(
                f"model.n_heads: d_model {cfg.d_model} is not divisible by {cfg.n_heads} heads"
            )
        self.n_heads, self.head_dim = cfg.n_heads, cfg.d_model // cfg.n_heads
        if cfg.local_rope and self.head_dim % 2:
            raise MusicgenError(
                f"model.local_rope: needs an even head size, got d_model {cfg.d_model} / "
                f"{cfg.n_heads} heads = {self.head_dim}"
            )
        self.window, self.rope = cfg.local_window, cfg.local_rope
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)

    def init_cache(self, batch_size: int, device: torch.device | str) -> WindowCache:
        empty = torch.zeros(batch_size, self.n_heads, 0, self.head_dim, device=device)
        return WindowCache(k=empty, v=empty.clone(), window=self.window)

    def forward(self, x: Tensor, codes=None, cache: WindowCache | None = None) -> Tensor:
        """x (B, N, d_model) -> (B, N, d_model); `codes` (SPE) are not used by this layer."""
        b, n, _ = x.shape
        qkv = self.qkv(x)
        q, k, v = qkv.view(b, n, 3, self.n_heads, self.head_dim).transpose(1, 3).unbind(2)
        if self.rope:
            start = 0 if cache is None else cache.pos
            q, k = rotary(q, start), rotary(k, start)
        if cache is None:
            out = local_causal_attention(q, k, v, self.window)  # (B, H, N, D)
        else:
            out = cache.step(q, k, v)  # N = 1
        return self.out(out.transpose(1, 2).reshape(b, n, -1))
