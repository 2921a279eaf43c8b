"""Working on a piece already made, without a browser (`studio.rework`, `keep.undo`): a song
with a form extended from its end (the whole song, its markers, then the new bars), one section
written again with the rest kept, undo back through both, the section choices the page offers,
Stop on an extend keeping whole bars; the sound as request fields (one tempo held, the melody's
instrument) and the player's chords read from the file's chord markers. In Chromium:
test_studio_browser.py (`test_extend_undo_rewrite_and_reload`)."""

from __future__ import annotations

import pytest
import symusic

from musicgen.errors import MusicgenError
from musicgen.studio import jobs, rework
from musicgen.studio.keep import undo
from musicgen.studio.pieces import chords_per_bar
from tests.paths import ROOT

LABEL = "pop909_sine_spe_gated"
MODEL = ROOT / "checkpoints" / LABEL


def notes_between(path, first: int, end: int, held: bool = True) -> list[tuple[int, ...]]:
    """(time, pitch, duration) of the notes starting in bars first..end-1 (4/4, in ticks);
    without `held`, (time, pitch): a note sounding into a rewritten section is cut there."""
    score = symusic.Score(str(path))
    bar = 4 * score.ticks_per_quarter
    return sorted(
        (n.time, n.pitch, n.duration)[: 3 if held else 2]
        for t in score.tracks
        for n in t.notes
        if first * bar <= n.time < end * bar
    )


def phrases(path) -> list[tuple[int, str]]:
    return [(m.time, m.text) for m in symusic.Score(str(path)).markers if " " not in m.text]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(model, session, song, extended): a song in form i2A4B4 at tempo 100, then extended
    by 8 bars from its end."""
    cache = jobs.ModelCache(jobs.model_choices([MODEL]), "cpu")
    model = cache.get(LABEL)
    session = jobs.Session(tmp_path_factory.mktemp("rework"))
    [song] = jobs.run_generate(model, session, "pop", seed=4, form="i2A4B4", tempo=100)
    [longer] = jobs.run_continue(model, session, "pop", song.midi, mode="end", new_bars=8, seed=5)
    return model, session, song, longer


def test_extend_gives_the_whole_song_and_the_new_bars(made):
    _, session, song, longer = made
    assert song.bars == 10 and longer.bars == 18
    assert longer.label.startswith("ext_002: pop extends ") and "by 8 bars" in longer.label
    assert notes_between(longer.midi, 0, 10) == notes_between(song.midi, 0, 10)  # kept as it was
    assert notes_between(longer.midi, 10, 18)  # the new bars
    assert phrases(longer.midi)[:3] == phrases(song.midi)  # the form's markers kept
    assert [s[2] for s in longer.roll.sections][:3] == ["Intro", "Verse", "Chorus"]
    assert longer.roll.prompt_end == pytest.approx(longer.roll.bars[10], abs=1e-3)
    assert "_ext8bars_seed5_" in longer.midi.name
    assert session.history == ["gen_001"]


def test_one_section_written_again_keeps_the_rest_and_undo_goes_back(made):
    model, session, song, longer = made
    choices = rework.section_choices(longer)
    assert choices[:3] == [
        ("Intro, bars 1-2", "0:2"), ("Verse, bars 3-6", "2:6"), ("Chorus, bars 7-10", "6:10")
    ]  # fmt: skip
    assert choices[-1] == rework.BARS_CHOICE
    span = rework.chosen_span("6:10", None, None)
    again = rework.run_regenerate(model, session, "pop", longer.midi, span, seed=6)
    assert again.bars == 18 and "bars 7-10" in again.label
    assert notes_between(again.midi, 0, 6, False) == notes_between(longer.midi, 0, 6, False)
    assert notes_between(again.midi, 10, 18) == notes_between(longer.midi, 10, 18)
    assert notes_between(again.midi, 6, 10) != notes_between(longer.midi, 6, 10)
    assert phrases(again.midi) == phrases(longer.midi)
    assert session.history == ["gen_001", "ext_002"]
    assert undo(session).id == "ext_002" and undo(session).id == "gen_001"
    assert undo(session) is None and session.by_id("redo_003") is again  # nothing deleted


def test_a_set_tempo_is_held_and_the_melody_is_a_lead(made):
    _, _, song, longer = made
    for piece in (song, longer):
        score = symusic.Score(str(piece.midi))
        assert [t.qpm for t in score.tempos] == [pytest.approx(100)]  # one tempo
        programs = {t.name: t.program for t in score.tracks}
        assert programs["Melody"] == 73 and programs["Piano"] == 0  # Flute over the piano


def test_the_melody_instrument_is_a_request_field(made, tmp_path):
    model = made[0]
    session = jobs.Session(tmp_path)
    [piece] = jobs.run_generate(model, session, "pop", bars=1, seed=2, melody=81)
    score = symusic.Score(str(piece.midi))
    assert {t.name: t.program for t in score.tracks}.get("Melody", 81) == 81
    with pytest.raises(MusicgenError, match="melody: must be >= 0 and <= 127, got 128"):
        jobs.run_generate(model, session, "pop", bars=1, melody=128)


def test_stop_on_an_extend_keeps_the_whole_song_and_the_bars_written(made, tmp_path):
    model, _, song, _ = made
    session = jobs.Session(tmp_path)

    def progress(done, total):
        if done / total * 32 >= 3 and session.running:
            session.running.pop().set()  # Stop, once 3 of the 32 new bars are begun

    [piece] = jobs.run_continue(model, session, "pop", song.midi, mode="end", new_bars=32,
                                seed=3, progress=progress)  # fmt: skip
    assert piece.stopped_at is not None and 1 <= piece.stopped_at < 32
    assert piece.bars == 10 + piece.stopped_at
    assert notes_between(piece.midi, 0, 10) == notes_between(song.midi, 0, 10)
    assert not notes_between(piece.midi, piece.bars, 100)  # whole bars only


def test_bars_typed_in_and_bad_choices_are_one_line():
    assert rework.chosen_span("bars", 3, 4) == (2, 4)  # bars 3 and 4, as the page counts
    with pytest.raises(MusicgenError, match="to bar: must be at least the first bar"):
        rework.chosen_span("bars", 5, 4)
    with pytest.raises(MusicgenError, match="from bar: must be >= 1"):
        rework.chosen_span("bars", 0, 4)
    with pytest.raises(MusicgenError, match="section: choose one"):
        rework.chosen_span("Chorus", None, None)
    assert rework.section_choices(None) == [rework.BARS_CHOICE]


def test_the_player_reads_chords_from_the_file_markers_in_the_key_spelling():
    score = symusic.Score(480)
    for time, text in ((0, "Chord C#m7"), (1920, "A4"), (3840, "Chord Ab"), (4800, "Chord Bb")):
        score.markers.append(symusic.TextMeta(time, text))
    assert chords_per_bar(score, flats=True) == ["Dbm7", "Dbm7", "Ab"]
    assert chords_per_bar(score, flats=False) == ["C#m7", "C#m7", "G#"]
    assert chords_per_bar(symusic.Score(480)) == []
