"""The studio's player as a songwriter reads it (the SVG and HTML it renders, no browser):
named section bands, one chord a bar spelt as the key spells it (a repeated chord still shown),
key and tempo in the title, a pitch axis, a legend, the click that seeks. A generated song's
player through the jobs: test_studio.py; the click in Chromium: test_studio_browser.py."""

from __future__ import annotations

import re

import symusic

from musicgen.studio import harmony
from musicgen.studio.player import PLAYHEAD_JS, meta, roll_of, svg
from musicgen.tokenizers.form import Phrase, add_markers, place

TPQ = 480
BAR = 4 * TPQ


def song(phrases: list[Phrase], qpm: float = 100.0) -> symusic.Score:
    """A melody and a piano in A minor over the phrases' bars, with their markers."""
    score = symusic.Score(TPQ)
    score.tempos.append(symusic.Tempo(0, qpm))
    melody = symusic.Track(name="Melody", program=0)
    piano = symusic.Track(name="Piano", program=0)
    bars = sum(p.bars for p in phrases)
    for bar in range(bars):
        for beat, pitch in enumerate((69, 72, 76, 74)):  # A C E D
            melody.notes.append(symusic.Note(bar * BAR + beat * TPQ, TPQ, pitch, 90))
        for pitch in (45, 57, 60, 64):  # A minor
            piano.notes.append(symusic.Note(bar * BAR, BAR, pitch, 70))
    score.tracks.extend([melody, piano])
    add_markers(score, place(phrases))
    return score


def texts(drawing: str, cls: str) -> list[str]:
    return re.findall(rf'class="{cls}"[^>]*>([^<]*)</text>', drawing)


def test_sections_are_named_bands_over_their_bars():
    score = song([Phrase("i", 1), Phrase("A", 2), Phrase("B", 2), Phrase("o", 1)])
    roll = roll_of(score, ["Am"] * 6)
    assert [name for *_, name in roll.sections] == ["Intro", "Verse", "Chorus", "Outro"]
    assert roll.sections[1][0] == roll.bars[1] and roll.sections[2][1] == roll.bars[5]
    drawing = svg(roll, "audio-0")
    assert texts(drawing, "mg-section") == ["Intro", "Verse", "Chorus", "Outro"]
    assert drawing.count('class="mg-band"') == 4
    # the chord line under the roll names each section where it begins
    assert re.search(r"mg-at\">Verse</span> <span><b>2</b> Am", drawing)


def test_one_chord_a_bar_a_repeated_chord_still_shown():
    events = [(0, 0, "Am"), (0, 8, "C"), (2, 0, "F"), (3, 4, "G")]
    assert harmony.one_per_bar(events, 5) == ["Am", "C", "F", "F", "G"]
    assert harmony.one_per_bar([(1, 8, "E")], 3) == ["", "E", "E"]
    roll = roll_of(song([Phrase("A", 4)]), ["Am", "C", "F"])  # the last carries to the end
    assert roll.chords == ["Am", "C", "F", "F"]
    drawing = svg(roll, "audio-0")
    assert texts(drawing, "mg-chord") == ["Am", "C", "F", "F"]  # one each, none run together
    assert all(s == 22 for _, s, _ in labels(drawing))  # room for each at full size
    many = svg(roll_of(song([Phrase("A", 32), Phrase("B", 32)]), ["Cmaj7", "Am7"] * 32), "a")
    drawn = labels(many)
    assert 10 < len(drawn) < 64  # a 64-bar song: as many as fit, none running together
    for (x0, size, name), (x1, _, _) in zip(drawn, drawn[1:], strict=False):
        assert x0 + 0.62 * size * len(name) < x1
    assert many.count("<span><b>") == 64  # the line under the roll names every bar's


def labels(drawing: str) -> list[tuple[float, float, str]]:
    """(x, font size, name) of the chord names over the roll."""
    found = re.findall(r'<text x="([\d.]+)" [^>]*class="mg-chord" font-size="([\d.]+)">([^<]*)<',
                       drawing)  # fmt: skip
    return [(float(x), float(size), name) for x, size, name in found]


def test_chords_are_spelt_as_a_lead_sheet_and_as_the_key_spells_them():
    assert harmony.chord_symbol("A:7min") == "Am7"  # not A7min
    assert harmony.chord_symbol("A:min7") == "Am7"
    assert harmony.chord_symbol("G:7dom") == "G7" and harmony.chord_symbol("B:7halfdim") == "Bm7b5"
    assert harmony.chord_symbol("A#:maj", flats=True) == "Bb"
    assert harmony.chord_symbol("A#:maj", flats=False) == "A#"
    assert harmony.chord_symbol("A:min", transpose=1, flats=True) == "Bbm"
    assert harmony.flats_for((5, False)) and harmony.flats_for((2, True))  # F major, D minor
    assert not harmony.flats_for((7, False)) and not harmony.flats_for((4, True))  # G, E minor
    assert harmony.key_name((3, False)) == "Eb major" and harmony.key_name((6, False)) == "F# major"


def test_key_and_tempo_in_the_title():
    score = song([Phrase("A", 2)], qpm=100)
    key = harmony.key_of(score)
    assert harmony.key_name(key) == "A minor"
    roll = roll_of(score)
    roll.key = harmony.key_name(key)
    assert meta(roll) == "A minor · 100 bpm"
    assert harmony.key_of(symusic.Score(TPQ)) is None


def test_a_pitch_axis_a_legend_and_a_click_that_seeks():
    drawing = svg(roll_of(song([Phrase("A", 2)])), "audio-1")
    assert texts(drawing, "mg-pitch") == ["C3", "C4", "C5"]  # the Cs the notes span
    legend = re.search(r'<div class="mg-legend">(.*?)</div>', drawing).group(1)
    assert re.findall(r"</i>(\w+)</span>", legend) == ["Melody", "Piano"]
    assert 'data-audio="audio-1"' in drawing and 'data-left="0.0367"' in drawing
    assert "addEventListener('click'" in PLAYHEAD_JS and "audio.currentTime =" in PLAYHEAD_JS
    assert "prompt" not in drawing.lower()
