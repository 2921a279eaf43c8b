"""Training throughput and peak memory per preset size and positional encoding.

For `tiny`, `small` and the paper's 24-layer default, and for each positional encoding, one fresh
process builds the model from the preset, runs warm-up + timed training steps (forward, backward,
clipping, Adam) on random tokens at the preset's crop length and batch size (the default model at
batch 1: one CPU step of batch 4 takes minutes), and reports trained tokens/s (best step) and peak
resident memory above the process's size after building the model. Writes the "training" section
of docs/benchmarks.md.

    python scripts/bench_train.py [--steps 3] [--threads 2] [--sizes tiny small default]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch  # noqa: F401  (loaded so that machine() reports its version)
from benchlib import machine, write_section

ROOT = Path(__file__).resolve().parents[1]
PRESETS = {"tiny": "configs/pop909/tiny.yaml", "small": "configs/pop909/small.yaml",
           "default": "configs/pop909/ape.yaml"}
PES = [("ape", False), ("sine_spe", False), ("sine_spe", True), ("conv_spe", False),
       ("conv_spe", True)]


def one(size: str, pe: str, gated: bool, steps: int, threads: int) -> dict:
    import torch.nn.functional as F

    from musicgen.config import load_config
    from musicgen.model import build_model
    from musicgen.tokenizers import build_tokenizer

    torch.set_num_threads(threads)
    cfg = load_config(ROOT / PRESETS[size], [f"model.pe={pe}", f"model.gated={str(gated).lower()}",
                                             "model.vocab_size=345"])
    batch = 1 if size == "default" else cfg.train.batch_size
    model = build_model(cfg.model, build_tokenizer(ROOT / "configs/tokenizer/remi.yaml"))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    x = torch.randint(3, 345, (batch, cfg.data.crop_len + 1))
    times = []
    for _ in range(steps + 1):
        t = time.perf_counter()
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best = min(times[1:])
    return {"size": size, "pe": pe + ("+gate" if gated else ""), "batch": batch,
            "crop": cfg.data.crop_len, "layers": cfg.model.n_layers, "d_model": cfg.model.d_model,
            "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
            "tok_s": batch * cfg.data.crop_len / best, "step_s": best,
            "peak_mib": (peak - base) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", nargs="+", default=["tiny", "small", "default"])
    ap.add_argument("--one", nargs=3, metavar=("SIZE", "PE", "GATED"), help=argparse.SUPPRESS)
    ap.add_argument("--write", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    if args.one:
        size, pe, gated = args.one
        print(json.dumps(one(size, pe, gated == "1", args.steps, args.threads)))
        return
    t0, load0 = time.time(), os.getloadavg()[0]
    rows = []
    for size in args.sizes:
        for pe, gated in PES:
            cmd = [sys.executable, __file__, "--one", size, pe, "1" if gated else "0",
                   "--steps", str(args.steps), "--threads", str(args.threads)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    write(args, rows, time.time() - t0, load0, os.getloadavg()[0])


def write(args, rows: list[dict], seconds: float, load0: float, load1: float) -> None:

    lines = [
        "## training", "",
        f"`scripts/bench_train.py --steps {args.steps} --threads {args.threads}` on "
        f"{machine()} ({args.threads} threads in each measured process); "
        f"{seconds / 60:.1f} min. "
        "One training step = forward + backward + clipping + Adam on random tokens at the "
        "preset's crop length; tokens/s = batch x crop / best of the timed steps (after one "
        "warm-up); peak = resident memory above the process's size once the model is built "
        "(ru_maxrss). The `default` rows are the paper's 24-layer model at batch 1 (the preset's "
        "batch 4 is proportionally slower). Load average "
        f"{load0:.1f} at the start and {load1:.1f} at the end on this 2-CPU machine: "
        "compare rows of one run with each other, not with other machines.", "",
        "| preset | layers x d_model | params | crop x batch | positional encoding | "
        "tokens/s | step (s) | peak (MiB) | vs APE time |",
        "|---|---|---:|---|---|---:|---:|---:|---:|"]
    ape = {r["size"]: r["step_s"] for r in rows if r["pe"] == "ape"}
    for r in rows:
        lines.append(
            f"| {r['size']} | {r['layers']} x {r['d_model']} | {r['params_m']:.2f} M | "
            f"{r['crop']} x {r['batch']} | {r['pe']} | {r['tok_s']:.0f} | {r['step_s']:.2f} | "
            f"{r['peak_mib']:.0f} | {r['step_s'] / ape[r['size']]:.2f} |")
    write_section(args.write, "## training", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
