"""convSPE's filters over white noise as blocked Toeplitz GEMMs (forward and the filters' gradient).

out[f, m, c, r] = sum_p filt[f, c, p] z[m + p, c, r] for F filters of P taps, C channels (head x
feature) and R realisations: per group of channels, output blocks of CONV_BLOCK positions are sums
of S Toeplitz blocks (F bs x bs) times noise blocks (bs x blocks R), at the matmul rate and
about (P + bs) / P of the direct correlation's FLOPs. It replaced full-length FFTs of every
(channel, realisation) signal (the same codes up to float rounding, see tests/test_positional.py).
Codes made for bf16 autocast run both products with bf16 operands (noise and Toeplitz blocks,
float32 accumulation), the outputs in bf16; the filters and their gradient stay float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


@torch.no_grad()
def correlate(
    zb: Tensor, filt: Tensor, n_out: int, dtype: torch.dtype | None = None
) -> tuple[Tensor, ...]:
    """Noise in block layout (C, bs, nz, R) (`blocks_from_rows`) with nz >= the output blocks +
    S - 1, filters (F, C, P) -> F tensors (n_out, C, R) in `dtype` (the products' operands;
    None: the noise's), without a graph (the filters get their gradient from `filters_token`):
    per group of channels, S products (F bs x bs) @ (bs x blocks R), each operand a view of the
    block layout."""
    dtype = zb.dtype if dtype is None else dtype
    t = _toeplitz(filt, zb.shape[1]).to(dtype)
    c, s, fbs, bs = t.shape
    nf, r, nb = fbs // bs, zb.shape[3], -(-n_out // bs)
    if zb.shape[1] != bs or zb.shape[2] < nb + s - 1:
        raise ValueError(f"noise blocks {tuple(zb.shape)} do not cover {n_out} outputs")
    z2 = zb.reshape(c, bs, -1).to(dtype)  # (C, bs, nz R), (a view of) the block layout
    out = zb.new_empty(nf, nb, bs, c, r, dtype=dtype)  # F x (nb bs, C, R): rows > n_out dropped
    for c0 in range(0, c, CONV_GROUP):
        c1 = min(c, c0 + CONV_GROUP)
        acc = torch.bmm(t[c0:c1, 0], z2[c0:c1, :, : nb * r])  # (g, F bs, nb R)
        for i in range(1, s):
            acc.baddbmm_(t[c0:c1, i], z2[c0:c1, :, i * r : (i + nb) * r])
        acc = acc.view(c1 - c0, nf, bs, nb, r).permute(1, 3, 2, 0, 4)  # (F, nb, bs, g, R)
        out[:, :, :, c0:c1] = acc
    return tuple(o.view(nb * bs, c, r)[:n_out] for o in out)


GroupGrads = Callable[[int, int], Sequence[Tensor | None]]


def filters_token(
    filt: Tensor,
    n_out: int,
    draw: Callable[[], Tensor],
    grads: GroupGrads,
    group: int,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """A scalar (always 0) whose backward gives the filters (F, C, P) their gradient: from the
    outputs' gradients, asked for one group of `group` channels at a time (`grads(c0, c1)` -> F
    tensors (n_out, c1 - c0, R) or None), times the noise, drawn again by `draw()` rather than
    kept from forward, both as `dtype` operands (None: the noise's; the gradient is summed in
    the noise's float32). Codes that read the outputs take the token as an input, so it runs
    after all of them."""
    return _FiltersToken.apply(filt, n_out, draw, grads, group, dtype)


def noise_rows(n_out: int, p: int) -> int:
    """Noise positions `correlate` reads for n_out outputs of P-tap filters (whole blocks)."""
    bs = CONV_BLOCK
    return (-(-n_out // bs) + -(-(bs + p - 1) // bs) - 1) * bs


CONV_BLOCK = 64  # convSPE: output positions per block of the Toeplitz product
CONV_GROUP = 64  # convSPE: channels (head x feature) per group (bounds the temporaries)


def _toeplitz(filt: Tensor, bs: int) -> Tensor:
    """Filters (F, C, P) -> blocks T (C, S, F bs, bs) with T[c, s, f bs + a, t] = filt[f, c, s bs
    + t - a] (zero outside 0..P-1): output block i of filter f is sum_s T[c, s] @ Z[i + s], Z[k]
    the noise rows k bs .. k bs + bs - 1."""
    nf, c, p = filt.shape
    s = -(-(bs + p - 1) // bs)
    a, t = torch.arange(bs, device=filt.device)[:, None], torch.arange(bs, device=filt.device)
    idx = torch.arange(s, device=filt.device)[:, None, None] * bs + t - a  # (S, bs, bs)
    valid = (idx >= 0) & (idx < p)
    blocks = filt[:, :, idx.clamp(0, p - 1)] * valid  # (F, C, S, bs, bs)
    return blocks.permute(1, 2, 0, 3, 4).reshape(c, s, nf * bs, bs)


def _diagonal_sums(grad_t: Tensor, nf: int, p: int) -> Tensor:
    """The filters' gradient from the blocks' (C, S, F bs, bs): grad filt[f, c, q] = sum of
    grad T[c, s, f bs + a, t] over s bs + t - a = q. Each (bs x bs) block's diagonals become
    columns by the skew of a flat view (rows flipped, padded by bs, read with row length
    2 bs - 1): three passes over the blocks instead of an index_put with accumulation."""
    c, s, fbs, bs = grad_t.shape
    m = grad_t.view(c, s, nf, bs, bs).flip(3)  # rows a' = bs - 1 - a
    m = torch.nn.functional.pad(m, (0, bs)).flatten(3)[..., : bs * (2 * bs - 1)]
    diag = m.view(c, s, nf, bs, 2 * bs - 1).sum(3)  # [.., j]: t - a = j - bs + 1
    out = grad_t.new_zeros(nf, c, s * bs + bs)  # tap q at index q + bs - 1
    for i in range(s):
        out[:, :, i * bs : i * bs + 2 * bs - 1] += diag[:, i].permute(1, 0, 2)
    return out[:, :, bs - 1 : bs - 1 + p]


def blocks_from_rows(z: Tensor, bs: int, nz: int | None = None) -> Tensor:
    """z (L, C, R) -> the block layout (C, bs, nz, R): [c, a, k, r] = z[k bs + a, c, r], zero past
    L (nz = ceil(L / bs) by default). In this layout each Toeplitz block multiplies every block of
    positions in one GEMM; convSPE draws its noise in it (positional.ConvSPE._noise), and the
    outputs' gradients are copied into it in backward."""
    length, c, r = z.shape
    nz = -(-length // bs) if nz is None else nz
    out = z.new_empty(c, bs, nz, r)
    rows = min(length, nz * bs)
    full = rows // bs
    view = out.permute(2, 1, 0, 3)  # (nz, bs, C, R)
    view[:full].copy_(z[: full * bs].unflatten(0, (full, bs)))
    view[full:].zero_()
    if rows > full * bs:
        view[full, : rows - full * bs].copy_(z[full * bs : rows])
    return out


class _FiltersToken(torch.autograd.Function):
    """The filters' node (`filters_token`). The blocks' gradient is grad @ Z^T in the same
    blocks, one group of channels at a time, summed along the blocks' diagonals into the
    filters' (z is noise, it gets none). Neither the full outputs' gradients nor the noise live
    through the layers' backward: only one group's gradients at a time, the noise once."""

    @staticmethod
    def forward(ctx, filt: Tensor, n_out: int, draw, grads: GroupGrads, group: int, dtype):
        ctx.args = (filt.shape, n_out, draw, grads, group, dtype)
        return filt.new_zeros(())

    @staticmethod
    @once_differentiable
    def backward(ctx, _grad: Tensor):
        (nf, c, p), n_out, draw, grads, group, dtype = ctx.args
        zb = draw()  # (C, bs, nz, R)
        bs, r = zb.shape[1], zb.shape[3]
        nb, s = -(-n_out // bs), -(-(bs + p - 1) // bs)
        dtype = zb.dtype if dtype is None else dtype
        zt = zb.reshape(c, bs, -1).transpose(1, 2)  # (C, nz R, bs), a view
        if dtype != zb.dtype:  # copied transposed: a bf16 product copies a transposed operand
            zt = zt.to(dtype, memory_format=torch.contiguous_format)
        grad_t = zb.new_zeros(c, s, nf * bs, bs)  # the noise's dtype: the products land in it
        for c0 in range(0, c, group):
            c1 = min(c, c0 + group)
            for f, gf in enumerate(grads(c0, c1)):  # a missing gradient (unused side) adds nothing
                if gf is None:
                    continue
                gg = blocks_from_rows(gf.to(dtype), bs, nb).view(c1 - c0, bs, nb * r)
                for i in range(s):
                    zs = zt[c0:c1, i * r : (i + nb) * r]  # (g, nb R, bs)
                    grad_t[c0:c1, i, f * bs : (f + 1) * bs] = torch.bmm(gg, zs)
        return _diagonal_sums(grad_t, nf, p), None, None, None, None, None
