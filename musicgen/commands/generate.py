"""`musicgen generate` (pieces from scratch) and `musicgen continue` (a MIDI prompt continued).

Both read everything from the checkpoint (model, tokenizer, config), sample with the paper's
settings for that tokenizer unless told otherwise, and write `<name>.mid` files into `--out`
without ever overwriting an existing file silently. The work is done by `generation.api` (and the
prompt by `generation.prompt`); this module parses options, names files and prints.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from musicgen.errors import MusicgenError, check_range, check_seed
from musicgen.generation.api import (
    BAR_TOKEN_CAP,
    Model,
    checkpoint_stem,
    free_path,
    load,
    pick_seed,
)
from musicgen.generation.prompt import Prompt, check_seconds
from musicgen.generation.sample import Generated, SamplingOptions, invalid_rate
from musicgen.generation.tokenfile import write_token_file
from musicgen.io import ensure_dir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="sample new pieces from a checkpoint",
        description="Sample pieces from scratch; writes OUT/<checkpoint>_<seed>_<i>.mid. Sampling "
        "defaults follow the paper: REMI T=1.2 with top-p 0.9, groove T=0.6.",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument(
        "--max-tokens", type=int, default=None, help="ids to sample per piece (default 2048)"
    )
    length.add_argument(
        "--bars", type=int, default=None, help="stop each piece after this many bars"
    )
    _add_common(p)
    p.set_defaults(func=run_generate)

    c = sub.add_parser(
        "continue",
        help="continue bars (or seconds) of a MIDI prompt",
        description="Encode a MIDI prompt with the checkpoint's tokenizer, keep some of its bars "
        "(or its first seconds) and sample a continuation; the output holds the prompt then the "
        "continuation, at the prompt's tempo.",
    )
    c.add_argument("--prompt", required=True, help="the MIDI file to continue")
    c.add_argument(
        "--bars", type=int, default=None, help="use the first N bars of the prompt (default 2)"
    )
    c.add_argument(
        "--prompt-bars",
        default=None,
        metavar="START:END",
        help="use bars START..END-1 (0-based, END excluded) instead of --bars",
    )
    c.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="use the first S seconds of the prompt (read through its tempo map; cut at the "
        "first grid position at or after S; REMI checkpoints) instead of --bars",
    )
    c.add_argument("--max-tokens", type=int, default=1024, help="ids to sample (default 1024)")
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
    p.add_argument("--temperature", type=float, default=None, help=">= 0 (0 = greedy)")
    p.add_argument("--top-k", type=int, default=None, help="keep the K likeliest ids (0 = off)")
    p.add_argument("--top-p", type=float, default=None, help="nucleus mass in (0, 1] (1 = off)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: drawn, printed)")
    p.add_argument(
        "--min-tokens",
        type=int,
        default=0,
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
    p.add_argument("--batch-size", type=int, default=8, help="samples decoded together")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument("--render", action="store_true", help="also write a piano roll and audio")


# ---------------------------------------------------------------------------------------------
# shared steps


def check_common(args: argparse.Namespace) -> None:
    """Range checks before anything is loaded; argparse only checks the types."""
    for opt, value, low in (
        ("--num", args.num, 1),
        ("--batch-size", args.batch_size, 1),
        ("--max-tokens", args.max_tokens, 1),
        ("--bars", args.bars, 1),
    ):
        check_range(opt, value, low)
    check_seed("--seed", args.seed)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise MusicgenError(f"{args.out}: is a file, not a folder (--out)")
    SamplingOptions(
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k or 0,
        top_p=1.0 if args.top_p is None else args.top_p,
        min_tokens=args.min_tokens,
    ).validate()


def sampling_options(args: argparse.Namespace, model: Model) -> SamplingOptions:
    """The paper's defaults for this tokenizer, with every option given on the command line."""
    opts = model.options(args.temperature, args.top_k, args.top_p, grammar=not args.no_grammar)
    opts.min_tokens = args.min_tokens
    return opts.validate()


