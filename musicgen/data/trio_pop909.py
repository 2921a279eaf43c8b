"""A bass / drums / piano trio set from whole POP909 songs: their real piano accompaniment, a bass
line derived from their chord chart, and a Groove MIDI drum performance matched by tempo.

Per song (every POP909 song in 4/4 with beat and chord annotations):
- **Piano**: the song's BRIDGE and PIANO tracks (the MELODY track is left out), their times read
  on the beat annotation and snapped to sixteenths and eighth triplets, from the first downbeat
  at or after the first chord (bar 0) to the last whole annotated bar.
- **Bass**: one of the named one-bar lines of `trio_patterns.BASS_STYLES` (root, fifth and octave
  on the beat grid, the slash-chord bass on the downbeat), played over the chord chart.
- **Drums**: a Groove MIDI "beat" performance in 4/4 of the song's split whose tempo is among the
  4 nearest to the song's (ratio of bpm), up to `drum_bars` whole bars of it looped.
- Tempo: the song's median beat period.

Split rule: POP909 songs are split 80/10/10 at random; Groove MIDI drum grooves are split by their
genre (the part of the `style` label before '/', e.g. `funk` of `funk/groove1`): the three most
frequent genres train, the others (shuffled) fill test, then validation, up to 10 % of the grooves
each. No test song, drum file, drum style or drum genre occurs in training. Every draw is seeded
per song, so the output is byte-for-byte deterministic for a seed, and a song's file does not
depend on which other songs were built.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import symusic
from tqdm import tqdm

from musicgen.data.trio import (
    BAR,
    BEAT,
    SPLITS,
    DrumGroove,
    _clean,
    _midi_bytes,
    _tile,
    beat_chart,
    csv_text,
    drum_excerpt,
    drum_pool,
)
from musicgen.data.trio_patterns import BASS_STYLES, render_bass
from musicgen.errors import MusicgenError
from musicgen.io import atomic_write_bytes, atomic_write_text

PIANO_TRACKS = ("BRIDGE", "PIANO")
NEAREST_GROOVES = 4
META_FIELDS = (
    "song",
    "split",
    "pop909_id",
    "bars",
    "tempo",
    "drum_file",
    "drum_genre",
    "drum_style",
    "drum_bpm",
    "drum_bars",
    "bass_style",
)


def genre_of(groove: DrumGroove) -> str:
    return groove.style.split("/")[0]


def split_drum_genres(pool: list[DrumGroove], rng: np.random.Generator) -> dict[str, str]:
    """Genre -> split: the 3 most frequent genres train; the rest, shuffled, fill test and then
    validation up to 10 % of the grooves each (at least one genre each), the others train."""
    counts: dict[str, int] = {}
    for g in pool:
        counts[genre_of(g)] = counts.get(genre_of(g), 0) + 1
    labels = sorted(counts, key=lambda s: (-counts[s], s))
    rest = sorted(labels[3:])
    rest = [rest[i] for i in rng.permutation(len(rest))]
    out = {g: "train" for g in labels[:3]}
    filled = {"test": 0, "validation": 0}
    for genre in rest:
        split = next((s for s in filled if filled[s] < 0.1 * len(pool)), "train")
        out[genre] = split
        filled[split] = filled.get(split, 0) + counts[genre]
    if not filled["test"] or not filled["validation"]:
        raise MusicgenError(f"drum grooves: {len(labels)} genres, need at least 5 to split")
    return out


def split_songs(song_ids: list[str], rng: np.random.Generator) -> dict[str, str]:
    """Song id -> split, 10 % test, 10 % validation (one each from 3 songs), the rest train."""
    order = [song_ids[i] for i in rng.permutation(len(song_ids))]
    n = max(1, round(0.1 * len(order))) if len(order) >= 3 else 0
    return {
        s: "test" if i < n else "validation" if i < 2 * n else "train" for i, s in enumerate(order)
    }


def is_four_four(beats: np.ndarray) -> bool:
    """Whether 90 % of the gaps between annotated downbeats are 4 beats."""
    gaps = np.diff(np.flatnonzero(beats[:, 2] == 1))
    return len(gaps) > 0 and float(np.mean(gaps == 4)) >= 0.9


def beat_positions(seconds: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Times in seconds -> beats (fractional) on the annotated beats, linear beyond the ends."""
    pos = np.interp(seconds, times, np.arange(len(times), dtype=np.float64))
    lo, hi = seconds < times[0], seconds > times[-1]
    pos[lo] = (seconds[lo] - times[0]) / (times[1] - times[0])
    pos[hi] = len(times) - 1 + (seconds[hi] - times[-1]) / (times[-1] - times[-2])
    return pos


def grid_phase(beats: np.ndarray) -> float:
    """How far (in beats, within +-1/4) the onsets lie after the eighth-note grid on average (a
    circular mean): some songs' beat annotations sit a few tens of ms off their piano."""
    return float(np.angle(np.mean(np.exp(4j * np.pi * beats))) / (4 * np.pi)) if len(beats) else 0.0


GRID = np.array([0, 3, 4, 6, 8, 9, 12])  # sixteenths and eighth-note triplets, in ticks


def snap(ticks: np.ndarray) -> np.ndarray:
    """Fractional ticks -> the nearest sixteenth or eighth-triplet tick: a hand-played note lies
    a tick or two off the beat grid, which the 12-tick grid would keep as a rhythm."""
    beat = np.floor(ticks / BEAT)
    within = ticks - beat * BEAT
    nearest = GRID[np.argmin(np.abs(within[:, None] - GRID[None, :]), axis=1)]
    return (beat * BEAT + nearest).astype(np.int64)


