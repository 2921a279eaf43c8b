"""How a result is written for the page: its tempo and transposition (`Look`), the chord names
of its bars, and its MIDI, piano roll, audio and player data in the page's folder (`render`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from musicgen.generation.api import Model, Music, apply_tempo
from musicgen.generation.prompt import Prompt
from musicgen.generation.render import piano_roll, synthesize
from musicgen.measures.metrics import load_notes
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


NOTE_NAMES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
SUFFIXES = {"maj": "", "min": "m", "min7": "m7", "maj7": "maj7", "hdim7": "m7b5", "7": "7"}


def chord_name(harte: str, transpose: int = 0) -> str:
    """A tokenizer's chord ('A:min', Harte) as a chord symbol ('Am'), moved `transpose`
    semitones."""
    root, _, quality = harte.partition(":")
    sharps = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
    if root not in sharps:
        return harte
    name = NOTE_NAMES[(sharps.index(root) + transpose) % 12]
    return name + SUFFIXES.get(quality, quality)


def chords_per_bar(model: Model, ids: list[int], transpose: int = 0) -> list[str]:
    """The chords a piece's tokens name, one label per bar ('' where none begins), for the
    models that write chords (the pop models); [] for the others."""
    from musicgen.generation.progression import chord_events, chords_unsupported

    tok = model.tokenizer
    if chords_unsupported(tok) is not None:
        return []
    events = chord_events(tok, ids)
    if not events:
        return []
    out: list[list[str]] = [[] for _ in range(events[-1][0] + 1)]
    for bar, _, cid in events:
        name = chord_name(tok.token_name(cid).removeprefix("Chord_"), transpose)
        if not out[bar] or out[bar][-1] != name:  # a chord written again is the same chord
            out[bar].append(name)
    return [" ".join(names) for names in out]


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
    chords = chords_per_bar(model, music.ids, look.transpose) if model is not None else []
    look.apply(music)
    folder = session.dir()
    stem = session.next_stem(kind)
    midi = music.save(folder / f"{stem}.mid")
    title = f"{label} ({midi.name})"
    png = piano_roll(load_notes(midi), folder / f"{stem}.png", title=title)
    audio = save_audio(music.score, folder / f"{stem}.wav")
    end = None if prompt is None else prompt.end_tick / prompt.notes.ticks_per_quarter
    roll = roll_of(music.score, chords, end, prompt.beats if prompt is not None else 4)
    piece = Piece(f"{stem}: {label}", midi, png, audio, music.seed, info, roll)
    return session.add(piece)


def save_audio(score, path: Path, seconds: float | None = None) -> Path | None:
    """The piece's WAV, its first `seconds` only (default `MAX_AUDIO_SECONDS`: a prompt's slow
    tempo cannot make a huge file); written once, where the page serves it from."""
    seconds = MAX_AUDIO_SECONDS if seconds is None else seconds
    timed = score.to("second")
    if timed.end() > seconds:
        score = timed.clip(0, seconds, clip_end=True).to("tick")
    return synthesize(score, path)
