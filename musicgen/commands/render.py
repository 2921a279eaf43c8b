"""`musicgen render`: a MIDI file -> piano-roll PNG, WAV and (asked for) a short OGG."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "render",
        help="draw a piano roll and synthesize audio for MIDI files",
        description="Write SONG.png (piano roll, one colour per track, bar lines) and SONG.wav "
        "(FluidSynth when installed, else the pip-installed midirenderer with pretty_midi's "
        "General MIDI soundfont); --ogg also writes SONG.ogg (Ogg Opus). With none of --png, "
        "--wav, --ogg, the PNG and the WAV are made (the WAV skipped with a warning when no "
        "synthesizer is installed); --wav or --ogg given without a synthesizer is an error.",
    )
    p.add_argument("midi", nargs="+", help="MIDI file(s)")
    p.add_argument("--png", action="store_true", help="piano-roll image")
    p.add_argument("--wav", action="store_true", help="audio, 16-bit PCM WAV")
    p.add_argument("--ogg", action="store_true", help="audio, Ogg Opus (64 kbit/s)")
    p.add_argument("--out", help="output folder (default: next to each MIDI file)")
    p.add_argument(
        "--soundfont",
        help="a .sf2 file (default: FluidR3_GM when installed, else TimGM6mb from pretty_midi)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from musicgen.generation.api.render import render_midi

    png, wav, ogg = args.png, args.wav, args.ogg
    asked = wav or ogg  # audio asked for by name: no synthesizer is an error, not a warning
    if not (png or wav or ogg):
        png = wav = True
    for midi in args.midi:
        out = Path(args.out) if args.out else Path(midi).parent
        paths = render_midi(
            midi, out, png=png, wav=wav, soundfont=args.soundfont, ogg=ogg, audio_required=asked
        )
        for path in paths:
            print(f"wrote {path}")
    return 0
