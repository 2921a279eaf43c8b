"""Chord control on real songs: do forced chords come back, and do they give form?

For POP909 validation songs (the `prepare` hash split) with their chord_midi.txt, the shipped
model writes (a) 16-bar pieces from scratch and (b) 12-bar continuations of the song's first 4
bars that hold music, each once freely and once forcing the song's own progression
(`musicgen.generation.controls.chord_plan`), same seed for both (paired). Measured:
- chord agreement: chorder's recogniser (PyPI `chorder`, rule-based, the 11 qualities of the
  tokenizer) over the span of each bar where the given chord sounds from its downbeat, against
  the given chord folded to the tokenizer's vocabulary; exact (root and quality), root and
  family (major / minor / diminished / suspended), root only. The real songs are scored the
  same way against their annotations: the recogniser's own ceiling.
- form (`musicgen.measures.form`) of the 16 bars (a) or the continued bars up to bar 16 (b: 12,
  or 11 when a pickup joins the prompt), forced minus free per song and sample, with bootstrap
  CIs; the real songs' same bars for reference.

Usage: OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python scripts/experiments/chord_control.py \
    [--songs 20] [--samples 2] [--chorder /tmp/chords_pkgs] [--out runs/chord_control.json] \
    [--model M] [--temperature T] [--top-p P] [--repeat R] [--tones N]
`--chorder`: a folder where `pip install --target DIR chorder` put it (it is no dependency).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import namedtuple
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from musicgen.data.prepare import hash_split  # noqa: E402
from musicgen.generation.api.prompt import encode_song, load_prompt  # noqa: E402
from musicgen.generation.controls.chord_plan import (  # noqa: E402
    Progression,
    chord_id,
    progression_from_chord_file,
)
from musicgen.measures import form as fm  # noqa: E402
from musicgen.measures.metrics import notes_from_score  # noqa: E402

CHORDER_QUALITY = {
    "M": "maj",
    "m": "min",
    "o": "dim",
    "+": "aug",
    "7": "7dom",
    "M7": "7maj",
    "m7": "7min",
    "o7": "7dim",
    "/o7": "7halfdim",
    "sus2": "sus2",
    "sus4": "sus4",
}
FAMILY = {
    "maj": "maj",
    "7dom": "maj",
    "7maj": "maj",
    "aug": "maj",
    "min": "min",
    "7min": "min",
    "dim": "dim",
    "7dim": "dim",
    "7halfdim": "dim",
    "sus2": "sus",
    "sus4": "sus",
}
Note = namedtuple("Note", "start end pitch")
BARS, PROMPT_BARS = 16, 4


def given_chords(tok, prog: Progression, first: int, n: int) -> list[tuple[int, str, float]]:
    """Per bar first..first+n-1: (root, quality, end of its span as a bar fraction) of the chord
    sounding on the downbeat, or None (N, or nothing fits)."""
    out = []
    for k in range(first, first + n):
        slot = prog.sounding(k)
        tid = chord_id(tok, slot, strict=False) if slot is not None else None
        later = [  # the next change in the bar (a repeated label is none)
            s.onset
            for s in (prog.bar(k) or ())
            if s.onset > 0 and chord_id(tok, s, strict=False) != tid
        ]
        end = min(later) if later else 1.0
        out.append(None if tid is None else (*tok.tables.chord[tid], end))
    return out


def recognised(score, bars: int, first_bar: int = 0, spans=None) -> list[tuple[int, str] | None]:
    """chorder's chord over each bar's span (first_bar.. of the score)."""
    from chorder import Dechorder

    tpq = score.ticks_per_quarter
    bar = 4 * tpq
    notes = [
        Note(n.time, n.time + n.duration, n.pitch)
        for t in score.tracks
        if not t.is_drum
        for n in t.notes
    ]
    out = []
    for k in range(bars):
        start = (first_bar + k) * bar
        end = start + int(bar * (spans[k] if spans else 1.0))
        inside = [n for n in notes if n.start < end and n.end > start]
        chord, _ = Dechorder.get_chord_quality(inside, start, end)
        ok = chord.is_complete() and chord.quality in CHORDER_QUALITY
        out.append((chord.root_pc, CHORDER_QUALITY[chord.quality]) if ok else None)
    return out


def chord_tone_share(score, given, first_bar: int = 0) -> float:
    """Share of the sounding note time, over the bars with a given chord and each bar's span of
    it, spent on the chord's pitch classes (no recogniser: what the notes themselves say)."""
    from miditok.constants import CHORD_MAPS

    tpq = score.ticks_per_quarter
    notes = [n for t in score.tracks if not t.is_drum for n in t.notes]
    inside = total = 0.0
    for k, g in enumerate(given):
        if g is None:
            continue
        start = (first_bar + k) * 4 * tpq
        end = start + int(4 * tpq * g[2])
        pcs = {(g[0] + i) % 12 for i in CHORD_MAPS[g[1]]}
        for n in notes:
            overlap = min(end, n.time + n.duration) - max(start, n.time)
            if overlap > 0:
                total += overlap
                inside += overlap * (n.pitch % 12 in pcs)
    return inside / total if total else float("nan")


