"""The fused one-token generation step of the Performer (`Performer.step` without autograd).

The modules' forward with a cache spends a step mostly on bookkeeping: module calls, autocast
contexts, dtype checks, views, and constants rebuilt from the weights at every token (the SPE
gate's factors, the scaled FAVOR+ projection, the scaled embedding tables). At batch 1 on a CPU
each operation costs microseconds, more than its arithmetic. Here every block becomes a plain
object made once per generation (`StepPlan`, kept in the state: the weights cannot change while a
generation runs under inference mode), holding direct references to its weights and the
constants folded from them, so that a step runs only the operations the maths needs. Same
numbers as the modules' step up to float rounding (tests/test_model.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from musicgen.device import as_dtype
from musicgen.model.attention import AttentionCache, CausalSelfAttention
from musicgen.model.features import FavorFeatures
from musicgen.model.local import WindowCache
from musicgen.model.musical import MAX_NOTES
from musicgen.model.positional import RowCodes, project_pair


class _Norm:
    """A LayerNorm's call without the module."""

    def __init__(self, ln: nn.LayerNorm) -> None:
        self.shape, self.w, self.b, self.eps = ln.normalized_shape, ln.weight, ln.bias, ln.eps

    def __call__(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.shape, self.w, self.b, self.eps)


_SQRT_HALF = 1 / math.sqrt(2)


def _gelu(y: Tensor, approximate: str) -> Tensor:
    """GELU of a new tensor, in place. The exact form is written out, x/2 (1 + erf(x/sqrt 2)),
    the formula torch's kernel computes: for one token's activations its kernel takes several
    times as long as erf alone inside a one-token step."""
    if approximate != "none":
        return F.gelu(y, approximate=approximate)
    return y.mul_(torch.mul(y, _SQRT_HALF).erf_().add_(1).mul_(0.5))


