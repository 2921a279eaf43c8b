"""Groove2Groove tokenizer: vocabulary layout, exact round trips, drums, transposition, track
dropping, bars, grammar and bad input, on the shipped trio songs and real POP909 / Groove MIDI."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import mido
import numpy as np
import pytest
import symusic
from paths import DATA

from musicgen.errors import MusicgenError
from musicgen.tokenizers import build_tokenizer, load_tokenizer
from musicgen.tokenizers.groove import GrooveTokenizer

ROOT = Path(__file__).resolve().parents[1]
TRIO = ROOT / "data" / "trio"
POP = DATA / "pop909" / "001" / "001.mid"
DRUMS = DATA / "groove_drums" / "drummer1" / "eval_session" / "1_funk-groove1_138_beat_4-4.mid"
SCALE = 480 // 12  # decoded tpq / 12 ticks per beat


@pytest.fixture(scope="module")
def tok() -> GrooveTokenizer:
    return build_tokenizer("groove")


def trio_songs() -> list[Path]:
    with open(TRIO / "metadata.csv", newline="") as fh:
        return [TRIO / r["song"] for r in csv.DictReader(fh)]


def quantised(track, tpq: int) -> list[tuple[int, int, int]]:
    """(onset, offset, pitch) at 12 ticks per beat, computed independently of the tokenizer."""
    out = []
    for n in track.notes:
        on = int(np.floor(n.time * 12 / tpq + 0.5))
        off = max(int(np.floor((n.time + n.duration) * 12 / tpq + 0.5)), on + 1)
        out.append((on, off, n.pitch))
    return out


def decoded(score: symusic.Score) -> list[list[tuple[int, int, int]]]:
    return [
        sorted((n.time // SCALE, n.end // SCALE, n.pitch) for n in t.notes) for t in score.tracks
    ]


def multitrack() -> symusic.Score:
    """POP909 song 001 (melody re-labelled as a bass track) plus a human drum groove."""
    score = symusic.Score(str(POP))
    drums = symusic.Score(str(DRUMS)).resample(score.tpq)
    score.tracks[0].program = 33  # MELODY -> bass role (GM bass program)
    score.tracks[0].name = "melody"
    score.tracks.append(drums.tracks[0])
    return score


def test_vocabulary_layout(tok):
    assert tok.vocab_size == 795  # the paper's 794 tokens + PAD
    names = [tok.token_name(i) for i in range(tok.vocab_size)]
    assert len(set(names)) == 795
    assert (tok.pad_id, tok.bos_id, tok.eos_id) == (0, 1, 2)
    assert names[:3] == ["PAD", "BOS", "EOS"]
    assert tok.token_id("NoteOn_bass_0") == 3
    assert tok.token_id("NoteOn_third_127") == 386
    assert tok.token_id("NoteOff_bass_0") == 387
    assert tok.token_id("NoteOff_drums_36") == 387 + 128 + 36
    assert tok.token_id("TimeShift_0_1") == 771
    assert tok.token_id("TimeShift_1_11") == 771 + 22
    assert tok.token_id("TimeShift_2_0") == 794
    assert sum(n.startswith("TimeShift") for n in names) == 24
    assert sum(n.startswith("NoteO") for n in names) == 768
    with pytest.raises(MusicgenError, match="unknown groove token"):
        tok.token_id("TimeShift_2_1")


@pytest.mark.parametrize("index", [0, 1, 2, 150, 299])
def test_trio_round_trip_is_exact(tok, index):
    path = trio_songs()[index]
    src = symusic.Score(str(path))
    ids = tok.encode(path)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    out = tok.decode(ids)
    assert [t.is_drum for t in out.tracks] == [False, True, False]
    for a, b in zip(src.tracks, decoded(out), strict=True):
        assert sorted(quantised(a, src.tpq)) == b
    assert tok.encode(out) == ids


def test_multitrack_round_trip_keeps_every_note(tok):
    score = multitrack()
    out = decoded(tok.decode(tok.encode(score)))
    roles = [score.tracks[0], score.tracks[3], score.tracks[2]]  # bass, drums, PIANO (most notes)
    starts = []
    for track in roles:
        notes = quantised(track, score.tpq)
        starts.append(min(on for on, _, _ in notes))
    shift = min(starts) // 48 * 48  # leading empty bars are dropped
    for track, got in zip(roles, out, strict=True):
        want: dict[tuple[int, int], int] = {}
        for on, off, pitch in quantised(track, score.tpq):
            want[(on - shift, pitch)] = max(want.get((on - shift, pitch), 0), off - shift)
        assert {(on, p) for on, _, p in got} == set(want)  # every onset/pitch survives
        for on, off, p in got:  # offsets survive unless the next note of that pitch cuts them
            later = [o for (o, q) in want if q == p and o > on]
            assert off == min([want[(on, p)], *later])


def test_drums_channel_10_and_programs(tok, tmp_path):
    ids = tok.encode(trio_songs()[3])
    path = tmp_path / "out.mid"
    tok.decode_to_midi(ids, path, tempo=97.0)
    mid = mido.MidiFile(str(path))
    channels: dict[str, set[int]] = {}
    programs = {}
    tempos = []
    for track in mid.tracks:
        name = next((m.name for m in track if m.type == "track_name"), "")
        channels[name] = {m.channel for m in track if m.type == "note_on"}
        programs[name] = [m.program for m in track if m.type == "program_change"]
        tempos += [mido.tempo2bpm(m.tempo) for m in track if m.type == "set_tempo"]
    assert channels["drums"] == {9}
    assert 9 not in channels["bass"] | channels["third"]
    assert programs["bass"][:1] == [33] and programs["third"][:1] in ([0], [])
    assert tempos and abs(tempos[0] - 97.0) < 0.01
    assert tok.decode(ids).tempos[0].qpm == 120.0  # default tempo without a prompt
    assert tok.tempo_of(trio_songs()[3]) > 0


def test_transpose_moves_pitched_tracks_never_drums(tok):
    ids = np.asarray(tok.encode(trio_songs()[5]), dtype=np.uint16)
    before = decoded(tok.decode(ids))
    for k in (-5, 3, 6):
        moved = tok.transpose(ids, k)
        assert moved is not None and moved.dtype == ids.dtype
        after = decoded(tok.decode(moved))
        assert after[1] == before[1]  # drums untouched
        for role in (0, 2):
            assert after[role] == [(a, b, p + k) for a, b, p in before[role]]
    assert tok.transpose(ids, 200) is None
    low = np.array(
        [
            tok.bos_id,
            tok.token_id("NoteOn_bass_2"),
            tok.token_id("TimeShift_1_0"),
            tok.token_id("NoteOff_bass_2"),
            tok.eos_id,
        ]
    )
    assert tok.transpose(low, -3) is None
    drum = np.array(
        [
            tok.bos_id,
            tok.token_id("NoteOn_drums_2"),
            tok.token_id("TimeShift_1_0"),
            tok.token_id("NoteOff_drums_2"),
            tok.eos_id,
        ]
    )
    assert np.array_equal(tok.transpose(drum, -3), drum)


def test_drop_tracks_never_drops_everything(tok):
    ids = np.asarray(tok.encode(trio_songs()[7]), dtype=np.uint16)
    full = decoded(tok.decode(ids))
    rng = np.random.default_rng(0)
    seen = set()
    for p in (1.0, 0.5, 0.9):
        for _ in range(60):
            out = tok.drop_tracks(ids, rng, p)
            got = decoded(tok.decode(out))
            kept = tuple(bool(notes) for notes in got)
            assert any(kept)
            seen.add(kept)
            for notes, orig in zip(got, full, strict=True):
                assert notes in ([], orig)  # a track is either gone or intact
            g = tok.grammar()
            assert all(g.advance(int(i)) for i in out) and g.finished()
    assert len(seen) >= 5  # many different subsets were drawn
    assert np.array_equal(tok.drop_tracks(ids, rng, 0.0), ids)
    assert np.array_equal(tok.drop_tracks(ids, random.Random(1), 1.0).dtype, ids.dtype)


def test_bar_starts_fall_on_bar_lines(tok):
    path = trio_songs()[10]
    bars = int(
        next(r for r in csv.DictReader(open(TRIO / "metadata.csv")) if TRIO / r["song"] == path)[
            "bars"
        ]
    )
    ids = np.asarray(tok.encode(path))
    starts = tok.bar_starts(ids)
    shift = tok.tables.shift[ids]
    time_before = np.cumsum(shift) - shift
    assert starts[0] == 1 and len(starts) == bars
    assert np.array_equal(time_before[starts], np.arange(bars) * 48)
    # the last notes end on the final bar line: those NoteOffs start no bar of their own
    last_line = np.flatnonzero(time_before == bars * 48)
    assert all(tok.token_name(i).startswith("NoteOff") for i in ids[last_line[0] : -1])
    silence = np.array([tok.bos_id, *[tok.token_id("TimeShift_2_0")] * 5, tok.eos_id])
    assert tok.bar_starts(silence).tolist() == [1, 3, 5]  # bars at 0, 48, 96 ticks
    crop = ids[starts[3] :]  # a crop starting at a bar counts bars from its start
    assert np.array_equal(tok.bar_starts(crop), starts[3:] - starts[3])


def test_grammar_accepts_every_trio_song(tok):
    for path in trio_songs():
        ids = tok.encode(path)
        g = tok.grammar()
        assert all(g.advance(i) for i in ids), path
        assert g.finished() and g.errors == 0 and g.completion() == []
        assert not g.allowed().any()


def test_grammar_accepts_real_multitrack_and_pop909(tok):
    for src in (multitrack(), POP, DRUMS):
        g = tok.grammar()
        assert all(g.advance(i) for i in tok.encode(src))


def test_grammar_rejects_invalid_sequences(tok):
    t = tok.token_id
    on, off, shift = t("NoteOn_bass_40"), t("NoteOff_bass_40"), t("TimeShift_0_6")
    invalid = {
        "no BOS": [on],
        "NoteOff not sounding": [tok.bos_id, off],
        "NoteOff on another track": [tok.bos_id, on, shift, t("NoteOff_third_40")],
        "NoteOn already sounding": [tok.bos_id, on, shift, on],
        "EOS while sounding": [tok.bos_id, on, shift, tok.eos_id],
        "token after EOS": [tok.bos_id, tok.eos_id, shift],
        "PAD": [tok.bos_id, tok.pad_id],
        "second BOS": [tok.bos_id, tok.bos_id],
        "out of vocabulary": [tok.bos_id, 795],
    }
    for why, seq in invalid.items():
        g = tok.grammar()
        results = [g.advance(i) for i in seq]
        assert results[-1] is False and all(results[:-1]) and g.errors == 1, why
    g = tok.grammar()
    for i in [tok.bos_id, on, t("NoteOn_drums_36"), shift]:
        assert g.advance(i)
    mask = g.allowed()
    assert mask[off] and mask[t("NoteOff_drums_36")] and not mask[on] and not mask[tok.eos_id]
    assert mask[t("NoteOn_third_40")] and mask[t("TimeShift_2_0")] and not mask[tok.pad_id]
    done = g.completion()
    assert sorted(done[:-1]) == sorted([off, t("NoteOff_drums_36")]) and done[-1] == tok.eos_id
    assert all(g.advance(i) for i in done) and g.finished()


def test_third_track_choice(tok, tmp_path):
    score = symusic.Score(str(POP))  # MELODY 264, BRIDGE 307, PIANO 985 notes; all program 0
    ids = tok.encode(score)
    piano = decoded(tok.decode(ids))[2]
    assert len(piano) == len({(n.time, n.pitch) for n in score.tracks[2].notes})
    rnd = GrooveTokenizer({"third_track": "random", "seed": 4})
    chosen = {
        len(decoded(rnd.decode(rnd.encode(score, rng=np.random.default_rng(s))))[2])
        for s in range(12)
    }
    assert len(chosen) >= 2
    assert rnd.encode(POP) == rnd.encode(POP)  # deterministic per file without an rng


def test_serialisation(tok, tmp_path):
    t2 = load_tokenizer(tok.to_dict())
    assert t2.to_dict() == tok.to_dict()
    yaml_tok = build_tokenizer(ROOT / "configs" / "tokenizer" / "groove.yaml")
    assert yaml_tok.to_dict() == tok.to_dict()
    tok.save(tmp_path / "tokenizer.json")
    assert load_tokenizer(tmp_path).to_dict() == tok.to_dict()
    custom = GrooveTokenizer({"bass_program": 34, "third_program": 4, "default_tempo": 90})
    score = load_tokenizer(custom.to_dict()).decode(tok.encode(trio_songs()[0]))
    assert [t.program for t in score.tracks] == [34, 0, 4]
    assert score.tempos[0].qpm == pytest.approx(90, abs=1e-3)
    with pytest.raises(MusicgenError, match="unknown groove option 'bogus'"):
        load_tokenizer({"name": "groove", "bogus": 1})
    with pytest.raises(MusicgenError, match="third_track"):
        GrooveTokenizer({"third_track": "loudest"})


def write_score(path: Path, tracks: list[symusic.Track]) -> Path:
    score = symusic.Score(480)
    score.tempos.append(symusic.Tempo(0, 120.0))
    for tr in tracks:
        score.tracks.append(tr)
    score.dump_midi(str(path))
    return path


def test_bad_input_names_the_file(tok, tmp_path):
    corrupt = tmp_path / "corrupt.mid"
    corrupt.write_bytes(b"MThd\x00\x00\x00\x06garbage" * 3)
    empty = tmp_path / "empty.mid"
    empty.write_bytes(b"")
    no_notes = write_score(tmp_path / "no_notes.mid", [symusic.Track("piano", 0, False)])
    no_tracks = write_score(tmp_path / "no_tracks.mid", [])
    cases = {
        corrupt: "cannot read MIDI",
        empty: "empty file",
        no_notes: "no usable track",
        no_tracks: "no usable track",
        tmp_path / "missing.mid": "file not found",
    }
    for path, why in cases.items():
        with pytest.raises(MusicgenError, match=why) as err:
            tok.encode(path)
        assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_files_lacking_a_role_still_tokenize(tok, tmp_path):
    drums_only = tok.decode(tok.encode(DRUMS))
    got = decoded(drums_only)
    assert got[0] == [] and got[2] == [] and len(got[1]) > 100
    bass = symusic.Track("Bass", 35, False)
    bass.notes.append(symusic.Note(480, 480, 40, 90))
    path = write_score(tmp_path / "bass.mid", [bass])
    ids = tok.encode(path)
    # the silent first beat lies inside bar 0, so it stays (only whole empty bars are dropped)
    assert [tok.token_name(i) for i in ids] == [
        "BOS",
        "TimeShift_1_0",
        "NoteOn_bass_40",
        "TimeShift_1_0",
        "NoteOff_bass_40",
        "EOS",
    ]
    late = symusic.Track("Bass", 35, False)
    late.notes.append(symusic.Note(480 * 9, 480, 40, 90))  # beat 9 = bar 2, beat 1
    ids = tok.encode(write_score(tmp_path / "late.mid", [late]))
    assert [tok.token_name(i) for i in ids][:3] == ["BOS", "TimeShift_1_0", "NoteOn_bass_40"]


def test_score_time_units_and_random_walks(tok):
    score = symusic.Score(str(trio_songs()[0]))
    ids = tok.encode(score)
    assert tok.encode(score.to("quarter")) == ids and tok.encode(score.to("second")) == ids
    rng = np.random.default_rng(0)
    for _ in range(5):  # sampling from the mask alone never breaks the grammar
        g = tok.grammar()
        seq = []
        for _ in range(400):
            allowed = np.flatnonzero(g.allowed())
            if len(allowed) == 0:
                break
            i = int(rng.choice(allowed))
            assert g.advance(i)
            seq.append(i)
        closing = g.completion()
        assert all(g.advance(i) for i in closing) and g.finished() and g.errors == 0
        tok.decode(seq + closing)  # lenient decode of any valid sequence


def test_roles_by_program_and_name(tok, tmp_path):
    def track(name: str, program: int, drum: bool, pitches: list[int]) -> symusic.Track:
        t = symusic.Track(name, program, drum)
        for k, p in enumerate(pitches):
            t.notes.append(symusic.Note(480 * k, 240, p, 80))
        return t

    path = write_score(
        tmp_path / "roles.mid",
        [
            track("Bassoon", 70, False, [50, 52]),  # not a bass: a candidate third track
            track("bass guitar", 0, False, [40]),  # bass by name
            track("Fretless", 35, False, [41]),  # bass by program, merged with the one above
            track("Kit", 0, True, [36, 38, 42]),
            track("Strings", 48, False, [60, 62, 64]),  # most notes: the third track
        ],
    )
    got = decoded(tok.decode(tok.encode(path)))
    assert [p for _, _, p in got[0]] == [40, 41]
    assert [p for _, _, p in got[1]] == [36, 38, 42]
    assert [p for _, _, p in got[2]] == [60, 62, 64]
