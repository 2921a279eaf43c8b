"""The `musicgen` command: parses arguments, calls one function per subcommand, sets the exit code.

Every failure a user can cause or meet (bad input, a full disk, a signal) ends in one line on
stderr and a non-zero exit code. Anything else is a bug in musicgen: it too ends in one line
(exit 3) that says so, and `MUSICGEN_DEBUG=1` shows its traceback.

Each subcommand lives in `musicgen/commands/<name>.py` and exposes `register(subparsers)`, which
adds its parser and sets `func` (a callable taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys

from musicgen import __version__
from musicgen.allocator import keep_freed_memory
from musicgen.errors import MusicgenError

# Order shown in `musicgen --help`.
COMMANDS = [
    "prepare",
    "train",
    "generate",
    "export",
    "evaluate",
    "plot",
    "render",
    "demo",
    "studio",
]

# The library's messages name the Python API's parameters (`max_tokens: must be >= 1`); on the
# command line they name the flag that set them. The generation request's come from its fields
# (`generation.api.request.flags`); the others are listed here (a command whose flag differs sets
# `flags={parameter: flag}` on its parser).
OTHER_FLAGS = {
    "checkpoint": "--checkpoint",
    "dataset": "--dataset",
    "device": "--device",
    "head": "--head",
    "heads": "--heads",
    "layer": "--layer",
    "max_bars": "--max-bars",
    "max_minutes": "--max-minutes",
    "max_size_mb": "--max-size-mb",
    "max_song_tokens": "--max-song-tokens",
    "prompt_bars": "--prompt-bars",
    "seconds": "--seconds",
    "seeds": "--seeds",
    "tokenizer": "--tokenizer",
    "tokens": "--tokens",
    "workers": "--workers",
}
_LEADING_NAMES = re.compile(r"^([a-z_]+(?: and [a-z_]+)*):")


def flag_message(message: str, flags: dict[str, str] | None = None) -> str:
    """`max_tokens: ...` -> `--max-tokens: ...` (and `bars and seconds:` -> `--bars and
    --seconds:`); a message that starts otherwise (a file name, a config key) is kept."""
    from musicgen.generation.api.request import flags as request_flags

    table = {**OTHER_FLAGS, **request_flags(), **(flags or {})}
    match = _LEADING_NAMES.match(message)
    if not match:
        return message
    names = match.group(1).split(" and ")
    if not all(n in table for n in names):
        return message
    return " and ".join(table[n] for n in names) + message[match.end(1) :]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="musicgen",
        description="Symbolic music generation: MIDI folder -> tokens -> Performer -> new MIDI.",
    )
    parser.add_argument("--version", action="version", version=f"musicgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"musicgen.commands.{name}").register(sub)
    return parser


# Options whose value may start with '-' (`--prompt-bars -2:1`): argparse would take the value
# for an option and print its usage; joined as `--prompt-bars=-2:1`, the value reaches the
# command's own check, which says in one line what is wrong with it.
DASH_VALUES = ("--prompt-bars",)


def join_dash_values(argv: list[str]) -> list[str]:
    """`[..., "--prompt-bars", "-2:1", ...]` -> `[..., "--prompt-bars=-2:1", ...]`."""
    out, k = [], 0
    while k < len(argv):
        if argv[k] in DASH_VALUES and k + 1 < len(argv) and argv[k + 1].startswith("-"):
            out.append(f"{argv[k]}={argv[k + 1]}")
            k += 2
        else:
            out.append(argv[k])
            k += 1
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = join_dash_values(list(sys.argv[1:] if argv is None else argv))
    args, extra = parser.parse_known_args(argv)
    if extra and not hasattr(args, "overrides"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = list(args.overrides or []) + extra
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    keep_freed_memory()  # large tensors reused, not page-faulted anew (musicgen/allocator.py)
    try:
        return int(args.func(args) or 0)
    except MusicgenError as exc:
        print(f"error: {flag_message(str(exc), getattr(args, 'flags', None))}", file=sys.stderr)
        return 1
    except OSError as exc:  # the machine, not musicgen: full or read-only disk, permissions
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM during training (Terminated)
        signum = getattr(exc, "signum", signal.SIGINT)
        print("terminated" if signum == signal.SIGTERM else "interrupted", file=sys.stderr)
        return 128 + int(signum)
    except Exception as exc:  # a bug: one line for the user, the traceback on request
        if os.environ.get("MUSICGEN_DEBUG"):
            raise
        print(
            f"error: internal error in musicgen {args.command} ({type(exc).__name__}: {exc}); "
            "this is a bug: rerun with MUSICGEN_DEBUG=1 for the traceback and report it",
            file=sys.stderr,
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
