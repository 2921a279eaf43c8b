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

# Over 400 lines on purpose: what a page may reach and what its jobs write, read in one place.

from __future__ import annotations

import os
import secrets
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from musicgen.errors import Cancelled, MusicgenError
from musicgen.generation.api import Model, Music, apply_tempo, checkpoint_stem, load
from musicgen.generation.prompt import Prompt
from musicgen.generation.render import piano_roll, synthesize
from musicgen.generation.sample import SamplingOptions
from musicgen.measures.metrics import load_notes, notes_from_score
from musicgen.resources import resolve_checkpoint, shipped_dir
from musicgen.studio.controls import check_form, settle_form
from musicgen.studio.inputs import (
    MAX_AUDIO_SECONDS,
    MAX_BARS,
    MAX_NEW_BARS,
    MAX_NUM,
    PAGE,
    SAMPLING,
    SERVER_MB,
    SESSION_MB,
    check_chords,
    check_tempo,
    check_transpose,
    check_upload,
    given,
    or_page,
    prompt_length,
    random_seed,
    request,
    whole,
)
from musicgen.studio.partial import Recorder, kept_pieces
from musicgen.studio.player import Roll, roll_of

MAX_SESSION_PIECES = 40  # older pieces of a page are forgotten (and their files deleted)
SESSIONS = "sessions"  # the folder under the studio's root that holds every page's results
DEFAULT_MODEL = "pop909_sine_spe_gated"
# The shipped models as a musician meets them: a name, and what to expect (the card, folded
# under it, says how and on what each was trained).
TITLES = {
    "pop909_sine_spe_gated": "Pop piano with chords",
    "pop909_ape": "Pop piano with chords (second model)",
    "maestro_sine_spe_gated": "Classical piano (experimental, 5 M parameters)",
    "groove_sine_spe_gated": "Band groove (experimental: synthetic training data)",
}
SUMMARIES = {
    "pop909_sine_spe_gated": "Pop piano, melody and accompaniment in 4/4, learnt from the 909 "
    "songs of POP909. It follows a chord progression you type, bar by bar.",
    "pop909_ape": "The same pop songs learnt by an earlier model, kept to compare with the "
    "first; it follows chords too.",
    "maestro_sine_spe_gated": "Expressive classical piano learnt from MAESTRO performances. A "
    "small model: expect sketches more than finished pieces. No chord control.",
    "groove_sine_spe_gated": "Bass, drums and piano together. Experimental: learnt from 300 "
    "synthetic grooves; from scratch it often plays one drum under a held bass note, so give "
    "it a prompt to continue.",
}


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

    def title(self, label: str) -> str:
        """The model's name for musicians (its folder's name for a model the studio was not
        shipped with)."""
        return TITLES.get(label, label)

    def summary(self, label: str) -> str:
        """What to expect of the model, in one or two sentences (the card's own first line for
        a model the studio was not shipped with)."""
        if label in SUMMARIES:
            return SUMMARIES[label]
        lines = [x.strip() for x in self.card(label).splitlines()]
        return next((x for x in lines if x and not x.startswith(("#", "*"))), "")

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


def model_defaults(model: Model) -> dict:
    """Every page value a request leaves to the model or the page: the sampling options the
    model uses (`sampling_defaults`) and the page's own values (`inputs.PAGE`)."""
    return {**PAGE, **sampling_defaults(model)}


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
    roll: Roll | None = None  # what the player draws
    bars: int | None = None  # whole bars the piece holds (prompt included)
    stopped_at: int | None = None  # new bars written when Stop ended the job (None: finished)

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
        self.shown: list[Piece] = []  # the variations the page shows side by side
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
            self.shown = [p for p in self.shown if p is not old]
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


@dataclass
class Look:
    """How a result is handed over, after sampling: its tempo (qpm; None keeps the model's or
    the prompt's) and a transposition (semitones, drums untouched)."""

    tempo: float | None = None
    transpose: int = 0

    @classmethod
    def checked(cls, tempo=None, transpose=None) -> Look:
        return cls(check_tempo(tempo), check_transpose(transpose) or 0)

    def apply(self, music: Music) -> None:
        apply_tempo(music.score, self.tempo)
        if self.transpose:
            for track in music.score.tracks:
                if not track.is_drum:
                    for note in track.notes:
                        note.pitch = min(max(note.pitch + self.transpose, 0), 127)


