"""The studio's checks of what a page sends, before any model work.

Widgets send floats and None, a file upload is whatever a browser sent: every value is checked
here with a one-line `MusicgenError` naming the API's parameter (`bars`, `top_p`) or the file,
and the page shows that line. The sizes (bars, pieces, prompt length) are the page's own,
tighter than the API's so that one request cannot hold a shared machine for long; the sampling
numbers and the chord progression are checked once, by the library's `GenerationRequest` (one
range each, the same as the CLI's); uploads are also held to `musicgen.limits`.
"""

from __future__ import annotations

import math
from pathlib import Path

import symusic

from musicgen import errors
from musicgen.errors import SEED_MAX, MusicgenError
from musicgen.generation.api.options import STUDIO
from musicgen.generation.api.request import SCRATCH_BARS, GenerationRequest
from musicgen.limits import check_score
from musicgen.studio.words import section_letters

MAX_UPLOAD_MB = 2.0  # a POP909 song is 20-60 kB; the bundled MAESTRO excerpt 4 kB
MAX_BARS = 64  # per piece from scratch
MAX_NUM = 4  # pieces per request
MAX_PROMPT_BARS = 16
MAX_SECONDS = 60.0
MAX_NEW_BARS = 32
# Disk: a page's files beyond its budget drop its oldest pieces; the whole server's folder over
# its budget refuses new jobs until pages close or expire (MB, 1e6 bytes).
SESSION_MB = 200.0
SERVER_MB = 2000.0
SESSION_IDLE_S = 3600  # a page (or API client) idle this long loses its session and files
MAX_AUDIO_SECONDS = 180.0  # the player's WAV holds at most this much of a piece (the MIDI all)
# the page's sampling widgets: the options declared for the studio (`Option.studio`; the
# model's defaults fill them); for the others the model's own apply
SAMPLING = STUDIO
TEMPO = (20.0, 300.0)  # qpm a result may be given
MAX_TRANSPOSE = 12  # semitones up or down
# The page's own values, the one source of what an endpoint argument left out (None) means
# beside the model's sampling defaults: the widgets open with them, the jobs fall back on them.
PAGE = {
    "bars": SCRATCH_BARS,
    "num": 1,
    "seed": -1,
    "mode": "bars",
    "prompt_bars": 2,
    "seconds": 8.0,
    "new_bars": 4,
    "tempo": None,
    "transpose": 0,
}


def or_page(name: str, value):
    """`value`, or the page's own value where it is left out (None or an empty box)."""
    return PAGE[name] if value is None or value == "" else value


def random_seed(value) -> int | None:
    """The page's seed: -1 (or empty) means draw one."""
    seed = whole("seed", value, -1, SEED_MAX)
    return None if seed == -1 else seed


def whole(where: str, value, low: int, high: int | None, required: bool = False) -> int | None:
    """`value` as an int within low..high (None passes unless `required`), else a one-line
    error naming `where`; a float must be whole (1.5 is refused, not rounded)."""
    if value is None or value == "":
        if required:
            raise MusicgenError(f"{where}: must be a whole number, got {value!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MusicgenError(f"{where}: must be a whole number, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise MusicgenError(f"{where}: must be a whole number, got {value}")
    return errors.check_range(where, int(value), low, high)


def number(where: str, value, low: float, high: float) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MusicgenError(f"{where}: must be a number, got {value!r}")
    return errors.check_range(where, float(value), low, high)


def request(bars_name: str = "bars", **values) -> GenerationRequest:
    """The page's values as a `GenerationRequest` (checked there, once; a number box's 40.0 is
    a whole 40, an empty box is not given)."""
    values = {k: None if v == "" else v for k, v in values.items()}
    top_k = values.get("top_k")
    if isinstance(top_k, float) and not isinstance(top_k, bool):
        values["top_k"] = whole("top_k", top_k, 0, None)
    return GenerationRequest.build(bars_name, **values)


def given(request: GenerationRequest) -> dict:
    """The page's sampling values a request holds (what a piece's info records)."""
    return {k: getattr(request, k) for k in SAMPLING if getattr(request, k) is not None}


def check_chords(text) -> str | None:
    """The page's chord progression: chord symbols only (None: none). The API also takes a file
    path (a .mid or chord_midi.txt), which must not reach the server's files from the page; the
    progression itself is read by the request."""
    if text is not None and not isinstance(text, str):
        raise MusicgenError(f"chords: must be text (chord symbols), got {text!r}")
    text = (text or "").strip()
    if not text:
        return None
    if text.lower().endswith((".mid", ".midi", ".txt")) or "chord_midi" in text.lower():
        raise MusicgenError("chords: give chord symbols (C G Am F); files cannot be named here")
    return section_letters(text)


def check_upload(path: str | Path, tokenizer_name: str, max_mb: float = MAX_UPLOAD_MB):
    """The uploaded prompt as a symusic Score, or a one-line error naming the file: empty, over
    the upload size, not MIDI, over the song limits (`musicgen.limits`), no notes, or only drum
    notes for a model that reads no drums (REMI)."""
    if path is None or str(path) == "":
        raise MusicgenError("prompt: upload a MIDI file first")
    path = Path(path)
    name = path.name
    if not path.is_file():
        raise MusicgenError(f"{name}: the uploaded file is gone; upload it again")
    size = path.stat().st_size
    if size == 0:
        raise MusicgenError(f"{name}: empty file (not a MIDI file)")
    if size > max_mb * 1e6:
        raise MusicgenError(f"{name}: {size / 1e6:.1f} MB, over the upload limit of {max_mb:g} MB")
    with path.open("rb") as f:
        head = f.read(4)
    if head not in (b"MThd", b"RIFF"):
        raise MusicgenError(f"{name}: not a MIDI file (no MIDI header)")
    try:
        score = symusic.Score(str(path))
    except Exception as exc:  # symusic raises RuntimeError/ValueError on corrupt input
        raise MusicgenError(f"{name}: not a readable MIDI file ({exc})") from None
    check_score(score, name)
    tracks = [t for t in score.tracks if len(t.notes)]
    if not tracks:
        raise MusicgenError(f"{name}: no notes to continue")
    if tokenizer_name != "groove" and all(t.is_drum for t in tracks):
        raise MusicgenError(
            f"{name}: only drum notes, which this model's {tokenizer_name} tokens do not hold; "
            "give a file with pitched notes (or choose the groove model)"
        )
    return score


def check_tempo(value) -> float | None:
    """A result's tempo in quarter notes a minute (None or 0: the piece's own)."""
    if value in (None, "", 0):
        return None
    return number("tempo", value, *TEMPO)


def check_transpose(value) -> int | None:
    """Semitones to move a result by (None: not moved)."""
    return whole("transpose", value, -MAX_TRANSPOSE, MAX_TRANSPOSE)


def check_melody(value) -> int | None:
    """The melody's instrument, a General MIDI program 0..127 (None: the library's lead)."""
    return whole("melody", value, 0, 127)


def prompt_length(mode: str, bars=None, seconds=None) -> dict:
    """`bars=` or `seconds=` of a prompt, checked."""
    if mode not in ("bars", "seconds"):
        raise MusicgenError(f"mode: give 'end', 'bars' or 'seconds', got {mode!r}")
    if mode == "seconds":
        return {"seconds": number("seconds", seconds, 0.1, MAX_SECONDS)}
    return {"bars": whole("bars", bars, 1, MAX_PROMPT_BARS) or 2}
