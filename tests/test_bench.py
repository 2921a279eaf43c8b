"""The benchmark helpers: the FLOP model counts the Linear weights, new and base alternate."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from musicgen.config import ModelConfig
from musicgen.model import build_model

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path[:0] = [str(SCRIPTS / "bench"), str(SCRIPTS / "reproduce")]
import benchlib  # noqa: E402


@pytest.mark.parametrize("pe", ["ape", "sine_spe", "conv_spe"])
def test_dense_flops_are_two_per_linear_weight_and_token(pe):
    cfg = ModelConfig(
        vocab_size=50,
        n_layers=3,
        d_model=32,
        n_heads=4,
        d_ff=64,
        n_features=16,
        num_realizations=8,
        pe=pe,
        gated=True,
    )
    model = build_model(cfg)
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    f = benchlib.forward_flops(cfg, 2, 100)
    assert f["dense"] == 2 * weights * 2 * 100
    assert f["attn"] > 0 and (f["spe"] > 0) == (pe != "ape")
    assert benchlib.train_flops(cfg, 2, 100) == 3 * sum(f.values())
    # SPE tables are built once per forward when shared, per layer otherwise
    per_layer = benchlib.forward_flops(ModelConfig(**{**cfg.__dict__, "spe_shared": False}), 2, 100)
    assert (per_layer["spe"] > f["spe"]) == (pe != "ape")


def test_windowed_softmax_layers_count_the_keys_each_query_sees():
    """A windowed layer costs q k^T and the weighted values over min(i + 1, window) keys per
    query i (4 x keys x head size x heads per token), and no feature map or SPE contraction."""
    base = dict(vocab_size=50, n_layers=2, d_model=32, n_heads=4, d_ff=64, pe="sine_spe")
    linear = benchlib.forward_flops(ModelConfig(**base), 1, 10)
    mixed = benchlib.forward_flops(ModelConfig(**base, local_layers=[1], local_window=4), 1, 10)
    keys = sum(min(i + 1, 4) for i in range(10))  # 34 keys over the 10 queries
    assert mixed["dense"] == linear["dense"]
    assert mixed["attn"] == pytest.approx(linear["attn"] / 2 + 4 * keys * 8 * 4)
    assert mixed["spe"] < linear["spe"]  # one layer contracts q and k with the codes, not two


def test_interleaved_alternates_which_tree_goes_first():
    calls = []
    trees = [("new", Path("a")), ("base", Path("b"))]
    out = benchlib.interleaved(trees, 3, lambda label, tree: calls.append(label) or {"x": label})
    assert calls == ["new", "base", "base", "new", "new", "base"]
    assert [r["x"] for r in out["base"]] == ["base"] * 3


def test_perceiver_compare_first_tokens_and_flops():
    import perceiver_compare as pc

    from musicgen.config import load_config
    from musicgen.errors import MusicgenError

    model = {"per_segment": [2.0, 4.0, 9.0], "tokens_per_segment": [10, 30, 5]}
    assert pc.first_tokens_nll(model, 128, 256) == pytest.approx((20 + 120) / 40)
    with pytest.raises(MusicgenError, match="multiple"):
        pc.first_tokens_nll(model, 128, 200)
    root = Path(__file__).resolve().parents[1] / "configs" / "maestro"
    s, ar, lm = (
        load_config(root / f"compare_{a}.yaml")
        for a in ("perceiver_s", "perceiver_ar", "performer")
    )
    fs, far, flm = pc.step_flops(s), pc.step_flops(ar), pc.step_flops(lm)
    assert fs["blocks"] == far["blocks"] and flm["cross"] == 0
    assert fs["cross"] > far["cross"] > 0  # the scale layer costs something, not everything
    # equal trained tokens per step: B x n for the Perceivers, B x crop for the Performer
    p = s.model.perceiver
    assert s.train.batch_size * p.n_queries == lm.train.batch_size * lm.data.crop_len
    assert p.context_len == lm.data.crop_len == ar.model.perceiver.context_len
