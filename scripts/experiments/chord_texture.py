"""Does chord control keep the texture? Pieces from scratch with and without `--chords`, beside
real songs: notes per onset, notes per bar, the top voice's mean pitch, and how many bars agree
with the forced chord.

For each progression (and once free), `--num` pieces of `--bars` bars from one seed at the
model's own sampling defaults, the chord-tone bonus at `--tones` (default: the shipped
`ChordControl.option`). Agreement: chorder's recogniser (as in `chord_control.py`: PyPI `chorder`,
not a dependency) finds the forced chord's root over the bar (root), and its root and family
(family). Real: the first `--bars` bars (from the first note) of the first `--songs` POP909
validation songs of `prepare`'s split, the same texture measures.

Usage: OMP_NUM_THREADS=1 nice -n 19 .venv/bin/python scripts/experiments/chord_texture.py \
    [--model M] [--num 16] [--bars 16] [--seed 1] [--tones N] [--chorder /tmp/chords_pkgs] \
    [--progressions "C G Am F" "Am F C G" ...] [--songs 16] [--out runs/chord_texture.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "experiments"))

import chord_control as cc  # noqa: E402

import musicgen  # noqa: E402
from musicgen.generation.controls.chord_plan import load_progression  # noqa: E402
from musicgen.generation.rules import ChordControl  # noqa: E402
from musicgen.measures.form import top_voice  # noqa: E402
from musicgen.measures.metrics import (  # noqa: E402
    load_notes,
    note_density,
    notes_from_score,
    notes_per_onset,
    stacked_onset_rate,
)

PROGRESSIONS = ["C G Am F", "Am F C G", "Dm G C A7"]


def texture(notes) -> dict[str, float]:
    """The texture of one piece: notes per onset, notes per bar, stacked onsets, top voice."""
    pitch = top_voice(notes)[2]
    return {
        "notes_per_onset": notes_per_onset(notes),
        "notes_per_bar": note_density(notes),
        "stacked_onsets": stacked_onset_rate(notes),
        "top_voice_pitch": float(pitch.mean()) if len(pitch) else float("nan"),
    }


def mean(rows: list[dict]) -> dict[str, float]:
    """The mean of each measure over the pieces, and its spread across them (`_sd`)."""
    out = {}
    for k in rows[0]:
        values = np.array([r[k] for r in rows], np.float64)
        out[k], out[f"{k}_sd"] = float(np.nanmean(values)), float(np.nanstd(values))
    return out


def first_bar(prog) -> int:
    """The progression's bar a piece from scratch starts with (`chords.chord_plan`): a chord
    file's first bar with a chord, a progression given as text its first."""
    if prog.repeat:
        return 0
    return next(k for k, bar in enumerate(prog.bars) if any(s.chord for s in bar))


def run(model, chords: str | None, args) -> dict:
    """`--num` pieces with `chords` (None: free), their texture and chord agreement."""
    t0 = time.time()
    extra = {} if chords is None else {"chords": chords, "chord_tones": args.tones}
    pieces = model.generate_many(args.num, bars=args.bars, seed=args.seed, batch_size=args.num,
                                 **extra)  # fmt: skip
    rows = []
    for p in pieces:
        row = texture(notes_from_score(p.score).first_bars(args.bars))
        if chords is not None:
            prog = load_progression(chords, model.tokenizer)
            given = cc.given_chords(model.tokenizer, prog, first_bar(prog), args.bars)
            spans = [g[2] if g else 1.0 for g in given]
            found = cc.recognised(p.score, args.bars, 0, spans)
            agree = cc.agreement(given, found)
            tones = cc.chord_tone_share(p.score, given, 0)
            row.update(root=agree["root"], family=agree["family"], chord_tones=tones)
        rows.append(row)
    out = mean(rows)
    out["seconds"] = time.time() - t0
    return out


def real(args) -> dict:
    """The texture of the real songs' first `--bars` bars, as long as the generated pieces."""
    manifest = Path(args.data) / "manifest.jsonl"
    rows = [json.loads(line) for line in manifest.open()]
    paths = [r["path"] for r in rows if r["split"] == "validation"][: args.songs]
    return mean([texture(load_notes(Path(args.pop909) / p).first_bars(args.bars)) for p in paths])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="checkpoints/pop909_piano_sine_spe_gated")
    ap.add_argument("--num", type=int, default=16)
    ap.add_argument("--bars", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tones", type=float, default=ChordControl.option.default)
    ap.add_argument("--progressions", nargs="*", default=PROGRESSIONS)
    ap.add_argument("--free", action="store_true", help="also the pieces without chords")
    ap.add_argument("--songs", type=int, default=0, help="real songs (0: none)")
    ap.add_argument("--data", default="data/prepared/pop909")
    ap.add_argument("--pop909", default="../shared/data/pop909")
    ap.add_argument("--chorder", default="/tmp/chords_pkgs")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    sys.path.insert(0, args.chorder)
    result: dict = {"args": vars(args)}
    if args.songs:
        result["real"] = real(args)
        print("real", json.dumps(result["real"]), flush=True)
    model = musicgen.load(args.model)
    for chords in ([None] if args.free else []) + list(args.progressions):
        result[chords or "free"] = run(model, chords, args)
        print(chords or "free", json.dumps(result[chords or "free"]), flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
