"""The parts of scripts/reproduce/compare_perceiver.sh that the CLI does not do (docs/perceiver.md,
"Comparison at equal compute"):

  subset     copy the first K pieces of each split of a Maestro-layout folder, with its CSV cut
             to them (the TINY=1 pipeline check prepares this in seconds);
  reference  write the first K tokens of the first R held-out pieces as MIDI, so that the
             repetition of the generations is compared with real music of the same length;
  report     gather nll.json, each arm's music.json and training log into summary.json (NLL on
             the first n tokens, overall and per position; repetition; seconds per step, tokens/s
             and estimated FLOPs per step) and draw the per-position NLL figure.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [
    str(ROOT),
    str(ROOT / "scripts" / "bench"),
]  # this checkout's musicgen, then benchlib

from benchlib import train_flops  # noqa: E402

from musicgen.checkpoint import read_payload  # noqa: E402
from musicgen.config import config_from_dict  # noqa: E402
from musicgen.errors import MusicgenError  # noqa: E402
from musicgen.evaluate.common import write_json  # noqa: E402
from musicgen.evaluate.nll import load_eval_songs  # noqa: E402
from musicgen.io import atomic_write_bytes, atomic_write_text, ensure_dir  # noqa: E402

REPETITION = ("repeated_bar_rate", "bar_self_similarity", "grammar_error_rate")


def write_subset(src: str, per_split: int, out: str) -> int:
    """The first `per_split` rows of every split of SRC/maestro-v*.csv, files and CSV, in OUT."""
    root, dst = Path(src), ensure_dir(out)
    index = sorted(root.glob("maestro-v*.csv"))
    if not index:
        raise MusicgenError(f"{src}: no maestro-v*.csv")
    with open(index[0], newline="") as fh:
        reader = csv.DictReader(fh)
        fields, rows = reader.fieldnames or [], list(reader)
    kept, count = [], {}
    for row in rows:
        if count.get(row["split"], 0) < per_split and (root / row["midi_filename"]).is_file():
            count[row["split"]] = count.get(row["split"], 0) + 1
            kept.append(row)
            target = dst / row["midi_filename"]
            ensure_dir(target.parent)
            atomic_write_bytes(target, (root / row["midi_filename"]).read_bytes())
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=fields)
    writer.writeheader()
    writer.writerows(kept)
    atomic_write_text(dst / index[0].name, text.getvalue())
    return len(kept)


def write_reference(data: str, split: str, pieces: int, tokens: int, out: str) -> list[Path]:
    """The first `tokens` ids of the first `pieces` songs of `split`, decoded to OUT/*.mid."""
    songs, tokenizer = load_eval_songs(data, split, pieces)
    folder = ensure_dir(out)
    paths = []
    for i, song in enumerate(songs):
        path = folder / f"{split}_{i:03d}.mid"
        tokenizer.decode_to_midi(song[:tokens], path)
        paths.append(path)
    return paths


def cross_flops(cfg) -> float:
    """Training FLOPs (3 x forward) per step of the Perceiver head in front of the blocks: the
    cross-attention layers (q, kv, out projections; n x m scores and values) and their FFN."""
    m, p, t = cfg.model, cfg.model.perceiver, cfg.train
    d, b, layers = m.d_model, t.batch_size * t.grad_accum, 2 if p.cross == "both" else 1
    keys = [p.context_len, p.n_queries][:layers]  # full layer: m keys; scale layer: n keys
    n = p.n_queries
    fwd = sum(2 * b * (2 * n * d * d + 2 * k * d * d + 2 * n * k * d) for k in keys)
    fwd += 2 * b * p.n_queries * 2 * d * m.d_ff
    return 3.0 * fwd


def step_flops(cfg) -> dict[str, float]:
    """Estimated training FLOPs per step: Performer blocks (+ head) and Perceiver cross part."""
    t = cfg.train
    b = t.batch_size * t.grad_accum
    if cfg.model.head == "perceiver_s":
        blocks = train_flops(cfg.model, b, cfg.model.perceiver.n_queries)
        return {"blocks": blocks, "cross": cross_flops(cfg), "total": blocks + cross_flops(cfg)}
    blocks = train_flops(cfg.model, b, cfg.data.crop_len)
    return {"blocks": blocks, "cross": 0.0, "total": blocks}


def first_tokens_nll(model: dict, segment: int, n: int) -> float:
    """Token-weighted mean NLL of positions 0..n-1 from nll.json's per-segment means."""
    if n % segment:
        raise MusicgenError(f"--n: {n} is not a multiple of nll.json's segment ({segment})")
    k = n // segment
    means = np.asarray(model["per_segment"][:k], np.float64)
    counts = np.asarray(model["tokens_per_segment"][:k], np.float64)
    return float((means * counts).sum() / counts.sum())


def training_summary(run: Path) -> dict:
    """Steps, seconds per step, target tokens/s and final training loss from RUN/log.jsonl."""
    rows = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in rows if r.get("kind") == "train"]
    if not train:
        raise MusicgenError(f"{run}/log.jsonl: no training records")
    last = train[-1]
    return {
        "steps": last["step"],
        "seconds_per_step": last["time"] / last["step"],
        "tokens_per_s": last["tok_per_s"],
        "final_train_loss": float(np.mean([r["loss"] for r in train[-5:]])),
    }


def arm_entry(run: Path, nll: dict, music: Path, n: int) -> dict:
    """One arm of summary.json (its config is the one its checkpoint was trained with)."""
    ckpt = str(run / "last.pt")
    cfg = config_from_dict(read_payload(ckpt)["config"])
    match = [
        m for m in nll["models"].values() if Path(m["checkpoint"]).resolve() == Path(ckpt).resolve()
    ]
    if not match:
        raise MusicgenError(f"nll.json: no entry for {ckpt}")
    res = match[0]
    gen = json.loads(music.read_text())
    return {
        "config": cfg.name,
        "checkpoint": ckpt,
        "nll_first_n": first_tokens_nll(res, nll["segment"], n),
        "nll_overall": float(
            np.nansum(np.asarray(res["per_segment"]) * res["tokens_per_segment"])
            / np.sum(res["tokens_per_segment"])
        ),
        "nll_per_note": res["nll_per_note"],
        "per_segment": res["per_segment"],
        "repetition": {k: gen["generated"].get(k) for k in REPETITION},
        "repetition_reference": {k: gen.get("reference", {}).get(k) for k in REPETITION},
        "training": training_summary(run),
        "flops_per_step": step_flops(cfg),
    }


def report(args: argparse.Namespace) -> dict:
    out = Path(args.out)
    nll = json.loads((out / "nll" / "nll.json").read_text())
    arms = {
        arm: arm_entry(
            Path(args.runs) / arm,
            nll,
            out / f"music_{arm}" / "music.json",
            args.n,
        )
        for arm in args.arms
    }
    summary = {
        "data": nll["data"],
        "split": nll["split"],
        "songs": nll["songs"],
        "segment": nll["segment"],
        "n": args.n,
        "m": args.m,
        "arms": arms,
    }
    write_json(out / "summary.json", summary)
    from musicgen.evaluate.plots import plot_nll_curves

    curves = {arm: a["per_segment"] for arm, a in arms.items()}
    title = f"per-position NLL, {nll['split']} ({nll['songs']} pieces); window m = {args.m}"
    plot_nll_curves(curves, nll["segment"], args.m, args.figure, title=title)
    return summary


def print_table(summary: dict) -> None:
    """Markdown rows for docs/perceiver.md."""
    print(
        "| arm | NLL first n | NLL overall | repeated bars | bar self-similarity | "
        "s/step | GFLOP/step |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arm, a in summary["arms"].items():
        rep = a["repetition"]
        print(
            f"| {arm} | {a['nll_first_n']:.3f} | {a['nll_overall']:.3f} | "
            f"{rep['repeated_bar_rate']['mean']:.3f} | {rep['bar_self_similarity']['mean']:.3f} | "
            f"{a['training']['seconds_per_step']:.2f} | {a['flops_per_step']['total'] / 1e9:.1f} |"
        )
    ref = next(iter(summary["arms"].values()))["repetition_reference"]
    if ref.get("repeated_bar_rate"):
        print(
            f"| real pieces | | | {ref['repeated_bar_rate']['mean']:.3f} | "
            f"{ref['bar_self_similarity']['mean']:.3f} | | |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("subset")
    c.add_argument("--input", required=True)
    c.add_argument("--per-split", type=int, required=True)
    c.add_argument("--out", required=True)
    r = sub.add_parser("reference")
    r.add_argument("--data", required=True)
    r.add_argument("--split", default="validation")
    r.add_argument("--pieces", type=int, required=True)
    r.add_argument("--tokens", type=int, required=True)
    r.add_argument("--out", required=True)
    s = sub.add_parser("report")
    s.add_argument("--out", required=True, help="folder holding nll/ and music_<arm>/")
    s.add_argument("--runs", required=True, help="folder holding one run folder per arm")
    s.add_argument("--arms", nargs="+", required=True)
    s.add_argument("--n", type=int, required=True, help="the first n positions (queries)")
    s.add_argument("--m", type=int, required=True, help="the window (context) length")
    s.add_argument("--figure", required=True)
    args = p.parse_args()
    try:
        if args.cmd == "subset":
            kept = write_subset(args.input, args.per_split, args.out)
            print(f"copied {kept} pieces to {args.out}")
        elif args.cmd == "reference":
            paths = write_reference(args.data, args.split, args.pieces, args.tokens, args.out)
            print(f"wrote {len(paths)} reference pieces to {args.out}")
        else:
            summary = report(args)
            print_table(summary)
            print(f"wrote {args.out}/summary.json, {args.figure}")
    except MusicgenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
