"""`musicgen demo`: the main job in one command, with the checkpoints shipped in `checkpoints/`.

Writes to `out/demo/`: two pop-piano pieces from scratch, a continuation of the first 2 bars of
a bundled POP909 song, and (when the groove model is there) a continuation of a 2-bar trio
prompt of a style never seen in training; each as MIDI plus a piano-roll PNG (and WAV when
FluidSynth is installed). Everything goes through the same `generate` / `continue` commands a
user would run, so the demo is also their smoke test.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from musicgen.errors import MusicgenError

ROOT = Path(__file__).resolve().parents[2]
POP_CKPT = ROOT / "checkpoints" / "pop909_sine_spe_gated" / "model.pt"
GROOVE_CKPT = ROOT / "checkpoints" / "groove_sine_spe_gated" / "model.pt"
POP_PROMPT = ROOT / "data" / "demo" / "pop909_005.mid"
GROOVE_PROMPT = ROOT / "data" / "demo" / "trio_test_prompt.mid"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="generate music with the bundled checkpoints into out/demo",
        description="Two pop-piano pieces from scratch, a continuation of a POP909 song's first "
        "2 bars and of a groove trio prompt, with piano rolls; prints what it wrote.",
    )
    p.add_argument("--out", default="out/demo", help="output folder (default out/demo)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--bars", type=int, default=16, help="bars per piece from scratch")
    p.add_argument("--max-tokens", type=int, default=768, help="ids per continuation")
    p.add_argument("--device", default="auto")
    p.add_argument("--pop", default=str(POP_CKPT), help="pop-piano checkpoint")
    p.add_argument("--groove", default=str(GROOVE_CKPT), help="groove checkpoint ('' to skip)")
    p.set_defaults(func=run)


def _job(title: str, argv: list[str]) -> list[Path]:
    """Run one musicgen command in-process; return the files it reports as written."""
    import contextlib
    import io

    from musicgen.cli import main

    print(f"\n== {title}\n   musicgen {' '.join(argv)}")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(argv)
    written = [Path(line.split()[1]) for line in buffer.getvalue().splitlines()
               if line.startswith("wrote ")]
    for line in buffer.getvalue().splitlines():
        print(f"   {line}")
    if code != 0:
        raise MusicgenError(f"demo: step '{title}' failed (exit {code})")
    return written


def run(args: argparse.Namespace) -> int:
    pop = Path(args.pop)
    if not pop.is_file():
        raise MusicgenError(f"{pop}: the bundled pop checkpoint is missing (see checkpoints/)")
    out = Path(args.out)
    common = ["--out", str(out), "--seed", str(args.seed), "--device", args.device,
              "--render", "--overwrite"]
    t0 = time.time()
    files = _job("two pop-piano pieces from scratch (T=1.2, top-p 0.9)",
                 ["generate", "--checkpoint", str(pop), "--num", "2", "--bars", str(args.bars),
                  *common])
    files += _job(f"continue the first 2 bars of {POP_PROMPT.name} (POP909, MIT)",
                  ["continue", "--checkpoint", str(pop), "--prompt", str(POP_PROMPT), "--bars",
                   "2", "--num", "1", "--max-tokens", str(args.max_tokens), *common])
    groove = Path(args.groove) if args.groove else None
    if groove is not None and groove.is_file():
        # T = 1.0 rather than the paper's 0.6: this small model puts little mass on each
        # pitched note, and at 0.6 it continues the drums alone (see its model card).
        files += _job(f"continue a 2-bar trio prompt of an unseen style ({GROOVE_PROMPT.name}, "
                      "T=1.0)",
                      ["continue", "--checkpoint", str(groove), "--prompt", str(GROOVE_PROMPT),
                       "--bars", "2", "--num", "1", "--max-tokens", str(args.max_tokens),
                       "--temperature", "1.0", *common])
    elif groove is not None:
        print(f"\nnote: {groove} not found; the groove continuation is skipped")
    elapsed = time.time() - t0
    print(f"\nmusicgen demo: wrote {len(files)} files to {out}/ in {elapsed:.0f} s "
          f"(seed {args.seed}):")
    for f in files:
        print(f"  {f}")
    return 0
