"""`musicgen prepare` on real POP909 files with planted bad ones: layout, skips, cache, splits."""

import csv
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import symusic
from hostile import build_special
from paths import UNIT_SONGS

from musicgen.cli import main
from musicgen.data.prepare import find_midi, hash_split, prepare
from musicgen.errors import MusicgenError
from musicgen.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "tests" / "data" / "pop909"
SONGS = UNIT_SONGS


def copy_songs(dst: Path, songs=SONGS) -> list[str]:
    rels = []
    for s in songs:
        rel = f"{s.parent.name}/{s.name}"
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(s, dst / rel)
        rels.append(rel)
    return rels


def plant_bad_files(dst: Path) -> dict[str, str]:
    """Bad inputs -> the words their skip reason must contain."""
    bad = dst / "bad"
    bad.mkdir()
    (bad / "corrupt.mid").write_bytes(b"MThd\x00\x00\x00\x06\x00\x01\x00\x03" + bytes(range(256)))
    (bad / "empty.mid").write_bytes(b"")
    (bad / "text.MID").write_text("not music at all\n" * 20)
    score = symusic.Score(480)
    score.tracks.append(symusic.Track(name="silent", program=0))
    score.dump_midi(str(bad / "nonotes.mid"))
    (bad / "folder.mid").mkdir()
    (bad / "gone.midi").symlink_to(bad / "does-not-exist.mid")
    big = SONGS[0].read_bytes() + b"\0" * 40_000  # over a 0.04 MB limit
    (bad / "big.mid").write_bytes(big)
    reasons = {
        "bad/corrupt.mid": "corrupt MIDI",
        "bad/empty.mid": "empty file",
        "bad/text.MID": "not a MIDI file",
        "bad/nonotes.mid": "no notes",
        "bad/folder.mid": "is a directory",
        "bad/gone.midi": "cannot read file",
        "bad/big.mid": "over the size limit",
    }
    if os.geteuid() != 0:  # root reads anything: permissions cannot make a file unreadable
        locked = bad / "locked.mid"
        locked.write_bytes(SONGS[0].read_bytes())
        locked.chmod(0)
        reasons["bad/locked.mid"] = "cannot read file"
    return reasons


def read_skipped(out: Path) -> dict[str, str]:
    with open(out / "skipped.csv", newline="") as fh:
        return {row["path"]: row["reason"] for row in csv.DictReader(fh)}


def read_manifest(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]


def test_good_songs_are_prepared_and_bad_ones_reported(tmp_path, capsys):
    inp, out = tmp_path / "in", tmp_path / "out"
    rels = copy_songs(inp)
    (inp / "001" / "versions").mkdir()
    shutil.copy(SONGS[1], inp / "001" / "versions" / "001-v2.mid")  # POP909 versions: ignored
    reasons = plant_bad_files(inp)
    code = main(
        [
            "prepare",
            "--dataset",
            "pop909",
            "--input",
            str(inp),
            "--output",
            str(out),
            "--workers",
            "1",
            "--max-size-mb",
            "0.04",
        ]
    )
    assert code == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"prepared {len(rels)} songs" in line and f"skipped {len(reasons)}" in line
    skipped = read_skipped(out)
    assert set(skipped) == set(reasons)
    for rel, words in reasons.items():
        assert words in skipped[rel], (rel, skipped[rel])
    manifest = read_manifest(out)
    assert [m["path"] for m in manifest] == rels
    tok = load_tokenizer(out)
    by_split: dict[str, list[dict]] = {}
    for m in manifest:
        by_split.setdefault(m["split"], []).append(m)
    for split in ("train", "validation", "test"):
        tokens = np.load(out / split / "tokens.npy")
        offsets = np.load(out / split / "offsets.npy")
        assert tokens.dtype == np.uint16 and offsets.dtype == np.int64
        songs = by_split.get(split, [])
        assert len(offsets) == len(songs) + 1 and offsets[-1] == len(tokens)
        for j, m in enumerate(songs):
            ids = tokens[offsets[j] : offsets[j + 1]]
            assert ids.tolist() == tok.encode(inp / m["path"])
            assert m["tokens"] == len(ids) and m["bars"] == int(np.sum(ids == tok.bar_id))


