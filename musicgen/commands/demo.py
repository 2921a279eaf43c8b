"""`musicgen demo`: the main job in one command, with the shipped model folders.

Writes to `out/demo/`: two pop-piano pieces from scratch, a continuation of the first 2 bars of
a bundled POP909 song, (when the groove model is there) a continuation of a 2-bar trio prompt of
a style never seen in training and (when the Maestro model is there) a continuation of the first
4 seconds of a held-out MAESTRO performance; each as MIDI, a piano-roll PNG and audio (WAV with
FluidSynth when installed, else with the pip-installed synthesizer; see `generation.render`). Each
step calls the same function as the `generate` / `continue` command a user would run, so the
demo is also their smoke test. Works from a source checkout and from an installed wheel.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.resources import shipped_dir

POP_MODEL = "pop909_sine_spe_gated"
GROOVE_MODEL = "groove_sine_spe_gated"
MAESTRO_MODEL = "maestro_perceiver_s"
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
    p.add_argument("--bars", type=int, default=16, help="bars per piece from scratch")
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


def _step(title: str, func, **options) -> list[Path]:
    """One `generate` / `continue` run with the options a user would type."""
    defaults = {
        "num": 1,
        "temperature": None,
        "top_k": None,
        "top_p": None,
        "no_grammar": False,
        "save_tokens": False,
        "overwrite": True,
        "batch_size": 8,
        "render": True,
        "max_tokens": None,
        "min_tokens": 0,
        "bars": None,
    }
    args = argparse.Namespace(**{**defaults, **options})
    shown = " ".join(
        f"--{k.replace('_', '-')} {v}"
        for k, v in options.items()
        if k not in ("out", "device", "render", "overwrite") and v is not None and v is not False
    )
    print(f"\n== {title}\n   musicgen {func.__name__.split('_')[0]} {shown}")
    return func(args)


def _optional_step(checkpoint: str, title: str, **options) -> list[Path]:
    """A continuation with a model that may be absent ('' skips it; a missing folder is noted)."""
    from musicgen.commands.generate import continue_files

    if not checkpoint:
        return []
    if not Path(checkpoint).exists():
        print(f"\nnote: {checkpoint} not found; skipped: {title}")
        return []
    options = {"bars": None, "prompt_bars": None, "continuation_only": False, **options}
    return _step(title, continue_files, checkpoint=checkpoint, **options)


def run(args: argparse.Namespace) -> int:
    from musicgen.commands.generate import continue_files, generate_files

    pop = Path(args.pop)
    if not pop.exists():
        raise MusicgenError(f"{pop}: the bundled pop checkpoint is missing (see checkpoints/)")
    demo = shipped_dir("demo")
    common = {"out": args.out, "seed": args.seed, "device": args.device}
    t0 = time.time()
    files = _step(
        "two pop-piano pieces from scratch (T=1.2, top-p 0.9)",
        generate_files,
        checkpoint=str(pop),
        num=2,
        bars=args.bars,
        **common,
    )
    files += _step(
        f"continue the first 2 bars of {POP_PROMPT} (POP909, MIT)",
        continue_files,
        checkpoint=str(pop),
        prompt=str(demo / POP_PROMPT),
        bars=2,
        prompt_bars=None,
        continuation_only=False,
        max_tokens=args.max_tokens,
        **common,
    )
    # T = 1.0 rather than the paper's 0.6: this small model puts little mass on each
    # pitched note, and at 0.6 it continues the drums alone (see its model card).
    files += _optional_step(
        args.groove,
        f"continue a 2-bar trio prompt of an unseen style ({GROOVE_PROMPT}, T=1.0)",
        prompt=str(demo / GROOVE_PROMPT),
        bars=2,
        max_tokens=args.max_tokens,
        temperature=1.0,
        **common,
    )
    files += _optional_step(
        args.maestro,
        f"continue the first {MAESTRO_SECONDS:g} s of a held-out MAESTRO performance "
        f"({MAESTRO_PROMPT}, CC BY-NC-SA 4.0)",
        prompt=str(demo / MAESTRO_PROMPT),
        seconds=MAESTRO_SECONDS,
        max_tokens=args.max_tokens,
        **common,
    )
    elapsed = time.time() - t0
    print(
        f"\nmusicgen demo: wrote {len(files)} files to {args.out}/ in {elapsed:.0f} s "
        f"(seed {args.seed}):"
    )
    for f in files:
        print(f"  {f}")
    return 0
