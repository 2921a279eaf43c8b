"""The acceptance tables on a POP909 card (the model against the targets, its twin and the
model it replaced) and on the MAESTRO card. The replaced
model is measured in the same runs where evaluate_shipped.sh had a copy of it (`PREVIOUS`: NLL,
the form benchmark; texture with PREVIOUS_FULL=1), else quoted from the documents
(`CardText.previous_documented`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from musicgen.cards.render import CardText


def _entry(nll: dict, name: str, shipped: bool | None = None) -> dict:
    """The nll.json entry of the checkpoint folder called `name`; with `shipped`, only the one
    in checkpoints/ (True) or only a copy elsewhere (False, the model it replaced)."""
    for r in nll["models"].values():
        path = Path(r["checkpoint"])
        if path.name == name and shipped in (None, path.parent.name == "checkpoints"):
            return r
    raise KeyError(f"{name} is not in the nll.json of {nll['data']}")


def _form_run(form: dict, name: str, shipped: bool) -> dict | None:
    """The per-measure spread of `name`'s run at its defaults in a form.json (the shipped folder,
    or with shipped=False the copy of the model it replaced), None when it was not run."""
    for label, run in form["runs"].items():
        model, _, setting = label.partition(" ")
        here = model == name or model == f"checkpoints/{name}"
        there = model.endswith(f"/{name}") and not model.startswith("checkpoints/")
        if setting == "default" and (here if shipped else there):
            return run["spread"]
    return None


def _quarters(style: dict) -> tuple[int, list[dict], list[dict]]:
    """Quarters where the continuations' time-pitch similarity reaches the other-song baseline."""
    tp, base = style["summary"]["time_pitch"], style["baseline_summary"]["time_pitch"]
    return sum(a["mean"] >= b["mean"] for a, b in zip(tp, base, strict=True)), tp, base


def _means(segments: list[dict]) -> str:
    return " / ".join(f"{seg['mean']:.2f}" for seg in segments)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _forbidden(fm: dict) -> str:
    """'5.4 % (Pitch 5.2 %, Position 0.2 %)': Position = a position behind the current one (the
    model has lost its place in the bar), Pitch = one already played at this position (forbidden
    since merge_duplicates)."""
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


def _nll_rows(
    nll: dict, me: dict, twin: dict, prev: dict | None, crop: int, side: dict | None
) -> list[tuple]:
    """The rows of per-position NLL: forbidden mass, NLL per note, NLL beyond the crop. `side`:
    the nll.json that scored this model beside the model it replaced (same songs, same length),
    where evaluate_shipped.sh had a copy of it; the forbidden mass and NLL per note are then
    read there for both."""
    mine = _entry(side, Path(me["checkpoint"]).name, shipped=True) if side else me
    per_note = f"{mine['nll_per_note']:.2f}"
    if prev:
        per_note += f" ({100 * (1 - mine['nll_per_note'] / prev['nll_per_note']):.1f} % below)"
    measured = "same songs and tokens" if side else "its own, detected chords"
    forbidden = (
        "probability on forbidden tokens after a note (today's grammar; by kind of token)",
        "≤ 5 %",
        _forbidden(mine["forbidden_mass"]),
        _forbidden(prev["forbidden_mass"]) if prev else "n/a",
    )
    songs = (side or nll)["songs"]
    note = (
        f"NLL per note, {songs} held-out songs, first {mine['max_len']} tokens",
        "≥ 10 % below the previous model",
        per_note,
        f"{prev['nll_per_note']:.2f} ({measured})" if prev else "n/a",
    )
    beyond = (
        f"NLL beyond the training length ({crop}-{me['max_len']}), this model vs its twin",
        "SPE below APE",
        f"{me['mean_beyond']:.3f} vs {twin['mean_beyond']:.3f}{_paired_note(nll, me, twin)}",
        f"{prev['mean_beyond']:.3f} (beyond its {prev['crop_len']})" if prev else "n/a",
    )
    return [forbidden, note, beyond]


def _paired_note(nll: dict, me: dict, twin: dict) -> str:
    """'; per song -0.001 [-0.002, +0.000] (within noise)': this model minus its twin beyond the
    crop, paired by song with its 95 % CI, where nll.json kept per-song values (`evaluate nll`
    with batch size 1)."""
    label = {id(r): k for k, r in nll["models"].items()}
    mine, theirs = label[id(me)], label[id(twin)]
    for pair, ranges in nll.get("paired", {}).items():
        sign = {f"{mine} - {theirs}": 1, f"{theirs} - {mine}": -1}.get(pair)
        if sign:
            d = ranges["beyond"]
            lo, hi = sorted((sign * d["low"], sign * d["high"]))
            noise = " (within noise)" if lo <= 0 <= hi else ""
            return (
                f"; per song {sign * d['mean']:+.4f} [{lo:+.4f}, {hi:+.4f}], {d['n']} songs{noise}"
            )
    return ""


def _met(ok: bool) -> str:
    return " (met)" if ok else " (not met)"


