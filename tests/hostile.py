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
