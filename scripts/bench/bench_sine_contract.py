"""Forward + backward of sineSPE's per-layer contraction alone (batch 1, default width: H 8, D 64,
2K 10, R 64), the current `sine_ops.SineContract` beside the code it replaced (blocks sliced, or
split, under activation checkpointing), stepped in turn in one process so machine load hits all
alike.

    python scripts/bench/bench_sine_contract.py --lengths 1024,2048,4096,8192 --threads 1

Prints the best of `--repeats` timed runs (after one warm-up) in ms per length and variant.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from musicgen.model import sine_ops  # noqa: E402

BLOCK = 512


def _direct(x, omega, lz):
    return torch.einsum("bnhdj,hdjr->bnhr", x.unsqueeze(-1) * omega, lz)


def sliced(x, omega, lz):
    """The contraction before this change (2b79612): slices under checkpointing."""
    n = x.shape[1]
    outs = [
        checkpoint(_direct, x[:, s : s + BLOCK], omega[s : s + BLOCK], lz, use_reentrant=False)
        for s in range(0, n, BLOCK)
    ]
    return torch.cat(outs, 1)


def split(x, omega, lz):
    """The same with `split` blocks (one concatenation of the gradients in backward)."""
    blocks = zip(x.split(BLOCK, 1), omega.split(BLOCK, -4), strict=True)
    return torch.cat([checkpoint(_direct, xb, ob, lz, use_reentrant=False) for xb, ob in blocks], 1)


VARIANTS = {"sliced + checkpoint (2b79612)": sliced, "split + checkpoint": split}
VARIANTS["sine_ops.SineContract"] = lambda x, omega, lz: sine_ops.SineContract.apply(
    x, None, omega, lz
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="1024,2048,4096,8192")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for n in (int(v) for v in args.lengths.split(",")):
        x = torch.randn(1, n, 8, 64, requires_grad=True)
        omega = torch.randn(n, 8, 64, 10, requires_grad=True)
        lz = torch.randn(8, 64, 10, 64, requires_grad=True)
        times: dict[str, list[float]] = {k: [] for k in VARIANTS}
        for _ in range(args.repeats + 1):
            for name, fn in VARIANTS.items():
                t0 = time.perf_counter()
                fn(x, omega, lz).sum().backward()
                times[name].append(time.perf_counter() - t0)
        cells = ", ".join(f"{k}: {min(v[1:]) * 1e3:.1f} ms" for k, v in times.items())
        print(f"{n}: {cells}", flush=True)


if __name__ == "__main__":
    main()
