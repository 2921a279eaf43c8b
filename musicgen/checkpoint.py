"""Self-describing checkpoints: one file holds everything needed to rebuild and resume a model.

Contents: format tag, package version, resolved config, tokenizer description, model weights (of the
plain, uncompiled, unwrapped module; optionally in half precision for shipping) and the training
state (optimiser, scheduler, step, RNG states). Everything is plain tensors, numbers, strings, lists
and dicts, so `torch.load(weights_only=True)` reads it without executing pickled code.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from musicgen import __version__
from musicgen.config import Config, config_from_dict, to_dict
from musicgen.errors import MusicgenError
from musicgen.io import atomic_path
from musicgen.tokenizers import Tokenizer, load_tokenizer

FORMAT = "musicgen-checkpoint/1"


@dataclass
class Loaded:
    model: nn.Module
    tokenizer: Tokenizer
    config: Config
    train_state: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)  # format, version, path


def unwrap(model: nn.Module) -> nn.Module:
    """The plain module under DistributedDataParallel and torch.compile wrappers."""
    while True:
        if hasattr(model, "_orig_mod"):  # torch.compile
            model = model._orig_mod
        elif isinstance(model, nn.parallel.DistributedDataParallel):
            model = model.module
        else:
            return model


def model_state(model: nn.Module, half: bool = False) -> dict[str, torch.Tensor]:
    state = {}
    for name, tensor in unwrap(model).state_dict().items():
        tensor = tensor.detach().cpu()
        if half and tensor.is_floating_point():
            tensor = tensor.to(torch.float16)
        state[name] = tensor.clone()
    return state


def save_checkpoint(
    path: str | Path,
    model: nn.Module,
    config: Config,
    tokenizer: Tokenizer,
    train_state: dict[str, Any] | None = None,
    half: bool = False,
) -> Path:
    """Write atomically: a crash mid-write never leaves a broken file at `path`."""
    path = Path(path)
    payload = {
        "format": FORMAT,
        "version": __version__,
        "config": to_dict(config),
        "tokenizer": tokenizer.to_dict(),
        "model": model_state(model, half=half),
        "train_state": train_state or {},
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return path


def read_payload(path: str | Path) -> dict:
    """The raw checkpoint dict, with one-line errors for every way a file can be wrong."""
    path = Path(path)
    if not path.exists():
        raise MusicgenError(f"{path}: checkpoint not found")
    if path.is_dir():
        for name in ("best.pt", "last.pt", "model.pt"):
            if (path / name).is_file():
                return read_payload(path / name)
        raise MusicgenError(f"{path}: folder holds no best.pt, last.pt or model.pt checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MusicgenError(f"{path}: not a readable checkpoint ({reason[:120]})") from None
    except Exception as exc:  # the unpickler refuses anything that is not plain data
        raise MusicgenError(f"{path}: not a musicgen checkpoint ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise MusicgenError(f"{path}: not a musicgen checkpoint (format tag missing)")
    payload["path"] = str(path)
    return payload


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Loaded:
    """Rebuild model (in eval mode, on `device`) and tokenizer from the checkpoint alone."""
    from musicgen.model import build_model

    payload = read_payload(path)
    config = config_from_dict(payload["config"])
    tokenizer = load_tokenizer(payload["tokenizer"])
    if config.model.vocab_size != tokenizer.vocab_size:
        raise MusicgenError(
            f"{path}: model vocabulary ({config.model.vocab_size}) does not match its tokenizer "
            f"({tokenizer.vocab_size})"
        )
    model = build_model(config.model, tokenizer)
    weights = {k: v.float() if v.is_floating_point() else v for k, v in payload["model"].items()}
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise MusicgenError(f"{path}: weights do not fit the saved config ({first})") from None
    model.to(device).eval()
    meta = {"format": payload["format"], "version": payload["version"], "path": payload["path"]}
    return Loaded(model, tokenizer, config, payload.get("train_state") or {}, meta)