def _form_rows(form: dict, name: str) -> list[tuple]:
    """The form rows: form measures of the benchmark's continuations at the model's defaults
    against the songs' real continuations (mean over songs)."""
    me, prev = _form_run(form, name, True), _form_run(form, name, False)
    if me is None:
        return []
    real = {m: v["mean"] for m, v in form["real"]["spread"].items()}

    def row(measure: str, label: str, target: str, ok) -> tuple:
        value = f"{me[measure]['mean']:.3f}" + ("" if ok is None else _met(ok(me[measure]["mean"])))
        return (label, target, value, f"{prev[measure]['mean']:.3f}" if prev else "n/a")

    def within(m: str):
        return lambda x: abs(x - real[m]) <= 0.25 * real[m]

    rr, bs, rb = real["rhythm_repeat_rate"], real["bar_self_similarity"], real["repeated_bar_rate"]
    return [
        row(
            "rhythm_repeat_rate",
            "continued bars that bring back an earlier bar's rhythm",
            f"within 25 % of the real {rr:.3f}",
            within("rhythm_repeat_rate"),
        ),
        row(
            "bar_self_similarity",
            "bar self-similarity (all pairs of bars)",
            f"within 25 % of the real {bs:.3f}",
            within("bar_self_similarity"),
        ),
        row(
            "repeated_bar_rate",
            "continued bars that exactly repeat an earlier bar",
            f"> 0 and ≤ 2 x the real {rb:.3f}",
            lambda x: 0 < x <= 2 * rb,
        ),
        row("scale_consistency", "scale consistency", "≥ 0.98", lambda x: x >= 0.98),
        row(
            "self_similarity_lag8",
            "similarity to the bar 8 bars back",
            f"the real {real['self_similarity_lag8']:.3f}",
            None,
        ),
        row(
            "top_voice_line",
            "beats on an unbroken top-voice run of a bar or more",
            f"the real {real['top_voice_line']:.3f}",
            None,
        ),
    ]


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


def _table(rows: list[tuple]) -> list[str]:
    """Markdown lines of an acceptance table: (measure, target, this model, replaced) rows."""
    out = ["| measure | target | this model | the model it replaced |", "|---|---|---|---|"]
    return out + [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows] + [""]


def acceptance(name: str, ev: Path, crop: int, text: CardText) -> list[str]:
    """The acceptance table: this model against the targets and the model it replaced."""
    nll = json.loads((ev / "pop909_nll" / "nll.json").read_text())
    me, twin = _entry(nll, name), _entry(nll, text.twin[name])
    side_path = ev / "pop909_nll_previous" / "nll.json"
    side = json.loads(side_path.read_text()) if side_path.exists() else None
    prev = _entry(side, name, shipped=False) if side else None
    music = json.loads((ev / f"music_{name}" / "music.json").read_text())
    style = json.loads((ev / f"style_{name}" / "style.json").read_text())
    forbidden, note, beyond = _nll_rows(nll, me, twin, prev, crop, side)
    stacked, duplicates, kept, quarters = _sample_rows(
        music, style, _previous(ev, name, text.previous_documented)
    )
    rows = [forbidden, stacked, duplicates, note, kept, quarters, beyond]
    form_path = ev / "pop909_form" / "form.json"
    form = json.loads(form_path.read_text()) if form_path.exists() else None
    if form:
        rows += _form_rows(form, name)
    out = [
        "## Acceptance, measured on the held-out songs",
        "",
    ]
    if form:
        out += [
            f"Form rows: `musicgen evaluate form` on the {len(form['songs'])} validation songs "
            f"(their first {form['prompt_bars']} bars that hold music as the prompt, "
            f"{form['new_bars']} bars continued at the model's default sampling, seed "
            f"{form['seed']}), mean over songs; `form.json` has the spread and the paired "
            "confidence intervals.",
            "",
        ]
    return out + _table(rows)


def maestro_acceptance(name: str, ev: Path, text: CardText) -> list[str]:
    """The MAESTRO table: forbidden mass after a note (maestro_nll, beside the replaced
    model when evaluate_shipped.sh had a copy of it), stacked onsets, notes per onset and scale
    consistency of the generated pieces against the real performances (music_<name>); the
    replaced model's texture is quoted (`CardText.previous_documented`)."""
    nll = json.loads((ev / "maestro_nll" / "nll.json").read_text())
    me = _entry(nll, name, shipped=True)
    old = text.previous_documented.get(name, {})
    try:
        prev = _entry(nll, old["name"], shipped=False) if "name" in old else None
    except KeyError:  # the replaced model was not scored beside it
        prev = None
    music = json.loads((ev / f"music_{name}" / "music.json").read_text())
    g = {k: v["mean"] for k, v in music["generated"].items()}
    real = {k: v["mean"] for k, v in music["reference"].items()}
    npo, scale, stacked = g["notes_per_onset"], g["scale_consistency"], g["stacked_onset_rate"]
    rows = [
        (
            "probability on forbidden tokens after a note (by kind of token)",
            "≤ 5 %",
            _forbidden(me["forbidden_mass"]) + _met(me["forbidden_mass"]["after_note"] <= 0.05),
            _forbidden(prev["forbidden_mass"]) if prev else "n/a",
        ),
        (
            "generated onsets with ≥ 8 notes",
            "≤ 1 %",
            _pct(stacked) + _met(stacked <= 0.01),
            old.get("stacked", "n/a"),
        ),
        (
            "notes per onset",
            f"within 20 % of the real {real['notes_per_onset']:.2f}",
            f"{npo:.2f}"
            + _met(abs(npo - real["notes_per_onset"]) <= 0.2 * real["notes_per_onset"]),
            old.get("notes_per_onset", "n/a"),
        ),
        (
            "scale consistency",
            f"within 0.05 of the real {real['scale_consistency']:.3f}",
            f"{scale:.3f}" + _met(abs(scale - real["scale_consistency"]) <= 0.05),
            old.get("scale_consistency", "n/a"),
        ),
        (
            f"NLL per note, {nll['songs']} held-out performances, first {me['max_len']} tokens",
            "",
            f"{me['nll_per_note']:.2f}",
            f"{prev['nll_per_note']:.2f} (same performances and tokens)" if prev else "n/a",
        ),
    ]
    out = ["## Acceptance, measured on the held-out performances", ""]
    return out + _table(rows)
