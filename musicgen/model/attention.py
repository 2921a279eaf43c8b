"""Causal linear attention: chunked parallel form (training), recurrent form (generation).

out_n = phi(q_n)^T S_n / (phi(q_n)^T z_n + eps) with S_n = sum_{j<=n} phi(k_j) v_j^T and
z_n = sum_{j<=n} phi(k_j).
The parallel form splits the sequence into chunks of C positions: inside a chunk it uses the masked
C x C quadratic form, across chunks it adds the sums (S, z) of all earlier chunks (an exclusive
cumsum over the N / C chunk summaries, never over positions). Memory O(N (C + M Dv / C)) per head.
All of it runs in float32, also under autocast.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from musicgen.errors import MusicgenError
from musicgen.model.features import FEATURE_MAPS


def causal_linear_attention(
    phi_q: Tensor, phi_k: Tensor, v: Tensor, chunk: int = 64, eps: float = 1e-6
) -> Tensor:
    """phi_q, phi_k (B, H, N, M), v (B, H, N, Dv) -> (B, H, N, Dv), float32."""
    b, h, n, m = phi_q.shape
    dv = v.shape[-1]
    c = max(1, min(chunk, n))
    pad = (-n) % c
    if pad:  # zero keys add nothing; padded queries are cut off below
        phi_q, phi_k, v = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (phi_q, phi_k, v))
    nc = (n + pad) // c
    q = phi_q.float().reshape(b, h, nc, c, m)
    k = phi_k.float().reshape(b, h, nc, c, m)
    vv = v.float().reshape(b, h, nc, c, dv)
    kv = k.transpose(-1, -2) @ vv  # (B, H, nc, M, Dv): one summary per chunk
    ks = k.sum(3)  # (B, H, nc, M)
    s_prev = torch.cat([kv.new_zeros(b, h, 1, m, dv), kv[:, :, :-1].cumsum(2)], 2)
    z_prev = torch.cat([ks.new_zeros(b, h, 1, m), ks[:, :, :-1].cumsum(2)], 2)
    mask = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    a = (q @ k.transpose(-1, -2)).masked_fill(~mask, 0.0)  # (B, H, nc, C, C)
    num = a @ vv + q @ s_prev  # (B, H, nc, C, Dv)
    den = a.sum(-1) + (q @ z_prev.unsqueeze(-1)).squeeze(-1)  # (B, H, nc, C)
    out = num / (den.unsqueeze(-1) + eps)
    return out.reshape(b, h, nc * c, dv)[:, :, :n]


def naive_linear_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor, eps: float = 1e-6) -> Tensor:
    """O(N^2) masked reference (tests only), in the inputs' dtype."""
    n = phi_q.shape[-2]
    a = phi_q @ phi_k.transpose(-1, -2)
    a = a.masked_fill(~torch.ones(n, n, dtype=torch.bool, device=a.device).tril(), 0.0)
    return (a @ v.to(a.dtype)) / (a.sum(-1, keepdim=True) + eps)


def fast_transformers_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor, eps: float) -> Tensor:
    """pytorch-fast-transformers' causal product as the numerator (float32 only)."""
    try:
        from fast_transformers.causal_product import causal_dot_product
    except ImportError:
        raise MusicgenError(
            "model.backend: 'fast_transformers' is not installed (run `make install-fast`)"
        ) from None
    q, k, vv = (t.float().contiguous() for t in (phi_q, phi_k, v))
    num = causal_dot_product(q, k, vv)
    den = (q * k.cumsum(2)).sum(-1, keepdim=True)
    return num / (den + eps)


def fast_transformers_available() -> bool:
    try:
        from fast_transformers.causal_product import causal_dot_product  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class AttentionCache:
    """Recurrent state of one layer: running sums and the key stabiliser."""

    s: Tensor  # (B, H, M, Dv)
    z: Tensor  # (B, H, M)
    shift: Tensor  # (B, H)


