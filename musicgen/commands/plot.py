"""`musicgen plot kernels|attention|log`: figures of a checkpoint's insides or of a training run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot",
        help="positional kernels, attention maps, training curves",
        description="Draw figures into --out (default out/plots).",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)

    k = kinds.add_parser(
        "kernels",
        help="learned positional templates P_d(m - n) of SPE models",
        description="sineSPE: closed form from the learned f, theta, lambda; convSPE: the "
        "cross-correlation of the learned filters; gated: (1 - delta) P + delta.",
    )
    k.add_argument("--checkpoint", required=True)
    k.add_argument("--layer", type=int, default=0, help="layer whose gate applies (default 0)")
    k.add_argument("--heads", type=int, nargs="+", help="heads to draw (default: up to 8)")
    k.add_argument("--features", type=int, default=4, help="features (lines) per head")
    k.add_argument("--max-lag", type=int, help="lags -L..L (default: conv kernel size, or 256)")
    k.set_defaults(func=run_kernels)

    a = kinds.add_parser(
        "attention",
        help="row-normalised attention matrices on a short piece",
        description="Tokenize SONG.mid with the checkpoint's tokenizer, run the first "
        "--max-tokens ids and draw the explicit (display-only) attention of chosen layers/heads.",
    )
    a.add_argument("--checkpoint", required=True)
    a.add_argument("--midi", required=True)
    a.add_argument("--layer", type=int, nargs="+", help="layers (default: first and last)")
    a.add_argument("--head", type=int, nargs="+", help="heads (default: 0 and 1)")
    a.add_argument(
        "--tokens", type=int, default=256, help="the song's first N tokens (default 256)"
    )
    a.add_argument("--seed", type=int, default=0, help="SPE noise seed")
    a.set_defaults(func=run_attention)

    g = kinds.add_parser(
        "log",
        help="training and validation curves of a run folder",
        description="Reads RUN_DIR/log.jsonl.",
    )
    g.add_argument("run_dir")
    g.set_defaults(func=run_log)

    for q in (k, a, g):
        q.add_argument("--out", default="out/plots", help="output folder (default: out/plots)")


def run_kernels(args: argparse.Namespace) -> int:
    from musicgen.evaluate import kernel_figure

    png = kernel_figure(
        args.checkpoint, args.out, args.layer, args.heads, args.features, args.max_lag
    )
    print(f"wrote {png}")
    return 0


def run_attention(args: argparse.Namespace) -> int:
    from musicgen.evaluate import attention_figure

    png = attention_figure(
        args.checkpoint, args.midi, args.out, args.layer, args.head, args.tokens, args.seed
    )
    print(f"wrote {png}")
    return 0


def run_log(args: argparse.Namespace) -> int:
    from musicgen.evaluate.plots import plot_run

    for w in plot_run(args.run_dir, args.out):
        print(f"wrote {w}")
    return 0
