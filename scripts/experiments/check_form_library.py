"""Do our measures of form agree with the maintained libraries on real songs?

    .venv/bin/pip install smg-metrics==5.4.3          # pulls muspy, music21, scipy, mir_eval
    python scripts/check_form_library.py [POP909_DIR | SONG.mid ...]

A POP909 folder (NNN/NNN.mid) gives its validation songs; default ../shared/data/pop909.

For each song, written in 4/4 at one tempo (POP909's files carry meaningless 1/4 and 2/4 time
signatures and tempo changes, which the libraries read as bar lengths and seconds; we count bars
of 4 beats): pitch-class entropy and scale consistency (ours: `musicgen.measures.metrics`; theirs:
MusPy), and the groove and chroma similarity of the song's bars 8-15 to its bars 0-7 (ours:
`musicgen.measures.form.bar_similarity`; theirs: smg-metrics' MuseMorphose simGrv / simChr).
Prints one line per song and the largest difference per measure; docs/evaluation.md records it.
tests/test_form.py runs `compare_song` on a bundled song where the libraries are installed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import symusic

ROOT = Path(__file__).resolve().parents[2]
PAIRS = (("pce", "muspy_pce"), ("sc", "muspy_sc"), ("sim_grv", "smg_sim_grv"))
PAIRS += (("sim_chr", "smg_sim_chr"),)


def _in_four_four(score: symusic.Score, start_bar: int, bars: int, path: Path) -> Path:
    """Bars start_bar .. start_bar + bars - 1 (4 beats each) of `score` as a 4/4 file at 120 qpm,
    shifted to time 0, notes only."""
    score = score.copy()
    tpq = score.ticks_per_quarter
    lo, hi = start_bar * 4 * tpq, (start_bar + bars) * 4 * tpq
    for track in score.tracks:
        kept = [n for n in track.notes if lo <= n.time < hi]
        track.notes.clear()
        for n in kept:
            track.notes.append(symusic.Note(n.time - lo, n.duration, n.pitch, n.velocity))
        track.controls.clear()  # a pedal or control event past the notes lengthens the file
        track.pedals.clear()
        track.pitch_bends.clear()
    score.time_signatures.clear()
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    score.tempos.clear()
    score.tempos.append(symusic.Tempo(0, 120.0))
    score.key_signatures.clear()
    score.markers.clear()
    score.dump_midi(str(path))
    return path


def _library_bars(notes) -> int:
    """The bars smg-metrics counts in a file: pretty_midi's beats run to the last note's end."""
    return int(np.ceil(notes.end())) // 4


def compare_song(song: Path, tmp: Path) -> dict[str, float]:
    """Ours and the libraries' values of each measure on one song (module docstring)."""
    import muspy
    from smg_metrics.similarity import compute_all

    from musicgen.measures import form as fm
    from musicgen.measures.metrics import load_notes, pitch_class_entropy, scale_consistency

    score = symusic.Score(str(song))
    head = _in_four_four(score, 0, 8, tmp / f"{song.stem}_a.mid")
    tail = _in_four_four(score, 8, 8, tmp / f"{song.stem}_b.mid")
    whole = tmp / f"{song.stem}_whole.mid"
    _in_four_four(score, 0, 10**6, whole)
    a, b, notes = load_notes(tail), load_notes(head), load_notes(whole)
    music = muspy.read_midi(str(whole))
    lib = compute_all(tail, head)
    return {
        "pce": pitch_class_entropy(notes),
        "muspy_pce": float(muspy.pitch_class_entropy(music)),
        "sc": scale_consistency(notes),
        "muspy_sc": float(muspy.scale_consistency(music)),
        "sim_grv": fm.bar_similarity(a, b, _library_bars(a), _library_bars(b)),
        "smg_sim_grv": float(lib.sim_grv),
        "sim_chr": fm.bar_similarity(a, b, _library_bars(a), _library_bars(b), groove=False),
        "smg_sim_chr": float(lib.sim_chr),
    }


def validation_songs(root: Path) -> list[Path]:
    """The POP909 songs `prepare --dataset pop909` puts in the validation split."""
    from musicgen.data.prepare import assign_split

    songs = sorted(root.glob("*/*.mid"))
    return [
        p
        for p in songs
        if assign_split(p.relative_to(root).as_posix(), "pop909", {}) == "validation"
    ]


def main(argv: list[str]) -> int:
    given = [Path(a) for a in argv] or [ROOT.parent / "shared" / "data" / "pop909"]
    songs = [p for s in given for p in ([s] if s.is_file() else validation_songs(s))]
    if not songs:
        print(f"no songs in {' '.join(map(str, given))}")
        return 1
    worst = dict.fromkeys((p[0] for p in PAIRS), 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        for song in songs:
            row = compare_song(song, Path(tmp))
            print(song.stem, "  ".join(f"{k} {row[k]:.6f}/{row[v]:.6f}" for k, v in PAIRS))
            for k, v in PAIRS:
                worst[k] = max(worst[k], abs(row[k] - row[v]))
    print(
        f"{len(songs)} songs; largest |ours - library|:",
        ", ".join(f"{k} {d:.2e}" for k, d in worst.items()),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
