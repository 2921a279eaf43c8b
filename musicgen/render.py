"""Turn a MIDI file into things to look at and listen to: a piano-roll PNG and a WAV.

The WAV goes through the FluidSynth program with a General MIDI soundfont. Both are optional
system packages; without them the PNG is still written and one line says how to get them.
`render_midi` is what `generate --render` and the demo call.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.io import atomic_path
from musicgen.metrics import BAR_BEATS, Notes, load_notes

SOUNDFONTS = [
    "/usr/share/sounds/sf2/FluidR3_GM.sf2",
    "/usr/share/sounds/sf2/default-GM.sf2",
    "/usr/share/soundfonts/FluidR3_GM.sf2",
    "/usr/share/soundfonts/default.sf2",
]
INSTALL_HINT = "apt-get install fluidsynth fluid-soundfont-gm"
PIANO_ROLL_SIZE = (12.0, 4.0)  # inches
PIANO_ROLL_DPI = 100  # so a piano roll is 1200 x 400 pixels
SAMPLE_RATE = 44100


def find_fluidsynth(binary: str | None = None) -> str | None:
    """Path of the fluidsynth program: `binary`, else $MUSICGEN_FLUIDSYNTH, else PATH."""
    name = binary or os.environ.get("MUSICGEN_FLUIDSYNTH") or "fluidsynth"
    return shutil.which(name)


def find_soundfont(soundfont: str | Path | None = None) -> Path | None:
    """A General MIDI soundfont: `soundfont`, else $MUSICGEN_SOUNDFONT, else the Debian paths."""
    explicit = soundfont or os.environ.get("MUSICGEN_SOUNDFONT")
    candidates = [explicit] if explicit else SOUNDFONTS
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    return None


MAX_BAR_LINES = 256  # more would not be visible in 1200 pixels


def bar_lines(end: float) -> list[float]:
    """Beat positions of the bar lines up to `end`: every bar, or every k-th bar when there are
    more than MAX_BAR_LINES (a long piece must not cost one line per bar)."""
    bars = int(end // BAR_BEATS) + 1
    stride = -(-bars // MAX_BAR_LINES)
    return [b * BAR_BEATS for b in range(0, bars, stride)]


def piano_roll(notes: Notes, path: str | Path, title: str = "") -> Path:
    """Draw notes as bars (one colour per track, drums as ticks), bar lines every 4 beats."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=PIANO_ROLL_SIZE, dpi=PIANO_ROLL_DPI)
    colours = plt.get_cmap("tab10")
    handles = []
    for t, key in enumerate(notes.track_keys):
        part = notes.select(notes.track == t)
        if len(part) == 0:
            continue
        dur = part.duration if not notes.is_drum[t] else part.duration.clip(0.1, 0.25)
        x0, x1 = part.onset, part.onset + dur.clip(min=0.05)
        y0, y1 = part.pitch - 0.4, part.pitch + 0.4
        boxes = zip(x0, x1, y0, y1, strict=True)
        verts = [[(a, c), (b, c), (b, d), (a, d)] for a, b, c, d in boxes]
        colour = colours(t % 10)
        ax.add_collection(PolyCollection(verts, facecolors=colour, edgecolors="none"))
        handles.append(Patch(color=colour, label=key))
    end = max(notes.end(), BAR_BEATS)
    lines = bar_lines(end)
    ax.vlines(lines, 0, 128, colors="0.8", lw=0.6, zorder=0)  # one artist, not one per bar
    if len(notes):
        lo, hi = int(notes.pitch.min()), int(notes.pitch.max())
    else:
        lo, hi = 60, 72
    ax.set_xlim(0, end)
    ax.set_ylim(lo - 2, hi + 2)
    step = lines[1] - lines[0] if len(lines) > 1 else BAR_BEATS
    ax.set_xlabel(f"beats (bar lines every {step:g})")
    ax.set_ylabel("MIDI pitch")
    if title:
        ax.set_title(title, fontsize=9)
    if handles:
        ax.legend(handles=handles, loc="upper right", fontsize=7)
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.13, top=0.92)
    path = Path(path)
    with atomic_path(path, min_bytes=8) as tmp:  # 8: the PNG signature
        fig.savefig(tmp, format="png", dpi=PIANO_ROLL_DPI)
    plt.close(fig)
    return path


def synthesize_wav(
    midi: str | Path, wav: str | Path, fluidsynth: str | None = None,
    soundfont: str | Path | None = None, gain: float = 0.6,
) -> Path | None:
    """Render `midi` to `wav` with FluidSynth; None (after one line on stderr) if unavailable."""
    binary = find_fluidsynth(fluidsynth)
    sf2 = find_soundfont(soundfont)
    if binary is None or sf2 is None:
        missing = "fluidsynth" if binary is None else "a General MIDI soundfont"
        print(f"render: no WAV ({missing} not found); install with: {INSTALL_HINT}",
              file=sys.stderr)
        return None
    wav = Path(wav)
    with atomic_path(wav) as tmp:
        cmd = [binary, "-ni", "-q", "-g", str(gain), "-r", str(SAMPLE_RATE), "-T", "wav",
               "-F", str(tmp), str(sf2), str(midi)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or tmp.stat().st_size == 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise MusicgenError(f"{midi}: fluidsynth failed ({msg[-1] if msg else 'no output'})")
    return wav


def render_midi(
    path: str | Path, out_dir: str | Path, png: bool = True, wav: bool = False,
    fluidsynth: str | None = None, soundfont: str | Path | None = None,
) -> list[Path]:
    """Write `<stem>.png` and/or `<stem>.wav` of one MIDI file into `out_dir`; returns the paths."""
    path = Path(path)
    out_dir = Path(out_dir)
    notes = load_notes(path)  # validates the file first
    written = []
    if png:
        written.append(piano_roll(notes, out_dir / f"{path.stem}.png", title=path.name))
    if wav:
        out = synthesize_wav(path, out_dir / f"{path.stem}.wav", fluidsynth, soundfont)
        if out is not None:
            written.append(out)
    return written
