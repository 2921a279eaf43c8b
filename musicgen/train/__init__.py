"""Training: `train(cfg, out)` runs the stages of `run.py` (device, ranks, run folder, model,
data), the loop of `loop.py` (steps, validation, checkpoints) over the types of `state.py`, and
writes the log that `log.py` reads back. The trainer's names load on first use, so reading a
log (`train.log`, for plots and cards) does not import the trainer."""

from __future__ import annotations

import importlib

__all__ = ["StopRequest", "TrainResult", "make_optimizer", "step_seed", "train"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("musicgen.train.run"), name)
    raise AttributeError(f"module 'musicgen.train' has no attribute {name!r}")
