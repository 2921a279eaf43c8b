"""The Performer: one interface for every positional encoding; parallel == step; causality."""

from __future__ import annotations

import pytest
import torch

from musicgen.config import ModelConfig
from musicgen.errors import MusicgenError
from musicgen.model import ENCODINGS, build_model
from musicgen.model.positional import NOISE_BLOCK

TRAIN_LEN = 16


def _tiny(**kw) -> ModelConfig:
    base = dict(
        vocab_size=40,
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        n_features=16,
        num_realizations=8,
        kernel_size=6,
        num_sines=3,
        chunk_size=8,
        max_len=512,
        redraw="every",
        redraw_every=1,
    )
    base.update(kw)
    return ModelConfig(**base)


def _trained(cfg: ModelConfig, steps: int = 4) -> torch.nn.Module:
    """A few Adam steps on crops of TRAIN_LEN tokens (with FAVOR+ redraws), then eval mode."""
    torch.manual_seed(0)
    model = build_model(cfg).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for step in range(steps):
        ids = torch.randint(0, cfg.vocab_size, (3, TRAIN_LEN + 1), generator=g)
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        model.on_train_step(step + 1)
    return model.eval()


VARIANTS = [
    dict(pe="ape"),
    dict(pe="ape_learned"),
    dict(pe="none"),
    dict(pe="sine_spe"),
    dict(pe="sine_spe", gated=True),
    dict(pe="conv_spe"),
    dict(pe="conv_spe", gated=True),
    dict(pe="sine_spe", gated=True, spe_shared=False, norm="post"),
    dict(pe="conv_spe", feature_map="relu"),
    dict(pe="ape", local_layers=[1], local_window=5),  # windowed softmax in block 1 (local.py)
    dict(pe="sine_spe", gated=True, local_layers=[0], local_window=7),  # with rotary (default)
    dict(pe="ape", local_layers=[0], local_window=6, local_rope=False),
]


def _name(v: dict) -> str:
    return "-".join(f"{k}={val}" for k, val in v.items())


@pytest.mark.parametrize("variant", VARIANTS, ids=_name)
def test_parallel_matches_step_by_step_past_training_length(variant):
    model = _trained(_tiny(**variant))
    n = NOISE_BLOCK + 30 if variant["pe"] == "conv_spe" else 5 * TRAIN_LEN  # conv: cross a block
    ids = torch.randint(0, 40, (2, n), generator=torch.Generator().manual_seed(2))
    state = model.init_state(2, "cpu", seed=11)
    with torch.no_grad():
        full = model(ids, noise=state.noise)
        steps = []
        for t in range(n):
            logits, state = model.step(ids[:, t], state)
            steps.append(logits)
    assert state.pos == n
    assert full.shape == (2, n, 40)
    assert (torch.stack(steps, 1) - full).abs().max() <= 1e-4


@pytest.mark.parametrize("variant", VARIANTS, ids=_name)
def test_fused_generation_step_equals_the_modules_step(variant):
    """Without autograd `step` runs each block's fused one-token step; with autograd on, the
    modules' forward with a cache: the same logits (up to float rounding) and the same state."""
    model = _trained(_tiny(**variant))
    ids = torch.randint(0, 40, (2, 40), generator=torch.Generator().manual_seed(3))
    fused, plain = model.init_state(2, "cpu", seed=5), model.init_state(2, "cpu", seed=5)
    for t in range(ids.shape[1]):
        with torch.inference_mode():
            a, fused = model.step(ids[:, t], fused)
        with torch.enable_grad():
            b, plain = model.step(ids[:, t], plain)
        assert (a - b.detach()).abs().max() <= 1e-5
    for x, y in zip(fused.layers, plain.layers, strict=True):
        assert torch.allclose(
            x.s if hasattr(x, "s") else x.k, (y.s if hasattr(y, "s") else y.k).detach(), atol=1e-5
        )


@pytest.mark.parametrize("variant", VARIANTS, ids=_name)
def test_causality_gradient_after_t_is_exactly_zero(variant):
    torch.manual_seed(0)
    model = build_model(_tiny(**variant)).eval()
    captured = {}

    def keep(_module, _inp, out):
        out.retain_grad()
        captured["x"] = out

    model.embed.register_forward_hook(keep)
    ids = torch.randint(0, 40, (2, 30))
    t = 13
    model(ids, noise=model.new_noise("cpu", seed=0))[:, t].sum().backward()
    grad = captured["x"].grad  # (B, N, d_model)
    assert torch.count_nonzero(grad[:, t + 1 :]) == 0
    assert grad[:, : t + 1].abs().sum(-1).min() > 0  # every past position matters


@pytest.mark.parametrize("pe", ["ape", "sine_spe", "conv_spe"])
def test_save_load_round_trip_reproduces_outputs_exactly(pe, tmp_path):
    model = _trained(_tiny(pe=pe, gated=pe != "ape"), steps=2)
    path = tmp_path / "m.pt"
    torch.save(model.state_dict(), path)
    torch.manual_seed(123)  # a fresh model gets other random features and parameters
    fresh = build_model(_tiny(pe=pe, gated=pe != "ape"))
    fresh.load_state_dict(torch.load(path, weights_only=True))
    fresh.eval()
    ids = torch.randint(0, 40, (2, 40))
    with torch.no_grad():
        a = model(ids, noise=model.new_noise("cpu", seed=9))
        b = fresh(ids, noise=fresh.new_noise("cpu", seed=9))
        sa, sb = model.init_state(2, "cpu", seed=9), fresh.init_state(2, "cpu", seed=9)
        for t in range(5):
            la, sa = model.step(ids[:, t], sa)
            lb, sb = fresh.step(ids[:, t], sb)
            assert torch.equal(la, lb)
    assert torch.equal(a, b)
    assert any(k.endswith("features.proj") for k in fresh.state_dict())


