"""What every evaluation task shares: strict-JSON output and the MIDI files of a folder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from musicgen.data.prepare import MIDI_SUFFIXES
from musicgen.errors import MusicgenError
from musicgen.io import atomic_write_text


def jsonable(x):
    """Numbers, lists and dicts with NaN/inf replaced by None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def write_json(path: Path, data: dict) -> Path:
    atomic_write_text(path, json.dumps(jsonable(data), indent=1) + "\n")
    return path


def midi_files(folder: str | Path) -> list[Path]:
    """MIDI files under `folder` (recursively, sorted); an empty or missing folder is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MusicgenError(f"{folder}: not a folder")
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in MIDI_SUFFIXES)
    if not files:
        raise MusicgenError(f"{folder}: no .mid/.midi files found")
    return files
