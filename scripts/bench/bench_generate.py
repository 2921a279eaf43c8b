"""Time generation with the 24-layer default model (random weights); write the "generation" section
of docs/benchmarks.md (its own section only; other sections are kept).

Usage: .venv/bin/python scripts/bench/bench_generate.py [--steps 16] [--no-doc]
Measures: tokens/s of `step` at batch 1 and 8 (APE, gated sineSPE, gated convSPE); step-by-step
decoding vs recomputing the whole prefix at each step up to 2048 tokens (recomputation timed at a
few prefix lengths and summed over all 2048 from a linear fit); per-token time near position 100
and near 4000; the memory-bandwidth bound for one token at batch 1; the invalid-token rate of
untrained tiny models sampled without the grammar.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchlib import bandwidth_gbs, machine, weight_bytes_per_token, write_section  # noqa: E402

from musicgen.checkpoint import Loaded  # noqa: E402
from musicgen.config import Config, ModelConfig  # noqa: E402
from musicgen.generation.api import Model  # noqa: E402
from musicgen.generation.decoding.sample import invalid_rate  # noqa: E402
from musicgen.model import build_model  # noqa: E402
from musicgen.tokenizers import build_tokenizer  # noqa: E402

SECTION = "## generation"
PES = [("ape", False), ("sine_spe", True), ("conv_spe", True)]


@torch.inference_mode()
def gemv_floor(model: torch.nn.Module, repeats: int = 5) -> float:
    """Seconds for one batch-1 product with every Linear weight of the model, nothing else: what
    a step costs at least on this machine with these kernels (best of `repeats`)."""
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    xs = [torch.randn(1, w.shape[1]) for w in weights]
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for w, x in zip(weights, xs, strict=True):
            torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - t0)
    return best


def make(vocab: int, pe: str, gated: bool, n_layers: int = 24, **small):
    cfg = ModelConfig(vocab_size=vocab, pe=pe, gated=gated, dropout=0.0, n_layers=n_layers, **small)
    torch.manual_seed(0)
    return build_model(cfg).eval(), cfg


def new_run(model, batch: int, start_pos: int = 0) -> list:
    """[model, state, next ids] for a sequence whose next position is `start_pos`.

    Jumping ahead sets the state's position only: the state (running sums, SPE noise window) has
    a fixed size, so a step's cost depends on the position through nothing else.
    """
    state = model.init_state(batch, "cpu")
    state.pos = start_pos
    return [model, state, torch.ones(batch, dtype=torch.long)]


@torch.inference_mode()
def interleaved(runs: dict, steps: int, warm: int = 2) -> dict:
    """Median seconds per step of each run, the runs stepped in turn so that the machine's
    varying load (other jobs) hits all of them alike."""
    times: dict = {k: [] for k in runs}
    for i in range(warm + steps):
        for key, run in runs.items():
            model, state, ids = run
            t0 = time.perf_counter()
            logits, run[1] = model.step(ids, state)
            dt = time.perf_counter() - t0
            run[2] = logits.argmax(-1)
            if i >= warm:
                times[key].append(dt)
    return {k: float(np.median(v)) for k, v in times.items()}


def real_long_run(vocab: int, n_layers: int, length: int, steps: int = 100) -> dict:
    """Small models (d_model 128), every step executed: one sequence stepped to `length`, a
    second one to 100; then both stepped in turn `steps` more times (so that the machine's
    varying load hits both alike). Median s/token near 100 and near `length`."""
    out = {}
    for pe, gated in PES:
        model = make(vocab, pe, gated, n_layers, d_model=128, n_heads=2, d_ff=512)[0]
        far, near = new_run(model, 1), new_run(model, 1)
        interleaved({"far": far}, 0, warm=length)
        interleaved({"near": near}, 0, warm=100)
        med = interleaved({"near": near, "far": far}, steps, warm=0)
        out[pe] = (med["near"], med["far"])
    return out


@torch.inference_mode()
def recompute_total(model, vocab: int, lengths: list[int], total: int) -> tuple[float, dict]:
    """Time forward over prefixes of a few lengths; fit t(n) = a + b n; sum over n = 1..total."""
    measured = {}
    model(torch.randint(3, vocab, (1, 64)))  # warm-up
    for n in lengths:
        ids = torch.randint(3, vocab, (1, n))
        t0 = time.perf_counter()
        model(ids)
        measured[n] = time.perf_counter() - t0
    b, a = np.polyfit(list(measured), list(measured.values()), 1)
    ns = np.arange(1, total + 1)
    return float(np.sum(np.maximum(a + b * ns, 0.0))), measured


def invalid_rates(samples: int, max_tokens: int) -> dict:
    """Untrained tiny models: invalid-token rate without the grammar, errors with it."""
    out = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for name in ("remi", "groove"):
        tok = build_tokenizer(name)
        cfg = ModelConfig(
            vocab_size=tok.vocab_size,
            n_layers=2,
            d_model=32,
            n_heads=2,
            d_ff=64,
            dropout=0.0,
            n_features=16,
            num_realizations=8,
            kernel_size=8,
        )
        torch.manual_seed(0)
        loaded = Loaded(build_model(cfg).eval(), tok, Config(model=cfg))
        model = Model(loaded, torch.device("cpu"), name)
        plain = {"temperature": 1.0, "top_k": 0, "top_p": 1.0}
        row = {}
        for grammar in (False, True):
            res = list(
                model.pieces(samples // 50 * 50, max_tokens=max_tokens, seed=0, batch_size=50,
                             grammar=grammar, **plain)
            )  # fmt: skip
            row[grammar] = (invalid_rate(res), sum(r.sampled for r in res))
        out[name] = row
    torch.set_num_threads(threads)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=16, help="timed steps per measurement")
    ap.add_argument("--long", type=int, default=4000, help="position of the 'far' measurement")
    ap.add_argument("--long-layers", type=int, default=1, help="layers of the real long run")
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--layers", type=int, default=24, help="layers of the timed model")
    ap.add_argument(
        "--recompute",
        type=int,
        nargs="+",
        default=[128, 512, 1024, 2048],
        help="prefix lengths at which recomputation is timed",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--samples", type=int, default=200, help="samples per invalid-rate figure")
    ap.add_argument("--no-doc", action="store_true", help="print only")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    t_start = time.perf_counter()
    load_start = os.getloadavg()[0]
    vocab = build_tokenizer("remi").vocab_size
    bw = bandwidth_gbs()
    print(f"bandwidth {bw:.1f} GB/s", flush=True)

    models = {pe: make(vocab, pe, gated, args.layers)[0] for pe, gated in PES}
    n_params = sum(p.numel() for p in models["ape"].parameters())
    bytes_tok = weight_bytes_per_token(models["ape"], 512)
    floor = gemv_floor(models["ape"])
    speed = {}
    for batch in (1, 8):
        med = interleaved({pe: new_run(m, batch) for pe, m in models.items()}, args.steps)
        speed.update({(pe, batch): batch / t for pe, t in med.items()})
    print(f"tokens/s: {speed}", flush=True)
    med = interleaved(
        {
            (pe, where): new_run(m, 1, pos)
            for pe, m in models.items()
            for where, pos in (("near", 100), ("far", args.long - args.steps))
        },
        args.steps,
    )
    far = {pe: (med[(pe, "near")], med[(pe, "far")]) for pe in models}
    print(f"per token near 100 / {args.long}: {far}", flush=True)
    ape_model = models["ape"]
    del models
    med = interleaved(
        {p: new_run(ape_model, 1, p) for p in (100, 1000, 2048 - args.steps)}, args.steps
    )
    step_2048 = 2048 * float(np.mean(list(med.values())))
    recompute, measured = recompute_total(ape_model, vocab, args.recompute, 2048)
    print(f"2048 tokens: step {step_2048:.1f} s, recompute {recompute:.1f} s", flush=True)
    del ape_model
    real = real_long_run(vocab, args.long_layers, args.long)
    print(f"real long runs: {real}", flush=True)
    rates = invalid_rates(args.samples, 128)
    print(f"invalid rates: {rates}", flush=True)
    minutes = (time.perf_counter() - t_start) / 60

    bound = bytes_tok / (bw * 1e9)
    lines = [
        SECTION,
        "",
        f"`scripts/bench/bench_generate.py {' '.join(sys.argv[1:])}` on {machine()}; "
        f"{minutes:.1f} min. "
        f"Model: the default config ({args.layers} layers, d_model 512, 8 heads, FFN 2048, "
        f"FAVOR+ 128 features, R = 64; {n_params / 1e6:.1f} M parameters, REMI vocabulary "
        f"{vocab}), random weights, fp32, `model.step` only (no sampling); each figure is the "
        f"median of {args.steps} steps after 2 warm-up steps, the models or positions compared "
        "stepped in turn. The machine is shared with other jobs (load average "
        f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on 2 CPUs): expect "
        "noise of tens of percent.",
        "",
        "| positional encoding | tokens/s, batch 1 | tokens/s, batch 8 | vs APE (b1 / b8) |",
        "|---|---|---|---|",
    ]
    for pe, gated in PES:
        label = pe + (" (gated)" if gated else "")
        r1, r8 = speed[(pe, 1)] / speed[("ape", 1)], speed[(pe, 8)] / speed[("ape", 8)]
        lines.append(
            f"| {label} | {speed[(pe, 1)]:.1f} | {speed[(pe, 8)]:.1f} | {r1:.2f} / {r8:.2f} |"
        )
    lines += [
        "",
        "Per-token time at batch 1, near position 100 and near position "
        f"{args.long} (the state's position set directly: the state has a fixed size):",
        "",
        f"| positional encoding | ms/token near 100 | ms/token near {args.long} | ratio |",
        "|---|---|---|---|",
    ]
    for pe, _ in PES:
        a, b = far[pe]
        lines.append(f"| {pe} | {a * 1e3:.1f} | {b * 1e3:.1f} | {b / a:.2f} |")
    lines += [
        "",
        f"Real runs (a {args.long_layers}-layer model with d_model 128, 2 heads): one sequence "
        f"stepped from 0 to {args.long}, one from 0 to 100, then both stepped 100 more times in "
        "turn; median ms/token:",
        "",
        f"| positional encoding | positions 100-199 | positions {args.long}-{args.long + 99} "
        "| ratio |",
        "|---|---|---|---|",
    ]
    for pe, _ in PES:
        a, b = real[pe]
        lines.append(f"| {pe} | {a * 1e3:.2f} | {b * 1e3:.2f} | {b / a:.2f} |")
    meas = ", ".join(f"{n}: {t:.2f} s" for n, t in measured.items())
    lines += [
        "",
        f"Step-by-step vs recomputation, 2048 tokens, APE, batch 1: step-by-step "
        f"{step_2048:.1f} s (2048 x the mean of the median step times near positions 100, 1000 "
        "and 2048); "
        f"recomputing the whole prefix for every new token {recompute:.0f} s, extrapolated from "
        f"forward passes timed at prefix lengths ({meas}) with a linear fit summed over "
        f"n = 1..2048: **{recompute / step_2048:.0f}x** slower.",
        "",
        f"Memory-bandwidth bound, batch 1: {bytes_tok / 1e6:.0f} MB of weights read per token "
        f"(every parameter once, one embedding row) / {bw:.1f} GB/s (copy of a 512 MiB tensor, "
        f"read + write) = {bound * 1e3:.1f} ms/token ({1 / bound:.1f} tokens/s); measured APE "
        f"batch 1: {1e3 / speed[('ape', 1)]:.1f} ms/token, **{speed[('ape', 1)] * bound:.2f}** "
        f"of the bound's speed. For scale: the batch-1 matrix-vector products with all Linear "
        f"weights alone (nothing else of a step) take {floor * 1e3:.1f} ms here "
        f"({bound / floor:.2f} of the bound's speed).",
        "",
        f"Invalid-token rate of untrained tiny models (2 layers, d 32), {args.samples} samples of "
        "at most "
        "128 tokens at T = 1 (grammar errors / sampled tokens):",
        "",
        "| tokenizer | grammar off | grammar on |",
        "|---|---|---|",
    ]
    for name, row in rates.items():
        lines.append(
            f"| {name} | {row[False][0]:.3f} ({row[False][1]} tokens) | "
            f"{row[True][0]:.3f} ({row[True][1]} tokens) |"
        )
    worst_far = max(abs(b / a - 1) for a, b in far.values())
    spe_ratio = min(speed[(pe, b)] / speed[("ape", b)] for pe, _ in PES for b in (1, 8))
    slow_vs_bound = 1 / (speed[("ape", 1)] * bound)
    verdict = [
        (
            "step-by-step >= 10x faster than recomputation at 2048",
            recompute / step_2048 >= 10,
            f"{recompute / step_2048:.0f}x",
        ),
        (
            f"per-token time near {args.long} within 10 % of near 100",
            worst_far <= 0.10,
            f"worst {worst_far * 100:.0f} %",
        ),
        ("SPE >= 0.8x APE tokens/s", spe_ratio >= 0.8, f"lowest {spe_ratio:.2f}x"),
        (
            "batch 1 within 2x of the bandwidth bound",
            slow_vs_bound <= 2,
            f"{slow_vs_bound:.1f}x the bound's time",
        ),
    ]
    lines += ["", "Targets:", ""]
    lines += [f"- {what}: **{'met' if ok else 'not met'}** ({how})" for what, ok, how in verdict]
    body = "\n".join(lines) + "\n\n"
    print(body)
    if not args.no_doc:
        doc = Path(args.doc)
        write_section(doc, SECTION, body)
        print(f"wrote {doc}")


if __name__ == "__main__":
    main()
