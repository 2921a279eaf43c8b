"""The one prompt builder: bars of a song as the model is fed them, and as they must come back.

`musicgen continue`, the Python API (`Model.continue_midi`) and `evaluate style` all build their
prompts here, so a 2-bar prompt means the same ids everywhere.

Contract (issue #12): a prompt of N bars is fed as BOS, the ids of those bars, and the ids that
carry time to the bar line after them (REMI: the next `Bar` token; groove: nothing, its TimeShifts
already stop on bar lines), so the model can only write from bar N+1 on. The written score holds
the prompt's notes exactly as the tokenizer reads them (its resolution) and the continuation's
notes from bar N+1 on. Overlap rules, for notes of one track and one pitch:
- a continuation note that starts while a prompt note still sounds is dropped, so the model can
  never cut, lengthen or merge a prompt note;
- within the prompt, two such notes can overlap (REMI merges POP909's three piano tracks into
  one). A MIDI file holds them as note-on/note-off events of one key, which every reader pairs
  first-in first-out: the earlier onset takes the earlier end. `Prompt.notes` is already in that
  form (same onsets, same ends, same notes; only nested notes swap their ends), so it is exactly
  what the written file reads back as.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic

from musicgen.errors import MusicgenError
from musicgen.tokenizers.base import Tokenizer


@dataclass
class Prompt:
    """A prompt: what the model is fed, and the notes the output must start with."""

    ids: list[int]  # BOS + the prompt bars + the lead-in to bar N+1
    bars: int  # N
    notes: symusic.Score  # the prompt's notes at the tokenizer's resolution (bar 0 = prompt bar 0)
    tempo: float | None = None  # qpm where the prompt begins (None: the tokenizer's default)
    offset: int = 0  # index in the song's ids where the prompt's first bar begins
    lead_in: list[int] = field(default_factory=list)  # the last ids of `ids`, opening bar N+1
    beats: int = 4  # quarters per bar of the tokenizer's grid

    @property
    def end_tick(self) -> int:
        """Where the continuation starts, in ticks of `notes`."""
        return self.bars * bar_ticks(self.notes.ticks_per_quarter, self.beats)


def beats_per_bar(tokenizer: Tokenizer) -> int:
    """Beats per bar of the tokenizer's grid (both tokenizers ignore time signatures: 4/4)."""
    return int(getattr(tokenizer, "options", {}).get("beats_per_bar", 4))


def bar_ticks(tpq: int, beats: int = 4) -> int:
    return int(tpq) * int(beats)


def check_midi_path(path: Path) -> None:
    if not path.exists():
        raise MusicgenError(f"{path}: prompt file not found")
    if path.is_dir():
        raise MusicgenError(f"{path}: is a directory, not a MIDI file")
    if path.stat().st_size == 0:
        raise MusicgenError(f"{path}: empty file (not a MIDI file)")


def _valid_run(tokenizer: Tokenizer, ids: list[int]) -> list[int]:
    """BOS + the ids of `ids` the grammar accepts in order (a cut mid-song leaves NoteOffs of notes
    that started before it, which are dropped), so the result is always a valid prefix."""
    grammar = tokenizer.grammar()
    grammar.advance(tokenizer.bos_id)
    kept = [tokenizer.bos_id]
    for tok in ids:
        if tok in (tokenizer.bos_id, tokenizer.eos_id):
            continue
        if grammar.allowed()[tok]:
            grammar.advance(tok)
            kept.append(tok)
    return kept


def _lead_in(tokenizer: Tokenizer) -> list[int]:
    """Ids that open the bar after the prompt (REMI's Bar; groove needs none)."""
    bar_id = getattr(tokenizer, "bar_id", None)
    return [int(bar_id)] if bar_id is not None else []


def prompt_from_ids(
    tokenizer: Tokenizer, ids: list[int], start: int, end: int, where: str = "prompt"
) -> Prompt:
    """Bars start..end-1 (0-based) of a song's ids; `where` names the song in errors."""
    ids = [int(t) for t in ids]
    starts = tokenizer.bar_starts(np.asarray(ids, dtype=np.int64))
    if len(starts) < end:
        raise MusicgenError(
            f"{where}: has {len(starts)} bars, fewer than the {end} that bars {start}:{end} need"
        )
    first = int(starts[start])
    stop = int(starts[end]) if end < len(starts) else len(ids) - 1  # before EOS
    body = _valid_run(tokenizer, ids[first:stop])
    if len(body) == 1:
        raise MusicgenError(f"{where}: bars {start}:{end} hold no tokens")
    # the prompt's notes with their real ends: decode from the cut to the end of the song
    tail = _valid_run(tokenizer, ids[first:])
    grammar = tokenizer.grammar()
    for tok in tail:
        grammar.advance(tok)
    whole = tokenizer.decode(tail + grammar.completion())
    beats = beats_per_bar(tokenizer)
    cut = (end - start) * bar_ticks(whole.ticks_per_quarter, beats)
    notes = midi_pairing(only_notes(whole, lambda n: n.time < cut))
    lead = _lead_in(tokenizer)
    return Prompt(
        ids=body + lead, bars=end - start, notes=notes, offset=first, lead_in=lead, beats=beats
    )


