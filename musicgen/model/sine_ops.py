"""sineSPE's autograd Functions: the per-layer code contraction, the node that forms Omega's
and lambda Z's gradients once for every layer, and the angles' [cos, sin].

They keep for backward only what autograd keeps anyway (their inputs, or an output another
node saves) and the layers' (x s, g) pairs, and rebuild the rest: q times the gate's scale, the
angles. docs/model.md, "Positional encodings", says when which path runs.

The contraction's products take operands of a compute dtype, bf16 under bf16 autocast
(`attention.matmul_dtype`): Omega and lambda Z are copied once per side into it (`SineSide.
operands`, in the (2K, D) order that runs the elementwise work along D), (x s) Omega is written
in it, and x's gradient comes out of it; Omega, lambda Z, the angles and the gradients of Omega,
lambda Z and the gate stay float32.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from musicgen.model.shared_table import head_gradient, scaled, table_rows, wide_sum

SINE_BLOCK = 512  # positions per block of the per-layer sine contraction (bounds its temporary)
COLLECT_BLOCK = 256  # positions per block of Omega's gradient (bounds the table-sized product)
PAIR_PATH_MAX = 2  # at most this many (layer, batch row) pairs: gradients pair by pair (below)


class SineSide:
    """One side's Omega ((B,) N, H, D, 2K) and lambda Z (H, D, 2K, R), contracted by every layer
    with its q or k (`contract`). Their gradients are formed once, after every layer's backward
    (`SineCollect`), from the pairs (x s, g) the layers leave in `pending`: with P = sum_l
    (x_l s)^T g_l, the (N, H, D, R) gradient of the codes table, grad Omega = P lambda Z^T over
    R and grad lambda Z = sum over positions of Omega (x) P. Each layer's backward then forms
    only x's gradient: no (B, N, H, D, 2K) gradient of Omega per layer, nor its sum over the
    layers, nor the product rebuilt for lambda Z's gradient.

    The autograd nodes hold `pending` and their saved tensors, never this object (see
    `shared_table.SharedTable`: a node holding the object that holds its token is a cycle)."""

    def __init__(self, omega: Tensor, lz: Tensor) -> None:
        self.omega, self.lz = omega.detach(), lz.detach()
        self.pending: list[tuple[Tensor, Tensor]] = []
        self.token = None
        if omega.requires_grad or lz.requires_grad:
            self.token = SineCollect.apply(omega, lz, self.pending)
        self._ops: dict[torch.dtype, tuple[Tensor, Tensor]] = {}

    def operands(self, dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
        """Omega (H, B or 1, N, ., .) and lambda Z (H, D 2K, R) as the contraction's operands
        in `dtype` (None: their own), made once for every layer. In float32 (or wider) the pair
        (d, j) is ordered (D, 2K): Omega's heads view, no copy. In a narrower dtype (bf16) it is
        ordered (2K, D), in copies (`_jd`): the modulation and the sum over 2K then run along
        D's 64 contiguous elements instead of 2K = 10, 2.5x faster in bf16 (an order that
        would change float32's sums)."""
        dtype = self.lz.dtype if dtype is None else dtype
        if dtype not in self._ops:
            om, (h, d, j, r) = _omega_heads(self.omega), self.lz.shape
            if _jd(dtype):
                om = om.transpose(-1, -2).to(dtype, memory_format=torch.contiguous_format)
                w = self.lz.transpose(1, 2).reshape(h, j * d, r).to(dtype)
            else:
                w = self.lz.reshape(h, d * j, r).to(dtype)
            self._ops[dtype] = (om, w)
        return self._ops[dtype]

    def contract(
        self,
        x: Tensor,
        scale: Tensor | None,
        extra: Tensor | None,
        dtype: torch.dtype | None = None,
    ) -> Tensor:
        """x (B, N, H, D) -> (B, N, H, R) in `dtype`, the products' operand dtype (None: the
        codes' own; see `SineContract`)."""
        om, w = self.operands(dtype)
        if self.token is None or not torch.is_grad_enabled():
            return _contract(x, scale, om, w, extra)
        args = (self.token, self.omega, om, w, self.pending)
        return SineContract.apply(x, scale, extra, *args)  # (B, N, H, R)


def _contract(x: Tensor, scale, om: Tensor, w: Tensor, extra) -> Tensor:
    """sum_{d,j} (x s)[b,n,h,d] Omega[(b,)n,h,d,j] lambdaZ[h,d,j,r] (+ x @ extra) per block;
    om, w: `SineSide.operands`, whose dtype the output (B, N, H, R) takes."""
    h, r = w.shape[0], w.shape[2]
    b, outs = x.shape[0], []
    for xb, ob in _sine_blocks(x, om):
        xb = scaled(xb, scale, xb.dtype)  # (B, nb, H, D)
        out = torch.bmm(_modulate(xb, ob, w.dtype), w)  # (H, B nb, R)
        outs.append(out.view(h, b, xb.shape[1], r).permute(1, 2, 0, 3))
    out = torch.cat(outs, 1)  # (B, N, H, R)
    if extra is None:
        return out
    return out.add_(torch.einsum("bnhd,hdr->bnhr", x.to(w.dtype), extra.to(w.dtype)))


