"""Measures of a whole song: its phrases, its melody, its repeats, its texture, its chords.

A song here is its notes (a symusic Score whose track named Melody, if any, is the melody and
every other pitched track the accompaniment; or one track) and its sections
(`tokenizers.form.Section`: a label and a length in bars, on the song's own bars, bar 0 at
beat 0, 4/4). Everything is pure numpy over `measures.metrics.Notes`, so each measure can be
checked on hand-built songs; `musicgen.evaluate.song` runs them over real and generated songs.

Phrase similarity and density are in `measures.phrases`.

Chords, where none are given, are detected per half bar from the accompaniment's sounding
notes (duration-weighted pitch classes against binary chord templates, cosine): a plain rule,
the same for real and generated songs, so their difference is what the comparison reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import symusic

from musicgen.measures import form as fm
from musicgen.measures.metrics import Notes, notes_from_score, notes_per_onset, stacked_onset_rate
from musicgen.measures.phrases import phrase_density_spread, phrase_similarity
from musicgen.tokenizers.form import Section

BAR_BEATS = fm.BAR_BEATS
MELODY_NAME = "melody"  # the track name (any case) that holds the melody
CHORD_BEATS = 2.0  # chords are detected per half bar
END_BARS = 2  # a phrase closes in its last two bars
MIN_KEY_NOTES = 8  # a phrase with fewer pitched notes has no key of its own
MEASURES = (  # song_measures' names, in the order tables list them
    "phrase_same_label",
    "phrase_different_label",
    "phrase_contrast",
    "phrase_rhythm_contrast",
    "phrase_harmony_contrast",
    "melody_coverage",
    "melody_outside",
    "melody_range",
    "melody_interval",
    "melody_notes_per_bar",
    "melody_register",
    "melody_ends_on_chord_tone",
    "repeated_bar_rate",
    "notes_per_onset",
    "stacked_onset_rate",
    "notes_per_bar",
    "phrase_density_spread",
    "key_match",
    "prompt_key_match",
    "top_voice_line",
    "top_voice_interval",
    "chord_agree",
    "chord_tone_share",
    "prompt_kept",
)

# chord templates: quality -> (intervals above the root, family)
QUALITIES: dict[str, tuple[tuple[int, ...], str]] = {
    "maj": ((0, 4, 7), "maj"),
    "min": ((0, 3, 7), "min"),
    "dim": ((0, 3, 6), "dim"),
    "aug": ((0, 4, 8), "aug"),
    "sus2": ((0, 2, 7), "sus"),
    "sus4": ((0, 5, 7), "sus"),
    "7dom": ((0, 4, 7, 10), "maj"),
    "7maj": ((0, 4, 7, 11), "maj"),
    "7min": ((0, 3, 7, 10), "min"),
    "7halfdim": ((0, 3, 6, 10), "dim"),
    "7dim": ((0, 3, 6, 9), "dim"),
}


@dataclass(frozen=True)
class Chord:
    """A chord sounding from beat `start` to `end`: its root (0 = C) and quality (`QUALITIES`)."""

    start: float
    end: float
    root: int
    quality: str

    @property
    def pitch_classes(self) -> frozenset[int]:
        return frozenset((self.root + i) % 12 for i in QUALITIES[self.quality][0])

    @property
    def family(self) -> str:
        return QUALITIES[self.quality][1]


@dataclass
class Song:
    """A whole song's notes (beats from its bar 0), its melody and accompaniment apart, and its
    sections on its bars."""

    notes: Notes  # every pitched note
    melody: Notes  # the Melody track's notes (empty: the song has none)
    accompaniment: Notes  # every other pitched note
    sections: list[Section]

    @property
    def bars(self) -> int:
        """The bars the form covers (its last section's end)."""
        return max((s.bar + s.bars for s in self.sections), default=0)


def song_from_score(score: symusic.Score, sections: Sequence[Section]) -> Song:
    """A Song from a score (bar 0 at its time 0) and its sections: the tracks named Melody are
    the melody, the other pitched tracks the accompaniment."""
    tracks = [t for t in score.tracks if not t.is_drum]
    is_melody = [t.name.strip().lower() == MELODY_NAME for t in tracks]
    melody = _tracks(score, [t for t, m in zip(tracks, is_melody, strict=True) if m])
    accompaniment = _tracks(score, [t for t, m in zip(tracks, is_melody, strict=True) if not m])
    return Song(_tracks(score, tracks), melody, accompaniment, list(sections))


def _tracks(score: symusic.Score, tracks: list) -> Notes:
    """The notes of some of a score's tracks."""
    part = symusic.Score(score.ticks_per_quarter)
    part.tempos = score.tempos.copy()
    for t in tracks:
        part.tracks.append(t.copy())
    return notes_from_score(part)


# melody


def melodic_bars(sections: Sequence[Section], melodic: bool = True) -> list[int]:
    """The bars of phrases with melody (upper-case labels), or without (`melodic` False)."""
    return [
        b for s in sections if s.label.isupper() == melodic for b in range(s.bar, s.bar + s.bars)
    ]


def sounding_bars(notes: Notes, bars: int) -> np.ndarray:
    """bool[bars]: whether a note sounds somewhere in each bar (held into it counts)."""
    out = np.zeros(bars, bool)
    start = np.asarray(notes.onset) / BAR_BEATS
    end = (np.asarray(notes.onset) + np.asarray(notes.duration)) / BAR_BEATS
    for a, b in zip(start, end, strict=True):
        lo, hi = int(np.floor(a)), int(np.ceil(b))  # bars [lo, hi) overlap the note
        out[max(lo, 0) : max(min(hi, bars), 0)] = True
    return out


def melody_line(melody: Notes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(onset, duration, pitch) of the melody's notes, the highest at each grid onset (a
    doubled or harmonised melody note counts once), in time order."""
    steps = fm.onset_steps(melody)
    order = np.lexsort((-np.asarray(melody.pitch), steps))
    steps = steps[order]
    first = np.ones(len(steps), bool)
    first[1:] = steps[1:] != steps[:-1]
    keep = order[first]
    return (
        steps[first] / fm.ONSET_STEPS_PER_BEAT,
        np.asarray(melody.duration)[keep],
        np.asarray(melody.pitch)[keep],
    )


def melody_measures(song: Song, chords: Sequence[Chord] | None = None) -> dict[str, float]:
    """`coverage`: share of the bars of melodic phrases where the melody sounds; `outside`:
    share of the bars of phrases without melody where a melody note starts; `range`
    (semitones, highest minus lowest note); `interval`: mean absolute step between successive
    melody onsets (semitones); `notes_per_bar`: melody onsets a bar of melodic phrases (the
    line's own rhythm: a melody that never rests makes a long top voice too);
    `register`: the median pitch of its line (MIDI; a sung melody sits around A4);
    `ends_on_chord_tone`: share of melodic phrases whose last melody
    note is a tone of the chord sounding at its onset (`chords`, else `detect_chords`)."""
    nan = float("nan")
    bars = melodic_bars(song.sections)
    sounding = sounding_bars(song.melody, song.bars)
    coverage = float(sounding[bars].mean()) if bars else nan
    quiet = melodic_bars(song.sections, melodic=False)
    starts = np.floor(np.asarray(song.melody.onset) / BAR_BEATS).astype(int)
    outside = float(np.isin(quiet, starts).mean()) if quiet else nan
    if len(song.melody) == 0:
        return {"coverage": coverage, "outside": outside, "range": nan, "interval": nan,
                "notes_per_bar": 0.0 if bars else nan, "register": nan,
                "ends_on_chord_tone": nan}  # fmt: skip
    onset, duration, pitch = melody_line(song.melody)
    in_melodic = np.isin(np.floor(onset / BAR_BEATS).astype(int), bars)
    chords = detect_chords(song.accompaniment, song.bars) if chords is None else chords
    return {
        "coverage": coverage,
        "outside": outside,
        "range": float(pitch.max() - pitch.min()),
        "interval": float(np.abs(np.diff(pitch)).mean()) if len(pitch) > 1 else nan,
        "notes_per_bar": float(in_melodic.sum() / len(bars)) if bars else nan,
        "register": float(np.median(pitch)),
        "ends_on_chord_tone": phrase_end_chord_tones(
            (onset, duration, pitch), song.sections, chords
        ),
    }


def phrase_end_chord_tones(
    line: tuple[np.ndarray, np.ndarray, np.ndarray],
    sections: Sequence[Section],
    chords: Sequence[Chord],
) -> float:
    """Share of melodic phrases (with a melody note in their last `END_BARS` bars and a chord
    under it) whose closing note is a tone of the chord sounding at its onset. The closing note
    is the longest melody note starting in those bars (the latest of equals): the held note of
    the cadence, not the pickup that often leads into the next phrase."""
    onset, duration, pitch = line
    hits = []
    for s in sections:
        if not s.label.isupper():
            continue
        lo = max(s.bar, s.bar + s.bars - END_BARS) * BAR_BEATS
        inside = np.flatnonzero((onset >= lo) & (onset < (s.bar + s.bars) * BAR_BEATS))
        if not len(inside):
            continue
        close = inside[::-1][int(np.argmax(duration[inside][::-1]))]
        under = chords_under(chords, float(onset[close]), float(onset[close] + duration[close]))
        if under:
            hits.append(any(int(pitch[close]) % 12 in c.pitch_classes for c in under))
    return float(np.mean(hits)) if hits else float("nan")


def chords_under(chords: Sequence[Chord], start: float, end: float) -> list[Chord]:
    """The chords sounding at some time in [start, end) (the one at `start` for a note of no
    length)."""
    end = max(end, start + 1e-6)
    return [c for c in chords if c.start < end and c.end > start]


# chords


def _templates() -> tuple[np.ndarray, list[tuple[int, str]]]:
    """[roots x qualities, 12] unit binary chord templates and their (root, quality)."""
    rows, names = [], []
    for quality, (intervals, _) in QUALITIES.items():
        for root in range(12):
            row = np.zeros(12)
            row[[(root + i) % 12 for i in intervals]] = 1.0
            rows.append(row / np.linalg.norm(row))
            names.append((root, quality))
    return np.array(rows), names


TEMPLATES, TEMPLATE_NAMES = _templates()


def pitch_class_weights(notes: Notes, start: float, end: float) -> np.ndarray:
    """[12]: beats each pitch class sounds within [start, end)."""
    on, off = np.asarray(notes.onset), np.asarray(notes.onset) + np.asarray(notes.duration)
    overlap = np.clip(np.minimum(off, end) - np.maximum(on, start), 0.0, None)
    return np.bincount(np.asarray(notes.pitch) % 12, weights=overlap, minlength=12)


def recognise(weights: np.ndarray) -> tuple[int, str] | None:
    """The (root, quality) whose template is closest (cosine) to a pitch-class weighting; the
    triad wins a tie with its seventh (it comes first); None for silence."""
    if weights.sum() <= 0:
        return None
    return TEMPLATE_NAMES[int(np.argmax(TEMPLATES @ weights))]


def detect_chords(notes: Notes, bars: int, span: float = CHORD_BEATS) -> list[Chord]:
    """A chord per `span` beats over `bars` bars, recognised from the notes sounding in it
    (`recognise`); spans without notes have none."""
    out = []
    for k in range(int(bars * BAR_BEATS / span)):
        start = k * span
        found = recognise(pitch_class_weights(notes, start, start + span))
        if found is not None:
            out.append(Chord(start, start + span, *found))
    return out


def chord_agreement(song: Song, given: Sequence[Chord]) -> dict[str, float]:
    """For given chords (forced, or a real song's annotation), over each one's span: `exact`,
    the share whose recognised chord (all pitched notes, `recognise`) has the given root and
    quality; `agree`, root and family (major, minor, diminished, augmented, suspended);
    `tone_share`, the share of sounding note time on the given chord's pitch classes."""
    agree, exact, tone, total = [], [], 0.0, 0.0
    for c in given:
        weights = pitch_class_weights(song.notes, c.start, c.end)
        found = recognise(weights)
        agree.append(
            found is not None and found[0] == c.root and QUALITIES[found[1]][1] == c.family
        )
        exact.append(found == (c.root, c.quality))
        tone += weights[sorted(c.pitch_classes)].sum()
        total += weights.sum()
    nan = float("nan")
    return {
        "agree": float(np.mean(agree)) if agree else nan,
        "exact": float(np.mean(exact)) if exact else nan,
        "tone_share": float(tone / total) if total > 0 else nan,
    }


# key, repeats, texture, and all measures together


def phrase_key_match(song: Song) -> float:
    """Share of phrases (with `MIN_KEY_NOTES` pitched notes) whose major-scale root
    (`form.scale_root`) is the whole song's: a song that keeps its key."""
    root = fm.scale_root(song.notes)
    hits = []
    for s in song.sections:
        part = _bars(song.notes, s.bar, s.bar + s.bars)
        if len(part) >= MIN_KEY_NOTES:
            hits.append(fm.scale_root(part) == root)
    return float(np.mean(hits)) if hits and root is not None else float("nan")


def _bars(notes: Notes, first: int, end: int) -> Notes:
    """The notes starting in bars first .. end - 1, times kept."""
    onset = np.asarray(notes.onset)
    return notes.select((onset >= first * BAR_BEATS) & (onset < end * BAR_BEATS))


def prompt_key_match(song: Song, prompt_bars: int) -> float:
    """1 if the bars after the first `prompt_bars` share the prompt bars' major-scale root,
    else 0; NaN without notes on either side."""
    head = fm.scale_root(_bars(song.notes, 0, prompt_bars))
    rest = fm.scale_root(_bars(song.notes, prompt_bars, song.bars))
    return float("nan") if head is None or rest is None else float(head == rest)


def song_measures(
    song: Song, chords: Sequence[Chord] | None = None, prompt_bars: int = 0
) -> dict[str, float]:
    """Every measure of a whole song (the notes within its form's bars), by name: phrase
    similarity, the melody, exact bar repeats, texture, key, the top voice; `prompt_key_match`
    where the first `prompt_bars` bars were a prompt."""
    song = Song(*(_bars(n, 0, song.bars) for n in (song.notes, song.melody, song.accompaniment)),
                song.sections)  # fmt: skip
    out = {f"phrase_{k}": v for k, v in phrase_similarity(song).items()}
    out.update({f"melody_{k}": v for k, v in melody_measures(song, chords).items()})
    line = fm.top_voice_measures(song.notes, beats=song.bars * BAR_BEATS)
    has_notes = len(song.notes) > 0
    out.update(
        repeated_bar_rate=fm.repeated_bar_rate(song.notes) if has_notes else float("nan"),
        notes_per_onset=notes_per_onset(song.notes),
        stacked_onset_rate=stacked_onset_rate(song.notes),
        notes_per_bar=len(song.notes) / song.bars if song.bars else float("nan"),
        phrase_density_spread=phrase_density_spread(song),
        key_match=phrase_key_match(song),
        prompt_key_match=prompt_key_match(song, prompt_bars) if prompt_bars else float("nan"),
        top_voice_line=line["line"],
        top_voice_interval=line["interval"],
    )
    return out