def encode_song(tokenizer: Tokenizer, path: str | Path) -> list[int]:
    """A MIDI file's ids as the model saw its training songs: a REMI tokenizer takes the chords
    of a POP909 `chord_midi.txt` lying beside the file (as `prepare --dataset pop909` does);
    everything else is the tokenizer's own encoding (REMI: miditok's chord detection)."""
    from musicgen.tokenizers.chords import CHORD_FILE, read_chord_file
    from musicgen.tokenizers.remi import RemiTokenizer

    path = Path(path)
    annotation = path.parent / CHORD_FILE
    if isinstance(tokenizer, RemiTokenizer) and annotation.is_file():
        return tokenizer.encode(path, chords=read_chord_file(annotation))
    return tokenizer.encode(path)


def prompt_from_file(
    tokenizer: Tokenizer, path: str | Path, start: int = 0, end: int = 2
) -> Prompt:
    """Bars start..end-1 of a MIDI file, with the tempo where bar `start` begins."""
    path = Path(path)
    check_midi_path(path)
    prompt = prompt_from_ids(tokenizer, encode_song(tokenizer, path), start, end, where=str(path))
    prompt.tempo = tempo_at_bar(
        path, start, beats_per_bar(tokenizer), from_first_note=tokenizer.name == "groove"
    )
    return prompt


def music_prompt(tokenizer: Tokenizer, ids: list[int], bars: int) -> Prompt | None:
    """The first `bars` bars that hold music (leading empty bars skipped); None if too short.
    What `evaluate style` continues."""
    starts = tokenizer.bar_starts(np.asarray(ids, dtype=np.int64))
    if len(starts) <= bars:
        return None
    first = 0
    score = tokenizer.decode(ids)
    onsets = [n.time for t in score.tracks for n in t.notes]
    if onsets:
        beats = beats_per_bar(tokenizer)
        first = int(min(onsets) // bar_ticks(score.ticks_per_quarter, beats))
    for begin in dict.fromkeys((first, 0)):
        if begin + bars < len(starts):
            try:
                return prompt_from_ids(tokenizer, ids, begin, begin + bars)
            except MusicgenError:
                continue
    return None


def tempo_at_bar(
    path: str | Path, bar: int, beats: int = 4, from_first_note: bool = False
) -> float | None:
    """The tempo (qpm) in effect where bar `bar` begins on the tokenizer's grid: `beats` quarters
    per bar, whatever time signatures the file declares (the tokenizers ignore them), counted from
    tick 0 (REMI) or, with `from_first_note` (groove), from the bar of the first note."""
    score = symusic.Score(str(path))
    if len(score.tempos) == 0:
        return None
    length = bar_ticks(score.ticks_per_quarter, beats)
    origin = 0
    if from_first_note:
        onsets = [t.notes[0].time for t in score.tracks if len(t.notes)]
        origin = min(onsets) // length * length if onsets else 0
    tick = origin + bar * length
    qpm = score.tempos[0].qpm
    for t in score.tempos:
        if t.time <= tick:
            qpm = t.qpm
    return float(qpm)


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
    file does (second rule in the module docstring); in place."""
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


def _track_key(track) -> tuple:
    return (track.name, track.program, track.is_drum)


def merge(prompt: Prompt, generated: symusic.Score) -> symusic.Score:
    """The prompt's notes, then the generated notes from bar N+1 on (the overlap rule above)."""
    if generated.ticks_per_quarter != prompt.notes.ticks_per_quarter:
        generated = generated.resample(prompt.notes.ticks_per_quarter)
    cut = prompt.end_tick
    out = generated.copy()
    sources = {_track_key(t): t for t in prompt.notes.tracks}
    for track in out.tracks:
        own = sources.pop(_track_key(track), None)
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
    """The notes from bar N+1 on, moved to start at bar 0."""
    cut = prompt.end_tick
    return only_notes(merged, lambda n: n.time >= cut).shift_time(-cut)
