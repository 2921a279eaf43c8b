"""Whole-song measures (musicgen.measures.song) on bundled POP909 songs with their phrase
annotations, and the whole-song mode of `musicgen evaluate form` on a tiny model."""

import json

import numpy as np
import pytest
import symusic
from paths import DATA

from musicgen.measures.phrases import phrase_density_spread, phrase_similarity
from musicgen.measures.song import (
    Chord,
    Song,
    chord_agreement,
    detect_chords,
    melody_measures,
    recognise,
    song_from_score,
    song_measures,
)
from musicgen.tokenizers.form import Phrase, Section, parse_form, place

ALIGNED = ("001", "002", "003", "004")  # bundled songs that align with their annotation
TPQ = 480


def aligned_song(name: str) -> Song:
    """A bundled song on its annotated bars, from its first phrase (bar 0 = that phrase)."""
    from musicgen.data.pop909_structure import align_song

    score = symusic.Score(str(DATA / "pop909" / name / f"{name}.mid"))
    song = align_song(score, DATA / "pop909_structure" / name)
    assert song.aligned
    first = song.sections[0].bar
    shifted = song.score.shift_time(-first * 4 * song.score.ticks_per_quarter)
    return song_from_score(
        shifted, [Section(s.bar - first, s.label, s.bars) for s in song.sections]
    )


def with_sections(song: Song, sections) -> Song:
    return Song(song.notes, song.melody, song.accompaniment, list(sections))


def hand_score(tracks: dict[str, list[tuple[float, float, int]]]) -> symusic.Score:
    """A score of named tracks of (onset beats, duration beats, pitch) notes."""
    score = symusic.Score(TPQ)
    for name, notes in tracks.items():
        track = symusic.Track(name, 0, False)
        for on, dur, pitch in notes:
            track.notes.append(symusic.Note(int(on * TPQ), int(dur * TPQ), pitch, 80))
        score.tracks.append(track)
    return score


def test_real_songs_repeat_material_by_label():
    """Same-label phrases are more alike than different-label ones in every aligned song."""
    for name in ALIGNED:
        sim = phrase_similarity(aligned_song(name))
        assert sim["same_label"] > sim["different_label"] + 0.05, name
        assert sim["contrast"] == pytest.approx(sim["same_label"] - sim["different_label"])
        assert 0.5 < sim["same_label"] <= 1.0


def test_a_shuffled_form_has_no_contrast():
    """The same notes scored against their own phrases with the labels shuffled: the contrast
    averages about 0 (the real forms: well above)."""
    rng = np.random.default_rng(0)
    shuffled, real = [], []
    for name in ALIGNED:
        song = aligned_song(name)
        real.append(phrase_similarity(song)["contrast"])
        for _ in range(25):
            labels = [s.label for s in song.sections]
            rng.shuffle(labels)
            form = [
                Section(s.bar, lab, s.bars) for s, lab in zip(song.sections, labels, strict=True)
            ]
            shuffled.append(phrase_similarity(with_sections(song, form))["contrast"])
    assert abs(np.nanmean(shuffled)) < 0.02
    assert min(real) > 0.08


def test_a_hand_built_form_is_heard():
    """A4 B4 A4 where A's bars are one figure and B's another: same-label similarity 1."""
    a = [(b * 4 + k, 1, 60 + 4 * (k % 2)) for b in range(4) for k in range(4)]
    bb = [(b * 4 + k + 0.5, 0.5, 62) for b in range(4, 8) for k in range(4)]
    a2 = [(on + 32, d, p) for on, d, p in a]
    song = song_from_score(hand_score({"Piano": a + bb + a2}), place(parse_form("A4B4A4")))
    sim = phrase_similarity(song)
    assert sim["same_label"] == pytest.approx(1.0)
    assert sim["different_label"] < 0.5
    other = song_from_score(hand_score({"Piano": a + bb + a2}), place(parse_form("X4X4X4")))
    assert np.isnan(phrase_similarity(other)["same_label"])  # "other" phrases share nothing


def test_melody_measures_of_a_real_song_and_without_its_melody():
    song = aligned_song("002")
    mel = melody_measures(song)
    assert mel["coverage"] > 0.9
    assert 5 <= mel["range"] <= 30 and 1 <= mel["interval"] <= 5
    assert mel["ends_on_chord_tone"] >= 0.5
    gone = Song(song.accompaniment, song.melody.select(np.zeros(len(song.melody), bool)),
                song.accompaniment, song.sections)  # fmt: skip
    none = melody_measures(gone)
    assert none["coverage"] == 0.0 and np.isnan(none["range"]) and np.isnan(none["interval"])


