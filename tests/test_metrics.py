"""Style similarity and music statistics: exact on hand-built pieces, plausible on POP909."""

from __future__ import annotations

import math

import numpy as np
import pytest
import symusic
from paths import DATA

from musicgen.errors import MusicgenError
from musicgen.measures.metrics import (
    bar_self_similarity,
    cosine,
    empty_bar_rate,
    grammar_error_rate,
    groove_consistency,
    load_notes,
    make_notes,
    music_statistics,
    note_density,
    notes_from_score,
    onset_duration_histogram,
    pitch_class_entropy,
    polyphony,
    repeated_bar_rate,
    rhythm_repeat_rate,
    scale_consistency,
    style_similarity,
    style_similarity_per_track,
    time_pitch_histogram,
)

POP909 = DATA / "pop909"


def song(n: int):
    return load_notes(POP909 / f"{n:03d}" / f"{n:03d}.mid")


# --- style similarity -------------------------------------------------------------------------


def test_identical_pieces_score_one():
    a = song(1)
    sim = style_similarity(a, a)
    assert sim["time_pitch"] == pytest.approx(1.0)
    assert sim["onset_duration"] == pytest.approx(1.0)


def test_disjoint_histograms_score_zero():
    # A: quarter notes on beats 0 and 1 of each bar, rising by 2; B: eighths on beats 2.5, 3,
    # 1.5 beats long, rising by 7. No shared (dt, interval) or (position, duration) bin.
    a = make_notes([0, 1, 4, 5], [0.25] * 4, [60, 62, 60, 62])
    b = make_notes([2.5, 3.0], [1.5, 1.5], [60, 67])
    sim = style_similarity(a, b)
    assert sim["time_pitch"] == 0.0
    assert sim["onset_duration"] == 0.0


def test_different_songs_are_between():
    sim = style_similarity(song(1), song(2))
    assert 0.0 < sim["time_pitch"] < 1.0
    assert 0.0 < sim["onset_duration"] < 1.0


def test_time_pitch_is_transposition_invariant():
    a = song(5)
    up = make_notes(a.onset, a.duration, a.pitch + 5)
    assert np.array_equal(time_pitch_histogram(a), time_pitch_histogram(up))
    assert style_similarity(a, up)["time_pitch"] == pytest.approx(1.0)


def test_time_pitch_counts_ordered_pairs_in_beats():
    # 60 and 64 together, 62 one beat later, 83 at 1.5 beats, 60 again at 4 beats
    notes = make_notes([0, 0, 1, 1.5, 4], [1] * 5, [60, 64, 62, 83, 60])
    h = time_pitch_histogram(notes)
    assert h.shape == (24, 41)
    c = 20  # column of interval 0
    assert h[0, c + 4] == 1 and h[0, c - 4] == 1  # simultaneous 60/64: both orders count
    assert h[6, c + 2] == 1 and h[6, c - 2] == 1  # 60 -> 62 and 64 -> 62, 1 beat = bin 6
    assert h[9, c + 19] == 1  # 64 -> 83 at 1.5 beats
    assert h[18, c - 2] == 1  # 62 -> 60 at 3 beats
    # left out: 60 -> 83 (+23), 62 -> 83 (+21), 83 -> 60 (-23), 60/64 -> 60 at exactly 4 beats
    assert h.sum() == 6


def test_onset_duration_bins():
    notes = make_notes([4.5, 0.0, 3.99], [3.0, 0.1, 0.5], [60, 60, 60])
    h = onset_duration_histogram(notes)
    assert h.shape == (24, 12)
    assert h[3, 11] == 1  # bar position 0.5 beats -> bin 3; 3 beats long -> last bin
    assert h[0, 0] == 1
    assert h[23, 3] == 1
    assert h.sum() == 3


def test_empty_histogram_has_zero_similarity():
    assert cosine(np.zeros(5), np.ones(5)) == 0.0
    empty = make_notes([], [], [])
    assert style_similarity(empty, song(1))["time_pitch"] == 0.0


