"""The API: what a caller uses (`load`, `Model`, `Music`, `GenerationRequest`), and what it does
before and after the sampler. `from musicgen.generation.api import load, Model` is the public
import (`musicgen.load` re-exports it); the names come from `api.model`, loaded on first use so
that the sampler may import `api.options` without loading the whole API.

The call
- `model`: `load`, `Model` (the one generation path, `Model.pieces`)
- `request`: `GenerationRequest`, every option of a call; `options`: every sampling option
- `music`: `Music`, a generated piece; `scoring`: a song's NLL under a model

The prompt
- `prompt` (+ `prompt_merge`, `prompt_tempo`): the one prompt builder; `written`: a written
  score matched to its prompt file

The piece after sampling
- `finish`: tempo, transposition, instruments, chord markers (`chord_marks`); `legato`: the
  written melody's legato; `extend`, `regenerate`: a file extended, or its bars written again

Files out
- `write`: output names claimed exclusively, `write_pieces`; `tokenfile`: ids as JSON;
  `render`: piano roll and audio
"""

from __future__ import annotations

__all__ = [
    "BAR_TOKEN_CAP",
    "GenerationRequest",
    "Model",
    "Music",
    "apply_tempo",
    "checkpoint_stem",
    "load",
    "write_midi",
]


def __getattr__(name: str):
    if name in __all__:
        from musicgen.generation.api import model

        return getattr(model, name)
    raise AttributeError(f"module 'musicgen.generation.api' has no attribute '{name}'")
