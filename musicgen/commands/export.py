"""`musicgen export`: a saved or hand-written token sequence -> a MIDI file.

Accepted inputs: the JSON that `generate --save-tokens` writes (`{"tokenizer": name, "ids": [..]}`),
a JSON list of ids or token names, or a text file of ids / names separated by spaces, commas or
newlines. The tokenizer comes from a checkpoint or a `tokenizer.json`; a sequence that does not
belong to it (another tokenizer's name, ids outside its vocabulary, unknown names) is an error.
"""

from __future__ import annotations

import argparse
import json
import re
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
    src.add_argument("--checkpoint",
                     help="take the tokenizer from this checkpoint or model folder")
    src.add_argument("--tokenizer", help="a tokenizer.json (or a prepared dataset folder)")
    p.add_argument("-o", "--out", required=True, help="the MIDI file to write")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.set_defaults(func=run)


def read_tokens(path: Path) -> tuple[str | None, list]:
    """(tokenizer name or None, items) where items are ints or token-name strings."""
    if not path.is_file():
        raise MusicgenError(f"{path}: token file not found")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise MusicgenError(f"{path}: not a text or JSON token file") from None
    stripped = text.strip()
    if not stripped:
        raise MusicgenError(f"{path}: empty token file")
    name = None
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise MusicgenError(f"{path}: invalid JSON ({exc.msg}, line {exc.lineno})") from None
        if isinstance(data, dict):
            if "ids" not in data:
                raise MusicgenError(f"{path}: JSON object has no 'ids' list")
            name, data = data.get("tokenizer"), data["ids"]
        if not isinstance(data, list):
            raise MusicgenError(f"{path}: 'ids' must be a list of ids or token names")
        items = data
    else:
        items = [w for w in re.split(r"[\s,]+", stripped) if w]
    out = []
    for k, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise MusicgenError(f"{path}: item {k} ({item!r}) is neither an id nor a token name")
        if isinstance(item, str) and re.fullmatch(r"-?\d+", item.strip()):
            item = int(item)
        out.append(item)
    if not out:
        raise MusicgenError(f"{path}: no tokens")
    return name, out


def to_ids(path: Path, items: list, tokenizer: Tokenizer) -> list[int]:
    ids = []
    for k, item in enumerate(items):
        if isinstance(item, int):
            if not 0 <= item < tokenizer.vocab_size:
                raise MusicgenError(
                    f"{path}: id {item} (item {k}) is outside the {tokenizer.name} vocabulary "
                    f"(0..{tokenizer.vocab_size - 1}): tokens from another tokenizer?"
                )
            ids.append(item)
        else:
            try:
                ids.append(int(tokenizer.token_id(item)))
            except (MusicgenError, KeyError, ValueError):
                raise MusicgenError(
                    f"{path}: unknown {tokenizer.name} token '{item}' (item {k})"
                ) from None
    return ids


def load_tokenizer_from(args: argparse.Namespace) -> Tokenizer:
    if args.checkpoint:
        from musicgen.checkpoint import read_payload
        from musicgen.tokenizers import load_tokenizer

        return load_tokenizer(read_payload(args.checkpoint)["tokenizer"])
    from musicgen.tokenizers import load_tokenizer

    return load_tokenizer(args.tokenizer)


def run(args: argparse.Namespace) -> int:
    from musicgen.api import free_path, write_midi

    path = Path(args.tokens)
    name, items = read_tokens(path)
    tokenizer = load_tokenizer_from(args)
    if name is not None and name != tokenizer.name:
        raise MusicgenError(
            f"{path}: tokens are for the '{name}' tokenizer, not '{tokenizer.name}'"
        )
    ids = to_ids(path, items, tokenizer)
    out = Path(args.out)
    if out.is_dir():
        raise MusicgenError(f"{out}: is a directory; give a .mid file name")
    base = free_path(out.parent, out.stem, (out.suffix or ".mid",), args.overwrite)
    target = base.with_name(base.name + (out.suffix or ".mid"))
    if target != out:
        print(f"note: {out} exists; writing {target.name} instead (--overwrite replaces it)")
    write_midi(tokenizer.decode(ids), target)
    print(f"wrote {target} ({len(ids)} ids)")
    return 0
