"""Chord progressions from the user (`Progression`): chord symbols or Harte labels in a string,
a POP909 `chord_midi.txt`, or the chords the tokenizer detects in a MIDI file; each chord read
by the one Harte parser (`tokenizers.chords.parse_harte`). `controls.chord_plan` plans them."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.io import Unreadable, read_regular
from musicgen.limits import MAX_CHORD_FILE_BYTES, MAX_CHORD_TEXT, MAX_NEW_BARS
from musicgen.tokenizers.base import Tokenizer
from musicgen.tokenizers.chords import (
    CHORD_FILE,
    HarteChord,
    chord_changes,
    parse_harte,
    read_chord_file,
    symbol_to_harte,
)

ACCEPTED = (
    "chord symbols (C, Am, G7, Fmaj7, Bdim, Esus4, F#m7b5, C/E), Harte labels (A:min7, "
    "F#:maj/3) or N (no chord); bars separated by '|', 1, 2 or 4 chords per bar, 'xN' at the "
    "end of a line (or on its own) repeats the line, inside a line the bar it ends"
)
NO_CHORD_TOKENS = "chords: this model's tokenizer has no chord tokens"
NO_BARS = (
    "chords: this model reads performances (its bars are 4 beats of the file's tempo, e.g. "
    "2-second windows, not bars of a score) and was not trained with chords; chord control "
    "is for the pop models"
)
_REPEAT = re.compile(r"^x(\d+)$")
PER_BAR = (1, 2, 4)  # chords a '|' bar may hold: whole, half or quarter bars
MAX_PROGRESSION_BARS = MAX_NEW_BARS  # a progression longer than a piece may be is never used


@dataclass(frozen=True)
class Slot:
    """A chord given at `onset` (fraction of the bar, 0 = the downbeat); chord None = `N`."""

    onset: float
    chord: HarteChord | None
    label: str


@dataclass(frozen=True)
class Progression:
    """Chords per bar. `repeat`: cycle over the bars (a user's progression); else the bars after
    the last are free. `strict`: a chord no token quality fits is an error (a user's symbol),
    else it ends the chord like `N` (annotations, as the tokenizer reads them). `song`: its
    bars are a song's, counted from the file's time 0 (a chord file or a MIDI file's chords),
    not from the first bar written."""

    bars: tuple[tuple[Slot, ...], ...]  # an empty bar: the chord before it holds
    repeat: bool = True
    strict: bool = True
    song: bool = False

    def bar(self, k: int) -> tuple[Slot, ...] | None:
        """The slots of bar k (None past the end of a progression that does not repeat)."""
        if self.repeat:
            return self.bars[k % len(self.bars)]
        return self.bars[k] if k < len(self.bars) else None

    def from_bar(self, k: int) -> Progression:
        """The progression from its bar k on (a repeating one rotated), its first bar opening
        with the chord that sounds there (held from an earlier bar), e.g. a song's chords after
        a prompt's bars."""
        if k == 0:
            return self
        bars = list(self.bars)
        if self.repeat:
            k %= len(bars)
            bars = bars[k:] + bars[:k]
            held = self.sounding(len(self.bars) + k)  # a full cycle back fixes the hold
        else:
            held, bars = self.sounding(k), bars[k:]
        if bars and held is not None and not (bars[0] and bars[0][0].onset == 0):
            bars[0] = (Slot(0.0, held.chord, held.label), *bars[0])
        return Progression(tuple(bars), self.repeat, self.strict, self.song)

    def sounding(self, k: int) -> Slot | None:
        """The slot sounding on bar k's downbeat: the last one given at or before it."""
        for b in range(k, -1, -1):
            slots = self.bar(b) or ()
            before = [s for s in slots if b < k or s.onset == 0]
            if before:
                return before[-1]
        return None

    def labels(self) -> list[str]:
        """One string per bar, e.g. ['C', 'G', 'Am F'] ('-' for a bar whose chord holds)."""
        return [" ".join(s.label for s in bar) or "-" for bar in self.bars]


# --- reading progressions ------------------------------------------------------------------------


def read_chord(symbol: str) -> Slot:
    """One symbol or Harte label as a downbeat slot; an unknown one is a one-line error."""
    label = symbol if ":" in symbol or symbol in ("N", "X") else symbol_to_harte(symbol)
    try:
        chord = parse_harte(label) if label is not None else None
    except MusicgenError:
        label = None
    if label is None:
        hint = ""
        if re.fullmatch(r"[A-Za-z]:[A-G].*", symbol):  # 'A:C G': a section's chords, unspaced
            hint = f"; for a section's chords put a space after the colon ('{symbol[:2]} ...')"
        raise MusicgenError(f"chords: unknown chord '{symbol}' (give {ACCEPTED}){hint}")
    return Slot(0.0, chord, symbol)


def _bar(symbols: list[str], n: int) -> tuple[Slot, ...]:
    if len(symbols) not in PER_BAR:
        raise MusicgenError(
            f"chords: bar {n} has {len(symbols)} chords; give 1, 2 or 4 per bar (or one per "
            "bar without '|')"
        )
    return tuple(
        Slot(k / len(symbols), s.chord, s.label)
        for k, s in enumerate(read_chord(x) for x in symbols)
    )


def parse_progression(text: str | Sequence[str]) -> Progression:
    """`"C G Am F"` (one chord a bar), `"C | G | Am F | F x2 | G"` (bars between '|', 1, 2 or 4
    chords splitting a bar evenly), or a list with one bar's text per item. `xN` repeats (N
    times in all): at the end of a line (its last word, no '|' after it) or on its own (a
    word without '|', a bar of its own with '|', an item of a list) the line before it, every
    bar since the line began or since the last such `xN` (`"Am F C G x2"`, `"Am | F | C | G
    x2"`: the four bars twice), as a chord chart's `x2` does; inside a line (`"Am x2 | F"`,
    `"C | G x3 |"`) the bar it ends. A new line (a newline) begins a new line to repeat (a
    line that is only `xN` repeats the line above it). An
    empty bar (`"C | | G"`, `""` in a list) keeps its place: no chord is forced there, the one
    before it holds. The result repeats over the bars it is asked for; at most
    `MAX_PROGRESSION_BARS` bars, checked before any bar is built."""
    bars: list[tuple[Slot, ...]] = []
    line = 0  # where the line that a lone `xN` repeats begins
    for groups in _lines(text):
        if groups and not all(_REPEAT.match(w) for w in groups[0].split()):
            line = len(bars)  # a line of its own `xN` repeats the line above it
        for group in groups:
            line = _add_group(bars, group, line)
    if not any(bars):
        raise MusicgenError(f"chords: empty progression (give {ACCEPTED})")
    return Progression(tuple(bars), repeat=True, strict=True)


def _add_group(bars: list[tuple[Slot, ...]], group: str, line: int) -> int:
    """Add one bar's text (with its `xN`) or a lone `xN` to `bars`; returns where the line to
    repeat now begins (after a lone `xN`, the next bar)."""
    words = group.split()
    repeats = [_times(w) for w in words if _REPEAT.match(w)]
    words = [w for w in words if not _REPEAT.match(w)]
    if not words and repeats:
        if len(bars) == line:
            shown = " ".join(group.split())[:24]
            raise MusicgenError(f"chords: '{shown}' repeats no bar (write it after a chord)")
        for times in repeats:
            _grow(bars, bars[line:], times - 1)
        return len(bars)
    _grow(bars, [_bar(words, len(bars) + 1) if words else ()], 1)
    for times in repeats:
        _grow(bars, bars[-1:], times - 1)
    return line


def _lines(text: str | Sequence[str]) -> list[list[str]]:
    """The progression's lines, each as its bars' texts (`_groups`); a line ending in `xN` (no
    '|' after it) has that `xN` as a bar of its own, so that it repeats the whole line."""
    if not isinstance(text, str):
        return [_groups(text)]
    if len(text) > MAX_CHORD_TEXT:
        raise MusicgenError(
            f"chords: {len(text):,} characters, over the limit of {MAX_CHORD_TEXT:,}"
        )
    out = []
    for row in text.splitlines() or [""]:
        groups = _groups(row)
        last = groups[-1].split() if groups else []
        if "|" in row and not row.rstrip().endswith("|") and len(last) > 1:
            if _REPEAT.match(last[-1]) and not _REPEAT.match(last[0]):
                groups[-1:] = [" ".join(last[:-1]), last[-1]]
        out.append(groups)
    return out


def _groups(text: str | Sequence[str]) -> list[str]:
    """The bars of one line of a progression's text: '|'-separated (one leading and one
    trailing '|' are frame, not empty bars), else one word each; a list's items as they are."""
    if isinstance(text, str):
        if "|" not in text:
            return text.split()
        groups = text.split("|")
        if len(groups) > 1 and not groups[0].strip():
            groups = groups[1:]
        if len(groups) > 1 and not groups[-1].strip():
            groups = groups[:-1]
        return groups
    items = [str(item) for item in text]
    if len(items) > MAX_PROGRESSION_BARS or sum(len(x) for x in items) > MAX_CHORD_TEXT:
        raise MusicgenError(
            f"chords: {len(items):,} bars, over the limit of {MAX_PROGRESSION_BARS:,} bars"
        )
    return items


def _times(word: str) -> int:
    """N of an `xN`, 1..MAX_PROGRESSION_BARS, refused from its digits before a huge number
    (`x99999999999999999999`) is built or used."""
    digits = _REPEAT.match(word).group(1).lstrip("0")
    if not digits:
        raise MusicgenError(f"chords: '{word}' repeats no bar (N of xN must be >= 1)")
    if len(digits) > len(str(MAX_PROGRESSION_BARS)) or int(digits) > MAX_PROGRESSION_BARS:
        shown = word if len(word) <= 24 else word[:20] + "..."
        raise MusicgenError(
            f"chords: '{shown}' asks for more bars than the limit of {MAX_PROGRESSION_BARS:,} "
            "(the most a piece may have)"
        )
    return int(digits)


def _grow(bars: list, block: list, copies: int) -> None:
    """`copies` more copies of `block` at the end of `bars`; refused first when the progression
    would pass `MAX_PROGRESSION_BARS`."""
    total = len(bars) + len(block) * copies
    if total > MAX_PROGRESSION_BARS:
        raise MusicgenError(
            f"chords: the progression would have {total:,} bars, over the limit of "
            f"{MAX_PROGRESSION_BARS:,} (the most bars a piece may have)"
        )
    bars.extend(list(block) * copies)


def progression_from_chord_file(
    path: str | Path, midi: str | Path | None = None, positions_per_beat: int = 4
) -> Progression:
    """A POP909 `chord_midi.txt` as the tokenizer places its chords: each line's start through
    the MIDI's tempo map (`midi`, default: the one .mid beside the file), on the grid of
    `positions_per_beat`, bar = 4 beats from the song's time 0."""
    import symusic

    path = Path(path)
    spans = read_chord_file(path)
    if midi is None:
        mids = sorted(path.parent.glob("*.mid"))
        if len(mids) != 1:
            raise MusicgenError(
                f"{path}: needs its MIDI file for the tempo map (found {len(mids)} .mid beside it)"
            )
        midi = mids[0]
    try:
        score = symusic.Score(str(midi))
    except Exception as exc:  # symusic raises plain RuntimeError / ValueError on bad files
        raise MusicgenError(f"{midi}: cannot read MIDI ({exc})") from None
    per_bar = 4 * positions_per_beat
    changes = chord_changes(score, spans, positions_per_beat)
    n_bars = max((g // per_bar for g, _ in changes), default=-1) + 1
    if n_bars > MAX_PROGRESSION_BARS:
        raise MusicgenError(
            f"{path}: its last chord falls in bar {n_bars:,} of {midi}'s tempo map, past the "
            f"limit of {MAX_PROGRESSION_BARS:,} bars"
        )
    bars: list[list[Slot]] = [[] for _ in range(n_bars)]
    for g, label in changes:
        bars[g // per_bar].append(Slot((g % per_bar) / per_bar, parse_harte(label), label))
    if not any(s.chord for bar in bars for s in bar):
        raise MusicgenError(f"{path}: no chord in the annotation")
    return Progression(tuple(tuple(b) for b in bars), repeat=False, strict=False, song=True)


def progression_from_midi(path: str | Path, tokenizer: Tokenizer) -> Progression:
    """The chords the tokenizer's own detection (miditok's) finds in a MIDI file, at their bars.
    Detection sees only notes struck together in root position: most songs give few chords."""
    _check_chords(tokenizer)
    from miditok.constants import CHORD_MAPS

    ids = tokenizer.encode(path)
    events = chord_events(tokenizer, ids)
    if not events:
        raise MusicgenError(f"{path}: the tokenizer's chord detection finds no chord in it")
    per_bar = tokenizer.time_tables().positions_per_bar
    bars: list[list[Slot]] = [[] for _ in range(events[-1][0] + 1)]
    for bar, pos, tok in events:
        root, quality = tokenizer.tables.chord[tok]
        chord = HarteChord(root, tuple(int(i) % 12 for i in CHORD_MAPS[quality]), root)
        name = tokenizer.token_name(tok).removeprefix("Chord_")
        bars[bar].append(Slot(pos / per_bar, chord, name))
    return Progression(tuple(tuple(b) for b in bars), repeat=False, strict=False, song=True)


def load_progression(spec, tokenizer: Tokenizer, where: str = "chords") -> Progression:
    """What `chords=` / `--chords` accept: a Progression, a list of bars, a path to a .mid or a
    chord_midi.txt, or a progression string."""
    if isinstance(spec, Progression):
        return spec
    if isinstance(spec, Path) or (isinstance(spec, str) and looks_like_file(spec)):
        path = Path(spec)
        check_chord_path(path, where)
        if path.suffix.lower() in (".mid", ".midi"):
            return progression_from_midi(path, tokenizer)
        per_beat = tokenizer.time_tables().positions_per_beat
        return progression_from_chord_file(path, positions_per_beat=per_beat)
    if isinstance(spec, str) or (
        isinstance(spec, (list, tuple)) and all(isinstance(x, str) for x in spec)
    ):
        return parse_progression(spec)
    raise MusicgenError(f"{where}: give a string, a list of chord symbols or a file path")


MAX_CHORD_MIDI_BYTES = 10 << 20  # a .mid read for its chords: `prepare`'s default size limit


def check_chord_path(path: Path, where: str = "chords") -> bytes:
    """The bytes of a chord file (a chord_midi.txt or a .mid); one that is missing, a folder,
    a FIFO, a device (a link to /dev/zero), a link loop or too large is a one-line error
    saying which, before anything else is read."""
    if not os.path.lexists(path):
        raise MusicgenError(f"{where}: {path}: file not found")
    midi = path.suffix.lower() in (".mid", ".midi")
    limit = MAX_CHORD_MIDI_BYTES if midi else MAX_CHORD_FILE_BYTES
    try:
        return read_regular(path, limit, "a MIDI file" if midi else "a chord file")
    except Unreadable as exc:
        raise MusicgenError(f"{where}: {path}: {exc}") from None


def looks_like_file(text: str) -> bool:
    return text.lower().endswith((".mid", ".midi", ".txt")) or Path(text).name == CHORD_FILE


def chord_events(tokenizer: Tokenizer, ids: Sequence[int]) -> list[tuple[int, int, int]]:
    """(bar, position, chord id) of every Chord token in a REMI id sequence (bar 0 = first), read
    through the tokenizer's musical time (`time_tables`) and its `chord_mask`."""
    arr = np.asarray(ids, dtype=np.int64)
    times = tokenizer.time_tables()
    onsets, per_bar = times.onsets(arr), times.positions_per_bar
    return [
        (int(onsets[k] // per_bar), int(onsets[k] % per_bar), int(arr[k]))
        for k in np.flatnonzero(tokenizer.chord_mask()[arr])
    ]


def chords_unsupported(tokenizer: Tokenizer) -> str | None:
    """Why this model takes no `chords=` (the message), or None where it does: a tokenizer
    without chord tokens (groove), or a performance tokenizer (the expressive REMI, pedal
    folded: its bars are 4 beats of the file's tempo, 2-second windows of MAESTRO's 120 bpm
    files, not bars of a score, and its training data hold no annotated chords)."""
    chord_mask = getattr(tokenizer, "chord_mask", None)  # the control interface (REMI)
    if chord_mask is None or not chord_mask().any():
        return NO_CHORD_TOKENS
    if getattr(tokenizer, "options", {}).get("fold_pedal"):
        return NO_BARS
    return None


def _check_chords(tokenizer: Tokenizer) -> None:
    reason = chords_unsupported(tokenizer)
    if reason is not None:
        raise MusicgenError(reason)
