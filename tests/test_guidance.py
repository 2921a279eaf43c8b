"""Phrase guidance (musicgen.generation.decoding.guidance): the shadow's labels lag by a phrase, the
guided logits push away from the shadow's, and a song is written with it end to end."""

import pytest
import torch
from paths import ROOT

from musicgen.errors import MusicgenError
from musicgen.generation.decoding.guidance import LabelLag, guide, label_ids
from musicgen.tokenizers import build_tokenizer

SONG = str(ROOT / "configs" / "tokenizer" / "remi_song.yaml")


@pytest.fixture(scope="module")
def song_tok():
    return build_tokenizer(SONG)


def test_the_labels_are_the_section_label_ids_only(song_tok):
    labels = label_ids(song_tok)
    names = {song_tok.token_name(i) for i in labels}
    assert names == {n for n in map(song_tok.token_name, range(song_tok.vocab_size))
                     if n.startswith("Section_")}  # fmt: skip
    assert {song_tok.token_name(i): melodic for i, melodic in labels.items()}["Section_b"] is False
    assert label_ids(build_tokenizer("remi")) == {}  # no phrases: no guidance


def test_the_shadow_gives_each_phrase_the_label_before_it_of_its_kind(song_tok):
    """i A B b A B: the shadow hears i A A i B A (a phrase with melody gets the last label with
    melody, one without the last without); other ids pass; each row keeps its own labels."""
    i, a, b, quiet = (song_tok.section_ids(x, 4)[0] for x in "iABb")
    lag = LabelLag(label_ids(song_tok), rows=2)
    fed = [[i, 7], [a, a], [8, b], [b, 9], [quiet, a], [a, 9], [b, 9]]
    shadows = [lag.shadow(ids) for ids in fed]
    assert [s[0] for s in shadows] == [i, a, 8, a, i, b, a]  # row 0: i A . B b A B
    assert [s[1] for s in shadows] == [7, a, a, 9, b, 9, 9]  # row 1: A B A


def test_guidance_amplifies_what_the_label_changes():
    """l + w (l - l_shadow): equal rows are unchanged, a difference grows 1 + w times."""
    pieces = torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    shadows = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0]])
    out = guide(torch.cat([pieces, shadows]), 2.0)
    assert torch.equal(out[0], pieces[0])
    assert torch.equal(out[1], torch.tensor([1.0, 3.0, 1.0]))


def test_a_song_is_written_with_guidance(tmp_path):
    """End to end on a tiny untrained song model: the form's phrases are written, the same seed
    writes the same song, and a weight outside its range is a one-line error."""
    from conftest import make_checkpoint

    import musicgen

    model = musicgen.load(make_checkpoint(tmp_path, SONG))
    piece = model.generate(form="A1B1", seed=3, guidance=2.0, min_tokens=100)
    assert [(s.label, s.bars) for s in model.tokenizer.sections(piece.ids)] == [("A", 1), ("B", 1)]
    again = model.generate(form="A1B1", seed=3, guidance=2.0, min_tokens=100)
    assert again.ids == piece.ids
    with pytest.raises(MusicgenError, match="guidance"):
        model.generate(form="A1B1", seed=3, guidance=-1.0)


def test_the_evaluation_sweeps_guidance_beside_the_other_options():
    """`evaluate form --guidance 0 4 --repeat 4.5 0`: one run per combination, each run's
    options only those given (the rest the model's own), guidance named `g` in its label."""
    from musicgen.evaluate.form import SWEPT, sampling_label, sweep

    given = dict.fromkeys(SWEPT) | {"guidance": [0.0, 4.0], "repeat": [4.5, 0.0]}
    runs = sweep(given)
    assert runs == [
        {"repeat": 4.5, "guidance": 0.0},
        {"repeat": 4.5, "guidance": 4.0},
        {"repeat": 0.0, "guidance": 0.0},
        {"repeat": 0.0, "guidance": 4.0},
    ]
    assert sampling_label(runs[1]) == "r=4.5 g=4"
    assert sweep(dict.fromkeys(SWEPT)) == [{}]  # nothing given: the model's defaults
