"""REMI tokenizer on real POP909 songs: vocabulary, round trip, transposition, grammar, errors."""

import json
from pathlib import Path

import numpy as np
import pytest
import symusic
from paths import SHARED, UNIT_SONGS

from musicgen.errors import MusicgenError
from musicgen.tokenizers import build_tokenizer, load_tokenizer
from musicgen.tokenizers.remi import RemiTokenizer, merge_piano
from musicgen.tokenizers.remi_grammar import RemiTables

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "tests" / "data" / "pop909"
SONGS = UNIT_SONGS + [BUNDLED / f"{n}/{n}.mid" for n in ("010", "200", "401", "733", "850")]
FULL = SHARED / "pop909"


@pytest.fixture(scope="module")
def tok() -> RemiTokenizer:
    return build_tokenizer(ROOT / "configs" / "tokenizer" / "remi.yaml")


@pytest.fixture(scope="module")
def encoded(tok) -> dict[str, np.ndarray]:
    return {p.name: np.array(tok.encode(p)) for p in SONGS}


def names(tok, ids):
    return [tok.token_name(int(i)) for i in ids]


# --- vocabulary ---------------------------------------------------------------------------------


def test_vocabulary_families_follow_the_paper(tok):
    fam = {}
    for i in range(tok.vocab_size):
        fam.setdefault(tok.token_name(i).split("_")[0], []).append(i)
    sizes = {k: len(v) for k, v in fam.items()}
    assert sizes == {
        "PAD": 1,
        "BOS": 1,
        "EOS": 1,
        "Bar": 1,
        "Position": 16,
        "Pitch": 88,
        "Velocity": 24,
        "Duration": 16,
        "Tempo": 65,
        "Chord": 132,
    }
    assert tok.vocab_size == 345
    assert tok.token_name(0) == "PAD_None" and tok.pad_id == 0
    assert tok.token_name(tok.bos_id) == "BOS_None" and tok.token_name(tok.eos_id) == "EOS_None"
    assert names(tok, fam["Pitch"])[0] == "Pitch_21" and names(tok, fam["Pitch"])[-1] == "Pitch_108"
    tempos = sorted(float(n.split("_")[1]) for n in names(tok, fam["Tempo"]))
    assert tempos[0] == 32 and tempos[-1] == 224 and set(np.diff(tempos)) == {3.0}
    assert tok.token_id("Bar_None") == tok.bar_id


def test_registry_name_and_yaml_give_the_same_tokenizer(tok):
    assert build_tokenizer("remi").to_dict() == tok.to_dict()


def test_to_dict_through_json_rebuilds_identical_tokenizer(tok, tmp_path):
    data = json.loads(json.dumps(tok.to_dict()))
    assert "miditok" in data and data["miditok"]["num_velocities"] == 24
    again = load_tokenizer(data)
    assert again.to_dict() == tok.to_dict()
    assert again.encode(SONGS[0]) == tok.encode(SONGS[0])
    tok.save(tmp_path / "tokenizer.json")
    assert load_tokenizer(tmp_path).to_dict() == tok.to_dict()


def test_from_dict_rejects_a_different_vocabulary_and_unknown_options(tok):
    data = tok.to_dict()
    data["vocab"] = data["vocab"][:-1] + ["Chord_X:weird"]
    with pytest.raises(MusicgenError, match="vocabulary differs"):
        load_tokenizer(data)
    with pytest.raises(MusicgenError, match="unknown REMI option 'bogus'"):
        RemiTokenizer.from_dict({"name": "remi", "bogus": 1})


# --- encode / decode ----------------------------------------------------------------------------


def expected_notes(tok, path):
    """Notes with onsets and durations in sub-beats at the tokenizer's resolution.

    Halves round up (as miditok does); durations are clipped to 1..16 sub-beats. Notes of one
    pitch at one onset merge into one: the longest duration, the loudest velocity.
    """
    score = symusic.Score(str(path))
    n = merge_piano(score).tracks[0].notes.numpy()
    scale = 4 / score.ticks_per_quarter  # sub-beats (16 per 4/4 bar) per tick
    onset = np.floor(n["time"] * scale + 0.5).astype(int)
    dur = np.clip(np.floor(n["duration"] * scale + 0.5), 1, 16).astype(int)
    key = onset * 128 + n["pitch"].astype(int)
    uniq, group = np.unique(key, return_inverse=True)
    merged_dur = np.zeros(len(uniq), int)
    merged_vel = np.zeros(len(uniq), int)
    np.maximum.at(merged_dur, group, dur)
    np.maximum.at(merged_vel, group, n["velocity"].astype(int))
    n = {"pitch": uniq % 128, "velocity": merged_vel}
    return n, uniq // 128, merged_dur


