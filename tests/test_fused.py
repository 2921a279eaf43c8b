"""The fused generation step (`model/fused.py`): its pieces against the modules' maths, the
per-block tables it slices, the ring buffer, and weight-only int8 decoding."""

from __future__ import annotations

import pytest
import torch
from test_model import _tiny, _trained

from musicgen.errors import MusicgenError
from musicgen.model import build_model
from musicgen.model.fused import _gelu, quantize_int8
from musicgen.model.local import rotary, rotations
from musicgen.model.transformer import STEP_BLOCK


@pytest.mark.parametrize("start", [0, 61, 100_000])
def test_rotation_matrices_turn_like_rotary(start):
    x = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(0))
    r = rotations(start, 5, 8, "cpu")  # (5, 8, 8)
    turned = torch.stack([x[:, :, t] @ r[t] for t in range(5)], 2)
    assert torch.allclose(turned, rotary(x, start), atol=1e-5)
    eye = torch.eye(8).expand(5, 8, 8)
    assert torch.allclose(r @ r.transpose(-1, -2), eye, atol=1e-5)  # rotations


def test_ring_buffer_attends_to_exactly_the_last_window_keys():
    """Past the window, a step sees the last `window` keys whatever slot they sit in."""
    model = _trained(_tiny(pe="ape", local_layers=[0, 1], local_window=5))
    ids = torch.randint(0, 40, (1, 23), generator=torch.Generator().manual_seed(4))
    with torch.inference_mode():
        state = model.init_state(1, "cpu", seed=0)
        for t in range(23):
            step, state = model.step(ids[:, t], state)
        full = model(ids)[:, -1]
    assert state.layers[0].k.shape[2] == 5 and state.layers[0].pos == 23
    assert (step - full).abs().max() <= 1e-4


def test_spe_tables_are_made_once_per_block_and_follow_a_jump():
    model = _trained(_tiny(pe="sine_spe", gated=True))
    with torch.inference_mode():
        state = model.init_state(1, "cpu", seed=3)
        for t in range(STEP_BLOCK + 1):
            model.step(torch.tensor([t % 40]), state)
            first = state.code_block[0]
            assert first == (0 if t < STEP_BLOCK else STEP_BLOCK)
        state.pos = 10_000
        model.step(torch.tensor([1]), state)
    assert state.code_block[0] == 10_000 - 10_000 % STEP_BLOCK


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_the_steps_gelu_is_torchs_up_to_rounding(approximate):
    x = torch.randn(4096, generator=torch.Generator().manual_seed(2)) * 4
    want = torch.nn.functional.gelu(x, approximate=approximate)
    got = _gelu(x.clone(), approximate)
    assert torch.allclose(got, want, rtol=1e-6, atol=2e-6)


def test_int8_rows_round_trip_within_half_a_step():
    w = torch.randn(12, 20, generator=torch.Generator().manual_seed(0))
    q, scales = quantize_int8(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127 and scales.shape == (12,)
    back = q.float() * scales.float()[:, None]
    # rounding to the grid (half a step) plus the bf16 scale's own rounding (2^-8 of |w|)
    bound = scales.float()[:, None] / 2 + w.abs().amax(1, keepdim=True) * 2**-8
    assert ((back - w).abs() <= bound + 1e-7).all()


@pytest.mark.parametrize("variant", [dict(pe="sine_spe", gated=True), dict(pe="ape")])
def test_int8_step_is_close_and_can_be_turned_off(variant):
    model = _trained(_tiny(**variant, local_layers=[1], local_window=6))
    ids = torch.randint(0, 40, (2, 30), generator=torch.Generator().manual_seed(5))

    def run() -> torch.Tensor:
        with torch.inference_mode():
            state = model.init_state(2, "cpu", seed=7)
            out = torch.stack([model.step(ids[:, t], state)[0] for t in range(30)], 1)
        window = state.layers[1].k.dtype  # the local layer's keys: bf16 with int8 weights
        assert window == (torch.bfloat16 if model.int8_weights is not None else torch.float32)
        assert out.dtype == torch.float32
        return out

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return model(ids, noise=model.new_noise("cpu", seed=7))

    floats, scored = run(), forward()
    model.use_int8()
    quant = run()
    assert torch.equal(forward(), scored)  # forward (training, scoring) keeps the floats
    model.use_int8(False)
    assert torch.equal(run(), floats)  # back to the float weights exactly
    p, q = floats.log_softmax(-1), quant.log_softmax(-1)
    kl = (p.exp() * (p - q)).sum(-1)  # per position
    assert 0 < kl.max() < 1e-2  # int8 is not the float step, but close


def test_int8_is_refused_off_the_cpu_and_loads_through_the_api(tiny_checkpoints):
    model = build_model(_tiny(pe="ape"))
    model.to("meta")
    with pytest.raises(MusicgenError, match="int8: weight-only int8 decoding runs on the CPU"):
        model.use_int8()
    from musicgen.generation.api import load

    loaded = load(tiny_checkpoints["remi"], int8=True)
    assert loaded.model.int8_weights is not None
    assert loaded.generate(2, seed=1, max_tokens=40).sampled > 0
