"""Extend a piece from its end: the whole file, then N new bars (`continue --extend`,
`Model.continue_midi(path, extend=True, new_bars=N)`).

The prompt is the piece's last bars, as many as the model's window (`max_len` ids) holds beside
the new bars (each new bar counted at the piece's own mean ids a bar), at least one, with the
phrase and chord tokens the song's ids carry. The written file is the prompt FILE as it was (its
notes, tracks and their names, markers, tempos, untouched), then the notes and phrase markers
the model wrote from the bar after its last, moved onto the file's own bars and put in its own
tracks (the melody in the track named Melody, the piano's in the Piano one). With a `form`, the
form is that of the new bars: they may name their sections. REMI models only (the groove
tokenizer counts bars from the first note, not from time 0).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.generation.api.finish import finish
from musicgen.generation.api.prompt import (
    Prompt,
    beats_per_bar,
    check_midi_path,
    encode_song,
    midi_path,
    prompt_tempo,
    select_bars,
)
from musicgen.generation.api.written import PIANO_NAMES
from musicgen.generation.controls.form_plan import resolve
from musicgen.measures.song import MELODY_NAME
from musicgen.tokenizers.form import MAX_SECTION_BARS, Phrase

if TYPE_CHECKING:
    from musicgen.generation.api.model import Model, Music
    from musicgen.generation.api.request import GenerationRequest


def check_extend(request: GenerationRequest, **given) -> None:
    """Refuse, in one line, what extending cannot mean: a prompt of chosen bars or seconds (the
    prompt is the piece's end), the continuation alone (the file is written whole), no length."""
    for name, value in given.items():
        if value not in (None, False):
            raise MusicgenError(
                f"{name}: not with extend (it prompts with the piece's last bars and writes "
                "the whole piece); leave it out"
            )
    if request.bars is None and request.form is None:
        raise MusicgenError("new_bars: extend needs the number of new bars (or a form)")


def window_bars(ids: list[int], starts: np.ndarray, window: int, new_bars: int) -> int:
    """How many of the song's last bars fit the window beside `new_bars` new ones (each new
    bar counted at the song's mean ids a bar): at least 1, at most all."""
    total = len(starts)
    per_bar = (len(ids) - int(starts[0])) / total
    budget = window - math.ceil(per_bar * new_bars)
    end = len(ids) - 1  # before EOS
    k = 1
    while k < total and end - int(starts[total - k - 1]) <= budget:
        k += 1
    return k


def end_prompt(model: Model, path, request: GenerationRequest) -> tuple[Prompt, int]:
    """The prompt of the piece's last bars (`window_bars`) and the piece's bar count."""
    tok = model.tokenizer
    if tok.name != "remi":
        raise MusicgenError(f"extend: needs a REMI model (this model's is '{tok.name}')")
    path = midi_path(path)
    check_midi_path(path)
    ids = encode_song(tok, path)
    starts = tok.bar_starts(np.asarray(ids, dtype=np.int64))
    if len(starts) == 0:
        raise MusicgenError(f"{path}: holds no bars to extend")
    new = request.bars or 1
    k = window_bars(ids, starts, model.config.model.max_len, new)
    total = len(starts)
    prompt = select_bars(tok, ids, prompt_bars=(total - k, total), where=str(path))
    prompt.tempo = prompt_tempo(path, prompt.first_bar, beats_per_bar(tok))
    return prompt, total


def form_after(request: GenerationRequest, folder: Path, held: int) -> GenerationRequest:
    """The request with its form (that of the new bars) placed after the `held` prompt bars:
    unnamed phrases ('x', at most `MAX_SECTION_BARS` each) cover the prompt."""
    if request.form is None:
        return request
    phrases = resolve(request.form, folder, request.seed)
    cover = [Phrase("x", min(MAX_SECTION_BARS, held - b)) for b in range(0, held, MAX_SECTION_BARS)]
    return request.settled(form=cover + phrases)


def extended(model: Model, path, request: GenerationRequest, **hooks) -> Iterator[Music]:
    """The pieces of `request`, each the whole file at `path` and its new bars; `hooks`:
    `progress`, `cancel`, `grammar_wrap` of `Model.pieces`."""
    request = request.seeded()
    prompt, total = end_prompt(model, path, request)
    original = symusic.Score(str(path))
    sampled = form_after(request, model.source, prompt.bars)
    sampled = sampled.settled(tempo=None, transpose=None)  # acted on once, on the whole
    for music in model.pieces(sampled, prompt=prompt, **hooks):
        music.score = whole(original, music.score, prompt, total)
        finish(music.score, request, keep=True)
        yield music


def whole(original: symusic.Score, written: symusic.Score, prompt: Prompt, total: int):
    """`original` (a copy) with the notes and phrase markers that `written` (the prompt's
    bars, then the new ones) has from the prompt's end on, moved to follow bar `total`."""
    out = original.copy()
    tpq = out.ticks_per_quarter
    cut = prompt.end_tick * tpq // prompt.notes.ticks_per_quarter
    if written.ticks_per_quarter != tpq:
        written = written.resample(tpq)
    shift = total * prompt.beats * tpq - cut  # the prompt's end is the file's bar `total`
    for track in written.tracks:
        new = [n for n in track.notes if n.time >= cut]
        if not new:
            continue
        own = own_track(out, track)
        moved = [symusic.Note(n.time + shift, n.duration, n.pitch, n.velocity) for n in new]
        notes = sorted([*own.notes, *moved], key=lambda n: (n.time, n.pitch))
        own.notes.clear()
        own.notes.extend(notes)
    for m in written.markers:
        if m.time >= cut:
            out.markers.append(symusic.TextMeta(m.time + shift, m.text))
    return out


def own_track(score: symusic.Score, track) -> symusic.Track:
    """The file's track for a written one: the melody's (by name), the first drum track for
    drums, else the piano's (by name, else the first other pitched track); new if none."""
    name = track.name.strip().lower()
    kind = [t for t in score.tracks if t.is_drum == track.is_drum]
    names = [t.name.strip().lower() for t in kind]
    if name == MELODY_NAME:
        found = [t for t, n in zip(kind, names, strict=True) if n == MELODY_NAME]
    else:
        found = [t for t, n in zip(kind, names, strict=True) if n in PIANO_NAMES]
        found = found or [t for t, n in zip(kind, names, strict=True) if n != MELODY_NAME]
    if found:
        return found[0]
    score.tracks.append(symusic.Track(track.name, track.program, track.is_drum))
    return score.tracks[-1]


def extend_many(
    model: Model, path, request: GenerationRequest, *, hooks: tuple, extend, **given
) -> list[Music]:
    """`Model.continue_many(..., extend=True)`: `given` the prompt arguments it refuses."""
    if not isinstance(extend, bool):
        raise MusicgenError(f"extend: must be True or False, got {extend!r}")
    check_extend(request, **given)
    progress, cancel, grammar_wrap = hooks
    return list(
        extended(model, path, request, progress=progress, cancel=cancel, grammar_wrap=grammar_wrap)
    )
