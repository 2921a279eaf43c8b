"""Markdown tables from a `musicgen evaluate form` result (docs/evaluation.md is written from them).

    python scripts/reproduce/form_table.py out/form_baseline/form.json          # model - real
    python scripts/reproduce/form_table.py out/form_baseline/form.json --pairs  # run - run
    python scripts/reproduce/form_table.py out/form_sweep/form.json --sweep     # a row per run

`--sweep` ranks the runs by their mean |model - real| in units of the real songs' sd over the
form measures (`FORM`), beside the texture measures (`TEXTURE`), which must not get worse.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FORM = (
    "rhythm_repeat_rate",
    "near_repeat_rate",
    "self_similarity_lag1",
    "self_similarity_lag4",
    "self_similarity_lag8",
    "bar_self_similarity",
    "top_voice_line",
    "top_voice_interval",
    "top_voice_run",
    "scale_consistency",
    "prompt_key_rate",
    "groove_similarity",
    "pitch_class_entropy",
)
TEXTURE = ("notes_per_onset", "stacked_onset_rate", "duplicate_note_rate", "notes_per_bar")


def _f(x, digits: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def spread_table(res: dict) -> str:
    runs = list(res["runs"])
    head = "| measure | real: mean (sd) [q25, q75] | " + " | ".join(
        f"{r}: mean (sd) | {r} - real [95 % CI]" for r in runs
    )
    lines = [head + " |", "|---" * (2 + 2 * len(runs)) + "|"]
    for m in res["measures"]:
        s = res["real"]["spread"][m]
        row = f"| {m} | {_f(s['mean'])} ({_f(s['sd'])}) [{_f(s['q25'])}, {_f(s['q75'])}]"
        for r in runs:
            g, d = res["runs"][r]["spread"][m], res["runs"][r]["minus_real"][m]
            mark = " *" if d["differs"] else ""
            row += f" | {_f(g['mean'])} ({_f(g['sd'])}) | {_f(d['mean'])} "
            row += f"[{_f(d['low'])}, {_f(d['high'])}]{mark}"
        lines.append(row + " |")
    return "\n".join(lines)


def pairs_table(res: dict) -> str:
    pairs = list(res["pairs"])
    lines = ["| measure | " + " | ".join(f"{p} [95 % CI]" for p in pairs) + " |"]
    lines.append("|---" * (1 + len(pairs)) + "|")
    for m in res["measures"]:
        cells = []
        for p in pairs:
            d = res["pairs"][p][m]
            mark = " *" if d["differs"] else ""
            cells.append(f"{_f(d['mean'])} [{_f(d['low'])}, {_f(d['high'])}]{mark}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def distance(res: dict, run: str) -> float:
    """Mean |model - real| over `FORM`, each in units of the real continuations' sd."""
    total = 0.0
    for m in FORM:
        sd = res["real"]["spread"][m]["sd"]
        total += abs(res["runs"][run]["minus_real"][m]["mean"]) / sd
    return total / len(FORM)


def sweep_table(res: dict) -> str:
    cols = ("rhythm_repeat_rate", "repeated_bar_rate", "near_repeat_rate", "bar_self_similarity")
    cols += ("self_similarity_lag4", "self_similarity_lag8", "top_voice_line", "top_voice_interval")
    cols += ("scale_consistency", "pitch_class_entropy") + TEXTURE[:2]
    lines = ["| run | form distance (sd) | " + " | ".join(cols) + " |"]
    lines.append("|---" * (2 + len(cols)) + "|")
    real = " | ".join(_f(res["real"]["spread"][c]["mean"]) for c in cols)
    lines.append(f"| real continuations | 0 | {real} |")
    for run in sorted(res["runs"], key=lambda r: distance(res, r)):
        cells = []
        for c in cols:
            d = res["runs"][run]["minus_real"][c]
            mark = "" if d["differs"] else " ="  # "=": the CI of model - real holds 0
            cells.append(f"{_f(res['runs'][run]['spread'][c]['mean'])}{mark}")
        lines.append(f"| {run} | {_f(distance(res, run), 2)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    res = json.loads(Path(argv[0]).read_text())
    if "--pairs" in argv:
        print(pairs_table(res))
    elif "--sweep" in argv:
        print(sweep_table(res))
    else:
        print(spread_table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