def test_per_track_similarity_matches_roles():
    keys = ["program:33", "drums"]
    src = make_notes([0, 1, 0, 0.5], [1, 1, 0.1, 0.1], [40, 43, 36, 42], [0, 0, 1, 1], keys)
    only_bass = make_notes([0, 1], [1, 1], [40, 43], [0, 0], keys)
    extra = make_notes([0, 1, 2], [1, 1, 1], [40, 43, 70], [0, 0, 1], ["program:33", "program:0"])
    out = style_similarity_per_track(only_bass, src)
    assert out["program:33"]["time_pitch"] == pytest.approx(1.0)
    assert out["drums"] == {"time_pitch": 0.0, "onset_duration": 0.0}  # missing track
    assert set(style_similarity_per_track(extra, src)) == {"program:33", "drums"}


# --- descriptive statistics --------------------------------------------------------------------


def test_pitch_class_entropy_exact():
    assert pitch_class_entropy(make_notes([0, 1, 2], [1] * 3, [60, 64, 67])) == pytest.approx(
        math.log2(3)
    )
    assert pitch_class_entropy(make_notes([0, 1], [1, 1], [60, 72])) == 0.0
    assert pitch_class_entropy(make_notes(range(12), [1] * 12, range(60, 72))) == pytest.approx(
        math.log2(12)
    )


def test_scale_consistency_exact():
    c_major = [60, 62, 64, 65, 67, 69, 71]
    assert scale_consistency(make_notes(range(7), [1] * 7, c_major)) == 1.0
    assert scale_consistency(make_notes(range(8), [1] * 8, c_major + [66])) == pytest.approx(7 / 8)


def test_density_polyphony_groove_empty_bars_exact():
    # bar 0: C major chord (1 beat) then a single note (1 beat); bar 2: the same; bar 1 empty
    on = [0, 0, 0, 1, 8, 8, 8, 9]
    notes = make_notes(on, [1] * 8, [60, 64, 67, 72] * 2)
    assert note_density(notes) == pytest.approx(8 / 3)
    assert polyphony(notes) == pytest.approx(2.0)  # 3 voices half the sounding time, 1 the rest
    assert empty_bar_rate(notes) == pytest.approx(1 / 3)
    same = make_notes([0, 1, 4, 5, 8, 9], [1] * 6, [60] * 6)
    assert groove_consistency(same) == 1.0
    one_more = make_notes([0, 4, 6], [1] * 3, [60] * 3)  # bar 1 adds an onset on beat 2
    assert groove_consistency(one_more) == pytest.approx(1 - 1 / 48)


def test_drums_are_left_out_of_pitch_statistics():
    drums = make_notes([0, 1], [0.1, 0.1], [36, 38], [0, 0], ["drums"])
    assert math.isnan(pitch_class_entropy(drums))
    assert note_density(drums) == 2.0


def test_statistics_of_real_songs_are_plausible():
    for n in (1, 2, 3):
        s = music_statistics(song(n))
        assert 2.0 < s["pitch_class_entropy"] < math.log2(12)
        assert 0.8 < s["scale_consistency"] <= 1.0
        assert 5 < s["note_density"] < 60
        assert 1.5 < s["polyphony"] < 6
        assert 0.7 < s["groove_consistency"] <= 1.0
        assert 0.0 <= s["empty_bar_rate"] < 0.2


def test_notes_from_score_uses_beats():
    score = symusic.Score(480)
    track = symusic.Track("bass", 33, False)
    track.notes.append(symusic.Note(960, 240, 40, 90))
    drums = symusic.Track("kit", 0, True)
    drums.notes.append(symusic.Note(0, 60, 36, 90))
    score.tracks.extend([track, drums])
    notes = notes_from_score(score)
    assert notes.track_keys == ["program:33", "drums"]
    assert notes.is_drum == [False, True]
    assert notes.onset.tolist() == [0.0, 2.0]
    assert notes.duration.tolist() == [0.125, 0.5]
    assert notes.of_track("program:33").pitch.tolist() == [40]


def test_unreadable_midi_is_one_line_error(tmp_path):
    bad = tmp_path / "bad.mid"
    bad.write_bytes(b"not a midi file")
    with pytest.raises(MusicgenError, match="bad.mid"):
        load_notes(bad)
    with pytest.raises(MusicgenError, match="not found"):
        load_notes(tmp_path / "missing.mid")