def song_piano(midi: Path, times: np.ndarray, n_bars: int) -> np.ndarray:
    """(onset, offset, pitch, velocity) of the BRIDGE and PIANO tracks on the 12-tick grid of the
    annotated beats (moved by `grid_phase`, then `snap`ped), in [0, n_bars); overlaps of one
    pitch resolved."""
    try:
        score = symusic.Score(str(midi)).to("second")
    except (RuntimeError, ValueError, OSError) as exc:
        raise MusicgenError(f"{midi}: cannot read MIDI ({exc})") from None
    tracks = [t for t in score.tracks if t.name.strip().upper() in PIANO_TRACKS]
    arrays = [t.notes.numpy() for t in tracks if len(t.notes)]
    if not arrays:
        raise MusicgenError(f"{midi}: no notes in a BRIDGE or PIANO track")
    start = np.concatenate([a["time"] for a in arrays]).astype(np.float64)
    end = start + np.concatenate([a["duration"] for a in arrays])
    phase = grid_phase(beat_positions(start, times))
    on = snap((beat_positions(start, times) - phase) * BEAT)
    off = np.maximum(snap((beat_positions(end, times) - phase) * BEAT), on + 1)
    pitch = np.concatenate([a["pitch"] for a in arrays]).astype(np.int64)
    vel = np.concatenate([a["velocity"] for a in arrays]).astype(np.int64)
    notes = np.stack([on, off, pitch, vel], axis=1)
    return _clean(notes[on >= 0], n_bars * BAR)


def pick_groove(grooves: list[DrumGroove], bpm: float, rng: np.random.Generator) -> DrumGroove:
    """One of the `NEAREST_GROOVES` grooves nearest in tempo (bpm ratio), drawn at random."""
    near = sorted(grooves, key=lambda g: (abs(np.log(g.bpm / bpm)), g.file))
    return near[int(rng.integers(min(NEAREST_GROOVES, len(near))))]


def build_song(
    song_dir: Path, grooves: list[DrumGroove], groove_dir: Path, seed: int, drum_bars: int
) -> tuple[bytes, dict]:
    """One song's MIDI bytes and metadata (without song/split); MusicgenError when unusable."""
    pid = song_dir.name
    chart = beat_chart(song_dir)
    if chart is None:
        raise MusicgenError(f"{song_dir}: no usable beat/chord annotation")
    chords, n_bars, beats = chart
    if not is_four_four(beats):
        raise MusicgenError(f"{song_dir}: not in 4/4 by its downbeats")
    if n_bars < 8:
        raise MusicgenError(f"{song_dir}: only {n_bars} annotated bars")
    times = beats[:, 0]
    rng = np.random.default_rng([seed, zlib.crc32(pid.encode())])
    bpm = 60.0 / float(np.median(np.diff(times)))
    groove = pick_groove(grooves, bpm, rng)
    loop, loop_bars = drum_excerpt(groove_dir / groove.file, drum_bars)
    bass_style = sorted(BASS_STYLES)[int(rng.integers(len(BASS_STYLES)))]
    chords = chords[: n_bars * 4]
    end = n_bars * BAR
    parts = [
        _clean(render_bass(BASS_STYLES[bass_style], chords), end),
        _clean(_tile(loop, n_bars, loop_bars), end),
        song_piano(song_dir / f"{pid}.mid", times, n_bars),
    ]
    tempo = int(round(bpm))
    meta = {
        "pop909_id": pid,
        "bars": n_bars,
        "tempo": tempo,
        "drum_file": groove.file,
        "drum_genre": genre_of(groove),
        "drum_style": groove.style,
        "drum_bpm": groove.bpm,
        "drum_bars": loop_bars,
        "bass_style": bass_style,
    }
    return _midi_bytes(parts, tempo), meta


def build_pop909_trio(
    pop909_dir: str | Path,
    groove_dir: str | Path,
    out_dir: str | Path,
    seed: int = 0,
    drum_bars: int = 8,
    max_songs: int | None = None,
    progress: bool = True,
) -> tuple[list[dict], list[dict]]:
    """Write `out_dir/{split}/NNN.mid`, `metadata.csv` and `skipped.csv`; returns the rows of
    both. `max_songs` builds only the first songs (by id) of the folder, for a quick look."""
    pop909_dir, groove_dir, out_dir = Path(pop909_dir), Path(groove_dir), Path(out_dir)
    if not pop909_dir.is_dir():
        raise MusicgenError(f"{pop909_dir}: POP909 folder not found")
    rng = np.random.default_rng(seed)
    pool = drum_pool(groove_dir)
    genre_split = split_drum_genres(pool, rng)
    by_split = {s: [g for g in pool if genre_split[genre_of(g)] == s] for s in SPLITS}
    song_ids = sorted(p.name for p in pop909_dir.iterdir() if (p / f"{p.name}.mid").is_file())
    if not song_ids:
        raise MusicgenError(f"{pop909_dir}: no POP909 song folders (NNN/NNN.mid)")
    song_split = split_songs(song_ids, rng)
    rows, skipped = [], []
    for pid in tqdm(song_ids[:max_songs], desc="trio songs", disable=not progress):
        split = song_split[pid]
        try:
            data, meta = build_song(pop909_dir / pid, by_split[split], groove_dir, seed, drum_bars)
        except MusicgenError as exc:
            skipped.append({"pop909_id": pid, "reason": str(exc)})
            continue
        atomic_write_bytes(out_dir / split / f"{pid}.mid", data)
        rows.append({"song": f"{split}/{pid}.mid", "split": split, **meta})
    atomic_write_text(out_dir / "metadata.csv", csv_text(rows, META_FIELDS))
    atomic_write_text(out_dir / "skipped.csv", csv_text(skipped, ("pop909_id", "reason")))
    return rows, skipped
