"""Turn a MIDI file into things to look at and listen to: a piano-roll PNG, a WAV, an OGG.

Audio needs no system package. The first choice is the FluidSynth program with a General MIDI
soundfont when both are installed (`apt-get install fluidsynth fluid-soundfont-gm`); otherwise the
pip-installed `midirenderer` synthesizer (MIT) plays the file with the GM soundfont that the
`pretty_midi` package ships, TimGM6mb.sf2 (Tim Brechbill, GPL-2.0: redistribution allowed, and it
arrives with pip, so this repository carries no soundfont). `--soundfont` / $MUSICGEN_SOUNDFONT
pick another. OGG (Ogg Opus) always comes from `midirenderer`. `render_midi` is what
`generate --render` and the demo call.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from musicgen.errors import MusicgenError
from musicgen.io import atomic_path, atomic_write_bytes
from musicgen.measures.metrics import BAR_BEATS, Notes, load_score, notes_from_score
from musicgen.tokenizers.form import read_markers

SOUNDFONTS = [
    "/usr/share/sounds/sf2/FluidR3_GM.sf2",
    "/usr/share/sounds/sf2/default-GM.sf2",
    "/usr/share/soundfonts/FluidR3_GM.sf2",
    "/usr/share/soundfonts/default.sf2",
]
PIP_SOUNDFONT = ("pretty_midi", "TimGM6mb.sf2")  # (package, file inside it)
INSTALL_HINT = (
    "pip install midirenderer pretty_midi (or: apt-get install fluidsynth fluid-soundfont-gm)"
)
PIANO_ROLL_SIZE = (12.0, 4.0)  # inches
PIANO_ROLL_DPI = 100  # so a piano roll is 1200 x 400 pixels
SAMPLE_RATE = 44100
OGG_BITRATE = "64000"  # bits/s of the Opus stream: a few hundred kB a minute


def find_fluidsynth(binary: str | None = None) -> str | None:
    """Path of the fluidsynth program: `binary`, else $MUSICGEN_FLUIDSYNTH, else PATH."""
    name = binary or os.environ.get("MUSICGEN_FLUIDSYNTH") or "fluidsynth"
    return shutil.which(name)


def find_soundfont(soundfont: str | Path | None = None) -> Path | None:
    """A system General MIDI soundfont: `soundfont`, else $MUSICGEN_SOUNDFONT, else the Debian
    paths (FluidSynth's choices). A $MUSICGEN_SOUNDFONT that is set but names no file is an
    error (ignoring it would render with another soundfont than the one asked for)."""
    env = os.environ.get("MUSICGEN_SOUNDFONT")
    if soundfont is None and env and not Path(env).is_file():
        raise MusicgenError(f"$MUSICGEN_SOUNDFONT: {env}: soundfont not found")
    explicit = soundfont or env
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


def pip_soundfont() -> Path | None:
    """TimGM6mb.sf2 inside the installed pretty_midi package (found without importing it)."""
    spec = importlib.util.find_spec(PIP_SOUNDFONT[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / PIP_SOUNDFONT[1]
    return path if path.is_file() else None


def _soundfont_for_pip_synth(soundfont: str | Path | None) -> Path | None:
    if soundfont is not None:
        if not Path(soundfont).is_file():
            raise MusicgenError(f"{soundfont}: soundfont not found")
        return Path(soundfont)
    return find_soundfont() or pip_soundfont()


MELODY_COLOUR = "#d62728"  # a melody track is red, drawn over the others


def piano_roll(notes: Notes, path: str | Path, title: str = "", sections=()) -> Path:
    """Draw notes as bars (one colour per track, a Melody track red and on top, drums as
    ticks), bar lines every 4 beats; `sections` (tokenizers.form.Section: a song's phrases)
    mark where each phrase starts with its label and length."""
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
        melody = "melody" in str(key).lower()
        colour = MELODY_COLOUR if melody else colours(t % 10)
        polys = PolyCollection(
            verts, facecolors=colour, edgecolors="none", zorder=3 if melody else 2
        )
        ax.add_collection(polys)
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
    for s in sections:  # a phrase: a dark line and its label at the top
        ax.axvline(s.bar * BAR_BEATS, color="0.2", lw=0.8, zorder=1)
        ax.text(s.bar * BAR_BEATS + 0.3, hi + 1.2, f"{s.label}{s.bars}", fontsize=7, va="center")
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


def _fluidsynth_wav(binary: str, sf2: Path, midi: Path, tmp: Path, gain: float) -> None:
    cmd = [
        binary,
        "-ni",
        "-q",
        "-g",
        str(gain),
        "-r",
        str(SAMPLE_RATE),
        "-T",
        "wav",
        "-F",
        str(tmp),
        str(sf2),
        str(midi),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or tmp.stat().st_size == 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise MusicgenError(f"{midi}: fluidsynth failed ({msg[-1] if msg else 'no output'})")


def _pip_synth(midi: Path, sf2: Path, fmt: str) -> bytes:
    """WAV or Ogg Opus bytes from `midirenderer`; a file it cannot play is a MusicgenError."""
    import midirenderer

    font, data = sf2.read_bytes(), midi.read_bytes()
    try:
        if fmt == "ogg":
            return midirenderer.render_opus_from(font, data, stereo=True, bitrate=OGG_BITRATE)
        return midirenderer.render_wave_from(font, data)
    except (RuntimeError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MusicgenError(f"{midi}: cannot synthesize ({reason[:120]})") from None


def synthesize(
    src,
    out: str | Path,
    fluidsynth: str | None = None,
    soundfont: str | Path | None = None,
    gain: float = 0.6,
    required: bool = False,
) -> Path | None:
    """Audio of a MIDI file (or a symusic Score) as `out` (.wav or .ogg). When no synthesizer is
    installed: a MusicgenError if `required` (the audio was asked for), else None after one
    line on stderr. WAV: FluidSynth first, else `midirenderer`."""
    out = Path(out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in ("wav", "ogg"):
        raise MusicgenError(f"{out}: audio must be .wav or .ogg")
    if not isinstance(src, (str, Path)):  # a Score: synthesize a temporary MIDI file of it
        with tempfile.TemporaryDirectory() as tmp:
            midi = Path(tmp) / f"{out.stem}.mid"
            src.dump_midi(str(midi))
            return synthesize(midi, out, fluidsynth, soundfont, gain, required)
    midi = Path(src)
    binary, system_sf2 = find_fluidsynth(fluidsynth), find_soundfont(soundfont)
    if fmt == "wav" and binary is not None and system_sf2 is not None:
        with atomic_path(out, min_bytes=44) as tmp:  # 44: a WAV header
            _fluidsynth_wav(binary, system_sf2, midi, tmp, gain)
        return out
    sf2 = _soundfont_for_pip_synth(soundfont)
    if importlib.util.find_spec("midirenderer") is None or sf2 is None:
        missing = "midirenderer" if sf2 is not None else "a General MIDI soundfont"
        if required:
            raise MusicgenError(
                f"{out}: cannot synthesize ({missing} not found); install with: {INSTALL_HINT}"
            )
        print(
            f"render: no {fmt.upper()} ({missing} not found); install with: {INSTALL_HINT}",
            file=sys.stderr,
        )
        return None
    atomic_write_bytes(out, _pip_synth(midi, sf2, fmt))  # verified: exactly these bytes
    return out


def render_midi(
    path: str | Path,
    out_dir: str | Path,
    png: bool = True,
    wav: bool = False,
    fluidsynth: str | None = None,
    soundfont: str | Path | None = None,
    ogg: bool = False,
    audio_required: bool = False,
) -> list[Path]:
    """Write `<stem>.png`, `<stem>.wav` and/or `<stem>.ogg` of one MIDI file into `out_dir`;
    returns the paths written. `audio_required`: no synthesizer is an error (the audio was
    asked for by name), else a warning line."""
    path = Path(path)
    out_dir = Path(out_dir)
    score = load_score(path)  # validates the file first
    written = []
    if png:
        sections = read_markers(score)  # a song's phrases, if it has them
        png_path = out_dir / f"{path.stem}.png"
        notes = notes_from_score(score)
        written.append(piano_roll(notes, png_path, title=path.name, sections=sections))
    if wav:
        out = synthesize(
            path, out_dir / f"{path.stem}.wav", fluidsynth, soundfont, required=audio_required
        )
        if out is not None:
            written.append(out)
    if ogg:
        out = synthesize(
            path, out_dir / f"{path.stem}.ogg", fluidsynth, soundfont, required=audio_required
        )
        if out is not None:
            written.append(out)
    return written
