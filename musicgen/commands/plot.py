"""`musicgen plot kernels|attention|log`: figures of a checkpoint's insides or of a training run."""

from __future__ import annotations

import argparse
from pathlib import Path

from musicgen.errors import MusicgenError, check_seed


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plot", help="positional kernels, attention maps, training curves",
        description="Draw figures into --out (default out/plots).")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)

    k = kinds.add_parser(
        "kernels", help="learned positional templates P_d(m - n) of SPE models",
        description="sineSPE: closed form from the learned f, theta, lambda; convSPE: the "
        "cross-correlation of the learned filters; gated: (1 - delta) P + delta.")
    k.add_argument("--checkpoint", required=True)
    k.add_argument("--layer", type=int, default=0, help="layer whose gate applies (default 0)")
    k.add_argument("--heads", type=int, nargs="+", help="heads to draw (default: up to 8)")
    k.add_argument("--features", type=int, default=4, help="features (lines) per head")
    k.add_argument("--max-lag", type=int, help="lags -L..L (default: conv kernel size, or 256)")
    k.set_defaults(func=run_kernels)

    a = kinds.add_parser(
        "attention", help="row-normalised attention matrices on a short piece",
        description="Tokenize SONG.mid with the checkpoint's tokenizer, run the first "
        "--max-tokens ids and draw the explicit (display-only) attention of chosen layers/heads.")
    a.add_argument("--checkpoint", required=True)
    a.add_argument("--midi", required=True)
    a.add_argument("--layer", type=int, nargs="+", help="layers (default: first and last)")
    a.add_argument("--head", type=int, nargs="+", help="heads (default: 0 and 1)")
    a.add_argument("--max-tokens", type=int, default=256)
    a.add_argument("--seed", type=int, default=0, help="SPE noise seed")
    a.set_defaults(func=run_attention)

    g = kinds.add_parser("log", help="training and validation curves of a run folder",
                         description="Reads RUN_DIR/log.jsonl.")
    g.add_argument("run_dir")
    g.set_defaults(func=run_log)

    for q in (k, a, g):
        q.add_argument("--out", default="out/plots", help="output folder (default: out/plots)")


def run_kernels(args: argparse.Namespace) -> int:
    import numpy as np

    from musicgen.checkpoint import load_checkpoint
    from musicgen.evaluate import positional_kernels, write_json
    from musicgen.plots import plot_kernels

    loaded = load_checkpoint(args.checkpoint)
    m = loaded.config.model
    max_lag = args.max_lag or (m.kernel_size if m.pe == "conv_spe" else 256)
    lags = np.arange(-max_lag, max_lag + 1)
    kern = positional_kernels(loaded.model, lags, args.layer)  # (L, H, D)
    heads = args.heads if args.heads else list(range(min(m.n_heads, 8)))
    bad = [h for h in heads if not 0 <= h < kern.shape[1]]
    if bad:
        raise MusicgenError(f"--heads: {bad[0]} is out of range (0..{kern.shape[1] - 1})")
    feats = list(range(min(args.features, kern.shape[2])))
    panels = {f"head {h}": kern[:, h, feats].T for h in heads}
    out = Path(args.out)
    gate = " (gated)" if m.gated else ""
    png = plot_kernels(panels, lags, out / "kernels.png",
                       title=f"{m.pe}{gate}: P_d(m - n), layer {args.layer}, features {feats}")
    write_json(out / "kernels.json", {"checkpoint": args.checkpoint, "pe": m.pe,
                                      "layer": args.layer, "lags": lags, "heads": heads,
                                      "features": feats,
                                      "kernels": {k: v for k, v in panels.items()}})
    print(f"wrote {png}")
    return 0


def run_attention(args: argparse.Namespace) -> int:
    from musicgen.checkpoint import load_checkpoint
    from musicgen.evaluate import attention_maps
    from musicgen.plots import plot_attention

    loaded = load_checkpoint(args.checkpoint)
    n_layers = loaded.config.model.n_layers
    layers = args.layer if args.layer is not None else sorted({0, n_layers - 1})
    heads = args.head if args.head is not None else list(range(min(2, loaded.config.model.n_heads)))
    if args.max_tokens < 2:
        raise MusicgenError(f"--max-tokens: must be >= 2, got {args.max_tokens}")
    check_seed("--seed", args.seed)
    ids = loaded.tokenizer.encode(args.midi)[: args.max_tokens]
    maps = attention_maps(loaded.model, ids, layers, heads, seed=args.seed)
    panels = {f"layer {lay} head {h}": a for (lay, h), a in maps.items()}
    png = plot_attention(panels, Path(args.out) / "attention.png",
                         title=f"{loaded.config.model.pe}: attention on {Path(args.midi).name} "
                         f"({len(ids)} tokens)")
    print(f"wrote {png}")
    return 0


def run_log(args: argparse.Namespace) -> int:
    from musicgen.plots import plot_nll_curves, plot_training_log
    from musicgen.runlog import read_log

    records = read_log(args.run_dir)
    out = Path(args.out)
    written = [plot_training_log(records, out / "log.png", title=str(args.run_dir))]
    vals = [r for r in records if r.get("kind") == "val" and r.get("loss_per_segment")]
    if vals:
        seg = int(vals[-1].get("segment", 128))
        picks = [vals[0], vals[-1]] if len(vals) > 1 else vals
        curves = {f"step {r['step']}": [float("nan") if v is None else v
                                        for v in r["loss_per_segment"]] for r in picks}
        written.append(plot_nll_curves(curves, seg, vals[-1].get("crop_len"),
                                       out / "log_segments.png",
                                       title="validation NLL per position"))
    for w in written:
        print(f"wrote {w}")
    return 0
