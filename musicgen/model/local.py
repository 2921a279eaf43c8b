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
No positional encoding of its own: order comes from the causal mask and from the position the
other layers (APE, SPE, musical position) put into the residual stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musicgen.errors import MusicgenError


@dataclass
class WindowCache:
    """The last `window` keys and values of one layer: (B, H, <= window, D) each."""

    k: Tensor
    v: Tensor
    window: int

    def step(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """q, k, v (B, H, 1, D) -> (B, H, 1, D); appends k, v and keeps the last `window`."""
        if self.k.shape[2] == 0:  # the first step sets the dtype (autocast) and the device
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=2)[:, :, -self.window :]
            self.v = torch.cat([self.v, v], dim=2)[:, :, -self.window :]
        return F.scaled_dot_product_attention(q, self.k, self.v)


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
        self.window = cfg.local_window
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
        if cache is None:
            out = local_causal_attention(q, k, v, self.window)  # (B, H, N, D)
        else:
            out = cache.step(q, k, v)  # N = 1
        return self.out(out.transpose(1, 2).reshape(b, n, -1))
