"""Issue #12's acceptance table on a POP909 card: the model against the targets, its twin and the
model it replaced (measured again by evaluate_shipped.sh with PREVIOUS_FULL=1, else quoted from
the documents, `CardText.previous_documented`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from musicgen.cards.render import CardText


def _entry(nll: dict, name: str) -> dict:
    """The nll.json entry of the checkpoint folder called `name`."""
    return next(r for r in nll["models"].values() if Path(r["checkpoint"]).name == name)


def _quarters(style: dict) -> tuple[int, list[dict], list[dict]]:
    """Quarters where the continuations' time-pitch similarity reaches the other-song baseline."""
    tp, base = style["summary"]["time_pitch"], style["baseline_summary"]["time_pitch"]
    return sum(a["mean"] >= b["mean"] for a, b in zip(tp, base, strict=True)), tp, base


def _means(segments: list[dict]) -> str:
    return " / ".join(f"{seg['mean']:.2f}" for seg in segments)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _forbidden(fm: dict) -> str:
    """'5.4 % (Pitch 5.2 %, Position 0.2 %)': Position = a position behind the current one (what
    issue #12 measured), Pitch = one already played at this position (forbidden since
    merge_duplicates)."""
    kinds = sorted(fm.get("after_note_by_kind", {}).items(), key=lambda kv: -kv[1])
    parts = ", ".join(f"{k} {100 * v:.2f} %" for k, v in kinds if v >= 5e-5)
    return _pct(fm["after_note"]) + (f" ({parts})" if parts else "")


def _previous(ev: Path, name: str, documented: dict[str, dict]) -> dict:
    """The replaced model's texture and continuation numbers, measured by the same commands
    (with today's prompt builder) when evaluate_shipped.sh ran them (PREVIOUS_FULL=1), else as
    `documented`."""
    out = dict(documented.get(name, {}))
    music = ev / f"music_previous_{name}" / "music.json"
    if music.exists():
        g = json.loads(music.read_text())["generated"]
        out["stacked"] = _pct(g["stacked_onset_rate"]["mean"])
        out["duplicates"] = _pct(g["duplicate_note_rate"]["mean"])
    style = ev / f"style_previous_{name}" / "style.json"
    if style.exists():
        d = json.loads(style.read_text())
        k = d["prompts_kept"]
        out["kept"] = f"{k['written']}/{k['samples']} / {k['decoded']}/{k['samples']}"
        q, tp, base = _quarters(d)
        out["quarters"] = f"{q} of 4 ({_means(tp)} vs {_means(base)})"
    return out


def _nll_rows(nll: dict, me: dict, twin: dict, prev: dict | None, crop: int) -> list[tuple]:
    """The rows of per-position NLL: forbidden mass, NLL per note, NLL beyond the crop."""
    per_note = f"{me['nll_per_note']:.2f}"
    if prev:
        per_note += f" ({100 * (1 - me['nll_per_note'] / prev['nll_per_note']):.1f} % below)"
    forbidden = (
        "probability on forbidden tokens after a note (today's grammar; by kind of token)",
        "≤ 5 %",
        _forbidden(me["forbidden_mass"]),
        _forbidden(prev["forbidden_mass"]) if prev else "n/a",
    )
    note = (
        f"NLL per note, {nll['songs']} held-out songs, first {me['max_len']} tokens",
        "≥ 10 % below the previous model",
        per_note,
        f"{prev['nll_per_note']:.2f} (its own, detected chords)" if prev else "n/a",
    )
    beyond = (
        f"NLL beyond the training length ({crop}-{me['max_len']}), this model vs its twin",
        "SPE below APE",
        f"{me['mean_beyond']:.3f} vs {twin['mean_beyond']:.3f}",
        f"{prev['mean_beyond']:.3f} (beyond its {prev['crop_len']})" if prev else "n/a",
    )
    return [forbidden, note, beyond]


def _sample_rows(music: dict, style: dict, old: dict) -> list[tuple]:
    """The rows of generated pieces and continuations: stacked onsets, duplicates, kept prompts,
    quarters at the baseline."""
    g, kept = music["generated"], style["prompts_kept"]
    quarters, tp, base = _quarters(style)
    return [
        (
            "generated onsets with ≥ 8 notes",
            "≤ 1 %",
            _pct(g["stacked_onset_rate"]["mean"]),
            old.get("stacked", "n/a"),
        ),
        (
            "duplicate (onset, pitch) notes",
            "≤ 5 %",
            _pct(g["duplicate_note_rate"]["mean"]),
            old.get("duplicates", "n/a"),
        ),
        (
            "2-bar prompts kept note for note (written files / model's own ids)",
            "100 %",
            f"{kept['written']}/{kept['samples']} / {kept['decoded']}/{kept['samples']}",
            old.get("kept", "n/a"),
        ),
        (
            "quarters where continuation time-pitch ≥ other-song baseline",
            "4 of 4",
            f"{quarters} of 4 ({_means(tp)} vs {_means(base)})",
            old.get("quarters", "n/a"),
        ),
    ]


def acceptance(name: str, ev: Path, crop: int, text: CardText) -> list[str]:
    """Issue #12's acceptance table: this model against the target and the model it replaced."""
    nll = json.loads((ev / "pop909_nll" / "nll.json").read_text())
    me, twin = _entry(nll, name), _entry(nll, text.twin[name])
    prev_path = ev / "pop909_nll_previous" / "nll.json"
    prev = _entry(json.loads(prev_path.read_text()), name) if prev_path.exists() else None
    music = json.loads((ev / f"music_{name}" / "music.json").read_text())
    style = json.loads((ev / f"style_{name}" / "style.json").read_text())
    forbidden, note, beyond = _nll_rows(nll, me, twin, prev, crop)
    stacked, duplicates, kept, quarters = _sample_rows(
        music, style, _previous(ev, name, text.previous_documented)
    )
    rows = [forbidden, stacked, duplicates, note, kept, quarters, beyond]
    out = [
        "## Acceptance (issue #12), measured on the held-out songs",
        "",
        "| measure | target | this model | the model it replaced |",
        "|---|---|---|---|",
    ]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return out + [""]
