"""Does a model copy? Its NLL on bars that exactly repeat an earlier bar of the same window, against
the bars that do not (docs/evaluation.md, "Repetition").

    python scripts/experiments/repeat_nll.py CHECKPOINT [CHECKPOINT ...] \
        [--data data/prepared/pop909]

A bar's content is its `Position` and `Pitch` ids from one `Bar` to the next (what
`metrics.repeated_bar_rate` compares: onsets and pitches, not velocities or durations), and only
those ids are scored. A model that has learned to copy predicts a repeated bar far better than a
new one (an ideal copier pays only for the ids that reveal the repeat); one that does not copies
at best its statistics. Scored on the first --max-len ids of --songs validation songs, one
forward each.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.nn.functional as F

from musicgen.checkpoint import load_checkpoint
from musicgen.data.dataset import load_songs
from musicgen.tokenizers.remi_grammar import RemiTables


def repeat_mask(ids: np.ndarray, bar_starts: np.ndarray, scored: np.ndarray) -> np.ndarray:
    """Per id: 1 for a scored id in a bar whose scored ids exactly repeat an earlier bar's, 0 for
    one in a bar that does not, -1 for ids not scored (and the window's cut last bar)."""
    out = np.full(len(ids), -1)
    edges = list(bar_starts) + [len(ids)]
    seen: set[tuple[int, ...]] = set()
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b == len(ids) and a != edges[0]:
            break  # the window's last bar is cut: not comparable
        keep = np.flatnonzero(scored[a:b]) + a
        content = tuple(ids[keep].tolist())
        out[keep] = int(content in seen and len(content) > 0)
        seen.add(content)
    return out


def score(model, tokenizer, songs: list[np.ndarray]) -> dict[str, float]:
    """Mean NLL and probability of the true id, on repeated-bar ids and on the others."""
    tables = tokenizer.tables
    nll: dict[bool, list[float]] = {True: [], False: []}
    prob: dict[bool, list[float]] = {True: [], False: []}
    for ids in songs:
        fam = tables.family[ids]
        scored = (fam == RemiTables.POSITION) | (fam == RemiTables.PITCH)
        mask = repeat_mask(ids, tokenizer.bar_starts(ids), scored)[1:]  # targets 1..N-1
        with torch.no_grad():
            logits = model(torch.from_numpy(ids[:-1].astype(np.int64))[None])[0].float()
        tgt = torch.from_numpy(ids[1:].astype(np.int64))
        per = F.cross_entropy(logits, tgt, reduction="none").numpy()
        for flag in (True, False):
            nll[flag].extend(per[mask == int(flag)])
            prob[flag].extend(np.exp(-per[mask == int(flag)]))
    return {
        "repeated_ids": len(nll[True]),
        "other_ids": len(nll[False]),
        "nll_repeated": float(np.mean(nll[True])),
        "nll_other": float(np.mean(nll[False])),
        "p_true_repeated": float(np.mean(prob[True])),
        "p_true_other": float(np.mean(prob[False])),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--data", default="data/prepared/pop909")
    ap.add_argument("--songs", type=int, default=39)
    ap.add_argument("--max-len", type=int, default=2048)
    args = ap.parse_args()
    songs = [s[: args.max_len + 1] for s in load_songs(args.data, "validation", args.songs)]
    print(
        "| model | scored ids in repeated bars | NLL repeated | NLL other | p(true) repeated "
        "| p(true) other |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for ckpt in args.checkpoints:
        loaded = load_checkpoint(ckpt)
        torch.manual_seed(0)  # the SPE noise of `forward`: the same draw for every model
        loaded.model.eval()
        r = score(loaded.model, loaded.tokenizer, songs)
        print(
            f"| {ckpt} | {r['repeated_ids']} of {r['repeated_ids'] + r['other_ids']} | "
            f"{r['nll_repeated']:.3f} | {r['nll_other']:.3f} | {r['p_true_repeated']:.3f} | "
            f"{r['p_true_other']:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
