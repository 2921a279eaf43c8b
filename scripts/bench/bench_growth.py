"""Why a step at 8192 tokens costs more than 8x one at 1024: the same operators of one layer of
the default width, timed alone at both lengths in one process; write the "growth" section of
docs/benchmarks.md.

A GEMM does the same work per token at both lengths (its ratio stays near 8). The memory-bound
operators (GELU and its backward, LayerNorm, the residual add, the feature map's exp, the
head-major copy of q, k, v) touch a few bytes per FLOP: at 1024 tokens their operands (2-8 MB)
sit in the cache, at 8192 (16-64 MB) they stream from memory, and every new output of that size
is fresh pages from the kernel (torch's CPU allocator returns large blocks to the system: the
add into a preallocated output separates the two). If their ratios are well above 8 and the
GEMM's is not far from it, the model's growth is the memory system, not an algorithm.

    python scripts/bench/bench_growth.py --threads 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from benchlib import bandwidth_gbs, machine, run_worker, write_section

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## growth"
D, FF, H, M = 512, 2048, 8, 128  # the default width: d_model, FFN, heads, FAVOR+ features


def _gelu(n: int):
    x = torch.randn(n, FF, requires_grad=True)
    g = torch.randn(n, FF)
    return lambda: F.gelu(x).backward(g)


def _layer_norm(n: int):
    x, g = torch.randn(n, D, requires_grad=True), torch.randn(n, D)
    w, b = torch.ones(D, requires_grad=True), torch.zeros(D, requires_grad=True)
    return lambda: F.layer_norm(x, (D,), w, b).backward(g)


def _add(n: int):
    a, b = torch.randn(n, FF), torch.randn(n, FF)
    return lambda: a + b


def _add_into(n: int):
    a, b, out = torch.randn(n, FF), torch.randn(n, FF), torch.empty(n, FF)
    return lambda: torch.add(a, b, out=out)


def _exp(n: int):
    x = torch.randn(H, n, M)
    return lambda: x.exp()


def _heads(n: int):
    qkv = torch.randn(n, 3, H, D // H)
    return lambda: qkv.permute(1, 2, 0, 3).contiguous()


def _gemm(n: int):
    x, w = torch.randn(n, D), torch.randn(D, FF)
    return lambda: x @ w


OPS = {
    "GEMM (N x 512) @ (512 x 2048)": _gemm,
    "GELU forward + backward (N x 2048)": _gelu,
    "LayerNorm forward + backward (N x 512)": _layer_norm,
    "add (N x 2048), a new output": _add,
    "add (N x 2048) into a preallocated output": _add_into,
    "exp (8 x N x 128)": _exp,
    "q, k, v to heads, a copy (N x 3 x 8 x 64)": _heads,
}


def best_time(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def measure(lengths: tuple[int, int], repeats: int) -> dict[str, tuple[float, float]]:
    """Per operator: best time at each length, the lengths alternating (same machine state)."""
    out = {}
    for name, make in OPS.items():
        short, long = make(lengths[0]), make(lengths[1])
        times = [[], []]
        for _ in range(3):
            times[0].append(best_time(short, repeats))
            times[1].append(best_time(long, repeats))
        out[name] = (min(times[0]), min(times[1]))
    return out


def worker(mode: str, lengths: tuple[int, int], threads: int, repeats: int) -> dict:
    """One process: glibc's default allocator ("system") or `keep_freed_memory` ("keep")."""
    from musicgen.allocator import keep_freed_memory

    if mode == "keep":
        keep_freed_memory()
    torch.set_num_threads(threads)
    bw = {"small": bandwidth_gbs(4 * 2**20, 50), "large": bandwidth_gbs(512 * 2**20, 5)}
    return {"ops": measure(lengths, repeats), "bandwidth": bw}


def section(args, res: dict) -> str:
    n0, n1 = args.lengths
    sys_, keep = res["system"]["ops"], res["keep"]["ops"]
    rows = []
    for name, (t0, t1) in sys_.items():
        k0, k1 = keep[name]
        rows.append(
            f"| {name} | {t0 * 1e3:.2f} | {t1 * 1e3:.2f} | {t1 / t0:.1f} | {k0 * 1e3:.2f} | "
            f"{k1 * 1e3:.2f} | {k1 / k0:.1f} |"
        )
    bw = res["system"]["bandwidth"]
    return "\n".join(
        [
            SECTION,
            "",
            f"`scripts/bench/bench_growth.py --threads {args.threads}` on {machine()}: each "
            f"operator of one layer of the default width alone, best of {args.repeats} runs, "
            f"three alternations of the two lengths in one process (best of them); one process "
            f"with glibc's default allocator, one after `musicgen.allocator.keep_freed_memory()` "
            f"(what every command does). Copy bandwidth (`benchlib.bandwidth_gbs`, first "
            f"process): {bw['small']:.1f} GB/s for a 4 MiB buffer, {bw['large']:.1f} GB/s for "
            f"512 MiB.",
            "",
            f"| operator | {n0} (ms) | {n1} (ms) | ratio | kept: {n0} (ms) | kept: {n1} (ms) | "
            "kept: ratio |",
            "|---|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Ratio = time at {n1} tokens / time at {n0} ({n1 // n0}x the tokens).",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs=2, default=(1024, 8192))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--worker", choices=("system", "keep"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    lengths = tuple(args.lengths)
    if args.worker:
        print(json.dumps(worker(args.worker, lengths, args.threads, args.repeats)))
        return
    res = {}
    for mode in ("system", "keep"):
        cmd = [sys.executable, __file__, "--worker", mode, "--threads", str(args.threads)]
        cmd += ["--repeats", str(args.repeats), "--lengths", *map(str, lengths)]
        res[mode] = run_worker(cmd, f"growth {mode}")
        if res[mode] is None:
            raise SystemExit(1)
    body = section(args, res)
    write_section(args.doc, SECTION, body)
    print(body)


if __name__ == "__main__":
    main()
