"""The table of `evaluate form --whole-song` (song.md), from its results (song.json)."""

from __future__ import annotations

import numpy as np


def _fmt(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.3f}"


def markdown_table(results: dict) -> str:
    """Per measure: the real songs' mean, then per run its mean and, in brackets, its mean
    difference from the real songs with the 95 % CI."""
    runs = list(results["runs"])
    n = len(results["songs"])
    head = f"| measure ({n} songs) | real | " + " | ".join(runs) + " |"
    lines = [head, "|" + "---|" * (len(runs) + 2)]
    for m in results["measures"]:
        cells = [_fmt(results["real"]["spread"][m]["mean"])]
        for label in runs:
            d = results["runs"][label]["minus_real"][m]
            mean = results["runs"][label]["spread"][m]["mean"]
            cells.append(
                f"{_fmt(mean)} ({_fmt(d['mean'])} [{_fmt(d['low'])}, {_fmt(d['high'])}])"
                if d["n"]
                else _fmt(mean)
            )
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
