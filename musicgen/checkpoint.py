"""Self-describing checkpoints: one file holds everything needed to rebuild and resume a model.

Contents: format tag, package version, resolved config, tokenizer description, model weights (of the
plain, uncompiled, unwrapped module; optionally in half precision for shipping, with the SPE
parameters and gates kept in float32) and the training state (optimiser, gradient scaler, step,
best validation loss). Everything is plain tensors, numbers, strings, lists
and dicts, so `torch.load(weights_only=True)` reads it without executing pickled code.

Shipped models use a model folder instead, readable without torch pickles: `model.safetensors`
(the weights), `config.json` (format tag, version, resolved config, training summary),
`tokenizer.json` and a `README.md` model card. `.pt` files stay the training format (resume).
Every loader here accepts a `.pt` file, a run folder or a model folder.
"""

from __future__ import annotations

import json
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from musicgen import __version__
from musicgen.config import Config, config_from_dict, to_dict
from musicgen.errors import MusicgenError
from musicgen.io import atomic_path, atomic_write_text
from musicgen.tokenizers import Tokenizer, load_tokenizer

FORMAT = "musicgen-checkpoint/1"
REQUIRED = {"version": str, "config": dict, "tokenizer": dict, "model": dict}  # key -> type
FOLDER_FORMAT = "musicgen-model/1"
FOLDER_FILES = ("model.safetensors", "config.json", "tokenizer.json")
MAX_JSON_BYTES = 16 << 20  # config.json and tokenizer.json: a few KB to a few hundred KB
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


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


def full_precision_names(model: nn.Module) -> set[str]:
    """State-dict names that half-precision saving keeps in float32: every tensor of an SPE module
    (sine frequencies, phases, gains; conv filters) and every SPE gate. Rounding them changes the
    positional kernel itself: an fp16 frequency logit is off by up to ~5e-4 relative, a phase
    error of 2 pi f tau that grows with the lag (radians at lag 8192)."""
    from musicgen.model.positional import ConvSPE, SineSPE

    names = set()
    for prefix, module in unwrap(model).named_modules():
        dot = f"{prefix}." if prefix else ""
        if isinstance(module, (SineSPE, ConvSPE)):
            names.update(dot + n for n, _ in module.state_dict().items())
        if isinstance(getattr(module, "gate", None), nn.Parameter):
            names.add(dot + "gate")
    return names


def model_state(model: nn.Module, half: bool = False) -> dict[str, torch.Tensor]:
    """Weights on the CPU; `half`: float16, except `full_precision_names` (float32)."""
    state = {}
    keep = full_precision_names(model) if half else set()
    for name, tensor in unwrap(model).state_dict().items():
        tensor = tensor.detach().cpu()
        if half and tensor.is_floating_point():
            tensor = tensor.to(torch.float32 if name in keep else torch.float16)
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
    with atomic_path(path, min_bytes=1) as tmp:
        try:
            torch.save(payload, tmp)
        except RuntimeError as exc:  # torch's zip writer reports a full disk this way
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else "write failed"
            raise MusicgenError(
                f"{path}: cannot write ({short(first)}; is the disk full?)"
            ) from None
    return path


