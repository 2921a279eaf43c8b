"""Training: `train(cfg, out)` runs the stages of `run.py` (device, ranks, run folder, model,
data), the loop of `loop.py` (steps, validation, checkpoints) over the types of `state.py`, and
writes the log that `log.py` reads back."""

from musicgen.train.run import StopRequest, TrainResult, make_optimizer, step_seed, train

__all__ = ["StopRequest", "TrainResult", "make_optimizer", "step_seed", "train"]
