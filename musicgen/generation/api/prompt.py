"""The one prompt builder: bars of a song as the model is fed them, and as they must come back.

`musicgen continue`, the demo, the Python API and `evaluate style` all build their prompts here,
so a 2-bar prompt means the same ids everywhere: `bars=N` is the first N bars that hold music (a
pickup joins the first bar), `prompt_bars=(S, E)` exactly bars S..E-1. A prompt of N bars is fed
as BOS, its ids and the ids that carry time to the next bar line, so the model writes from bar
N+1 on; the written score holds the prompt's notes as the tokenizer reads them and never lets a
continuation note cut one. Prompts in seconds (`prompt_from_seconds`) cut on the tokenizer's
grid and restrict the first sampled id (`Prompt.first_allowed`). The rules in full:
docs/generation.md, "Which bars a prompt holds" and "Prompts in seconds". What comes back (the
prompt's notes with the continuation: `merge`, `continuation_only`) is in `prompt_merge.py`, the
prompt's tempo in `prompt_tempo.py`; both re-exported here.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import symusic

from musicgen.errors import MusicgenError, check_int, check_range
from musicgen.generation.api.chord_marks import file_chords
from musicgen.generation.api.prompt_merge import (  # noqa: F401 (re-exported: what comes back)
    continuation_only,
    merge,
    midi_pairing,
    only_notes,
)
from musicgen.generation.api.prompt_tempo import (  # noqa: F401 (re-exported: the prompt's tempo)
    DEFAULT_QPM,
    PROMPT_QPM,
    bar_ticks,
    prompt_tempo,
    tempo_at_bar,
)
from musicgen.generation.api.written import with_markers
from musicgen.limits import MAX_NEW_BARS, PROMPT_SECONDS
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
    cut_tick: int | None = None  # a cut inside a bar (seconds), in ticks of `notes`
    # bool[vocab]: the ids the first sampled id may be (a cut inside a bar); None = any
    first_allowed: np.ndarray | None = field(default=None, repr=False, compare=False)
    solo_lead: list[int] = field(default_factory=list)  # opens the continuation written alone
    first_bar: int = 0  # the song's bar (from its first bar line) where the prompt begins
    chords: list = field(default_factory=list)  # the file's chord markers it holds (`notes` ticks)

    @property
    def end_tick(self) -> int:
        """Where the continuation starts, in ticks of `notes`."""
        if self.cut_tick is not None:
            return self.cut_tick
        return self.bars * bar_ticks(self.notes.ticks_per_quarter, self.beats)

    @property
    def bar_line_tick(self) -> int:
        """The bar line at or before the cut (where `--continuation-only` puts time 0)."""
        length = bar_ticks(self.notes.ticks_per_quarter, self.beats)
        return self.end_tick // length * length


def beats_per_bar(tokenizer: Tokenizer) -> int:
    """Beats per bar of the tokenizer's grid (both tokenizers ignore time signatures: 4/4)."""
    return int(getattr(tokenizer, "options", {}).get("beats_per_bar", 4))


def midi_path(path, where: str = "path") -> Path:
    """`path` (a str or a path object) as a Path; anything else (bytes, None, a number) is a
    one-line error naming the parameter `where`."""
    if isinstance(path, bool) or not isinstance(path, (str, os.PathLike)):
        raise MusicgenError(f"{where}: must be a MIDI file's path (str or Path), got {path!r:.60}")
    if isinstance(os.fspath(path), bytes):
        raise MusicgenError(f"{where}: must be a MIDI file's path (str or Path), got {path!r:.60}")
    return Path(path)


def check_midi_path(path: Path) -> None:
    """A prompt file that exists, is no folder, is not empty and is not a type-2 MIDI file
    (whose tracks are independent sequences, one after the other, not parts that sound
    together: reading them as one piece would be silently wrong)."""
    if not path.exists():
        raise MusicgenError(f"{path}: prompt file not found")
    if path.is_dir():
        raise MusicgenError(f"{path}: is a directory, not a MIDI file")
    if path.stat().st_size == 0:
        raise MusicgenError(f"{path}: empty file (not a MIDI file)")
    check_midi_format(path)


