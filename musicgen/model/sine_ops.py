"""sineSPE's autograd Functions: the per-layer code contraction, the node that forms Omega's
and lambda Z's gradients once for every layer, and the angles' [cos, sin].

They keep for backward only what autograd keeps anyway (their inputs, or an output another
node saves) and the layers' (x s, g) pairs, and rebuild the rest: q times the gate's scale, the
angles. docs/model.md, "Positional encodings", says when which path runs.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from musicgen.model.shared_table import head_gradient, table_rows

SINE_BLOCK = 512  # positions per block of the per-layer sine contraction (bounds its temporary)
COLLECT_BLOCK = 256  # positions per block of Omega's gradient (bounds the table-sized product)


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

    def contract(self, x: Tensor, scale: Tensor | None, extra: Tensor | None) -> Tensor:
        """x (B, N, H, D) -> (B, N, H, R) (see `SineContract`)."""
        if self.token is None or not torch.is_grad_enabled():
            return _contract(x, scale, self.omega, self.lz, extra)
        return SineContract.apply(x, scale, extra, self.token, self.omega, self.lz, self.pending)


def _contract(x: Tensor, scale, omega: Tensor, lz: Tensor, extra) -> Tensor:
    """sum_{d,j} (x s)[b,n,h,d] Omega[(b,)n,h,d,j] lambdaZ[h,d,j,r] (+ x @ extra) per block."""
    h, d, j, r = lz.shape
    w = lz.reshape(h, d * j, r)
    b, outs = x.shape[0], []
    for xb, ob in _sine_blocks(x, omega):
        xb = xb if scale is None else xb * scale
        out = torch.bmm(_modulate(xb, ob), w)  # (H, B nb, R)
        outs.append(out.view(h, b, xb.shape[1], r).permute(1, 2, 0, 3))
    out = torch.cat(outs, 1)  # (B, N, H, R)
    return out if extra is None else out.add_(torch.einsum("bnhd,hdr->bnhr", x, extra))


class SineContract(torch.autograd.Function):
    """out[b,n,h,r] = sum_{d,j} x[b,n,h,d] s[h,d] Omega[(b,)n,h,d,j] lambdaZ[h,d,j,r] (+ sum_d
    x[b,n,h,d] extra[h,d,r], the gate's noise term, added in place), in position blocks of
    SINE_BLOCK, s the gate's scale (or 1). Saves only its inputs (x is the layer's q or k, which
    autograd keeps anyway); backward rebuilds nothing of size 2K per position but the gradient
    of the product, laid out (H, B * block, D * 2K) for one batched GEMM over heads. Omega's and
    lambda Z's gradients go by `pending` to the side's `SineCollect` (reached through `token`)."""

    @staticmethod
    def forward(ctx, x, scale, extra, token: Tensor, omega: Tensor, lz: Tensor, pending: list):
        ctx.save_for_backward(x, scale, omega, lz, extra)
        ctx.pending = pending
        return _contract(x, scale, omega, lz, extra)

    @staticmethod
    @once_differentiable  # Omega's and lambda Z's part goes by `pending`
    def backward(ctx, g: Tensor):
        x, scale, omega, lz, extra = ctx.saved_tensors
        h, d, j, r = lz.shape
        b = x.shape[0]
        xs = x if scale is None else x * scale
        ctx.pending.append((table_rows(xs, omega), table_rows(g, omega)))
        w = lz.reshape(h, d * j, r)
        gx, g_scale = [], torch.zeros_like(scale) if ctx.needs_input_grad[1] else None
        if ctx.needs_input_grad[0] or g_scale is not None:
            for (x0, ob), gb in zip(_sine_blocks(x, omega), g.split(SINE_BLOCK, 1), strict=True):
                nb = x0.shape[1]
                gh = gb.permute(2, 0, 1, 3).reshape(h, b * nb, r)  # (H, B nb, R)
                ga = torch.bmm(gh, w.transpose(1, 2)).view(h, b, nb, d, j)  # of the product
                gxs = (ga.mul_(_omega_heads(ob))).sum(-1).permute(1, 2, 0, 3)  # (B, nb, H, D)
                if g_scale is not None:
                    g_scale += (gxs * x0).sum((0, 1))
                gx.append(gxs if scale is None else gxs.mul_(scale))
        grad_x = torch.cat(gx, 1) if ctx.needs_input_grad[0] else None
        if grad_x is not None and extra is not None:
            grad_x.add_(torch.einsum("bnhr,hdr->bnhd", g, extra))
        grad_extra = torch.einsum("bnhd,bnhr->hdr", x, g) if ctx.needs_input_grad[2] else None
        return grad_x, g_scale, grad_extra, g.new_zeros(()), None, None, None


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
        h, d, j, _ = lz.shape
        om = omega.reshape(-1, h, d, j)  # (N', H, D, 2K)
        g_om = torch.empty_like(om) if ctx.needs_input_grad[0] else None
        g_lz = torch.zeros_like(lz) if ctx.needs_input_grad[1] else None
        for head in range(h):
            for start in range(0, om.shape[0], COLLECT_BLOCK):
                rows = slice(start, start + COLLECT_BLOCK)
                p = head_gradient(pending, h, head, rows)  # (n, D, R)
                if g_om is not None:
                    g_om[rows, head] = torch.einsum("mdr,djr->mdj", p, lz[head])
                if g_lz is not None:
                    g_lz[head] += torch.einsum("mdj,mdr->djr", om[rows, head], p)
        pending.clear()
        return None if g_om is None else g_om.view_as(omega), g_lz, None


def _sine_blocks(x: Tensor, omega: Tensor):
    """Matching position blocks of x (B, N, H, D) and Omega ((B,) N, H, D, 2K)."""
    return zip(x.split(SINE_BLOCK, 1), omega.split(SINE_BLOCK, -4), strict=True)


def _omega_heads(omega: Tensor) -> Tensor:
    """Omega block ((B,) n, H, D, 2K) -> a (H, B or 1, n, D, 2K) view."""
    return omega.permute(2, 0, 1, 3, 4) if omega.dim() == 5 else omega.transpose(0, 1)[:, None]


def _modulate(x: Tensor, omega: Tensor) -> Tensor:
    """x (B, n, H, D) * Omega -> (H, B n, D 2K), contiguous: one multiply, no copy."""
    b, n, h, d = x.shape
    j = omega.shape[-1]
    out = x.new_empty(h, b, n, d, j)
    torch.mul(x.permute(2, 0, 1, 3).unsqueeze(-1), _omega_heads(omega), out=out)
    return out.view(h, b * n, d * j)


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
