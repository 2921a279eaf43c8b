"""Typed config: strict keys (the valid ones listed), types checked, dotted overrides, presets."""

from pathlib import Path

import pytest

from musicgen.config import Config, apply_overrides, config_from_dict, load_config, to_dict
from musicgen.errors import MusicgenError

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(
    p
    for p in (ROOT / "configs").glob("*/*.yaml")
    if p.parent.name != "tokenizer" and not p.name.startswith("_")
)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_preset_loads_and_round_trips(preset):
    cfg = load_config(preset)
    assert config_from_dict(to_dict(cfg)) == cfg
    assert cfg.name != "run"


def test_paper_settings_in_presets():
    ape = load_config(ROOT / "configs/pop909/ape.yaml")
    spe = load_config(ROOT / "configs/pop909/conv_spe_gated.yaml")
    assert (ape.model.n_layers, ape.model.d_model, ape.model.n_heads, ape.model.d_ff) == (
        24,
        512,
        8,
        2048,
    )
    assert ape.optim.lr == 1e-4 and spe.optim.lr == 2e-4
    assert spe.model.pe == "conv_spe" and spe.model.gated and spe.model.kernel_size == 128
    assert ape.data.crop_len == 2048 and ape.train.batch_size == 4 and ape.optim.grad_clip == 0.5
    groove = load_config(ROOT / "configs/groove/sine_spe_gated.yaml")
    assert groove.model.num_sines == 8 and groove.optim.warmup_steps == 1000
    assert groove.train.batch_size == 10 and groove.data.transpose == [-5, 6]


def test_unknown_key_lists_valid_keys(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("model:\n  n_layer: 4\n")
    with pytest.raises(MusicgenError) as err:
        load_config(f)
    msg = str(err.value)
    assert "unknown key 'model.n_layer'" in msg and "n_layers" in msg and "\n" not in msg


def test_wrong_type_is_an_error():
    with pytest.raises(MusicgenError, match="'train.batch_size' must be int"):
        load_config(None, ["--train.batch_size=four"])
    with pytest.raises(MusicgenError, match="'model.gated' must be true or false"):
        load_config(None, ["model.gated=3"])


def test_dotted_overrides_parse_yaml_scalars():
    cfg = load_config(
        None,
        [
            "--model.pe=sine_spe",
            "--optim.lr=2e-4",
            "--data.transpose=[-3, 4]",
            "--train.max_steps=7",
        ],
    )
    assert cfg.model.pe == "sine_spe" and cfg.optim.lr == 2e-4
    assert cfg.data.transpose == [-3, 4] and cfg.train.max_steps == 7
    assert cfg.optim.lr == pytest.approx(2e-4)


def test_sample_section_is_typed_and_ranged():
    """The model's own sampling defaults: a mapping of finite numbers, None where unset; their
    names and ranges are the sampling options' (`generation.api.options.check_sample`)."""
    from musicgen.generation.api.options import check_sample

    assert Config().sample == {} and Config().sample.temperature is None
    cfg = load_config(None, ["sample.temperature=1.0", "sample.top_p=0.95"])
    assert (cfg.sample.temperature, cfg.sample.top_p, cfg.sample.top_k) == (1.0, 0.95, None)
    assert config_from_dict(to_dict(cfg)) == cfg
    for override, message in (
        ("sample.temperature=abc", "config: 'sample.temperature' must be float"),
        ("sample.top_k=true", "config: 'sample.top_k' must be int"),
    ):
        with pytest.raises(MusicgenError, match=message):
            load_config(None, [override])
    for override, message in (
        ("sample.temperature=-1", "config: sample.temperature: must be 0 or >= 0.01"),
        ("sample.top_p=0", "config: sample.top_p"),
        ("sample.top_p=1.5", "config: sample.top_p"),
        ("sample.top_k=-2", "config: sample.top_k"),
        ("sample.repeat=-0.5", "config: sample.repeat: must be >= 0"),
        ("sample.guidance=11", "config: sample.guidance: must be >= 0 and <= 10"),
        ("sample.temp=1", "config: sample: unknown option 'temp'"),
    ):
        with pytest.raises(MusicgenError, match=message):
            check_sample(load_config(None, [override]).sample)


def test_override_needs_equals_sign():
    with pytest.raises(MusicgenError, match="--section.key=value"):
        apply_overrides({}, ["--model.pe"])


def test_defaults_are_the_paper_model():
    m = Config().model
    assert (m.n_layers, m.d_model, m.n_heads, m.d_ff, m.n_features, m.num_realizations) == (
        24,
        512,
        8,
        2048,
        128,
        64,
    )
