"""Size limits of one song, checked on the parsed score BEFORE any expensive work.

A 45-byte MIDI file can hold one note after a delta time of 2**28 ticks: 67 million bars at one
tick per beat. Tokenizing it needs gigabytes, drawing its bar lines takes hours. The length of a
piece follows from its end tick, its ticks per beat and its time signatures (and its tempos for
the duration) in O(events), so every reader refuses such a file with a reason first.
Defaults: 4096 bars, 90 minutes, 1,000,000 tokens (the longest file of the bundled POP909,
ASAP/Maestro and GiantMIDI sets has 922 bars; the longest lasts 31 minutes).
`musicgen prepare --max-bars/--max-minutes/--max-tokens` changes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from musicgen.errors import MusicgenError

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
