"""Piano roll and audio rendering: WAV/OGG from pip packages alone (not silent, the MIDI's
length), FluidSynth when installed, one-line errors."""

from __future__ import annotations

import struct
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
import symusic
from hostile import read_wav
from paths import DATA

from musicgen.cli import main
from musicgen.errors import MusicgenError
from musicgen.generation.api.render import (
    PIANO_ROLL_DPI,
    PIANO_ROLL_SIZE,
    find_fluidsynth,
    find_soundfont,
    pip_soundfont,
    render_midi,
    synthesize,
)

SONG = DATA / "pop909" / "001" / "001.mid"  # three tracks: MELODY, BRIDGE, PIANO


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG signature and IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def short_midi(path: Path) -> Path:
    """Four piano notes and a kick: a one-bar file that synthesizes in well under a second."""
    score = symusic.Score(480)
    piano = symusic.Track("piano", 0, False)
    for i, p in enumerate((60, 64, 67, 72)):
        piano.notes.append(symusic.Note(i * 480, 480, p, 90))
    drums = symusic.Track("drums", 0, True)
    drums.notes.append(symusic.Note(0, 120, 36, 100))
    score.tracks.extend([piano, drums])
    score.dump_midi(str(path))
    return path


def test_piano_roll_png_size_and_track_colours(tmp_path):
    written = render_midi(SONG, tmp_path, png=True, wav=False)
    assert written == [tmp_path / "001.png"]
    w, h = png_size(written[0])
    assert (w, h) == (PIANO_ROLL_SIZE[0] * PIANO_ROLL_DPI, PIANO_ROLL_SIZE[1] * PIANO_ROLL_DPI)
    # MELODY in the melody red, BRIDGE and PIANO each in its own tab10 colour
    import matplotlib

    from musicgen.generation.api.render import MELODY_COLOUR

    pixels = (mpimg.imread(written[0])[..., :3] * 255).round().astype(int).reshape(-1, 3)
    present = {tuple(p) for p in np.unique(pixels, axis=0)}
    red = tuple(int(round(c * 255)) for c in matplotlib.colors.to_rgb(MELODY_COLOUR))
    assert red in present, "the melody's red is missing"
    for i in (1, 2):
        rgb = tuple(int(round(c * 255)) for c in matplotlib.colormaps["tab10"](i)[:3])
        assert rgb in present, f"track {i} colour {rgb} missing"
    assert tuple(int(round(c * 255)) for c in matplotlib.colormaps["tab10"](0)[:3]) not in present


def check_audio(path: Path, midi: Path) -> None:
    """Not silent, and as long as the MIDI file plays (within a quarter of a second)."""
    samples, rate = read_wav(path)
    seconds = symusic.Score(str(midi)).to("second").end()
    assert abs(len(samples) / rate - seconds) < 0.25, (len(samples) / rate, seconds)
    assert float(np.sqrt(np.mean(samples**2))) > 0.01  # RMS well above silence
    assert np.abs(samples).max() < 1.0


def test_wav_with_pip_packages_only(tmp_path, capsys):
    """No fluidsynth program: the pip synthesizer and pretty_midi's GM soundfont make the WAV."""
    midi = short_midi(tmp_path / "short.mid")
    assert pip_soundfont() is not None and pip_soundfont().name == "TimGM6mb.sf2"
    written = render_midi(
        midi,
        tmp_path / "out",
        png=True,
        wav=True,
        ogg=True,
        fluidsynth=str(tmp_path / "no-such-fluidsynth"),
    )
    out = tmp_path / "out"
    assert written == [out / "short.png", out / "short.wav", out / "short.ogg"]
    check_audio(out / "short.wav", midi)
    assert (out / "short.ogg").read_bytes()[:4] == b"OggS"
    assert capsys.readouterr().err == ""


def test_audio_of_a_real_song_has_its_length(tmp_path):
    written = synthesize(SONG, tmp_path / "001.wav", fluidsynth=str(tmp_path / "none"))
    check_audio(written, SONG)


def test_missing_soundfont_is_one_line_error(tmp_path):
    midi = short_midi(tmp_path / "short.mid")
    with pytest.raises(MusicgenError, match="missing.sf2: soundfont not found"):
        render_midi(
            midi,
            tmp_path,
            png=False,
            wav=True,
            soundfont=tmp_path / "missing.sf2",
            fluidsynth=str(tmp_path / "none"),
        )
    with pytest.raises(MusicgenError, match="audio must be .wav or .ogg"):
        synthesize(midi, tmp_path / "x.flac")


@pytest.mark.skipif(
    find_fluidsynth() is None or find_soundfont() is None,
    reason="fluidsynth / fluid-soundfont-gm not installed",
)
def test_wav_through_fluidsynth(tmp_path):
    midi = short_midi(tmp_path / "short.mid")
    written = render_midi(midi, tmp_path, png=False, wav=True)
    assert written == [tmp_path / "short.wav"]
    data = written[0].read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert len(data) > 44100 * 2 * 2  # at least a second of 16-bit stereo (2 s of music)


def test_cli_render_png_and_errors(tmp_path, capsys):
    midi = short_midi(tmp_path / "short.mid")
    assert main(["render", str(midi), "--png", "--out", str(tmp_path / "o")]) == 0
    assert png_size(tmp_path / "o" / "short.png") == (1200, 400)
    assert main(["render", str(midi), "--ogg", "--out", str(tmp_path / "a")]) == 0
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["short.ogg"]
    bad = tmp_path / "bad.mid"
    bad.write_bytes(b"MThd garbage")
    assert main(["render", str(bad), "--png"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "bad.mid" in err and len(err.strip().splitlines()) == 1


def test_audio_asked_for_without_a_synthesizer_is_an_error(tmp_path, capsys, monkeypatch):
    """`render --wav` with no synthesizer used to exit 0 having written nothing; asked for by
    name, missing audio is now one error line (exit 1); the default PNG + WAV still writes the
    PNG and warns (docs/evaluation.md)."""
    import musicgen.generation.api.render as render

    midi = short_midi(tmp_path / "short.mid")
    monkeypatch.setattr(render, "_soundfont_for_pip_synth", lambda soundfont: None)
    monkeypatch.setenv("MUSICGEN_FLUIDSYNTH", str(tmp_path / "no-fluidsynth"))
    for flag in ("--wav", "--ogg"):
        assert main(["render", str(midi), flag, "--out", str(tmp_path / "o")]) == 1
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err
        assert "cannot synthesize (a General MIDI soundfont not found)" in err
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").iterdir())
    assert main(["render", str(midi), "--out", str(tmp_path / "d")]) == 0
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["short.png"]
    assert "render: no WAV (a General MIDI soundfont not found)" in capsys.readouterr().err


def test_a_set_but_missing_musicgen_soundfont_is_an_error(tmp_path, capsys, monkeypatch):
    midi = short_midi(tmp_path / "short.mid")
    missing = tmp_path / "nowhere.sf2"
    monkeypatch.setenv("MUSICGEN_SOUNDFONT", str(missing))
    assert main(["render", str(midi), "--wav", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"error: $MUSICGEN_SOUNDFONT: {missing}: soundfont not found"
    with pytest.raises(MusicgenError, match=r"\$MUSICGEN_SOUNDFONT: .*nowhere.sf2"):
        synthesize(midi, tmp_path / "x.wav")
