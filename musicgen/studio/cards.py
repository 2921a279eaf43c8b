"""A model's card as a musician reads it on the page: what it writes, what it can be steered with,
its own settings in the page's words, and its card's pictures. The full card (README.md: the
training, the measures) stays in the model's folder for developers.

The pictures are put in the card itself (data: URLs): the studio's server serves a page's
results only (`guard.Guard`), never a model's or the docs' files, which is why the card's
own links showed as broken images. A picture that is not there is left out, never broken.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from musicgen.studio import controls, words
from musicgen.studio.models import ModelCache, has_chord_tokens, sampling_defaults

IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
MAX_IMAGE_BYTES = 300_000  # a card's piano roll is about 30 kB
MAX_IMAGES = 3


def musician_card(models: ModelCache, label: str) -> str:
    """The page's card of model `label` (loaded): a few lines and its pictures."""
    model = models.get(label)
    steer = []
    if controls.has_sections(model):
        steer.append("a **song form** (intro, verses, choruses, outro...)")
    if has_chord_tokens(model):
        steer.append("**chords**, one a bar or per section")
    steer_line = (
        "You can give it " + " and ".join(steer) + "."
        if steer
        else "It takes no form or chords: give it bars, or a MIDI file to continue."
    )
    own = sampling_defaults(model)
    settings = ", ".join(
        f"{words.SAMPLING[k][0]} {v:g}" for k, v in own.items() if k in words.SAMPLING
    )
    lines = [
        f"### {models.title(label)}",
        models.summary(label),
        steer_line,
        f"Its own settings (under Advanced): {settings}.",
        *pictures(models, label),
        "*The full technical card is README.md in the model's folder.*",
    ]
    return "\n\n".join(x for x in lines if x)


def pictures(models: ModelCache, label: str) -> list[str]:
    """The card's PNG pictures that exist, as markdown images with data: URLs."""
    path = models.path(label)
    folder = path if path.is_dir() else path.parent
    readme = folder / "README.md"
    if not readme.is_file():
        return []
    out = []
    for alt, ref in IMAGE.findall(readme.read_text(encoding="utf-8", errors="replace")):
        file = (folder / ref).resolve()
        if ref.startswith(("http:", "https:", "data:")) or file.suffix.lower() != ".png":
            continue
        if not file.is_file() or file.stat().st_size > MAX_IMAGE_BYTES:
            continue
        data = base64.b64encode(Path(file).read_bytes()).decode("ascii")
        out.append(f"![{alt}](data:image/png;base64,{data})")
        if len(out) == MAX_IMAGES:
            break
    return out
