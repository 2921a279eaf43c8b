"""`musicgen demo`: the main job in one command, with the shipped model folders.

Writes to `out/demo/`: two pop-piano pieces from scratch (a song model writes them in a 16-bar
form), a continuation of the first 2 bars of a bundled POP909 song, (when the groove model is
there) a continuation of a 2-bar trio prompt of a style never seen in training and (when the
Maestro model is there) a continuation of the first 4 seconds of a held-out MAESTRO performance;
each as MIDI, a piano-roll PNG and audio (WAV with FluidSynth when installed, else with the
pip-installed synthesizer; see `generation.api.render`). Each step calls the Python API
(`Model.pieces`, the path of `generate` / `continue`) and the same
`generation.api.write.write_pieces` as those commands, and prints the command line that does the
same, so the demo is also their smoke test. Works from a source checkout and from an installed
wheel.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from musicgen.commands.generate import ProgressBar
from musicgen.errors import MusicgenError
from musicgen.generation.api import GenerationRequest, Model, checkpoint_stem, load
from musicgen.generation.api.options import describe
from musicgen.generation.api.request import SCRATCH_BARS
from musicgen.generation.api.write import write_pieces
from musicgen.resources import shipped_dir
from musicgen.tokenizers.form import parse_form

POP_MODEL = "pop909_sine_spe_gated"
GROOVE_MODEL = "groove_sine_spe_gated"
MAESTRO_MODEL = "maestro_sine_spe_gated"
DEMO_FORM = "i2A4B4A4o2"  # a model with section tokens writes its pieces in this 16-bar form
POP_PROMPT = "pop909_005.mid"
GROOVE_PROMPT = "trio_test_prompt.mid"
MAESTRO_PROMPT = "maestro_test_prompt.mid"
MAESTRO_SECONDS = 4.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="generate music with the shipped models into out/demo",
        description="Two pop-piano pieces from scratch, a continuation of a POP909 song's first "
        "2 bars, of a groove trio prompt and of 4 s of a MAESTRO performance, with piano rolls "
        "and audio; prints what it wrote.",
    )
    p.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument(
        "--bars",
        type=int,
        default=SCRATCH_BARS,
        help=f"bars per piece from scratch ({SCRATCH_BARS}; a song model writes the first bars "
        f"of the form {DEMO_FORM}, or, asked for more, no form)",
    )
    p.add_argument("--max-tokens", type=int, default=768, help="ids per continuation")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--pop",
        default=str(shipped_dir("checkpoints") / POP_MODEL),
        help="pop-piano model (folder or checkpoint)",
    )
    p.add_argument(
        "--groove",
        default=str(shipped_dir("checkpoints") / GROOVE_MODEL),
        help="groove model ('' to skip)",
    )
    p.add_argument(
        "--maestro",
        default=str(shipped_dir("checkpoints") / MAESTRO_MODEL),
        help="expressive-piano model ('' to skip)",
    )
    p.set_defaults(func=run)


def _show(title: str, command: str, args: argparse.Namespace) -> None:
    """The step's title and the command line that does the same."""
    limit = "" if command.startswith("generate") else f" --max-tokens {args.max_tokens}"
    print(f"\n== {title}\n   musicgen {command}{limit} --seed {args.seed} --render")


def _write(model: Model, pieces, stem: str, args: argparse.Namespace) -> list[Path]:
    """The demo's outputs: MIDI, piano roll and audio of each piece, replaced on a rerun."""
    return write_pieces(pieces, args.out, stem, model.tokenizer, overwrite=True, render=True)


def _defaults(model: Model) -> str:
    """The sampling the model uses by default (its config's `sample:` section, as its card
    states, else the paper's), as its card writes it (`options.describe`)."""
    return describe(model.options())


def _continue(
    args: argparse.Namespace, checkpoint: str | Path, title: str, prompt: Path, **length
) -> list[Path]:
    """One continuation through the API at the model's own sampling defaults, shown as the
    `continue` command a user would type; `length`: bars=N or seconds=S."""
    model = load(checkpoint, args.device)
    flags = " ".join(f"--{k.replace('_', '-')} {v:g}" for k, v in length.items())
    command = f"continue --checkpoint {checkpoint} --prompt {prompt} {flags}"
    _show(f"{title} ({_defaults(model)})", command, args)
    built = model.prompt(prompt, **length)
    pieces = model.pieces(
        1, prompt=built, seed=args.seed, max_tokens=args.max_tokens, progress=ProgressBar()
    )
    return _write(model, pieces, f"{checkpoint_stem(model.source)}_{prompt.stem}", args)


def _optional(args: argparse.Namespace, checkpoint: str, title: str, **options) -> list[Path]:
    """A continuation with a model that may be absent ('' skips it; a missing folder is noted)."""
    if not checkpoint:
        return []
    if not Path(checkpoint).exists():
        print(f"\nnote: {checkpoint} not found; skipped: {title}")
        return []
    return _continue(args, checkpoint, title, **options)


def run(args: argparse.Namespace) -> int:
    pop = Path(args.pop)
    if not pop.exists():
        raise MusicgenError(f"{pop}: the bundled pop checkpoint is missing (see checkpoints/)")
    GenerationRequest(bars=args.bars, max_tokens=args.max_tokens, seed=args.seed)
    demo = shipped_dir("demo")
    t0 = time.time()
    model = load(pop, args.device)
    sections = model.tokenizer.section_mask().any()  # the form's first bars, or no form
    form = (
        DEMO_FORM if sections and args.bars <= sum(p.bars for p in parse_form(DEMO_FORM)) else None
    )
    command = f"generate --checkpoint {pop} --num 2 --bars {args.bars}"
    command += f" --form {form}" if form else ""
    what = f"in the form {form} (intro, verse, chorus, verse, outro)" if form else ""
    _show(f"two pop-piano pieces from scratch {what} ({_defaults(model)})", command, args)
    pieces = model.pieces(2, bars=args.bars, form=form, seed=args.seed, progress=ProgressBar())
    files = _write(model, pieces, checkpoint_stem(model.source), args)
    files += _continue(
        args,
        pop,
        f"continue the first 2 bars of {POP_PROMPT} (POP909, MIT)",
        demo / POP_PROMPT,
        bars=2,
    )
    files += _optional(
        args,
        args.groove,
        f"continue a 2-bar trio prompt of an unseen style ({GROOVE_PROMPT})",
        prompt=demo / GROOVE_PROMPT,
        bars=2,
    )
    files += _optional(
        args,
        args.maestro,
        f"continue the first {MAESTRO_SECONDS:g} s of a held-out MAESTRO performance "
        f"({MAESTRO_PROMPT}, CC BY-NC-SA 4.0)",
        prompt=demo / MAESTRO_PROMPT,
        seconds=MAESTRO_SECONDS,
    )
    elapsed = time.time() - t0
    print(
        f"\nmusicgen demo: wrote {len(files)} files to {args.out}/ in {elapsed:.0f} s "
        f"(seed {args.seed}):"
    )
    for f in files:
        print(f"  {f}")
    return 0
