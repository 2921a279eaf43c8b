"""Which sampling settings make a groove model play as a band? The band measure over a grid.

    python scripts/experiments/groove_band_sweep.py CHECKPOINT [--T 0.8,1.0] [--top-p 0.95,1]
        [--top-k 0] [--seeds 0,1,2] [--scratch 8] [--prompts 16] [--test out/trio_pop909/test]
    python scripts/experiments/groove_band_sweep.py CHECKPOINT --T model   # its own defaults

For every T x top-p x top-k and seed: `--scratch` pieces of 8 bars from scratch, and 8 bars
continuing the first 2 bars of `--prompts` test songs (evenly spaced in `--test`, only the
continuation measured), each through the band measure (`musicgen.evaluate.band`). Prints one
JSON line per setting: the share of pieces that play as a band, the share passing each
condition and each measure's mean, from scratch and continuing, and the share of bass and
third-part notes lasting a bar or more (`at_bound`: where the groove grammar's sampling bound
ends a note the model did not end). docs/evaluation.md, "Groove sampling defaults", records a run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

import musicgen
from musicgen.evaluate.band import band_measures, band_summary
from musicgen.evaluate.common import midi_files
from musicgen.generation.api.request import GenerationRequest

BARS = 8
PROMPT_BARS = 2


def numbers(text: str, kind=float) -> list:
    return [kind(x) for x in text.split(",")]


def settings(args: argparse.Namespace) -> list[tuple]:
    """(temperature, top_p, top_k) to try; (None, None, None) is the model's own defaults."""
    if args.T == "model":
        return [(None, None, None)]
    return list(itertools.product(numbers(args.T), numbers(args.top_p), numbers(args.top_k, int)))


def measure(model, score) -> dict:
    """The band measures of one 8-bar piece, with its count of notes a bar or longer."""
    tok = model.tokenizer
    row = band_measures(score, BARS, tok)
    bass, _drums, third = tok.roles(score)
    pitched = np.concatenate([bass, third])
    row["notes"] = len(pitched)
    row["at_bound"] = int(((pitched[:, 1] - pitched[:, 0]) >= tok.ticks_per_bar).sum())
    return row


def summary(rows: list[dict]) -> dict:
    s = band_summary(rows)
    out = {"pieces": s["pieces"], "band": s["band_share"], **s["criteria"]}
    out |= {f"{k}_mean": v["mean"] for k, v in s["measures"].items()}
    out["at_bound"] = sum(r["at_bound"] for r in rows) / max(sum(r["notes"] for r in rows), 1)
    return out


def run_setting(model, prompts, sampling: dict, seeds: list[int], scratch: int) -> dict:
    """The band summary of one setting, from scratch and continuing."""
    out = {}
    for mode in ("scratch", "continue"):
        rows = []
        for seed in seeds:
            if mode == "scratch":
                req = GenerationRequest.build(num=scratch, bars=BARS, seed=seed, **sampling)
                pieces = model.pieces(req)
            else:
                req = GenerationRequest.build(
                    "new_bars", num=len(prompts), bars=BARS, seed=seed, batch_size=16, **sampling
                )
                pieces = model.pieces(req, prompt=prompts, only_continuation=True)
            rows += [measure(model, p.to_score()) for p in pieces]
        out[mode] = summary(rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--T", default="1.0", help="temperatures (comma-separated), or 'model'")
    ap.add_argument("--top-p", default="1.0")
    ap.add_argument("--top-k", default="0")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--scratch", type=int, default=8, help="pieces from scratch per seed")
    ap.add_argument("--prompts", type=int, default=16, help="test songs continued per seed")
    ap.add_argument("--test", type=Path, default=Path("out/trio_pop909/test"))
    args = ap.parse_args()
    model = musicgen.load(args.checkpoint)
    songs = midi_files(args.test)
    step = max(len(songs) // args.prompts, 1)
    prompts = [model.prompt(p, PROMPT_BARS) for p in songs[::step][: args.prompts]]
    for t, p, k in settings(args):
        start = time.time()
        sampling = {"temperature": t, "top_p": p, "top_k": k}
        row = run_setting(model, prompts, sampling, numbers(args.seeds, int), args.scratch)
        row["options"] = vars(model.options(**sampling))
        row["seconds"] = round(time.time() - start, 1)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