@pytest.mark.parametrize("path", SONGS, ids=lambda p: p.stem)
def test_round_trip_keeps_every_note(tok, encoded, path):
    ids = encoded[path.name]
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    n, onset, dur = expected_notes(tok, path)
    dec = tok.decode(ids)
    assert dec.ticks_per_quarter == 4 and len(dec.tracks) == 1
    d = dec.tracks[0].notes.numpy()
    assert len(d["pitch"]) == len(n["pitch"])  # the note count is kept
    o = np.lexsort((n["velocity"], dur, onset, n["pitch"]))
    p = np.lexsort((d["velocity"], d["duration"], d["time"], d["pitch"]))
    np.testing.assert_array_equal(d["pitch"][p], n["pitch"][o])
    np.testing.assert_array_equal(d["time"][p], onset[o])
    np.testing.assert_array_equal(d["duration"][p], dur[o])
    # velocity: the decoded value is a bin nearest to the original velocity
    bins = tok.velocities.astype(int)
    dist = np.abs(d["velocity"][p].astype(int) - n["velocity"][o].astype(int))
    nearest = np.abs(bins[None, :] - n["velocity"][o][:, None].astype(int)).min(1)
    assert np.isin(d["velocity"], bins).all()
    np.testing.assert_array_equal(dist, nearest)


def test_tracks_are_merged_and_drums_ignored(tok):
    score = symusic.Score(str(SONGS[0]))
    n_pitched = len(expected_notes(tok, SONGS[0])[1])  # every track's notes, doubles merged
    drums = symusic.Track(name="drums", program=0, is_drum=True)
    drums.notes.append(symusic.Note(0, 120, 36, 100))
    score.tracks.append(drums)
    dec = tok.decode(tok.encode(score))
    assert len(dec.tracks) == 1 and len(dec.tracks[0].notes) == n_pitched


def test_decode_skips_garbage_without_failing(tok, encoded):
    rng = np.random.default_rng(0)
    assert isinstance(tok.decode(rng.integers(0, tok.vocab_size, 500)), symusic.Score)
    ids = encoded[SONGS[0].name]
    padded = np.concatenate([ids, np.zeros(10, dtype=ids.dtype)])
    assert len(tok.decode(padded).tracks[0].notes) == len(tok.decode(ids).tracks[0].notes)


def _no_note_midi(path):
    score = symusic.Score(480)
    score.tracks.append(symusic.Track(name="empty", program=0))
    score.dump_midi(str(path))


