"""The training summary an exported checkpoint keeps (and its model card quotes): a run's log
condensed into steps, wall time, tokens and best validation, with a fine-tune's `init_from` chain
back to the phase trained from scratch (scripts/reproduce/export_checkpoint.py)."""

from __future__ import annotations

import json
from pathlib import Path

from musicgen.checkpoint import load_checkpoint
from musicgen.config import Config, to_dict
from musicgen.train.log import read_log


def tokens_per_step(cfg: Config) -> int:
    """Trained (target) tokens per step: a crop's every position, or a Perceiver's n queries."""
    per_example = cfg.model.perceiver.n_queries if cfg.model.head == "perceiver_s" else None
    return cfg.train.batch_size * cfg.train.grad_accum * (per_example or cfg.data.crop_len)


def run_summary(run: Path, step: int, tokens_per_step: int) -> dict:
    """Steps, wall time, tokens and best validation of the run folder `run` (its log.jsonl)."""
    rows = read_log(run)
    train = [r for r in rows if r["kind"] == "train"]
    val = [r for r in rows if r["kind"] == "val"]
    best = min(val, key=lambda r: r["loss"]) if val else None
    seconds, last = 0.0, 0.0  # each resumed process restarts its clock: add up the processes
    for r in train:
        if r["time"] < last:
            seconds += last
        last = r["time"]
    steps = train[-1]["step"] if train else 0
    return {
        "step": step,
        "steps_trained": steps,
        "train_minutes": round((seconds + last) / 60, 1),
        "tokens_trained": steps * tokens_per_step,
        "tokens_per_s": round(steps * tokens_per_step / (seconds + last)) if train else None,
        "final_train_loss": train[-1]["loss"] if train else None,
        "best_validation": best,
    }


def base_summary(base: Path) -> dict:
    """The summary of the run a fine-tune started from, with its own `init_from` in turn (a chain
    of phases, the first trained from scratch), and that run's config: an exported model
    (a shipped folder) is later replaced by the model trained from it, so its card must not
    need the file. An export brings its own summary; a run's checkpoint is summarised from its
    log."""
    loaded = load_checkpoint(base)
    cfg, stored = loaded.config, loaded.train_state.get("summary")
    if stored:  # exported: its summary (and chain) as it was shipped
        out = {"path": str(base), **json.loads(stored), "config": to_dict(cfg)}
        out["step"] = 0  # this run starts from it; where it stopped is in steps_trained
        return out
    out = {
        "path": str(base),
        **run_summary(base.parent if base.suffix == ".pt" else base, 0, tokens_per_step(cfg)),
        "config": to_dict(cfg),
    }
    if cfg.train.init_from:
        out["init_from"] = base_summary(Path(cfg.train.init_from))
    return out


def export_summary(run: Path, cfg: Config, step: int, base: Path | None = None) -> dict:
    """What an exported checkpoint keeps of its training: this run's summary at `step` and, for
    a fine-tune, the summary of the run it started from (and so on back); `base`, that run's
    exported folder, stands in for the run's own `init_from`."""
    info = run_summary(run, step, tokens_per_step(cfg))
    if base is not None or cfg.train.init_from:
        info["init_from"] = base_summary(Path(base or cfg.train.init_from))
    return info
