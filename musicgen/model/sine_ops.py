"""sineSPE's autograd Functions: the per-layer code contraction and the angles' [cos, sin].

Both keep for backward only what autograd keeps anyway (their inputs, or an output another
node saves), and rebuild the rest: the (B, block, H, D, 2K) product of q and Omega, q times the
gate's scale, the angles. docs/model.md, "Positional encodings", says when which path runs.
"""

from __future__ import annotations

import torch
from torch import Tensor

SINE_BLOCK = 512  # positions per block of the per-layer sine contraction (bounds its temporary)


class SineContract(torch.autograd.Function):
    """out[b,n,h,r] = sum_{d,j} x[b,n,h,d] s[h,d] Omega[(b,)n,h,d,j] lambdaZ[h,d,j,r] (+ sum_d
    x[b,n,h,d] extra[h,d,r], the gate's noise term, added in place), in position blocks of
    SINE_BLOCK, s the gate's scale (or 1). Saves only its inputs: x s and the
    (B, block, H, D, 2K) product are rebuilt per block in backward (what checkpointing did,
    without autograd's slice or split gradients; x is the layer's q or k, which autograd keeps
    anyway), and every product is laid out (H, B * block, D * 2K) for one batched GEMM over
    heads."""

    @staticmethod
    def forward(ctx, x: Tensor, scale, omega: Tensor, lz: Tensor, extra=None) -> Tensor:
        ctx.save_for_backward(x, scale, omega, lz, extra)
        h, d, j, r = lz.shape
        w = lz.reshape(h, d * j, r)
        b, outs = x.shape[0], []
        for xb, ob in _sine_blocks(x, omega):
            xb = xb if scale is None else xb * scale
            out = torch.bmm(_modulate(xb, ob), w)  # (H, B nb, R)
            outs.append(out.view(h, b, xb.shape[1], r).permute(1, 2, 0, 3))
        out = torch.cat(outs, 1)  # (B, N, H, R)
        return out if extra is None else out.add_(torch.einsum("bnhd,hdr->bnhr", x, extra))

    @staticmethod
    def backward(ctx, g: Tensor):
        x, scale, omega, lz, extra = ctx.saved_tensors
        h, d, j, r = lz.shape
        b = x.shape[0]
        w = lz.reshape(h, d * j, r)
        gx, gom, glz = [], [], torch.zeros_like(w) if ctx.needs_input_grad[3] else None
        g_scale = torch.zeros_like(scale) if ctx.needs_input_grad[1] else None
        g_blocks = g.split(SINE_BLOCK, 1)
        for (x0, ob), gb in zip(_sine_blocks(x, omega), g_blocks, strict=True):
            xb, nb = (x0 if scale is None else x0 * scale), x0.shape[1]
            gh = gb.permute(2, 0, 1, 3).reshape(h, b * nb, r)  # (H, B nb, R)
            if glz is not None:
                glz.baddbmm_(_modulate(xb, ob).transpose(1, 2), gh)
            ga = torch.bmm(gh, w.transpose(1, 2)).view(h, b, nb, d, j)  # grad of the product
            if ctx.needs_input_grad[0] or g_scale is not None:  # of x s: sum_j grad * Omega
                gxs = (ga * _omega_heads(ob)).sum(-1).permute(1, 2, 0, 3)  # (B, nb, H, D)
                if g_scale is not None:
                    g_scale += (gxs * x0).sum((0, 1))
                if ctx.needs_input_grad[0]:
                    gx.append(gxs if scale is None else gxs.mul_(scale))
            if ctx.needs_input_grad[2]:  # grad * x s, summed over B when Omega is shared
                go = ga.mul_(xb.permute(2, 0, 1, 3).unsqueeze(-1))  # (H, B, nb, D, 2K)
                if ob.dim() == 5:
                    gom.append(go.permute(1, 2, 0, 3, 4))
                else:  # batch 1: a view, no reduction pass
                    gom.append((go[:, 0] if b == 1 else go.sum(1)).transpose(0, 1))
        grad_x = torch.cat(gx, 1) if gx else None
        if grad_x is not None and extra is not None:
            grad_x.add_(torch.einsum("bnhr,hdr->bnhd", g, extra))
        grad_om = torch.cat(gom, -4) if gom else None
        grad_lz = None if glz is None else glz.view(h, d, j, r)
        grad_extra = torch.einsum("bnhd,bnhr->hdr", x, g) if ctx.needs_input_grad[4] else None
        return grad_x, g_scale, grad_om, grad_lz, grad_extra


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
