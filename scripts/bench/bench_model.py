"""Forward + backward time, model FLOP utilisation and peak memory of the Performer per positional
encoding and length, optionally side by side with a baseline commit; write the "model" section of
docs/benchmarks.md (its own section only; other sections are kept).

Every (variant, length) runs in its own subprocess so that its peak resident memory (ru_maxrss,
minus the size after building the model) belongs to it alone; lengths are the outer loop, so
the variants of one length run side by side under the same machine load. With `--baseline REV`
each measurement also runs on a temporary `git worktree` of REV, alternating `--repeats` times.

    python scripts/bench/bench_model.py --baseline HEAD~3 --lengths 1024,2048,8192 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

from benchlib import (
    code_trees,
    describe,
    interleaved,
    keep_freed_memory,
    matmul_peak_gflops,
    median,
    rss_mib,
    run_worker,
    train_flops,
    write_section,
)

ROOT = Path(__file__).resolve().parents[2]

SECTION = "## model"
VARIANTS = {
    "APE": dict(pe="ape"),
    "sineSPE": dict(pe="sine_spe"),
    "sineSPE gated": dict(pe="sine_spe", gated=True),
    "convSPE": dict(pe="conv_spe"),
    "convSPE gated": dict(pe="conv_spe", gated=True),
    "APE fast-transformers": dict(pe="ape", backend="fast_transformers"),
    "APE softmax (SDPA)": dict(pe="ape", softmax=True),
}


def worker(variant: str, length: int, layers: int, reps: int, threads: int) -> dict:
    """Build the model, run fwd+bwd `reps` + 1 times at batch 1; report the best time."""
    import torch
    import torch.nn.functional as F

    from musicgen.config import ModelConfig
    from musicgen.model import build_model

    keep_freed_memory()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    peak_gflops = matmul_peak_gflops()
    opts = dict(VARIANTS[variant])
    softmax = opts.pop("softmax", False)
    cfg = ModelConfig(vocab_size=340, n_layers=layers, dropout=0.0, **opts)
    model = build_model(cfg).train()
    if softmax:
        for block in model.blocks:
            block.attn.forward = _softmax_forward(block.attn, F)
    ids = torch.randint(0, 340, (1, length))
    base = rss_mib()
    times = []
    for _ in range(reps + 1):  # a warm-up (the cold first step, reported apart), then reps
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        model(ids).float().logsumexp(-1).mean().backward()
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "variant": variant,
        "length": length,
        "time_s": min(times[1:]),
        "cold_s": times[0],
        "peak_mib": peak - base,
        "flops": train_flops(cfg, 1, length),
        "peak_gflops": peak_gflops,
    }


def _softmax_forward(attn, F):
    """Exact causal softmax attention with the layer's own projections (the O(N^2) baseline)."""

    def forward(x, codes=None, cache=None):
        b, n, _ = x.shape
        q, k, v = attn.qkv(x).view(b, n, 3, attn.n_heads, attn.head_dim).unbind(2)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return attn.out(out.transpose(1, 2).reshape(b, n, -1))

    return forward


def summarise(res: dict[str, list[dict]]) -> dict:
    """Medians over the repeats of each tree (time, memory, MFU against that worker's peak)."""
    return {
        label: {
            "time_s": median([r["time_s"] for r in runs]),
            "cold_s": median([r.get("cold_s", float("nan")) for r in runs]),
            "peak_mib": median([r["peak_mib"] for r in runs]),
            "mfu": median([r["flops"] / r["time_s"] / (r["peak_gflops"] * 1e9) for r in runs]),
        }
        for label, runs in res.items()
        if runs
    }


def report(rows: dict, lengths: list[int], header: str, baseline: bool) -> str:
    """rows[(variant, length)] = {"new": {...}, "base": {...}}."""
    res = {k: r["new"] for k, r in rows.items() if "new" in r}
    names = [v for v in VARIANTS if any((v, n) in res for n in lengths)]
    t = {k: r["time_s"] for k, r in res.items()}
    mem = {k: r["peak_mib"] for k, r in res.items()}
    lines = [SECTION, "", header, ""]
    lines.append("| variant | " + " | ".join(f"{n}" for n in lengths) + " |")
    lines.append("|---|" + "---:|" * len(lengths))
    for v in names:
        cells = [
            f"{t[(v, n)]:.2f} s / {mem[(v, n)]:.0f} MiB / {res[(v, n)]['mfu']:.0%}"
            if (v, n) in res
            else "—"
            for n in lengths
        ]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    if baseline:
        lines += [
            "",
            "Speed-up over the base (base time / new time, same run, interleaved):",
            "",
            "| variant | " + " | ".join(f"{n}" for n in lengths) + " |",
            "|---|" + "---:|" * len(lengths),
        ]
        for v in names:
            cells = []
            for n in lengths:
                r = rows.get((v, n), {})
                ok = "new" in r and "base" in r
                cells.append(f"x{r['base']['time_s'] / r['new']['time_s']:.2f}" if ok else "—")
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
    lines += ["", "Ratios against the targets (new code):", ""]
    cold = {k: r["cold_s"] for k, r in res.items()}
    for v in names:
        if (v, 8192) in t and (v, 1024) in t:
            r, rc = t[(v, 8192)] / t[(v, 1024)], cold[(v, 8192)] / cold[(v, 1024)]
            lines.append(
                f"- {v}: time(8192) / time(1024) = {r:.1f} (target <= 9; the cold first "
                f"steps: {rc:.1f})"
            )
    for v, lim in (
        ("sineSPE", 1.2),
        ("convSPE", 1.5),
        ("sineSPE gated", 1.2),
        ("convSPE gated", 1.5),
    ):
        if (v, 2048) in t and ("APE", 2048) in t:
            rt = t[(v, 2048)] / t[("APE", 2048)]
            rm = mem[(v, 2048)] / max(mem[("APE", 2048)], 1e-9)
            lines.append(
                f"- {v} vs APE at 2048: time x{rt:.2f} (target <= {lim}), "
                f"memory x{rm:.2f} (target <= 1.3)"
            )
    lines += _reference_ratios(t, lengths)
    return "\n".join(lines) + "\n"


