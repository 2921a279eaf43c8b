"""`musicgen generate` (pieces from scratch) and `musicgen continue` (a MIDI prompt continued).

Both are thin callers of the Python API (`generation.api.Model.pieces`, the one generation
path): their flags are the fields of `generation.api.request.GenerationRequest` (`add_flags`), the
request is built (and every value checked) before the model is loaded, the API applies the
defaults to what was not given, and the pieces are written with
`generation.api.write.write_pieces` into `--out`, never overwriting an existing file silently. The
API's messages name its parameters (`max_tokens: ...`); `musicgen.cli` shows them as flags.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from tqdm import tqdm

from musicgen.errors import EMPTY_EXIT, EmptyPiece, MusicgenError
from musicgen.generation.api import Model, checkpoint_stem, load
from musicgen.generation.api.extend import check_extend, extended
from musicgen.generation.api.prompt import Prompt
from musicgen.generation.api.regenerate import regenerated
from musicgen.generation.api.request import GenerationRequest, add_flags, from_args
from musicgen.generation.api.write import write_pieces
from musicgen.generation.decoding.sample import invalid_rate

PROMPT_RULE = (
    "the first N bars that hold music (leading silent bars are skipped; a pickup, a first "
    "bar whose notes start in its second half, joins the bar after it)"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="sample new pieces from a checkpoint",
        description="Sample pieces from scratch; writes OUT/<checkpoint>_<seed>_<i>.mid. Sampling "
        "defaults are the model's own where its config has them (its card says which), else the "
        "paper's: REMI T=1.2 with top-p 0.9, groove T=0.6.",
    )
    _add_common(p)
    p.set_defaults(func=run_generate)

    c = sub.add_parser(
        "continue",
        help="continue bars (or seconds) of a MIDI prompt",
        description="Encode a MIDI prompt with the checkpoint's tokenizer, keep some of its bars "
        "(or its first seconds) and sample a continuation; the output holds the prompt then the "
        f"continuation, at the prompt's tempo. --bars N keeps {PROMPT_RULE}; --prompt-bars "
        "keeps exact bars counted from time 0.",
    )
    c.add_argument("--prompt", required=True, help="the MIDI file to continue")
    c.add_argument("--bars", type=int, default=None, help=f"the prompt: {PROMPT_RULE} (default 2)")
    c.add_argument(
        "--prompt-bars",
        default=None,
        metavar="START:END",
        help="the prompt: exactly bars START..END-1 counted from time 0 (0-based, END "
        "excluded), silent or not, instead of --bars",
    )
    c.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="the prompt: its first S seconds (read through its tempo map; cut at the first "
        "grid position at or after S; REMI checkpoints) instead of --bars",
    )
    c.add_argument(
        "--continuation-only",
        action="store_true",
        help="write only the continuation, without the prompt",
    )
    c.add_argument(
        "--extend",
        action="store_true",
        help="extend the piece from its end: its last bars (as many as the model's window "
        "holds) as the prompt, the output the WHOLE file then --new-bars N new bars (or a "
        "--form's, naming the new sections); not with --bars, --prompt-bars, --seconds or "
        "--continuation-only",
    )
    _add_common(c, continuation=True)
    c.set_defaults(func=run_continue)
    _register_regenerate(sub)


def _register_regenerate(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "regenerate",
        help="write bars (or a section) of a MIDI file again, the rest kept",
        description="Write bars A..B-1 of FILE (or its phrase NAME, by its marker) again: the "
        "bars before them as the prompt, the bars after kept as they are; writes the whole "
        "piece (REMI checkpoints).",
    )
    r.add_argument("file", help="the MIDI file")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--bars", dest="span", metavar="A:B", help="bars A..B-1 (0-based)")
    which.add_argument("--section", help="the phrase named so by the file's markers (B or B8)")
    _add_common(r, continuation=True)
    r.set_defaults(func=run_regenerate, flags={"section": "--section"})


def _add_common(p: argparse.ArgumentParser, continuation: bool = False) -> None:
    p.add_argument(
        "--checkpoint",
        required=True,
        help="a model folder, a .pt checkpoint, a run folder or a shipped model's name",
    )
    p.add_argument("--out", required=True, help="output folder (created)")
    add_flags(p, continuation)  # the request's: lengths, sampling, seed, batch, chords
    p.add_argument(
        "--save-tokens",
        action="store_true",
        help="also write <name>.json with the ids (see `musicgen export`)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing files")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument(
        "--int8",
        action="store_true",
        help="weight-only int8 decoding on the CPU (faster; docs/generation.md, 'Speed')",
    )
    p.add_argument("--render", action="store_true", help="also write a piano roll and audio")


# ---------------------------------------------------------------------------------------------
# shared steps


class ProgressBar:
    """`progress(done, total)` for the API, drawn as a tqdm bar on stderr."""

    def __init__(self, desc: str = "generate"):
        self.desc, self.bar = desc, None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = tqdm(total=total, desc=self.desc, unit="tok")
        self.bar.update(done - self.bar.n)
        if done >= total:
            self.bar.close()


def prepare(
    args: argparse.Namespace, continuation: bool = False
) -> tuple[Model, GenerationRequest]:
    """The request (every option checked, the seed drawn), then the model."""
    request = from_args(args, continuation).seeded()
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise MusicgenError(f"{args.out}: is a file, not a folder (--out)")
    return load(args.checkpoint, args.device, int8=args.int8), request


def write_all(args, model: Model, pieces, stem: str) -> int:
    """Write the pieces as they come (`write_pieces`); with --no-grammar, the invalid rate.
    The exit code: `EMPTY_EXIT` when a piece's new part has no note (said on stderr), else 0."""
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyPiece)  # said once below, as the exit code
        write_pieces(
            (seen.append(m) or m for m in pieces),
            args.out,
            stem,
            model.tokenizer,
            save_tokens=args.save_tokens,
            overwrite=args.overwrite,
            render=args.render,
            record={"checkpoint": str(args.checkpoint)},
        )
    if not args.grammar:
        print(f"invalid token rate (grammar off): {invalid_rate(seen):.4f}")
    empty = sum(m.new_notes == 0 for m in seen)
    if empty:
        print(f"warning: {empty} of {len(seen)} pieces have no new note (exit {EMPTY_EXIT})",
              file=sys.stderr)  # fmt: skip
        return EMPTY_EXIT
    return 0


