"""The melody's legato (musicgen.generation.api.legato): which rests it closes and which it leaves,
that it touches lengths only and only the written melody, and the request's switch end to end."""

import pytest
import symusic

from musicgen.errors import MusicgenError
from musicgen.generation.api.legato import hold_melody
from musicgen.generation.api.request import GenerationRequest, add_flags, from_args

TPQ = 4  # ticks per beat: one tick is a sixteenth


def _score(melody: list[tuple[int, int, int]], piano=(), melody_name="Melody") -> symusic.Score:
    """A score of (time, duration, pitch) notes in ticks: a Melody track and a Piano track."""
    score = symusic.Score(TPQ)
    for name, notes in ((melody_name, melody), ("Piano", piano)):
        track = symusic.Track(name=name)
        for t, d, p in notes:
            track.notes.append(symusic.Note(t, d, p, 80))
        score.tracks.append(track)
    return score


def _notes(score: symusic.Score, name: str) -> list[tuple[int, int, int]]:
    track = next(t for t in score.tracks if t.name == name)
    return [(n.time, n.duration, n.pitch) for n in track.notes]


def test_a_sixteenths_rest_within_a_beat_is_closed_and_nothing_else():
    melody = [
        (0, 1, 72),  # a sixteenth, the next an eighth on: held to it
        (2, 1, 74),  # the next two sixteenths on (an eighth's rest): left
        (5, 2, 76),  # the next three on, a sixteenth's rest, within a beat: held
        (8, 4, 77),  # ends where the next starts: left
        (12, 3, 79),  # the next 5 ticks on, over a beat: left
        (17, 1, 77),  # the last note: left
    ]
    piano = [(1, 1, 48), (3, 1, 52)]
    out = hold_melody(_score(melody, piano))
    assert _notes(out, "Melody") == [
        (0, 2, 72), (2, 1, 74), (5, 3, 76), (8, 4, 77), (12, 3, 79), (17, 1, 77)
    ]  # fmt: skip
    assert _notes(out, "Piano") == piano  # the accompaniment is never touched


def test_the_prompts_notes_and_other_tracks_stay_as_they_are():
    melody = [(0, 1, 72), (2, 1, 74), (4, 1, 76), (6, 1, 77)]
    out = hold_melody(_score(melody), start_tick=4)  # the notes from tick 4 on are new
    assert _notes(out, "Melody") == [(0, 1, 72), (2, 1, 74), (4, 2, 76), (6, 1, 77)]
    lead = hold_melody(_score(melody, melody_name="Lead"))  # no track named Melody
    assert _notes(lead, "Lead") == melody


def test_two_melody_notes_at_one_onset_are_both_held_to_the_next():
    out = hold_melody(_score([(0, 1, 72), (0, 1, 76), (2, 2, 74)]))
    assert _notes(out, "Melody") == [(0, 2, 72), (0, 2, 76), (2, 2, 74)]


def test_the_switch_is_a_request_field_and_a_flag():
    import argparse

    assert GenerationRequest.build().legato is True
    assert GenerationRequest.build(legato=False).legato is False
    with pytest.raises(MusicgenError, match=r"^legato: must be True or False, got 'no'$"):
        GenerationRequest.build(legato="no")
    parser = argparse.ArgumentParser()
    add_flags(parser)
    assert from_args(parser.parse_args(["--no-legato"])).legato is False
    assert from_args(parser.parse_args([])).legato is True


def test_legato_changes_only_the_melodys_lengths_end_to_end():
    """The shipped pop model, 4 bars of a verse: the same seed draws the same ids with the
    switch on and off; off, the score is what the ids decode to; on, every note keeps its onset
    and pitch, and only melody notes are longer."""
    import musicgen

    model = musicgen.load("pop909_sine_spe_gated")
    kw = {"form": "A4", "seed": 1}
    held, drawn = model.generate(**kw), model.generate(legato=False, **kw)
    assert held.ids == drawn.ids
    decoded = model.tokenizer.decode(drawn.ids)
    assert _all(drawn.score) == _all(decoded)
    before, after = _all(drawn.score), _all(held.score)
    assert [n[:3] for n in before] == [n[:3] for n in after]
    changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
    assert changed and all(b[0] == "Melody" and a[3] > b[3] for b, a in changed)


def _all(score: symusic.Score) -> list[tuple[str, int, int, int]]:
    return sorted((t.name, n.time, n.pitch, n.duration) for t in score.tracks for n in t.notes)


def test_evaluate_form_scores_the_melody_as_drawn_with_no_legato():
    """`evaluate form --no-legato`: every run's options carry legato=False, named in its label."""
    from musicgen.cli import build_parser
    from musicgen.evaluate.form import SWEPT, sampling_label, sweep

    args = build_parser().parse_args(
        ["evaluate", "form", "--checkpoint", "x", "--data", "d", "--no-legato"]
    )
    runs = sweep({n: getattr(args, n) for n in SWEPT} | {"repeat": [4.5, 0.0]})
    assert runs == [{"repeat": 4.5, "legato": False}, {"repeat": 0.0, "legato": False}]
    assert sampling_label(runs[0]) == "r=4.5 legato=0"
    plain = build_parser().parse_args(["evaluate", "form", "--checkpoint", "x", "--data", "d"])
    assert sweep({n: getattr(plain, n) for n in SWEPT}) == [{}]
