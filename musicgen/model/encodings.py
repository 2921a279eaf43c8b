"""The positional encodings by name: what each builds, from which `ModelConfig` fields, and how
it enters the model (added to the input, or SPE codes for every layer's q and k). A config's
`model.pe` picks one; `build_position_modules` is the only place that turns the name into
modules, so a new encoding is one entry here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from musicgen.model.positional import ConvSPE, LearnedPE, SineSPE, SinusoidalPE


@dataclass(frozen=True)
class Encoding:
    """One positional encoding: `kind` is "absolute" (a table added to the token embeddings),
    "spe" (codes contracted with q and k in every layer) or "none"; `build(cfg, max_len, tag)`
    makes its module from the config fields named in `params`."""

    name: str
    kind: str
    build: Callable[..., nn.Module] | None
    params: tuple[str, ...]
    summary: str


def _spe_shape(cfg) -> tuple[int, int, int]:
    return cfg.n_heads, cfg.d_model // cfg.n_heads, cfg.num_realizations


_SPE_PARAMS = ("n_heads", "d_model", "num_realizations")
ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding(
            "ape",
            "absolute",
            lambda cfg, max_len, tag: SinusoidalPE(cfg.d_model),
            ("d_model",),
            "sinusoidal absolute positions (Vaswani et al. 2017)",
        ),
        Encoding(
            "ape_learned",
            "absolute",
            lambda cfg, max_len, tag: LearnedPE(max_len, cfg.d_model),
            ("d_model", "max_len"),
            "a learned table of max_len absolute positions",
        ),
        Encoding(
            "sine_spe",
            "spe",
            lambda cfg, max_len, tag: SineSPE(*_spe_shape(cfg), cfg.num_sines, tag),
            (*_SPE_PARAMS, "num_sines", "gated", "spe_shared"),
            "sinusoidal stochastic positional encoding (Liutkus et al. 2021)",
        ),
        Encoding(
            "conv_spe",
            "spe",
            lambda cfg, max_len, tag: ConvSPE(*_spe_shape(cfg), cfg.kernel_size, tag),
            (*_SPE_PARAMS, "kernel_size", "gated", "spe_shared"),
            "convolutional stochastic positional encoding (Liutkus et al. 2021)",
        ),
        Encoding("none", "none", None, (), "no positional encoding"),
    )
}
POSITIONAL_ENCODINGS = tuple(ENCODINGS)
SPE_KINDS = tuple(name for name, e in ENCODINGS.items() if e.kind == "spe")


def build_position_modules(cfg, max_len: int, n_spe: int) -> tuple[nn.Module | None, nn.ModuleList]:
    """What a model adds for positions: an absolute table (of `max_len` rows where it has one)
    or its SPE modules (one shared by all layers, else `n_spe`), never both."""
    enc = ENCODINGS[cfg.pe]
    ape = enc.build(cfg, max_len, 0) if enc.kind == "absolute" else None
    spe = nn.ModuleList()
    if enc.kind == "spe":
        spe.extend(enc.build(cfg, max_len, tag) for tag in range(1 if cfg.spe_shared else n_spe))
    return ape, spe