def save_all(
    args,
    model: Model,
    batches: Iterator[tuple[int, list[Generated]]],
    stem: str,
    seed: int,
    prompt: Prompt | None = None,
) -> list[Path]:
    """Write `<stem>_<seed>_<i>.mid` (+ `.json`) for every piece, batch by batch; returns every
    file written (MIDI, tokens, renders)."""
    out_dir = ensure_dir(args.out)
    tok = model.tokenizer
    only = bool(getattr(args, "continuation_only", False))
    suffixes = (".mid", ".json") if args.save_tokens else (".mid",)
    written, everything = [], []
    for first, results in batches:
        everything += results
        for i, res in enumerate(results, start=first):
            base = free_path(out_dir, f"{stem}_{seed}_{i}", suffixes, args.overwrite)
            midi = model.music(res, seed, prompt, only).save(base.with_name(base.name + ".mid"))
            written.append(midi)
            if args.save_tokens:
                lead = prompt.solo_lead if prompt is not None else []
                ids = [tok.bos_id, *lead, *res.continuation] if only else res.ids
                written.append(
                    write_token_file(
                        base.with_name(base.name + ".json"),
                        tok,
                        ids,
                        prompt_len=1 + len(lead) if only else res.prompt_len,
                        checkpoint=str(args.checkpoint),
                        seed=seed,
                        index=i,
                        stop=res.stop,
                        grammar_errors=res.errors,
                    )
                )
            print(f"wrote {midi} ({res.sampled} ids sampled, stop: {res.stop})")
            if args.render:
                written += _render(midi, out_dir)
    if args.no_grammar:
        print(f"invalid token rate (grammar off): {invalid_rate(everything):.4f}")
    return written


def _render(midi: Path, out_dir: Path) -> list[Path]:
    from musicgen.generation.render import render_midi

    paths = render_midi(midi, out_dir, png=True, wav=True)
    for path in paths:
        print(f"wrote {path}")
    return paths


def _load(args: argparse.Namespace) -> Model:
    return load(args.checkpoint, args.device)


# ---------------------------------------------------------------------------------------------
# the two commands


def generate_files(args: argparse.Namespace) -> list[Path]:
    """`musicgen generate` as a function: the files it wrote (the demo calls this)."""
    check_common(args)
    model = _load(args)
    seed = pick_seed(args.seed)
    if args.bars is not None:
        max_new = BAR_TOKEN_CAP * args.bars
    else:
        max_new = args.max_tokens if args.max_tokens is not None else 2048
    print(f"seed {seed}")
    batches = model.sample(
        [model.tokenizer.bos_id],
        args.num,
        max_new,
        seed,
        sampling_options(args, model),
        args.bars,
        args.batch_size,
        progress=True,
    )
    return save_all(args, model, batches, checkpoint_stem(model.source), seed)


def run_generate(args: argparse.Namespace) -> int:
    generate_files(args)
    return 0


def parse_bar_range(args: argparse.Namespace) -> tuple[int, int] | None:
    """(START, END) of --bars / --prompt-bars (default 0:2); None with --seconds."""
    if getattr(args, "seconds", None) is not None:  # (the demo's namespace has no --seconds)
        for opt, value in (("--bars", args.bars), ("--prompt-bars", args.prompt_bars)):
            if value is not None:
                raise MusicgenError(f"{opt} and --seconds: give one of them, not both")
        check_seconds("--seconds", args.seconds)
        return None
    if args.prompt_bars is None:
        return 0, 2 if args.bars is None else args.bars
    if args.bars is not None:
        raise MusicgenError("--bars and --prompt-bars: give one of them, not both")
    text = str(args.prompt_bars)
    try:
        start_s, end_s = text.split(":")
        start, end = int(start_s), int(end_s)
    except ValueError:
        raise MusicgenError(f"--prompt-bars: expected START:END (e.g. 0:2), got '{text}'") from None
    if start < 0 or end <= start:
        raise MusicgenError(f"--prompt-bars: need 0 <= START < END, got '{text}'")
    return start, end


def continue_files(args: argparse.Namespace) -> list[Path]:
    """`musicgen continue` as a function: the files it wrote (the demo calls this)."""
    check_common(args)
    bar_range = parse_bar_range(args)
    prompt_path = Path(args.prompt)
    if not prompt_path.exists():
        raise MusicgenError(f"{prompt_path}: prompt file not found")
    model = _load(args)
    if bar_range is None:
        prompt = model.prompt(prompt_path, seconds=args.seconds, option="--seconds")
        what = f"the first {args.seconds:g} s"
    else:
        start, end = bar_range
        prompt = model.prompt(prompt_path, end - start, start)
        what = f"bars {start}:{end}"
    seed = pick_seed(args.seed)
    print(f"seed {seed}; prompt: {what} of {prompt_path.name} ({len(prompt.ids)} ids)")
    batches = model.sample(
        prompt.ids,
        args.num,
        args.max_tokens,
        seed,
        sampling_options(args, model),
        None,
        args.batch_size,
        progress=True,
        first_allowed=prompt.first_allowed,
    )
    stem = f"{checkpoint_stem(model.source)}_{prompt_path.stem}"
    return save_all(args, model, batches, stem, seed, prompt)


def run_continue(args: argparse.Namespace) -> int:
    continue_files(args)
    return 0
