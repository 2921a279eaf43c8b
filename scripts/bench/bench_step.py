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

from benchlib import code_trees, describe, interleaved, machine, median, run_worker, write_section

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## decoding step"
SHIPPED = ROOT / "checkpoints" / "pop909_sine_spe_gated"


def _model(name: str):
    """The shipped checkpoint, or the 24-layer default config ("default:<pe>") at random weights."""
    import torch

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
    """Median ms of `steps` batch-1 steps (after 20 warm-up steps), and for a checkpoint the hash
    of 2 x 300 ids sampled from seed 7 through `generate` (equal across trees = same music)."""
    import torch

    torch.set_num_threads(threads)
    model, tokenizer = _model(name)
    times = []
    with torch.inference_mode():
        state, ids = model.init_state(1, "cpu", seed=1), torch.tensor([5])
        for i in range(steps + 20):
            t0 = time.perf_counter()
            model.step(ids, state)
            if i >= 20:
                times.append(time.perf_counter() - t0)
    out = {"ms": 1000 * median(times)}
    if tokenizer is not None:
        out["ids"] = _sample_hash(model, tokenizer)
    return out


def _sample_hash(model, tokenizer) -> str:
    """Hash of 2 x 300 ids sampled by `generate` from seed 7 with the tokenizer's defaults."""
    import torch

    from musicgen.generation.sample import default_options, generate

    gen = torch.Generator().manual_seed(7)
    prompts = [[tokenizer.bos_id]] * 2
    res = generate(model, tokenizer, prompts, default_options(tokenizer.name), 300, generator=gen)
    return hashlib.sha1(repr([list(r.ids) for r in res]).encode()).hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=f"{SHIPPED},default:ape,default:sine_spe")
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
                cmd = [sys.executable, __file__, "--worker", name, threads, str(args.steps)]
                res = interleaved(
                    trees,
                    args.repeats,
                    lambda label, tree, cmd=cmd, w=f"{name} {threads}": run_worker(
                        cmd, f"{w} {label}", tree
                    ),
                )
                new = median([r["ms"] for r in res["new"]])
                row = f"| {Path(name).name} | {threads} | {new:.2f} |"
                if res.get("base"):
                    base = median([r["ms"] for r in res["base"]])
                    same = {r.get("ids") for r in res["new"] + res["base"]}
                    ids = "n/a" if same == {None} else ("equal" if len(same) == 1 else "DIFFER")
                    row += f" {base:.2f} | x{base / new:.2f} | {ids} |"
                lines.append(row)
                print(row, flush=True)
    base = f" side by side with `{describe(args.baseline)}` (base)" if args.baseline else ""
    head = "| model | threads | ms/step |" + (
        " base ms/step | speed-up | sampled ids (seed 7) |" if args.baseline else ""
    )
    rule = "|---|---:|---:|" + ("---:|---:|---|" if args.baseline else "")
    body = "\n".join(
        [
            SECTION,
            "",
            f"`scripts/bench/bench_step.py --threads {args.threads} --repeats {args.repeats}"
            + (f" --baseline {args.baseline}`" if args.baseline else "`")
            + f"{base} on {machine()}; {(time.time() - start) / 60:.1f} min, load average "
            f"{load:.1f} at the start. Batch-1 `model.step` (no sampling), median of "
            f"{args.steps} steps after 20 warm-up steps, then the median over the repeats (fresh "
            "processes, trees alternating). `default:*` = the 24-layer default config, random "
            "weights. Sampled ids: a hash of 2 x 300 ids drawn by `generate` from seed 7 in every "
            "worker of both trees (equal = the same music).",
            "",
            head,
            rule,
            *lines,
        ]
    )
    write_section(Path(args.doc), SECTION, body + "\n")
    print(f"wrote the decoding step section of {args.doc}")


if __name__ == "__main__":
    main()
