"""bf16 autocast runs the linear attention's and the SPE contraction's products with bf16
operands (`attention.matmul_dtype`): the layer's output and gradients stay within bf16 rounding
of the float32 computation, for APE, gated sineSPE (per-layer contraction and shared tables) and
gated convSPE; without autocast nothing changes (the other tests pin the float32 numbers)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from musicgen.config import ModelConfig
from musicgen.model.attention import CausalSelfAttention, causal_linear_attention, matmul_dtype
from musicgen.model.features import FavorFeatures
from musicgen.model.positional import TABLE_MIN_BATCH, ConvSPE, SineSPE
from musicgen.model.spe_noise import SPENoise

# bf16 keeps 8 bits of mantissa (relative rounding 2^-9 = 2e-3 per operand and result)
OUT_TOL = 2e-2  # relative error (Frobenius norm) of a layer's output
GRAD_COS = 0.99  # cosine similarity of every gradient with its float32 twin
BF16 = torch.bfloat16


def _cfg(pe: str) -> ModelConfig:
    return ModelConfig(
        vocab_size=30,
        n_layers=1,
        d_model=32,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        n_features=32,
        num_realizations=16,
        num_sines=3,
        kernel_size=12,
        pe=pe,
        gated=pe != "ape",
        chunk_size=16,
    )


def _spe(cfg: ModelConfig):
    h, d, r = cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.num_realizations
    if cfg.pe == "sine_spe":
        return SineSPE(h, d, r, cfg.num_sines)
    return None if cfg.pe == "ape" else ConvSPE(h, d, r, cfg.kernel_size)


def _run(layer, spe, x: Tensor, w: Tensor, bf16: bool) -> tuple[Tensor, dict]:
    """The layer's output (float32) and the gradients of <output, w> by name, x's as 'x'."""
    layer.zero_grad(set_to_none=True)
    if spe is not None:
        spe.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    pos = torch.arange(x.shape[1])
    with torch.autocast("cpu", dtype=BF16, enabled=bf16):
        dtype = matmul_dtype("cpu")
        codes = None
        if spe is not None:  # made as the Performer makes them: autocast off, tables in dtype
            with torch.autocast("cpu", enabled=False):
                codes = spe.codes(pos, pos, SPENoise(3, "cpu"), dtype)
        y = layer(x, codes).float()
    (y * w).sum().backward()
    named = list(layer.named_parameters()) + ([] if spe is None else list(spe.named_parameters()))
    grads = {name: p.grad for name, p in named if p.grad is not None}
    return y.detach(), {"x": x.grad, **grads}


def _cos(a: Tensor, b: Tensor) -> float:
    return float(F.cosine_similarity(a.flatten().double(), b.flatten().double(), 0))


def test_matmul_dtype_is_bf16_only_under_bf16_autocast():
    assert matmul_dtype("cpu") == torch.float32
    with torch.autocast("cpu", dtype=BF16):
        assert matmul_dtype("cpu") == BF16
        with torch.autocast("cpu", enabled=False):
            assert matmul_dtype("cpu") == torch.float32
    with torch.autocast("cpu", dtype=torch.float16):  # fp16's range is too narrow: float32
        assert matmul_dtype("cpu") == torch.float32


@pytest.mark.parametrize(
    ("pe", "batch"),
    [("ape", 2), ("sine_spe", 1), ("sine_spe", TABLE_MIN_BATCH), ("conv_spe", 2)],
)
def test_bf16_layer_output_and_gradients_agree_with_float32(pe, batch):
    """One attention layer (gated SPE; sineSPE by its per-layer contraction at batch 1 and by
    the shared tables from TABLE_MIN_BATCH on), 150 positions in chunks of 16: under bf16
    autocast its output is within OUT_TOL of the float32 layer's and every gradient (x, the
    projections, the gate, the SPE parameters) points the same way (cosine > GRAD_COS)."""
    cfg = _cfg(pe)
    torch.manual_seed(0)
    layer, spe = CausalSelfAttention(cfg, spe=pe != "ape"), _spe(cfg)
    if spe is not None:  # gates away from 0: the noise term and the kernel both count
        torch.nn.init.normal_(layer.gate, std=1.0)
    x, w = torch.randn(batch, 150, cfg.d_model), torch.randn(batch, 150, cfg.d_model)
    y32, g32 = _run(layer, spe, x, w, bf16=False)
    y16, g16 = _run(layer, spe, x, w, bf16=True)
    rel = float((y16 - y32).norm() / y32.norm())
    assert rel < OUT_TOL, rel
    assert g16.keys() == g32.keys() and len(g32) >= 5 + (spe is not None)
    for name, g in g32.items():
        assert g16[name].dtype == g.dtype == torch.float32, name
        assert _cos(g16[name], g) > GRAD_COS, (name, _cos(g16[name], g))


@pytest.mark.parametrize(("pe", "batch"), [("sine_spe", 1), ("sine_spe", 4), ("conv_spe", 2)])
def test_bf16_spe_projections_agree_with_float32(pe, batch):
    """`project` with bf16 operands returns bf16 (the products ran in it) within 1 % of the
    float32 projection, for q and k, with the gate's noise term."""
    cfg = _cfg(pe)
    torch.manual_seed(1)
    spe, gate = _spe(cfg), torch.randn(cfg.n_heads, cfg.d_model // cfg.n_heads)
    x = torch.randn(batch, 90, cfg.n_heads, cfg.d_model // cfg.n_heads)
    pos = torch.arange(90)
    for side in ("q", "k"):
        want = spe.codes(pos, pos, SPENoise(5, "cpu")).project(x, side, gate, torch.float32)
        got = spe.codes(pos, pos, SPENoise(5, "cpu"), BF16).project(x, side, gate, BF16)
        assert want.dtype == torch.float32 and got.dtype == BF16
        rel = float((got.float() - want).detach().norm() / want.detach().norm())
        assert rel < 1e-2, (side, rel)


def test_bf16_chunked_attention_agrees_with_float32():
    """causal_linear_attention with bf16 operands and the causal key stabiliser (keys spread
    over tens of nats): float32 output within OUT_TOL, gradients aligned."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 100, 8, generator=g) * 2 for _ in range(3))
    torch.manual_seed(0)
    fm = FavorFeatures(8, 32, 8)
    outs, grads = [], []
    for dtype in (torch.float32, BF16):
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        phi_k, shift = fm.key_causal(leaves[1])
        phi_q = fm.query(leaves[0])
        out = causal_linear_attention(phi_q, phi_k, leaves[2], 16, fm.eps, shift, dtype)
        assert out.dtype == torch.float32
        out.pow(2).sum().backward()
        outs.append(out.detach())
        grads.append([t.grad for t in leaves])
    assert float((outs[1] - outs[0]).norm() / outs[0].norm()) < OUT_TOL
    for a, b in zip(*grads, strict=True):
        assert _cos(a, b) > GRAD_COS


def test_generation_step_under_bf16_autocast_keeps_float32_state():
    """The recurrent step ignores bf16 autocast's operand dtype: its sums (S, z) stay float32."""
    cfg = _cfg("ape")
    torch.manual_seed(0)
    layer = CausalSelfAttention(cfg, spe=False)
    cache = layer.init_cache(1, "cpu")
    with torch.autocast("cpu", dtype=BF16):
        for _ in range(3):
            layer(torch.randn(1, 1, cfg.d_model), cache=cache)
    assert cache.s.dtype == cache.z.dtype == torch.float32
