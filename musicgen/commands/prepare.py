"""`musicgen prepare`: a folder of MIDI files -> token arrays ready for training."""

from __future__ import annotations

import argparse
import os
import sys

from musicgen.data.prepare import DATASETS
from musicgen.limits import MAX_BARS, MAX_MINUTES, MAX_TOKENS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prepare",
        help="tokenize a folder of MIDI files into a prepared dataset",
        description="Find every .mid/.midi file under --input, tokenize it and write token arrays "
        "per split (train/validation/test) to --output. Bad files are skipped and listed in "
        "OUTPUT/skipped.csv; rerunning reuses songs that did not change.",
    )
    p.add_argument(
        "--dataset",
        required=True,
        choices=DATASETS,
        help="layout of the input (decides the split and the default tokenizer)",
    )
    p.add_argument(
        "--input", required=True, help="folder with the MIDI files (searched recursively)"
    )
    p.add_argument("--output", required=True, help="folder to write the prepared dataset to")
    p.add_argument(
        "--tokenizer",
        help="registry name (remi, groove) or YAML file; default: groove for --dataset groove, "
        "configs/tokenizer/remi_expressive.yaml for maestro, configs/tokenizer/remi.yaml "
        "otherwise",
    )
    p.add_argument(
        "--workers", type=int, default=min(4, os.cpu_count() or 1), help="tokenizer processes"
    )
    p.add_argument(
        "--max-size-mb", type=float, default=10.0, help="skip MIDI files larger than this"
    )
    p.add_argument(
        "--max-bars",
        type=int,
        default=MAX_BARS,
        help=f"skip songs longer than this many bars (default {MAX_BARS})",
    )
    p.add_argument(
        "--max-minutes",
        type=float,
        default=MAX_MINUTES,
        help=f"skip songs longer than this (default {MAX_MINUTES:g})",
    )
    p.add_argument(
        "--max-song-tokens",
        type=int,
        default=MAX_TOKENS,
        help=f"skip songs of more tokens than this (default {MAX_TOKENS})",
    )
    p.add_argument(
        "--structure",
        help="POP909 only: the pop909_structure folder (phrase labels and melody per song); "
        "with a tokenizer that has section tokens (configs/tokenizer/remi_song.yaml) each "
        "song is aligned onto its annotated bars and its phrases become tokens",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from musicgen.data.prepare import prepare
    from musicgen.limits import Limits

    limits = Limits(args.max_bars, args.max_minutes, args.max_song_tokens)
    s = prepare(
        args.dataset,
        args.input,
        args.output,
        args.tokenizer,
        args.workers,
        args.max_size_mb,
        limits,
        args.structure,
    )
    print(
        f"prepared {s['songs']} songs ({s['train']} train, {s['validation']} validation, "
        f"{s['test']} test; {s['tokens']} tokens; {s['reused']} reused from cache), "
        f"skipped {s['skipped']} ({s['duplicates']} duplicates; see {args.output}/skipped.csv) "
        f"-> {args.output}"
    )
    without = s["songs"] - s["with_phrases"]
    if args.structure and without:
        print(
            f"warning: {without} of {s['songs']} songs have no phrase tokens (no folder in "
            f"{args.structure}, or their melody did not align)",
            file=sys.stderr,
        )
    return 0
