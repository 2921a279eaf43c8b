"""What the studio does, without the page: models, upload checks, sessions, jobs.

The page (`app.py`) only turns widgets into these calls and their results into widgets, so this
module is what the tests drive without a browser. Every job calls the public generation API
(`musicgen.load`, `Model.generate_many`, `Model.continue_many`, `Model.prompt`) with its
`progress=` and `cancel=` hooks, exactly as the CLI does.

Safety: the page names a model by its label only; `ModelCache` maps labels to the folders the
studio was started with (the shipped models and `--checkpoint` folders), so no other server path
can be reached. Every value and upload is checked first (`inputs.py`: size, MIDI header, parse,
`musicgen.limits`, notes).
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.generation.api import Model, Music, checkpoint_stem, load
from musicgen.generation.render import piano_roll, synthesize
from musicgen.generation.request import SCRATCH_BARS
from musicgen.generation.sample import SamplingOptions
from musicgen.measures.metrics import load_notes, notes_from_score
from musicgen.resources import resolve_checkpoint, shipped_dir
from musicgen.studio.inputs import (
    MAX_AUDIO_SECONDS,
    MAX_BARS,
    MAX_NEW_BARS,
    MAX_NUM,
    SAMPLING,
    SERVER_MB,
    SESSION_MB,
    check_chords,
    check_upload,
    given,
    prompt_length,
    random_seed,
    request,
    whole,
)

MAX_SESSION_PIECES = 40  # older pieces of a page are forgotten (and their files deleted)
SESSIONS = "sessions"  # the folder under the studio's root that holds every page's results
DEFAULT_MODEL = "pop909_sine_spe_gated"


def shipped_models() -> dict[str, Path]:
    """The model folders shipped with musicgen, by name."""
    root = shipped_dir("checkpoints")
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if (p / "config.json").is_file()}


def model_choices(extra: list[str | Path] = ()) -> dict[str, Path]:
    """Label -> model path: the `--checkpoint` models first (in order), then the shipped ones."""
    shipped = shipped_models()
    choices: dict[str, Path] = {}
    for spec in extra:
        path = resolve_checkpoint(spec)
        if not path.exists():
            raise MusicgenError(f"{spec}: model not found, nor a shipped model's name")
        label = checkpoint_stem(path)
        if label in choices or (label in shipped and shipped[label].resolve() != path.resolve()):
            label = f"{label} ({path})"
        choices[label] = path
    for label, path in shipped.items():
        if not any(p.resolve() == path.resolve() for p in choices.values()):
            choices[label] = path
    if not choices:
        raise MusicgenError("studio: no model to serve (give --checkpoint FOLDER)")
    return choices


class ModelCache:
    """The models this studio may serve, each loaded once on first use (thread-safe)."""

    def __init__(self, choices: dict[str, Path], device: str = "cpu"):
        self.choices = dict(choices)
        self.device = device
        self._models: dict[str, Model] = {}
        self._lock = threading.Lock()

    def path(self, label: str) -> Path:
        if label not in self.choices:
            raise MusicgenError(
                f"model: {label!r} is not one of this studio's models ({', '.join(self.choices)})"
            )
        return self.choices[label]

    def get(self, label: str) -> Model:
        path = self.path(label)
        with self._lock:
            if label not in self._models:
                try:
                    self._models[label] = load(path, device=self.device)
                except MusicgenError as exc:
                    raise MusicgenError(f"model {label}: cannot be loaded ({exc})") from None
                except Exception as exc:  # a broken folder must not take the page down
                    raise MusicgenError(
                        f"model {label}: cannot be loaded ({type(exc).__name__}: {exc})"
                    ) from None
            return self._models[label]

    def card(self, label: str) -> str:
        """The model card (README.md of the folder), or a line saying there is none."""
        path = self.path(label)
        readme = (path if path.is_dir() else path.parent) / "README.md"
        if readme.is_file():
            return readme.read_text(encoding="utf-8", errors="replace")
        return f"*{label}: this model folder has no model card (README.md).*"


def has_chord_tokens(model: Model) -> bool:
    """Whether the model's vocabulary has Chord tokens (what a chord progression controls)."""
    tok = model.tokenizer
    return any(tok.token_name(i).startswith("Chord") for i in range(tok.vocab_size))


