"""Timing and dynamics fidelity of candidate tokenizations on real piano performances.

Each candidate encodes a performance and decodes it back; `musicgen.measures.fidelity` measures
onset, duration and velocity error against the raw MIDI and tokens per second of music. Pedal:
"none" drops it, "tokens" keeps miditok's sustain-pedal tokens, "folded" moves note offs to the
pedal's release before tokenizing. Prints a markdown table (medians over pieces of each piece's
figure).

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 python scripts/experiments/measure_tokenizers.py \
        --data ../shared/data/asap_maestro --pieces 30
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

import numpy as np
import symusic
from miditok import REMI, TSD, MIDILike, TokenizerConfig

from musicgen.measures.fidelity import measure
from musicgen.tokenizers.pedal import fold_pedal
from musicgen.tokenizers.remi import RemiTokenizer

# name -> (kind, beat_res, num_velocities); "musicgen" kinds go through our RemiTokenizer
# (options positions_per_beat / num_velocities / max_duration_beats), the others through miditok.
# Tempo bins in steps of 3 bpm from 30 to 420 hold the files' tempos exactly (117, 120 and 400
# bpm); today's bins (32, 35, ..., 224) put 120 bpm at 119 and the whole piece drifts.
TEMPOS = {"tempo_range": [30, 420], "num_tempos": 131}
FINE = {(0, 1): 32, (1, 2): 16, (2, 8): 8}  # time shifts / durations: 15.6 ms steps at 120 bpm
CANDIDATES = {
    "remi (today: 4/beat, 24 vel)": ("musicgen", {}, None),
    "remi 4/beat, 24 vel, file tempos": ("musicgen", dict(TEMPOS), None),
    "remi 16/beat, 32 vel": (
        "musicgen",
        {"positions_per_beat": 16, "num_velocities": 32, "max_duration_beats": 8, **TEMPOS},
        None,
    ),
    "remi 32/beat, 64 vel": (
        "musicgen",
        {"positions_per_beat": 32, "num_velocities": 64, "max_duration_beats": 8, **TEMPOS},
        None,
    ),
    "miditok REMI 32/beat, 32 vel": ("REMI", FINE, 32),
    "TSD fine, 32 vel": ("TSD", FINE, 32),
    "MIDI-Like fine, 32 vel": ("MIDILike", FINE, 32),
}
PEDALS = ("none", "tokens", "folded")
KEYS = (
    "onset_median_ms",
    "onset_p95_ms",
    "duration_median_ms",
    "duration_p95_ms",
    "sounding_median_ms",
    "sounding_p95_ms",
    "velocity_mean_abs",
    "velocity_levels_used",
    "note_ratio",
    "tokens_per_second",
)


def one_track(score: symusic.Score) -> symusic.Score:
    """All piano notes and pedals in one track (miditok then gives one token stream)."""
    out = symusic.Score(score.ticks_per_quarter)
    out.tempos = score.tempos.copy()
    track = symusic.Track(name="piano", program=0, is_drum=False)
    for t in score.tracks:
        if not t.is_drum:
            track.notes.extend(t.notes)
            track.pedals.extend(t.pedals)
    track.notes.sort()
    track.pedals.sort()
    out.tracks.append(track)
    return out


def miditok_codec(kind: str, beat_res: dict, num_velocities: int, pedal_tokens: bool):
    cls = {"REMI": REMI, "TSD": TSD, "MIDILike": MIDILike}[kind]
    tok = cls(
        TokenizerConfig(
            pitch_range=(21, 108),
            beat_res=beat_res,
            num_velocities=num_velocities,
            use_tempos=True,
            num_tempos=131,
            tempo_range=(30, 420),
            use_sustain_pedals=pedal_tokens,
            use_programs=False,
            use_time_signatures=False,
            remove_duplicated_notes=False,
        )
    )

    def codec(score):
        seq = tok.encode(score)
        seq = seq[0] if isinstance(seq, list) else seq
        return len(seq.ids), tok.decode([seq])

    codec.vocab_size = len(tok.vocab)
    return codec


def musicgen_codec(options: dict):
    tok = RemiTokenizer(options)

    def codec(score):
        ids = tok.encode(score)
        return len(ids), tok.decode(ids)

    codec.vocab_size = tok.vocab_size
    return codec


def build(name: str, pedal: str):
    """The codec of one candidate, or None where the combination does not exist."""
    kind, spec, nvel = CANDIDATES[name]
    if kind == "musicgen":
        if pedal == "tokens":
            return None  # our REMI has no pedal tokens; see the miditok REMI rows
        base = musicgen_codec(spec)
    else:
        base = miditok_codec(kind, spec, nvel, pedal == "tokens")
    if pedal != "folded":
        return base

    def folded(score):
        return base(fold_pedal(score))

    folded.vocab_size = base.vocab_size
    return folded


def pieces(data: Path, n: int, seed: int) -> list[Path]:
    """n performances, one per piece (first performer listed), picked at random with `seed`."""
    with open(data / "maestro-v3.0.0.csv") as f:
        rows = list(csv.DictReader(f))
    by_piece: dict[str, str] = {}
    for r in rows:
        by_piece.setdefault(str(Path(r["midi_filename"]).parent), r["midi_filename"])
    names = sorted(by_piece.values())
    random.Random(seed).shuffle(names)
    return [data / p for p in names[:n]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data/asap_maestro"))
    ap.add_argument("--pieces", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write per-candidate medians here")
    args = ap.parse_args()
    scores = [one_track(symusic.Score(str(p))) for p in pieces(args.data, args.pieces, args.seed)]
    results = {}
    for name in CANDIDATES:
        for pedal in PEDALS:
            codec = build(name, pedal)
            if codec is None:
                continue
            rows = [measure(s, codec) for s in scores]
            med = {k: float(np.median([r[k] for r in rows])) for k in KEYS}
            results[f"{name} | pedal {pedal}"] = {**med, "vocab": codec.vocab_size}
            print(f"{name} | pedal {pedal}: done", flush=True)
    print(f"\n{len(scores)} performances, seed {args.seed}; medians over pieces\n")
    cols = (*KEYS, "vocab")
    print("| candidate | pedal | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for cand, vals in results.items():
        print(f"| {cand} | " + " | ".join(f"{vals[k]:.3g}" for k in cols) + " |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
