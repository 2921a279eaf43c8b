"""A corpus of hostile MIDI files, written byte by byte (no MIDI library involved).

Each entry is a file a user or a scraped data set can contain: a valid file with one note after
a delta time of 2**28 - 1 ticks (67 M bars at 1 tick per beat), empty and truncated files, text
named .mid, a header without tracks, a folder named .mid, and so on. `build_corpus(folder)`
writes them all and returns name -> path; `GOOD` names the ones that are valid small songs.
`odd_corpus()` adds files with lying headers and chunk lengths, SMPTE timing, a zero tempo, an
unterminated SysEx, a note lasting 2**28 ticks, 2000 empty tracks ...
"""

from __future__ import annotations

import struct
from pathlib import Path

MAX_DELTA = 0x0FFFFFFF  # the largest variable-length quantity a MIDI delta time can hold


def vlq(value: int) -> bytes:
    """MIDI variable-length quantity (7 bits per byte, high bit = more follows)."""
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    return bytes(reversed(out))


def midi_bytes(events: list[tuple[int, bytes]], tpb: int = 480, fmt: int = 0) -> bytes:
    """A one-track MIDI file from (delta ticks, event bytes) pairs; end-of-track added."""
    body = b"".join(vlq(d) + e for d, e in events) + b"\x00\xff\x2f\x00"
    return (
        b"MThd"
        + struct.pack(">IHHH", 6, fmt, 1, tpb)
        + b"MTrk"
        + struct.pack(">I", len(body))
        + body
    )


def notes(pitches: list[int], gap: int, length: int, delay: int = 0) -> list[tuple[int, bytes]]:
    """Events of consecutive notes: `delay` ticks of silence first, then one note per pitch."""
    events = []
    for k, p in enumerate(pitches):
        events.append((delay if k == 0 else gap, bytes([0x90, p, 80])))
        events.append((length, bytes([0x80, p, 0])))
    return events


def scale(tpb: int = 480, bars: int = 4) -> bytes:
    """A valid small song: quarter notes of a C major scale, `bars` bars of 4/4."""
    pitches = [60 + [0, 2, 4, 5, 7, 9, 11, 12][k % 8] for k in range(4 * bars)]
    return midi_bytes(notes(pitches, 0, tpb), tpb)


def huge_delta(tpb: int) -> bytes:
    """One note after the largest delta time: tiny file, astronomically long piece."""
    return midi_bytes(notes([60], 0, tpb, delay=MAX_DELTA), tpb)


def raw_midi(
    tracks: list[bytes], tpb_field: bytes = b"\x01\xe0", fmt: int = 1, ntracks: int | None = None
) -> bytes:
    """A MIDI file from raw track bodies, with a free header (division bytes, track count)."""
    n = len(tracks) if ntracks is None else ntracks
    head = b"MThd" + struct.pack(">IHH", 6, fmt, n) + tpb_field
    return head + b"".join(b"MTrk" + struct.pack(">I", len(t)) + t for t in tracks)


