"""Write bars a..b-1 of a piece again, the rest kept (`musicgen regenerate FILE --bars a:b`,
`--section NAME`; `Model.regenerate(path, bars=(a, b))`).

The bars before the section are the prompt (its last ones, as many as the model's window holds
beside the new bars, as `generation.api.extend` takes them; none for a section at bar 0, which is
written from scratch); the model writes b - a bars; the file keeps every note, marker and tempo
outside the section as it was (a note that sounds into the section from before it is cut at
its first bar), and the section's notes and chord markers are the model's (its phrase markers
stay). The model does not see the bars after the section: they are kept, not continued into.
REMI models only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import symusic

from musicgen.errors import MusicgenError, check_int
from musicgen.generation.api.chord_marks import CHORD_MARK
from musicgen.generation.api.extend import form_after, own_track, window_bars
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
from musicgen.generation.api.request import GenerationRequest
from musicgen.tokenizers.form import read_markers

if TYPE_CHECKING:
    from musicgen.generation.api.model import Model, Music


def section_bars(path: Path, total: int, bars=None, section: str | None = None) -> tuple[int, int]:
    """(a, b) from `bars=(a, b)` (0 <= a < b <= the piece's bars) or a phrase marker's label
    (`section="B"`: its first phrase B, as the file's markers place it); one of them."""
    if (bars is None) == (section is None):
        raise MusicgenError("bars: give the bars (a, b) or a section's name, one of them")
    if section is not None:
        phrases = read_markers(symusic.Score(str(path)))
        found = [s for s in phrases if s.label == section or f"{s.label}{s.bars}" == section]
        if not found:
            names = ", ".join(f"{s.label}{s.bars}" for s in phrases) or "none"
            raise MusicgenError(f"section: no phrase '{section}' in {path} (its phrases: {names})")
        bars = (found[0].bar, min(found[0].bar + found[0].bars, total))
    if isinstance(bars, (str, bytes)) or not hasattr(bars, "__len__") or len(bars) != 2:
        raise MusicgenError(f"bars: must be (start, end), got {bars!r}")
    a, b = (check_int("bars", v) for v in bars)
    if not 0 <= a < b <= total:
        raise MusicgenError(
            f"bars: need 0 <= START < END <= {total} (the piece's bars), got {a}:{b}"
        )
    return a, b


def before_prompt(model: Model, path: Path, ids: list[int], a: int, new: int) -> Prompt | None:
    """The prompt of the bars before bar `a` (`extend.window_bars`); None where `a` is 0."""
    if a == 0:
        return None
    tok = model.tokenizer
    starts = tok.bar_starts(np.asarray(ids, dtype=np.int64))[:a]
    head = [*ids[: int(tok.bar_starts(np.asarray(ids, dtype=np.int64))[a])], tok.eos_id]
    k = window_bars(head, starts, model.config.model.max_len, new)
    prompt = select_bars(tok, ids, prompt_bars=(a - k, a), where=str(path))
    prompt.tempo = prompt_tempo(path, prompt.first_bar, beats_per_bar(tok))
    return prompt


def regenerated(model: Model, path, request: GenerationRequest, span=None, section=None,
                **hooks) -> Iterator[Music]:  # fmt: skip
    """The pieces of `request` (its `bars` set here), each the file at `path` with the bars
    `span=(a, b)` (or the phrase `section`) written again."""
    tok = model.tokenizer
    if tok.name != "remi":
        raise MusicgenError(f"regenerate: needs a REMI model (this model's is '{tok.name}')")
    if request.bars is not None:
        raise MusicgenError("new_bars: regenerate writes the section's own bars; leave it out")
    path = midi_path(path)
    check_midi_path(path)
    ids = encode_song(tok, path)
    total = len(tok.bar_starts(np.asarray(ids, dtype=np.int64)))
    a, b = section_bars(path, total, span, section)
    request = request.seeded().settled(bars=b - a)
    prompt = before_prompt(model, path, ids, a, b - a)
    sampled = form_after(request, model.source, prompt.bars) if prompt else request
    sampled = sampled.settled(tempo=None, transpose=None)  # acted on once, on the whole
    original = symusic.Score(str(path))
    for music in model.pieces(sampled, prompt=prompt, **hooks):
        music.score = rewrite(original, music.score, prompt, (a, b))
        finish(music.score, request, keep=True)
        yield music


def rewrite(original: symusic.Score, written: symusic.Score, prompt, span) -> symusic.Score:
    """`original` (a copy) with the bars `span` holding `written`'s new bars (from the prompt's
    end on, or from its start without a prompt) and their chord markers."""
    out = original.copy()
    tpq = out.ticks_per_quarter
    bar = 4 * tpq
    start, end = span[0] * bar, span[1] * bar
    cut = 0 if prompt is None else prompt.end_tick * tpq // prompt.notes.ticks_per_quarter
    if written.ticks_per_quarter != tpq:
        written = written.resample(tpq)
    shift = start - cut
    for track in out.tracks:
        if not track.is_drum:
            _clear(track, start, end)
    for track in written.tracks:
        new = [n for n in track.notes if cut <= n.time < cut + end - start]
        if new:
            own = own_track(out, track)
            moved = [symusic.Note(n.time + shift, min(n.duration, end - n.time - shift),
                                  n.pitch, n.velocity) for n in new]  # fmt: skip
            notes = sorted([*own.notes, *moved], key=lambda n: (n.time, n.pitch))
            own.notes.clear()
            own.notes.extend(notes)
    kept = [m for m in out.markers if not (start <= m.time < end and m.text.startswith(CHORD_MARK))]
    kept += [symusic.TextMeta(m.time + shift, m.text) for m in written.markers
             if m.text.startswith(CHORD_MARK) and cut <= m.time < cut + end - start]  # fmt: skip
    out.markers.clear()
    out.markers.extend(sorted(kept, key=lambda m: m.time))
    return out


def _clear(track, start: int, end: int) -> None:
    """The track without the notes that start in start..end-1; one sounding into it is cut."""
    kept = []
    for n in track.notes:
        if start <= n.time < end:
            continue
        if n.time < start < n.time + n.duration:
            n = symusic.Note(n.time, start - n.time, n.pitch, n.velocity)
        kept.append(n)
    track.notes.clear()
    track.notes.extend(kept)


def regenerate(model: Model, path, bars=None, *, section: str | None = None, progress=None,
               cancel=None, grammar_wrap=None, **fields) -> Music:  # fmt: skip
    """`Model.regenerate`: the file at `path` with bars `bars=(a, b)` (or the phrase
    `section`, "B" or "B8") written again; `fields`: the `GenerationRequest` fields."""
    if "bars_name" in fields:  # the request's own argument, not a field
        raise MusicgenError("bars_name: unknown option (regenerate's bars are `bars`)")
    if fields.get("num", 1) != 1:
        raise MusicgenError("num: Model.regenerate writes one piece (call it once a version)")
    request = GenerationRequest.build("new_bars", **fields)
    hooks = {"progress": progress, "cancel": cancel, "grammar_wrap": grammar_wrap}
    return next(iter(regenerated(model, path, request, bars, section, **hooks)))
