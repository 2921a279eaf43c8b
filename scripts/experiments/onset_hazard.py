"""Does a REMI model know when a chord is full? After the k-th note of one onset, the probability
it gives to yet another Pitch, against how often real songs go on (docs/model.md).

    python scripts/experiments/onset_hazard.py CHECKPOINT [CHECKPOINT ...] \
        [--data data/prepared/pop909]

Reads the first --max-len ids of --songs validation songs; prints one row per k (notes read at the
current position, 1..7+) with the count, the real rate and each model's mean probability.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from musicgen.checkpoint import load_checkpoint
from musicgen.data.dataset import load_songs
from musicgen.tokenizers.remi_grammar import RemiTables

MAX_K = 7


def hazard(model, tables: RemiTables, songs: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Per k: (after-note positions, real continuations with a Pitch, model Pitch probability)."""
    pitch = torch.from_numpy(tables.family == RemiTables.PITCH)
    n, real, prob = np.zeros(MAX_K + 1), np.zeros(MAX_K + 1), np.zeros(MAX_K + 1)
    for ids in songs:
        with torch.no_grad():
            logits = model(torch.from_numpy(ids[:-1].astype(np.int64))[None])[0]
        p_pitch = torch.softmax(logits.float(), -1)[:, pitch].sum(-1).numpy()  # (N - 1,)
        k = 0
        for i in range(len(ids) - 1):
            fam = tables.family[ids[i]]
            k = 0 if fam in (RemiTables.BAR, RemiTables.POSITION) else k + (fam == RemiTables.PITCH)
            if fam == RemiTables.DURATION:  # a note is complete: another Pitch, or move on
                j = min(k, MAX_K)
                n[j] += 1
                real[j] += tables.family[ids[i + 1]] == RemiTables.PITCH
                prob[j] += p_pitch[i]
    return n, real, prob


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--data", default="data/prepared/pop909")
    ap.add_argument("--songs", type=int, default=12)
    ap.add_argument("--max-len", type=int, default=1024)
    args = ap.parse_args()
    torch.set_num_threads(1)
    songs = [s[: args.max_len] for s in load_songs(args.data, "validation", args.songs)]
    rows = {}
    for ckpt in args.checkpoints:
        loaded = load_checkpoint(ckpt)
        torch.manual_seed(0)  # the SPE noise of `forward`: the same draw for every run
        rows[ckpt] = hazard(loaded.model, loaded.tokenizer.tables, songs)
    n, real, _ = next(iter(rows.values()))
    print("| k | after-note positions | real | " + " | ".join(args.checkpoints) + " |")
    print("|---:|---:|---:|" + "---:|" * len(rows))
    for k in range(1, MAX_K + 1):
        cells = [f"{r[2][k] / max(r[0][k], 1):.3f}" for r in rows.values()]
        label = f"{k}+" if k == MAX_K else str(k)
        rate = real[k] / max(n[k], 1)
        print(f"| {label} | {int(n[k])} | {rate:.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