def read_payload(path: str | Path) -> dict:
    """The raw checkpoint dict, with one-line errors for every way a file can be wrong."""
    from musicgen.resources import resolve_checkpoint

    path = resolve_checkpoint(path)  # a shipped model may be named: pop909_sine_spe_gated
    if not path.exists():
        raise MusicgenError(f"{path}: checkpoint not found")
    if path.is_dir() and (path / "config.json").is_file():
        return read_model_folder(path)
    if path.is_dir():
        for name in ("best.pt", "last.pt", "model.pt"):
            if (path / name).is_file():
                return read_payload(path / name)
        raise MusicgenError(f"{path}: folder holds no best.pt, last.pt or model.pt checkpoint")
    try:
        with warnings.catch_warnings():  # torch warns about a raw pickle before refusing it
            warnings.simplefilter("ignore")
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MusicgenError(f"{path}: not a readable checkpoint ({short(reason)})") from None
    except Exception as exc:  # the unpickler refuses anything that is not plain data
        raise MusicgenError(f"{path}: not a musicgen checkpoint ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise MusicgenError(f"{path}: not a musicgen checkpoint (format tag missing)")
    for key, kind in REQUIRED.items():
        if not isinstance(payload.get(key), kind):
            raise MusicgenError(f"{path}: incomplete checkpoint (no valid '{key}' entry)")
    if not isinstance(payload.get("train_state", {}), dict):
        raise MusicgenError(f"{path}: 'train_state' must be a mapping")
    payload["path"] = str(path)
    return _checked(payload, str(path), str(path))


def short(text: str, limit: int = 120) -> str:
    """`text` cut to about `limit` characters at a word boundary ("..." marks the cut)."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut} ..."


def _checked(payload: dict, config_where: str, weights_where: str) -> dict:
    """A payload whose config passes `config.validate` (sizes checked before any allocation)
    and whose weights are named tensors; each error names the file it comes from."""
    try:
        config_from_dict(payload["config"])
    except MusicgenError as exc:
        raise MusicgenError(f"{config_where}: {exc}") from None
    for name, tensor in payload["model"].items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise MusicgenError(f"{weights_where}: weight {name!r} is not a tensor")
    return payload


def checked_weights(
    model: nn.Module, weights: dict[str, torch.Tensor], where: str
) -> dict[str, torch.Tensor]:
    """`weights` as float32 where the model is floating, after checking each tensor the model
    also has: a float (not bool or int) where the model has a float, the model's shape, and only
    finite values. Names the model lacks or misses are left to `load_state_dict`."""
    own = model.state_dict()
    out = {}
    for name, tensor in weights.items():
        mine = own.get(name)
        if mine is not None:
            _check_tensor(name, tensor, mine, where)
        out[name] = tensor.float() if tensor.is_floating_point() else tensor
    return out


def check_names(model: nn.Module, weights: dict[str, torch.Tensor], where: str) -> None:
    """The weights' names are the model's: the first missing or foreign tensor is named (with
    how many more), as `load_state_dict`'s first line names none."""
    own = set(model.state_dict())
    for names, what in (
        (sorted(own - set(weights)), "is missing (the saved config's model needs it)"),
        (sorted(set(weights) - own), "is not a tensor of the saved config's model"),
    ):
        if names:
            more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
            raise MusicgenError(f"{where}: weights do not fit: tensor {names[0]} {what}{more}")


def _check_tensor(name: str, tensor: torch.Tensor, mine: torch.Tensor, where: str) -> None:
    if mine.is_floating_point() and tensor.dtype not in FLOAT_DTYPES:
        raise MusicgenError(
            f"{where}: tensor {name} is {str(tensor.dtype).removeprefix('torch.')}, "
            "not floating point"
        )
    if not mine.is_floating_point() and tensor.dtype != mine.dtype:
        raise MusicgenError(
            f"{where}: tensor {name} is {str(tensor.dtype).removeprefix('torch.')}, "
            f"not {str(mine.dtype).removeprefix('torch.')}"
        )
    if tuple(tensor.shape) != tuple(mine.shape):
        raise MusicgenError(
            f"{where}: weights do not fit: tensor {name} has shape {list(tensor.shape)}, "
            f"the config's model needs {list(mine.shape)}"
        )
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise MusicgenError(f"{where}: tensor {name} holds NaN or infinite values")


def save_model_folder(
    folder: str | Path,
    weights: dict[str, torch.Tensor],
    config: dict,
    tokenizer: dict,
    train_state: dict | None = None,
    card: str | None = None,
) -> Path:
    """Write a model folder from plain parts (a checkpoint payload's); weights are stored as
    they are (a half-precision payload stays half). Each file is written atomically."""
    from safetensors.torch import save

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in weights.items()}
    data = save(tensors, metadata={"format": FOLDER_FORMAT})
    with atomic_path(folder / "model.safetensors") as tmp:
        tmp.write_bytes(data)
    meta = {
        "format": FOLDER_FORMAT,
        "version": __version__,
        "config": config,
        "train_state": json_summary(train_state or {}),
    }
    atomic_write_text(folder / "config.json", json.dumps(meta, indent=1) + "\n")
    atomic_write_text(folder / "tokenizer.json", json.dumps(tokenizer, indent=1) + "\n")
    if card is not None:
        atomic_write_text(folder / "README.md", card)
    return folder


