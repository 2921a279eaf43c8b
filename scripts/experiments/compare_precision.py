"""fp32 against bf16 training of one preset over several seeds: is bf16's validation NLL inside
the seeds' spread, and how much faster is it? Trains each (precision, seed) run with
`musicgen train` (a finished run is kept, an interrupted one resumed), then prints a markdown
table from the runs' logs: the last validation NLL per run, the mean and spread per precision,
the training tokens/s, and the difference of the means against the seed spread.

    python scripts/experiments/compare_precision.py --data data/prepared/pop909 \
        --out runs/precision --seeds 0 1 2 --set train.max_steps=500 train.val_every=125
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

from musicgen.train.log import read_log


def train(preset: str, data: str, out: Path, precision: str, seed: int, sets: list[str]) -> Path:
    """One run, resumed if it has a last.pt; its folder."""
    run = out / f"{precision}_seed{seed}"
    overrides = [f"--train.precision={precision}", f"--train.seed={seed}"]
    overrides += [f"--{s}" for s in sets]
    records = read_log(run, required=False)
    max_steps = next((s.split("=")[1] for s in sets if s.startswith("train.max_steps=")), None)
    if records and max_steps and records[-1]["step"] >= int(max_steps):
        return run
    cmd = [sys.executable, "-m", "musicgen.cli", "train", "--config", preset, "--data", data]
    cmd += ["--out", str(run), *overrides] + (["--resume"] if (run / "last.pt").exists() else [])
    print(" ".join(cmd), flush=True)
    if subprocess.run(cmd).returncode != 0:
        raise SystemExit(f"error: {run}: training failed (see its output above)")
    return run


def summary(runs: dict[str, list[Path]]) -> str:
    """The markdown table of the runs' last validation NLL and training speed."""
    lines = [
        "| precision | val NLL per seed | mean | spread (max - min) | tokens/s (median) |",
        "|---|---|---:|---:|---:|",
    ]
    means, spreads = {}, {}
    for precision, folders in runs.items():
        nll, tps = [], []
        for run in folders:
            log = read_log(run)
            nll.append([r for r in log if r["kind"] == "val"][-1]["loss"])
            tps.append(statistics.median(r["tok_per_s"] for r in log if r["kind"] == "train"))
        means[precision], spreads[precision] = statistics.mean(nll), max(nll) - min(nll)
        lines.append(
            f"| {precision} | {', '.join(f'{v:.4f}' for v in nll)} | {means[precision]:.4f} | "
            f"{spreads[precision]:.4f} | {statistics.median(tps):.0f} |"
        )
    if len(means) == 2:
        (a, ma), (b, mb) = means.items()
        lines.append(
            f"\n{b} - {a}: {mb - ma:+.4f} nats; seed spread {max(spreads.values()):.4f} "
            f"({'inside' if abs(mb - ma) <= max(spreads.values()) else 'outside'} it)."
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="pop909/small")
    ap.add_argument("--data", default="data/prepared/pop909")
    ap.add_argument("--out", type=Path, default=Path("runs/precision"))
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--set", nargs="*", default=[], help="overrides, e.g. train.max_steps=500")
    args = ap.parse_args()
    runs: dict[str, list[Path]] = {p: [] for p in args.precisions}
    for seed in args.seeds:  # seeds outer: a stopped comparison has both precisions per seed
        for precision in args.precisions:
            runs[precision].append(
                train(args.preset, args.data, args.out, precision, seed, args.set)
            )
    print(summary(runs))


if __name__ == "__main__":
    main()
