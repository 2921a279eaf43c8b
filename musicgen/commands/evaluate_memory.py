"""`musicgen evaluate memory`: the memory probe's options (musicgen.evaluate.memory)."""

from __future__ import annotations

import argparse

from musicgen.errors import check_seed


def add_memory(tasks: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the `memory` task under `musicgen evaluate`."""
    from musicgen.evaluate.memory import GAPS, PASSAGE_BARS

    p = tasks.add_parser(
        "memory",
        help="does the model remember a passage? NLL of its return over the passage alone",
        description="For each song of the split: a passage of --passage-bars bars, --gaps bars "
        "of the song, the passage again; per gap the NLL of the return over that of the "
        "passage alone at its own place in the song (1: no memory; far below 1: a copy), mean "
        "over songs with a bootstrap 95 %% CI. Writes OUT/memory.json.",
    )
    p.add_argument("--checkpoint", required=True, help="model folder, .pt, run or shipped name")
    p.add_argument("--data", required=True, help="POP909 songs (NNN/NNN.mid, chord_midi.txt)")
    p.add_argument(
        "--structure",
        help="POP909's pop909_structure folder: a model with phrase tokens reads songs with them",
    )
    p.add_argument("--split", default="validation", help="train | validation | test | all")
    p.add_argument("--max-songs", type=int, help="use only the first N songs of the split")
    p.add_argument("--passage-bars", type=int, default=PASSAGE_BARS, help="bars in the passage")
    p.add_argument(
        "--gaps", type=int, nargs="+", default=list(GAPS), help="bars between passage and return"
    )
    p.add_argument(
        "--phrases",
        action="store_true",
        help="the passage is a whole phrase of 4-8 bars, its phrase tokens included (a section "
        "that comes back; needs --structure and a model with phrase tokens)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the SPE noise draws")
    p.add_argument("--out", default="out/eval", help="output folder (default: out/eval)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")
    p.set_defaults(func=run_memory)
    return p


def run_memory(args: argparse.Namespace) -> int:
    """Probe, print the table, name the file written."""
    from musicgen.evaluate.memory import evaluate_memory, table

    check_seed("--seed", args.seed)
    res = evaluate_memory(
        args.checkpoint, args.data, args.out, split=args.split, structure=args.structure,
        max_songs=args.max_songs, bars=args.passage_bars, gaps=args.gaps, seed=args.seed,
        device=args.device, phrases=args.phrases,
    )  # fmt: skip
    phrases = "with phrase tokens" if res["phrases"] else "without phrase tokens"
    print(f"{args.checkpoint} on {res['songs_asked']} {args.split} songs ({phrases}; "
          f"{len(res['skipped'])} unreadable); "
          f"{'a phrase' if args.phrases else f'{args.passage_bars}-bar passage'}")  # fmt: skip
    print(table(res))
    print(f"wrote {args.out}/memory.json")
    return 0