def convert_to_folder(src: str | Path, folder: str | Path) -> Path:
    """A `.pt` checkpoint -> a model folder with bit-identical weights (checked after writing)."""
    payload = read_payload(src)
    folder = save_model_folder(
        folder,
        payload["model"],
        payload["config"],
        payload["tokenizer"],
        payload.get("train_state") or {},
    )
    back = read_model_folder(folder)["model"]
    same = back.keys() == payload["model"].keys() and all(
        back[k].dtype == v.dtype and torch.equal(back[k], v) for k, v in payload["model"].items()
    )
    if not same:
        raise MusicgenError(f"{folder}: weights differ from {src} after conversion")
    forms = (
        Path(src).parent / "forms.json"
    )  # a run's training forms (generation.controls.form_plan)
    if forms.is_file():
        atomic_write_text(Path(folder) / "forms.json", forms.read_text())
    return folder


def json_summary(train_state: dict) -> dict:
    """The entries of a training state that config.json can hold: step, best loss, summaries;
    the optimiser and scaler state (tensors) stay in the `.pt`, as do non-finite numbers."""
    out = {}
    for key, value in train_state.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            continue
        out[key] = value
    return out


def read_model_folder(folder: Path) -> dict:
    """A model folder as the same payload dict a `.pt` checkpoint gives."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    missing = [n for n in FOLDER_FILES if not (folder / n).is_file()]
    if missing:
        raise MusicgenError(f"{folder}: model folder lacks {', '.join(missing)}")
    meta = _read_json(folder / "config.json")
    tokenizer = _read_json(folder / "tokenizer.json")
    if not isinstance(meta, dict) or meta.get("format") != FOLDER_FORMAT:
        raise MusicgenError(f"{folder}: not a musicgen model folder (format tag missing)")
    for key, kind in (("config", dict), ("train_state", (dict, type(None)))):
        if not isinstance(meta.get(key), kind):
            raise MusicgenError(f"{folder / 'config.json'}: '{key}' must be a mapping")
    if not isinstance(tokenizer, dict):
        raise MusicgenError(f"{folder / 'tokenizer.json'}: must be a JSON object")
    payload = {
        "format": meta["format"],
        "version": str(meta.get("version", "")),
        "path": str(folder),
        "config": meta["config"],
        "tokenizer": tokenizer,
        "model": {},
        "train_state": meta.get("train_state") or {},
    }
    _checked(payload, str(folder / "config.json"), "")  # the sizes, before the weights load
    try:
        payload["model"] = load_file(str(folder / "model.safetensors"))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MusicgenError(f"{folder}/model.safetensors: not readable ({reason[:120]})") from None
    return payload


def _read_json(path: Path):
    """A small JSON file (`MAX_JSON_BYTES` at most), or a one-line error naming it."""
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        raise MusicgenError(
            f"{path}: {size / 2**20:.0f} MB is too large (the limit is "
            f"{MAX_JSON_BYTES / 2**20:g} MB)"
        )
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MusicgenError(f"{path}: not JSON ({reason[:120]})") from None


def checkpoint_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of a checkpoint or model folder, without building its model."""
    return payload_tokenizer(read_payload(path))


def payload_tokenizer(payload: dict) -> Tokenizer:
    """The payload's tokenizer; a bad description is an error naming its file."""
    where = Path(payload["path"])
    if where.is_dir():
        where = where / "tokenizer.json"
    try:
        return load_tokenizer(payload["tokenizer"])
    except MusicgenError as exc:
        raise MusicgenError(f"{where}: {exc}") from None


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Loaded:
    """Rebuild model (in eval mode, on `device`) and tokenizer from a `.pt` checkpoint, a run
    folder or a model folder alone."""
    from musicgen.memory import check_generation
    from musicgen.model import build_model

    payload = read_payload(path)
    config = config_from_dict(payload["config"])
    tokenizer = payload_tokenizer(payload)
    if config.model.vocab_size != tokenizer.vocab_size:
        raise MusicgenError(
            f"{path}: model vocabulary ({config.model.vocab_size}) does not match its tokenizer "
            f"({tokenizer.vocab_size})"
        )
    check_generation(config.model, str(path))  # before the model is built
    model = build_model(config.model, tokenizer)
    where = payload["path"]
    if Path(where).is_dir():
        where = str(Path(where) / "model.safetensors")
    # half files mix float16 and float32 tensors; the model computes in float32
    weights = checked_weights(model, payload["model"], where)
    check_names(model, weights, where)
    try:
        model.load_state_dict(weights)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise MusicgenError(f"{path}: weights do not fit the saved config ({first})") from None
    model.to(device).eval()
    meta = {"format": payload["format"], "version": payload["version"], "path": payload["path"]}
    return Loaded(model, tokenizer, config, payload.get("train_state") or {}, meta)