def agreement(given, found) -> dict[str, float]:
    pairs = [(g, f) for g, f in zip(given, found, strict=True) if g is not None]
    if not pairs:
        return {"exact": float("nan"), "family": float("nan"), "root": float("nan"), "bars": 0}
    exact = np.mean([f is not None and (g[0], g[1]) == f for g, f in pairs])
    family = np.mean(
        [f is not None and g[0] == f[0] and FAMILY[g[1]] == FAMILY[f[1]] for g, f in pairs]
    )
    root = np.mean([f is not None and g[0] == f[0] for g, f in pairs])
    return {"exact": float(exact), "family": float(family), "root": float(root), "bars": len(pairs)}


def form(score, first_bar: int, bars: int) -> dict[str, float]:
    """Form measures of bars first_bar..first_bar+bars-1 of a score (shifted to bar 0)."""
    notes = notes_from_score(score)
    keep = (notes.onset >= first_bar * 4 - 1e-9) & (notes.onset < (first_bar + bars) * 4 - 0.125)
    notes = type(notes)(
        notes.onset[keep] - first_bar * 4,
        notes.duration[keep],
        notes.pitch[keep],
        notes.track[keep],
        notes.track_keys,
        notes.is_drum,
    )
    out = {
        "rhythm_repeat": fm.rhythm_repeat_rate(notes),
        "repeated_bars": fm.repeated_bar_rate(notes),
        "near_repeats": fm.near_repeat_rate(notes, bars),
        "self_similarity": fm.bar_self_similarity(notes),
    }
    for lag in fm.LAGS:
        out[f"similarity_lag{lag}"] = fm.lag_similarity(notes, lag, bars)
    out["in_scale"] = fm.in_scale_rate(notes, fm.scale_root(notes))
    return out


SAMPLING: dict = {}  # what the result file records: the options used and the tone bonus
GIVEN: dict = {}  # --temperature / --top-p / --repeat (None: the model's defaults)
TONES: list = [0.0]  # --tones: the chord-tone bonus of the forced runs (`chord_tones`)


def sample(model, prompt, n, bars, seed, chords: dict):
    """`n` pieces through the API (`Model.pieces`), each scored as the ids the model wrote;
    `chords`: the request's `chords` and `chord_tones` ({} for free runs)."""
    pieces = list(
        model.pieces(n, prompt=prompt, bars=bars, seed=seed, batch_size=n, **chords, **GIVEN)
    )
    return [model.tokenizer.decode(p.ids) for p in pieces], pieces


def validation_songs(pop909: Path, count: int) -> list[Path]:
    songs = [
        p / f"{p.name}.mid"
        for p in sorted(pop909.iterdir())
        if p.is_dir() and hash_split(f"{p.name}/{p.name}.mid") == "validation"
    ]
    return [s for s in songs if (s.parent / "chord_midi.txt").is_file()][:count]


def run_song(model, song: Path, samples: int, seed: int) -> dict | None:
    tok = model.tokenizer
    ids = encode_song(tok, song)
    prompt = load_prompt(tok, song, PROMPT_BARS, None, None)  # the first 4 bars with music
    first = prompt.first_bar
    if len(tok.bar_starts(np.asarray(ids))) < first + BARS + 1:
        return None
    prog = progression_from_chord_file(song.parent / "chord_midi.txt", song)
    real = tok.decode(ids)
    given = given_chords(tok, prog, first, BARS)
    spans = [g[2] if g else 1.0 for g in given]
    row = {"song": song.parent.name, "first_bar": first, "prompt_bars": prompt.bars}
    row["real"] = {
        "agreement": agreement(given, recognised(real, BARS, first, spans)),
        "chord_tones": chord_tone_share(real, given, first),
        "form16": form(real, first, BARS),
        "form12": form(real, first + prompt.bars, BARS - prompt.bars),
    }
    for kind in ("generate", "continue"):
        if kind == "generate":
            given_prompt, bars, skip = None, BARS, 0
        else:
            given_prompt, bars, skip = prompt, BARS - prompt.bars, prompt.bars  # 5 with a pickup
        # the song's chords from its first bar with music (continuing: after the prompt)
        forced = {"chords": prog if given_prompt else prog.from_bar(first)}
        forced["chord_tones"] = TONES[0]
        for mode, chords in (("free", {}), ("forced", forced)):
            scores, res = sample(model, given_prompt, samples, bars, seed, chords)
            row[f"{kind}_{mode}"] = [
                {
                    "agreement": agreement(given[skip:], recognised(sc, bars, skip, spans[skip:])),
                    "chord_tones": chord_tone_share(sc, given[skip:], skip),
                    "form": form(sc, skip, bars),
                    "stop": r.stop,
                    "errors": r.errors,
                    "ids": [int(t) for t in r.ids],
                }
                for sc, r in zip(scores, res, strict=True)
            ]
    return row


