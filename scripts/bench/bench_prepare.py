"""Time `musicgen prepare` on the whole of POP909 with 1 and 2 workers; write the "prepare" section
of docs/benchmarks.md (its own section only; other sections are kept).

Usage: .venv/bin/python scripts/bench/bench_prepare.py [--input ../shared/data/pop909] \
    [--workers 1 2]
Every run starts from an empty output folder (no cache), so it measures a cold prepare.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchlib import machine, write_section  # noqa: E402

from musicgen.data.prepare import prepare  # noqa: E402

SECTION = "## prepare"


def cpu_seconds() -> float:
    """User + system time of this process and its finished children (the worker processes)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(ROOT.parent / "shared" / "data" / "pop909"))
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()

    rows = []
    for w in args.workers:
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as out:
            t0, c0 = time.perf_counter(), cpu_seconds()
            s = prepare("pop909", args.input, out, workers=w)
            dt, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        rows.append((w, s["songs"], s["tokens"], dt, cpu, load))
        print(
            f"workers={w}: {s['songs']} songs, {s['tokens']} tokens in {dt:.1f} s ({cpu:.1f} CPU s)"
        )

    lines = [
        SECTION,
        "",
        "`musicgen prepare --dataset pop909` on all of POP909 (REMI, configs/tokenizer/remi.yaml), "
        "from an empty output folder (no cache), written by `scripts/bench/bench_prepare.py`.",
        f"Machine: {machine()}. Other jobs may share the CPUs: the last column gives the "
        "1-minute load average when each run started (about 1-2 means an otherwise idle machine).",
        "",
        "| workers | songs | tokens | wall (s) | songs/s | tokens/s | CPU (s) | load avg |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w, songs, tokens, dt, cpu, load in rows:
        lines.append(
            f"| {w} | {songs} | {tokens:,} | {dt:.1f} | {songs / dt:.1f} | {tokens / dt:,.0f} "
            f"| {cpu:.1f} | {load:.1f} |"
        )
    lines += [
        "",
        "CPU is user + system time of the command and its worker processes (less sensitive "
        "to the other jobs than wall time); load avg is the 1-minute load average when the run "
        "started. Target: the whole of POP909 in under 60 s.",
        "",
    ]
    doc_path = Path(args.doc)
    write_section(doc_path, SECTION, "\n".join(lines) + "\n")
    print(f"wrote the prepare section of {doc_path}")


if __name__ == "__main__":
    main()
