"""PreparedSplit / CropDataset on a dataset prepared from bundled POP909 songs."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from paths import DATA, UNIT_SONGS
from torch.utils.data import DataLoader

from musicgen.data.dataset import CropDataset, PreparedSplit, load_songs
from musicgen.data.prepare import prepare
from musicgen.errors import MusicgenError

ROOT = Path(__file__).resolve().parents[1]
SONGS = UNIT_SONGS


@pytest.fixture(scope="module")
def train(prepared) -> PreparedSplit:
    return PreparedSplit(prepared, "train")


def test_prepared_split_gives_whole_songs(train, prepared):
    tok = train.tokenizer
    assert len(train) == len(SONGS)
    for i, s in enumerate(SONGS):
        assert train[i].tolist() == tok.encode(s)
    assert train[-1].tolist() == train[len(SONGS) - 1].tolist()
    with pytest.raises(IndexError):
        train[len(SONGS)]
    assert list(train.lengths) == [len(train[i]) for i in range(len(SONGS))]
    songs = load_songs(prepared, "validation")
    assert len(songs) == 1 and songs[0].dtype == np.int64 and songs[0].tolist() == train[0].tolist()
    assert len(load_songs(prepared, "train", max_songs=2)) == 2
    assert len(PreparedSplit(prepared, "test")) == 0


def test_missing_dataset_or_split_is_a_clear_error(prepared, tmp_path):
    with pytest.raises(MusicgenError, match="not a prepared dataset"):
        PreparedSplit(tmp_path, "train")
    (prepared / "train").rename(prepared / "train_moved")
    try:
        with pytest.raises(MusicgenError, match="split 'train' not found"):
            PreparedSplit(prepared, "train")
    finally:
        (prepared / "train_moved").rename(prepared / "train")


def _find_in(song: np.ndarray, crop: np.ndarray) -> int:
    """Start index of `crop` inside `song` (-1 if absent)."""
    n = len(crop)
    for s in range(len(song) - n + 1):
        if song[s] == crop[0] and np.array_equal(song[s : s + n], crop):
            return s
    return -1


def test_crops_start_at_a_bar_and_target_is_input_shifted(train):
    tok = train.tokenizer
    ds = CropDataset(train, crop_len=256, seed=3, num_samples=24)
    songs = [np.asarray(train[i], dtype=np.int64) for i in range(len(train))]
    starts = []
    for i in range(len(ds)):
        item = ds[i]
        inp, tgt = item["input"], item["target"]
        assert inp.shape == tgt.shape == (256,) and inp.dtype == tgt.dtype == torch.long
        assert torch.equal(inp[1:], tgt[:-1])
        assert tok.token_name(int(inp[0])) in ("Bar_None", "BOS_None")
        window = np.concatenate([inp.numpy(), tgt.numpy()[-1:]])
        found = [_find_in(s, window) for s in songs]
        assert max(found) >= 0  # an untransposed crop is a contiguous piece of one song
        starts.append(max(found))
    assert len(set(starts)) > 4  # random bars, not always the song's head


def test_crops_are_transposed_within_the_range(train):
    tok = train.tokenizer
    ds = CropDataset(train, crop_len=128, transpose=(-3, 3), seed=0, num_samples=16)
    plain = CropDataset(train, crop_len=128, transpose=(0, 0), seed=0, num_samples=16)
    shifts = set()
    for i in range(len(ds)):
        a, b = plain[i]["input"].numpy(), ds[i]["input"].numpy()
        ks = [k for k in range(-3, 4) if np.array_equal(tok.transpose(a, k), b)]
        assert ks, "the crop must be the plain crop transposed by k in [-3, 3]"
        shifts.add(ks[0])
    assert len(shifts) > 2


def test_short_songs_are_padded_with_ignored_targets(train):
    ds = CropDataset(train, crop_len=20000, random_start_bar=True, seed=0)
    for i in range(len(ds)):
        item = ds[i]
        song = train[ds.song_index(i)]
        n = len(song) - 1
        assert item["input"][:n].tolist() == song[:-1].tolist()  # whole song from BOS
        assert (item["input"][n:] == 0).all() and (item["target"][n:] == -100).all()
        assert (item["target"][:n] != -100).all()


def test_epoch_visits_every_song_and_is_deterministic(train):
    ds = CropDataset(train, crop_len=64, transpose=(-6, 6), seed=7)
    assert len(ds) == len(train)
    order = [ds.song_index(i) for i in range(len(ds))]
    assert sorted(order) == list(range(len(train)))
    first = [ds[i]["input"] for i in range(len(ds))]
    again = CropDataset(train, crop_len=64, transpose=(-6, 6), seed=7)
    assert all(torch.equal(a, again[i]["input"]) for i, a in enumerate(first))
    ds.set_epoch(1)
    assert not all(torch.equal(a, ds[i]["input"]) for i, a in enumerate(first))
    ds.set_epoch(0)
    assert all(torch.equal(a, ds[i]["input"]) for i, a in enumerate(first))


def test_batches_do_not_depend_on_the_number_of_workers(train):
    def batches(workers):
        ds = CropDataset(train, crop_len=128, transpose=(-6, 6), seed=1, num_samples=12)
        ds.set_epoch(2)
        dl = DataLoader(ds, batch_size=4, num_workers=workers)
        return [torch.cat([b["input"], b["target"]]) for b in dl]

    zero, two = batches(0), batches(2)
    assert len(zero) == 3 and all(torch.equal(a, b) for a, b in zip(zero, two, strict=True))


def test_bad_arguments_are_errors(train):
    with pytest.raises(MusicgenError, match="transpose range"):
        CropDataset(train, 64, transpose=(3, -3))
    with pytest.raises(MusicgenError, match="crop_len"):
        CropDataset(train, 0)


def test_groove_crops_with_instrument_dropping_are_deterministic(tmp_path):
    pytest.importorskip("musicgen.tokenizers.groove")
    files = sorted((DATA / "groove_drums" / "drummer1").rglob("*.mid"))
    for f in files[:6]:
        shutil.copy(f, tmp_path / f.name)
    prepare("groove", tmp_path, tmp_path / "out", workers=1)  # --dataset groove: groove tokenizer
    split = PreparedSplit(tmp_path / "out", "train")
    assert split.tokenizer.name == "groove" and len(split) > 0
    ds = CropDataset(split, 64, transpose=(-5, 6), drop_instrument_p=0.5, seed=2, num_samples=6)
    again = CropDataset(split, 64, transpose=(-5, 6), drop_instrument_p=0.5, seed=2, num_samples=6)
    for i in range(len(ds)):
        a, b = ds[i], again[i]
        assert torch.equal(a["input"], b["input"]) and torch.equal(a["target"], b["target"])
        assert a["input"].shape == (64,)


def test_every_pass_over_the_songs_is_reshuffled_and_items_are_pure(train):
    """A long run (several epochs of indices) reshuffles each pass; item i never depends on what
    was read before it (a resumed run, or another rank, reads the same item)."""
    n, passes = len(train), 6
    ds = CropDataset(train, crop_len=64, transpose=(-6, 6), seed=3, num_samples=passes * n)
    orders = [tuple(ds.song_index(e * n + j) for j in range(n)) for e in range(passes)]
    assert all(sorted(o) == list(range(n)) for o in orders)  # every pass visits every song
    assert len(set(orders)) > 1  # and not in one fixed order
    assert [ds.pass_of(i) for i in (0, n - 1, n, 5 * n)] == [0, 0, 1, 5]
    fresh = CropDataset(train, crop_len=64, transpose=(-6, 6), seed=3, num_samples=passes * n)
    for i in reversed(range(passes * n)):  # random access order, cold cache
        assert torch.equal(fresh[i]["input"], ds[i]["input"]), i


def _crop_starts(ds: CropDataset, train: PreparedSplit, i: int) -> set[int]:
    """Where in its song item i's input sits (every start that matches it)."""
    song = np.asarray(train[ds.song_index(i)])
    inp, n = ds[i]["input"].numpy(), ds.crop_len
    return {s for s in range(len(song) - n) if np.array_equal(song[s : s + n], inp)}


@pytest.mark.parametrize("every", [1, 4])
def test_crops_start_on_every_kth_bar_of_the_song(train, every):
    ds = CropDataset(train, crop_len=128, seed=0, num_samples=24, start_bar_every=every)
    off_phrase = 0
    for i in range(len(ds)):
        bars = train.tokenizer.bar_starts(np.asarray(train[ds.song_index(i)]))
        found = _crop_starts(ds, train, i)
        assert found & ({0} | set(bars.tolist())), "a crop starts at the head or on a bar"
        on_phrase = found & ({0} | set(bars[::4].tolist()))
        off_phrase += not on_phrase
        if every == 4:
            assert on_phrase, f"item {i} starts off the song's bars 0, 4, 8, ..."
    if every == 1:
        assert off_phrase > 0  # the default draws any bar, so the check above can fail


def test_start_bar_every_must_be_positive(train):
    with pytest.raises(MusicgenError, match="start_bar_every"):
        CropDataset(train, crop_len=16, start_bar_every=0)
