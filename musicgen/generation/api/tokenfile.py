"""Token files: the JSON `generate --save-tokens` writes (`{"tokenizer": name, "ids": [..]}`), a
JSON list of ids or token names, or a text file of ids / names separated by spaces, commas or
newlines, read into the ids of one tokenizer (`musicgen export`). A sequence that does not belong
to it (another tokenizer's name, ids outside its vocabulary, unknown names) is an error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.io import atomic_write_text
from musicgen.tokenizers.base import Tokenizer


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


def to_ids(path: Path, tokens: tuple[str | None, list], tokenizer: Tokenizer) -> list[int]:
    """The ids of what `read_tokens` read, checked against `tokenizer` (its name, when the file
    gives one, and its vocabulary)."""
    name, items = tokens
    if name is not None and name != tokenizer.name:
        raise MusicgenError(
            f"{path}: tokens are for the '{name}' tokenizer, not '{tokenizer.name}'"
        )
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


def write_token_file(path: Path, tokenizer: Tokenizer, ids: list[int], **record) -> Path:
    """`generate --save-tokens`: the ids with their tokenizer's name (and what else `record`
    says about them) as one JSON line, the format `read_tokens` reads first."""
    atomic_write_text(path, json.dumps({"tokenizer": tokenizer.name, "ids": ids, **record}) + "\n")
    return path
