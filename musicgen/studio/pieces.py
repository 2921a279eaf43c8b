"""How a result is written for the page: its sound as the request's own fields (`sound`: tempo,
transposition, melody instrument, acted on once by `generation.api.finish`), the chord names of its
bars (read back from the file's chord markers, so an extended or rewritten piece names the bars
it kept too), and its MIDI, piano roll, audio and player data in the page's folder (`render`)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import symusic

from musicgen.generation.api import Model, Music
from musicgen.generation.api.chord_marks import CHORD_MARK
from musicgen.generation.api.render import piano_roll, synthesize
from musicgen.measures.metrics import load_notes
from musicgen.studio.harmony import flats_for, key_name, key_of, one_per_bar, respell
from musicgen.studio.inputs import MAX_AUDIO_SECONDS, check_melody, check_tempo, check_transpose
from musicgen.studio.player import roll_of
from musicgen.studio.session import Piece, Session


def sound(tempo=None, transpose=None, melody=None) -> dict:
    """The page's tempo (None or 0: the piece's own), transposition (semitones) and melody
    instrument (a General MIDI program; None: the library's lead) as the request's fields
    `tempo`, `transpose`, `melody_program`, checked with the page's limits first: the library
    then holds the tempo (one in the file) and moves notes and chord markers together."""
    return {
        "tempo": check_tempo(tempo),
        "transpose": check_transpose(transpose) or 0,
        "melody_program": check_melody(melody),
    }


def chords_per_bar(score: symusic.Score, flats: bool = False, beats: int = 4) -> list[str]:
    """The chords the written file's markers name ("Chord Am", `chord_marks`), one symbol per
    bar spelt in the piece's key (`harmony.one_per_bar`; '' before the first); [] for a file
    without any (a model that writes no chords)."""
    bar = beats * score.ticks_per_quarter
    events = [
        (m.time // bar, m.time % bar, respell(m.text[len(CHORD_MARK) :], flats))
        for m in score.markers
        if m.text.startswith(CHORD_MARK)
    ]
    if not events:
        return []
    return one_per_bar(events, max(e[0] for e in events) + 1)


def render(
    music: Music,
    session: Session,
    kind: str,
    label: str,
    info: dict,
    model: Model | None = None,
    end: float | None = None,
    beats: int = 4,
) -> Piece:
    """Write a piece's MIDI, piano roll and audio into the session folder, with what its
    player draws (chord names per bar; `end`: where the given music ends, in quarters, None
    from scratch; `beats` a bar)."""
    key = key_of(music.score)
    chords = chords_per_bar(music.score, flats_for(key), beats)
    folder = session.dir()
    stem = session.next_stem(kind)
    name = file_name(folder, model, info, kind)
    midi = music.save(folder / f"{name}.mid")
    title = f"{label} ({midi.name})"
    png = piano_roll(load_notes(midi), folder / f"{name}.png", title=title)
    audio = save_audio(music.score, folder / f"{name}.wav")
    roll = roll_of(music.score, chords, end, beats)
    roll.key = key_name(key)
    piece = Piece(f"{stem}: {label}", midi, png, audio, music.seed, info, roll)
    return session.add(piece)


def file_name(folder: Path, model: Model | None, info: dict, kind: str) -> str:
    """A result's file name, by model, form (else its bars), seed and time, so downloads from
    different pages, reloads and days never clash: pop909_sine_spe_gated_i4A8B8_seed7_
    20261207-223015 (-2, -3... for another with the same name in the folder)."""
    source = getattr(model, "source", None)
    model_name = Path(str(source)).name if source else str(info.get("model", "piece"))
    bars = info.get("new_bars") if kind in ("cont", "ext") else info.get("bars")
    shape = info.get("form") or (f"{bars}bars" if bars else "")
    shape = f"{kind}{shape}" if kind in ("cont", "ext") else shape
    shape = f"redo{info['regenerate'].replace(':', '-')}" if "regenerate" in info else shape
    parts = [model_name, shape, f"seed{info.get('seed', '')}", time.strftime("%Y%m%d-%H%M%S")]
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", "_".join(p for p in parts if p)).strip("-")
    taken, k = name, 1
    while (folder / f"{taken}.mid").exists():
        k += 1
        taken = f"{name}-{k}"
    return taken


def save_audio(score, path: Path, seconds: float | None = None) -> Path | None:
    """The piece's WAV, its first `seconds` only (default `MAX_AUDIO_SECONDS`: a prompt's slow
    tempo cannot make a huge file); written once, where the page serves it from."""
    seconds = MAX_AUDIO_SECONDS if seconds is None else seconds
    timed = score.to("second")
    if timed.end() > seconds:
        score = timed.clip(0, seconds, clip_end=True).to("tick")
    return synthesize(score, path)