def test_rerun_reuses_unchanged_songs_and_completes_an_interrupted_run(tmp_path):
    inp, out = tmp_path / "in", tmp_path / "out"
    copy_songs(inp)
    first = prepare("pop909", inp, out, workers=1)
    assert first["reused"] == 0 and first["songs"] == len(SONGS)
    reference = {p: p.read_bytes() for p in out.rglob("*.npy") if "cache" not in p.parts}
    assert prepare("pop909", inp, out, workers=1)["reused"] == len(SONGS)
    # one song changes: only it is tokenized again
    changed = inp / f"{SONGS[1].parent.name}/{SONGS[1].name}"
    symusic.Score(str(SONGS[1])).shift_pitch(2).dump_midi(str(changed))
    assert prepare("pop909", inp, out, workers=1)["reused"] == len(SONGS) - 1
    shutil.copy(SONGS[1], changed)
    # an interrupted run: outputs missing, a cache entry lost, a stray temporary file
    (out / "manifest.jsonl").unlink()
    (out / "train" / "tokens.npy").unlink()
    sorted((out / "cache").glob("*.npy"))[0].unlink()
    (out / "train" / ".tokens.npy.abc.tmp").write_bytes(b"partial")
    summary = prepare("pop909", inp, out, workers=1)
    assert summary["songs"] == len(SONGS)
    assert {p: p.read_bytes() for p in reference} == reference
    assert len(read_manifest(out)) == len(SONGS)


