"""Training throughput, model FLOP utilisation and peak memory per preset, positional encoding and
precision (fp32, bf16 autocast), with the CPU's fp32 and bf16 matmul peaks, optionally side by
side with a baseline commit.

For `tiny`, `small` and the paper's 24-layer default, each positional encoding and precision, a
fresh process builds the model from the preset, measures the fp32 and bf16 matmul peaks (2048 x
2048) with the same threads, then runs one warm-up and `--steps` timed training steps (forward,
backward, clipping, Adam) on random tokens at the preset's crop length and batch size (the
default model at batch 1: one CPU step of batch 4 takes minutes). With `--baseline REV` the same
worker also runs on a temporary `git worktree` of REV, the two alternating `--repeats` times, so
that a speed-up is a ratio measured under the same load. With `--compile` the new tree's steps
run under `torch.compile` (the base stays eager: `--compile --baseline HEAD` is compiled against
eager on the same code); its warm-up (the compilation) is reported apart. Writes the "training"
section of docs/benchmarks.md.

    python scripts/bench/bench_train.py --baseline HEAD~3 --sizes small default --repeats 3 \
        --threads 2 --precisions fp32 bf16
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import sys
import time
from pathlib import Path

import torch  # noqa: F401  (loaded so that machine() reports its version)
from benchlib import (
    code_trees,
    describe,
    interleaved,
    keep_freed_memory,
    machine,
    matmul_peak_gflops,
    median,
    run_worker,
    train_flops,
    write_section,
)

ROOT = Path(__file__).resolve().parents[2]
PRESETS = {
    "tiny": "configs/pop909/tiny.yaml",
    "small": "configs/pop909/small.yaml",
    "default": "configs/pop909/ape.yaml",
    "song": "configs/pop909/song.yaml",
}
# (tokenizer, vocabulary) per preset: the song model reads the song REMI (melody, phrases)
TOKENIZERS = {"song": ("configs/tokenizer/remi_song.yaml", 475)}
PLAIN = ("configs/tokenizer/remi.yaml", 345)
PES = ["ape", "sine_spe", "sine_spe+gate", "conv_spe", "conv_spe+gate"]


def one(
    size: str, pe: str, steps: int, threads: int, compile: bool = False, precision: str = "fp32"
) -> dict:
    """One measurement in this process, with the `musicgen` found on PYTHONPATH (new or base)."""
    import torch.nn.functional as F

    import musicgen
    from musicgen.config import load_config
    from musicgen.model import build_model
    from musicgen.tokenizers import build_tokenizer

    keep_freed_memory()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    code = Path(musicgen.__file__).resolve().parents[1]
    kind, gated = pe.split("+")[0], pe.endswith("+gate")
    tok_file, vocab = TOKENIZERS.get(size, PLAIN)
    overrides = [f"model.pe={kind}", f"model.gated={str(gated).lower()}"]
    overrides += [f"model.vocab_size={vocab}", "train.init_from=''"]
    cfg = load_config(code / PRESETS[size], overrides)
    batch = 1 if size == "default" else cfg.train.batch_size
    peaks = {dt: matmul_peak_gflops(dtype=dt) for dt in ("fp32", "bf16")}
    try:  # newer trees build the model with its tokenizer (musical position tables)
        model = build_model(cfg.model, build_tokenizer(code / tok_file))
    except TypeError:
        model = build_model(cfg.model)
    try:  # the optimizer training uses, in the tree measured
        from musicgen.train.run import make_optimizer

        opt = make_optimizer(model, cfg)
    except ImportError:
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    x = torch.randint(3, vocab, (batch, cfg.data.crop_len + 1))
    forward = torch.compile(model) if compile else model
    times = []
    for _ in range(steps + 1):
        t = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            logits = forward(x[:, :-1])
            loss = F.cross_entropy(logits.float().flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step = median(times[1:])
    return {
        "size": size,
        "pe": pe,
        "precision": precision,
        "batch": batch,
        "crop": cfg.data.crop_len,
        "layers": cfg.model.n_layers,
        "d_model": cfg.model.d_model,
        "params_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "flops": train_flops(cfg.model, batch, cfg.data.crop_len),
        "step_s": step,
        "tok_s": batch * cfg.data.crop_len / step,
        "peak_gflops": peaks[precision],
        "peak_fp32": peaks["fp32"],
        "peak_bf16": peaks["bf16"],
        "peak_mib": (peak - base) / 1024,
        "warmup_s": times[0],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", nargs="+", default=["tiny", "small", "default"], choices=PRESETS)
    ap.add_argument("--pes", nargs="+", default=PES, choices=PES)
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    ap.add_argument("--baseline", help="git revision to run side by side with this tree")
    ap.add_argument("--repeats", type=int, default=1, help="alternations per measurement")
    ap.add_argument("--compile", action="store_true", help="the new tree under torch.compile")
    ap.add_argument("--one", nargs=3, metavar=("SIZE", "PE", "PREC"), help=argparse.SUPPRESS)
    ap.add_argument("--write", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    if args.one:
        size, pe, precision = args.one
        print(json.dumps(one(size, pe, args.steps, args.threads, args.compile, precision)))
        return
    t0, load0 = time.time(), os.getloadavg()[0]
    rows = []
    with code_trees(args.baseline) as trees:
        for size in args.sizes:
            for pe, precision in itertools.product(args.pes, args.precisions):
                cmd = [
                    sys.executable,
                    __file__,
                    "--one",
                    size,
                    pe,
                    precision,
                    "--steps",
                    str(args.steps),
                    "--threads",
                    str(args.threads),
                ]
                what = f"{size} {pe} {precision}"
                res = interleaved(
                    trees,
                    args.repeats,
                    lambda label, tree, cmd=cmd, what=what: run_worker(
                        cmd + (["--compile"] if args.compile and label == "new" else []),
                        f"{what} {label}",
                        tree,
                    ),
                )
                rows.append(summarise(res))
                print(json.dumps(rows[-1]), flush=True)
    write(args, [r for r in rows if r], time.time() - t0, load0, os.getloadavg()[0])


def summarise(res: dict[str, list[dict]]) -> dict:
    """Medians over the repeats of each tree; MFU = FLOPs / step / that worker's matmul peak."""
    out: dict = {}
    for label, runs in res.items():
        if not runs:
            continue
        out.update(
            {
                k: runs[0][k]
                for k in (
                    "size",
                    "pe",
                    "precision",
                    "batch",
                    "crop",
                    "layers",
                    "d_model",
                    "params_m",
                    "flops",
                )
            }
        )
        out[label] = {
            "step_s": median([r["step_s"] for r in runs]),
            "tok_s": median([r["tok_s"] for r in runs]),
            "mfu": median([r["flops"] / r["step_s"] / (r["peak_gflops"] * 1e9) for r in runs]),
            "peak_gflops": median([r["peak_gflops"] for r in runs]),
            "peak_fp32": median([r["peak_fp32"] for r in runs]),
            "peak_bf16": median([r["peak_bf16"] for r in runs]),
            "peak_mib": median([r["peak_mib"] for r in runs]),
            "warmup_s": median([r.get("warmup_s", float("nan")) for r in runs]),
            "n": len(runs),
        }
    return out


