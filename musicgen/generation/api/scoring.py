"""Scoring a song under a model (`Model.score`, `Model.nll`): the path `evaluate memory` and the
studio's scores share. A model with recall marks reads a song with its recalled phrases in place
(`tokenizers.recall`); the NLLs are of the song's own ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from musicgen.errors import MusicgenError
from musicgen.generation.api.prompt import encode_song
from musicgen.measures.likelihood import notes_scored, per_position_nll
from musicgen.tokenizers.recall import recall_context


def score_song(model, path: str | Path) -> dict:
    """How likely the model finds a song: mean NLL per token (nats) and per note, the song
    read as training reads it (a POP909 chord annotation beside it becomes its chords)."""
    ids = encode_song(model.tokenizer, Path(path))
    nll = ids_nll(model, ids)
    notes = notes_scored(model.tokenizer, [np.asarray(ids)], len(ids) - 1)
    total = float(nll.sum())
    return {
        "tokens": len(nll),
        "notes": int(notes),
        "nll_per_token": total / max(len(nll), 1),
        "nll_per_note": total / max(int(notes), 1),
    }


def ids_nll(model, ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """The NLL (nats) of each id after the first, given the ids before it, in one pass:
    what `score_song` sums and `evaluate memory` reads span by span. An SPE model draws its
    noise from torch's RNG: seed it (`torch.manual_seed`) to score alike twice."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or len(ids) < 2:
        raise MusicgenError(f"ids: need a 1-D sequence of 2 or more ids, got shape {ids.shape}")
    context = recall_context(model.tokenizer)  # a recall model hears its phrases again
    sums, _counts = per_position_nll(
        model.model, [ids], len(ids) - 1, model.device, context=context
    )
    return sums
