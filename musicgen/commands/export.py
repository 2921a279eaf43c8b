"""`musicgen export`: a saved or hand-written token sequence -> a MIDI file.

Accepted inputs: see `generation.api.tokenfile` (the JSON of `generate --save-tokens`, a JSON
list or a text file of ids / token names). The tokenizer comes from a checkpoint or a
`tokenizer.json`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.tokenizers.base import Tokenizer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="turn a saved token sequence into MIDI",
        description="Decode token ids (from `generate --save-tokens`, or a hand-written JSON/text "
        "list of ids or token names) into a MIDI file.",
    )
    p.add_argument("tokens", help="a .json or text file of ids / token names")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", help="take the tokenizer from this checkpoint or model folder")
    src.add_argument("--tokenizer", help="a tokenizer.json (or a prepared dataset folder)")
    p.add_argument("-o", "--out", required=True, help="the MIDI file to write")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.set_defaults(func=run)


def load_tokenizer_from(args: argparse.Namespace) -> Tokenizer:
    if args.checkpoint:
        from musicgen.checkpoint import checkpoint_tokenizer

        return checkpoint_tokenizer(args.checkpoint)
    from musicgen.tokenizers import load_tokenizer

    return load_tokenizer(args.tokenizer)


def run(args: argparse.Namespace) -> int:
    from musicgen.generation.api.tokenfile import read_tokens, to_ids
    from musicgen.generation.api.write import claim, release, write_midi

    path = Path(args.tokens)
    tokens = read_tokens(path)  # before the tokenizer: a missing file is the first error
    tokenizer = load_tokenizer_from(args)
    ids = to_ids(path, tokens, tokenizer)
    out = Path(args.out)
    if out.is_dir():
        raise MusicgenError(f"{out}: is a directory; give a .mid file name")
    suffix = (out.suffix or ".mid",)
    base = claim(out.parent, out.stem, suffix, args.overwrite)  # exclusive: never another's
    target = base.with_name(base.name + suffix[0])
    if target != out:
        print(f"note: {out} exists; writing {target.name} instead (--overwrite replaces it)")
    try:
        write_midi(tokenizer.decode(ids), target)
    except BaseException:
        if not args.overwrite:
            release(base, suffix)
        raise
    print(f"wrote {target} ({len(ids)} ids)")
    return 0