def odd_corpus() -> dict[str, bytes]:
    """Valid-looking files with odd headers, meta events or timing."""
    note = b"\x00\x90\x3c\x50\x83\x60\x80\x3c\x00"  # one quarter note at 480 tpb
    eot = b"\x00\xff\x2f\x00"
    return {
        "smpte_division.mid": raw_midi([note + eot], tpb_field=b"\xe7\x28"),  # 25 fps x 40
        "format2.mid": raw_midi([note + eot, note + eot], fmt=2),
        "too_many_tracks_declared.mid": raw_midi([note + eot], ntracks=65535),
        "chunk_length_lies.mid": b"MThd"
        + struct.pack(">IHHH", 6, 0, 1, 480)
        + b"MTrk"
        + struct.pack(">I", 0x7FFFFFFF)
        + note
        + eot,
        "meta_length_lies.mid": raw_midi([b"\x00\xff\x01" + vlq(2**27) + b"abc" + note + eot]),
        "zero_tempo.mid": raw_midi([b"\x00\xff\x51\x03\x00\x00\x00" + note + eot]),
        "odd_time_signature.mid": raw_midi([b"\x00\xff\x58\x04\x00\xff\x18\x08" + note + eot]),
        "huge_duration.mid": midi_bytes([(0, b"\x90\x3c\x50"), (MAX_DELTA, b"\x80\x3c\x00")]),
        "velocity_zero_only.mid": midi_bytes([(0, b"\x90\x3c\x00"), (480, b"\x90\x3e\x00")]),
        "running_status_garbage.mid": raw_midi([b"\x00\x90\x3c\x50" + b"\x00\x3c" * 50 + eot]),
        "data_byte_high_bit.mid": raw_midi([b"\x00\x90\xbc\xd0\x83\x60\x80\xbc\x00" + eot]),
        "no_end_of_track.mid": raw_midi([note]),
        "sysex_unterminated.mid": raw_midi([b"\x00\xf0\x05\x7e\x7f" + note + eot]),
        "many_empty_tracks.mid": raw_midi([eot] * 2000 + [note + eot]),
    }


