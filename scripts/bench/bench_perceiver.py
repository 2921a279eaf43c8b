"""Training throughput and peak memory of Perceiver S and the plain Performer per context length;
write the "perceiver" section of docs/benchmarks.md (its own section only; other sections are kept).

Both models read the same m tokens and are trained on the same n predicted positions (the last n):
the Performer runs its layers over all m tokens, Perceiver S reads them once by cross-attention and
runs its layers over n latents. Every (model, m) runs in its own subprocess so that its peak
resident memory (ru_maxrss minus the size after building the model) belongs to it alone.
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

from benchlib import rss_mib, run_worker, write_section

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SECTION = "## perceiver"
MODELS = ("Perceiver S", "Performer")
VOCAB = 340


def model_config(kind: str, m: int, args):
    from musicgen.config import ModelConfig, PerceiverConfig

    return ModelConfig(
        vocab_size=VOCAB,
        n_layers=args.layers,
        d_model=args.d_model,
        n_heads=args.heads,
        d_ff=4 * args.d_model,
        dropout=0.0,
        n_features=args.features,
        pe=args.pe,
        num_realizations=args.r,
        head="perceiver_s" if kind == "Perceiver S" else "lm",
        perceiver=PerceiverConfig(context_len=m, n_queries=args.n),
    )


def worker(kind: str, m: int, args) -> dict:
    """Train steps (fwd + bwd + Adam) at batch `args.batch`; report the best step time."""
    import torch
    import torch.nn.functional as F

    from musicgen.model import build_model

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(model_config(kind, m, args)).to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    ids = torch.randint(1, VOCAB, (args.batch, m), device=device)
    tgt = torch.randint(1, VOCAB, (args.batch, args.n), device=device)
    base = rss_mib()
    times, cpu = [], []
    for _ in range(args.reps + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        logits = model(ids)[:, -args.n :]  # (B, n, V): the same predicted positions for both
        F.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    best = min(times[1:] or times)
    return {
        "model": kind,
        "m": m,
        "step_s": best,
        "tok_s": args.batch * args.n / best,
        "cpu_s": min(cpu[1:] or cpu),
        "peak_mib": peak,
        "params": sum(p.numel() for p in model.parameters()),
        "device": device.type,
    }


def report(rows: list[dict], lengths: list[int], header: str) -> str:
    res = {(r["model"], r["m"]): r for r in rows if "step_s" in r}
    lines = [SECTION, "", header, ""]
    lines.append("| model | params | " + " | ".join(f"m = {m}" for m in lengths) + " |")
    lines.append("|---|---:|" + "---:|" * len(lengths))
    for kind in MODELS:
        got = [res[(kind, m)] for m in lengths if (kind, m) in res]
        if not got:
            continue
        cells = [
            f"{res[(kind, m)]['tok_s']:,.0f} tok/s / {res[(kind, m)]['peak_mib']:,.0f} MiB "
            f"({res[(kind, m)]['cpu_s']:.2f} CPU s)"
            if (kind, m) in res
            else "failed"
            for m in lengths
        ]
        lines.append(f"| {kind} | {got[0]['params'] / 1e6:.2f} M | " + " | ".join(cells) + " |")
    ratios = [
        f"{m}: x{res[('Perceiver S', m)]['tok_s'] / res[('Performer', m)]['tok_s']:.1f}"
        for m in lengths
        if ("Perceiver S", m) in res and ("Performer", m) in res
    ]
    if ratios:
        lines += ["", "Perceiver S throughput / Performer throughput: " + ", ".join(ratios) + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="2048,4096,8192,16384")
    ap.add_argument("--n", type=int, default=512, help="predicted positions (Perceiver latents)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--pe", default="sine_spe")
    ap.add_argument("--r", type=int, default=32, help="SPE realizations R")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--worker", nargs=2, metavar=("MODEL", "M"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]), args)))
        return

    lengths = [int(x) for x in args.lengths.split(",")]
    passthrough = [
        f"--n={args.n}",
        f"--layers={args.layers}",
        f"--d-model={args.d_model}",
        f"--heads={args.heads}",
        f"--features={args.features}",
        f"--pe={args.pe}",
        f"--r={args.r}",
        f"--batch={args.batch}",
        f"--reps={args.reps}",
    ]
    rows, start, load = [], time.time(), os.getloadavg()[0]
    for m in lengths:  # lengths outer: both models of one m run under the same machine load
        for kind in MODELS:
            cmd = [sys.executable, __file__, "--worker", kind, str(m), *passthrough]
            r = run_worker(cmd, f"{kind} @ {m}")
            rows.append(r or {"model": kind, "m": m})
            if r is None:
                continue
            print(
                f"{kind:>12} m={m:>6}: {r['step_s']:7.2f} s/step {r['tok_s']:9.0f} tok/s "
                f"{r['peak_mib']:8.0f} MiB",
                flush=True,
            )
    import torch

    dev = next((r["device"] for r in rows if "device" in r), "cpu")
    where = (
        "one CUDA GPU, peak = torch.cuda.max_memory_allocated"
        if dev == "cuda"
        else f"this CPU machine ({platform.processor() or platform.machine()}, {os.cpu_count()} "
        f"logical CPUs), peak = extra resident memory (ru_maxrss of a fresh process minus "
        f"its size after building the model)"
    )
    header = (
        f"Training steps (forward + backward + Adam, batch {args.batch}, random tokens, "
        f"vocabulary {VOCAB}, float32) of Perceiver S and of the plain Performer at the same "
        f"width and depth ({args.layers} Performer layers of d_model {args.d_model}, {args.heads} "
        f"heads, FFN {4 * args.d_model}, FAVOR+ {args.features} features, {args.pe} with "
        f"R = {args.r}; Perceiver S adds its two cross-attention layers and an FFN) and the same "
        f"number of predicted positions: both read m tokens and are trained on the last "
        f"n = {args.n}. Cells: trained tokens/s (batch x n / best step time) / peak memory "
        f"(CPU seconds of that step, all threads: less sensitive to other jobs than wall time). "
        f"**Small widths, not the 24-layer paper model**, on {where}; torch {torch.__version__}; "
        f"best of {args.reps} steps after one warm-up; written by "
        f"`scripts/bench/bench_perceiver.py` in "
        f"{(time.time() - start) / 60:.1f} min. The CPUs were shared with other jobs (load average "
        f"{load:.1f} at the start), so times are upper bounds and noisy. Perceiver S costs "
        f"O(n m) once (softmax cross-attention) plus its layers on n latents; the Performer "
        f"costs O(m) per layer, all layers on m tokens."
    )
    doc_path = Path(args.doc)
    write_section(doc_path, SECTION, report(rows, lengths, header))
    print(f"wrote the perceiver section of {doc_path}")


if __name__ == "__main__":
    main()
