"""Misuse of the Python generation API: every mistyped or out-of-range argument is a
one-line `MusicgenError` naming the parameter, raised before anything is sampled; none is
silently ignored (`bars=0` was an empty piece, `max_tokens=0` was ignored, `bars=-1` and a
negative start built a wrong prompt) or a traceback (seed 2**70, batch_size 0). The command
line shows the same messages with flag names (`musicgen.cli.flag_message`)."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import symusic
from paths import DATA

import musicgen
from musicgen.cli import flag_message, main
from musicgen.errors import Cancelled, MusicgenError

SONG = DATA / "pop909" / "005" / "005.mid"


@pytest.fixture(scope="module")
def model(tiny_checkpoints) -> musicgen.Model:
    return musicgen.load(tiny_checkpoints["remi"])


def _silent_midis(folder) -> dict[str, str]:
    """A file with a track and tempo but no note, and a drum-only file (REMI reads no drums)."""
    empty = symusic.Score(480)
    empty.tempos.append(symusic.Tempo(0, 120.0))
    empty.tracks.append(symusic.Track("piano", 0, False))
    drums = symusic.Score(480)
    kit = symusic.Track("drums", 0, True)
    for k in range(16):
        kit.notes.append(symusic.Note(k * 480, 240, 36 + k % 3, 100))
    drums.tracks.append(kit)
    paths = {}
    for name, score in (("silence", empty), ("drums", drums)):
        paths[name] = str(folder / f"{name}.mid")
        score.dump_midi(paths[name])
    return paths


GENERATE = [  # keywords of Model.generate / generate_many -> the start of the message
    ({"seed": 2**70}, "seed: must be >= 0 and <= 4294967295, got 1180591620717411303424"),
    ({"seed": -1}, "seed: must be >= 0"),
    ({"seed": True}, "seed: must be a whole number, got True"),
    ({"seed": 1.5}, "seed: must be a whole number, got 1.5"),
    ({"seed": "3"}, "seed: must be a whole number, got '3'"),
    ({"bars": 0}, "bars: must be >= 1 and <= 4096, got 0"),
    ({"bars": -1}, "bars: must be >= 1"),
    ({"bars": 10**9}, "bars: must be >= 1 and <= 4096, got 1000000000"),
    ({"bars": 2.5}, "bars: must be a whole number"),
    ({"bars": True}, "bars: must be a whole number"),
    ({"bars": "4"}, "bars: must be a whole number"),
    ({"max_tokens": 0}, "max_tokens: must be >= 1"),
    ({"max_tokens": -5}, "max_tokens: must be >= 1"),
    ({"max_tokens": 10**12}, "max_tokens: must be >= 1 and <= 1000000"),
    ({"max_tokens": 8.0}, "max_tokens: must be a whole number"),
    ({"temperature": "hot"}, "temperature: must be a number, got 'hot'"),
    ({"temperature": True}, "temperature: must be a number, got True"),
    ({"temperature": math.nan}, "temperature: must be a finite number, got nan"),
    ({"temperature": math.inf}, "temperature: must be a finite number, got inf"),
    ({"temperature": -1}, "temperature: must be 0 or >= 0.01 and <= 100 (0 = greedy), got -1"),
    ({"temperature": 1e-300}, "temperature: must be 0 or >= 0.01"),
    ({"temperature": 1e39}, "temperature: must be 0 or >= 0.01 and <= 100"),
    ({"top_p": math.nan}, "top_p: must be a finite number"),
    ({"top_p": "0.9"}, "top_p: must be a number"),
    ({"top_p": 0}, "top_p: must be >= 0.001 and <= 1 (1 = off), got 0"),
    ({"top_p": 1e-300}, "top_p: must be >= 0.001"),
    ({"repeat": 1e39}, "repeat: must be >= 0 and <= 100"),
    ({"top_p": False}, "top_p: must be a number"),
    ({"top_k": 1.5}, "top_k: must be a whole number"),
    ({"top_k": "5"}, "top_k: must be a whole number"),
    ({"top_k": True}, "top_k: must be a whole number"),
    ({"top_k": -1}, "top_k: must be >= 0"),
    ({"min_tokens": math.inf}, "min_tokens: must be a whole number"),
    ({"min_tokens": "x"}, "min_tokens: must be a whole number"),
    ({"min_tokens": -1}, "min_tokens: must be >= 0"),
    ({"grammar": "yes"}, "grammar: must be True or False"),
    ({"colour": 1}, "colour: unknown option"),
    ({"progress": 5}, "progress: must be a function"),
    ({"cancel": object()}, "cancel: must have is_set()"),
    ({"grammar_wrap": "x"}, "grammar_wrap: must be a function"),
]


@pytest.mark.parametrize("kwargs, message", GENERATE, ids=[repr(k) for k, _ in GENERATE])
def test_generate_misuse_is_a_one_line_error(model, kwargs, message):
    with pytest.raises(MusicgenError) as info:
        model.generate(**kwargs)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.generate_many(0), "num: must be >= 1, got 0"),
        (lambda m: m.generate_many(-2), "num: must be >= 1"),
        (lambda m: m.generate_many(2.0), "num: must be a whole number"),
        (lambda m: m.generate_many(2, batch_size=0), "batch_size: must be >= 1 and <= 1024, got 0"),
        (lambda m: m.generate_many(2, batch_size=None), "batch_size: must be >= 1"),
        (lambda m: m.generate_many(2, batch_size=10**9), "batch_size: must be >= 1 and <= 1024"),
        (lambda m: m.continue_many(SONG, 0), "num: must be >= 1"),
    ],
)
def test_counts_are_checked(model, call, message):
    with pytest.raises(MusicgenError, match="^" + message.replace("(", r"\(")):
        call(model)


CONTINUE = [  # keywords of Model.continue_midi -> the start of the message
    ({"bars": 0}, "bars: must be >= 1 and <= 4096, got 0"),
    ({"bars": -1}, "bars: must be >= 1"),
    ({"bars": 10**9}, "bars: must be >= 1 and <= 4096"),
    ({"bars": 1.5}, "bars: must be a whole number"),
    ({"bars": 500}, "/005.mid: has "),  # the song is shorter: the file is named
    ({"prompt_bars": (-3, 2)}, "prompt_bars: need 0 <= START < END, got -3:2"),
    ({"prompt_bars": (3, 1)}, "prompt_bars: need 0 <= START < END, got 3:1"),
    ({"prompt_bars": (2, 2)}, "prompt_bars: need 0 <= START < END"),
    ({"prompt_bars": (0, "2")}, "prompt_bars: must be a whole number, got '2'"),
    ({"prompt_bars": 5}, "prompt_bars: must be (start, end), got 5"),
    ({"prompt_bars": "0:2"}, "prompt_bars: must be (start, end), got '0:2'"),
    ({"prompt_bars": (0, 1, 2)}, "prompt_bars: must be (start, end)"),
    ({"bars": 2, "prompt_bars": (0, 2)}, "bars and prompt_bars: give one of them, not both"),
    ({"bars": 2, "seconds": 4}, "bars and seconds: give one of them, not both"),
    ({"seconds": 0}, "seconds: must be > 0"),
    ({"seconds": math.nan}, "seconds: must be a finite number"),
    ({"new_bars": 0}, "new_bars: must be >= 1 and <= 4096, got 0"),
    ({"new_bars": 10**9}, "new_bars: must be >= 1 and <= 4096"),
    ({"max_tokens": 0}, "max_tokens: must be >= 1"),
    ({"seed": 2**70}, "seed: must be >= 0 and <= 4294967295"),
    ({"seed": "1"}, "seed: must be a whole number"),
    ({"top_p": math.inf}, "top_p: must be a finite number"),
    ({"cancel": 1}, "cancel: must have is_set()"),
]


@pytest.mark.parametrize("kwargs, message", CONTINUE, ids=[repr(k) for k, _ in CONTINUE])
def test_continue_misuse_is_a_one_line_error(model, kwargs, message):
    with pytest.raises(MusicgenError) as info:
        model.continue_midi(SONG, **kwargs)
    text = str(info.value)
    assert (text.startswith(message) or message in text) and "\n" not in text, text


@pytest.mark.parametrize("kind", ["silence", "drums"])
def test_a_prompt_without_notes_is_a_one_line_error(model, kind, tmp_path):
    path = _silent_midis(tmp_path)[kind]
    with pytest.raises(MusicgenError) as info:
        model.continue_midi(path, seed=0, max_tokens=8)
    text = str(info.value)
    assert text.startswith(path) and "no notes" in text and "\n" not in text, text


def test_a_silent_exact_prompt_is_an_error_not_an_unprompted_piece(model):
    """Bars 0:4 of POP909 song 200 are silent: `prompt_bars` says so; `bars` finds the music."""
    song = DATA / "pop909" / "200" / "200.mid"
    with pytest.raises(MusicgenError, match="bars 0:4 hold no notes"):
        model.continue_midi(song, prompt_bars=(0, 4), max_tokens=8)
    prompt = model.prompt(song, bars=2)
    assert prompt.first_bar >= 4 and prompt.notes.note_num() > 0


def test_edge_values_are_accepted(model):
    for seed in (0, 2**32 - 1, np.int64(7)):
        assert model.generate(bars=1, seed=seed, max_tokens=4).seed == int(seed)
    greedy = [model.generate(bars=None, seed=1, max_tokens=6, temperature=0).ids for _ in "ab"]
    assert greedy[0] == greedy[1]  # temperature 0 (greedy) is a valid value
    assert model.generate(bars=None, seed=1, max_tokens=5, temperature=1).sampled <= 5


def test_cancel_stops_with_cancelled_and_progress_reaches_the_total(model):
    class After:
        def __init__(self, n: int):
            self.calls, self.n = 0, n

        def is_set(self) -> bool:
            self.calls += 1
            return self.calls > self.n

    with pytest.raises(Cancelled, match="^cancel: generation cancelled after 5 of") as info:
        model.generate_many(3, bars=None, max_tokens=40, seed=0, batch_size=2, cancel=After(5))
    assert isinstance(info.value, MusicgenError)
    event = threading.Event()
    event.set()
    with pytest.raises(Cancelled):
        model.continue_midi(SONG, seed=0, max_tokens=8, cancel=event)
    seen = []
    model.generate_many(
        3, bars=None, max_tokens=12, seed=0, batch_size=2, progress=lambda *a: seen.append(a)
    )
    done = [d for d, _ in seen]
    assert done == sorted(done) and seen[-1][0] == seen[-1][1] and len({t for _, t in seen}) == 1


@pytest.mark.parametrize(
    "message, shown",
    [
        ("max_tokens: must be >= 1, got 0", "--max-tokens: must be >= 1, got 0"),
        ("bars and seconds: give one of them", "--bars and --seconds: give one of them"),
        ("bars and prompt_bars: give one", "--bars and --prompt-bars: give one"),
        ("new_bars: must be >= 1", "--new-bars: must be >= 1"),
        ("top_p: must be in (0, 1]", "--top-p: must be in (0, 1]"),
        ("grammar: must be True or False", "--no-grammar: must be True or False"),
        ("/data/x.mid: has 4 bars", "/data/x.mid: has 4 bars"),  # a file: kept
        ("config: train.seed must be", "config: train.seed must be"),
        ("bars and colour: x", "bars and colour: x"),  # not all parameters: kept
    ],
)
def test_the_cli_shows_parameters_as_flags(message, shown):
    assert flag_message(message) == shown


@pytest.mark.parametrize(
    "argv, message",
    [
        (["generate", "--bars", "100000"], "error: --bars: must be >= 1 and <= 4096, got 100000"),
        (["generate", "--seed", str(2**40)], "error: --seed: must be >= 0 and <= 4294967295"),
        (["generate", "--max-tokens", str(10**7)], "error: --max-tokens: must be >= 1 and <="),
        (["continue", "--prompt", str(SONG), "--new-bars", "0"], "error: --new-bars: must be"),
        (["continue", "--prompt", str(SONG), "--bars", "-1"], "error: --bars: must be >= 1"),
        (["continue", "--prompt", str(SONG), "--prompt-bars=-3:2"], "error: --prompt-bars: need"),
    ],
)
def test_cli_limits_are_one_line_flag_errors(argv, message, tiny_checkpoints, tmp_path, capsys):
    rc = main([*argv, "--checkpoint", str(tiny_checkpoints["remi"]), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith(message) and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())
