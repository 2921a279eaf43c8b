"""A synthetic bass / drums / piano trio dataset, made the way Groove2Groove was: chord charts
played in fixed styles.

POP909 chord charts are played by styles (a looped Groove MIDI drum groove, a bass pattern, an
accompaniment pattern and a tempo), each style for whole songs of 16-48 bars. Styles are split
80/10/10, drum grooves by their Groove MIDI style label, so no test style occurs in training (the
test set measures style transfer, not recall). All notes lie on the 12-ticks-per-beat grid, so the
Groove tokenizer round-trips the files exactly; the output is byte-for-byte deterministic for a
seed (data/trio/README.md).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import symusic
from tqdm import tqdm

from musicgen.data.trio_patterns import (
    BAR,
    BEAT,
    Chord,
    make_accomp_pattern,
    make_bass_pattern,
    parse_chord,
    render_accomp,
    render_bass,
)
from musicgen.errors import MusicgenError
from musicgen.io import atomic_write_bytes, atomic_write_text
from musicgen.tokenizers.groove import resolve_overlaps

SPLITS = ("train", "validation", "test")
LOOP_BARS = 2
TD11_TO_GM = {22: 42, 26: 46, 58: 43}  # Roland TD-11 extra notes -> General MIDI drums
META_FIELDS = (
    "song",
    "split",
    "pop909_id",
    "start_bar",
    "bars",
    "tempo",
    "drum_file",
    "drum_style",
    "bass_pattern",
    "accomp_pattern",
)


@dataclass
class DrumGroove:
    file: str  # relative to the Groove MIDI folder
    style: str
    bpm: int


def beat_chart(song_dir: Path) -> tuple[list[Chord | None], int, np.ndarray] | None:
    """Chords per beat (None = no chord) from the first usable downbeat, the number of whole bars
    available, and the beat annotation's rows (time s, beat, downbeat) from there; None when the
    annotations are missing or unreadable."""
    try:
        beats = np.loadtxt(song_dir / "beat_midi.txt", ndmin=2)
        rows = [ln.split("\t") for ln in (song_dir / "chord_midi.txt").read_text().splitlines()]
    except (OSError, ValueError):
        return None
    rows = [r for r in rows if len(r) == 3]
    if len(beats) < 4 or beats.shape[1] < 3 or not rows:
        return None
    starts = np.array([float(r[0]) for r in rows])
    chords = [parse_chord(r[2].strip()) for r in rows]
    first = next((starts[i] for i, c in enumerate(chords) if c is not None), None)
    if first is None:
        return None
    down = np.flatnonzero((beats[:, 2] == 1) & (beats[:, 0] >= first - 0.05))
    if len(down) == 0:
        return None
    b0 = int(down[0])
    idx = np.searchsorted(starts, beats[b0:, 0] + 0.05, side="right") - 1
    per_beat = [chords[i] if i >= 0 else None for i in idx.tolist()]
    return per_beat, len(per_beat) // 4, beats[b0:].copy()


def chart_of(song_dir: Path) -> tuple[list[Chord | None], int] | None:
    """`beat_chart` without the beat rows."""
    chart = beat_chart(song_dir)
    return None if chart is None else chart[:2]


def drum_pool(groove_dir: Path) -> list[DrumGroove]:
    """4/4 'beat' grooves of at least 4 bars, in info.csv order."""
    info = groove_dir / "info.csv"
    if not info.is_file():
        raise MusicgenError(f"{info}: Groove MIDI info.csv not found")
    out = []
    with open(info, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["beat_type"] != "beat" or r["time_signature"] != "4-4":
                continue
            if (
                float(r["duration"]) * int(r["bpm"]) / 60 < 4 * 4
                or not (groove_dir / r["midi_filename"]).is_file()
            ):
                continue
            out.append(DrumGroove(r["midi_filename"], r["style"], int(r["bpm"])))
    if not out:
        raise MusicgenError(f"{info}: no 4/4 beat grooves found")
    return out


def split_drum_styles(pool: list[DrumGroove], rng: np.random.Generator) -> dict[str, str]:
    """Style label -> split: the 3 most frequent labels train; of the rest (shuffled) 10 % test,
    10 % validation (at least one each), the others train."""
    counts: dict[str, int] = {}
    for g in pool:
        counts[g.style] = counts.get(g.style, 0) + 1
    labels = sorted(counts, key=lambda s: (-counts[s], s))
    common, rest = labels[:3], sorted(labels[3:])
    rest = [rest[i] for i in rng.permutation(len(rest))]
    n = max(1, round(0.1 * len(labels)))
    out = {s: "train" for s in common + rest[2 * n :]}
    out.update({s: "test" for s in rest[:n]})
    out.update({s: "validation" for s in rest[n : 2 * n]})
    return out


def drum_notes(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Onsets (12-tick grid), General MIDI pitches and velocities of a Groove MIDI file."""
    try:
        score = symusic.Score(str(path))
    except (RuntimeError, ValueError, OSError) as exc:
        raise MusicgenError(f"{path}: cannot read MIDI ({exc})") from None
    notes = [n for t in score.tracks for n in t.notes]
    if not notes:
        raise MusicgenError(f"{path}: no drum notes")
    tpq = score.tpq
    on = np.array([round(n.time * BEAT / tpq) for n in notes], dtype=np.int64)
    pitch = np.array([TD11_TO_GM.get(n.pitch, n.pitch) for n in notes], dtype=np.int64)
    vel = np.array([n.velocity for n in notes], dtype=np.int64)
    return on, pitch, vel


