"""Causal linear attention: chunked parallel form (training), recurrent form (generation).

out_n = phi(q_n)^T S_n / (phi(q_n)^T z_n + eps) with S_n = sum_{j<=n} phi(k_j) v_j^T and
z_n = sum_{j<=n} phi(k_j).
The parallel form splits the sequence into chunks of C positions: inside a chunk it uses the masked
C x C quadratic form, across chunks it adds the sums (S, z) of all earlier chunks (an exclusive
scan over the N / C chunk summaries, never over positions). Keys carry a causal stabiliser (a
running max, see features.py), so key j counts exp(s_j - s_n) for query n. Memory
O(N (C + M Dv / C)) per head.
Without autocast all of it runs in float32. Under bf16 autocast (`matmul_dtype`) the products
(q k^T per chunk, the chunk summaries k^T v, the fused output product) take bf16 operands, while
the feature maps' exponents and stabiliser, the reweighting masks, the carried sums across chunks,
the final division and the recurrent state stay float32: they carry the range (exponentials,
sums over the whole sequence) that bf16's 8-bit mantissa would lose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from musicgen.errors import MusicgenError
from musicgen.model.features import FEATURE_MAPS


def matmul_dtype(device_type: str) -> torch.dtype:
    """The operand dtype of the attention's and the SPE contraction's products: bfloat16 under
    bf16 autocast (a CPU's bf16 units run them several times faster than float32), float32
    otherwise (also under fp16 autocast: fp16's range is too narrow for the feature maps)."""
    on = torch.is_autocast_enabled(device_type)
    if on and torch.get_autocast_dtype(device_type) == torch.bfloat16:
        return torch.bfloat16
    return torch.float32


def causal_linear_attention(
    phi_q: Tensor,
    phi_k: Tensor,
    v: Tensor,
    chunk: int = 64,
    eps: float = 1e-6,
    shift: Tensor | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """phi_q, phi_k (B, H, N, M), v (B, H, N, Dv) -> (B, H, N, Dv), float32.

    `shift` (B, H, N), non-decreasing along N: key j was stabilised by exp(-s_j) (a running max,
    as in the recurrent form), so query n weighs it by exp(s_j - s_n) <= 1: causal for any spread
    of key exponents. None: one constant shift (or none), no reweighting. `dtype`: the products'
    operands (`matmul_dtype`); the masks, carried sums and the division stay float32.
    """
    b, h, n, m = phi_q.shape
    dv = v.shape[-1]
    c = max(1, min(chunk, n))
    pad = (-n) % c
    # a ones column rides along with v: the denominator comes out of the same matmuls
    v1 = torch.cat([v.to(dtype), v.new_ones(b, h, n, 1, dtype=dtype)], -1)
    phi_q, phi_k = phi_q.to(dtype), phi_k.to(dtype)
    if pad:  # zero keys add nothing; padded queries are cut off below
        phi_q, phi_k, v1 = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (phi_q, phi_k, v1))
        if shift is not None:
            shift = torch.cat([shift, shift[..., -1:].expand(b, h, pad)], -1)
    nc = (n + pad) // c
    q = phi_q.reshape(b, h, nc, c, m)
    k = phi_k.reshape(b, h, nc, c, m)
    vv = v1.reshape(b, h, nc, c, dv + 1)
    a = q @ k.transpose(-1, -2)  # (B, H, nc, C, C)
    if shift is None:
        a = a.tril()
        kv = k.transpose(-1, -2) @ vv  # (B, H, nc, M, Dv + 1): one summary per chunk
        zero = kv.new_zeros(b, h, 1, m, dv + 1, dtype=torch.float32)
        carried = torch.cat([zero, kv[:, :, :-1].cumsum(2, dtype=torch.float32)], 2)
    else:
        s = shift.float().reshape(b, h, nc, c)
        e = s[..., -1]  # (B, H, nc): the shift at each chunk's end
        e_prev = torch.cat([s[:, :, :1, 0], e[:, :, :-1]], 2)  # (B, H, nc), <= every s in chunk
        mask = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
        a = a.mul_((s[..., None, :] - s[..., :, None]).masked_fill(~mask, -math.inf).exp_())
        kv = (k * _weights(s - e[..., None], dtype)).transpose(-1, -2) @ vv
        carried = _carried_sums(kv.float(), e)  # float32 sums (one cast, not one per chunk)
        q = q * _weights(e_prev[..., None] - s, dtype)  # carried sums are in exp(-e_prev) units
    flat = b * h * nc  # out = a @ vv + q @ carried (B, H, nc, C, Dv + 1), one fused product
    out = torch.baddbmm(
        q.reshape(flat, c, m) @ carried.to(dtype).reshape(flat, m, dv + 1),
        a.reshape(flat, c, c),
        vv.reshape(flat, c, dv + 1),
    )
    num, den = out.view(b, h, nc, c, dv + 1).split([dv, 1], -1)  # backward: one cat
    out = num / (den.float() + eps)  # float32
    return out.reshape(b, h, nc * c, dv)[:, :, :n]


def _weights(exponent: Tensor, dtype: torch.dtype) -> Tensor:
    """exp(exponent) (B, H, nc, C) -> (B, H, nc, C, 1) in `dtype`: the exponent and its exp in
    float32 (a difference of shifts, any size), rounded only as the products' operand."""
    return exponent.exp()[..., None].to(dtype)


def _carried_sums(kv: Tensor, e: Tensor) -> Tensor:
    """Exclusive scan over chunks: out[c] = sum_{c' < c} kv[c'] exp(e[c'] - e[c - 1]).

    kv (B, H, nc, M, Dv) in exp(-e) units of its own chunk, e (B, H, nc) non-decreasing. Sequential
    over the N / C chunk summaries (every factor <= 1, nothing can overflow or depend on later
    chunks), the same rescaling the recurrent form does per position.
    """
    decay = (e[:, :, :-1] - e[:, :, 1:]).exp()[..., None, None].unbind(2)  # nc - 1 x (B, H, 1, 1)
    chunks = kv.unbind(2)  # views; backward stacks their gradients once (no per-chunk zero fill)
    outs = [torch.zeros_like(chunks[0])]
    for i in range(len(chunks) - 1):
        outs.append(chunks[i] if i == 0 else outs[-1] * decay[i - 1] + chunks[i])
    return torch.stack(outs, 2)


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
    """Recurrent state of one layer: running sums and the key stabiliser; `step` advances it."""

    s: Tensor  # (B, H, M, Dv)
    z: Tensor  # (B, H, M)
    shift: Tensor  # (B, H)

    def step(self, phi_q: Tensor, k: Tensor, v: Tensor, features: nn.Module) -> Tensor:
        """One position: phi_q (B, H, M), k (B, H, 1, in) before the feature map, v (B, H, Dv)
        -> (B, H, Dv). Maps k with the running stabiliser, rescales the old sums to the new one
        (a factor <= 1) and adds the key, all in place."""
        phi_k, shift = features.key(k, self.shift)
        return self.advance(phi_q, phi_k[:, :, 0], v.float(), shift, features.eps)

    def advance(self, phi_q: Tensor, phi_k: Tensor, v: Tensor, shift: Tensor, eps: float) -> Tensor:
        """phi_q, phi_k (B, H, M) (phi_k stabilised by the new `shift` (B, H)), v (B, H, Dv)
        -> (B, H, Dv), float32."""
        if torch.is_grad_enabled():  # keep the old sums intact for autograd
            scale = torch.exp(self.shift - shift)  # (B, H)
            self.s = self.s * scale[..., None, None] + phi_k.unsqueeze(-1) * v.unsqueeze(-2)
            self.z = self.z * scale[..., None] + phi_k
        else:  # generation: in place, no new state tensors per step
            if not torch.equal(shift, self.shift):  # the stabiliser rose: rescale (a factor 1
                scale = torch.exp(self.shift - shift)  # would leave the sums as they are)
                self.s.mul_(scale[..., None, None])
                self.z.mul_(scale[..., None])
            self.s.addcmul_(phi_k.unsqueeze(-1), v.unsqueeze(-2))  # + phi_k v^T, (B, H, M, Dv)
            self.z.add_(phi_k)
        self.shift = shift
        num = (phi_q.unsqueeze(-2) @ self.s).squeeze(-2)  # (B, H, Dv)
        den = (phi_q * self.z).sum(-1, keepdim=True)
        return num.div_(den.add_(eps))


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

    def project(
        self, qkv: Tensor, codes=None, dtype: torch.dtype | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """qkv = self.qkv(x) (B, N, 3 d_model) -> q, k (B, H, N, D, or R with SPE codes), v
        (B, H, N, D): what the feature map sees (also used by attention figures), in `dtype`, the
        products' operand dtype (`matmul_dtype`; None: float32, and the codes' own)."""
        b, n, _ = qkv.shape
        dt = torch.float32 if dtype is None else dtype
        q, k, v = qkv.to(dt).view(b, n, 3, self.n_heads, self.head_dim).unbind(2)
        if codes is not None:  # (B, N, H, D) -> (B, N, H, R)
            q, k = (codes.project(x, side, self.gate, dtype) for x, side in ((q, "q"), (k, "k")))
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def forward(self, x: Tensor, codes=None, cache: AttentionCache | None = None) -> Tensor:
        """x (B, N, d_model) -> (B, N, d_model). With `cache`, N must be 1 (one generation step).
        Under bf16 autocast the parallel form's products take bf16 operands (`matmul_dtype`); the
        generation step and the fast_transformers reference stay float32 throughout."""
        b, n, _ = x.shape
        qkv = self.qkv(x)
        parallel = cache is None and self.backend == "torch"
        dtype = matmul_dtype(x.device.type) if parallel else torch.float32
        with torch.autocast(device_type=x.device.type, enabled=False):
            q, k, v = self.project(qkv, codes, dtype)  # (B, H, N, .)
            phi_q = self.features.query(q, dtype)
            eps = self.features.eps
            if cache is None and self.backend == "fast_transformers":
                phi_k, _ = self.features.key(k)  # one shift per sequence: the reference kernel
                out = fast_transformers_attention(phi_q, phi_k, v, eps)
            elif cache is None:
                phi_k, shift = self.features.key_causal(k, dtype)
                out = causal_linear_attention(phi_q, phi_k, v, self.chunk, eps, shift, dtype)
            else:
                out = cache.step(phi_q[:, :, 0], k, v[:, :, 0], self.features).unsqueeze(2)
            out = out.transpose(1, 2).reshape(b, n, -1)  # (B, N, d_model)
        return self.out(out.to(qkv.dtype))
