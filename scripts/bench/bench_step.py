"""Batch-1 decoding: ms per `model.step` of a shipped checkpoint and of the default model (random
weights), per thread count, optionally side by side with a baseline commit; plus a check that the
trees sample the same ids for one seed. Writes the "decoding step" section of docs/benchmarks.md.

Every (model, threads) runs in fresh processes, new and base alternating `--repeats` times:

    python scripts/bench/bench_step.py --baseline bccc6b9 --threads 1,2 --repeats 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from benchlib import (
    bandwidth_gbs,
    code_trees,
    describe,
    interleaved,
    machine,
    median,
    run_worker,
    weight_bytes_per_token,
    write_section,
)

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## decoding step"
SHIPPED = [
    ROOT / "checkpoints" / name
    for name in ("pop909_piano_sine_spe_gated", "pop909_ape", "maestro_sine_spe_gated",
                 "groove_sine_spe_gated")
]  # fmt: skip
MODELS = [
    *map(str, SHIPPED),
    *(f"{p}+int8" for p in SHIPPED),
    *(f"default:{pe}{q}" for pe in ("ape", "sine_spe") for q in ("", "+int8")),
]
STEADY = 600  # a checkpoint's step is timed from this position on (a 16-bar piece's length)
GEN_PIECES = 2  # pieces of 16 bars per end-to-end measurement


def _model(name: str):
    """The shipped checkpoint, or the 24-layer default config ("default:<pe>") at random weights;
    a "+int8" suffix: with weight-only int8 steps (`use_int8`, a tree that has it)."""
    import torch

    if name.endswith("+int8"):
        model, tokenizer = _model(name.removesuffix("+int8"))
        model.use_int8()
        return model, tokenizer

    if name.startswith("default:"):
        from musicgen.config import ModelConfig
        from musicgen.model import build_model

        pe = name.split(":", 1)[1]
        torch.manual_seed(0)
        cfg = ModelConfig(vocab_size=345, pe=pe, gated=pe != "ape", dropout=0.0)
        return build_model(cfg).eval(), None
    from musicgen.checkpoint import load_checkpoint

    loaded = load_checkpoint(name, torch.device("cpu"))
    return loaded.model, loaded.tokenizer


def worker(name: str, threads: int, steps: int) -> dict:
    """Median ms of `steps` batch-1 steps (after 20 warm-up steps; a checkpoint's from position
    STEADY on, where a 16-bar piece is), and for a checkpoint the API's end-to-end rate
    (`GEN_PIECES` pieces of 16 bars from scratch, the model's sampling defaults: every cost of
    a piece but loading) with a hash of the ids it sampled (equal across trees = same music)."""
    import torch

    torch.set_num_threads(threads)
    model, tokenizer = _model(name)
    skip = 20 if tokenizer is None else STEADY
    times = []
    with torch.inference_mode():
        state, ids = model.init_state(1, "cpu", seed=1), torch.tensor([5])
        for i in range(steps + skip):
            t0 = time.perf_counter()
            model.step(ids, state)
            if i >= skip:
                times.append(time.perf_counter() - t0)
    out = {"ms": 1000 * median(times)}
    if tokenizer is None:  # the bandwidth bound of the float weights, measured here
        bound = weight_bytes_per_token(model, model.d_model) / (bandwidth_gbs() * 1e9)
        out["of_bound"] = 1000 * bound / out["ms"]
    else:
        out.update(_pieces(name))
    return out


def _pieces(name: str) -> dict:
    """Tokens/s of `Model.generate(16)` over GEN_PIECES seeds, and the hash of their ids."""
    from musicgen.generation.api import load

    int8 = {"int8": True} if name.endswith("+int8") else {}  # a base tree's load has no int8
    m = load(name.removesuffix("+int8"), **int8)
    m.generate(1, seed=99)  # warm-up
    sampled, ids, t0 = 0, [], time.perf_counter()
    for seed in range(GEN_PIECES):
        piece = m.generate(16, seed=seed)
        sampled += piece.sampled
        ids.append(list(piece.ids))
    took = time.perf_counter() - t0
    digest = hashlib.sha1(repr(ids).encode()).hexdigest()[:12]
    return {"tok_s": sampled / took, "tokens": sampled, "ids": digest}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--baseline", help="git revision to run side by side with this tree")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--doc", default=str(ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        name, threads, steps = args.worker
        print(json.dumps(worker(name, int(threads), int(steps))))
        return
    sys.path.insert(0, str(ROOT))
    start, load = time.time(), os.getloadavg()[0]
    lines = []
    with code_trees(args.baseline) as trees:
        for name in args.models.split(","):
            for threads in args.threads.split(","):
                res = interleaved(
                    trees,
                    args.repeats,
                    lambda label, tree, w=name, t=threads: run_worker(
                        _worker_cmd(w if label == "new" else _base_name(w), t, args.steps),
                        f"{w} {t} {label}",
                        tree,
                    ),
                )
                lines.append(_row(Path(name).name, threads, res))
                print(lines[-1], flush=True)
    minutes = (time.time() - start) / 60
    write_section(Path(args.doc), SECTION, _section(args, minutes, load, lines))
    print(f"wrote the decoding step section of {args.doc}")


def _base_name(name: str) -> str:
    """What the base tree runs beside `name`: an int8 row beside the base's float model (the
    speed it replaces; the base may have no int8 form)."""
    return name.removesuffix("+int8")


def _worker_cmd(name: str, threads: str, steps: int) -> list[str]:
    return [sys.executable, __file__, "--worker", name, threads, str(steps)]


def _row(name: str, threads: str, res: dict) -> str:
    """One table row: ms/step and tokens/s of this tree, and of the base with the ratios."""

    def fig(runs: list[dict], key: str, fmt: str) -> tuple[str, float | None]:
        vals = [r[key] for r in runs if key in r]
        return (format(median(vals), fmt), median(vals)) if vals else ("n/a", None)

    ms, ms_v = fig(res["new"], "ms", ".2f")
    tok, tok_v = fig(res["new"], "tok_s", ".0f")
    bound, _ = fig(res["new"], "of_bound", ".2f")
    row = f"| {name} | {threads} | {ms} | {tok} | {bound} |"
    if res.get("base"):
        bms, bms_v = fig(res["base"], "ms", ".2f")
        btok, btok_v = fig(res["base"], "tok_s", ".0f")
        up = f"x{bms_v / ms_v:.2f}" if ms_v and bms_v else "n/a"
        tup = f"x{tok_v / btok_v:.2f}" if tok_v and btok_v else "n/a"
        same = {r.get("ids") for r in res["new"] + res["base"]}
        ids = (
            "n/a"
            if same == {None} or name.endswith("+int8")
            else ("equal" if len(same) == 1 else "differ")
        )
        row += f" {bms} | {btok} | {up} | {tup} | {ids} |"
    return row


def _section(args, minutes: float, load: float, lines: list[str]) -> str:
    base = f" side by side with `{describe(args.baseline)}` (base)" if args.baseline else ""
    head = "| model | threads | ms/step | tokens/s, 16 bars | of the bound |" + (
        " base ms/step | base tokens/s | step speed-up | tokens/s ratio | sampled ids |"
        if args.baseline
        else ""
    )
    rule = "|---|---:|---:|---:|---:|" + ("---:|---:|---:|---:|---|" if args.baseline else "")
    return "\n".join(
        [
            SECTION,
            "",
            f"`scripts/bench/bench_step.py --threads {args.threads} --repeats {args.repeats}"
            + (f" --baseline {args.baseline}`" if args.baseline else "`")
            + f"{base} on {machine()}; {minutes:.1f} min, load average {load:.1f} at the "
            f"start. ms/step: batch-1 `model.step` (no sampling), median of {args.steps} steps "
            f"from position {STEADY} on for a checkpoint (where a 16-bar piece is; 20 for the "
            "`default:*` models, the 24-layer default config at random weights, whose state has "
            "a fixed size), then the median over the repeats (fresh processes, trees "
            f"alternating). tokens/s: `musicgen.generate`'s path end to end (`Model.generate(16)`"
            f", {GEN_PIECES} pieces from scratch, seeds 0-{GEN_PIECES - 1}, batch 1, the model's "
            "sampling defaults: grammar masks, nucleus sampling, the bar-copy rule, after a "
            "warm-up piece). Sampled ids: a hash of those pieces' ids in every worker of both "
            "trees (equal = the same music). Of the bound: for the `default:*` models, the time "
            "of reading every float weight once at the copy bandwidth measured in the same "
            "worker (`benchlib.bandwidth_gbs`) over the measured step (1 = at the bound; an "
            "int8 row reads a quarter of those bytes, so it can pass 1). `+int8`: weight-only "
            "int8 steps (`use_int8`; the windowed layers' keys and values in bf16), beside the "
            "base tree's float model (the speed it replaces; the base may have no int8 form), "
            "so their sampled ids are not compared.",
            "",
            head,
            rule,
            *lines,
        ]
    )


if __name__ == "__main__":
    main()
