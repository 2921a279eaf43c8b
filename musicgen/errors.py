"""One exception type for user-facing problems.

Anything raised as `MusicgenError` is printed by the CLI as a single line (`error: ...`) with a
non-zero exit code; every other exception is a bug and keeps its traceback.
"""

import math
import numbers


class MusicgenError(Exception):
    """A problem with the user's input (file, option, config, checkpoint), not with musicgen."""


SEED_MAX = 2**32 - 1  # numpy's and torch's seeds agree on this range


def check_range(where: str, value, low=None, high=None, *, low_open: bool = False):
    """`value` if low <= value <= high (low < value when `low_open`), else a one-line error
    that states the valid range; None passes (an unset option), NaN does not."""
    if value is None:
        return value
    if value != value:  # NaN compares false with every bound
        raise MusicgenError(f"{where}: must be a number, got {value}")
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and value > high
    if too_low or too_high:
        lo = "" if low is None else f"{'>' if low_open else '>='} {low}"
        hi = "" if high is None else f"<= {high}"
        want = f"{lo} and {hi}" if lo and hi else lo or hi
        raise MusicgenError(f"{where}: must be {want}, got {value}")
    return value


def check_choice(where: str, value, choices) -> None:
    if value not in choices:
        raise MusicgenError(
            f"{where}: unknown value {value!r}; choose one of: {', '.join(map(str, choices))}"
        )


def check_seed(where: str, value):
    return check_range(where, value, 0, SEED_MAX)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what SLURM and Kubernetes send before a kill), raised like Ctrl-C so that the
    same code saves the work; the CLI exits with 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


class EmptyPiece(UserWarning):
    """A generated piece whose new part holds no note (the model wrote only bars, time or the
    end): it is still returned and written, so the caller hears it (the CLI: `EMPTY_EXIT`)."""


EMPTY_EXIT = 4  # `generate` / `continue`: every file written, but a piece has no new note


class Cancelled(MusicgenError):
    """Generation stopped because the caller's `cancel` flag was set (`Model.generate(cancel=)`):
    nothing was returned or written for the pieces not finished."""


def check_int(where: str, value, low=None, high=None):
    """`value` as an int if it is a whole number (not a bool, float or string) within
    low..high, else a one-line error naming `where`; None passes (an unset option)."""
    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise MusicgenError(f"{where}: must be a whole number, got {value!r}")
    return check_range(where, int(value), low, high)


def check_number(where: str, value, low=None, high=None, *, low_open: bool = False):
    """`value` as a float if it is a finite real number (not a bool or string) within low..high,
    else a one-line error naming `where`; None passes (an unset option)."""
    if value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise MusicgenError(f"{where}: must be a number, got {value!r}")
    if not math.isfinite(value):
        raise MusicgenError(f"{where}: must be a finite number, got {value}")
    return check_range(where, float(value), low, high, low_open=low_open)
