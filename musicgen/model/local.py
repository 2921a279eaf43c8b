"""Exact causal softmax attention over a sliding window: the layer that lets a Performer copy.

FAVOR+ attention cannot be sharp, so it does not learn to copy an earlier bar (docs/evaluation.md,
"Does a model copy?"); `model.local_layers` turns chosen blocks into this layer, as in Based
(Arora et al. 2024). Query n attends to keys n - window + 1 .. n, so the cost stays linear in N
(blocks of `window` queries in parallel, a `WindowCache` when stepping). With `model.local_rope`
(the default) q and k carry rotary positions (RoFormer, Su et al. 2021): the previous-token step a
copy needs, which an SPE model does not otherwise put into the residual stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musicgen.errors import MusicgenError


@dataclass
class WindowCache:
    """The last `window` keys and values of one layer in a ring buffer: (B, H, window, D) each,
    token t in slot t % window (softmax attention does not care about the keys' order), and the
    token index of the next step (rotary positions). Preallocated: a step writes one slot and
    copies nothing else."""

    k: Tensor
    v: Tensor
    window: int
    pos: int = 0

    def step(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """q, k, v (B, H, 1, D) -> (B, H, 1, D); writes k, v over the oldest slot."""
        if self.k.dtype != k.dtype:  # autocast: the buffer takes the activations' dtype
            self.k, self.v = self.k.to(k.dtype), self.v.to(v.dtype)
        slot = self.pos % self.window
        if torch.is_grad_enabled():  # keep the old buffer intact for autograd
            at = torch.tensor([slot], device=k.device)
            self.k, self.v = self.k.index_copy(2, at, k), self.v.index_copy(2, at, v)
        else:
            self.k[:, :, slot : slot + 1] = k
            self.v[:, :, slot : slot + 1] = v
        self.pos += 1
        n = min(self.pos, self.window)
        return F.scaled_dot_product_attention(q, self.k[:, :, :n], self.v[:, :, :n])


ROPE_BASE = 10000.0


def _angles(start: int, n: int, d: int, device) -> tuple[Tensor, Tensor]:
    """cos, sin (N, D/2) of the angles (start + n) * base^(-2i / D)."""
    freq = ROPE_BASE ** (-torch.arange(0, d, 2, device=device, dtype=torch.float32) / d)
    pos = torch.arange(start, start + n, device=device, dtype=torch.float32)
    angle = pos[:, None] * freq[None, :]  # (N, D/2)
    return angle.cos(), angle.sin()


def rotary(x: Tensor, start: int) -> Tensor:
    """x (B, H, N, D), D even -> x with each pair (x[2i], x[2i+1]) of token n turned by the angle
    (start + n) * base^(-2i / D): q.k then depends only on the two tokens' distance."""
    cos, sin = _angles(start, x.shape[2], x.shape[3], x.device)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (B, H, N, D/2) each
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def rotations(start: int, n: int, d: int, device) -> Tensor:
    """(N, D, D) matrices R_t with x @ R_t = `rotary` of x at token t = start .. start + N - 1:
    one product per step for a local layer's q and k (made for a block of steps at once, shared
    by the layers). R_t is block-diagonal, [[cos, sin], [-sin, cos]] per pair."""
    cos, sin = _angles(start, n, d, device)  # (N, D/2) each
    even = torch.arange(0, d, 2, device=device)
    r = torch.zeros(n, d, d, device=device)
    r[:, even, even] = r[:, even + 1, even + 1] = cos
    r[:, even, even + 1], r[:, even + 1, even] = sin, -sin
    return r


QUERY_BLOCK = 256  # queries per SDPA call past the window (keys: the window before the block)


def local_causal_attention(q: Tensor, k: Tensor, v: Tensor, window: int) -> Tensor:
    """q, k, v (B, H, N, D) -> (B, H, N, D): query n attends to keys max(0, n - window + 1)..n.

    Past the window, blocks of QUERY_BLOCK queries each read the window + block - 1 keys they
    can see, under a band mask: the masked share is (block - 1) / (window + block - 1) of a
    call, against half of a call with blocks as long as the window."""
    n = q.shape[2]
    if n <= window:  # every earlier key is inside the window
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = []
    for start in range(0, n, QUERY_BLOCK):
        end, lo = min(start + QUERY_BLOCK, n), max(0, start - window + 1)
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
        shape = (batch_size, self.n_heads, self.window, self.head_dim)
        k, v = torch.zeros(shape, device=device), torch.zeros(shape, device=device)
        return WindowCache(k=k, v=v, window=self.window)

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