def test_grammar_error_rate_counts_rejected_ids():
    from musicgen.tokenizers import build_tokenizer

    tok = build_tokenizer("remi")
    ids = tok.encode(POP909 / "001" / "001.mid")
    assert grammar_error_rate(ids, tok.grammar()) == 0.0
    duration = next(i for i in range(tok.vocab_size) if tok.token_name(i).startswith("Duration"))
    bad = ids[:5] + [duration] + ids[5:]  # a Duration where a Pitch or Position must come
    assert grammar_error_rate(bad, tok.grammar()) == pytest.approx(1 / len(bad))


# --- texture --------------------------------------------------------------------------------------


def texture_piece():
    """Known texture: 18 notes on 7 sixteenth-grid onsets over 5 bars.

    beat 0: C E G + a C 0.01 beat later (same grid onset, same pitch: 1 duplicate); beat 1: one
    note; beat 4: 9 notes (a stack); beat 8: one note; bar 3 empty; beats 16, 17, 18: one each.
    """
    onsets = [0, 0, 0, 0.01, 1] + [4] * 9 + [8, 16, 17, 18]
    pitches = [60, 64, 67, 60, 62] + list(range(60, 69)) + [60, 60, 62, 64]
    return make_notes(onsets, [0.5] * len(onsets), pitches)


def test_texture_statistics_of_a_constructed_piece():
    from musicgen.measures.metrics import (
        duplicate_note_rate,
        notes_per_onset,
        sparse_bar_rate,
        stacked_onset_rate,
    )

    p = texture_piece()
    assert len(p) == 18
    assert notes_per_onset(p) == pytest.approx(18 / 7)
    assert stacked_onset_rate(p) == pytest.approx(1 / 7)
    assert stacked_onset_rate(p, min_notes=4) == pytest.approx(2 / 7)  # beat 0 has 4 notes
    assert duplicate_note_rate(p) == pytest.approx(1 / 18)
    assert note_density(p) == pytest.approx(18 / 5)
    assert sparse_bar_rate(p) == pytest.approx(2 / 5)  # bar 2 (one note) and bar 3 (none)
    # half a sixteenth rounds up onto the next onset: a separate onset, no duplicate
    q = make_notes([0, 0.125], [1, 1], [60, 60])
    assert notes_per_onset(q) == 1.0 and duplicate_note_rate(q) == 0.0
    empty = make_notes([], [], [])
    assert all(
        math.isnan(f(empty))
        for f in (notes_per_onset, stacked_onset_rate, duplicate_note_rate, sparse_bar_rate)
    )


def test_texture_statistics_from_a_midi_score():
    """Two tracks doubling a pitch are duplicates; read through symusic at 480 ticks/beat."""
    score = symusic.Score(480)
    melody, piano = symusic.Track("melody", 0, False), symusic.Track("piano", 0, False)
    for k in range(8):  # 2 bars of quarter notes, the piano doubling the melody on beats 0, 4
        melody.notes.append(symusic.Note(k * 480, 480, 72 + k % 3, 90))
    for tick in (0, 1920):
        for pitch in (48, 55, 72):
            piano.notes.append(symusic.Note(tick, 1920, pitch, 70))
    score.tracks.extend([melody, piano])
    s = music_statistics(notes_from_score(score))
    assert s["notes_per_onset"] == pytest.approx(14 / 8)
    assert s["duplicate_note_rate"] == pytest.approx(1 / 14)  # beat 0 doubles 72; beat 4: 73 vs 72
    assert s["stacked_onset_rate"] == 0.0 and s["sparse_bar_rate"] == 0.0


def test_texture_of_real_pop909_songs():
    for n in (1, 2, 3, 4, 5):
        s = music_statistics(song(n))
        assert 1.0 <= s["notes_per_onset"] < 3.0
        assert s["stacked_onset_rate"] < 0.01
        assert s["duplicate_note_rate"] < 0.05
        assert s["sparse_bar_rate"] < 0.2


# --- repetition -------------------------------------------------------------------------------


