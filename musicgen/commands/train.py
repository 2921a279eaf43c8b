"""`musicgen train`: a preset YAML + dotted overrides -> a run folder of checkpoints and logs."""

from __future__ import annotations

import argparse
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
    p.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from musicgen.config import load_config
    from musicgen.train import train

    cfg = load_config(args.config, list(args.overrides or []))
    if args.data:
        cfg.data.path = args.data
    out = Path(args.out) if args.out else Path("runs") / cfg.name
    result = train(cfg, out, resume=args.resume)
    print(f"wrote {result.last} (step {result.step})")
    return 0