def _loop_of(notes: tuple[np.ndarray, np.ndarray, np.ndarray], bars: int) -> np.ndarray:
    """(onset, offset, pitch, velocity) of `bars` bars: the bars after the first played bar (or
    from the first when the groove is short)."""
    on, pitch, vel = notes
    b0 = int(round(on.min() / BAR))
    start = (b0 + 1) * BAR if on.max() >= (b0 + 1 + bars) * BAR else b0 * BAR
    keep = (on >= start) & (on < start + bars * BAR)
    return np.stack([on[keep] - start, on[keep] - start + 1, pitch[keep], vel[keep]], axis=1)


def drum_loop(path: Path) -> np.ndarray:
    """A `LOOP_BARS`-bar loop on the 12-tick grid (see `_loop_of`)."""
    return _loop_of(drum_notes(path), LOOP_BARS)


def drum_excerpt(path: Path, max_bars: int) -> tuple[np.ndarray, int]:
    """The longest loop of at most `max_bars` whole bars (at least `LOOP_BARS`) after the first
    played bar and before the bar of the last hit (often cut short), and its length in bars:
    more of the drummer's playing than a 2-bar loop, and never a loop ending in silence."""
    notes = drum_notes(path)
    b0 = int(round(notes[0].min() / BAR))
    bars = min(max_bars, max(LOOP_BARS, int(notes[0].max()) // BAR - b0 - 1))
    return _loop_of(notes, bars), bars


def _tile(loop: np.ndarray, n_bars: int, loop_bars: int = LOOP_BARS) -> np.ndarray:
    """The loop repeated over `n_bars` bars (clip with `_clean`)."""
    reps = -(-n_bars // loop_bars)
    step = loop_bars * BAR
    parts = [loop + np.array([r * step, r * step, 0, 0]) for r in range(reps)]
    return np.concatenate(parts)


def _clean(notes: np.ndarray, end: int) -> np.ndarray:
    """Clip to [0, end), drop same-pitch overlaps (tokenizer rule), keep velocities."""
    notes = notes[notes[:, 0] < end].copy()
    notes[:, 1] = np.minimum(notes[:, 1], end)
    vel = {(int(n[0]), int(n[2])): int(n[3]) for n in notes[::-1]}  # first velocity wins
    clean = resolve_overlaps(notes[:, :3])
    v = np.array([vel[(int(n[0]), int(n[2]))] for n in clean], dtype=np.int64)
    return np.concatenate([clean, v.reshape(-1, 1)], axis=1)


def _midi_bytes(parts: list[np.ndarray], tempo: int) -> bytes:
    score = symusic.Score(BEAT)
    score.tempos.append(symusic.Tempo(0, float(tempo)))
    score.time_signatures.append(symusic.TimeSignature(0, 4, 4))
    for (name, program, drum), notes in zip(
        (("Bass", 33, False), ("Drums", 0, True), ("Piano", 0, False)), parts, strict=True
    ):
        track = symusic.Track(name, program, drum)
        for on, off, pitch, vel in notes[np.lexsort((notes[:, 2], notes[:, 0]))].tolist():
            track.notes.append(symusic.Note(on, off - on, pitch, vel))
        score.tracks.append(track)
    return bytes(score.dumps_midi())


def build_trio(
    pop909_dir: str | Path,
    groove_dir: str | Path,
    out_dir: str | Path,
    n_songs: int = 300,
    seed: int = 0,
    songs_per_style: int = 3,
    min_bars: int = 16,
    max_bars: int = 48,
    progress: bool = True,
) -> list[dict]:
    """Write `out_dir/{split}/NNNN.mid` and `out_dir/metadata.csv`; returns the metadata rows.
    One seeded pass: the draws stay in this order (the output is rebuilt bit for bit from the
    seed); the steps that draw nothing are helpers."""
    pop909_dir, groove_dir, out_dir = Path(pop909_dir), Path(groove_dir), Path(out_dir)
    if not pop909_dir.is_dir():
        raise MusicgenError(f"{pop909_dir}: POP909 folder not found")
    rng = np.random.default_rng(seed)
    pool = drum_pool(groove_dir)
    label_split = split_drum_styles(pool, rng)
    by_split = {s: [g for g in pool if label_split[g.style] == s] for s in SPLITS}
    song_ids = sorted(p.name for p in pop909_dir.iterdir() if p.is_dir())
    song_ids = [song_ids[i] for i in rng.permutation(len(song_ids))]
    style_split = _style_splits(n_songs, songs_per_style)
    rows: list[dict] = []
    song_iter = iter(song_ids)
    bar = tqdm(total=n_songs, desc="trio songs", disable=not progress)
    for k, split in enumerate(style_split):
        srng = np.random.default_rng([seed, k])
        groove = by_split[split][int(srng.integers(len(by_split[split])))]
        loop = drum_loop(groove_dir / groove.file)
        bass, accomp = make_bass_pattern(srng), make_accomp_pattern(srng)
        for _ in range(min(songs_per_style, n_songs - len(rows))):
            pid, chords, avail = _next_chart(song_iter, pop909_dir, min_bars)
            n_bars = int(srng.integers(min_bars, min(max_bars, avail) + 1))
            start_bar = int(srng.integers(0, avail - n_bars + 1))
            chords = chords[start_bar * 4 : (start_bar + n_bars) * 4]
            name = f"{len(rows):04d}"
            parts = _trio_parts(bass, accomp, loop, chords, n_bars)
            atomic_write_bytes(out_dir / split / f"{name}.mid", _midi_bytes(parts, groove.bpm))
            rows.append(_row(split, name, pid, start_bar, n_bars, groove, k))
            bar.update(1)
    bar.close()
    atomic_write_text(out_dir / "metadata.csv", csv_text(rows, META_FIELDS))
    return rows


def _style_splits(n_songs: int, songs_per_style: int) -> list[str]:
    """The split of each style, in order: 10 % test, 10 % validation, the rest train (none
    of the small splits under 3 styles)."""
    n_styles = -(-n_songs // songs_per_style)
    n_small = max(1, round(0.1 * n_styles)) if n_styles >= 3 else 0
    style_split = ["test"] * n_small + ["validation"] * n_small
    style_split += ["train"] * (n_styles - 2 * n_small)
    return style_split


def _next_chart(song_iter, pop909_dir: Path, min_bars: int) -> tuple[str, list[Chord | None], int]:
    """The next song (POP909 id, chord chart, bars) with a chart of at least `min_bars` bars."""
    chart = None
    while chart is None:
        pid = next(song_iter, None)
        if pid is None:
            raise MusicgenError(f"{pop909_dir}: not enough POP909 songs with annotations")
        chart = chart_of(pop909_dir / pid)
        if chart is not None and chart[1] < min_bars:
            chart = None
    chords, avail = chart
    return pid, chords, avail


def _trio_parts(bass, accomp, loop: np.ndarray, chords: list[Chord | None], n_bars: int):
    """Bass, drums and piano of one song of `n_bars` bars, clipped to its end."""
    end = n_bars * BAR
    return [
        _clean(render_bass(bass, chords), end),
        _clean(_tile(loop, n_bars), end),
        _clean(render_accomp(accomp, chords), end),
    ]


def _row(
    split: str, name: str, pid: str, start_bar: int, n_bars: int, groove: DrumGroove, k: int
) -> dict:
    """One song's metadata row (`META_FIELDS`)."""
    return {
        "song": f"{split}/{name}.mid",
        "split": split,
        "pop909_id": pid,
        "start_bar": start_bar,
        "bars": n_bars,
        "tempo": groove.bpm,
        "drum_file": groove.file,
        "drum_style": groove.style,
        "bass_pattern": f"bass_{k:03d}",
        "accomp_pattern": f"accomp_{k:03d}",
    }


def csv_text(rows: list[dict], fields: tuple[str, ...]) -> str:
    """`rows` as CSV text with a header, `\n` line ends (the same bytes on every platform)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