def corpus() -> dict[str, bytes | None]:
    """name -> file bytes (None: make a folder of that name)."""
    good = scale()
    return {
        "good_scale.mid": good,
        "good_scale_tpb96.mid": scale(96, bars=6),
        "huge_delta_tpb1.mid": huge_delta(1),
        "huge_delta_tpb480.mid": huge_delta(480),
        "empty.mid": b"",
        "truncated_header.mid": good[:10],
        "truncated_track.mid": good[: len(good) // 2],
        "text.mid": b"this is not a MIDI file, just text named .mid\n",
        "header_only.mid": b"MThd" + struct.pack(">IHHH", 6, 0, 1, 480),
        "zero_tpb.mid": midi_bytes(notes([60, 62], 0, 480), tpb=0),
        "no_notes.mid": midi_bytes([(0, b"\xff\x51\x03\x07\xa1\x20")]),  # a tempo, no notes
        "drums_only.mid": midi_bytes([(0, b"\x99\x24\x50"), (480, b"\x89\x24\x00")]),
        "random_bytes.mid": bytes((k * 7919 + 13) % 256 for k in range(4096)),
        "folder.mid": None,
    }


GOOD = ("good_scale.mid", "good_scale_tpb96.mid")


def build_corpus(folder: Path, files: dict[str, bytes | None] | None = None) -> dict[str, Path]:
    """Write `files` (default: `corpus()`) into `folder`; returns name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in (corpus() if files is None else files).items():
        path = folder / name
        if data is None:
            path.mkdir(exist_ok=True)
        else:
            path.write_bytes(data)
        paths[name] = path
    return paths


# ---------------------------------------------------------------------------------------------
# model folders, tokenizer files and prepared datasets

# name -> (file in the model folder, change to its JSON) ; the error must contain the third item
CONFIG_CASES: dict[str, tuple[str, object, str]] = {
    "layers_1e6": ("model.n_layers", 10**6, "model.n_layers: must be >= 1 and <= 256"),
    "d_model_1e9": ("model.d_model", 10**9, "model.d_model: must be >= 1 and <= 16384"),
    "params_too_many": ("model.d_model", 16384, "billion parameters"),
    "layers_null": ("model.n_layers", None, "'model.n_layers' must be int, got None"),
    "layers_text": ("model.n_layers", "2", "'model.n_layers' must be int, got '2'"),
    "layers_bool": ("model.n_layers", True, "'model.n_layers' must be int, got True"),
    "dropout_text": ("model.dropout", "0.1", "'model.dropout' must be float"),
    "heads_not_dividing": ("model.n_heads", 3, "not divisible by 3 heads"),
    "vocab_huge": ("model.vocab_size", 10**7, "model.vocab_size: must be >= 0 and <= 65536"),
    "model_null": ("model", None, "'model' must be a mapping, got None"),
    "unknown_key": ("model.layers", 2, "unknown key 'model.layers'"),
    "crop_huge": ("data.crop_len", 10**9, "data.crop_len: must be >= 2 and <= 1048576"),
}

TOKENIZER_CASES: dict[str, tuple[str, object, str]] = {
    "num_tempos_1e8": ("options.num_tempos", 10**8, "num_tempos: must be >= 1 and <= 1024"),
    "num_tempos_null": ("options.num_tempos", None, "'num_tempos' must be int, got None"),
    "num_velocities_text": ("options.num_velocities", "24", "'num_velocities' must be int"),
    "pitch_range_reversed": ("options.pitch_range", [108, 21], "pitch_range: must be [low, high]"),
    "pitch_range_null": ("options.pitch_range", None, "'pitch_range' must be a list, got None"),
    "positions_1e6": ("options.positions_per_beat", 10**6, "positions_per_beat: must be >= 1"),
    "chord_unknown": ("options.chord_qualities", ["min", "blue"], "unknown value 'blue'"),
    "fold_pedal_text": ("options.fold_pedal", "yes", "fold_pedal must be true or false"),
    "options_list": ("options", [1, 2], "'options' must be a mapping"),
    "name_null": ("name", None, "'name': unknown tokenizer None"),
    "name_other": ("name", "bpe", "unknown tokenizer 'bpe'"),
    "vocab_changed": ("vocab", ["PAD_None"], "stored REMI vocabulary differs"),
    "unknown_option": ("num_tempo", 65, "unknown REMI option 'num_tempo'"),
}

GROOVE_CASES: dict[str, tuple[str, object, str]] = {
    "beats_1e9": ("beats_per_bar", 10**9, "beats_per_bar: must be >= 1 and <= 64"),
    "tempo_null": ("default_tempo", None, "'default_tempo' must be float, got None"),
    "tempo_nan": ("default_tempo", float("nan"), "'default_tempo' must be a finite number"),
    "tpq_odd": ("decode_tpq", 100, "decode_tpq: must be a multiple of 12"),
    "third_track": ("third_track", "loudest", "unknown value 'loudest'"),
    "seed_huge": ("seed", 2**70, "seed: must be >= 0 and <= 4294967295"),
    "vocab_size": ("vocab_size", 10**6, "stored groove vocab_size 1000000 != 795"),
}


def set_dotted(data: dict, dotted: str, value: object) -> dict:
    """A deep copy of `data` with the `a.b.c` entry set to `value`."""
    import copy

    out = copy.deepcopy(data)
    node = out
    *path, last = dotted.split(".")
    for key in path:
        node = node[key]
    node[last] = value
    return out


def build_special(folder: Path) -> dict[str, str]:
    """Special files named like MIDI in `folder`: a FIFO (open() would block forever), links to
    /dev/zero (endless) and /dev/null, a sparse 1 GiB file (over the size limit before a byte is
    read). Returns name -> the start of its skip reason."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    os.mkfifo(folder / "fifo.mid")
    (folder / "zero.mid").symlink_to("/dev/zero")
    (folder / "null.midi").symlink_to("/dev/null")
    with open(folder / "sparse.mid", "wb") as fh:
        fh.truncate(2**30)
    return {
        "fifo.mid": "a FIFO (named pipe), not a regular file",
        "zero.mid": "a character device, not a regular file",
        "null.midi": "a character device, not a regular file",
        "sparse.mid": "over the size limit (1024.0 MB > 10 MB)",
    }


def read_wav(path) -> tuple:
    """([frames, channels] float32 in [-1, 1], sample rate) of a 16-bit PCM WAV: how the tests
    listen to what the renderer wrote."""
    import io
    import wave
    from pathlib import Path

    import numpy as np

    with wave.open(io.BytesIO(Path(path).read_bytes())) as w:
        assert w.getsampwidth() == 2, f"{path}: not 16-bit PCM"
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return frames.reshape(-1, w.getnchannels()).astype(np.float32) / 32768, w.getframerate()
