"""What the REMI tokenizer (`tokenizers.remi`) prepares around miditok: miditok's configuration
from our short options, a score's tracks reduced to one piano part and its melody track, the
token names appended after miditok's vocabulary, and doubled notes merged into one."""

from __future__ import annotations

from typing import Any

import symusic
from miditok import TokenizerConfig

from musicgen.tokenizers.form import DENSITY_LEVELS, MAX_SECTION_BARS, SECTION_LABELS
from musicgen.tokenizers.remi_grammar import RemiTables

SPECIAL_TOKENS = ["PAD", "BOS", "EOS"]  # miditok puts them first, in this order: PAD is id 0


def _miditok_config(opts: dict[str, Any]) -> TokenizerConfig:
    """Our short option dict -> the full miditok config."""
    from miditok.constants import CHORD_MAPS

    return TokenizerConfig(
        pitch_range=tuple(opts["pitch_range"]),
        beat_res={(0, int(opts["max_duration_beats"])): int(opts["positions_per_beat"])},
        num_velocities=int(opts["num_velocities"]),
        special_tokens=list(SPECIAL_TOKENS),
        use_chords=True,
        chord_maps={q: CHORD_MAPS[q] for q in opts["chord_qualities"]},
        chord_tokens_with_root_note=True,
        chord_unknown=None,
        use_tempos=True,
        num_tempos=int(opts["num_tempos"]),
        tempo_range=tuple(opts["tempo_range"]),
        log_tempos=False,
        use_time_signatures=False,  # POP909's markers are unreliable: every bar is 4/4
        use_rests=False,
        use_programs=False,
        use_pitchdrum_tokens=False,
        use_sustain_pedals=False,
        use_pitch_bends=False,
        remove_duplicated_notes=False,
    )


def merge_piano(score: symusic.Score) -> symusic.Score:
    """One piano track holding the notes of every non-drum track; tempos kept."""
    out = symusic.Score(score.ticks_per_quarter)
    out.tempos = score.tempos.copy()
    track = symusic.Track(name="piano", program=0, is_drum=False)
    for t in score.tracks:
        if not t.is_drum:
            track.notes.extend(t.notes)
    track.notes.sort()
    out.tracks.append(track)
    return out


def melody_track(score: symusic.Score) -> symusic.Track | None:
    """The track named MELODY (POP909) or Melody (musicgen's own files), if any."""
    for track in score.tracks:
        if not track.is_drum and track.name.strip().lower() == "melody":
            return track
    return None


def _only(score: symusic.Score, track: symusic.Track) -> symusic.Score:
    out = symusic.Score(score.ticks_per_quarter)
    out.tempos = score.tempos.copy()
    out.tracks.append(track.copy())
    return out


def extra_names(options: dict[str, Any]) -> list[str]:
    """The tokens appended after miditok's vocabulary: melody pitches, section tokens, then
    the recall marks (each family after the last, so a vocabulary only grows)."""
    low, high = options["pitch_range"]
    names = [f"MelodyPitch_{p}" for p in range(low, high + 1)] if options["melody"] else []
    if options["sections"]:
        names += [f"Section_{label}" for label in SECTION_LABELS]
        names += [f"SectionBars_{n}" for n in range(1, MAX_SECTION_BARS + 1)]
    if options.get("densities"):
        names += [f"SectionDensity_{k}" for k in range(1, DENSITY_LEVELS + 1)]
    if options.get("recall"):
        names += ["Recall_Start", "Recall_End"]
    return names


def merge_duplicates(ids: list[int], t: RemiTables) -> list[int]:
    """Notes of one pitch at one Position become one: the first's place in the sequence, the
    longest Duration and the loudest Velocity of the group (the union of the doubled notes)."""
    out: list[int] = []
    seen: dict[int, int] = {}  # pitch id -> index of its Pitch token in `out` (this position)
    k = 0
    while k < len(ids):
        tok, fam = ids[k], t.family[ids[k]]
        if fam in (RemiTables.BAR, RemiTables.POSITION):
            seen.clear()
        if fam != RemiTables.PITCH or k + 2 >= len(ids):
            out.append(tok)
            k += 1
            continue
        vel, dur = ids[k + 1], ids[k + 2]
        if tok in seen:  # merge into the earlier note: [Pitch, Velocity, Duration] at j
            j = seen[tok]
            if t.value[vel] > t.value[out[j + 1]]:
                out[j + 1] = vel
            if t.value[dur] > t.value[out[j + 2]]:
                out[j + 2] = dur
        else:
            seen[tok] = len(out)
            out.extend((tok, vel, dur))
        k += 3
    return out
