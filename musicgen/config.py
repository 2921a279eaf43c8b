"""Typed configuration: dataclasses <-> YAML, strict about unknown keys, with dotted overrides.

A run is described by one `Config` (data, model, optim, train, log; sample: the model's own
sampling defaults). Presets in `configs/` are YAML files that set some of its fields;
`--model.pe=sine_spe` style overrides change any field from the command line. Unknown keys and
wrong types are one-line errors that list what is valid. The ranges the types cannot express
(`validate`, `MODEL_RANGES`, `MAX_PARAMETERS`, ...) live in `config_ranges.py`, re-exported here.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from musicgen.config_ranges import (  # noqa: F401 (re-exported: the ranges' public names)
    COMBINES,
    HEADS,
    MAX_PARAMETERS,
    MAX_WORKERS,
    MODEL_RANGES,
    NORMS,
    PERCEIVER_CROSS,
    PRECISIONS,
    SCHEDULES,
    SEGMENTATIONS,
    parameter_estimate,
    validate,
    validate_model,
)
from musicgen.errors import MusicgenError


@dataclass
class PerceiverConfig:
    """Perceiver-S head (docs/perceiver.md): m context tokens read once, n query latents."""

    context_len: int = 4096  # m: tokens the cross-attention reads
    n_queries: int = 1024  # n: last positions that are queries / latents
    combine: str = "sum"  # how the two cross-attention outputs are merged: sum | sequential
    # both: causal + scale-masked cross-attention (Perceiver S) | full: causal only (Perceiver AR)
    cross: str = "both"
    # training examples: effective (end uniform in the song, reaches the head: Perceiver S) |
    # uniform (a full m + 1 window at a uniform random start: Perceiver AR's random crops)
    segmentation: str = "effective"


@dataclass
class MusicalConfig:
    """Musical position as model input (docs/model.md, "Musical position"); all off by default,
    which is also what every checkpoint saved before these keys existed means."""

    embed: bool = False  # add embeddings of (position in bar, beat, bar index mod phrase_bars)
    phrase_bars: int = 4  # phrase length in bars for the bar-index embedding
    spe: str = "none"  # none | sine_spe: SPE codes indexed by the onset in sub-beats
    notes_at_onset: bool = False  # with embed: also embed how many notes the onset holds so far


@dataclass
class ModelConfig:
    """The Performer; defaults are the SPE paper's music model (about 80 M parameters)."""

    vocab_size: int = 0  # 0 = take it from the tokenizer
    n_layers: int = 24
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    dropout: float = 0.1
    norm: str = "pre"  # pre | post (LayerNorm placement)
    max_len: int = 2048  # only for the learned absolute encoding (ape_learned)
    pe: str = "ape"  # registry name: ape | ape_learned | sine_spe | conv_spe | none
    gated: bool = False  # SPE gating (per layer and feature)
    spe_shared: bool = True  # one SPE module for all layers (the paper's music setting)
    num_sines: int = 5  # K for sine_spe
    kernel_size: int = 128  # P for conv_spe
    num_realizations: int = 64  # R for SPE
    feature_map: str = "favor"  # registry name: favor | relu
    n_features: int = 128  # FAVOR+ random features
    redraw: str = "prob"  # never | every | prob (FAVOR+ redraw during training)
    redraw_every: int = 40
    redraw_prob: float = 0.05
    backend: str = "torch"  # torch | fast_transformers (reference causal product)
    chunk_size: int = 64  # chunk length of the parallel causal linear attention
    local_layers: list[int] = field(default_factory=list)  # blocks with windowed softmax attention
    local_window: int = 256  # ... over the last this many positions (model/local.py)
    local_rope: bool = True  # rotary positions inside those blocks (relative distance)
    tie_embeddings: bool = False  # share the output head's weight with the token embedding
    head: str = "lm"  # lm | perceiver_s
    perceiver: PerceiverConfig = field(default_factory=PerceiverConfig)
    musical: MusicalConfig = field(default_factory=MusicalConfig)


@dataclass
class DataConfig:
    path: str = ""  # a folder written by `musicgen prepare`
    crop_len: int = 2048
    transpose: list[int] = field(default_factory=lambda: [-6, 6])  # inclusive semitone range
    drop_instrument_p: float = 0.0  # groove: drop each track with this probability
    random_start_bar: bool = True  # crops start at a random bar (else at the song's head)
    start_bar_every: int = 1  # ... whose index in the song is a multiple of this (phrase_bars)
    start_at_sections: bool = False  # songs with section tokens: crops start where a phrase does
    workers: int = 0  # DataLoader worker processes


@dataclass
class OptimConfig:
    lr: float = 2e-4
    min_lr: float = 5e-6
    warmup_steps: int = 200
    schedule: str = "cosine"  # cosine | constant
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    weight_decay: float = 0.0
    grad_clip: float = 0.5


@dataclass
class TrainConfig:
    batch_size: int = 4
    grad_accum: int = 1
    max_steps: int = 100_000
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda | mps
    precision: str = "auto"  # auto (bf16 on CUDA and bf16 CPUs, else fp32) | fp32 | bf16 | fp16
    val_every: int = 500
    val_songs: int = 32  # held-out songs per validation
    val_max_len: int = 4096  # validate per position up to here (2 x crop: extrapolation)
    val_seeds: int = 3  # seeded SPE noise draws averaged per validation song (>= 1)
    ckpt_every: int = 500
    keep_last: int = 2
    max_minutes: float = 0.0  # stop (and checkpoint) after this wall time; 0 = no limit
    compile: bool = False
    init_from: str = ""  # fine-tune: start from this checkpoint's weights (ignored on resume)