def check_midi_format(path: Path) -> None:
    """Refuse a type-2 MIDI file (header format 2): its tracks are separate sequences."""
    if not path.is_file():
        return  # a FIFO or device: left to the reader, which names it
    with open(path, "rb") as fh:
        head = fh.read(14)
    if head[:4] == b"MThd" and len(head) >= 10 and int.from_bytes(head[8:10], "big") == 2:
        raise MusicgenError(
            f"{path}: a type-2 MIDI file (its tracks are independent sequences, not parts "
            "played together); save it as type 0 or 1, or one sequence per file"
        )


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
    beats = beats_per_bar(tokenizer)
    notes = _notes_before(tokenizer, ids[first:], (end - start) * beats, 1)
    lead = _lead_in(tokenizer)
    return Prompt(
        ids=body + lead,
        bars=end - start,
        notes=notes,
        offset=first,
        lead_in=lead,
        beats=beats,
        solo_lead=lead,
    )


def _notes_before(tokenizer: Tokenizer, ids: list[int], cut: int, per_quarter: int):
    """The notes of `ids` (a song from a bar line on) starting before `cut / per_quarter`
    quarters, with their real ends: decoded from the cut to the end of the song."""
    tail = _valid_run(tokenizer, ids)
    grammar = tokenizer.grammar()
    for tok in tail:
        grammar.advance(tok)
    whole = tokenizer.decode(tail + grammar.completion())
    tick = cut * whole.ticks_per_quarter // per_quarter
    return midi_pairing(only_notes(whole, lambda n: n.time < tick))


def prompt_until(tokenizer: Tokenizer, ids: list[int], cut: int) -> Prompt:
    """The ids of a song before grid position `cut` (sub-beats from its first bar line), fed so
    that the model writes from `cut` on (rule in the module docstring; REMI)."""
    ids = [int(t) for t in ids]
    tables = tokenizer.time_tables()
    onsets = tables.onsets(np.asarray(ids, dtype=np.int64))  # [N] sub-beats
    later = np.flatnonzero(onsets >= cut)
    body = _valid_run(tokenizer, ids[: int(later[0]) if len(later) else len(ids) - 1])
    bar, inside = divmod(int(cut), tables.positions_per_bar)
    opened = len(tokenizer.bar_starts(np.asarray(body, dtype=np.int64)))
    lead = _lead_in(tokenizer) * (bar + 1 - opened)  # a cut past the song's last Bar token
    first_allowed = None
    if inside:
        first_allowed = (tables.position >= inside) | (tables.bar == 1)  # [vocab]
        first_allowed[tokenizer.eos_id] = True
    notes = _notes_before(tokenizer, ids, int(cut), tables.positions_per_beat)
    return Prompt(
        ids=body + lead,
        bars=bar + (1 if inside else 0),
        notes=notes,
        lead_in=lead,
        beats=beats_per_bar(tokenizer),
        cut_tick=int(cut) * notes.ticks_per_quarter // tables.positions_per_beat,
        first_allowed=first_allowed,
        solo_lead=_lead_in(tokenizer),
    )


def check_seconds(option: str, seconds) -> float:
    """A prompt length in seconds: a finite number > 0 (`limits.PROMPT_SECONDS`; the file's
    length bounds it too)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise MusicgenError(f"{option}: must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds):
        raise MusicgenError(f"{option}: must be a finite number of seconds, got {seconds}")
    check_range(option, seconds, 0, low_open=True)
    return float(check_range(option, seconds, None, PROMPT_SECONDS.high))


CUT_TOLERANCE_S = 1e-3  # MIDI stores whole microseconds per quarter: 117 bpm is 117.000117


def cut_at_seconds(score: symusic.Score, seconds: float, per_beat: int) -> int:
    """The first grid position (sub-beats from tick 0, `per_beat` to a quarter) at or after
    `seconds` (less `CUT_TOLERANCE_S`), through the score's tempo map."""
    from musicgen.tokenizers.chords import seconds_to_ticks

    ticks = float(seconds_to_ticks(score, np.array([seconds - CUT_TOLERANCE_S]))[0])
    return math.ceil(ticks * per_beat / score.ticks_per_quarter)


