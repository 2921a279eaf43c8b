"""The melody's legato (`GenerationRequest.legato`, on by default): a written melody note is held
to the next melody note when a sixteenth's rest or less parts them, within a beat.

A sung line joins its notes; the model draws its melody more detached than the songs, and in
each sixteenth's rest the piano's broken chord becomes the top voice for a moment (measured:
docs/generation.md, "The melody line"). This module is the legato's one place, an edit of the
written score that `Model.music` applies. The rule changes lengths only, never an onset or a
pitch, and only the notes the model wrote (a prompt's notes stay as they are); the ids keep the
lengths the model drew. A vocabulary without a melody voice writes no Melody track and is left
as it is.
"""

from __future__ import annotations

import symusic

from musicgen.measures.song import MELODY_NAME

REST_BEATS = 0.25  # the longest rest a held note closes: a sixteenth
SPAN_BEATS = 1.0  # the longest onset-to-onset distance a held note may reach


def hold_melody(score: symusic.Score, start_tick: int = 0) -> symusic.Score:
    """`score` with the notes of its Melody tracks that start at `start_tick` or later held to
    the next melody onset where at most `REST_BEATS` of rest parts them and that onset lies
    within `SPAN_BEATS` of theirs (in place; the score is returned). Notes in ticks."""
    tpq = score.ticks_per_quarter
    rest, span = round(REST_BEATS * tpq), round(SPAN_BEATS * tpq)
    for track in score.tracks:
        if track.is_drum or track.name.strip().lower() != MELODY_NAME:
            continue
        onsets = sorted({n.time for n in track.notes})
        following = dict(zip(onsets[:-1], onsets[1:], strict=True))  # onset -> next onset
        for n in track.notes:  # views: a length set here is the track's
            nxt = following.get(n.time)
            if n.time < start_tick or nxt is None:
                continue
            if 0 < nxt - (n.time + n.duration) <= rest and nxt - n.time <= span:
                n.duration = nxt - n.time
    return score
