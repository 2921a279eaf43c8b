"""The studio's player: a piece's piano roll drawn in the browser (SVG), with the chord names
of each bar, a marker where the prompt ends and a playhead that follows the piece's audio.

The roll is drawn in seconds, so that the page's script (`PLAYHEAD_JS`) moves the playhead to
the audio player's `currentTime` with no tempo map of its own; bar lines and chord names are
placed through the score's tempo map. Parts are coloured by role (`ROLE_COLOURS`): the hook a
melody track or a form control fills by naming a track's role (`Roll.roles`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import symusic

WIDTH = 1200  # the drawing's own units; the page scales it to its width, keeping this shape
HEIGHT = 400
HEADER = 34  # the strip over the roll that holds the chord names
ROLE_COLOURS = {"piano": "#4f6bed", "drums": "#9a9a9a", "bass": "#2e9e6b", "melody": "#e0663a"}


@dataclass
class Roll:
    """What a player draws: notes (start s, end s, pitch, role), bar lines (s) with their
    chord names, where the prompt ends (s; None from scratch) and the audio it follows."""

    notes: list[tuple[float, float, int, str]]
    bars: list[float]
    chords: list[str] = field(default_factory=list)
    prompt_end: float | None = None
    seconds: float = 0.0
    roles: dict[str, str] = field(default_factory=dict)  # role -> colour, beyond ROLE_COLOURS


def seconds_of(score: symusic.Score, quarters: list[float]) -> list[float]:
    """Quarter-note times as seconds through the score's tempo map (120 qpm before any)."""
    ticks = score.ticks_per_quarter
    tempos = sorted((t.time / ticks, t.qpm) for t in score.tempos) or [(0.0, 120.0)]
    if tempos[0][0] > 0:
        tempos.insert(0, (0.0, 120.0))
    out = []
    for q in quarters:
        seconds, last_q, qpm = 0.0, 0.0, tempos[0][1]
        for start, tempo in tempos[1:]:
            if start >= q:
                break
            seconds += (start - last_q) * 60.0 / qpm
            last_q, qpm = start, tempo
        out.append(seconds + (q - last_q) * 60.0 / qpm)
    return out


def roll_of(
    score: symusic.Score,
    chords: list[str] | None = None,
    prompt_quarters: float | None = None,
    beats_per_bar: int = 4,
) -> Roll:
    """A score's roll: every note, a bar line every `beats_per_bar` quarters, `chords` (one
    label per bar, '' for none) and the prompt's end (in quarters)."""
    timed = score.to("second")
    notes = [
        (n.time, n.time + n.duration, n.pitch, _role(t)) for t in timed.tracks for n in t.notes
    ]
    quarter = score.to("quarter")
    last = max((n.time for t in quarter.tracks for n in t.notes), default=0.0)
    count = int(last // beats_per_bar) + 1  # the bars that notes begin in (a held note is cut)
    bars = seconds_of(score, [k * beats_per_bar for k in range(count + 1)])
    prompt_end = None if prompt_quarters is None else seconds_of(score, [prompt_quarters])[0]
    return Roll(notes, bars, list(chords or []), prompt_end, bars[-1])


def _role(track: symusic.Track) -> str:
    """A track's part: drums, bass (by its General MIDI program or name), else piano."""
    if track.is_drum:
        return "drums"
    if 32 <= track.program <= 39 or "bass" in track.name.lower():
        return "bass"
    return "melody" if "melody" in track.name.lower() else "piano"


def svg(roll: Roll, audio_id: str) -> str:
    """The roll as an SVG in a box the page's script finds (`.mg-roll`, `data-audio`: the
    elem_id of the audio player it follows, `data-seconds`: the length drawn)."""
    total = max(roll.seconds, 1e-3)
    x = lambda s: round(s / total * WIDTH, 2)  # noqa: E731
    pitches = [p for _, _, p, _ in roll.notes] or [60]
    low, high = min(pitches) - 2, max(pitches) + 2
    row = (HEIGHT - HEADER) / max(high - low, 1)
    y = lambda p: round(HEADER + (high - p) * row, 2)  # noqa: E731
    colours = {**ROLE_COLOURS, **roll.roles}
    parts = [f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" class="mg-bg"/>']
    notes = [n for n in roll.notes if n[0] < total]
    for k, start in enumerate(roll.bars):
        parts.append(f'<line x1="{x(start)}" x2="{x(start)}" y1="0" y2="{HEIGHT}" class="mg-bar"/>')
        name = roll.chords[k] if k < len(roll.chords) else ""
        if name and k < len(roll.bars) - 1:
            parts.append(
                f'<text x="{x(start) + 6}" y="25" class="mg-chord">{html.escape(name)}</text>'
            )
    for a, b, p, role in notes:
        wide = max(x(min(b, total)) - x(a), 1.5)
        parts.append(
            f'<rect x="{x(a)}" y="{y(p) - row / 2:.2f}" width="{wide}" '
            f'height="{max(row, 1.5):.2f}" fill="{colours.get(role, colours["piano"])}" '
            f'class="mg-note mg-{role}"/>'
        )
    if roll.prompt_end is not None:
        px = x(roll.prompt_end)
        parts.append(f'<rect x="0" y="0" width="{px}" height="{HEIGHT}" class="mg-prompt"/>')
        parts.append(f'<line x1="{px}" x2="{px}" y1="0" y2="{HEIGHT}" class="mg-prompt-end"/>')
        parts.append(f'<text x="{px + 6}" y="{HEIGHT - 10}" class="mg-chord">prompt ends</text>')
    parts.append(f'<line x1="0" x2="0" y1="0" y2="{HEIGHT}" class="mg-playhead"/>')
    return (
        f'<div class="mg-roll" data-audio="{html.escape(audio_id)}" data-seconds="{total:.3f}">'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="piano roll">'
        f"{''.join(parts)}</svg>{chord_line(roll)}</div>"
    )


def chord_line(roll: Roll) -> str:
    """The chords bar by bar under the roll, as text (readable on a phone, where the roll's
    own labels are small)."""
    cells = [
        f"<span><b>{k + 1}</b> {html.escape(name)}</span>"
        for k, name in enumerate(roll.chords)
        if name
    ]
    return f'<div class="mg-chords">{" ".join(cells)}</div>' if cells else ""


# The page's style for the roll and the script that moves every roll's playhead to its audio
# player's time (a frame loop: rolls come and go as results are shown).
PLAYER_CSS = """
.mg-roll svg { width: 100%; height: auto; display: block; border-radius: 6px; }
.mg-bg { fill: #fbfbfd; }
.mg-bar { stroke: #d0d3dc; stroke-width: 1.5; }
.mg-chord { font: 24px sans-serif; fill: #333; }
.mg-chords { font-size: 13px; margin-top: 4px; display: flex; flex-wrap: wrap; gap: 4px 12px; }
.mg-prompt { fill: #000; opacity: 0.06; }
.mg-prompt-end { stroke: #e0663a; stroke-width: 3; stroke-dasharray: 6 4; }
.mg-playhead { stroke: #d62828; stroke-width: 3; }
"""

PLAYHEAD_JS = """
<script>
(() => {
  const tick = () => {
    document.querySelectorAll('.mg-roll').forEach((box) => {
      const audio = document.querySelector('#' + box.dataset.audio + ' audio');
      const head = box.querySelector('.mg-playhead');
      if (!audio || !head) return;
      const seconds = parseFloat(box.dataset.seconds) || 1;
      const x = Math.min(audio.currentTime / seconds, 1) * 1200;
      head.setAttribute('x1', x); head.setAttribute('x2', x);
    });
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
</script>
"""