NOTE_NAMES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")
SUFFIXES = {"maj": "", "min": "m", "min7": "m7", "maj7": "maj7", "hdim7": "m7b5", "7": "7"}


def chord_name(harte: str, transpose: int = 0) -> str:
    """A tokenizer's chord ('A:min', Harte) as a chord symbol ('Am'), moved `transpose`
    semitones."""
    root, _, quality = harte.partition(":")
    sharps = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
    if root not in sharps:
        return harte
    name = NOTE_NAMES[(sharps.index(root) + transpose) % 12]
    return name + SUFFIXES.get(quality, quality)


def chords_per_bar(model: Model, ids: list[int], transpose: int = 0) -> list[str]:
    """The chords a piece's tokens name, one label per bar ('' where none begins), for the
    models that write chords (the pop models); [] for the others."""
    from musicgen.generation.progression import chord_events, chords_unsupported

    tok = model.tokenizer
    if chords_unsupported(tok) is not None:
        return []
    events = chord_events(tok, ids)
    if not events:
        return []
    out: list[list[str]] = [[] for _ in range(events[-1][0] + 1)]
    for bar, _, cid in events:
        name = chord_name(tok.token_name(cid).removeprefix("Chord_"), transpose)
        if not out[bar] or out[bar][-1] != name:  # a chord written again is the same chord
            out[bar].append(name)
    return [" ".join(names) for names in out]


def render(
    music: Music,
    session: Session,
    kind: str,
    label: str,
    info: dict,
    model: Model | None = None,
    prompt: Prompt | None = None,
    look: Look | None = None,
) -> Piece:
    """Write a piece's MIDI, piano roll and audio into the session folder, with what its
    player draws (chord names per bar, where the prompt ends)."""
    look = look or Look()
    chords = chords_per_bar(model, music.ids, look.transpose) if model is not None else []
    look.apply(music)
    folder = session.dir()
    stem = session.next_stem(kind)
    midi = music.save(folder / f"{stem}.mid")
    title = f"{label} ({midi.name})"
    png = piano_roll(load_notes(midi), folder / f"{stem}.png", title=title)
    audio = save_audio(music.score, folder / f"{stem}.wav")
    end = None if prompt is None else prompt.end_tick / prompt.notes.ticks_per_quarter
    roll = roll_of(music.score, chords, end, prompt.beats if prompt is not None else 4)
    piece = Piece(f"{stem}: {label}", midi, png, audio, music.seed, info, roll)
    return session.add(piece)


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
    bars=None,
    num=None,
    seed=None,
    chords=None,
    form=None,
    tempo=None,
    transpose=None,
    progress=None,
    cancel: threading.Event | None = None,
    **sampling_given,
) -> list[Piece]:
    """`num` pieces of `bars` bars from scratch, rendered into the session (None: the page's
    value, `inputs.PAGE`; a sampling option None: the model's own); a `form` sets the bars
    (`controls`). `cancel` set by Stop ends the sampler at its next step and keeps the whole
    bars written; set because the page or the request is gone, it ends the job with nothing
    kept."""
    bars = whole("bars", or_page("bars", bars), 1, MAX_BARS, required=True)
    num = whole("num", or_page("num", num), 1, MAX_NUM) or 1
    look = Look.checked(tempo, transpose)
    asked = request(
        num=num, bars=bars, seed=random_seed(seed), chords=check_chords(chords),
        form=check_form(form), **sampling_given,
    ).seeded()  # fmt: skip
    asked, shape = settle_form(model, asked)
    seed, bars = asked.seed, asked.bars
    info = {"model": model_label, "bars": bars, "seed": seed, **given(asked)}
    info |= {"form": shape} if shape else {}
    out = []
    for i, (music, stopped) in enumerate(_run(model, session, asked, progress, cancel)):
        what = f"{bars} bars" if stopped is None else f"stopped at bar {stopped} of {bars}"
        what = f"form {shape}, {what}" if shape else what
        label = f"{model_label}, seed {seed}, piece {i + 1}, {what}"
        piece = render(music, session, "gen", label, info, model, None, look)
        piece.stopped_at, piece.bars = stopped, bars if stopped is None else stopped
        out.append(piece)
    return out


