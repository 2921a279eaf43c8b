"""`musicgen render`: a MIDI file -> piano-roll PNG and (with FluidSynth) WAV."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "render",
        help="draw a piano roll and synthesize audio for MIDI files",
        description="Write SONG.png (piano roll, one colour per track, bar lines) and, when the "
        "fluidsynth program and a General MIDI soundfont are installed, SONG.wav. With neither "
        "--png nor --wav both are made.",
    )
    p.add_argument("midi", nargs="+", help="MIDI file(s)")
    p.add_argument("--png", action="store_true", help="piano-roll image")
    p.add_argument("--wav", action="store_true", help="audio through FluidSynth")
    p.add_argument("--out", help="output folder (default: next to each MIDI file)")
    p.add_argument("--soundfont", help="a .sf2 file (default: FluidR3_GM from fluid-soundfont-gm)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from musicgen.render import render_midi

    png, wav = args.png, args.wav
    if not png and not wav:
        png = wav = True
    for midi in args.midi:
        out = Path(args.out) if args.out else Path(midi).parent
        for path in render_midi(midi, out, png=png, wav=wav, soundfont=args.soundfont):
            print(f"wrote {path}")
    return 0
