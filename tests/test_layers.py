"""The package tree shows the layers data flows through, and imports only point down them:
MIDI -> tokens (base) -> prepared data -> model -> checkpoints and measures -> training ->
generation -> evaluation and cards -> the faces (CLI, studio). Function-level imports count."""

from __future__ import annotations

import ast

from paths import ROOT

PACKAGE = ROOT / "musicgen"
# lowest first; a module may import its own layer and those below it
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "base",
        (
            "errors",
            "io",
            "limits",
            "config",
            "config_ranges",
            "device",
            "resources",
            "allocator",
            "memory",
            "tokenizers",
        ),
    ),
    ("data", ("data",)),
    ("model", ("model",)),
    ("checkpoints and measures", ("checkpoint", "measures")),
    ("training", ("train",)),
    ("generation", ("generation",)),
    ("evaluation", ("evaluate", "cards")),
    ("faces", ("cli", "commands", "studio")),
]
# the modules at the package root, and why each is there rather than in a layer's package
ROOT_MODULES = {
    "__init__": "the public API, loaded lazily",
    "allocator": "every command keeps freed memory (set by cli, used by the bench scripts)",
    "checkpoint": "the file format every layer above the model reads or writes",
    "cli": "the one entry point",
    "config": "typed configs, read by every layer",
    "config_ranges": "the configs' range checks, re-exported by config",
    "device": "device and precision choices shared by training, generation and evaluation",
    "errors": "the one error type and range checks",
    "io": "atomic writes and safe reads",
    "limits": "size limits and the sampling ranges checked by every face",
    "memory": "what a model needs in memory, checked by training and loading before allocating",
    "resources": "presets and shipped models, in a checkout or a wheel",
}


def layer(parts: tuple[str, ...]) -> int | None:
    for i, (_, names) in enumerate(LAYERS):
        if parts and parts[0] in names:
            return i
    return None


def imported(tree: ast.AST) -> list[tuple[str, ...]]:
    """The musicgen modules (as name parts below `musicgen`) a module imports anywhere."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("musicgen"):
            below = tuple(node.module.split(".")[1:])
            out += [below] if below else [(a.name,) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [
                tuple(a.name.split(".")[1:]) for a in node.names if a.name.startswith("musicgen.")
            ]
    return out


def test_no_import_points_up_a_layer():
    up = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts == ("__init__",):
            continue
        mine = layer(parts)
        assert mine is not None, f"{path}: in no layer; add its package to LAYERS"
        for target in imported(ast.parse(path.read_text(), str(path))):
            theirs = layer(target)
            if theirs is not None and theirs > mine:
                up.append(f"{'/'.join(parts)} imports {'.'.join(target)}")
    assert not up, up


def test_the_root_holds_only_what_every_layer_shares():
    found = {p.stem for p in PACKAGE.glob("*.py")}
    assert found == set(ROOT_MODULES), sorted(found ^ set(ROOT_MODULES))
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == {n for _, names in LAYERS for n in names} - set(ROOT_MODULES)


def test_the_wheel_ships_every_package():
    import tomllib

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = {
        "musicgen." + ".".join(p.relative_to(PACKAGE).parts) if p != PACKAGE else "musicgen"
        for p in [PACKAGE, *PACKAGE.rglob("*")]
        if (p / "__init__.py").is_file()
    }
    assert found <= set(listed), sorted(found - set(listed))


def test_a_module_importing_up_is_caught():
    """The check itself: a model module importing generation is an upward import."""
    tree = ast.parse("def f():\n    from musicgen.generation.api import load\n")
    targets = imported(tree)
    assert targets == [("generation", "api")]
    assert layer(targets[0]) > layer(("model", "attention"))