def test_tracks_named_melody_are_the_melody():
    """A Melody track beside a Piano track is the melody; a score with one unnamed track has
    none; a score of the melody alone is all melody."""
    both = song_from_score(
        hand_score({"Piano": [(0, 4, 48)], "Melody": [(0, 1, 72), (1, 1, 74)]}),
        place([Phrase("A", 1)]),
    )
    assert list(both.melody.pitch) == [72, 74] and list(both.accompaniment.pitch) == [48]
    one = song_from_score(hand_score({"": [(0, 1, 60)]}), place([Phrase("A", 1)]))
    assert len(one.melody) == 0 and melody_measures(one)["coverage"] == 0.0
    alone = song_from_score(hand_score({"MELODY": [(0, 1, 60)]}), place([Phrase("A", 1)]))
    assert len(alone.melody) == 1 and len(alone.accompaniment) == 0


def test_coverage_counts_only_melodic_phrases_and_held_notes():
    """i2 A2: a melody note held from bar 2 through bar 3 covers both A bars; the intro's
    silent melody does not count against it."""
    score = hand_score({"Piano": [(0, 16, 48)], "Melody": [(8, 8, 72)]})
    song = song_from_score(score, place(parse_form("i2A2")))
    assert melody_measures(song)["coverage"] == 1.0
    song = song_from_score(score, place(parse_form("A2A2")))
    assert melody_measures(song)["coverage"] == 0.5


def test_melody_outside_counts_bars_of_melodyless_phrases_where_it_starts():
    """i2 A1 o1: a pickup in the intro's last bar counts that bar (1 of 3 quiet bars); a note
    held from the A bar into the outro starts nothing there."""
    score = hand_score({"Piano": [(0, 16, 48)], "Melody": [(6, 2, 72), (8, 6, 74)]})
    song = song_from_score(score, place(parse_form("i2A1o1")))
    assert melody_measures(song)["outside"] == pytest.approx(1 / 3)
    assert np.isnan(melody_measures(song_from_score(score, place(parse_form("A4"))))["outside"])


def test_melody_notes_per_bar_counts_onsets_in_melodic_bars_once():
    """i1 A2: a harmonised melody onset counts once, the intro's pickup not at all: 3 onsets
    over 2 melodic bars; a song without melody has none."""
    melody = [(2, 2, 67), (4, 2, 72), (4, 2, 64), (6, 2, 74), (8, 4, 76)]
    score = hand_score({"Piano": [(0, 12, 48)], "Melody": melody})
    song = song_from_score(score, place(parse_form("i1A2")))
    assert melody_measures(song)["notes_per_bar"] == pytest.approx(3 / 2)
    quiet = song_from_score(hand_score({"Piano": [(0, 12, 48)]}), place(parse_form("i1A2")))
    assert melody_measures(quiet)["notes_per_bar"] == 0.0


def test_melody_register_is_the_median_of_its_line():
    """A harmonised onset counts its highest note: the line 67, 72, 74, 76 has median 73."""
    melody = [(2, 2, 67), (4, 2, 72), (4, 2, 64), (6, 2, 74), (8, 4, 76)]
    song = song_from_score(hand_score({"Piano": [(0, 12, 48)], "Melody": melody}),
                           place(parse_form("i1A2")))  # fmt: skip
    assert melody_measures(song)["register"] == 73.0
    quiet = song_from_score(hand_score({"Piano": [(0, 12, 48)]}), place(parse_form("i1A2")))
    assert np.isnan(melody_measures(quiet)["register"])


def test_contrast_splits_into_rhythm_and_harmony():
    """A1 B1 A1, every bar the same eighth-note pattern, A on C major and B on D minor: the
    rhythm half tells nothing apart (contrast 0), the harmony half carries the form."""
    chords = {"A": (60, 64, 67), "B": (62, 65, 69)}
    notes = [
        (bar * 4 + i / 2, 0.5, chords[label][i % 3])
        for bar, label in enumerate("ABA")
        for i in range(8)
    ]
    sim = phrase_similarity(
        song_from_score(hand_score({"Piano": notes}), place(parse_form("A1B1A1")))
    )
    assert sim["rhythm_contrast"] == pytest.approx(0.0, abs=1e-12)
    assert sim["harmony_contrast"] > 0.5
    assert sim["contrast"] == pytest.approx((sim["rhythm_contrast"] + sim["harmony_contrast"]) / 2)