# ---------------------------------------------------------------------------------------------
# the two commands


def run_generate(args: argparse.Namespace) -> int:
    """`musicgen generate`: its exit code (`write_all`)."""
    model, request = prepare(args)
    print(f"seed {request.seed}")
    pieces = model.pieces(request, progress=ProgressBar())
    return write_all(args, model, pieces, checkpoint_stem(model.source))


def parse_prompt_bars(text: str | None, flag: str = "--prompt-bars") -> tuple[int, int] | None:
    """--prompt-bars START:END (or `flag`'s) as the API's (start, end)."""
    if text is None:
        return None
    try:
        start, end = (int(v) for v in str(text).split(":"))
    except ValueError:
        raise MusicgenError(f"{flag}: expected START:END (e.g. 0:2), got '{text}'") from None
    return start, end


def describe(prompt: Prompt, seconds: float | None) -> str:
    """What the prompt holds, for the first line the command prints."""
    if seconds is not None:
        return f"the first {seconds:g} s"
    return f"bars {prompt.first_bar}:{prompt.first_bar + prompt.bars}"


def run_continue(args: argparse.Namespace) -> int:
    """`musicgen continue`: its exit code (`write_all`)."""
    prompt_bars = parse_prompt_bars(args.prompt_bars)
    if args.extend:
        return run_extend(args)
    model, request = prepare(args, continuation=True)
    path = Path(args.prompt)
    prompt = model.prompt(path, args.bars, prompt_bars=prompt_bars, seconds=args.seconds)
    print(f"seed {request.seed}; prompt: {describe(prompt, args.seconds)} of {path.name} "
          f"({len(prompt.ids)} ids)")  # fmt: skip
    pieces = model.pieces(
        request, prompt=prompt, only_continuation=args.continuation_only, progress=ProgressBar()
    )
    return write_all(args, model, pieces, f"{checkpoint_stem(model.source)}_{path.stem}")


def run_extend(args: argparse.Namespace) -> int:
    """`musicgen continue --extend`: the whole prompt file, then its new bars (`write_all`)."""
    request = from_args(args, continuation=True)
    given = {"--bars": args.bars, "--prompt-bars": args.prompt_bars, "--seconds": args.seconds,
             "--continuation-only": args.continuation_only}  # fmt: skip
    check_extend(request, **given)
    model, request = prepare(args, continuation=True)
    path = Path(args.prompt)
    print(f"seed {request.seed}; extending {path.name} from its end")
    pieces = extended(model, path, request, progress=ProgressBar())
    return write_all(args, model, pieces, f"{checkpoint_stem(model.source)}_{path.stem}")


def run_regenerate(args: argparse.Namespace) -> int:
    """`musicgen regenerate`: the file with its bars written again (`write_all`)."""
    span = parse_prompt_bars(args.span, "--bars")
    model, request = prepare(args, continuation=True)
    path = Path(args.file)
    print(f"seed {request.seed}; regenerating {args.span or args.section} of {path.name}")
    pieces = regenerated(model, path, request, span, args.section, progress=ProgressBar())
    return write_all(args, model, pieces, f"{checkpoint_stem(model.source)}_{path.stem}_regen")