def test_two_workers_write_the_same_dataset(tmp_path):
    inp = tmp_path / "in"
    copy_songs(inp)
    prepare("pop909", inp, tmp_path / "a", workers=1)
    prepare("pop909", inp, tmp_path / "b", workers=2)
    for rel in ("manifest.jsonl", "tokenizer.json", "train/tokens.npy", "train/offsets.npy"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()


def test_split_is_stable_when_files_are_added(tmp_path):
    inp, out = tmp_path / "in", tmp_path / "out"
    copy_songs(inp, SONGS[:2])
    prepare("folder", inp, out, workers=1)
    before = {m["path"]: m["split"] for m in read_manifest(out)}
    copy_songs(inp, SONGS[2:])
    prepare("folder", inp, out, workers=1)
    after = {m["path"]: m["split"] for m in read_manifest(out)}
    assert len(after) == len(SONGS)
    assert all(after[p] == s for p, s in before.items())
    # over POP909's 850 names about 5 % go to validation
    names = [f"{i:03d}/{i:03d}.mid" for i in range(1, 851)]
    share = sum(hash_split(n) == "validation" for n in names) / len(names)
    assert 0.03 < share < 0.07


def test_split_folders_and_official_csv_are_honoured(tmp_path):
    inp = tmp_path / "in"
    for folder, song in zip(("train", "val", "test"), SONGS, strict=False):
        (inp / folder).mkdir(parents=True)
        shutil.copy(song, inp / folder / song.name)
    prepare("folder", inp, tmp_path / "out", workers=1)
    splits = {m["path"]: m["split"] for m in read_manifest(tmp_path / "out")}
    assert splits == {
        f"train/{SONGS[0].name}": "train",
        f"val/{SONGS[1].name}": "validation",
        f"test/{SONGS[2].name}": "test",
    }
    maestro = tmp_path / "maestro"
    (maestro / "2018").mkdir(parents=True)
    for song in SONGS[:3]:
        shutil.copy(song, maestro / "2018" / song.name)
    rows = ["canonical_composer,canonical_title,split,year,midi_filename,audio_filename,duration"]
    rows += [
        f"x,y,{s},2018,2018/{song.name},a.wav,1.0"
        for s, song in zip(("test", "validation", "train"), SONGS, strict=False)
    ]
    (maestro / "maestro-v3.0.0.csv").write_text("\n".join(rows) + "\n")
    summary = prepare("maestro", maestro, tmp_path / "out_m", workers=1)
    assert (summary["train"], summary["validation"], summary["test"]) == (1, 1, 1)
    splits = {m["path"]: m["split"] for m in read_manifest(tmp_path / "out_m")}
    assert splits[f"2018/{SONGS[0].name}"] == "test"


def test_find_midi_is_recursive_and_case_insensitive(tmp_path):
    for rel in ("a/x.mid", "a/b/y.MIDI", "z.Mid", "notes.txt", "c/versions/v.mid"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    rels = [p.relative_to(tmp_path).as_posix() for p in find_midi(tmp_path, "pop909")]
    assert rels == ["a/b/y.MIDI", "a/x.mid", "z.Mid"]
    assert len(find_midi(tmp_path, "folder")) == 4


def test_input_problems_are_one_line_errors(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert (
        main(["prepare", "--dataset", "folder", "--input", str(tmp_path / "nope"), "--output", out])
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "input folder not found" in err and "\n" not in err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("no music here")
    with pytest.raises(MusicgenError, match="no MIDI files"):
        prepare("folder", tmp_path / "empty", out)
    bad = tmp_path / "allbad"
    bad.mkdir()
    (bad / "a.mid").write_text("text")
    with pytest.raises(MusicgenError, match="none of the 1 MIDI files could be tokenized"):
        prepare("folder", bad, out)
    assert read_skipped(Path(out)) == {"a.mid": "not a MIDI file (no MThd header)"}


def test_unknown_tokenizer_is_reported(tmp_path):
    copy_songs(tmp_path / "in", SONGS[:1])
    with pytest.raises(MusicgenError, match="unknown tokenizer 'nope'; choose one of: remi"):
        prepare("folder", tmp_path / "in", tmp_path / "out", tokenizer="nope")


# ---------------------------------------------------------------------------------------------
# special files, all-or-nothing outputs, signals


def test_special_files_are_skipped_without_being_read(tmp_path):
    """A FIFO named x.mid would block open() forever and a link to /dev/zero reads without
    end: only regular files are read, and the size limit is checked before reading."""
    inp = tmp_path / "in"
    copy_songs(inp, SONGS[:1])
    reasons = build_special(inp)
    summary = prepare("folder", inp, tmp_path / "out", tokenizer="remi", workers=2)
    skipped = read_skipped(tmp_path / "out")
    assert summary["songs"] == 1 and set(skipped) == set(reasons)
    for name, reason in reasons.items():
        assert skipped[name].startswith(reason), (name, skipped[name])


def _stamp(out: Path) -> dict:
    return json.loads((out / "prepared.json").read_text())


def test_an_interrupted_reprepare_leaves_the_old_dataset_whole(tmp_path, monkeypatch):
    """Killed while tokenizing with another tokenizer: tokenizer.json and the arrays are still
    the previous run's, and they still load together."""
    import musicgen.data.prepare as prep
    from musicgen.data.dataset import PreparedSplit

    inp, out = tmp_path / "in", tmp_path / "out"
    copy_songs(inp)
    prepare("folder", inp, out, tokenizer="remi", workers=1)

    def outputs() -> dict:
        return {
            p: p.read_bytes()
            for p in out.rglob("*")
            if p.is_file() and "cache" not in p.parts and p.name != ".lock"
        }

    before = outputs()
    calls = []

    def interrupted(job, tok=None):
        calls.append(job.rel)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return prep.Result(job.rel, "slow")

    monkeypatch.setattr(prep, "process_song", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare("folder", inp, out, tokenizer="groove", workers=1)
    monkeypatch.undo()
    assert outputs() == before
    assert PreparedSplit(out, "train").tokenizer.name == "remi"
    assert set(_stamp(out)["files"]) >= {"tokenizer.json", "train/tokens.npy"}


def test_a_folder_whose_tokenizer_does_not_match_its_tokens_is_refused(tmp_path, monkeypatch):
    import musicgen.data.layout as layout
    from musicgen.data.dataset import PreparedSplit
    from musicgen.tokenizers import build_tokenizer

    inp, out = tmp_path / "in", tmp_path / "out"
    copy_songs(inp)
    prepare("folder", inp, out, tokenizer="remi", workers=1)
    good = (out / "tokenizer.json").read_bytes()
    build_tokenizer("groove").save(out / "tokenizer.json")  # what an old prepare left behind
    with pytest.raises(MusicgenError, match=r"tokenizer.json: does not match .*prepared.json"):
        PreparedSplit(out, "train")
    (out / "tokenizer.json").write_bytes(good)
    PreparedSplit(out, "train")
    # killed between the renames of the new files: the stamp says incomplete
    real, moved = layout._move, []

    def dies_after_two(src, dst):
        if len(moved) == 2:
            raise KeyboardInterrupt
        moved.append(dst)
        real(src, dst)

    monkeypatch.setattr(layout, "_move", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        prepare("folder", inp, out, tokenizer="groove", workers=1)
    monkeypatch.undo()
    with pytest.raises(MusicgenError, match="interrupted musicgen prepare left it incomplete"):
        PreparedSplit(out, "train")
    prepare("folder", inp, out, tokenizer="groove", workers=1)  # a rerun repairs it
    assert PreparedSplit(out, "train").tokenizer.name == "groove"
    assert not (out / ".staging").exists()


SLOW_PREPARE = """
import os, sys, time
import musicgen.data.prepare as P
marks, argv = sys.argv[1], sys.argv[2:]
def slow(job, tok=None):
    open(os.path.join(marks, str(os.getpid())), "w").close()
    time.sleep(600)
P.process_song = slow
from musicgen.cli import main
sys.exit(main(argv))
"""


def _gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped yet (its code no longer runs)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _slow_prepare(tmp_path: Path, workers: int):
    import subprocess
    import sys
    import time

    inp, marks = tmp_path / "in", tmp_path / "marks"
    copy_songs(inp)
    marks.mkdir()
    argv = ["prepare", "--dataset", "folder", "--input", str(inp), "--output"]
    argv += [str(tmp_path / "out"), "--tokenizer", "remi", "--workers", str(workers)]
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_PREPARE, str(marks), *argv],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "stderr", "w"),  # noqa: SIM115  (a pipe would outlive orphans)
        start_new_session=True,  # its own process group, as a shell job is
    )
    deadline = time.time() + 120
    while len(list(marks.iterdir())) < workers and time.time() < deadline:
        time.sleep(0.05)
    return proc, [int(p.name) for p in marks.iterdir()]


@pytest.mark.parametrize(
    "how,code,last",
    [("group_sigint", 130, "interrupted"), ("sigterm", 143, "terminated")],
    ids=["ctrl_c", "kill"],
)
def test_signals_end_prepare_cleanly(tmp_path, how, code, last):
    """Ctrl-C (SIGINT to the whole process group) and a plain `kill` (SIGTERM to the parent):
    no worker traceback, the exit code of docs/CONTRACTS.md, every worker gone."""
    import signal

    proc, workers = _slow_prepare(tmp_path, 2)
    assert len(workers) == 2
    if how == "group_sigint":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    err = (tmp_path / "stderr").read_text()
    assert proc.returncode == code, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == last
    assert all(_gone(pid) for pid in workers)
    assert not (tmp_path / "out" / "prepared.json").exists()


def test_workers_of_a_killed_prepare_exit_on_their_own(tmp_path):
    import signal
    import time

    proc, workers = _slow_prepare(tmp_path, 2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)
    deadline = time.time() + 120  # the kernel tells them (Linux), or they notice when idle
    while not all(_gone(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in workers)


def test_a_second_prepare_into_the_same_folder_is_refused(tmp_path):
    from musicgen.io import FolderLock

    inp, out = tmp_path / "in", tmp_path / "out"
    copy_songs(inp, SONGS[:1])
    out.mkdir()
    with FolderLock(out, "prepare"):  # what a running prepare holds
        with pytest.raises(MusicgenError, match=r"out: another musicgen prepare \(pid \d+\) is"):
            prepare("folder", inp, out, tokenizer="remi", workers=1)
    assert prepare("folder", inp, out, tokenizer="remi", workers=1)["songs"] == 1


def test_a_broken_split_list_is_one_line(tmp_path):
    inp = tmp_path / "maestro"
    copy_songs(inp, SONGS[:1])
    (inp / "maestro-v3.0.0.csv").write_text("split,midi_filename\n" + "x" * 200_000 + ",a\n")
    with pytest.raises(MusicgenError, match=r"maestro-v3.0.0.csv: not a readable split list"):
        prepare("maestro", inp, tmp_path / "out", workers=1)