class SineContract(torch.autograd.Function):
    """out[b,n,h,r] = sum_{d,j} x[b,n,h,d] s[h,d] Omega[(b,)n,h,d,j] lambdaZ[h,d,j,r] (+ sum_d
    x[b,n,h,d] extra[h,d,r], the gate's noise term, added in place), in position blocks of
    SINE_BLOCK, s the gate's scale (or 1). Saves only its inputs (x is the layer's q or k, which
    autograd keeps anyway); backward rebuilds nothing of size 2K per position but the gradient
    of the product, laid out (H, B * block, D * 2K) for one batched GEMM over heads. Omega's and
    lambda Z's gradients go by `pending` to the side's `SineCollect` (reached through `token`).
    om and w are `SineSide.operands` (the products' dtype, and its order of the pairs (d, j));
    the gate's gradient is summed in float32."""

    @staticmethod
    def forward(ctx, x, scale, extra, token, omega: Tensor, om: Tensor, w: Tensor, pending):
        ctx.save_for_backward(x, scale, omega, om, w, extra)
        ctx.pending = pending
        return _contract(x, scale, om, w, extra)

    @staticmethod
    @once_differentiable  # Omega's and lambda Z's part goes by `pending`
    def backward(ctx, g: Tensor):
        x, scale, omega, om, w, extra = ctx.saved_tensors
        (h, _, r), b, dt = w.shape, x.shape[0], w.dtype
        g = g.to(dt)  # (B, N, H, R)
        ctx.pending.append((table_rows(scaled(x, scale, dt), omega), table_rows(g, omega)))
        gx, g_scale = [], torch.zeros_like(scale) if ctx.needs_input_grad[1] else None
        if ctx.needs_input_grad[0] or g_scale is not None:
            for (x0, ob), gb in zip(_sine_blocks(x, om), g.split(SINE_BLOCK, 1), strict=True):
                nb = x0.shape[1]
                gh = gb.permute(2, 0, 1, 3).reshape(h, b * nb, r)  # (H, B nb, R)
                ga = torch.bmm(gh, w.transpose(1, 2)).view(h, b, nb, *ob.shape[-2:])
                gxs = _pair_sums(ga, ob).permute(1, 2, 0, 3)  # (B, nb, H, D)
                if g_scale is not None:
                    g_scale += wide_sum(gxs * x0, (0, 1))
                gx.append(gxs if scale is None else scaled(gxs, scale, gxs.dtype))
        grad_x = torch.cat(gx, 1) if ctx.needs_input_grad[0] else None
        if grad_x is not None and extra is not None:
            grad_x.add_(torch.einsum("bnhr,hdr->bnhd", g, extra.to(dt)))
        grad_x = None if grad_x is None else grad_x.to(x.dtype)
        grad_extra = None
        if ctx.needs_input_grad[2]:
            grad_extra = torch.einsum("bnhd,bnhr->hdr", x.to(dt), g).to(extra.dtype)
        return grad_x, g_scale, grad_extra, g.new_zeros(()), None, None, None, None


class SineCollect(torch.autograd.Function):
    """A side's Omega and lambda Z node: their gradients from the layers' pending (x s, g)
    pairs, one head at a time (P_h (N', D, R) = sum_l (x_l s)^T g_l, N' = N or B N)."""

    @staticmethod
    def forward(ctx, omega: Tensor, lz: Tensor, pending: list) -> Tensor:
        ctx.save_for_backward(omega, lz)
        ctx.pending = pending
        return omega.new_zeros(())

    @staticmethod
    @once_differentiable
    def backward(ctx, _grad_token: Tensor):
        omega, lz = ctx.saved_tensors
        pending = ctx.pending
        if not pending:
            return None, None, None
        if sum(x.shape[1] for x, _ in pending) <= PAIR_PATH_MAX:
            g_om, g_lz = _collect_by_pairs(omega, lz, pending)
            pending.clear()
            need_om, need_lz = ctx.needs_input_grad[:2]
            return g_om if need_om else None, g_lz if need_lz else None, None
        h, d, j, _ = lz.shape
        om = omega.reshape(-1, h, d, j)  # (N', H, D, 2K)
        g_om = torch.empty_like(om) if ctx.needs_input_grad[0] else None
        g_lz = torch.zeros_like(lz) if ctx.needs_input_grad[1] else None
        for head in range(h):
            for start in range(0, om.shape[0], COLLECT_BLOCK):
                rows = slice(start, start + COLLECT_BLOCK)
                p = head_gradient(pending, h, head, rows).to(om.dtype)  # (n, D, R)
                if g_om is not None:
                    g_om[rows, head] = torch.einsum("mdr,djr->mdj", p, lz[head])
                if g_lz is not None:
                    g_lz[head] += torch.einsum("mdj,mdr->djr", om[rows, head], p)
        pending.clear()
        return None if g_om is None else g_om.view_as(omega), g_lz, None