def test_density_spread_is_how_much_phrases_differ_in_notes_a_bar():
    """A2 B2 with 4 then 8 notes a bar: notes a bar [4, 8], sd 2 over mean 6; the same bars
    under one phrase, or every bar alike, spread nothing."""
    notes = [(b * 4 + i * (4 / n), 4 / n, 60) for b, n in enumerate((4, 4, 8, 8)) for i in range(n)]
    score = hand_score({"Piano": notes})
    assert phrase_density_spread(song_from_score(score, place(parse_form("A2B2")))) == (
        pytest.approx(1 / 3)
    )
    assert np.isnan(phrase_density_spread(song_from_score(score, place(parse_form("A4")))))
    even = hand_score({"Piano": [(b, 1, 60) for b in range(16)]})
    assert phrase_density_spread(song_from_score(even, place(parse_form("A2B2")))) == 0.0
    assert song_measures(song_from_score(score, place(parse_form("A2B2"))))[
        "phrase_density_spread"
    ] == pytest.approx(1 / 3)


def test_a_phrase_closes_on_its_held_note_not_on_the_pickup():
    """Over C major, a phrase ends on a held E then a pickup D into the next phrase: the held
    E is the closing note (a chord tone); ending on a held F is not. (b, no melody: not counted.)"""
    piano = [(b * 4, 4, p) for b in range(4) for p in (48, 52, 55)]
    for held, want in ((64, 1.0), (65, 0.0)):
        mel = [(0, 1, 60), (4, 3, held), (7.5, 0.5, 62), (8, 4, 60)]
        song = song_from_score(
            hand_score({"Piano": piano, "Melody": mel}), place(parse_form("A2b2"))
        )
        assert melody_measures(song)["ends_on_chord_tone"] == want


def test_chords_are_recognised_and_agreement_counts_them():
    assert recognise(np.bincount([0, 4, 7], minlength=12).astype(float)) == (0, "maj")
    assert recognise(np.bincount([9, 0, 4], minlength=12).astype(float)) == (9, "min")
    assert recognise(np.bincount([7, 11, 2, 5], minlength=12).astype(float)) == (7, "7dom")
    notes = [(0, 4, p) for p in (48, 52, 55)] + [(4, 4, p) for p in (45, 48, 52)]
    song = song_from_score(hand_score({"Piano": notes}), place(parse_form("A2")))
    found = detect_chords(song.notes, 2)
    assert [(c.root, c.quality) for c in found] == [(0, "maj")] * 2 + [(9, "min")] * 2
    given = [Chord(0, 4, 0, "maj"), Chord(4, 8, 9, "min")]
    assert chord_agreement(song, given) == {"agree": 1.0, "exact": 1.0, "tone_share": 1.0}
    wrong = chord_agreement(song, [Chord(0, 4, 7, "maj"), Chord(4, 8, 9, "7min")])
    assert wrong["agree"] == 0.5 and wrong["exact"] == 0.0 and wrong["tone_share"] < 1.0


def test_song_measures_of_a_real_song():
    m = song_measures(aligned_song("003"), prompt_bars=4)
    assert 1.2 < m["notes_per_onset"] < 3.5 and m["stacked_onset_rate"] < 0.02
    assert 0 < m["repeated_bar_rate"] < 0.6
    assert m["key_match"] > 0.8 and m["prompt_key_match"] == 1.0
    assert np.isnan(song_measures(aligned_song("003"))["prompt_key_match"])


def test_cut_form():
    from musicgen.evaluate.song import cut_form

    form = parse_form("i4A8B8")
    assert cut_form(form, None) == form
    assert cut_form(form, 10) == [Phrase("i", 4), Phrase("A", 6)]
    assert cut_form(form, 4) == [Phrase("i", 4)]


