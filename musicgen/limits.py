"""Size limits of one song, checked on the parsed score BEFORE any expensive work.

A 45-byte MIDI file can hold one note after a delta time of 2**28 ticks: 67 million bars at one
tick per beat. Tokenizing it needs gigabytes, drawing its bar lines takes hours. The length of a
piece follows from its end tick, its ticks per beat and its time signatures (and its tempos for
the duration) in O(events), so every reader refuses such a file with a reason first.
Defaults: 4096 bars, 90 minutes, 1,000,000 tokens (the longest file of the bundled POP909,
ASAP/Maestro and GiantMIDI sets has 922 bars; the longest lasts 31 minutes).
`musicgen prepare --max-bars/--max-minutes/--max-song-tokens` changes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from musicgen.errors import MusicgenError, check_int, check_number

MAX_BARS = 4096
MAX_MINUTES = 90.0
MAX_TOKENS = 1_000_000


@dataclass(frozen=True)
class Limits:
    max_bars: int = MAX_BARS
    max_minutes: float = MAX_MINUTES
    max_tokens: int = MAX_TOKENS


def score_bars(score) -> float:
    """Bars from tick 0 to the score's end tick, following its time signatures (4/4 before
    the first)."""
    tpq = score.ticks_per_quarter
    end = int(score.end())
    sigs = sorted((int(ts.time), ts.numerator, ts.denominator) for ts in score.time_signatures)
    sigs = [s for s in sigs if s[0] < end and s[1] > 0 and s[2] > 0]
    if not sigs or sigs[0][0] > 0:
        sigs.insert(0, (0, 4, 4))
    bars = 0.0
    for k, (start, num, den) in enumerate(sigs):
        stop = sigs[k + 1][0] if k + 1 < len(sigs) else end
        bars += (stop - start) / (tpq * 4 * num / den)
    return bars


def score_minutes(score) -> float:
    """Duration in minutes, following the tempo changes (120 qpm before the first)."""
    tpq = score.ticks_per_quarter
    end = int(score.end())
    tempos = sorted((int(t.time), float(t.qpm)) for t in score.tempos)
    tempos = [t for t in tempos if t[0] < end and t[1] > 0]
    if not tempos or tempos[0][0] > 0:
        tempos.insert(0, (0, 120.0))
    minutes = 0.0
    for k, (start, qpm) in enumerate(tempos):
        stop = tempos[k + 1][0] if k + 1 < len(tempos) else end
        minutes += (stop - start) / tpq / qpm
    return minutes


def check_score(score, where: str, limits: Limits = Limits()) -> None:
    """MusicgenError naming `where` if the score is too long to handle (or has no time unit)."""
    if "Tick" not in str(getattr(score, "ttype", "Tick")):
        score = score.to("tick")
    if score.ticks_per_quarter < 1:
        raise MusicgenError(f"{where}: the header gives {score.ticks_per_quarter} ticks per beat")
    bars = score_bars(score)
    if bars > limits.max_bars:
        raise MusicgenError(
            f"{where}: too long ({bars:,.0f} bars > the limit of {limits.max_bars:,}; the last "
            f"event is at tick {int(score.end()):,} with {score.ticks_per_quarter} ticks per beat)"
        )
    minutes = score_minutes(score)
    if minutes > limits.max_minutes:
        raise MusicgenError(
            f"{where}: too long ({minutes:,.1f} minutes > the limit of {limits.max_minutes:g})"
        )
    notes = sum(len(t.notes) for t in score.tracks)
    if notes > limits.max_tokens:  # every note is at least one token
        raise MusicgenError(
            f"{where}: too many notes ({notes:,}) for the limit of {limits.max_tokens:,} tokens"
        )


def check_tokens(n_tokens: int, where: str, limits: Limits = Limits()) -> None:
    if n_tokens > limits.max_tokens:
        raise MusicgenError(
            f"{where}: too many tokens ({n_tokens:,} > the limit of {limits.max_tokens:,})"
        )


# What one generation call may ask for, checked before anything is sampled: `generate(bars=10**9)`
# would run for 900,000 hours. A piece is held to the bars a song may have, and its sampled ids
# to the tokens a song may have.
MAX_NEW_BARS = MAX_BARS
MAX_NEW_TOKENS = MAX_TOKENS
MAX_BATCH = 1024  # sequences decoded together (each holds its own recurrent state)

# A chord annotation (POP909's chord_midi.txt is a few KB), read by `prepare` and at generation
# time: its size and its times (a line at 1e9 s would ask for 500 million bars).
MAX_CHORD_FILE_BYTES = 1 << 20
MAX_CHORD_SECONDS = MAX_MINUTES * 60
MAX_CHORD_TEXT = MAX_CHORD_FILE_BYTES  # characters of a progression given as text


# Every sampling number a user gives has ONE range, declared with its option
# (`generation.api.options`) and checked through `check_in_range`. The bounds keep
# the arithmetic finite: logits / 1e-300 and a bonus of 1e39 nats are inf in float32, and a
# top-p of 1e-300 is 0 there (nothing kept); such a value is refused, not sampled into NaN.
@dataclass(frozen=True)
class Range:
    """low <= value <= high (low < value when `low_open`); `zero`: 0 is allowed below `low`
    (a temperature of 0 = greedy); `integer`: a whole number; `note`: what a value means."""

    low: float | None
    high: float | None
    low_open: bool = False
    zero: bool = False
    integer: bool = False
    note: str = ""


PROMPT_SECONDS = Range(0.0, MAX_MINUTES * 60, low_open=True)  # `seconds`: also <= the file


def check_in_range(where: str, value, rng: Range):
    """`value` checked against `rng`: a finite number (a whole one for an integer range; not a
    bool or string) inside it, else a one-line `MusicgenError` naming `where` and the range;
    None passes (not given)."""
    if rng.integer:
        value = check_int(where, value)
    else:
        value = check_number(where, value)
    if value is None or (rng.zero and value == 0):
        return value
    too_low = rng.low is not None and (value <= rng.low if rng.low_open else value < rng.low)
    if too_low or (rng.high is not None and value > rng.high):
        raise MusicgenError(f"{where}: must be {describe_range(rng)}, got {value:g}")
    return value


def describe_range(rng: Range) -> str:
    """The range in words: `0 (greedy) or >= 0.01 and <= 100`."""
    low = "" if rng.low is None else f"{'>' if rng.low_open else '>='} {rng.low:g}"
    high = "" if rng.high is None else f"<= {rng.high:g}"
    text = f"{low} and {high}" if low and high else low or high
    text = f"0 or {text}" if rng.zero else text
    return f"{text} ({rng.note})" if rng.note else text