def _collect_by_pairs(omega: Tensor, lz: Tensor, pending: list) -> tuple[Tensor, Tensor]:
    """Omega's and lambda Z's gradients pair by pair, for few pairs (one or two linear
    layers at batch 1): with G = g lambda Z^T over R, grad Omega = sum over pairs of (x s) G
    and grad lambda Z = sum over pairs and positions of (Omega (x s)) (x) g, two GEMMs of
    inner size R and N per pair, in float32. Forming P = sum (x s)^T g first (SineCollect's
    other path) pays off from a few pairs on, but its per-position products of inner size
    L B' run far below the GEMM rate."""
    h, d, j, r = lz.shape
    om = omega.reshape(-1, h, d * j)  # (N', H, D 2K)
    n = om.shape[0]
    w = lz.reshape(h, d * j, r)  # (H, D 2K, R)
    g_om = torch.zeros(n, h, d, j, dtype=omega.dtype, device=omega.device)
    g_lz = torch.zeros_like(w)
    for start in range(0, n, 4 * COLLECT_BLOCK):
        rows = slice(start, start + 4 * COLLECT_BLOCK)
        om_h = om[rows].transpose(0, 1).unflatten(-1, (d, j))  # (H, n, D, 2K)
        for x, g in pending:  # (N' H, B', D), (N' H, B', R)
            for i in range(x.shape[1]):
                xi = x[:, i].view(n, h, d)[rows].transpose(0, 1).to(w.dtype)  # (H, n, D)
                gi = g[:, i].view(n, h, r)[rows].transpose(0, 1).to(w.dtype)  # (H, n, R)
                big_g = torch.bmm(gi, w.transpose(1, 2)).view(h, -1, d, j)  # (H, n, D, 2K)
                g_om[rows] += (big_g * xi[..., None]).transpose(0, 1)
                a = (om_h * xi[..., None]).flatten(-2)  # (H, n, D 2K)
                g_lz.baddbmm_(a.transpose(1, 2), gi)
    return g_om.view_as(omega), g_lz.view_as(lz)


def _sine_blocks(x: Tensor, om: Tensor):
    """Matching position blocks of x (B, N, H, D) and Omega's operand (H, B or 1, N, ., .)."""
    return zip(x.split(SINE_BLOCK, 1), om.split(SINE_BLOCK, 2), strict=True)


def _omega_heads(omega: Tensor) -> Tensor:
    """Omega ((B,) N, H, D, 2K) -> a (H, B or 1, N, D, 2K) view."""
    return omega.permute(2, 0, 1, 3, 4) if omega.dim() == 5 else omega.transpose(0, 1)[:, None]


def _jd(dtype: torch.dtype) -> bool:
    """Whether operands of `dtype` order the pairs (d, j) as (2K, D) (narrower than float32)
    rather than (D, 2K) (`SineSide.operands`)."""
    return dtype.itemsize < 4


def _modulate(x: Tensor, om: Tensor, dtype: torch.dtype) -> Tensor:
    """x (B, n, H, D) * Omega's operand block om (H, B or 1, n, ., .) -> (H, B n, D 2K) in
    `dtype` and om's pair order, contiguous: one multiply, no copy."""
    b, n, h, _ = x.shape
    p, q = om.shape[-2:]
    out = x.new_empty(h, b, n, p, q, dtype=dtype)
    xh = x.permute(2, 0, 1, 3).unsqueeze(-2 if _jd(om.dtype) else -1)  # x along D
    torch.mul(xh, om, out=out)
    return out.view(h, b * n, p * q)


def _pair_sums(ga: Tensor, om: Tensor) -> Tensor:
    """The product's gradient ga (H, B, n, ., .) times Omega's operand om, summed over 2K ->
    (H, B, n, D): in place on ga in om's (D, 2K) order; out of place along D's contiguous
    elements in the (2K, D) order (a bf16 product, summed in float32, rounded once)."""
    return (ga * om).sum(-2) if _jd(om.dtype) else ga.mul_(om).sum(-1)


class CosSin(torch.autograd.Function):
    """angles (..., K) -> [cos, sin] (..., 2K), whose backward reads its output: the codes'
    contraction keeps that output for backward anyway, so the angles are not kept too (20 MiB
    per side at 2048 tokens, default width)."""

    @staticmethod
    def forward(ctx, ang: Tensor) -> Tensor:
        out = torch.cat([ang.cos(), ang.sin()], -1)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        cos, sin = out.chunk(2, -1)
        g_cos, g_sin = g.chunk(2, -1)
        return g_sin * cos - g_cos * sin
