"""convSPE's filters over white noise as blocked Toeplitz GEMMs (forward and the filters' gradient).

out[f, m, c, r] = sum_p filt[f, c, p] z[m + p, c, r] for F filters of P taps, C channels (head x
feature) and R realisations: per group of channels, output blocks of CONV_BLOCK positions are sums
of S Toeplitz blocks (F bs x bs) times noise blocks (bs x blocks R), at the matmul rate and
about (P + bs) / P of the direct correlation's FLOPs. It replaced full-length FFTs of every
(channel, realisation) signal (the same codes up to float rounding, see tests/test_positional.py).
"""

from __future__ import annotations

import torch
from torch import Tensor


def correlate(z: Tensor, filt: Tensor, n_out: int) -> tuple[Tensor, ...]:
    """z (>= n_out + P - 1, C, R), filters (F, C, P) -> F tensors (n_out, C, R)."""
    return _ConvFilter.apply(z, _toeplitz(filt, CONV_BLOCK), n_out)


CONV_BLOCK = 64  # convSPE: output positions per block of the Toeplitz product
CONV_GROUP = 64  # convSPE: channels (head x feature) per group (bounds the temporaries)


def _toeplitz(filt: Tensor, bs: int) -> Tensor:
    """Filters (F, C, P) -> blocks T (C, S, F bs, bs) with T[c, s, f bs + a, t] = filt[f, c, s bs
    + t - a] (zero outside 0..P-1): output block i of filter f is sum_s T[c, s] @ Z[i + s], Z[k]
    the noise rows k bs .. k bs + bs - 1. Differentiable (an indexing of the filters)."""
    nf, c, p = filt.shape
    s = -(-(bs + p - 1) // bs)
    a, t = torch.arange(bs, device=filt.device)[:, None], torch.arange(bs, device=filt.device)
    idx = torch.arange(s, device=filt.device)[:, None, None] * bs + t - a  # (S, bs, bs)
    valid = (idx >= 0) & (idx < p)
    blocks = filt[:, :, idx.clamp(0, p - 1)] * valid  # (F, C, S, bs, bs)
    return blocks.permute(1, 2, 0, 3, 4).reshape(c, s, nf * bs, bs)


def _noise_blocks(z: Tensor, c0: int, c1: int, nz: int, bs: int) -> Tensor:
    """Channels c0:c1 of z (L, C, R) as (g, bs, nz R): [c, a, k R + r] = z[k bs + a, c, r], zero
    past L: the layout in which each Toeplitz block multiplies every noise block in one GEMM
    (also used for the outputs' gradient in backward)."""
    g, r = c1 - c0, z.shape[2]
    out = z.new_empty(g, bs, nz, r)
    rows = min(z.shape[0], nz * bs)
    full = rows // bs
    view = out.permute(2, 1, 0, 3)  # (nz, bs, g, R)
    view[:full].copy_(z[: full * bs, c0:c1].unflatten(0, (full, bs)))
    view[full:].zero_()
    if rows > full * bs:
        view[full, : rows - full * bs].copy_(z[full * bs : rows, c0:c1])
    return out.view(g, bs, nz * r)


class _ConvFilter(torch.autograd.Function):
    """out[f, m, c, r] = sum_p filt[f, c, p] z[m + p, c, r] by blocked Toeplitz GEMMs: per group
    of channels, S products (F bs x bs) @ (bs x blocks R), about (P + bs) / P times the direct
    FLOPs at the matmul rate, instead of full-length FFTs of every (channel, realisation) signal.
    Saves only z; backward rebuilds each group's noise layout (the filters' gradient is
    grad @ Z^T in the same blocks; z is noise, it gets none)."""

    @staticmethod
    def forward(ctx, z: Tensor, t: Tensor, n_out: int) -> tuple[Tensor, ...]:
        c, s, fbs, bs = t.shape
        r, nb = z.shape[2], -(-n_out // bs)
        out = [z.new_empty(n_out, c, r) for _ in range(fbs // bs)]  # F x (n_out, C, R)
        for c0 in range(0, c, CONV_GROUP):
            c1 = min(c, c0 + CONV_GROUP)
            zc = _noise_blocks(z, c0, c1, nb + s - 1, bs)
            acc = torch.bmm(t[c0:c1, 0], zc[..., : nb * r])  # (g, F bs, nb R)
            for i in range(1, s):
                acc.baddbmm_(t[c0:c1, i], zc[..., i * r : (i + nb) * r])
            acc = acc.view(c1 - c0, -1, bs, nb, r).permute(1, 3, 2, 0, 4)  # (F, nb, bs, g, R)
            for o, a in zip(out, acc.reshape(-1, nb * bs, c1 - c0, r), strict=True):
                o[:, c0:c1] = a[:n_out]
        ctx.save_for_backward(z)
        ctx.shape = (c, s, fbs, bs, n_out)
        return tuple(out)  # one output per filter: no zero-filled gradient of the other

    @staticmethod
    def backward(ctx, *grads: Tensor):
        (z,) = ctx.saved_tensors
        c, s, fbs, bs, n_out = ctx.shape
        r, nb = z.shape[2], -(-n_out // bs)
        grad_t = z.new_zeros(c, s, fbs, bs)
        for c0 in range(0, c, CONV_GROUP):
            c1 = min(c, c0 + CONV_GROUP)
            zc = _noise_blocks(z, c0, c1, nb + s - 1, bs)
            for f, gf in enumerate(grads):  # a missing gradient (unused side) adds nothing
                if gf is None:
                    continue
                gg = _noise_blocks(gf, c0, c1, nb, bs)  # (g, bs, nb R), zero past n_out
                for i in range(s):
                    zs = zc[..., i * r : (i + nb) * r].transpose(1, 2)
                    grad_t[c0:c1, i, f * bs : (f + 1) * bs] = torch.bmm(gg, zs)
        return None, grad_t, None