def rescore(tok, rows: list[dict], pop909: Path) -> None:
    """Agreement and chord tones again from the saved ids (a changed recogniser or span rule)."""
    for row in rows:
        song = pop909 / row["song"] / f"{row['song']}.mid"
        prog = progression_from_chord_file(song.parent / "chord_midi.txt", song)
        first, n_prompt = row["first_bar"], row["prompt_bars"]
        given = given_chords(tok, prog, first, BARS)
        spans = [g[2] if g else 1.0 for g in given]
        real = tok.decode(encode_song(tok, song))
        row["real"]["agreement"] = agreement(given, recognised(real, BARS, first, spans))
        row["real"]["chord_tones"] = chord_tone_share(real, given, first)
        for kind, skip in (("generate", 0), ("continue", n_prompt)):
            for mode in ("free", "forced"):
                for s in row[f"{kind}_{mode}"]:
                    sc = tok.decode(s["ids"])
                    found = recognised(sc, BARS - skip, skip, spans[skip:])
                    s["agreement"] = agreement(given[skip:], found)
                    s["chord_tones"] = chord_tone_share(sc, given[skip:], skip)


def summarise(rows: list[dict]) -> dict:
    out = {}
    keys = ("exact", "family", "root")
    for k in keys:
        out[f"real_agreement_{k}"] = fm.spread([r["real"]["agreement"][k] for r in rows])
    out["real_chord_tones"] = fm.spread([r["real"]["chord_tones"] for r in rows])
    for kind, real_form in (("generate", "form16"), ("continue", "form12")):
        for mode in ("free", "forced"):
            for k in keys:
                vals = [np.mean([s["agreement"][k] for s in r[f"{kind}_{mode}"]]) for r in rows]
                out[f"{kind}_{mode}_agreement_{k}"] = fm.spread(vals)
            vals = [np.nanmean([s["chord_tones"] for s in r[f"{kind}_{mode}"]]) for r in rows]
            out[f"{kind}_{mode}_chord_tones"] = fm.spread(vals)
        for m in rows[0]["real"][real_form]:
            free = [np.nanmean([s["form"][m] for s in r[f"{kind}_free"]]) for r in rows]
            forced = [np.nanmean([s["form"][m] for s in r[f"{kind}_forced"]]) for r in rows]
            real = [r["real"][real_form][m] for r in rows]
            out[f"{kind}_{m}"] = {
                "real": fm.spread(real)["mean"],
                "free": fm.spread(free)["mean"],
                "forced": fm.spread(forced)["mean"],
                "forced_minus_free": fm.paired_difference(forced, free),
            }
    return out


def save(out: str, rows: list[dict]) -> dict:
    """The result so far, written atomically (a temporary file moved over the old one)."""
    result = {"sampling": SAMPLING, "rows": rows, "summary": summarise(rows)}
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(path)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="pop909_piano_sine_spe_gated")
    ap.add_argument("--pop909", default=str(ROOT.parent / "shared" / "data" / "pop909"))
    ap.add_argument("--songs", type=int, default=20)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chorder", default="/tmp/chords_pkgs")
    ap.add_argument("--temperature", type=float, default=None, help="default: the model's")
    ap.add_argument("--top-p", type=float, default=None, help="default: the model's")
    ap.add_argument("--repeat", type=float, default=None, help="default: the model's")
    ap.add_argument("--tones", type=float, default=0.0, help="chord-tone bonus, nats (forced)")
    ap.add_argument("--rescore", default=None, help="a result file: recompute its agreement")
    ap.add_argument("--out", default=str(ROOT / "runs" / "chord_control.json"))
    a = ap.parse_args()
    sys.path.append(a.chorder)  # after the venv: its numpy wins
    import musicgen

    GIVEN.update({"temperature": a.temperature, "top_p": a.top_p, "repeat": a.repeat})
    TONES[0] = a.tones
    torch.set_num_threads(1)
    m = musicgen.load(a.model)
    used = m.options(**GIVEN)
    SAMPLING.update(temperature=used.temperature, top_p=used.top_p, tones=a.tones)
    SAMPLING.update(repeat=used.repeat)
    rows, t0 = [], time.time()
    if a.rescore:
        rows = json.loads(Path(a.rescore).read_text())["rows"]
        rescore(m.tokenizer, rows, Path(a.pop909))
    for i, song in enumerate([] if a.rescore else validation_songs(Path(a.pop909), a.songs)):
        row = run_song(m, song, a.samples, a.seed + i)
        if row is not None:
            rows.append(row)
            save(a.out, rows)  # after every song: a stopped run keeps the songs it finished
            print(f"{song.parent.name}: {time.time() - t0:.0f} s", flush=True)
    result = save(a.out, rows)
    for k, v in result["summary"].items():
        print(k, json.dumps(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
