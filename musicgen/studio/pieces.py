"""How a result is written for the page: its tempo and transposition (`Look`), the chord names
of its bars, and its MIDI, piano roll, audio and player data in the page's folder (`render`)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from musicgen.generation.api import Model, Music, apply_tempo
from musicgen.generation.prompt import Prompt
from musicgen.generation.render import piano_roll, synthesize
from musicgen.measures.metrics import load_notes
from musicgen.studio.harmony import chord_symbol, flats_for, key_name, key_of, one_per_bar
from musicgen.studio.inputs import MAX_AUDIO_SECONDS, check_tempo, check_transpose
from musicgen.studio.player import roll_of
from musicgen.studio.session import Piece, Session


@dataclass
class Look:
    """How a result is handed over, after sampling: its tempo (qpm; None keeps the model's or
    the prompt's) and a transposition (semitones, drums untouched)."""

    tempo: float | None = None
    transpose: int = 0

    @classmethod
    def checked(cls, tempo=None, transpose=None) -> Look:
        return cls(check_tempo(tempo), check_transpose(transpose) or 0)

    def apply(self, music: Music) -> None:
        apply_tempo(music.score, self.tempo)
        if self.transpose:
            for track in music.score.tracks:
                if not track.is_drum:
                    for note in track.notes:
                        note.pitch = min(max(note.pitch + self.transpose, 0), 127)


def chord_name(harte: str, transpose: int = 0, flats: bool = False) -> str:
    """A tokenizer's chord ('A:min') as a chord symbol ('Am'), moved `transpose` semitones
    (`harmony.chord_symbol`)."""
    return chord_symbol(harte, transpose, flats)


def chords_per_bar(model: Model, ids: list[int], transpose: int = 0, flats: bool = False):
    """The chords a piece's tokens name, one symbol per bar (the chord sounding as it begins,
    `harmony.one_per_bar`; '' before the first), for the models that write chords (the pop
    models); [] for the others."""
    from musicgen.generation.progression import chord_events, chords_unsupported

    tok = model.tokenizer
    if chords_unsupported(tok) is not None:
        return []
    events = chord_events(tok, ids)
    if not events:
        return []
    named = [(bar, pos, chord_name(tok.token_name(cid).removeprefix("Chord_"), transpose, flats))
             for bar, pos, cid in events]  # fmt: skip
    return one_per_bar(named, events[-1][0] + 1)


def render(
    music: Music,
    session: Session,
    kind: str,
    label: str,
    info: dict,
    model: Model | None = None,
    prompt: Prompt | None = None,
    look: Look | None = None,
) -> Piece:
    """Write a piece's MIDI, piano roll and audio into the session folder, with what its
    player draws (chord names per bar, where the prompt ends)."""
    look = look or Look()
    look.apply(music)
    key = key_of(music.score)
    chords = chords_per_bar(model, music.ids, look.transpose, flats_for(key)) if model else []
    folder = session.dir()
    stem = session.next_stem(kind)
    name = file_name(folder, model, info, kind)
    midi = music.save(folder / f"{name}.mid")
    title = f"{label} ({midi.name})"
    png = piano_roll(load_notes(midi), folder / f"{name}.png", title=title)
    audio = save_audio(music.score, folder / f"{name}.wav")
    end = None if prompt is None else prompt.end_tick / prompt.notes.ticks_per_quarter
    roll = roll_of(music.score, chords, end, prompt.beats if prompt is not None else 4)
    roll.key = key_name(key)
    piece = Piece(f"{stem}: {label}", midi, png, audio, music.seed, info, roll)
    return session.add(piece)


def file_name(folder: Path, model: Model | None, info: dict, kind: str) -> str:
    """A result's file name, by model, form (else its bars), seed and time, so downloads from
    different pages, reloads and days never clash: pop909_sine_spe_gated_i4A8B8_seed7_
    20261207-223015 (-2, -3... for another with the same name in the folder)."""
    source = getattr(model, "source", None)
    model_name = Path(str(source)).name if source else str(info.get("model", "piece"))
    bars = info.get("new_bars") if kind == "cont" else info.get("bars")
    shape = info.get("form") or (f"{bars}bars" if bars else "")
    shape = f"cont{shape}" if kind == "cont" else shape
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