def linear_attention_step(
    phi_q: Tensor, phi_k: Tensor, v: Tensor, cache: AttentionCache, old_shift: Tensor, eps: float
) -> Tensor:
    """One position: phi_q, phi_k (B, H, M), v (B, H, Dv); updates `cache` in place."""
    scale = torch.exp(old_shift - cache.shift)  # (B, H): <= 1, rescales old sums to new shift
    cache.s = cache.s * scale[..., None, None] + phi_k.unsqueeze(-1) * v.float().unsqueeze(-2)
    cache.z = cache.z * scale[..., None] + phi_k
    num = (phi_q.unsqueeze(-2) @ cache.s).squeeze(-2)  # (B, H, Dv)
    den = (phi_q * cache.z).sum(-1, keepdim=True)
    return num / (den + eps)


class CausalSelfAttention(nn.Module):
    """Multi-head causal linear attention, optionally with SPE applied to q, k before phi.

    With SPE the feature map sees R-dim inputs (q^, k^); it is still pre-scaled by head_dim^-1/4 so
    phi(q^).phi(k^) estimates exp(sum_d q_d k_d P_d(m - n) / sqrt(head_dim)).
    """

    def __init__(self, cfg, spe: bool) -> None:
        super().__init__()
        if cfg.d_model % cfg.n_heads:
            raise MusicgenError(
                f"model.n_heads: d_model {cfg.d_model} is not divisible by {cfg.n_heads} heads"
            )
        if cfg.feature_map not in FEATURE_MAPS:
            raise MusicgenError(
                f"model.feature_map: unknown '{cfg.feature_map}'; valid: {', '.join(FEATURE_MAPS)}"
            )
        if cfg.backend not in ("torch", "fast_transformers"):
            raise MusicgenError(
                f"model.backend: unknown '{cfg.backend}'; valid: torch, fast_transformers"
            )
        if cfg.backend == "fast_transformers" and not fast_transformers_available():
            raise MusicgenError(
                "model.backend: 'fast_transformers' is not installed (run `make install-fast`)"
            )
        self.n_heads, self.head_dim = cfg.n_heads, cfg.d_model // cfg.n_heads
        self.chunk, self.backend = cfg.chunk_size, cfg.backend
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        in_dim = cfg.num_realizations if spe else self.head_dim
        self.features = FEATURE_MAPS[cfg.feature_map](in_dim, cfg.n_features, self.head_dim)
        # SPE gate delta = sigmoid(gate) per head and feature (only used with SPE + cfg.gated)
        self.gate = None
        if spe and cfg.gated:
            self.gate = nn.Parameter(torch.zeros(cfg.n_heads, self.head_dim))

    def init_cache(self, batch_size: int, device: torch.device | str) -> AttentionCache:
        m = self.features.out_dim
        h, d = self.n_heads, self.head_dim
        return AttentionCache(
            s=torch.zeros(batch_size, h, m, d, device=device),
            z=torch.zeros(batch_size, h, m, device=device),
            shift=torch.full((batch_size, h), -1e30, device=device),
        )

    def forward(self, x: Tensor, codes=None, cache: AttentionCache | None = None) -> Tensor:
        """x (B, N, d_model) -> (B, N, d_model). With `cache`, N must be 1 (one generation step)."""
        b, n, _ = x.shape
        qkv = self.qkv(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            q, k, v = qkv.float().view(b, n, 3, self.n_heads, self.head_dim).unbind(2)
            if codes is not None:  # (B, N, H, D) -> (B, N, H, R)
                q, k = codes.project(q, "q", self.gate), codes.project(k, "k", self.gate)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, N, .)
            phi_q = self.features.query(q)
            eps = self.features.eps
            if cache is None:
                phi_k, _ = self.features.key(k)
                if self.backend == "fast_transformers":
                    out = fast_transformers_attention(phi_q, phi_k, v, eps)
                else:
                    out = causal_linear_attention(phi_q, phi_k, v, self.chunk, eps)
            else:
                old = cache.shift
                phi_k, cache.shift = self.features.key(k, old)
                out = linear_attention_step(
                    phi_q[:, :, 0], phi_k[:, :, 0], v[:, :, 0], cache, old, eps
                ).unsqueeze(2)
            out = out.transpose(1, 2).reshape(b, n, -1)  # (B, N, d_model)
        return self.out(out.to(qkv.dtype))
