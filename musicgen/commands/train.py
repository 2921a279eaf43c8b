"""`musicgen train`: a preset YAML + dotted overrides -> a run folder of checkpoints and logs."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a model on a prepared dataset",
        description="Train on the output of `musicgen prepare`. Any config field can be overridden "
        "with --section.key=value (e.g. --train.max_steps=100 --model.pe=sine_spe).",
    )
    p.add_argument(
        "--config", required=True, help="a preset YAML file or a preset name, e.g. pop909/small"
    )
    p.add_argument("--data", help="prepared dataset folder (overrides data.path)")
    p.add_argument("--out", help="run folder (default: runs/<config name>)")
    p.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last.pt exactly")
    p.add_argument(
        "--force",
        action="store_true",
        help="if --out holds a run, move that folder aside to OUT.old-N first and start anew "
        "(without it, a run in --out is refused unless --resume)",
    )
    p.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from musicgen.config import load_config
    from musicgen.device import pick_device
    from musicgen.memory import check_training
    from musicgen.train.run import train

    cfg = load_config(args.config, list(args.overrides or []))
    if args.data:
        cfg.data.path = args.data
    out = Path(args.out) if args.out else Path("runs") / cfg.name
    if args.force:
        _force(out, args.resume)
    device = pick_device(cfg.train.device, int(os.environ.get("LOCAL_RANK", 0)))
    check_training(cfg, str(args.config), device)  # before a folder or a model is made
    existed = out.exists()
    try:
        result = train(cfg, out, resume=args.resume)
    except BaseException:
        if not existed:
            _remove_if_empty(out)
        raise
    print(f"wrote {result.last} (step {result.step})")
    return 0


def _remove_if_empty(out: Path) -> None:
    """A run folder this command made and a failure left with nothing but its `.lock`: gone, so
    that a failed `train` leaves no trace (a run that wrote anything keeps it)."""
    try:
        if {p.name for p in out.iterdir()} <= {".lock"}:
            (out / ".lock").unlink(missing_ok=True)
            out.rmdir()
    except OSError:
        pass


def _force(out: Path, resume: bool) -> None:
    """--force: the run in `out` moved aside (`train_state.move_run_aside`), said in one line."""
    from musicgen.errors import MusicgenError
    from musicgen.train.state import move_run_aside

    if resume:
        raise MusicgenError("--force and --resume: give one of them (--force starts anew)")
    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        raise MusicgenError("--force: move the old run aside before a multi-process launch")
    moved = move_run_aside(out)
    if moved is not None:
        print(f"moved the run in {out} to {moved}")