def _reference_ratios(t: dict, lengths: list[int]) -> list[str]:
    lines = []
    ft = "APE fast-transformers"
    both = [n for n in lengths if (ft, n) in t and ("APE", n) in t]
    if both:
        parts = ", ".join(f"{n}: x{t[('APE', n)] / t[(ft, n)]:.2f}" for n in both)
        lines.append(f"- our chunked attention time / fast-transformers kernel time: {parts}")
    else:
        lines.append("- fast-transformers: not installed when this ran (`make install-fast`)")
    sm = "APE softmax (SDPA)"
    pairs = [n for n in lengths if (sm, n) in t and ("APE", n) in t]
    if pairs:
        faster = [t[("APE", n)] < t[(sm, n)] for n in pairs]
        parts = ", ".join(f"{n}: x{t[('APE', n)] / t[(sm, n)]:.2f}" for n in pairs)
        lines.append(f"- linear (APE) time / softmax time: {parts}")
        from_ = next((n for i, n in enumerate(pairs) if all(faster[i:])), None)
        lines.append(
            f"- linear beats softmax from length {from_} on"
            if from_
            else "- linear did not beat softmax at the longest measured length"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="512,1024,2048,4096,8192")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--worker", nargs=2, metavar=("VARIANT", "LENGTH"), help=argparse.SUPPRESS)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--baseline", help="git revision to run side by side with this tree")
    ap.add_argument("--repeats", type=int, default=1, help="alternations per measurement")
    args = ap.parse_args()
    if args.worker:
        reps = args.reps if int(args.worker[1]) <= 2048 else 1
        print(
            json.dumps(worker(args.worker[0], int(args.worker[1]), args.layers, reps, args.threads))
        )
        return
    sys.path.insert(0, str(ROOT))
    import torch

    from musicgen.model.attention import fast_transformers_available

    lengths = [int(x) for x in args.lengths.split(",")]
    variants = [v for v in args.variants.split(",") if v]
    if not fast_transformers_available():
        variants = [v for v in variants if "fast" not in v]
    rows, start, load = {}, time.time(), os.getloadavg()[0]
    with code_trees(args.baseline) as trees:
        for n in lengths:
            for v in variants:
                cmd = [
                    sys.executable,
                    __file__,
                    "--worker",
                    v,
                    str(n),
                    "--layers",
                    str(args.layers),
                    "--reps",
                    str(args.reps),
                    "--threads",
                    str(args.threads),
                ]
                res = interleaved(
                    trees,
                    args.repeats,
                    lambda label, tree, cmd=cmd, w=f"{v} @ {n}": run_worker(
                        cmd, f"{w} {label}", tree
                    ),
                )
                rows[(v, n)] = summarise(res)
                print(f"{v:>22} {n:>5}: {json.dumps(rows[(v, n)])}", flush=True)
    base = f", side by side with `{describe(args.baseline)}` (base)" if args.baseline else ""
    depth = (
        "and the default depth (24 layers)"
        if args.layers == 24
        else f"but only **{args.layers} layers, not 24**"
    )
    header = (
        f"`scripts/bench/bench_model.py --lengths {args.lengths} --layers {args.layers} --threads "
        f"{args.threads} --repeats {args.repeats}"
        + (f" --baseline {args.baseline}`" if args.baseline else "`")
        + f"{base}: forward + backward of one batch (batch 1, random tokens, vocabulary 340) "
        f"through the default model width (d_model 512, 8 heads, FFN 2048, FAVOR+ 128 features, "
        f"R = 64, K = 5, P = 128, chunk 64) {depth}, on this "
        f"CPU machine ({platform.processor() or platform.machine()}, {os.cpu_count()} logical "
        f"CPUs, torch {torch.__version__}, float32, {args.threads} threads), "
        f"{(time.time() - start) / 60:.1f} min. Each cell is `time / peak extra resident memory "
        f"/ MFU`: time = best of {args.reps} runs after one warm-up up to 2048 tokens (one run "
        f"after the warm-up above: a process's first step pays for its fresh pages, which a "
        f"training pays once; the growth ratios below give both), then the median over the "
        f"repeats (new and base alternate, each in a fresh "
        f"process); memory = ru_maxrss of that process minus its size after building the model; "
        f"MFU = 3 x forward FLOPs (`benchlib.forward_flops`) / time / the 2048 x 2048 matmul rate "
        f"measured by the same process. The CPUs were shared with other jobs (load average "
        f"{load:.1f} at the start), so times are upper bounds and noisy; ratios within one run "
        f"are what to compare. Softmax = `F.scaled_dot_product_attention(is_causal=True)` with "
        f"the same projections."
    )
    doc_path = Path(args.doc)
    write_section(doc_path, SECTION, report(rows, lengths, header, bool(args.baseline)))
    print(f"wrote the model section of {doc_path}")


if __name__ == "__main__":
    main()
