"""POP909's test split: chosen once by a stable hash, disjoint from training and validation."""

import shutil

import pytest
from paths import DATA, SHARED

from musicgen.data.prepare import prepare
from musicgen.data.sources import assign_split, hash_split
from musicgen.evaluate.form import benchmark_songs

# The 49 test songs of POP909 (docs/evaluation.md, "Splits"): SHA-256 of NNN/NNN.mid under 50
# per mille, among the songs outside validation. A change to this list is a change of split.
TEST_SONGS = (
    "031 055 064 069 081 120 122 135 145 160 168 170 172 186 202 231 237 243 252 273 300 316 322 "
    "333 350 355 422 464 472 512 566 586 593 598 602 652 654 667 686 695 705 712 721 742 744 754 "
    "770 795 843"
).split()
NAMES = [f"{i:03d}/{i:03d}.mid" for i in range(1, 851)]


def test_the_test_split_is_stable_disjoint_and_of_the_promised_size():
    splits = {n[:3]: assign_split(n, "pop909", {}) for n in NAMES}
    test = sorted(k for k, s in splits.items() if s == "test")
    assert test == TEST_SONGS and len(test) >= 40
    validation = {k for k, s in splits.items() if s == "validation"}
    assert len(validation) == 39 and not validation & set(test)
    # validation is what it was before the test split existed (the shipped models' own)
    assert all(hash_split(n) == ("validation" if n[:3] in validation else "train") for n in NAMES)


def test_only_pop909_has_a_test_split_by_hash():
    assert assign_split("031/031.mid", "pop909", {}) == "test"
    assert assign_split("031/031.mid", "folder", {}) == "train"


def test_prepare_keeps_test_songs_out_of_training(tmp_path):
    inp = tmp_path / "pop909"
    for src, name in (("001", "001"), ("005", "031")):  # 031 is a test song's name
        (inp / name).mkdir(parents=True)
        shutil.copy(DATA / "pop909" / src / f"{src}.mid", inp / name / f"{name}.mid")
    counts = prepare("pop909", inp, tmp_path / "out", workers=1)
    assert (counts["train"], counts["test"]) == (1, 1)
    assert benchmark_songs(inp, "test") == [inp / "031" / "031.mid"]
    assert benchmark_songs(inp, "train") == [inp / "001" / "001.mid"]


@pytest.mark.shared
def test_evaluations_find_the_49_test_songs_in_the_shared_pop909():
    songs = benchmark_songs(SHARED / "pop909", "test")
    assert [p.stem for p in songs] == TEST_SONGS
    assert len(benchmark_songs(SHARED / "pop909", "validation")) == 39


def test_training_refuses_a_dataset_prepared_before_the_test_split(tmp_path):
    """A manifest that lists a test song in train (written by a musicgen without the test
    split) is refused with one line naming the folder and the song; a current one passes."""
    from musicgen.data.layout import check_no_test_songs
    from musicgen.errors import MusicgenError

    old = tmp_path / "old"
    old.mkdir()
    rows = [
        '{"path": "001/001.mid", "split": "train"}',
        '{"path": "031/031.mid", "split": "train"}',
    ]
    (old / "manifest.jsonl").write_text("\n".join(rows) + "\n")
    with pytest.raises(
        MusicgenError, match=r"old: prepared before POP909 had a test split: 1 test"
    ):
        check_no_test_songs(old)
    (old / "manifest.jsonl").write_text(rows[0] + "\n" + rows[1].replace("train", "test") + "\n")
    check_no_test_songs(old)  # the same songs, split as prepare splits them now