def quantize_int8(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Weight-only int8, symmetric per output row: (out, in) -> int8 (out, in), bf16 scales
    (out,) with weight ~ q * scale (round to nearest, |q| <= 127)."""
    w = weight.detach().float()
    scales = w.abs().amax(1).clamp_min(1e-12) / 127
    return (w / scales[:, None]).round_().clamp_(-127, 127).to(torch.int8), scales.bfloat16()


class _Linear:
    """One Linear's call: its float weights, or their int8 copy (`Performer.use_int8`): then
    `torch._weight_int8pack_mm` on bf16 activations, a quarter of the weights' bytes read."""

    def __init__(self, lin: nn.Linear, int8: dict | None) -> None:
        self.w, self.b, self.scales = lin.weight, lin.bias, None
        if int8 is not None:
            self.w, self.scales = int8[lin]

    def __call__(self, x: Tensor) -> Tensor:
        if self.scales is None:
            return F.linear(x, self.w, self.b)
        y = torch._weight_int8pack_mm(x.to(torch.bfloat16), self.w, self.scales).to(x.dtype)
        return y if self.b is None else y.add_(self.b)


class _BlockStep:
    """What both block kinds share: the norms, the residuals and the FFN."""

    def __init__(self, block, int8: dict | None) -> None:
        up, act, _, down = block.ffn
        self.pre, self.norm1, self.norm2 = block.pre, _Norm(block.norm1), _Norm(block.norm2)
        self.up, self.down, self.act = _Linear(up, int8), _Linear(down, int8), act.approximate
        attn = block.attn
        self.h, self.d = attn.n_heads, attn.head_dim
        self.qkv, self.out = _Linear(attn.qkv, int8), _Linear(attn.out, int8)

    def __call__(self, x: Tensor, codes, cache, rot: Tensor | None) -> Tensor:
        """x (B, d_model) -> (B, d_model): the block's forward for one position."""
        if self.pre:
            x = x + self.attend(self.norm1(x), codes, cache, rot)
            return x + self._ffn(self.norm2(x))
        x = self.norm1(x + self.attend(x, codes, cache, rot))
        return self.norm2(x + self._ffn(x))

    def _ffn(self, x: Tensor) -> Tensor:
        return self.down(_gelu(self.up(x), self.act))

    def attend(self, x: Tensor, codes, cache, rot: Tensor | None) -> Tensor:
        raise NotImplementedError


class LinearStep(_BlockStep):
    """A linear-attention block: SPE (gate folded), the feature map, the recurrent sums."""

    def __init__(self, block, int8: dict | None) -> None:
        super().__init__(block, int8)
        attn: CausalSelfAttention = block.attn
        f = attn.features
        self.eps, self.gate = f.eps, attn.gate
        self.favor = isinstance(f, FavorFeatures)
        if self.favor:  # (in, m): the pre-scaled projection; the constants of phi's exponent
            self.proj = (f.proj.float() * f.scale).T.contiguous()
            self.q_bias, self.k_sq = 0.5 * math.log(f.n_features), 0.5 * f.scale**2
            self.k_norm = 1 / math.sqrt(f.n_features)
        self.keep = self.mix = self.gate_eps = None
        if self.gate is not None:  # SPE gate: w = keep * code + mix * eps, per (head, feature),
            delta = torch.sigmoid(self.gate.float())[..., None]  # (H, D, 1); / sqrt(R) folded in
            root_r = math.sqrt(f.in_dim)  # R
            self.keep, self.mix = (1 - delta).sqrt() / root_r, delta.sqrt() / root_r

    def attend(self, x: Tensor, codes, cache: AttentionCache, rot: Tensor | None) -> Tensor:
        b = x.shape[0]
        qkv = self.qkv(x)
        parts = as_dtype(qkv, torch.float32).view(b, 3, self.h, self.d)
        parts = parts.permute(1, 2, 0, 3)  # (3, H, B, D)
        qk, v = parts[:2], parts[2]
        if codes is not None:
            qk = self._spe(qk, codes)  # (2, H, B, R)
        phi_q, phi_k, shift = self._features(qk, cache.shift.T)  # (H, B, M) x 2, (H, B)
        out = cache.advance(
            phi_q.transpose(0, 1), phi_k.transpose(0, 1), v.transpose(0, 1), shift.T, self.eps
        )  # (B, H, D)
        return self.out(as_dtype(out.reshape(b, -1), qkv.dtype))

    def _spe(self, qk: Tensor, codes) -> Tensor:
        """qk (2, H, B, D) -> (2, H, B, R). A position's own codes (`RowCodes`, its q and k
        tables stacked) take one product with the gate folded in; others (musical-time codes,
        per batch row) the general form."""
        if not isinstance(codes, RowCodes):
            return project_pair(codes, qk, self.gate)
        w = codes.qk[:, 0]  # (2, H, D, R)
        if self.gate is None:
            return torch.matmul(qk, w).div_(math.sqrt(codes.r))
        if self.gate_eps is None:  # the sequence's gate noise: fixed for the generation
            self.gate_eps = codes.eps * self.mix
        return torch.matmul(qk, torch.addcmul(self.gate_eps, w, self.keep))

    def _features(self, qk: Tensor, shift: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The feature map's `query` and `key` of one position, both sides through one product:
        phi(q), phi(k) (H, B, M) and the key's new stabiliser (H, B)."""
        if not self.favor:  # relu: nothing to stabilise
            phi = torch.relu(qk)
            return phi[0], phi[1], shift
        wq, wk = (qk @ self.proj).unbind(0)  # (H, B, M) each
        phi_q = wq.sub_(wq.amax(-1, keepdim=True).add_(self.q_bias)).exp_()
        u = wk.sub_(qk[1].square().sum(-1, keepdim=True), alpha=self.k_sq)
        new = torch.maximum(shift, u.amax(-1))
        return phi_q, u.sub_(new[..., None]).exp_().mul_(self.k_norm), new


class LocalStep(_BlockStep):
    """A windowed softmax block: rotary q and k (the step's shared matrix), the ring buffer.
    With int8 weights the window's keys and values are kept in bf16: its read is the block's
    other large one (up to 2 MB a step at the small models' width)."""

    def __init__(self, block, int8: dict | None) -> None:
        super().__init__(block, int8)
        self.kv = torch.bfloat16 if int8 is not None else None

    def attend(self, x: Tensor, codes, cache: WindowCache, rot: Tensor | None) -> Tensor:
        b = x.shape[0]
        qkv = self.qkv(x).view(b, 3, self.h, 1, self.d)
        qk = qkv[:, :2] if rot is None else qkv[:, :2] @ rot.to(qkv.dtype)  # (B, 2, H, 1, D)
        v = qkv[:, 2]
        if self.kv is not None:  # the buffer follows (WindowCache.step)
            qk, v = qk.to(self.kv), v.to(self.kv)
        out = cache.step(qk[:, 0], qk[:, 1], v)  # (B, H, 1, D)
        return self.out(as_dtype(out.reshape(b, -1), x.dtype))


class StepPlan:
    """Every block's step object and the input tables, made from a Performer's weights."""

    def __init__(self, model) -> None:
        int8 = model.int8_weights  # None, or {nn.Linear: (int8 weight, scales)}
        self.blocks = [
            LinearStep(b, int8) if isinstance(b.attn, CausalSelfAttention) else LocalStep(b, int8)
            for b in model.blocks
        ]
        self.embed = model.embed.weight * math.sqrt(model.d_model)  # (V, d_model)
        self.musical = self.notes = None
        emb = model.musical.embed if model.musical is not None else None
        if emb is not None:  # one row per onset mod a phrase (position, beat, bar in phrase)
            time = model.musical.time
            onset = torch.arange(emb.phrase_bars * time.per_bar, device=self.embed.device)
            bar, pos, beat = time.split(onset)
            rows = emb.position(pos) + emb.beat(beat) + emb.phrase(bar % emb.phrase_bars)
            self.musical, self.span = rows * emb.scale, len(onset)  # (span, d_model)
            if emb.notes is not None:
                self.notes = emb.notes.weight * emb.scale  # (MAX_NOTES + 1, d_model)

    def inputs(self, ids: Tensor, onset: Tensor | None, notes: Tensor | None) -> Tensor:
        """ids (B,), onset and notes (B, 1) or None -> (B, d_model), the token's input without
        the absolute position (`Performer.step` adds it)."""
        x = F.embedding(ids, self.embed)
        if self.musical is not None:
            x = x + F.embedding(onset[:, 0] % self.span, self.musical)
            if self.notes is not None:
                x = x + F.embedding(notes[:, 0].clamp_max(MAX_NOTES), self.notes)
        return x
