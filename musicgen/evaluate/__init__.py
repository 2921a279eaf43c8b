"""The evaluations of `musicgen evaluate`, one module per task.

- `nll`: per-position NLL and forbidden mass (`evaluate nll`; `seeded_nll` is also the
  trainer's validation)
- `style`: style continuation, the groove experiment (`evaluate style`)
- `music`: descriptive statistics of generated MIDI (`evaluate music`)
- `form`: the continuation benchmark that hears form (`evaluate form`; measures in
  `musicgen.measures.form`)
- `memory`: does a model remember a passage it heard G bars before (`evaluate memory`;
  `memory.json` only)
- `introspect`: positional kernels and attention maps, the figures of `musicgen plot`
- `common`: strict JSON output and a folder's MIDI files

Each task writes `<task>.json` (every number, JSON-safe: NaN becomes null) and `<task>.png` into
the output folder. Every public name is re-exported here: `from musicgen.evaluate import X`.
"""

from musicgen.evaluate.common import jsonable, midi_files, write_json
from musicgen.evaluate.form import evaluate_form, form_measures
from musicgen.evaluate.introspect import (
    attention_figure,
    attention_maps,
    kernel_figure,
    positional_kernels,
)
from musicgen.evaluate.memory import evaluate_memory
from musicgen.evaluate.music import evaluate_music, folder_statistics
from musicgen.evaluate.nll import (
    SEGMENT,
    evaluate_nll,
    forbidden_masks,
    forbidden_mass,
    load_eval_songs,
    model_label,
    noise_seed,
    notes_scored,
    per_position_nll,
    range_mean,
    seeded_nll,
    segment_means,
)
from musicgen.evaluate.style import (
    N_STYLE_SEGMENTS,
    evaluate_style,
    other_song_baseline,
    segment_similarities,
    song_prompt,
    split_by_time,
    true_continuation,
)

__all__ = [
    "N_STYLE_SEGMENTS",
    "SEGMENT",
    "attention_figure",
    "attention_maps",
    "noise_seed",
    "evaluate_form",
    "evaluate_memory",
    "evaluate_music",
    "evaluate_nll",
    "evaluate_style",
    "folder_statistics",
    "form_measures",
    "forbidden_mass",
    "forbidden_masks",
    "jsonable",
    "kernel_figure",
    "load_eval_songs",
    "song_prompt",
    "midi_files",
    "model_label",
    "notes_scored",
    "other_song_baseline",
    "per_position_nll",
    "positional_kernels",
    "range_mean",
    "seeded_nll",
    "segment_means",
    "segment_similarities",
    "split_by_time",
    "true_continuation",
    "write_json",
]
