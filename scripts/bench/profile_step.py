"""Where the time of one training step goes: torch.profiler over forward + backward + Adam of a
preset, operators grouped into matmuls / elementwise / reductions / dropout / copies / optimizer,
the rest of the wall time (Python, autograd and dispatch) as overhead, and the forward split by
model part (feature maps, SPE tables and contractions, chunked attention, projections, FFN).
Writes one section per (preset, encoding) of docs/profile.md.

    python scripts/bench/profile_step.py --sizes small default --pes ape sine_spe+gate --threads 2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections import defaultdict
from pathlib import Path

import torch
import torch.nn.functional as F
from benchlib import forward_flops, machine, matmul_peak_gflops, write_section
from torch.profiler import ProfilerActivity, profile, record_function

from musicgen.config import ModelConfig, load_config
from musicgen.model import attention, build_model, features, positional
from musicgen.tokenizers import build_tokenizer

ROOT = Path(__file__).resolve().parents[2]
CATEGORIES = [  # (category, substrings of aten op names), first match wins
    ("matmul", ("mm", "matmul", "linear", "einsum", "baddbmm", "addmm")),
    ("optimizer", ("_foreach", "adam")),
    ("dropout", ("bernoulli", "dropout", "rand")),
    ("norm / softmax / GELU", ("layer_norm", "gelu", "softmax", "log_softmax", "nll")),
    ("reductions / scans", ("sum", "amax", "max", "cummax", "cumsum", "norm", "mean")),
    (
        "copies / layout",
        (
            "copy",
            "cat",
            "stack",
            "index",
            "clone",
            "contiguous",
            "pad",
            "fill",
            "zero",
            "empty",
            "embedding",
            "to",
            "where",
            "tril",
            "masked",
        ),
    ),
    (
        "elementwise",
        (
            "mul",
            "add",
            "sub",
            "div",
            "exp",
            "sqrt",
            "sigmoid",
            "softplus",
            "cos",
            "sin",
            "floor",
            "neg",
            "pow",
            "rsqrt",
            "fmod",
        ),
    ),
]
PARTS = {  # forward parts, timed by record_function around these callables
    "feature maps": [
        (features.FavorFeatures, "query"),
        (features.FavorFeatures, "key_causal"),
        (features.ReluFeatures, "query"),
        (features.ReluFeatures, "key_causal"),
    ],
    "SPE tables + contractions": [(positional.SPECodes, "project")],
    "SPE codes (Omega, noise, conv filters)": [
        (positional.SineSPE, "codes"),
        (positional.ConvSPE, "codes"),
    ],
}
TOP_OPS = 12  # aten operators listed by self time


def category(name: str) -> str:
    n = name.lower().removeprefix("aten::")
    for cat, keys in CATEGORIES:
        if any(k in n for k in keys):
            return cat
    return "other ops"


@contextlib.contextmanager
def labelled_parts():
    """Wrap the PARTS callables (and causal_linear_attention) in record_function scopes."""
    saved = []

    def wrap(owner, name, label):
        fn = getattr(owner, name)
        saved.append((owner, name, fn))

        def inner(*a, **k):
            with record_function(f"part::{label}"):
                return fn(*a, **k)

        setattr(owner, name, inner)

    for label, targets in PARTS.items():
        for owner, name in targets:
            wrap(owner, name, label)
    wrap(attention, "causal_linear_attention", "chunked attention")
    try:
        yield
    finally:
        for owner, name, fn in reversed(saved):
            setattr(owner, name, fn)


def build(size: str, pe: str) -> tuple[torch.nn.Module, ModelConfig, int, int]:
    kind, gated = pe.split("+")[0], pe.endswith("+gate")
    if size == "small":
        cfg = load_config(
            ROOT / "configs/pop909/small.yaml",
            [f"model.pe={kind}", f"model.gated={str(gated).lower()}", "model.vocab_size=345"],
        ).model
        batch, n = 4, 512
    else:  # the default width and length, 4 of its 24 layers (each layer costs the same)
        cfg = ModelConfig(vocab_size=345, n_layers=4, pe=kind, gated=gated)
        batch, n = 1, 2048
    torch.manual_seed(0)
    tokenizer = build_tokenizer(ROOT / "configs/tokenizer/remi.yaml")  # musical-position tables
    return build_model(cfg, tokenizer).train(), cfg, batch, n


def measure(size: str, pe: str, precision: str = "fp32") -> dict:
    model, cfg, batch, n = build(size, pe)
    amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    x = torch.randint(3, 345, (batch, n + 1))

    def step():
        with record_function("phase::forward"), amp:
            loss = F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        with record_function("phase::backward"):
            loss.backward()
        with record_function("phase::optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    step()  # warm-up
    with labelled_parts():
        step()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            step()
            wall = time.perf_counter() - t0
    events = prof.key_averages()
    cats: dict[str, float] = defaultdict(float)
    top: dict[str, float] = {}
    parts: dict[str, float] = {}
    for ev in events:
        if ev.key.startswith(("part::", "phase::")):
            parts[ev.key] = ev.cpu_time_total / 1e6
        elif ev.key.startswith("aten::"):
            cats[category(ev.key)] += ev.self_cpu_time_total / 1e6
            top[ev.key] = ev.self_cpu_time_total / 1e6
    ops = sum(cats.values())
    cats["overhead (Python, autograd, dispatch)"] = max(wall - ops, 0.0)
    flops = forward_flops(cfg, batch, n)
    return {
        "wall": wall,
        "cats": dict(cats),
        "top": sorted(top.items(), key=lambda kv: -kv[1])[:TOP_OPS],
        "parts": parts,
        "flops": flops,
        "peak": matmul_peak_gflops(dtype=precision),
        "batch": batch,
        "n": n,
        "cfg": cfg,
        "precision": precision,
    }


def section(size: str, pe: str, r: dict, threads: int) -> str:
    cfg, wall = r["cfg"], r["wall"]
    fl = r["flops"]
    lines = [
        f"## {size} {pe}",
        "",
        f"{cfg.n_layers} layers x d_model {cfg.d_model}, batch {r['batch']} x {r['n']} "
        f"tokens, {threads} threads, {r['precision']}; one step {wall:.2f} s under the "
        f"profiler. Model FLOPs per step (3 x forward): dense {3 * fl['dense'] / 1e9:.1f} G, "
        f"attention "
        f"{3 * fl['attn'] / 1e9:.1f} G, SPE {3 * fl['spe'] / 1e9:.1f} G; matmul peak "
        f"{r['peak']:.0f} GFLOP/s -> MFU {3 * sum(fl.values()) / wall / r['peak'] / 1e9:.0%}.",
        "",
        "| operators (whole step) | s | share |",
        "|---|---:|---:|",
    ]
    for cat, t in sorted(r["cats"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {cat} | {t:.3f} | {t / wall:.0%} |")
    lines += ["", "| top operators (self time) | s | share |", "|---|---:|---:|"]
    lines += [f"| `{op}` | {t:.3f} | {t / wall:.0%} |" for op, t in r["top"]]
    fwd = r["parts"].get("phase::forward", float("nan"))
    lines += ["", "| phase / forward part | s | share of step |", "|---|---:|---:|"]
    for key, t in sorted(r["parts"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {key.split('::')[1]} | {t:.3f} | {t / wall:.0%} |")
    rest = fwd - sum(t for k, t in r["parts"].items() if k.startswith("part::"))
    lines.append(
        f"| forward, everything else (projections, FFN, norms, head) | {rest:.3f} | "
        f"{rest / wall:.0%} |"
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["small", "default"])
    ap.add_argument("--pes", nargs="+", default=["ape", "sine_spe+gate", "conv_spe+gate"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--write", default=str(ROOT / "docs" / "profile.md"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]
    for size in args.sizes:
        for pe in args.pes:
            r = measure(size, pe, args.precision)
            text = section(size, pe, r, args.threads)
            write_section(args.write, f"## {size} {pe}", text)
            print(text, flush=True)
    shared = load > 1.5 * args.threads  # more runnable jobs than this run's threads
    intro = (
        "# Profile of one training step\n\nWritten by `scripts/bench/profile_step.py "
        f"--sizes {' '.join(args.sizes)} --pes {' '.join(args.pes)} --threads "
        f"{args.threads} --precision {args.precision}` on {machine()}; load average "
        f"{load:.1f} when it started ("
        + (
            "the machine was shared, so the seconds are inflated; the shares are what to read). "
            if shared
            else "otherwise idle). "
        )
        + "Operator times are the profiler's self CPU time per aten op (on the calling "
        "thread, so intra-op threads are not double counted); overhead = wall time minus "
        "all operator time. The forward parts are record_function scopes; backward time "
        "is not split by part (autograd runs it outside them).\n"
    )
    write_section(args.write, "## about", "## about\n\n" + intro.split("\n\n", 1)[1])


if __name__ == "__main__":
    main()