def sampling_defaults(model: Model) -> dict:
    """The page's sampling values (`inputs.SAMPLING`) that the API uses for this model when
    none are given."""
    opts = model.options()
    return {k: getattr(opts, k) for k in SAMPLING}


def page_defaults(models: ModelCache, label: str) -> dict:
    """The sampling values a page opens with: the model's (`sampling_defaults`), or plain
    sampling's where it cannot be loaded (choosing it then shows why)."""
    try:
        return sampling_defaults(models.get(label))
    except MusicgenError:
        return {k: getattr(SamplingOptions(), k) for k in SAMPLING}


# ---------------------------------------------------------------------------------------------
# one page's results


@dataclass
class Piece:
    """One result as the page shows it: files in the session folder and what made it."""

    label: str
    midi: Path
    png: Path
    audio: Path | None
    seed: int | None
    info: dict = field(default_factory=dict)

    def files(self) -> list[Path]:
        return [p for p in (self.midi, self.audio) if p is not None]


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files under `folder` (0 when it is gone)."""
    total = 0
    for top, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


class Session:
    """One open page: its own folder, its pieces and its stop flag. `gr.State` deep-copies its
    initial value for every page, so a copy is a fresh, empty session under the same root.
    The folder's name is an unguessable token: its files' addresses are that page's alone."""

    def __init__(self, root: str | Path | None = None, budget_mb: float = SESSION_MB):
        self.root = Path(root) if root is not None else None
        self.budget_mb = budget_mb
        self.folder: Path | None = None
        self.pieces: list[Piece] = []
        self.running: set[threading.Event] = set()  # one stop flag per running job
        self.made = 0

    def __deepcopy__(self, memo) -> Session:
        return Session(self.root, self.budget_mb)

    def dir(self) -> Path:
        if self.folder is None:
            base = (self.root or Path.cwd()) / SESSIONS
            base.mkdir(parents=True, exist_ok=True, mode=0o700)
            folder = base / secrets.token_urlsafe(24)
            folder.mkdir(mode=0o700)
            self.folder = folder
        return self.folder

    def start_job(self, flag: threading.Event | None = None) -> threading.Event:
        """A stop flag for a new job (a Stop pressed earlier does not stop this one); `flag`:
        the page's own (set when Gradio cancels the job)."""
        flag = threading.Event() if flag is None else flag
        self.running.add(flag)
        return flag

    def end_job(self, flag: threading.Event) -> None:
        self.running.discard(flag)

    def stop(self) -> int:
        """Set the stop flag of every running job of this page; returns how many."""
        for flag in list(self.running):
            flag.set()
        return len(self.running)

    def next_stem(self, kind: str) -> str:
        self.made += 1
        return f"{kind}_{self.made:03d}"

    def add(self, piece: Piece) -> Piece:
        """Keep `piece`; the oldest pieces go (files deleted) past the count or disk budget."""
        self.pieces.append(piece)
        while len(self.pieces) > MAX_SESSION_PIECES or (
            len(self.pieces) > 1 and self.bytes() > self.budget_mb * 1e6
        ):
            old = self.pieces.pop(0)
            for p in (old.midi, old.png, old.audio):
                if p is not None:
                    p.unlink(missing_ok=True)
        return piece

    def bytes(self) -> int:
        return 0 if self.folder is None else folder_bytes(self.folder)

    def find(self, label: str | None) -> Piece | None:
        return next((p for p in self.pieces if p.label == label), None)

    def close(self) -> None:
        """Stop its jobs and delete its files (the page was closed or its session expired)."""
        self.stop()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.pieces.clear()


def check_disk(session: Session, server_mb: float = SERVER_MB) -> None:
    """Refuse a job while the studio's folder (every page's files and uploads) is over its
    budget: pages that close or expire free it."""
    if session.root is None:
        return
    used = folder_bytes(session.root)
    if used > server_mb * 1e6:
        raise MusicgenError(
            f"studio: the server's disk budget ({server_mb:g} MB) is full "
            f"({used / 1e6:.0f} MB in use); try again later"
        )


