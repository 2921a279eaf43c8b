"""Can the architecture copy at all? Train small models on POP909 crops that repeat themselves
(a 128-token crop, then the same 128 ids again) and compare their NLL on the repeat with their
NLL on the first pass (docs/evaluation.md, "Does a model copy?").

Arms (4 layers x 128, 4 heads, the same seed and batches): FAVOR+ with 64 and 256 random
features and APE (the linear attention of the shipped models); FAVOR+ with 64 features and gated
sineSPE (a relative kernel could learn the fixed 128-token lag); exact causal softmax with APE
(the reference: every block windowed softmax with a window as long as the sequence); and the
hybrid of `model.local_layers`, blocks 1 and 3 windowed softmax over 160 positions (more than the
128-token lag) and the others FAVOR+ with 64 features, with APE (`local`) or gated sineSPE
(`local_spe`), both with rotary positions inside the windowed blocks (`model.local_rope`), and
gated sineSPE without them (`local_spe_norope`). An architecture that copies drives the
repeat's NLL towards 0 once it has seen a few of its ids.

    python scripts/experiments/copy_probe.py [--data data/prepared/pop909] [--steps 600]
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from musicgen.config import ModelConfig
from musicgen.data.dataset import CropDataset, PreparedSplit
from musicgen.model import build_model

HALF = 128
LOCAL = {"softmax": [0, 1, 2, 3], "local": [1, 3], "local_spe": [1, 3], "local_spe_norope": [1, 3]}


def doubled(ds: CropDataset, indices) -> torch.Tensor:
    """(B, 2 * HALF) ids: each crop followed by itself."""
    crops = torch.stack([ds[int(i)]["input"][:HALF] for i in indices])  # (B, HALF)
    return torch.cat([crops, crops], dim=1)


def arm(name: str, train: CropDataset, val: torch.Tensor, steps: int, vocab: int) -> dict:
    torch.manual_seed(0)
    n_features = 256 if name == "favor256" else 64
    cfg = ModelConfig(
        vocab_size=vocab, n_layers=4, d_model=128, n_heads=4, d_ff=512, dropout=0.0,
        n_features=n_features, pe="sine_spe" if "spe" in name else "ape",
        gated="spe" in name, num_realizations=32, redraw="never", max_len=2 * HALF,
        local_layers=LOCAL.get(name, []), local_window=2 * HALF if name == "softmax" else 160,
        local_rope=not name.endswith("norope"),
    )  # fmt: skip
    model = build_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        x = doubled(train, range(step * 8, step * 8 + 8))  # (8, 256)
        loss = F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        nll = F.cross_entropy(model(val[:, :-1]).transpose(1, 2), val[:, 1:], reduction="none")
    first, repeat = nll[:, : HALF - 1], nll[:, HALF + 4 :]  # the repeat after its first 4 ids
    return {"arm": name, "nll_first": float(first.mean()), "nll_repeat": float(repeat.mean())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/prepared/pop909")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument(
        "--arms",
        nargs="+",
        default=[
            "favor64",
            "favor256",
            "sine_spe",
            "softmax",
            "local",
            "local_spe",
            "local_spe_norope",
        ],  # fmt: skip
    )
    args = ap.parse_args()
    split = PreparedSplit(args.data, "train")
    train = CropDataset(split, HALF, transpose=(-6, 6), seed=0, num_samples=args.steps * 8)
    val_ds = CropDataset(PreparedSplit(args.data, "validation"), HALF, seed=1, num_samples=32)
    val = doubled(val_ds, range(32))
    for name in args.arms:
        print(json.dumps(arm(name, train, val, args.steps, split.tokenizer.vocab_size)), flush=True)


if __name__ == "__main__":
    main()
