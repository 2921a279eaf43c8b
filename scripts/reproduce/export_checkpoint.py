"""Turn a training run into a shippable checkpoint: half-precision weights, no optimiser state.

    python scripts/reproduce/export_checkpoint.py runs/pop909_sine_spe_gated checkpoints/pop909_sine_spe_gated

Reads RUN/best.pt (or last.pt), keeps the config, tokenizer and a summary of the training
(step, wall time, best validation loss, the validation record; for a fine-tune, `init_from`
holds the same summary of the run it started from, and so on back to the first phase) and
writes OUT/model.pt, which `load_checkpoint` reads like any other checkpoint. SPE parameters
and gates stay float32 (`musicgen.checkpoint.full_precision_names`): rounding them would shift
the positional kernel's phase by radians at long lags. Prints the summary as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from musicgen.checkpoint import load_checkpoint, save_checkpoint
from musicgen.runlog import read_log


def base_summary(base: Path) -> dict:
    """The summary of the run a fine-tune started from, with its own `init_from` in turn (a chain
    of phases, the first trained from scratch)."""
    cfg = load_checkpoint(base).config
    out = {
        "path": str(base),
        **summary(base.parent if base.suffix == ".pt" else base, 0, tokens_per_step(cfg)),
    }
    if cfg.train.init_from:
        out["init_from"] = base_summary(Path(cfg.train.init_from))
    return out


def summary(run: Path, step: int, tokens_per_step: int) -> dict:
    rows = read_log(run)
    train = [r for r in rows if r["kind"] == "train"]
    val = [r for r in rows if r["kind"] == "val"]
    best = min(val, key=lambda r: r["loss"]) if val else None
    seconds, last = 0.0, 0.0  # each resumed process restarts its clock: add up the sessions
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


def tokens_per_step(cfg) -> int:
    """Trained (target) tokens per step: a crop's every position, or a Perceiver's n queries."""
    per_example = cfg.model.perceiver.n_queries if cfg.model.head == "perceiver_s" else None
    return cfg.train.batch_size * cfg.train.grad_accum * (per_example or cfg.data.crop_len)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--which", default="best.pt", help="checkpoint of the run to ship")
    args = ap.parse_args()
    src = args.run / args.which
    loaded = load_checkpoint(src)
    t = loaded.config.train
    info = summary(args.run, int(loaded.train_state.get("step", 0)), tokens_per_step(loaded.config))
    if t.init_from:  # a fine-tune: the run it started from, summarised the same way
        info["init_from"] = base_summary(Path(t.init_from))
    path = save_checkpoint(
        args.out / "model.pt",
        loaded.model,
        loaded.config,
        loaded.tokenizer,
        train_state={"step": info["step"], "summary": json.dumps(info)},
        half=True,
    )
    info["file"] = str(path)
    info["megabytes"] = round(path.stat().st_size / 1e6, 2)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
