"""The checks of a generation call that need no model, made before anything is loaded or
sampled; messages name the API's parameters (`bars: must be >= 1, got 0`)."""

from __future__ import annotations

import secrets
from pathlib import Path

from musicgen.errors import SEED_MAX, MusicgenError, check_int
from musicgen.generation.progression import check_chord_path, looks_like_file, parse_progression
from musicgen.generation.sample import SamplingOptions
from musicgen.limits import MAX_BATCH, MAX_NEW_BARS, MAX_NEW_TOKENS

BAR_TOKEN_CAP = 512  # with `bars` and no `max_tokens`: at most this many sampled ids per bar
GENERATE_MAX_TOKENS = 2048  # `generate` without `bars` or `max_tokens`
CONTINUE_MAX_TOKENS = 1024  # `continue_midi` without `new_bars` or `max_tokens`


def pick_seed(seed: int | None) -> int:
    """The seed given (a whole number in 0..2**32-1), or a fresh one (printed and stored, so any
    piece can be made again)."""
    seed = check_int("seed", seed, 0, SEED_MAX)
    return seed if seed is not None else secrets.randbelow(2**31)


def _check_hooks(progress, cancel, grammar_wrap) -> None:
    if progress is not None and not callable(progress):
        raise MusicgenError(f"progress: must be a function progress(done, total), got {progress!r}")
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        raise MusicgenError(f"cancel: must have is_set() (a threading.Event), got {cancel!r}")
    if grammar_wrap is not None and not callable(grammar_wrap):
        raise MusicgenError(
            f"grammar_wrap: must be a function (grammar, ids), got {grammar_wrap!r}"
        )


def max_new_ids(
    bars: int | None, max_tokens: int | None, default: int, bars_name: str = "bars"
) -> int:
    """The most ids sampled after the prompt, per piece: `max_tokens`, else `BAR_TOKEN_CAP` per
    requested bar, else `default`; `bars` (named `bars_name`) and `max_tokens` checked against
    the limits."""
    check_int(bars_name, bars, 1, MAX_NEW_BARS)
    if max_tokens is not None:
        return check_int("max_tokens", max_tokens, 1, MAX_NEW_TOKENS)
    return min(BAR_TOKEN_CAP * bars, MAX_NEW_TOKENS) if bars is not None else default


def check_arguments(
    num: int = 1,
    bars: int | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    batch_size: int = 8,
    *,
    bars_name: str = "bars",
    chords=None,
    **sampling,
) -> None:
    """The checks of `Model.pieces` that need no model, so that a command can make them before
    it loads one: counts, lengths against the limits, the seed, the sampling options' types,
    a progression given as text (its repeats and length), `chord_tones` only with `chords`.
    `bars_name`: what the caller calls `bars` (`new_bars` for a continuation)."""
    for name, value, high in (("num", num, None), ("batch_size", batch_size, MAX_BATCH)):
        if check_int(name, value, 1, high) is None:
            raise MusicgenError(f"{name}: must be >= 1, got None")
    max_new_ids(bars, max_tokens, GENERATE_MAX_TOKENS, bars_name)
    pick_seed(0 if seed is None else seed)
    SamplingOptions().replace(**sampling)
    if sampling.get("chord_tones") is not None and chords is None:
        raise MusicgenError(
            "chord_tones: has an effect only with chords (a progression); give chords too, "
            "or leave chord_tones out"
        )
    if isinstance(chords, Path) or (isinstance(chords, str) and looks_like_file(chords)):
        check_chord_path(Path(chords))  # its kind and size; its chords once the model is loaded
    elif isinstance(chords, str) or _bar_list(chords):
        parse_progression(chords)  # the model's vocabulary is checked once it is loaded


def _bar_list(chords) -> bool:
    return isinstance(chords, (list, tuple)) and all(isinstance(x, str) for x in chords)
