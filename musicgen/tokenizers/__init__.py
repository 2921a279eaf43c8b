"""Tokenizers by name. `build_tokenizer(name_or_yaml)` for a new one, `load_tokenizer(dict|path)`
for one saved with a dataset or checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.tokenizers.base import PAD_ID, Grammar, Tokenizer

REGISTRY: dict[str, str] = {
    # name -> "module:Class"; imported lazily so that `import musicgen` stays light
    "remi": "musicgen.tokenizers.remi:RemiTokenizer",
    "groove": "musicgen.tokenizers.groove:GrooveTokenizer",
}


MAX_FILE_BYTES = 16 << 20  # a tokenizer.json is tens of KB


def tokenizer_class(name: str) -> type[Tokenizer]:
    if not isinstance(name, str) or name not in REGISTRY:
        raise MusicgenError(f"unknown tokenizer {name!r}; choose one of: {', '.join(REGISTRY)}")
    import importlib

    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def from_description(data: dict) -> Tokenizer:
    """A tokenizer from its description (typed options, `tokenizers/options.py`)."""
    if not isinstance(data, dict) or "name" not in data:
        raise MusicgenError("tokenizer: not a musicgen tokenizer description (no 'name')")
    try:
        cls = tokenizer_class(data["name"])
    except MusicgenError as exc:
        raise MusicgenError(f"tokenizer: 'name': {exc}") from None
    return cls.from_dict(data)


def build_tokenizer(spec: str | Path) -> Tokenizer:
    """`spec` is a registry name ('remi') or a YAML file (configs/tokenizer/remi.yaml)."""
    from musicgen.config import load_yaml

    spec_str = str(spec)
    if spec_str in REGISTRY:
        return tokenizer_class(spec_str).from_dict({"name": spec_str})
    data = load_yaml(spec)
    if data.get("name") is None:
        raise MusicgenError(f"{spec}: a tokenizer config needs a 'name' ({', '.join(REGISTRY)})")
    try:
        return from_description(data)
    except MusicgenError as exc:
        raise MusicgenError(f"{spec}: {exc}") from None


def load_tokenizer(src: dict | str | Path) -> Tokenizer:
    """From the dict stored in a checkpoint, or from a `tokenizer.json` file / its folder (whose
    errors name the file)."""
    if isinstance(src, dict):
        return from_description(src)
    path = Path(src)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise MusicgenError(f"{path}: tokenizer file not found")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise MusicgenError(f"{path}: too large for a tokenizer file (> 16 MB)")
    try:
        data = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise MusicgenError(f"{path}: not a musicgen tokenizer file (invalid JSON)") from None
    try:
        return from_description(data)
    except MusicgenError as exc:
        raise MusicgenError(f"{path}: {exc}") from None


__all__ = ["PAD_ID", "Grammar", "Tokenizer", "REGISTRY", "build_tokenizer", "load_tokenizer"]