def test_a_case_is_the_song_from_its_first_phrase():
    """The real side of a case: the song through the tokenizer, bar 0 its first annotated
    phrase, its melody a track of its own, its annotated chords on its bars."""
    from musicgen.evaluate.song import make_song_case
    from musicgen.tokenizers import build_tokenizer

    tok = build_tokenizer("configs/tokenizer/remi_song.yaml")
    case = make_song_case(
        tok, DATA / "pop909" / "002" / "002.mid", DATA / "pop909_structure" / "002", 16
    )
    assert sum(p.bars for p in case.phrases) == 16 and case.phrases[0].label == "i"
    real = case.real
    assert real.bars == 16 and len(real.melody) > 20
    assert real.notes.onset.max() < 16 * 4
    assert case.chords and all(0 <= c.start < c.end <= 64 for c in case.chords)
    assert chord_agreement(real, case.chords)["agree"] > 0.6  # the recogniser on real songs
    assert make_song_case(
        tok, DATA / "pop909" / "005" / "005.mid", DATA / "pop909_structure" / "005", None
    ) == ("does not align with its annotation")


@pytest.fixture(scope="module")
def song_checkpoint(tmp_path_factory):
    from conftest import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("song"), "configs/tokenizer/remi_song.yaml")


@pytest.mark.slow
def test_whole_song_mode_end_to_end(tmp_path, song_checkpoint, capsys):
    """One song cut at 3 bars, written from scratch and after its first 2 bars, the copy rule on
    and off, and with its chords: song.json holds every measure per side, the differences and
    the rule's pairs; the MIDI and the table are written; the prompt is kept."""
    from musicgen.cli import main
    from musicgen.evaluate.song import MEASURES

    out = tmp_path / "song"
    argv = ["evaluate", "form", "--whole-song", "--checkpoint", str(song_checkpoint)]
    argv += ["--data", str(DATA / "pop909"), "--structure", str(DATA / "pop909_structure")]
    argv += ["--split", "all", "--max-songs", "1", "--max-bars", "3", "--chords"]
    assert main(argv + ["--out", str(out), "--device", "cpu"]) == 0
    res = json.loads((out / "song.json").read_text())
    assert res["songs"] == ["001"] and res["forms"] == ["i3"] and res["piece_seeds"] == [0]
    runs = ["scratch default", "scratch r=0", "continue default", "continue r=0",
            "scratch chords default", "scratch chords r=0"]  # fmt: skip
    assert list(res["runs"]) == runs
    assert set(res["pairs"]) == {f"{runs[i]} - {runs[i + 1]}" for i in (0, 2, 4)}
    for side in ["real", *runs]:
        assert set(res["per_song"][side]) == set(MEASURES)
    assert res["per_song"]["continue default"]["prompt_kept"] == [1.0]
    for run in runs:
        piece = symusic.Score(str(out / "samples" / run.replace(" ", "_") / "001.mid"))
        assert max(n.time for t in piece.tracks for n in t.notes) < 3 * 4 * piece.ticks_per_quarter
    table = (out / "song.md").read_text()
    assert "phrase_contrast" in table and "scratch r=0" in table
    assert "phrase_contrast" in capsys.readouterr().out


def test_each_song_of_a_run_has_its_own_seed():
    """One seed for every song gave 26 of 29 pieces from scratch the same first bar; each song
    now has its own, disjoint between the seeds of two runs."""
    from musicgen.evaluate.song import piece_seeds

    assert piece_seeds(0, 3) == [0, 1, 2]
    first, second = piece_seeds(0, 29), piece_seeds(1, 29)
    assert len(set(first)) == 29 and not set(first) & set(second)


def test_whole_song_mode_errors_are_one_line(tmp_path, tiny_checkpoints, capsys):
    from musicgen.cli import main

    base = [
        "evaluate",
        "form",
        "--whole-song",
        "--data",
        str(DATA / "pop909"),
        "--out",
        str(tmp_path),
    ]
    cases = [
        ([], "--structure"),
        (["--structure", str(tmp_path / "none")], "structure folder not found"),
    ]
    for extra, says in cases:
        argv = base + ["--checkpoint", str(tiny_checkpoints["remi"])] + extra
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err, err
    argv = base + [
        "--checkpoint",
        str(tiny_checkpoints["remi"]),
        "--structure",
        str(DATA / "pop909_structure"),
    ]
    assert main(argv) == 1
    assert "no section tokens" in capsys.readouterr().err


def test_densities_need_a_model_with_density_tokens(tmp_path, song_checkpoint, capsys):
    from musicgen.cli import main

    argv = ["evaluate", "form", "--whole-song", "--checkpoint", str(song_checkpoint), "--data"]
    argv += [str(DATA / "pop909"), "--structure", str(DATA / "pop909_structure"), "--densities"]
    assert main(argv + ["--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "no density tokens" in err and "\n" not in err
