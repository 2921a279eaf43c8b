"""Memory before allocation: what a model will take in RAM, checked against the machine's.

`config.MAX_PARAMETERS` refuses absurd sizes; a model under it may still not fit this machine
(1.6 B parameters with Adam need about 26 GB). `train` and `load` call the checks here before the
model is built, and refuse with the estimate in one line rather than ending in the OOM killer or
an internal error. The estimates are lower bounds of the big terms (float32 throughout):

- weights: 4 bytes a parameter (`config.parameter_estimate`);
- training adds the gradients (4) and Adam's two moments (8): 16 bytes a parameter, plus the
  activations kept for the backward pass at the crop: per token and layer about 12 x d_model +
  2 x d_ff floats, and the logits with their gradient, 2 x vocab floats, for batch x crop tokens;
- generation: the weights, plus one state row and one row of logits per sequence (small).
"""

from __future__ import annotations

import os
from pathlib import Path

from musicgen.config import Config, ModelConfig, parameter_estimate
from musicgen.errors import MusicgenError

FLOAT = 4  # bytes: the model computes in float32
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
FALLBACK_VOCAB = 512  # a config that takes its vocabulary from the data (0): about REMI's


def machine_bytes() -> int | None:
    """The RAM this process may use: the physical memory, or a container's (cgroup) limit
    where smaller; None where neither is readable."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for name in CGROUP_LIMITS:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total


def training_bytes(cfg: Config) -> int:
    """Weights, gradients, Adam's moments and the activations of one step at the crop."""
    m = cfg.model
    vocab = m.vocab_size or FALLBACK_VOCAB
    tokens = cfg.train.batch_size * cfg.data.crop_len
    per_token = m.n_layers * (12 * m.d_model + 2 * m.d_ff) + 2 * vocab
    return 16 * parameter_estimate(m) + FLOAT * tokens * per_token


def generation_bytes(m: ModelConfig, batch: int = 1) -> int:
    """The weights and, per sequence, a row of logits and a state of a d_model row per layer."""
    return FLOAT * (parameter_estimate(m) + batch * (m.vocab_size + m.n_layers * m.d_model))


def gb(n: float) -> str:
    """Bytes as a reader counts them: GB, or MB under one GB."""
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.0f} MB"


def check_fits(need: int, what: str, where: str, available: int | None = None) -> None:
    """A one-line refusal when `need` bytes exceed the machine's RAM (`machine_bytes`)."""
    have = machine_bytes() if available is None else available
    if have is not None and need > have:
        raise MusicgenError(
            f"{where}: {what} needs about {gb(need)} of memory, more than this machine's "
            f"{gb(have)}; choose a smaller model (model.n_layers, d_model, d_ff)"
        )


def device_bytes(device) -> int | None:
    """The memory of the device a run computes on: a GPU's own, else the machine's RAM."""
    if getattr(device, "type", "cpu") == "cuda":
        import torch

        return int(torch.cuda.get_device_properties(device).total_memory)
    return machine_bytes()


def check_training(cfg: Config, where: str, device=None, available: int | None = None) -> None:
    """`train`'s check, before anything is built, against the memory of the run's device."""
    have = device_bytes(device) if available is None else available
    check_fits(training_bytes(cfg), "training this model", where, have)


def check_generation(m: ModelConfig, where: str, available: int | None = None) -> None:
    """`load`'s check, before the model is built."""
    check_fits(generation_bytes(m), "this model", where, available)
