"""Which models the studio serves and how a musician meets them.

The page names a model by its label only; `ModelCache` maps labels to the folders the studio was
started with (the shipped models and `--checkpoint` folders), so no other server path can be
reached. Each model is loaded once, on first use; what the page shows of it (its title, summary,
card, chord box, sampling defaults) is read here.
"""

from __future__ import annotations

import threading
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.generation.api import Model, checkpoint_stem, load
from musicgen.generation.decoding.sample import SamplingOptions
from musicgen.resources import resolve_checkpoint, shipped_dir
from musicgen.studio.inputs import PAGE, SAMPLING

DEFAULT_MODEL = "pop909_sine_spe_gated"
# The shipped models as a musician meets them: a name, and what to expect (the card, folded
# under it, says how and on what each was trained).
TITLES = {
    "pop909_sine_spe_gated": "Pop songs with melody, form and chords",
    "pop909_piano_sine_spe_gated": "Pop piano with chords (one voice)",
    "pop909_ape": "Pop piano with chords (one voice, second model)",
    "maestro_sine_spe_gated": "Classical piano (experimental, 5 M parameters)",
    "groove_sine_spe_gated": "Band groove (experimental: synthetic training data)",
}
SUMMARIES = {
    "pop909_sine_spe_gated": "Whole pop songs in 4/4, a melody over a piano, learnt from the "
    "909 songs of POP909. Give it a song form (intro, verses, choruses, outro) and, if you "
    "like, a chord progression per section.",
    "pop909_piano_sine_spe_gated": "The 909 songs of POP909 as one piano part (melody and "
    "accompaniment together), in phrases of 8 to 16 bars; it follows chords bar by bar.",
    "pop909_ape": "The one-voice pop piano learnt by a second model, kept to compare the two "
    "ways of encoding position; it follows chords too.",
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
    """Whether the model takes a chord progression: the library's own answer
    (`progression.chords_unsupported`: chord tokens, and bars of a score, which a
    performance model such as the classical one lacks), so the page hides the box it would
    refuse."""
    from musicgen.generation.controls.progression import chords_unsupported

    return chords_unsupported(model.tokenizer) is None


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