def _run(model: Model, session: Session, asked, progress, cancel, prompt=None):
    """The request's pieces (`Model.pieces`) under a stop flag of the session's, each with the
    new bars it holds when Stop ended the job (None when it finished); a stopped piece with
    no whole new bar is dropped. A flag set because the page or request is gone re-raises."""
    check_disk(session)
    if hasattr(progress, "bars"):  # the page's hook shows bars: the ones this job writes
        progress.bars = asked.bars
    flag = session.start_job(cancel)
    recorder = Recorder()
    try:
        hooks = {"progress": progress, "cancel": flag, "grammar_wrap": recorder}
        return [(m, None) for m in model.pieces(asked, prompt=prompt, **hooks)]
    except Cancelled:
        if getattr(flag, "left", False) or not hasattr(model, "tokenizer"):
            raise
        kept = kept_pieces(model, recorder, asked.num, asked.seed, prompt)
        return [(k.music, k.bars) for k in kept if k.bars > 0]
    finally:
        session.end_job(flag)


def run_continue(
    model: Model,
    session: Session,
    model_label: str,
    path,
    *,
    mode=None,
    prompt_bars=None,
    seconds=None,
    new_bars=None,
    num=None,
    seed=None,
    chords=None,
    form=None,
    tempo=None,
    transpose=None,
    progress=None,
    cancel: threading.Event | None = None,
    **sampling_given,
) -> list[Piece]:
    """`num` continuations of the uploaded prompt, rendered into the session (None: the page's
    value or the model's own, as `run_generate`); `chords`: the progression of the new bars;
    `form`: the song's, the prompt its first bars (it sets the new bars)."""
    check_upload(path, model.tokenizer.name)
    length = prompt_length(
        or_page("mode", mode), or_page("prompt_bars", prompt_bars), or_page("seconds", seconds)
    )
    new_bars = whole("new_bars", or_page("new_bars", new_bars), 1, MAX_NEW_BARS, required=True)
    num = whole("num", or_page("num", num), 1, MAX_NUM) or 1
    look = Look.checked(tempo, transpose)
    asked = request(
        "new_bars", num=num, bars=new_bars, seed=random_seed(seed), chords=check_chords(chords),
        form=check_form(form), **sampling_given,
    ).seeded()  # fmt: skip
    prompt = model.prompt(path, **length)
    asked, shape = settle_form(model, asked, prompt.bars, MAX_NEW_BARS)
    new_bars = asked.bars
    what = f"{length['bars']} bars" if "bars" in length else f"{length['seconds']:g} s"
    name = Path(path).name
    info = {"model": model_label, "prompt": name, **length, "new_bars": new_bars}
    info |= {"seed": asked.seed, **given(asked)} | ({"form": shape} if shape else {})
    label = f"{model_label} continues {what} of {name}" + (f" in form {shape}" if shape else "")
    label += f", seed {asked.seed}"
    out = []
    for i, (music, stopped) in enumerate(_run(model, session, asked, progress, cancel, prompt)):
        end = "" if stopped is None else f", stopped at new bar {stopped} of {new_bars}"
        piece = render(music, session, "cont", f"{label}, piece {i + 1}{end}", info, model,
                       prompt, look)  # fmt: skip
        piece.stopped_at = stopped
        piece.bars = prompt.bars + (new_bars if stopped is None else stopped)
        out.append(piece)
    return out


def prompt_preview(model: Model, session: Session, path, mode="bars", bars=2, seconds=None):
    """The piano roll (PNG path) of the prompt exactly as the model will be fed it."""
    check_upload(path, model.tokenizer.name)
    prompt = model.prompt(path, **prompt_length(mode, bars, seconds))
    folder = session.dir()
    stem = session.next_stem("prompt")
    title = f"prompt: {Path(path).name}, {prompt.bars} bars as the model reads them"
    return piano_roll(notes_from_score(prompt.notes), folder / f"{stem}.png", title=title)
