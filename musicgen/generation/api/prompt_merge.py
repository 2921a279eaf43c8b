"""What comes back from a prompt: the prompt's notes as the tokenizer reads them, then the
generated notes from the cut on, never cutting a prompt note (`merge`), the continuation alone
(`continuation_only`), and the note filters they share. Re-exported by `generation.api.prompt`; the
rules: `generation.api.prompt`'s module docstring."""

from __future__ import annotations

from typing import TYPE_CHECKING

import symusic

from musicgen.generation.api.written import from_zero, track_key

if TYPE_CHECKING:
    from musicgen.generation.api.prompt import Prompt


def only_notes(score: symusic.Score, keep) -> symusic.Score:
    """A copy of `score` whose tracks keep the notes for which `keep(note)` is true."""
    out = score.copy()
    for track in out.tracks:
        kept = [n for n in track.notes if keep(n)]
        track.notes.clear()
        for n in kept:
            track.notes.append(n)
    return out


def midi_pairing(score: symusic.Score) -> symusic.Score:
    """Pair the onsets and ends of each track's same-pitch notes first-in first-out, as a MIDI
    file does (second rule in `generation.api.prompt`'s module docstring); in place."""
    for track in score.tracks:
        keys: dict[int, list] = {}
        for n in track.notes:
            keys.setdefault(n.pitch, []).append(n)
        paired = []
        for pitch, notes in keys.items():
            onsets = sorted(notes, key=lambda n: (n.time, -n.velocity))
            ends = sorted(n.time + n.duration for n in notes)
            for n, end in zip(onsets, ends, strict=True):
                paired.append(symusic.Note(n.time, max(end - n.time, 1), pitch, n.velocity))
        track.notes.clear()
        for n in sorted(paired, key=lambda n: (n.time, n.pitch)):
            track.notes.append(n)
    return score


def merge(prompt: Prompt, generated: symusic.Score) -> symusic.Score:
    """The prompt's notes, then the generated notes from bar N+1 on (the overlap rule in
    `generation.api.prompt`'s module docstring)."""
    if generated.ticks_per_quarter != prompt.notes.ticks_per_quarter:
        generated = generated.resample(prompt.notes.ticks_per_quarter)
    cut = prompt.end_tick
    out = generated.copy()
    sources = {track_key(t): t for t in prompt.notes.tracks}
    for track in out.tracks:
        own = sources.pop(track_key(track), None)
        track.name = track.name if own is None else own.name  # "Piano", not miditok's name
        old = list(own.notes) if own is not None else []
        busy: dict[int, int] = {}  # pitch -> latest end of a prompt note
        for n in old:
            busy[n.pitch] = max(busy.get(n.pitch, 0), n.time + n.duration)
        new = [n for n in track.notes if n.time >= cut and n.time >= busy.get(n.pitch, 0)]
        track.notes.clear()
        for n in sorted(old + new, key=lambda n: (n.time, n.pitch)):
            track.notes.append(n)
    for track in sources.values():  # a prompt track the generated score has no notes for
        out.tracks.append(track.copy())
    return out


def continuation_only(prompt: Prompt, merged: symusic.Score) -> symusic.Score:
    """The notes from the cut on, moved back by whole bars: the bar holding the cut becomes
    bar 0 (a prompt of N bars: bar N+1 starts at 0), as the ids `[BOS, *solo_lead,
    *continuation]` decode."""
    cut = prompt.end_tick
    return from_zero(only_notes(merged, lambda n: n.time >= cut).shift_time(-prompt.bar_line_tick))