def _loop(n_bars: int):
    """One 4/4 bar of eighth notes (C major arpeggio) repeated n_bars times."""
    pitches = [60, 64, 67, 72, 67, 64, 60, 55]
    onsets = [b * 4 + 0.5 * i for b in range(n_bars) for i in range(8)]
    return make_notes(onsets, [0.5] * len(onsets), pitches * n_bars)


def test_repetition_of_a_looping_piece():
    p = _loop(8)
    assert repeated_bar_rate(p) == pytest.approx(7 / 8)  # every bar after the first repeats
    assert rhythm_repeat_rate(p) == pytest.approx(7 / 8)
    assert bar_self_similarity(p) == pytest.approx(1.0)


def test_repetition_of_bars_that_share_nothing():
    # bar b: one note of pitch class b at position b (sixteenths); bar 2 is empty and not counted
    onsets, pitches = [0, 4.25, 12.75], [60, 61, 63]
    p = make_notes(onsets, [0.25] * 3, pitches)
    assert repeated_bar_rate(p) == 0.0 and bar_self_similarity(p) == 0.0
    assert rhythm_repeat_rate(p) == 0.0  # positions 0, 1 and 3 of their bars
    # a transposed bar is not a repeat, but shares its rhythm only: similarity stays 0 here
    # because pitch class and position are counted together
    q = make_notes([0, 0.5, 4, 4.5], [0.5] * 4, [60, 64, 62, 66])
    assert repeated_bar_rate(q) == 0.0 and bar_self_similarity(q) == 0.0
    assert rhythm_repeat_rate(q) == pytest.approx(0.5)  # bar 1 plays bar 0's rhythm
    half = make_notes([0, 0.5, 4, 4.5], [0.5] * 4, [60, 64, 60, 66])  # one of two notes shared
    assert bar_self_similarity(half) == pytest.approx(0.5)
    empty = make_notes([], [], [])
    assert math.isnan(repeated_bar_rate(empty)) and math.isnan(bar_self_similarity(empty))
    assert math.isnan(bar_self_similarity(make_notes([0], [1], [60])))  # a single bar


def test_repetition_of_real_pieces_is_below_a_loop():
    """POP909 songs repeat whole bars (choruses); a performance hardly ever repeats one exactly
    on the sixteenth grid; neither comes near a loop."""
    loop = bar_self_similarity(_loop(16))
    for n in (1, 5):
        s = music_statistics(song(n))
        assert 0.05 < s["repeated_bar_rate"] < 0.6
        assert s["repeated_bar_rate"] < s["rhythm_repeat_rate"] < 1.0  # figures over new chords
        assert 0.1 < s["bar_self_similarity"] < 0.6 < loop


@pytest.mark.shared
def test_repetition_of_real_performances():
    """MAESTRO performances (ASAP) never repeat a 2-second window exactly on the sixteenth grid
    and their windows share little; a constructed loop scores 7/8 and 1 (see above)."""
    from paths import SHARED

    root = SHARED / "asap_maestro"
    for rel in ("Bach/Fugue/bwv_846/Shi05M.mid", "Beethoven/Piano_Sonatas/16-2/LuoJ04M.mid"):
        s = music_statistics(load_notes(root / rel))
        assert s["repeated_bar_rate"] < 0.05
        assert 0.02 < s["bar_self_similarity"] < 0.3


def test_first_bars_start_at_the_first_notes_bar():
    p = make_notes([9.0, 10.5, 13.0, 17.0, 30.0], [0.5] * 5, [60, 62, 64, 65, 67])
    head = p.first_bars(2)  # bars 2 and 3 (beats 8-16), shifted to start at beat 0
    assert head.onset.tolist() == [1.0, 2.5, 5.0] and head.pitch.tolist() == [60, 62, 64]
    assert len(make_notes([], [], []).first_bars(4)) == 0


def test_repetition_with_an_onset_rounding_onto_the_next_bar():
    """3.95 beats rounds to the sixteenth at 4.0: the note is in bar 1 (it was an IndexError)."""
    p = make_notes([0.0, 3.95], [0.25, 0.25], [60, 60])
    assert repeated_bar_rate(p) == pytest.approx(0.5)  # bar 1 repeats bar 0 (position 0, C4)
    assert bar_self_similarity(p) == pytest.approx(1.0)
