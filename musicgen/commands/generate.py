"""`musicgen generate` (pieces from scratch) and `musicgen continue` (a MIDI prompt continued).

Both are thin callers of the Python API (`generation.api.Model.pieces`, the one generation
path): they parse options, pass None for every option not given (the API applies the defaults,
`generation.sample.default_options` for sampling), and write the pieces with
`generation.write.write_pieces` into `--out`, never overwriting an existing file silently. The
API's messages name its parameters (`max_tokens: ...`); `musicgen.cli` shows them as flags.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.generation.api import (
    BAR_TOKEN_CAP,
    CONTINUE_MAX_TOKENS,
    GENERATE_MAX_TOKENS,
    Model,
    check_arguments,
    checkpoint_stem,
    load,
    pick_seed,
)
from musicgen.generation.prompt import Prompt
from musicgen.generation.sample import invalid_rate
from musicgen.generation.write import write_pieces
from musicgen.limits import SAMPLING_RANGES, describe_range

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
    length = p.add_mutually_exclusive_group()
    length.add_argument("--bars", type=int, default=None, help="stop each piece after N bars")
    length.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help=f"the most ids sampled per piece (default {GENERATE_MAX_TOKENS}; with --bars, "
        f"{BAR_TOKEN_CAP} per bar)",
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
    c.add_argument("--new-bars", type=int, default=None, help="stop after N bars past the prompt")
    c.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help=f"the most ids sampled after the prompt, per piece (default {CONTINUE_MAX_TOKENS};"
        f" with --new-bars, {BAR_TOKEN_CAP} per bar)",
    )
    c.add_argument(
        "--continuation-only",
        action="store_true",
        help="write only the continuation, without the prompt",
    )
    _add_common(c)
    c.set_defaults(func=run_continue)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        required=True,
        help="a model folder, a .pt checkpoint, a run folder or a shipped model's name",
    )
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--num", type=int, default=4, help="pieces to write (default 4)")
    p.add_argument("--temperature", type=float, default=None, help=_range("temperature"))
    p.add_argument("--top-k", type=int, default=None, help="keep the K likeliest ids (0 = off)")
    p.add_argument("--top-p", type=float, default=None, help=f"nucleus mass, {_range('top_p')}")
    p.add_argument(
        "--repeat",
        type=float,
        default=None,
        help="nats for the id that continues an earlier bar being copied (bar repeats), "
        + _range("repeat"),
    )
    p.add_argument("--seed", type=int, default=None, help="random seed (default: drawn, printed)")
    p.add_argument(
        "--min-tokens",
        type=int,
        default=None,
        help="mask the end token until this many ids are sampled (long generations; 0 = off)",
    )
    p.add_argument(
        "--no-grammar", action="store_true", help="do not mask invalid tokens (ablation)"
    )
    p.add_argument(
        "--save-tokens",
        action="store_true",
        help="also write <name>.json with the ids (see `musicgen export`)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing files")
    p.add_argument("--batch-size", type=int, default=None, help="samples decoded together (8)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument(
        "--int8",
        action="store_true",
        help="weight-only int8 decoding on the CPU (faster; docs/generation.md, 'Speed')",
    )
    p.add_argument("--render", action="store_true", help="also write a piano roll and audio")
    p.add_argument(
        "--chords",
        default=None,
        help='force a chord progression at the new bars: "C G Am F" (one chord a bar, '
        'repeated; "C | G | Am F" for bars of 1, 2 or 4 chords, "xN" repeats a bar), or a '
        "POP909 chord_midi.txt or a .mid (its detected chords), read at the song's own bars "
        "(REMI checkpoints; docs/generation.md, 'Chord control')",
    )
    p.add_argument(
        "--chord-tones",
        type=float,
        default=None,
        help="with --chords: nats for the pitches of the chord sounding (default 2), "
        + _range("chord_tones"),
    )


def _range(name: str) -> str:
    """An option's range as its help states it, from the one table (`limits.SAMPLING_RANGES`)."""
    return describe_range(SAMPLING_RANGES[name])


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


