"""Where the shipped files are: presets, model folders and demo prompts.

In a source checkout they are the repository's `configs/`, `checkpoints/` and `data/demo/`. A wheel
carries the same files inside the package, under `musicgen/_shipped/` (see pyproject.toml), so an
installed `musicgen` finds its presets by name and runs `musicgen demo` with no checkout.
"""

from __future__ import annotations

from pathlib import Path

from musicgen.errors import MusicgenError

PACKAGE = Path(__file__).resolve().parent
SHIPPED = {"configs": "configs", "checkpoints": "checkpoints", "demo": "data/demo"}


def shipped_dir(kind: str) -> Path:
    """The folder of one kind of shipped file: inside the package if installed from a wheel,
    else in the source checkout."""
    inside = PACKAGE / "_shipped" / kind
    return inside if inside.is_dir() else PACKAGE.parent / SHIPPED[kind]


def preset_names() -> list[str]:
    root = shipped_dir("configs")
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.glob("*/*.yaml"))


def resolve_config(spec: str | Path) -> Path:
    """A config path as given, else a preset by name (`pop909/small` or `pop909/small.yaml`)."""
    path = Path(spec)
    if path.is_file():
        return path
    name = str(spec).removesuffix(".yaml").removeprefix("configs/")
    preset = shipped_dir("configs") / f"{name}.yaml"
    if preset.is_file():
        return preset
    raise MusicgenError(
        f"{spec}: config file not found, nor a preset of that name "
        f"(presets: {', '.join(preset_names())})"
    )


def resolve_checkpoint(spec: str | Path) -> Path:
    """A checkpoint path as given, else a shipped model by name (`pop909_sine_spe_gated`)."""
    path = Path(spec)
    if path.exists():
        return path
    shipped = shipped_dir("checkpoints") / str(spec).removeprefix("checkpoints/")
    return shipped if shipped.is_dir() else path
