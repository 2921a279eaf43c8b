"""Time whole songs from scratch with a model that knows phrases; write the "whole song" section
of docs/benchmarks.md (its own section only).

Usage: .venv/bin/python scripts/bench/bench_song.py CHECKPOINT [--threads 2] [--num 3] [--no-doc]
Measures: wall time of `Model.pieces` for a 64-bar form (`i4A8B8A8B8A8B8A8o4`) at the model's
sampling defaults, one song at a time, and the ids it sampled; the bars written (the form's,
unless a song ran out of ids). Where the defaults guide by the phrase labels, each song is also
written without guidance right after it (the same seed), for the cost of the shadow side by side.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchlib import machine, write_section  # noqa: E402

import musicgen  # noqa: E402

SECTION = "## whole song"
FORM = "i4A8B8A8B8A8B8A8o4"  # 64 bars


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--num", type=int, default=3)
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--no-doc", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    model = musicgen.load(args.checkpoint)
    guided = (model.config.sample.guidance or 0) > 0
    rows = [_time(model, seed, guided) for seed in range(args.num)]
    table = ["| seed | seconds | ids sampled | ids/s | bars |", "|---|---|---|---|---|"]
    table += [f"| {s} | {w:.1f} | {n} | {n / w:.0f} | {b} |" for s, w, n, b, _ in rows]
    walls = [r[1] for r in rows]
    cost = ""
    if guided:
        per_id = [(w / n) / (w0 / n0) for _, w, n, _, (w0, n0) in rows]
        cost = (
            f" Without guidance (the same seeds, each right after its guided song): "
            f"{', '.join(f'{w0:.1f} s ({n0} ids)' for *_, (w0, n0) in rows)}; the shadow makes "
            f"a sampled id cost {np.median(per_id):.2f}x (median)."
        )
    body = (
        f"{SECTION}\n\n"
        f"`scripts/bench/bench_song.py {args.checkpoint} --threads {args.threads}` on "
        f"{machine()}. One song at a time (batch 1) from scratch with the form `{FORM}` "
        f"(64 bars) at the model's sampling defaults, grammar and form masks on; wall time of "
        f"`Model.pieces` (sampling, masks and decoding to MIDI included).\n\n"
        + "\n".join(table)
        + f"\n\nMedian {np.median(walls):.1f} s a 64-bar song (target: under a minute).{cost}\n"
    )
    print(body)
    if not args.no_doc:
        write_section(Path(args.doc), SECTION, body)


def _time(model, seed: int, guided: bool) -> tuple:
    """(seed, seconds, ids sampled, bars, (seconds, ids) without guidance or None)."""
    start = time.perf_counter()
    piece = next(model.pieces(1, form=FORM, seed=seed, batch_size=1))
    wall = time.perf_counter() - start
    bars = len(model.tokenizer.bar_starts(np.asarray(piece.ids)))
    print(f"seed {seed}: {wall:.1f} s, {piece.sampled} ids, {bars} bars", flush=True)
    plain = None
    if guided:
        start = time.perf_counter()
        other = next(model.pieces(1, form=FORM, seed=seed, batch_size=1, guidance=0.0))
        plain = (time.perf_counter() - start, other.sampled)
    return seed, wall, piece.sampled, bars, plain


if __name__ == "__main__":
    main()
