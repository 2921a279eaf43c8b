"""The sustain pedal folded into note durations: a key released while the pedal is down sounds
on until the pedal's release. The expressive REMI tokenizer (`fold_pedal: true`) applies it
before tokenizing, so a vocabulary without pedal tokens still keeps how long each note sounds;
`measures.fidelity` uses the same rule to compare sounding durations."""

from __future__ import annotations

import numpy as np
import symusic


def pedal_intervals(score: symusic.Score) -> np.ndarray:
    """Sustain-pedal down intervals of all non-drum tracks, [k, 2] (start, end) in the score's
    time unit, merged where they overlap."""
    spans = []
    for track in score.tracks:
        if track.is_drum or len(track.pedals) == 0:
            continue
        arr = track.pedals.numpy()
        spans.append(np.stack([arr["time"], arr["time"] + arr["duration"]], axis=1))
    if not spans:
        return np.zeros((0, 2), np.float64)
    iv = np.concatenate(spans).astype(np.float64)
    iv = iv[np.argsort(iv[:, 0])]
    merged = [iv[0].copy()]
    for start, end in iv[1:]:
        if start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append(np.array([start, end]))
    return np.asarray(merged)


def folded_ends(onset, end, pitch, pedals: np.ndarray) -> np.ndarray:
    """Note ends with the sustain pedal folded in.

    A note whose key is released while the pedal is down ends at the pedal's release, but no later
    than the next onset of the same pitch (a re-struck key cuts the sounding note). `pedals` is
    [k, 2] sorted, non-overlapping (start, end); all times in one unit. Returns [n].
    """
    onset, end, pitch = (np.asarray(a) for a in (onset, end, pitch))
    out = np.asarray(end, np.float64).copy()
    if len(pedals):
        k = np.searchsorted(pedals[:, 0], out, side="right") - 1  # last pedal starting <= end
        ok = k >= 0
        held = ok & (out < pedals[np.maximum(k, 0), 1])
        out[held] = pedals[k[held], 1]
    order = np.lexsort((onset, pitch))  # by pitch, then onset
    p, o = pitch[order], onset[order]
    nxt = np.full(len(o), np.inf)
    same = p[1:] == p[:-1]
    nxt[:-1][same] = o[1:][same]
    cut = np.empty(len(o))
    cut[order] = nxt
    return np.maximum(np.minimum(out, cut), np.asarray(end, np.float64))  # never shortened


def fold_pedal(score: symusic.Score) -> symusic.Score:
    """A copy of `score` whose note offs are moved to the sustain pedal's release, pedals removed.

    This is "pedal folded into durations": a tokenizer without pedal tokens then keeps how long
    each note sounds, at the price of the key-release time.
    """
    out = score.copy()
    pedals = pedal_intervals(out)
    for track in out.tracks:
        if len(track.notes) == 0:
            track.pedals.clear()
            continue
        arr = track.notes.numpy()
        ends = folded_ends(arr["time"], arr["time"] + arr["duration"], arr["pitch"], pedals)
        for note, e in zip(track.notes, ends, strict=True):
            note.duration = int(round(e)) - note.time
        track.pedals.clear()
    return out