def test_spe_noise_is_fresh_per_forward_and_shared_by_the_batch():
    torch.manual_seed(0)
    model = build_model(_tiny(pe="conv_spe")).eval()
    ids = torch.randint(0, 40, (1, 20)).repeat(3, 1)
    with torch.no_grad():
        a, b = model(ids), model(ids)
    assert not torch.allclose(a, b)  # a new draw per forward
    assert torch.equal(a[0], a[1]) and torch.equal(a[0], a[2])  # one draw for the whole batch


@pytest.mark.parametrize("pe", ["sine_spe", "conv_spe", "ape"])
def test_step_far_past_training_length(pe):
    torch.manual_seed(0)
    model = build_model(_tiny(pe=pe)).eval()
    state = model.init_state(2, "cpu", seed=1)
    state.pos = 100_000  # e.g. after a very long prompt
    with torch.no_grad():
        for t in range(3):
            logits, state = model.step(torch.tensor([t, t + 1]), state)
            assert logits.shape == (2, 40) and torch.isfinite(logits).all()
    assert state.pos == 100_003


def test_learned_ape_refuses_to_step_past_max_len():
    model = build_model(_tiny(pe="ape_learned", max_len=4)).eval()
    state = model.init_state(1, "cpu")
    with torch.no_grad():
        for t in range(4):
            model.step(torch.tensor([t]), state)
        with pytest.raises(MusicgenError, match="model.max_len"):
            model.step(torch.tensor([0]), state)


def test_bf16_autocast_forward_backward_and_step():
    torch.manual_seed(0)
    model = build_model(_tiny(pe="sine_spe", gated=True)).train()
    ids = torch.randint(0, 40, (2, 24))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids)
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    logits.float().logsumexp(-1).mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    state = model.init_state(2, "cpu", seed=0)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        step_logits, _ = model.step(ids[:, 0], state)
        ref = model(ids[:, :1], noise=model.new_noise("cpu", seed=0))[:, 0]
    assert (step_logits.float() - ref.float()).abs().max() < 0.1


def test_default_config_is_the_papers_music_model():
    model = build_model(ModelConfig(vocab_size=340))
    n = sum(p.numel() for p in model.parameters())
    assert 70e6 < n < 85e6  # about 76 M with a 340-token vocabulary (paper: "about 80 M")
    assert len(model.blocks) == 24 and model.blocks[0].attn.features.proj.shape == (128, 64)
    spe = build_model(ModelConfig(vocab_size=340, pe="sine_spe", n_layers=2))
    assert spe.blocks[0].attn.features.proj.shape == (128, 64)  # FAVOR+ sees R = 64 inputs
    assert len(spe.spe) == 1  # one shared SPE module


def test_weight_tying_is_optional():
    untied = build_model(_tiny())
    assert untied.head.weight is not untied.embed.weight
    tied = build_model(_tiny(tie_embeddings=True))
    assert tied.head.weight is tied.embed.weight


@pytest.mark.parametrize(
    "override,match",
    [
        (dict(pe="rope"), "model.pe"),
        (dict(feature_map="elu"), "model.feature_map"),
        (dict(redraw="sometimes"), "model.redraw"),
        (dict(vocab_size=0), "model.vocab_size"),
        (dict(n_heads=3), "model.n_heads"),
        (dict(norm="sandwich"), "model.norm"),
        (dict(head="mlp"), "model.head"),
    ],
)
def test_bad_config_is_a_one_line_error(override, match):
    with pytest.raises(MusicgenError, match=match) as err:
        build_model(_tiny(**override))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("head", ["lm", "perceiver_s"])
def test_init_state_noise_from_a_generator_or_the_global_rng(head):
    """A caller's generator alone fixes the SPE noise; without one the global RNG does."""
    model = build_model(_tiny(pe="sine_spe", head=head)).eval()
    seeds = [
        model.init_state(1, "cpu", generator=torch.Generator().manual_seed(4)).noise.seed
        for _ in range(2)
    ]
    torch.manual_seed(0)
    first = model.init_state(1, "cpu", generator=torch.Generator().manual_seed(5)).noise.seed
    assert seeds[0] == seeds[1] != first
    torch.manual_seed(3)
    expected = int(torch.randint(0, 2**62, ()).item())
    torch.manual_seed(3)
    assert model.init_state(1, "cpu").noise.seed == expected
    assert model.init_state(1, "cpu", seed=8).noise.seed == 8


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_every_registered_encoding_builds_from_its_own_fields(name):
    """Each registry entry builds the module its kind says, from the config fields it names."""
    enc = ENCODINGS[name]
    assert all(hasattr(ModelConfig(), f) for f in enc.params)
    model = build_model(_tiny(pe=name))
    assert (model.ape is not None) == (enc.kind == "absolute")
    assert (len(model.spe) > 0) == (enc.kind == "spe") == model.uses_spe
    ids = torch.randint(0, 40, (1, 12))
    assert model(ids).shape == (1, 12, 40)


def test_an_unknown_encoding_lists_the_registry():
    with pytest.raises(
        MusicgenError, match="model.pe: unknown 'rope'; valid: " + ", ".join(ENCODINGS)
    ):
        build_model(_tiny(pe="rope"))
