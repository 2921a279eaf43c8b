"""Weight-only int8 decoding (`Performer.use_int8`, `musicgen generate --int8`): does the music
stay the same in distribution, and how much faster is a step? Writes the "int8 decoding" section
of docs/benchmarks.md.

For each shipped checkpoint, `--songs` validation songs of its prepared data are fed through
`model.step` (teacher forcing, batch 1, the same SPE noise seed per song) with the float weights
and with the int8 copy; per song the mean NLL of the next token over the first `--tokens`
positions. Reported: both means, the paired per-song difference with a bootstrap CI, how often
the two steps rank the same id first, and the step time of each (the two alternate per song):

    python scripts/bench/bench_int8.py --songs 12 --tokens 1024 --threads 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import machine, write_section  # noqa: E402

from musicgen.checkpoint import load_checkpoint  # noqa: E402
from musicgen.evaluate.nll import load_eval_songs  # noqa: E402
from musicgen.measures.form import paired_difference  # noqa: E402

SECTION = "## int8 decoding"
MODELS = ("pop909_piano_sine_spe_gated", "pop909_ape", "maestro_sine_spe_gated")


@torch.inference_mode()
def teacher_forced(model, ids: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Feed `ids` through `step`: (NLL of each next id, the argmax of each step, s per step)."""
    state = model.init_state(1, "cpu", seed=seed)
    nll, top, took = [], [], 0.0
    for t in range(len(ids) - 1):
        t0 = time.perf_counter()
        logits, state = model.step(torch.tensor([int(ids[t])]), state)
        took += time.perf_counter() - t0
        logp = F.log_softmax(logits[0].float(), -1)
        nll.append(-float(logp[int(ids[t + 1])]))
        top.append(int(logp.argmax()))
    return np.array(nll), np.array(top), took / max(len(ids) - 1, 1)


def measure(name: str, model, data: Path, songs: int, tokens: int) -> dict:
    """Per-song NLL, first-choice agreement and step times of one checkpoint, float vs int8."""
    model.eval()
    picked, _ = load_eval_songs(data, "validation", songs)
    res = {"float": [], "int8": [], "same_top": [], "ms": {"float": [], "int8": []}}
    for k, song in enumerate(picked):
        ids = np.asarray(song)[: tokens + 1]
        out = {}
        for kind in ("float", "int8") if k % 2 == 0 else ("int8", "float"):
            model.use_int8(kind == "int8")
            out[kind] = teacher_forced(model, ids, seed=k)
            res[kind].append(float(out[kind][0].mean()))
            res["ms"][kind].append(1000 * out[kind][2])
        res["same_top"].append(float((out["float"][1] == out["int8"][1]).mean()))
        print(f"{name} song {k}: {res['float'][-1]:.4f} / {res['int8'][-1]:.4f}", flush=True)
    model.use_int8(False)
    return res


def row(name: str, r: dict) -> str:
    d = paired_difference(r["int8"], r["float"])
    ms_f, ms_q = np.median(r["ms"]["float"]), np.median(r["ms"]["int8"])
    return (
        f"| {name} | {len(r['float'])} | {np.mean(r['float']):.4f} | {np.mean(r['int8']):.4f} | "
        f"{d['mean']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}] | "
        f"{100 * np.mean(r['same_top']):.1f} % | {ms_f:.2f} | {ms_q:.2f} | x{ms_f / ms_q:.2f} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--songs", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    start, load = time.time(), os.getloadavg()[0]
    rows = []
    for name in args.models.split(","):
        loaded = load_checkpoint(ROOT / "checkpoints" / name, torch.device("cpu"))
        data = ROOT / loaded.config.data.path
        if not (data / "validation" / "tokens.npy").is_file():
            print(f"{name}: {data} is not prepared here; skipped", file=sys.stderr)
            continue
        rows.append(row(name, measure(name, loaded.model, data, args.songs, args.tokens)))
        print(rows[-1], flush=True)
    body = "\n".join(
        [
            SECTION,
            "",
            f"`scripts/bench/bench_int8.py --songs {args.songs} --tokens {args.tokens} "
            f"--threads {args.threads}` on {machine()}; {(time.time() - start) / 60:.1f} min, "
            f"load average {load:.1f} at the start. Each validation song's first {args.tokens} "
            "tokens fed through `model.step` (teacher forcing, batch 1, the song's own SPE noise "
            "seed), with the float weights and with the int8 copy (`use_int8`, per-row scales; "
            "the windowed layers' keys and values in bf16; the head and the embeddings stay "
            "float), the two alternating per song. NLL: mean "
            "over the song's positions, then over songs; the difference is int8 - float per "
            "song with a 95 % bootstrap CI; same first choice: the share of positions where "
            "both rank the same id first; ms/step: median over songs of each song's mean.",
            "",
            "| model | songs | NLL float | NLL int8 | int8 - float | same first choice | "
            "ms/step float | ms/step int8 | speed-up |",
            "|---|---:|---:|---:|---|---:|---:|---:|---:|",
            *rows,
        ]
    )
    write_section(Path(args.doc), SECTION, body + "\n")
    print(f"wrote the int8 section of {args.doc}")


if __name__ == "__main__":
    main()
