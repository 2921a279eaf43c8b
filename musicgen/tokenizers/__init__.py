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


def tokenizer_class(name: str) -> type[Tokenizer]:
    if name not in REGISTRY:
        raise MusicgenError(f"unknown tokenizer '{name}'; choose one of: {', '.join(REGISTRY)}")
    import importlib

    module, cls = REGISTRY[name].split(":")
    return getattr(importlib.import_module(module), cls)


def build_tokenizer(spec: str | Path) -> Tokenizer:
    """`spec` is a registry name ('remi') or a YAML file (configs/tokenizer/remi.yaml)."""
    from musicgen.config import load_yaml

    spec_str = str(spec)
    if spec_str in REGISTRY:
        return tokenizer_class(spec_str).from_dict({"name": spec_str})
    data = load_yaml(spec)
    name = data.get("name")
    if name is None:
        raise MusicgenError(f"{spec}: a tokenizer config needs a 'name' ({', '.join(REGISTRY)})")
    return tokenizer_class(name).from_dict(data)


def load_tokenizer(src: dict | str | Path) -> Tokenizer:
    """From the dict stored in a checkpoint, or from a `tokenizer.json` file / its folder."""
    if isinstance(src, dict):
        data = src
    else:
        path = Path(src)
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise MusicgenError(f"{path}: tokenizer file not found")
        try:
            data = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MusicgenError(f"{path}: not a musicgen tokenizer file (invalid JSON)") from None
    if not isinstance(data, dict) or "name" not in data:
        raise MusicgenError(f"{src}: not a musicgen tokenizer description (no 'name')")
    return tokenizer_class(data["name"]).from_dict(data)


__all__ = ["PAD_ID", "Grammar", "Tokenizer", "REGISTRY", "build_tokenizer", "load_tokenizer"]