def span_seconds(score: symusic.Score) -> tuple[float, float]:
    """(first note onset, end of the file: its last note, pedal or other event) in seconds."""
    score = score.to("second")
    onsets = [t.notes[0].time for t in score.tracks if len(t.notes)]
    return min(onsets, default=0.0), float(score.end())


def prompt_from_seconds(
    tokenizer: Tokenizer, path: str | Path, seconds: float, option: str = "seconds"
) -> Prompt:
    """The first `seconds` of a MIDI file (rule in the module docstring); `option` names the
    length in errors."""
    seconds = check_seconds(option, seconds)
    path = midi_path(path)
    check_midi_path(path)
    if tokenizer.name != "remi":
        raise MusicgenError(
            f"{option}: a prompt in seconds needs a REMI tokenizer (this model's is "
            f"'{tokenizer.name}'); give bars"
        )
    score = tokenizer.load_score(path)
    first, last = span_seconds(score)
    if seconds > last:
        raise MusicgenError(f"{option}: {seconds:g} s is longer than {path} ({last:.2f} s)")
    per_beat = tokenizer.time_tables().positions_per_beat
    cut = cut_at_seconds(score, seconds, per_beat)
    prompt = prompt_until(tokenizer, encode_song(tokenizer, path), cut)
    if prompt.notes.note_num() == 0:
        raise MusicgenError(
            f"{option}: no note starts in the first {seconds:g} s of {path} "
            f"(the first at {first:.2f} s)"
        )
    prompt.tempo = prompt_tempo(path, 0, beats_per_bar(tokenizer))
    prompt.chords = file_chords(path, 0, prompt.notes.ticks_per_quarter, prompt.end_tick)
    return prompt


def encode_song(tokenizer: Tokenizer, path: str | Path) -> list[int]:
    """A MIDI file's ids as the model saw its training songs: a REMI tokenizer takes the chords
    of a POP909 `chord_midi.txt` lying beside the file (as `prepare --dataset pop909` does);
    everything else is the tokenizer's own encoding (REMI: miditok's chord detection)."""
    from musicgen.tokenizers.chords import CHORD_FILE, read_chord_file
    from musicgen.tokenizers.remi import RemiTokenizer

    path = Path(path)
    annotation = path.parent / CHORD_FILE
    if isinstance(tokenizer, RemiTokenizer) and annotation.is_file():
        ids = tokenizer.encode(path, chords=read_chord_file(annotation))
    else:
        ids = tokenizer.encode(path)
    return with_markers(tokenizer, ids, path)


def check_bar_range(prompt_bars) -> tuple[int, int]:
    """`prompt_bars`: (start, end), whole numbers with 0 <= start < end (the song's length
    bounds them: nothing is allocated per bar asked)."""
    if isinstance(prompt_bars, (str, bytes)) or not hasattr(prompt_bars, "__len__"):
        raise MusicgenError(f"prompt_bars: must be (start, end), got {prompt_bars!r}")
    if len(prompt_bars) != 2:
        raise MusicgenError(f"prompt_bars: must be (start, end), got {prompt_bars!r}")
    start, end = (check_int("prompt_bars", v) for v in prompt_bars)
    if start < 0 or end <= start:
        raise MusicgenError(f"prompt_bars: need 0 <= START < END, got {start}:{end}")
    return start, end