def api_options(args: argparse.Namespace) -> dict:
    """The API keywords the command line gave (None = not given: the API's default)."""
    given = {
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "min_tokens": args.min_tokens,
        "repeat": args.repeat,
        "chord_tones": args.chord_tones,
        "grammar": False if args.no_grammar else None,
        "max_tokens": args.max_tokens,
        "batch_size": args.batch_size,
    }
    return {k: v for k, v in given.items() if v is not None}


def prepare(args: argparse.Namespace, bars: int | None, bars_name: str = "bars") -> Model:
    """Check every option (before anything is loaded), then load the model."""
    check_arguments(
        args.num, bars, seed=args.seed, bars_name=bars_name, chords=args.chords,
        **api_options(args),
    )  # fmt: skip
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise MusicgenError(f"{args.out}: is a file, not a folder (--out)")
    return load(args.checkpoint, args.device, int8=args.int8)


def write_all(args, model: Model, pieces, stem: str) -> list[Path]:
    """Write the pieces as they come (`write_pieces`); with --no-grammar, the invalid rate."""
    seen = []
    files = write_pieces(
        (seen.append(m) or m for m in pieces),
        args.out,
        stem,
        model.tokenizer,
        save_tokens=args.save_tokens,
        overwrite=args.overwrite,
        render=args.render,
        record={"checkpoint": str(args.checkpoint)},
    )
    if args.no_grammar:
        print(f"invalid token rate (grammar off): {invalid_rate(seen):.4f}")
    return files


# ---------------------------------------------------------------------------------------------
# the two commands


def generate_files(args: argparse.Namespace) -> list[Path]:
    """`musicgen generate` as a function: the files it wrote."""
    model = prepare(args, args.bars)
    seed = pick_seed(args.seed)
    print(f"seed {seed}")
    pieces = model.pieces(
        args.num,
        bars=args.bars,
        seed=seed,
        progress=ProgressBar(),
        chords=args.chords,
        **api_options(args),
    )
    return write_all(args, model, pieces, checkpoint_stem(model.source))


def run_generate(args: argparse.Namespace) -> int:
    generate_files(args)
    return 0


def parse_prompt_bars(text: str | None) -> tuple[int, int] | None:
    """--prompt-bars START:END as the API's (start, end)."""
    if text is None:
        return None
    try:
        start, end = (int(v) for v in str(text).split(":"))
    except ValueError:
        raise MusicgenError(f"--prompt-bars: expected START:END (e.g. 0:2), got '{text}'") from None
    return start, end


def describe(prompt: Prompt, seconds: float | None) -> str:
    """What the prompt holds, for the first line the command prints."""
    if seconds is not None:
        return f"the first {seconds:g} s"
    return f"bars {prompt.first_bar}:{prompt.first_bar + prompt.bars}"


def continue_files(args: argparse.Namespace) -> list[Path]:
    """`musicgen continue` as a function: the files it wrote."""
    prompt_bars = parse_prompt_bars(args.prompt_bars)
    model = prepare(args, args.new_bars, "new_bars")
    path = Path(args.prompt)
    prompt = model.prompt(path, args.bars, prompt_bars=prompt_bars, seconds=args.seconds)
    seed = pick_seed(args.seed)
    print(f"seed {seed}; prompt: {describe(prompt, args.seconds)} of {path.name} "
          f"({len(prompt.ids)} ids)")  # fmt: skip
    pieces = model.pieces(
        args.num,
        prompt=prompt,
        bars=args.new_bars,
        seed=seed,
        only_continuation=args.continuation_only,
        progress=ProgressBar(),
        chords=args.chords,
        **api_options(args),
    )
    return write_all(args, model, pieces, f"{checkpoint_stem(model.source)}_{path.stem}")


def run_continue(args: argparse.Namespace) -> int:
    continue_files(args)
    return 0