@pytest.mark.parametrize(
    "kind, match",
    [
        ("corrupt", "cannot read MIDI"),
        ("text", "cannot read MIDI"),
        ("empty", "cannot read MIDI"),
        ("nonotes", "no notes"),
        ("directory", "is a directory"),
        ("missing", "cannot read MIDI"),
    ],
)
def test_bad_input_raises_musicgen_error_naming_the_file(tok, tmp_path, kind, match):
    path = tmp_path / f"{kind}.mid"
    if kind == "corrupt":
        path.write_bytes(b"MThd\x00\x00\x00\x06\x00\x01\x00\x03" + bytes(range(200)))
    elif kind == "text":
        path.write_text("this is not a MIDI file\n" * 10)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "nonotes":
        _no_note_midi(path)
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(MusicgenError, match=match) as err:
        tok.encode(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# --- sequence operations ------------------------------------------------------------------------


def test_bar_starts_point_at_bar_tokens(tok, encoded):
    ids = encoded[SONGS[0].name]
    starts = tok.bar_starts(ids)
    assert len(starts) == int(np.sum(ids == tok.bar_id)) > 10
    assert all(tok.token_name(int(ids[i])) == "Bar_None" for i in starts)


@pytest.mark.parametrize("k", [-6, -1, 3, 6])
def test_transposed_crop_decodes_to_the_original_notes_shifted(tok, encoded, k):
    ids = encoded[SONGS[1].name]
    bars = tok.bar_starts(ids)
    crop = ids[bars[8] : bars[20]]
    shifted = tok.transpose(crop, k)
    assert shifted is not None and shifted.dtype == crop.dtype and len(shifted) == len(crop)
    a = tok.decode(crop).tracks[0].notes.numpy()
    b = tok.decode(shifted).tracks[0].notes.numpy()
    np.testing.assert_array_equal(b["pitch"], a["pitch"] + k)
    for key in ("time", "duration", "velocity"):
        np.testing.assert_array_equal(b[key], a[key])
    is_chord = tok.tables.family[crop] == RemiTables.CHORD
    chords = [
        (tok.tables.chord[int(x)], tok.tables.chord[int(y)])
        for x, y in zip(crop[is_chord], shifted[is_chord], strict=True)
    ]
    assert chords, "the crop should contain chord tokens"
    for (root, quality), (root2, quality2) in chords:
        assert quality2 == quality and root2 == (root + k) % 12
    assert np.array_equal(tok.transpose(shifted, -k), crop)


def test_transpose_out_of_range_returns_none(tok, encoded):
    ids = encoded[SONGS[0].name]
    pitches = tok.tables.pitch[ids]
    top, bottom = pitches.max(), pitches[pitches >= 0].min()
    assert tok.transpose(ids, int(108 - top)) is not None
    assert tok.transpose(ids, int(108 - top) + 1) is None
    assert tok.transpose(ids, int(21 - bottom) - 1) is None


# --- grammar ------------------------------------------------------------------------------------


def run_grammar(g, ids):
    for i in ids:
        g.advance(int(i))
    return g


def test_grammar_accepts_every_encoded_song_and_allowed_agrees(tok, encoded):
    for ids in encoded.values():
        g = tok.grammar()
        for i in ids:
            assert g.allowed()[i], tok.token_name(int(i))
            assert g.advance(int(i))
        assert g.errors == 0 and g.finished()
        assert not g.allowed().any()


@pytest.mark.shared
def test_grammar_accepts_many_real_songs(tok):
    files = sorted(FULL.glob("*/*.mid"))[::25]
    for f in files:
        g = run_grammar(tok.grammar(), tok.encode(f))
        assert g.errors == 0 and g.finished(), f


@pytest.mark.slow
@pytest.mark.shared
def test_grammar_accepts_all_of_pop909(tok):
    files = sorted(FULL.glob("*/*.mid"))
    for f in files:
        g = run_grammar(tok.grammar(), tok.encode(f))
        assert g.errors == 0 and g.finished(), f


def _ids(tok, *tokens):
    return [tok.token_id(t) for t in tokens]


NOTE = ("Pitch_60", "Velocity_63", "Duration_1.0.4")


@pytest.mark.parametrize(
    "prefix, bad",
    [
        ((), "Bar_None"),  # must start with BOS
        (("BOS_None",), "Position_0"),  # a bar first
        (("BOS_None", "Bar_None"), "Tempo_89.0"),  # a position before events
        (("BOS_None", "Bar_None", "Position_4", *NOTE), "Position_4"),  # positions increase
        (("BOS_None", "Bar_None", "Position_4", *NOTE), "Position_2"),
        (("BOS_None", "Bar_None", "Position_4"), "Velocity_63"),  # velocity without pitch
        (("BOS_None", "Bar_None", "Position_4", "Pitch_60"), "Duration_1.0.4"),  # skips velocity
        (("BOS_None", "Bar_None", "Position_4", "Pitch_60"), "Bar_None"),  # open triple
        (("BOS_None", "Bar_None", "Position_4", "Pitch_60", "Velocity_63"), "EOS_None"),
        (("BOS_None", "Bar_None", "Position_4", "Pitch_60"), "Pitch_62"),
        (("BOS_None", "Bar_None", "Position_4"), "Position_6"),  # empty position
        (("BOS_None", "Bar_None", "Position_4", *NOTE), "PAD_None"),
        (("BOS_None", "Bar_None", "EOS_None"), "Bar_None"),  # nothing after the end
        (("BOS_None", "Bar_None", "Position_1", *NOTE), "BOS_None"),
    ],
)
def test_grammar_rejects_hand_made_invalid_sequences(tok, prefix, bad):
    g = run_grammar(tok.grammar(), _ids(tok, *prefix))
    assert g.errors == 0
    bad_id = tok.token_id(bad)
    assert not g.allowed()[bad_id]
    assert g.advance(bad_id) is False and g.errors == 1


def test_grammar_positions_after_position(tok):
    g = run_grammar(tok.grammar(), _ids(tok, "BOS_None", "Bar_None", "Position_5", *NOTE))
    allowed = {tok.token_name(i) for i in np.flatnonzero(g.allowed())}
    assert {f"Position_{p}" for p in range(6, 16)} <= allowed
    assert not {f"Position_{p}" for p in range(6)} & allowed
    assert {"Bar_None", "EOS_None", "Pitch_21", "Tempo_32.0", "Chord_C:maj"} <= allowed
    g.allowed()[:] = False  # the caller gets a copy
    assert g.allowed()[tok.bar_id]


def _doubled_score(tpq: int = 480) -> symusic.Score:
    """C4 twice at beat 0 (soft and short, then loud and long) on two tracks, E4 once."""
    score = symusic.Score(tpq)
    melody = symusic.Track(name="melody", program=0)
    piano = symusic.Track(name="piano", program=0)
    melody.notes.append(symusic.Note(0, tpq // 2, 60, 40))
    piano.notes.append(symusic.Note(5, 2 * tpq, 60, 100))  # 5 ticks later: the same sub-beat
    piano.notes.append(symusic.Note(0, tpq, 64, 80))
    score.tracks.extend([melody, piano])
    return score


def test_duplicates_at_one_onset_merge_into_the_longest_and_loudest(tok):
    d = tok.decode(tok.encode(_doubled_score())).tracks[0].notes.numpy()
    order = np.argsort(d["pitch"])
    assert d["pitch"][order].tolist() == [60, 64]
    assert d["duration"][order].tolist() == [8, 4]  # 2 beats kept, not the half beat
    assert d["velocity"][order][0] >= 96  # the loud copy's bin
    kept = RemiTokenizer({"merge_duplicates": False})
    assert len(kept.decode(kept.encode(_doubled_score())).tracks[0].notes) == 3


def test_grammar_forbids_a_pitch_twice_at_one_position(tok):
    note = _ids(tok, *NOTE)
    g = run_grammar(tok.grammar(), _ids(tok, "BOS_None", "Bar_None", "Position_4") + note)
    assert not g.allowed()[note[0]] and g.allowed()[tok.token_id("Pitch_62")]
    assert g.advance(note[0]) is False and g.errors == 1
    for later in (["Position_5"], ["Bar_None", "Position_4"]):  # a new onset: allowed again
        g = run_grammar(tok.grammar(), _ids(tok, "BOS_None", "Bar_None", "Position_4") + note)
        run_grammar(g, _ids(tok, *later))
        assert g.allowed()[note[0]] and g.advance(note[0]) and g.errors == 0
    free = RemiTokenizer({"merge_duplicates": False}).grammar()
    run_grammar(free, _ids(tok, "BOS_None", "Bar_None", "Position_4") + note)
    assert free.allowed()[note[0]]


def test_merge_duplicates_must_be_a_bool():
    with pytest.raises(MusicgenError, match="merge_duplicates must be true or false"):
        RemiTokenizer({"merge_duplicates": "yes"})


def test_completion_closes_any_prefix_validly(tok, encoded):
    song = encoded[SONGS[0].name]
    states = set()
    for cut in [*range(0, 80), len(song) - 1]:
        g = run_grammar(tok.grammar(), song[:cut])
        states.add(g.state)
        tail = g.completion()
        assert tail[-1] == tok.eos_id
        run_grammar(g, tail)
        assert g.errors == 0 and g.finished() and g.completion() == []
        tok.decode(np.concatenate([song[:cut], tail]))
    assert len(states) == 7  # every state but the finished one was tried


def test_completion_finishes_an_open_triple(tok):
    g = run_grammar(tok.grammar(), _ids(tok, "BOS_None", "Bar_None", "Position_3", "Pitch_64"))
    assert names(tok, g.completion())[0].startswith("Velocity_")
    assert names(tok, g.completion())[1].startswith("Duration_")
    assert len(g.completion()) == 3
