"""Output files of generation: names claimed exclusively, pieces written atomically.

Several runs writing into one folder at once (8 `generate` runs, a web UI's workers) must not
take the same name and must not lose a file. An existence check followed by a rename is a race:
two processes both see `x_1_0.mid` free and one overwrites the other. `claim` instead creates
each output name with `O_CREAT | O_EXCL` (the file system lets exactly one creator win; the loser
moves on to `x_1_0-1.mid`), the atomic write (`musicgen.io`) then replaces that empty
placeholder, and a failed write removes it again, so no empty file outlives an error.
`write_pieces` is the one "write results" step of `generate`, `continue` and the demo.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from musicgen.errors import MusicgenError
from musicgen.generation.api.tokenfile import write_token_file
from musicgen.io import ensure_dir, write_error, write_score

if TYPE_CHECKING:
    import symusic

    from musicgen.generation.api.music import Music
    from musicgen.tokenizers.base import Tokenizer

MAX_CLAIM_TRIES = 100_000  # names `stem`, `stem-1`, ... tried before giving up


def write_midi(score: symusic.Score, path: str | Path) -> Path:
    """Write atomically and verified: a crash or a full disk never leaves a broken file."""
    return write_score(score, path)


def checkpoint_stem(path: str | Path) -> str:
    """Output names start with the model's name: runs/pop/best.pt -> pop_best, x/model.pt -> x,
    a model folder -> its name."""
    path = Path(path)
    if path.is_dir():
        return path.name
    if path.stem == "model":
        return path.parent.name or "model"
    if path.stem in ("last", "best") and path.parent.name:
        return f"{path.parent.name}_{path.stem}"
    return path.stem


def _create(path: Path) -> bool:
    """Create `path` empty if no file has that name (atomically); False if one has."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
    except FileExistsError:
        return False
    except OSError as exc:
        raise write_error(path, exc) from None
    os.close(fd)
    return True


def release(base: Path, suffixes: tuple[str, ...]) -> None:
    """Remove the placeholders `claim` made for `base` that are still empty."""
    for s in suffixes:
        path = base.with_name(base.name + s)
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
                path.unlink()


def claim(folder: Path, stem: str, suffixes: tuple[str, ...], overwrite: bool = False) -> Path:
    """`folder/stem` (without suffix), or `stem-1`, `stem-2`, ...: the first base whose names
    `base + suffix` this call could create, every one of them, as empty placeholders. With
    `overwrite`, `folder/stem` as it is (its files are replaced)."""
    base = ensure_dir(folder) / stem
    if overwrite:
        return base
    for n in range(MAX_CLAIM_TRIES):
        base = folder / (stem if n == 0 else f"{stem}-{n}")
        made: list[str] = []
        for s in suffixes:
            if not _create(base.with_name(base.name + s)):
                break
            made.append(s)
        else:
            return base
        release(base, tuple(made))
    raise MusicgenError(f"{folder / stem}: {MAX_CLAIM_TRIES} names taken; give another --out")


def write_pieces(
    pieces: Iterable[Music],
    out_dir: str | Path,
    stem: str,
    tokenizer: Tokenizer,
    *,
    save_tokens: bool = False,
    overwrite: bool = False,
    render: bool = False,
    record: dict | None = None,
    report: Callable[[str], None] = print,
) -> list[Path]:
    """Write each piece as `<stem>_<seed>_<i>.mid` (+ `.json` of its ids with `save_tokens`,
    with `record` added; + piano roll and audio with `render`) as it arrives; never replaces a
    file unless `overwrite`. Returns every file written."""
    folder = ensure_dir(out_dir)
    suffixes = (".mid", ".json") if save_tokens else (".mid",)
    written: list[Path] = []
    for i, music in enumerate(pieces):
        base = claim(folder, f"{stem}_{music.seed}_{i}", suffixes, overwrite)
        try:
            written.append(music.save(base.with_name(base.name + ".mid")))
            if save_tokens:
                info = {"prompt_len": music.prompt_len, **(record or {}), "seed": music.seed}
                info.update(index=i, stop=music.stop, grammar_errors=music.errors)
                path = base.with_name(base.name + ".json")
                written.append(write_token_file(path, tokenizer, music.ids, **info))
        except BaseException:
            if not overwrite:
                release(base, suffixes)
            raise
        stop = music.stop + ("; no new note" if music.new_notes == 0 else "")
        report(f"wrote {written[-len(suffixes)]} ({music.sampled} ids sampled, stop: {stop})")
        if render:
            written += _render(written[-len(suffixes)], folder, report)
    return written


def _render(midi: Path, folder: Path, report: Callable[[str], None]) -> list[Path]:
    from musicgen.generation.api.render import render_midi

    paths = render_midi(midi, folder, png=True, wav=True)
    for path in paths:
        report(f"wrote {path}")
    return paths