def render(music: Music, session: Session, kind: str, label: str, info: dict) -> Piece:
    """Write a piece's MIDI, piano roll and audio into the session folder."""
    folder = session.dir()
    stem = session.next_stem(kind)
    midi = music.save(folder / f"{stem}.mid")
    title = f"{label} ({midi.name})"
    png = piano_roll(load_notes(midi), folder / f"{stem}.png", title=title)
    audio = save_audio(music.score, folder / f"{stem}.wav")
    return session.add(Piece(f"{stem}: {label}", midi, png, audio, music.seed, info))


def save_audio(score, path: Path, seconds: float | None = None) -> Path | None:
    """The piece's WAV, its first `seconds` only (default `MAX_AUDIO_SECONDS`: a prompt's slow
    tempo cannot make a huge file); written once, where the page serves it from."""
    seconds = MAX_AUDIO_SECONDS if seconds is None else seconds
    timed = score.to("second")
    if timed.end() > seconds:
        score = timed.clip(0, seconds, clip_end=True).to("tick")
    return synthesize(score, path)


def run_generate(
    model: Model,
    session: Session,
    model_label: str,
    *,
    bars=SCRATCH_BARS,
    num=1,
    seed=None,
    chords: str = "",
    progress=None,
    cancel: threading.Event | None = None,
    **sampling_given,
) -> list[Piece]:
    """`num` pieces of `bars` bars from scratch, rendered into the session; `cancel` set (Stop,
    a cancelled or closed request) stops the sampler at its next step."""
    bars = whole("bars", bars, 1, MAX_BARS, required=True)
    num = whole("num", num, 1, MAX_NUM) or 1
    asked = request(
        num=num, bars=bars, seed=random_seed(seed), chords=check_chords(chords), **sampling_given
    ).seeded()
    pieces = _run(model, session, asked, progress, cancel)
    seed = asked.seed
    info = {"model": model_label, "bars": bars, "seed": seed, **given(asked)}
    return [
        render(p, session, "gen", f"{model_label}, seed {seed}, piece {i + 1}, {bars} bars", info)
        for i, p in enumerate(pieces)
    ]


def _run(model: Model, session: Session, asked, progress, cancel, prompt=None) -> list[Music]:
    """The request's pieces (`Model.pieces`) under a stop flag of the session's."""
    check_disk(session)
    flag = session.start_job(cancel)
    try:
        return list(model.pieces(asked, prompt=prompt, progress=progress, cancel=flag))
    finally:
        session.end_job(flag)


def run_continue(
    model: Model,
    session: Session,
    model_label: str,
    path,
    *,
    mode: str = "bars",
    prompt_bars=2,
    seconds=None,
    new_bars=4,
    num=1,
    seed=None,
    progress=None,
    cancel: threading.Event | None = None,
    **sampling_given,
) -> list[Piece]:
    """`num` continuations of the uploaded prompt, rendered into the session."""
    check_upload(path, model.tokenizer.name)
    length = prompt_length(mode, prompt_bars, seconds)
    new_bars = whole("new_bars", new_bars, 1, MAX_NEW_BARS, required=True)
    num = whole("num", num, 1, MAX_NUM) or 1
    asked = request(
        "new_bars", num=num, bars=new_bars, seed=random_seed(seed), **sampling_given
    ).seeded()
    prompt = model.prompt(path, **length)
    pieces = _run(model, session, asked, progress, cancel, prompt)
    what = f"{length['bars']} bars" if "bars" in length else f"{length['seconds']:g} s"
    name = Path(path).name
    info = {"model": model_label, "prompt": name, **length, "new_bars": new_bars}
    label = f"{model_label} continues {what} of {name}, seed {asked.seed}"
    return [
        render(
            p,
            session,
            "cont",
            f"{label}, piece {i + 1}",
            {**info, "seed": asked.seed, **given(asked)},
        )
        for i, p in enumerate(pieces)
    ]


def prompt_preview(model: Model, session: Session, path, mode="bars", bars=2, seconds=None):
    """The piano roll (PNG path) of the prompt exactly as the model will be fed it."""
    check_upload(path, model.tokenizer.name)
    prompt = model.prompt(path, **prompt_length(mode, bars, seconds))
    folder = session.dir()
    stem = session.next_stem("prompt")
    title = f"prompt: {Path(path).name}, {prompt.bars} bars as the model reads them"
    return piano_roll(notes_from_score(prompt.notes), folder / f"{stem}.png", title=title)
