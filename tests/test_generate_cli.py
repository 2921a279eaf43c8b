"""`musicgen generate`, `continue` and `export` end to end on tiny untrained checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import symusic
import torch
from paths import DATA

from musicgen.cli import main
from musicgen.generation.api.prompt import load_prompt, midi_pairing, only_notes
from musicgen.tokenizers import build_tokenizer

SONG = DATA / "pop909" / "001" / "001.mid"
DRUMS = DATA / "groove_drums" / "drummer1" / "eval_session" / "1_funk-groove1_138_beat_4-4.mid"


@pytest.fixture(scope="module")
def ckpts(tiny_checkpoints) -> dict[str, Path]:
    return tiny_checkpoints


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_generate_writes_pieces_never_overwrites_and_exports(ckpts, tmp_path, capsys):
    out = tmp_path / "out" / "nested"
    args = [
        "generate",
        "--checkpoint",
        ckpts["remi"],
        "--out",
        out,
        "--num",
        3,
        "--max-tokens",
        48,
        "--seed",
        7,
        "--batch-size",
        2,
        "--save-tokens",
        "--device",
        "cpu",
    ]
    rc, stdout, _ = run_cli(capsys, *args)
    assert rc == 0
    names = sorted(p.name for p in out.glob("*.mid"))
    assert names == [f"tiny_remi_7_{i}.mid" for i in range(3)]
    tok = build_tokenizer("remi")
    for i in range(3):
        record = json.loads((out / f"tiny_remi_7_{i}.json").read_text())
        assert record["tokenizer"] == "remi" and record["ids"][0] == tok.bos_id
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in record["ids"]) and grammar.finished()
        symusic.Score(str(out / f"tiny_remi_7_{i}.mid"))  # loads
    first = (out / "tiny_remi_7_0.mid").read_bytes()

    # same seed again: same pieces, written under new names
    assert run_cli(capsys, *args)[0] == 0
    assert (out / "tiny_remi_7_0-1.mid").read_bytes() == first
    assert len(list(out.glob("*.mid"))) == 6
    assert run_cli(capsys, *args, "--overwrite")[0] == 0
    assert len(list(out.glob("*.mid"))) == 6

    # export the saved tokens: the same MIDI content
    exported = tmp_path / "again.mid"
    rc, _, _ = run_cli(
        capsys, "export", out / "tiny_remi_7_0.json", "--checkpoint", ckpts["remi"], "-o", exported
    )
    assert rc == 0
    a, b = symusic.Score(str(exported)), symusic.Score(str(out / "tiny_remi_7_0.mid"))
    assert a.note_num() == b.note_num()
    pitches = [[n.pitch for t in s.tracks for n in t.notes] for s in (a, b)]
    assert pitches[0] == pitches[1]


def test_generate_by_bars_with_groove_defaults(ckpts, tmp_path, capsys):
    rc, stdout, _ = run_cli(
        capsys,
        "generate",
        "--checkpoint",
        ckpts["groove"],
        "--out",
        tmp_path,
        "--num",
        2,
        "--bars",
        1,
        "--seed",
        1,
        "--save-tokens",
    )
    assert rc == 0
    tok = build_tokenizer("groove")
    for i in range(2):
        record = json.loads((tmp_path / f"tiny_groove_1_{i}.json").read_text())
        assert record["stop"] in ("bars", "end", "max_tokens")
        ids = record["ids"]
        grammar = tok.grammar()
        assert all(grammar.advance(t) for t in ids) and grammar.finished()


def test_no_grammar_reports_the_invalid_rate(ckpts, tmp_path, capsys):
    rc, stdout, _ = run_cli(
        capsys,
        "generate",
        "--checkpoint",
        ckpts["groove"],
        "--out",
        tmp_path,
        "--num",
        4,
        "--max-tokens",
        32,
        "--no-grammar",
        "--seed",
        0,
    )
    assert rc == 0 and "invalid token rate (grammar off)" in stdout
    assert len(list(tmp_path.glob("*.mid"))) == 4


def test_continue_keeps_the_prompt_at_its_tempo(ckpts, tmp_path, capsys):
    tok = build_tokenizer("groove")
    rc, _, _ = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["groove"],
        "--prompt",
        DRUMS,
        "--bars",
        2,
        "--out",
        tmp_path,
        "--num",
        2,
        "--max-tokens",
        40,
        "--seed",
        3,
        "--save-tokens",
    )
    assert rc == 0
    prompt = load_prompt(tok, DRUMS, prompt_bars=(0, 2)).ids
    song = tok.encode(DRUMS)
    assert prompt == song[: int(tok.bar_starts(np.asarray(song))[2])]
    qpm = symusic.Score(str(DRUMS)).tempos[0].qpm
    ref = tok.decode(prompt)
    bar2 = 2 * 4 * ref.ticks_per_quarter
    ref_notes = {(n.time, n.pitch) for t in ref.tracks for n in t.notes}
    for i in range(2):
        stem = tmp_path / f"tiny_groove_{DRUMS.stem}_3_{i}"
        record = json.loads(stem.with_suffix(".json").read_text())
        assert record["ids"][: len(prompt)] == prompt and record["prompt_len"] == len(prompt)
        score = symusic.Score(str(stem.with_suffix(".mid")))
        assert abs(score.tempos[0].qpm - qpm) < 0.01
        head = {(n.time, n.pitch) for t in score.tracks for n in t.notes if n.time < bar2}
        assert head == ref_notes

    rc, _, _ = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["groove"],
        "--prompt",
        DRUMS,
        "--prompt-bars",
        "3:5",
        "--out",
        tmp_path / "only",
        "--num",
        1,
        "--max-tokens",
        30,
        "--seed",
        3,
        "--save-tokens",
        "--continuation-only",
    )
    assert rc == 0
    record = json.loads(next((tmp_path / "only").glob("*.json")).read_text())
    assert record["prompt_len"] == 1 and len(record["ids"]) <= 1 + 30 + 3 * 128 + 1


def test_continue_remi_prompt_bars_is_a_valid_prefix(ckpts, tmp_path, capsys):
    tok = build_tokenizer("remi")
    prompt = load_prompt(tok, SONG, prompt_bars=(4, 6)).ids
    assert prompt[0] == tok.bos_id and prompt[1] == tok.bar_id
    # two prompt bars, then the Bar that opens bar 3: the model can only write from there on
    assert len(tok.bar_starts(np.asarray(prompt))) == 3 and prompt[-1] == tok.bar_id
    rc, stdout, _ = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["remi"],
        "--prompt",
        SONG,
        "--prompt-bars",
        "4:6",
        "--out",
        tmp_path,
        "--num",
        1,
        "--max-tokens",
        24,
        "--render",
    )
    assert rc == 0
    assert len(list(tmp_path.glob("*.mid"))) == 1 and len(list(tmp_path.glob("*.png"))) == 1


def test_export_hand_written_names_and_mismatches(ckpts, tmp_path, capsys):
    tok = build_tokenizer("remi")
    names = tmp_path / "names.txt"
    names.write_text("BOS_None Bar_None Position_0 Pitch_60 Velocity_63 Duration_1.0.4 EOS_None\n")
    tokfile = tmp_path / "tokenizer.json"
    tok.save(tokfile)
    rc, _, err = run_cli(capsys, "export", names, "--tokenizer", tokfile, "-o", tmp_path / "a.mid")
    assert rc == 0, err
    notes = symusic.Score(str(tmp_path / "a.mid")).tracks[0].notes
    assert [n.pitch for n in notes] == [60]
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps([tok.token_id(n) for n in names.read_text().split()]))
    assert run_cli(capsys, "export", ids, "--tokenizer", tokfile, "-o", tmp_path / "a.mid")[0] == 0
    assert (tmp_path / "a-1.mid").exists()  # never overwritten silently

    cases = [
        ({"tokenizer": "groove", "ids": [1, 2]}, "'groove' tokenizer"),
        ({"tokenizer": "remi", "ids": [1, tok.vocab_size]}, "outside the remi vocabulary"),
        (["BOS_None", "NoteOn_9_36"], "unknown remi token 'NoteOn_9_36'"),
        ({"ids": "x"}, "must be a list"),
    ]
    for data, message in cases:
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(data))
        rc, _, err = run_cli(
            capsys, "export", bad, "--checkpoint", ckpts["remi"], "-o", tmp_path / "b.mid"
        )
        assert rc == 1 and message in err and err.count("\n") == 1, err


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    text = tmp_path / "notes.mid"
    text.write_text("this is not a MIDI file\n")
    corrupt = tmp_path / "corrupt.mid"
    corrupt.write_bytes(SONG.read_bytes()[:60])
    empty = tmp_path / "empty.mid"
    empty.write_bytes(b"")
    return {"missing": tmp_path / "nope.mid", "text": text, "corrupt": corrupt, "empty": empty}


@pytest.mark.parametrize("kind", ["missing", "text", "corrupt", "empty", "short"])
def test_bad_prompts_are_one_line_errors(kind, ckpts, tmp_path, capsys):
    prompt = SONG if kind == "short" else _bad_files(tmp_path)[kind]
    bars = ["--prompt-bars", "0:5000"] if kind == "short" else ["--bars", "2"]
    rc, _, err = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["remi"],
        "--prompt",
        prompt,
        *bars,
        "--out",
        tmp_path / "o",
    )
    assert rc == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert str(prompt) in err
    assert not list((tmp_path / "o").glob("*.mid")) if (tmp_path / "o").exists() else True


def test_bad_checkpoints_are_one_line_errors(tmp_path, capsys):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00\x01not a checkpoint" * 10)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    for ckpt in (tmp_path / "missing.pt", garbage, foreign):
        rc, _, err = run_cli(capsys, "generate", "--checkpoint", ckpt, "--out", tmp_path / "o")
        assert rc == 1 and err.startswith("error: ") and err.count("\n") == 1, err
        assert str(ckpt) in err


@pytest.mark.parametrize(
    "option, message",
    [
        (["--top-p", "0"], "--top-p"),
        (["--top-p", "1.5"], "--top-p"),
        (["--repeat", "-1"], "--repeat"),
        (["--temperature", "-1"], "--temperature"),
        (["--top-k", "-1"], "--top-k"),
        (["--num", "0"], "--num"),
        (["--batch-size", "0"], "--batch-size"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--min-tokens", "-1"], "--min-tokens"),
    ],
)
def test_options_out_of_range(option, message, ckpts, tmp_path, capsys):
    rc, _, err = run_cli(
        capsys, "generate", "--checkpoint", ckpts["remi"], "--out", tmp_path, *option
    )
    assert rc == 1 and message in err and err.count("\n") == 1, err
    rc, _, err = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["remi"],
        "--prompt",
        SONG,
        "--out",
        tmp_path,
        *option,
    )
    assert rc == 1 and message in err, err


def test_bad_prompt_bars(ckpts, tmp_path, capsys):
    for spec in ("2", "3:1", "a:b"):  # (and --bars with --prompt-bars below)
        rc, _, err = run_cli(
            capsys,
            "continue",
            "--checkpoint",
            ckpts["remi"],
            "--prompt",
            SONG,
            "--prompt-bars",
            spec,
            "--out",
            tmp_path,
        )
        assert rc == 1 and "--prompt-bars" in err, err
    rc, _, err = run_cli(
        capsys,
        "continue",
        "--checkpoint",
        ckpts["remi"],
        "--prompt",
        SONG,
        "--prompt-bars",
        "0:2",
        "--bars",
        "2",
        "--out",
        tmp_path,
    )
    assert rc == 1 and "not both" in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_unavailable_device_is_an_error(ckpts, tmp_path, capsys):
    rc, _, err = run_cli(
        capsys, "generate", "--checkpoint", ckpts["remi"], "--out", tmp_path, "--device", "cuda"
    )
    assert rc == 1 and "--device" in err and err.count("\n") == 1, err


# --- concurrent writers and placeholders -------------------------------------------


def _pieces(n: int, seed: int = 1) -> list:
    """`n` small pieces (a bundled song's first notes) as the API returns them."""
    from musicgen.generation.api import Music

    score = symusic.Score(str(SONG))
    for track in score.tracks:
        kept = list(track.notes)[:20]
        track.notes.clear()
        for note in kept:
            track.notes.append(note)
    return [Music(score.copy(), [1, 2], seed=seed) for _ in range(n)]


def _write_many(folder: str, start) -> None:
    from musicgen.generation.api.write import write_pieces

    start.wait()
    tok = build_tokenizer("remi")
    write_pieces(_pieces(4), folder, "same", tok, save_tokens=True, report=lambda _: None)


@pytest.mark.parametrize("how", ["threads", "processes"])
def test_eight_writers_into_one_folder_lose_no_file(tmp_path, how):
    """8 runs naming their pieces alike (`same_1_<i>`) at the same moment: every name is
    claimed by exactly one of them, so 8 x 4 pieces are 32 readable MIDI files (and 32 token
    files), none empty. (Checking that a name is free and then writing lost 10 of 32.)"""
    import multiprocessing
    import threading

    if how == "threads":
        start = threading.Barrier(8)
        workers = [
            threading.Thread(target=_write_many, args=(str(tmp_path), start)) for _ in range(8)
        ]
    else:
        ctx = multiprocessing.get_context("fork")
        start = ctx.Barrier(8)
        workers = [ctx.Process(target=_write_many, args=(str(tmp_path), start)) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    if how == "processes":
        assert [w.exitcode for w in workers] == [0] * 8
    midis = sorted(tmp_path.glob("*.mid"))
    assert len(midis) == 32 and len(list(tmp_path.glob("*.json"))) == 32
    notes = _pieces(1)[0].score.note_num()
    assert notes > 0 and all(symusic.Score(str(p)).note_num() == notes for p in midis)
    assert sorted(p.name for p in tmp_path.iterdir() if p.stat().st_size == 0) == []


def test_a_failed_write_leaves_no_placeholder(tmp_path, monkeypatch):
    import errno

    from musicgen.generation.api import write

    def full(score, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(write, "write_score", full)
    (tmp_path / "same_1_0.mid").write_bytes(SONG.read_bytes())  # taken: the next name is claimed
    with pytest.raises(OSError):
        write.write_pieces(_pieces(2), tmp_path, "same", build_tokenizer("remi"), save_tokens=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same_1_0.mid"]
    base = write.claim(tmp_path, "same_1_0", (".mid", ".json"))
    assert base.name == "same_1_0-1" and (tmp_path / "same_1_0-1.json").stat().st_size == 0
    write.release(base, (".mid", ".json"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same_1_0.mid"]


def _notes(score: symusic.Score, cut: int) -> list[tuple]:
    return sorted(
        (n.time, n.duration, n.pitch) for t in score.tracks for n in t.notes if n.time < cut
    )


def test_continue_bars_skips_leading_silence_on_the_command_line(ckpts, tmp_path, capsys):
    """`continue --bars 2` on a song that starts with 2 silent bars and a pickup: the output
    starts with the pickup and 2 bars of it, never an unprompted piece."""
    score = symusic.Score(str(SONG))
    bar = 4 * score.ticks_per_quarter
    late = score.shift_time(3 * bar)  # 001 opens with a pickup: bars 0-2 silent, 3 the pickup
    late.dump_midi(str(tmp_path / "late.mid"))
    args = ["continue", "--checkpoint", ckpts["remi"], "--prompt", tmp_path / "late.mid"]
    rc, stdout, err = run_cli(capsys, *args, "--bars", 2, "--out", tmp_path / "o", "--num", 1,
                              "--max-tokens", 16, "--seed", 0)  # fmt: skip
    assert rc == 0, err
    assert "prompt: bars 3:6 of late.mid" in stdout  # the pickup's bar and 2 more
    out = symusic.Score(str(next((tmp_path / "o").glob("*.mid"))))
    tok = build_tokenizer("remi")
    ref = tok.decode(tok.encode(SONG))  # 001 itself at the tokenizer's resolution
    cut = 3 * 4 * ref.ticks_per_quarter
    want = midi_pairing(only_notes(ref, lambda n: n.time < cut))
    assert want.note_num() > 0 and out.ticks_per_quarter == ref.ticks_per_quarter
    assert _notes(out, cut) == _notes(want, cut)
    rc, _, err = run_cli(capsys, *args, "--prompt-bars", "0:2", "--out", tmp_path / "p")
    assert rc == 1 and "bars 0:2 hold no notes" in err and err.count("\n") == 1, err


def test_help_states_the_prompt_rule(capsys):
    with pytest.raises(SystemExit):
        main(["continue", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the first N bars that hold music (leading silent bars are skipped" in text
    assert "exactly bars START..END-1 counted from time 0" in text
    assert "the most ids sampled after the prompt, per piece" in text


def test_int8_decoding_writes_valid_pieces(ckpts, tmp_path, capsys):
    """--int8: the same command, weight-only int8 steps; the pieces are valid and reproducible."""
    argv = ["generate", "--checkpoint", ckpts["remi"], "--num", 2, "--max-tokens", 40]
    argv += ["--seed", 3, "--device", "cpu", "--int8", "--save-tokens"]
    for out in (tmp_path / "a", tmp_path / "b"):
        assert run_cli(capsys, *argv, "--out", out)[0] == 0
    tok = build_tokenizer("remi")
    for i in range(2):
        a = json.loads((tmp_path / "a" / f"tiny_remi_3_{i}.json").read_text())["ids"]
        b = json.loads((tmp_path / "b" / f"tiny_remi_3_{i}.json").read_text())["ids"]
        grammar = tok.grammar()
        assert a == b and all(grammar.advance(t) for t in a) and grammar.finished()
