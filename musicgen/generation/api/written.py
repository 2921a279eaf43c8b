"""What makes a written score agree with its prompt file: nothing before time 0, the prompt's
tracks matched by their part (not miditok's track name), the file's phrase markers read as
section tokens. Used by `generation.api.prompt`."""

from __future__ import annotations

from pathlib import Path

import symusic

from musicgen.tokenizers.base import Tokenizer

PIANO_NAMES = ("piano", "acoustic grand piano")  # our decoders' names for the one piano part


def track_key(track) -> tuple:
    """Which part a track is, for matching a prompt's tracks to the generated ones: the melody,
    the piano (whatever the decoder named it) or its own name; and its program and drum flag."""
    name = track.name.strip().lower()
    part = "piano" if name in PIANO_NAMES else name
    return (part, track.program, track.is_drum)


def with_markers(tokenizer: Tokenizer, ids: list[int], path: Path) -> list[int]:
    """`ids` with the phrases the file's markers name ("A8": a form-made file, `add_markers`)
    as section tokens, for a tokenizer that has them: a continuation then knows its phrases and
    keeps their markers."""
    from musicgen.tokenizers.form import read_markers

    if not tokenizer.section_mask().any() or tokenizer.sections(ids):
        return ids
    sections = read_markers(symusic.Score(str(path)))
    return tokenizer.insert_sections(list(ids), sections, str(path)) if sections else ids


def from_zero(score: symusic.Score) -> symusic.Score:
    """`score` with nothing before time 0 (in place): of the time signatures, keys and tempos
    set before it, the one in effect moves to 0; earlier markers, texts and controls go. A
    negative time would be written as a huge unsigned tick (a file that reads as corrupt)."""
    for events in (score.time_signatures, score.key_signatures, score.tempos):
        before = [e for e in events if e.time <= 0]
        kept = [e for e in events if e.time > 0]
        if before:
            before[-1].time = 0
            kept.insert(0, before[-1])
        events.clear()
        events.extend(kept)
    lists = [score.markers]
    for track in score.tracks:
        lists += [track.controls, track.pitch_bends, track.pedals, track.lyrics]
    for events in lists:
        kept = [e for e in events if e.time >= 0]
        if len(kept) < len(events):
            events.clear()
            events.extend(kept)
    return score