def music_start(tokenizer: Tokenizer, ids: list[int], where: str) -> tuple[int, bool]:
    """(the first bar that holds a note, whether it is a pickup): a first bar whose first note
    starts in its second half (beat 3 or later of 4) leads into the bar after it."""
    score = tokenizer.decode(ids)
    onsets = [n.time for t in score.tracks for n in t.notes]
    if not onsets:
        raise MusicgenError(f"{where}: holds no notes that the {tokenizer.name} tokenizer reads")
    length = bar_ticks(score.ticks_per_quarter, beats_per_bar(tokenizer))
    first = int(min(onsets))
    return first // length, first % length >= length // 2


def bars_with_music(
    tokenizer: Tokenizer,
    ids: list[int],
    where: str = "prompt",
    start: tuple[int, bool] | None = None,
) -> int:
    """The most bars a `bars=N` prompt may ask of a song: its bars from the first that holds a
    note (a pickup's bar not counted as a bar of its own), the count `select_bars` checks N
    against, so that a caller asking for a whole song asks for what the rule will find.
    `start`: `music_start`'s answer where the caller has it (each call decodes the song)."""
    first, pickup = music_start(tokenizer, ids, where) if start is None else start
    return len(tokenizer.bar_starts(np.asarray(ids, dtype=np.int64))) - first - int(pickup)


def select_bars(
    tokenizer: Tokenizer,
    ids: list[int],
    bars: int | None = None,
    prompt_bars: tuple[int, int] | None = None,
    where: str = "prompt",
) -> Prompt:
    """THE prompt rule for bars of a song's ids (`where` names it in errors).

    `bars=N` (default 2): the first N bars that hold music: leading silent bars are skipped and
    a pickup (`music_start`) joins the first bar, so the prompt is the pickup's bar and N more.
    `prompt_bars=(start, end)`: exactly bars start..end-1 counted from the song's first bar line.
    A prompt without a note is an error."""
    ids = [int(t) for t in ids]
    if prompt_bars is not None:
        start, end = check_bar_range(prompt_bars)
    else:
        n = check_int("bars", 2 if bars is None else bars, 1, MAX_NEW_BARS)
        first, pickup = music_start(tokenizer, ids, where)
        start, end = first, first + n + int(pickup)
        have = bars_with_music(tokenizer, ids, where, (first, pickup))
        if have < n:
            after = "after its pickup" if pickup else "from its first note on"
            raise MusicgenError(f"{where}: has {have} bars, fewer than the {n} asked ({after})")
    prompt = prompt_from_ids(tokenizer, ids, start, end, where)
    if prompt.notes.note_num() == 0:
        raise MusicgenError(f"{where}: bars {start}:{end} hold no notes; nothing to continue")
    prompt.first_bar = start
    return prompt


def load_prompt(
    tokenizer: Tokenizer,
    path: str | Path,
    bars: int | None = None,
    prompt_bars: tuple[int, int] | None = None,
    seconds: float | None = None,
) -> Prompt:
    """The prompt of a MIDI file: `bars` or `prompt_bars` (`select_bars`) or its first
    `seconds` (`prompt_from_seconds`), one of them; with the tempo where the prompt begins.
    Every caller (`continue`, the API, the demo, `evaluate style`) builds its prompt here."""
    lengths = {"bars": bars, "prompt_bars": prompt_bars, "seconds": seconds}
    given = [k for k, v in lengths.items() if v is not None]
    if len(given) > 1:
        raise MusicgenError(f"{given[0]} and {given[1]}: give one of them, not both")
    if seconds is not None:
        return prompt_from_seconds(tokenizer, path, seconds, "seconds")
    if prompt_bars is not None:
        check_bar_range(prompt_bars)
    check_int("bars", bars, 1, MAX_NEW_BARS)
    path = midi_path(path)
    check_midi_path(path)
    ids = encode_song(tokenizer, path)
    prompt = select_bars(tokenizer, ids, bars, prompt_bars, where=str(path))
    prompt.tempo = prompt_tempo(
        path, prompt.first_bar, beats_per_bar(tokenizer), tokenizer.name == "groove"
    )
    tpq = prompt.notes.ticks_per_quarter
    prompt.chords = file_chords(path, prompt.first_bar, tpq, prompt.end_tick)
    return prompt