def write(args, rows: list[dict], seconds: float, load0: float, load1: float) -> None:
    base = f" side by side with `{describe(args.baseline)}` (base)" if args.baseline else ""
    cmd = (
        f"`scripts/bench/bench_train.py --sizes {' '.join(args.sizes)} --pes {' '.join(args.pes)} "
        f"--precisions {' '.join(args.precisions)} --steps {args.steps} "
        f"--threads {args.threads} --repeats {args.repeats}"
        + (" --compile" if args.compile else "")
        + (f" --baseline {args.baseline}`" if args.baseline else "`")
    )
    lines = [
        "## training",
        "",
        f"{cmd} on {machine()}{base}; {seconds / 60:.1f} min, {args.threads} threads in each "
        "measured process. One training step = forward + backward + clipping + the trainer's "
        "optimizer (`musicgen.train.make_optimizer` where the tree has it, else plain Adam) on "
        "random tokens at the preset's crop length, fp32 or under bf16 autocast as the trainer "
        "runs it; step = median of the timed steps after one "
        "warm-up, then the median over the repeats (new and base alternate, each in a fresh "
        "process); "
        "tokens/s = batch x crop / step. MFU = model FLOPs (6 x weights x tokens for every Linear "
        "and the head, plus 3x the forward FLOPs of the feature maps, the chunked attention and "
        "SPE, from `benchlib.forward_flops`) / step / the 2048 x 2048 matmul rate of the row's "
        "precision measured in the same process just before. Peak = resident memory above the "
        "process's size once the model is built (ru_maxrss). The `default` rows are the paper's "
        f"24-layer model at batch 1. Load average {load0:.1f} at the start and {load1:.1f} at "
        f"the end on this {os.cpu_count()}-CPU machine: compare rows of one run, not runs of "
        "different days.",
        "",
        "| preset | layers x d_model | params | crop x batch | positional encoding | precision | "
        "tokens/s | MFU | step (s) | peak (MiB) | vs APE time | vs fp32 tokens/s |"
        + (" base tokens/s | base MFU | speed-up | MFU ratio |" if args.baseline else "")
        + (" compilation (s) |" if args.compile else ""),
        "|---|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|"
        + ("---:|---:|---:|---:|" if args.baseline else "")
        + ("---:|" if args.compile else ""),
    ]
    ape = {
        (r["size"], r["precision"]): r["new"]["step_s"]
        for r in rows
        if r["pe"] == "ape" and "new" in r
    }
    fp32 = {
        (r["size"], r["pe"]): r["new"]["tok_s"]
        for r in rows
        if r["precision"] == "fp32" and "new" in r
    }
    for r in rows:
        new = r.get("new")
        if new is None:
            continue
        key = (r["size"], r["precision"])
        vs = f"{new['step_s'] / ape[key]:.2f}" if key in ape else "—"
        ref = fp32.get((r["size"], r["pe"]))
        vs32 = f"x{new['tok_s'] / ref:.2f}" if ref else "—"
        line = (
            f"| {r['size']} | {r['layers']} x {r['d_model']} | {r['params_m']:.2f} M | "
            f"{r['crop']} x {r['batch']} | {r['pe']} | {r['precision']} | {new['tok_s']:.0f} | "
            f"{new['mfu']:.0%} | {new['step_s']:.2f} | {new['peak_mib']:.0f} | {vs} | {vs32} |"
        )
        if args.baseline:
            b = r.get("base")
            line += (
                f" {b['tok_s']:.0f} | {b['mfu']:.0%} | x{new['tok_s'] / b['tok_s']:.2f} | "
                f"x{new['mfu'] / b['mfu']:.2f} |"
                if b
                else " failed | — | — | — |"
            )
        if args.compile:  # the warm-up step, less one timed step
            line += f" {new['warmup_s'] - new['step_s']:.0f} |"
        lines.append(line)
    peaks = {dt: [r["new"][f"peak_{dt}"] for r in rows if "new" in r] for dt in ("fp32", "bf16")}
    lines += [
        "",
        "Matmul peak of this CPU measured by the workers (2048 x 2048): "
        + "; ".join(
            f"{dt} median {median(v):.0f} GFLOP/s (range {min(v):.0f}-{max(v):.0f})"
            for dt, v in peaks.items()
        )
        + ". Speed-up = new tokens/s / base "
        "tokens/s; MFU ratio = the same with each worker's step normalised by the matmul "
        "rate it measured just before (less sensitive to load that changes between "
        "workers).",
    ]
    write_section(args.write, "## training", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