@dataclass
class LogConfig:
    every: int = 10


class SampleConfig(dict):
    """The model's own sampling defaults, chosen by measurement and kept with its weights
    (docs/evaluation.md, "Sampling defaults"): option name -> value, None or absent: the
    tokenizer's paper setting. The names and ranges are the sampling options' (declared in the
    generation layer, above this one: `generation.api.options.check_sample` checks them where a
    model is loaded to generate); here each value is a finite number. Training does not read
    them. `sample.temperature` reads one (None where unset)."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)


def _sample(value: Any, where: str, label: str) -> SampleConfig:
    """A `sample:` section: a mapping of names to finite numbers (or null)."""
    if not isinstance(value, dict):
        raise MusicgenError(f"{label}: '{where}' must be a mapping, got {value!r}")
    out = SampleConfig()
    for name, v in value.items():
        at = f"{where}.{name}"
        out[str(name)] = (
            None if v is None else _coerce(v, int if isinstance(v, int) else float, at, label)
        )
    return out


@dataclass
class Config:
    name: str = "run"
    tokenizer: str = "remi"  # name of the tokenizer the data was prepared with (checked at start)
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    log: LogConfig = field(default_factory=LogConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)


# ---------------------------------------------------------------------------------------------
# dict <-> dataclass


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str, label: str = "config") -> Any:
    """Check (and gently convert) `value` to the annotated type `tp`; errors start `label: `."""
    origin = typing.get_origin(tp)
    if tp is SampleConfig:
        return _sample(value, where, label)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise MusicgenError(f"{label}: '{where}' must be a mapping, got {value!r}")
        return from_dict(tp, value, where, label)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise MusicgenError(f"{label}: '{where}' must be a list, got {value!r}")
        (item_tp,) = typing.get_args(tp)[:1] or (Any,)
        return [_coerce(v, item_tp, f"{where}[{i}]", label) for i, v in enumerate(value)]
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg, where, label)
            except MusicgenError:
                continue
        raise MusicgenError(f"{label}: '{where}' has the wrong type: {value!r}")
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is bool and not isinstance(value, bool):
        raise MusicgenError(f"{label}: '{where}' must be true or false, got {value!r}")
    if tp in (int, float) and isinstance(value, bool):
        raise MusicgenError(f"{label}: '{where}' must be {_type_name(tp)}, got {value!r}")
    if tp in (int, float, str) and not isinstance(value, tp):
        raise MusicgenError(f"{label}: '{where}' must be {_type_name(tp)}, got {value!r}")
    if tp is float and not math.isfinite(value):
        raise MusicgenError(f"{label}: '{where}' must be a finite number, got {value!r}")
    if tp is type(None) and value is not None:
        raise MusicgenError(f"{label}: '{where}' must be null")
    return value


def from_dict(cls: type, data: dict, where: str = "", label: str = "config") -> Any:
    """Build dataclass `cls` from a (possibly partial) dict; unknown keys are errors."""
    if not isinstance(data, dict):
        raise MusicgenError(f"{label}: '{where or cls.__name__}' must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in data if k not in names]
    if unknown:
        prefix = f"{where}." if where else ""
        raise MusicgenError(
            f"{label}: unknown key '{prefix}{unknown[0]}'; valid keys"
            f"{' of ' + where if where else ''}: {', '.join(names)}"
        )
    kwargs = {}
    for key, value in data.items():
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}" if where else key, label)
    return cls(**kwargs)


def to_dict(cfg: Any) -> dict:
    """Plain dicts and lists all through (a checkpoint's pickle allows no other class)."""
    return dataclasses.asdict(cfg, dict_factory=lambda items: {k: _plain(v) for k, v in items})


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, SampleConfig) else value


def _parse_scalar(text: str) -> Any:
    """Command-line values are YAML scalars: 4, 2e-4, true, [−6, 6], sine_spe."""
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str):  # YAML 1.1 reads "2e-4" as a string; users mean a number
        try:
            return float(value)
        except ValueError:
            pass
    return value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply `section.key=value` (or `--section.key=value`) strings to a nested dict."""
    data = _deep_copy(data)
    for item in overrides:
        text = item[2:] if item.startswith("--") else item
        if "=" not in text:
            raise MusicgenError(f"config: override '{item}' must look like --section.key=value")
        dotted, raw = text.split("=", 1)
        keys = dotted.split(".")
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise MusicgenError(f"config: '{dotted}' does not name a config field")
        node[keys[-1]] = _parse_scalar(raw)
    return data


def _deep_copy(d: dict) -> dict:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in d.items()}


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise MusicgenError(f"{path}: config file not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise MusicgenError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise MusicgenError(f"{path}: a config file must be a mapping of sections")
    return data


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a preset file or name (which may name a `base:` preset it extends) and apply
    overrides."""
    from musicgen.resources import resolve_config

    data: dict = {}
    if path is not None:
        data = _load_with_base(resolve_config(path))  # a file, or a preset name: pop909/small
    data = apply_overrides(data, overrides or [])
    return validate(from_dict(Config, data))


def _load_with_base(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(p.name for p in (*seen, path))
        raise MusicgenError(f"{seen[0]}: 'base:' presets form a cycle ({chain})")
    data = load_yaml(path)
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise MusicgenError(f"{path}: 'base' must be the path of another preset, got {base!r}")
    merged = _load_with_base(path.parent / base, (*seen, path))
    _deep_merge(merged, data)
    return merged


def _deep_merge(dst: dict, src: dict) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v


def config_from_dict(data: dict) -> Config:
    """Rebuild a Config saved in a checkpoint."""
    return validate(from_dict(Config, data))
