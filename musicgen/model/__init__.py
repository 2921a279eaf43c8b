"""The model layer: `build_model(cfg)` is the one place a model is built.

Registries (by name, as written in configs): `FEATURE_MAPS` (favor | relu), `ENCODINGS`
(`model.pe`: ape | ape_learned | sine_spe | conv_spe | none, each with its builder and the config
fields it reads, `encodings.py`) and `MUSICAL_SPE` (none | sine_spe: SPE in musical time,
`model.musical.spe`).
"""

from __future__ import annotations

from torch import nn

from musicgen.errors import MusicgenError
from musicgen.model.encodings import ENCODINGS, POSITIONAL_ENCODINGS
from musicgen.model.features import FEATURE_MAPS
from musicgen.model.musical import MUSICAL_SPE
from musicgen.model.perceiver import build_perceiver
from musicgen.model.transformer import Performer, PerformerState

REDRAW_POLICIES = ("never", "every", "prob")

__all__ = [
    "ENCODINGS",
    "FEATURE_MAPS",
    "MUSICAL_SPE",
    "POSITIONAL_ENCODINGS",
    "Performer",
    "PerformerState",
    "build_model",
]


def _check(cfg) -> None:
    def bad(name: str, value, valid) -> MusicgenError:
        return MusicgenError(f"model.{name}: unknown '{value}'; valid: {', '.join(valid)}")

    if cfg.pe not in POSITIONAL_ENCODINGS:
        raise bad("pe", cfg.pe, POSITIONAL_ENCODINGS)
    if cfg.feature_map not in FEATURE_MAPS:
        raise bad("feature_map", cfg.feature_map, FEATURE_MAPS)
    if cfg.redraw not in REDRAW_POLICIES:
        raise bad("redraw", cfg.redraw, REDRAW_POLICIES)
    for name in (
        "n_layers",
        "d_model",
        "n_heads",
        "d_ff",
        "n_features",
        "num_realizations",
        "num_sines",
        "kernel_size",
        "chunk_size",
        "max_len",
        "local_window",
    ):
        if getattr(cfg, name) <= 0:
            raise MusicgenError(f"model.{name}: must be > 0, got {getattr(cfg, name)}")
    if not 0.0 <= cfg.dropout < 1.0:
        raise MusicgenError(f"model.dropout: must be in [0, 1), got {cfg.dropout}")
    _check_musical(cfg)
    _check_local(cfg)


def _check_local(cfg) -> None:
    layers = list(cfg.local_layers)
    if any(not isinstance(i, int) or not 0 <= i < cfg.n_layers for i in layers):
        raise MusicgenError(
            f"model.local_layers: {layers}: each must be a block index in 0..{cfg.n_layers - 1}"
        )
    if len(set(layers)) != len(layers):
        raise MusicgenError(f"model.local_layers: {layers}: an index appears twice")
    if layers and cfg.head != "lm":
        raise MusicgenError(f"model.local_layers: not available with head '{cfg.head}' (only lm)")


def _check_musical(cfg) -> None:
    m = cfg.musical
    if m.spe not in MUSICAL_SPE:
        valid = ", ".join(MUSICAL_SPE)
        raise MusicgenError(f"model.musical.spe: unknown '{m.spe}'; valid: {valid}")
    if m.phrase_bars <= 0:
        raise MusicgenError(f"model.musical.phrase_bars: must be > 0, got {m.phrase_bars}")
    if m.notes_at_onset and not m.embed:
        raise MusicgenError("model.musical.notes_at_onset: needs model.musical.embed: true")
    if (m.embed or m.spe != "none") and cfg.head != "lm":
        raise MusicgenError(f"model.musical: not available with head '{cfg.head}' (only lm)")


def build_model(cfg, tokenizer=None) -> nn.Module:
    """Build the model a `ModelConfig` describes (head 'lm' or 'perceiver_s').

    `tokenizer` (the checkpoint's or the data's) is needed only with `model.musical` on: the model
    keeps its time tables to derive every token's musical position from the ids.
    """
    _check(cfg)
    if cfg.head == "lm":
        return Performer(cfg, tokenizer.time_tables() if tokenizer is not None else None)
    if cfg.head == "perceiver_s":
        return build_perceiver(cfg)
    raise MusicgenError(f"model.head: unknown '{cfg.head}'; valid: lm, perceiver_s")
