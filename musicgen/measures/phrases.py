"""Measures of a song's phrases: do phrases with one label sound alike, and do the others differ?

Phrase similarity asks whether a form is heard: bars at the same offset of two phrases with
the same label (the annotators' "same material") should be more alike than bars of phrases
with different labels. Each bar is a 16-step onset pattern and a 12-bin pitch-class profile,
each scaled to unit length, so a bar pair's cosine is the mean of the two cosines: rhythm and
harmony weigh alike. The contrast (same minus different) is about 0 for a song scored against a
form that is not its own. It is also given for each half alone (`rhythm_contrast`,
`harmony_contrast`), so a song whose sections share one accompaniment pattern while their
chords change shows which half carries its form. The density spread asks whether phrases
differ in how busy they are (a chorus fuller than its verse).
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np

from musicgen.measures import form as fm
from musicgen.measures.metrics import Notes
from musicgen.tokenizers.form import Section

if TYPE_CHECKING:
    from musicgen.measures.song import Song

STEPS = fm.ONSET_STEPS_PER_BEAT * int(fm.BAR_BEATS)  # 16 onset steps per bar
NO_MATERIAL = frozenset("xX")  # "other" phrases: two of them are not the same material


def bar_profiles(notes: Notes, bars: int) -> np.ndarray:
    """[bars, 28]: per bar its 16-step onset pattern and its pitch-class profile (notes
    starting in the bar), each scaled to unit length / sqrt(2): a bar pair's dot product is the
    mean of the two cosines; an empty bar is all zeros."""
    steps = fm.onset_steps(notes)
    bar = steps // STEPS
    inside = (bar >= 0) & (bar < bars)
    onset = np.zeros((bars, STEPS))
    chroma = np.zeros((bars, 12))
    np.add.at(onset, (bar[inside], steps[inside] % STEPS), 1.0)
    np.add.at(chroma, (bar[inside], np.asarray(notes.pitch)[inside] % 12), 1.0)
    return np.concatenate([_unit(onset), _unit(chroma)], axis=1) / np.sqrt(2.0)


def _unit(rows: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norm, out=np.zeros_like(rows), where=norm > 0)


def phrase_pair_similarity(profiles: np.ndarray, a: Section, b: Section) -> float:
    """Mean similarity of the bars at the same offset of phrases a and b (pairs where both bars
    hold notes); NaN where there is no such pair."""
    n = min(a.bars, b.bars, len(profiles) - a.bar, len(profiles) - b.bar)
    if n < 1:
        return float("nan")
    pa, pb = profiles[a.bar : a.bar + n], profiles[b.bar : b.bar + n]
    filled = (pa.any(axis=1)) & (pb.any(axis=1))
    if not filled.any():
        return float("nan")
    return float((pa * pb).sum(axis=1)[filled].mean())


def same_material(a: Section, b: Section) -> bool:
    return a.label == b.label and a.label not in NO_MATERIAL


def _same_and_different(profiles: np.ndarray, sections: list[Section]) -> tuple[float, float]:
    """Mean similarity over pairs of phrases with one label, and over pairs with different
    labels (NaN where the form has no pair of a kind)."""
    same, different = [], []
    for a, b in combinations(sections, 2):
        sim = phrase_pair_similarity(profiles, a, b)
        if np.isfinite(sim):
            (same if same_material(a, b) else different).append(sim)
    s = float(np.mean(same)) if same else float("nan")
    return s, float(np.mean(different)) if different else float("nan")


def phrase_similarity(song: Song) -> dict[str, float]:
    """`same_label`, `different_label` and `contrast` (their difference) over whole bar
    profiles; `rhythm_contrast` and `harmony_contrast` the same contrast over the onset
    pattern alone and over the pitch-class profile alone (each a full cosine)."""
    profiles = bar_profiles(song.notes, song.bars)  # [bars, 16 + 12]
    same, different = _same_and_different(profiles, song.sections)
    out = {"same_label": same, "different_label": different, "contrast": same - different}
    halves = {"rhythm": profiles[:, :STEPS], "harmony": profiles[:, STEPS:]}
    for name, half in halves.items():
        same, different = _same_and_different(half * np.sqrt(2.0), song.sections)
        out[f"{name}_contrast"] = same - different
    return out


def phrase_density_spread(song: Song) -> float:
    """How much the phrases differ in how busy they are: the coefficient of variation (sd over
    mean) of notes per bar over the song's phrases; a song that plays every phrase alike
    scores 0. NaN with fewer than two phrases or no notes."""
    bar = np.asarray(song.notes.onset) // fm.BAR_BEATS  # the bar each note starts in
    per_bar = [np.count_nonzero((bar >= s.bar) & (bar < s.bar + s.bars)) / s.bars
               for s in song.sections]  # fmt: skip
    if len(per_bar) < 2 or np.mean(per_bar) == 0:
        return float("nan")
    return float(np.std(per_bar) / np.mean(per_bar))
