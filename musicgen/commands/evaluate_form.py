"""`musicgen evaluate form`: the continuation benchmark's options, and those of its whole songs
(`--whole-song`); registered by `commands.evaluate`, which runs it (`run_form`)."""

from __future__ import annotations

import argparse

from musicgen.generation.api.options import OPTIONS, SWEEP


def add_form(tasks: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the `form` task under `musicgen evaluate` (its `func`: `evaluate.run_form`); the
    whole-song options: `_add_whole_song`."""
    form = tasks.add_parser(
        "form",
        help="continuation benchmark: 4-bar prompts, 12 bars continued, scored with the real ones",
        description="Continue each held-out song's first 4 bars that hold music by 12 bars and "
        "score the continuation and the song's real bars 5-16 on repeats, self-similarity by "
        "lag, the top voice, key, groove and texture: spread over songs, model - real per song "
        "with bootstrap 95 % CIs, and each pair of runs (checkpoints x each sampling option "
        "swept below).",
    )
    form.add_argument("--checkpoint", nargs="+", required=True, help="model(s) to continue with")
    form.add_argument("--data", required=True, help="folder of songs (POP909: NNN/NNN.mid)")
    form.add_argument("--split", default="validation", help="train | validation | test | all")
    form.add_argument("--max-songs", type=int, help="use only the first N songs of the split")
    for name in SWEEP:  # one flag per sampling option a sweep may vary (generation.api.options)
        option = OPTIONS[name]
        form.add_argument(
            "--" + name.replace("_", "-"), type=option.kind, nargs="+",
            help=f"one run per value (x the others): {option.help}",
        )  # fmt: skip
    form.add_argument(
        "--new-bars", type=int, default=12, help="bars continued after the prompt (default 12)"
    )
    form.add_argument("--seed", type=int, default=0)
    form.add_argument("--batch-size", type=int, default=8, help="songs continued together")
    form.add_argument(
        "--no-legato", dest="legato", action="store_const", const=[False],
        help="models with a melody voice: score the melody as drawn, no note held over a "
        "sixteenth's rest to the next (docs/generation.md, 'The melody line')",
    )  # fmt: skip
    _add_whole_song(form)
    return form


def _add_whole_song(form: argparse.ArgumentParser) -> None:
    """`evaluate form --whole-song` and the options only whole songs read."""
    form.add_argument(
        "--whole-song",
        action="store_true",
        help="whole songs with their own forms (needs --structure and a model with section "
        "tokens): each song written from scratch and continuing its first --prompt-bars bars, "
        "the copy rule at the model's default and off unless its values are given; scored beside "
        "the real song (phrase similarity by label, the melody, repeats, texture, key, chords); "
        "writes song.json, song.md and samples/ (default --max-songs 4)",
    )
    form.add_argument(
        "--structure", help="whole songs: POP909's pop909_structure folder (NNN/human_label1.txt)"
    )
    form.add_argument(
        "--prompt-bars", type=int, default=2, help="whole songs: bars continued (default 2)"
    )
    form.add_argument(
        "--max-bars", type=int, help="whole songs: cut each form after this many bars"
    )
    form.add_argument(
        "--chords",
        action="store_true",
        help="whole songs: also write each song from scratch with its own chords forced",
    )
    form.add_argument(
        "--densities",
        action="store_true",
        help="whole songs: also write each song from scratch with its own phrases' densities "
        "forced (models with density tokens)",
    )
