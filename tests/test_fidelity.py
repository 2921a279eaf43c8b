"""Round-trip fidelity: pedal folding and note matching on hand-built scores with known answers,
and the grid bound on a bundled POP909 song through REMI."""

from __future__ import annotations

import numpy as np
import pytest
import symusic
from paths import DATA

from musicgen.errors import MusicgenError
from musicgen.measures.fidelity import measure, piano_notes, roundtrip_error
from musicgen.tokenizers.pedal import fold_pedal, folded_ends
from musicgen.tokenizers.remi import RemiTokenizer

TPQ = 480  # at 120 bpm one tick is 1/960 s


def score_of(notes, pedals=(), tempo=120.0) -> symusic.Score:
    """A one-track score from (onset_s, duration_s, pitch, velocity) at `tempo` (120: 960 t/s)."""
    s = symusic.Score(TPQ)
    s.tempos.append(symusic.Tempo(0, tempo))
    t = symusic.Track(name="piano", program=0, is_drum=False)
    tps = TPQ * tempo / 60.0
    for on, dur, p, v in notes:
        t.notes.append(symusic.Note(round(on * tps), round(dur * tps), p, v))
    for on, dur in pedals:
        t.pedals.append(symusic.Pedal(round(on * tps), round(dur * tps)))
    s.tracks.append(t)
    return s


def test_folded_ends_extends_to_pedal_release_but_not_past_a_restrike():
    onset = np.array([0.0, 2.0, 4.0, 0.2])
    end = np.array([1.0, 2.5, 4.5, 0.4])
    pitch = np.array([60, 60, 60, 64])
    pedals = np.array([[0.5, 3.0]])  # pedal down from 0.5 to 3.0; key 64 released before it
    out = folded_ends(onset, end, pitch, pedals)
    # 60 at 0 is held by the pedal until 3.0 but re-struck at 2.0; the 2.0 note sounds to 3.0;
    # 4.0 is after the pedal; 64 was released (0.4) before the pedal went down (0.5)
    np.testing.assert_allclose(out, [2.0, 3.0, 4.5, 0.4])


def test_fold_pedal_moves_note_offs_and_drops_pedals():
    s = score_of([(0.0, 1.0, 60, 80), (1.0, 0.25, 62, 80)], pedals=[(0.5, 2.5)])
    folded = fold_pedal(s)
    assert len(folded.tracks[0].pedals) == 0 and len(s.tracks[0].pedals) == 1  # copy
    assert s.tracks[0].notes[0].duration == 960  # the original keeps its note off
    n = piano_notes(folded)
    np.testing.assert_allclose(n.duration, [3.0, 2.0], atol=1e-3)  # both end at the release
    np.testing.assert_allclose(piano_notes(s).sounding, [3.0, 2.0], atol=1e-3)


def test_roundtrip_error_is_zero_on_itself_and_sees_a_shift():
    notes = [(0.1 * i, 0.2, 60 + i % 5, 40 + i) for i in range(40)]
    s = score_of(notes)
    same = roundtrip_error(s, s)
    assert same["onset_p95_ms"] == 0 and same["duration_p95_ms"] == 0
    assert same["note_ratio"] == 1 and same["unmatched"] == 0 and same["velocity_mean_abs"] == 0
    late = score_of([(on + 0.010, d, p, v + 2) for on, d, p, v in notes])
    err = roundtrip_error(s, late)
    assert err["onset_median_ms"] == pytest.approx(10.0, abs=1.1)  # 1 tick is ~1.04 ms
    assert err["duration_p95_ms"] < 1.1 and err["velocity_mean_abs"] == 2


def test_roundtrip_error_rejects_a_score_without_notes():
    with pytest.raises(MusicgenError, match="no piano notes"):
        roundtrip_error(symusic.Score(TPQ), score_of([(0, 1, 60, 64)]))


def test_remi_on_a_bundled_song_stays_within_half_a_grid_step():
    """16 positions per beat at 120 bpm: 31.25 ms steps, so no onset moves more than 15.6 ms."""
    s = symusic.Score(str(DATA / "pop909" / "001" / "001.mid"))
    s.tempos = symusic.Score(TPQ).tempos  # empty, then one 120 bpm tempo at 0
    s.tempos.append(symusic.Tempo(0, 120.0))
    tok = RemiTokenizer(
        {
            "positions_per_beat": 16,
            "num_velocities": 32,
            "tempo_range": [30, 420],
            "num_tempos": 131,
            "merge_duplicates": False,  # timing only: 001 doubles ~2 % of its melody notes
        }
    )

    def codec(score):
        ids = tok.encode(score)
        return len(ids), tok.decode(ids)

    r = measure(s, codec)
    assert r["unmatched"] == 0 and r["note_ratio"] == pytest.approx(1.0, abs=0.01)
    assert r["onset_p95_ms"] <= 500 / 16 / 2 + 0.5
    assert r["velocity_mean_abs"] <= 127 / 32  # one bin width at most
    assert r["tokens_per_second"] > 0


# --- the expressive REMI preset ---------------------------------------------------------------

EXPRESSIVE = DATA.parent.parent / "configs" / "tokenizer" / "remi_expressive.yaml"


def test_expressive_remi_folds_the_pedal_and_keeps_the_grammar():
    from musicgen.tokenizers import build_tokenizer, load_tokenizer

    tok = build_tokenizer(EXPRESSIVE)
    # a jittered run with dynamics under one pedal (0.1 .. 2.9 s)
    notes = [(0.2 + 0.13 * i + 0.004 * (i % 3), 0.1, 60 + i % 12, 25 + 5 * i) for i in range(20)]
    s = score_of(notes, pedals=[(0.1, 2.8)])
    ids = tok.encode(s)
    g = tok.grammar()
    for i in ids:
        g.advance(i)
    assert g.errors == 0
    err = roundtrip_error(s, tok.decode(ids))
    assert err["onset_p95_ms"] <= 500 / 16 / 2 + 0.5  # half a 1/16-beat step at 120 bpm
    assert err["sounding_p95_ms"] <= 500 / 16 / 2 + 0.5  # the pedal is in the durations
    assert err["velocity_levels_used"] == 20  # 20 distinct velocities stay distinct
    assert load_tokenizer(tok.to_dict()).options["fold_pedal"] is True
    plain = RemiTokenizer(
        {
            "positions_per_beat": 16,
            "num_velocities": 32,
            "tempo_range": [30, 420],
            "num_tempos": 131,
        }
    )
    assert roundtrip_error(s, plain.decode(plain.encode(s)))["sounding_p95_ms"] > 1000


def test_fold_pedal_option_must_be_a_boolean():
    with pytest.raises(MusicgenError, match="fold_pedal must be true or false"):
        RemiTokenizer({"fold_pedal": "yes"})
