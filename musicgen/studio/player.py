"""The studio's player: a piece's piano roll drawn in the browser (SVG) as a songwriter reads
it: its sections as named bands (Intro, Verse, Chorus...), one chord per bar, a pitch axis, a
legend of its parts, where the prompt ends, a playhead that follows the piece's audio and a
click that moves the audio there; its key and tempo go in the player's title (`meta`).

The roll is drawn in seconds, so that the page's script (`PLAYHEAD_JS`) moves the playhead to
the audio player's `currentTime` (and a click to a time) with no tempo map of its own; bar
lines, sections and chord names are placed through the score's tempo map. Parts are coloured
by role (`ROLE_COLOURS`): the hook a melody track or a form control fills by naming a track's
role (`Roll.roles`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import symusic

from musicgen.studio.words import SECTIONS as _NAMES
from musicgen.studio.words import section_name
from musicgen.tokenizers.form import read_markers

WIDTH = 1200  # the drawing's own units; the page scales it to its width, keeping this shape
HEIGHT = 400
AXIS = 44  # the strip left of the roll that holds the pitch axis
BANDS = 28  # the strip over the roll that holds the sections
HEADER = 60  # the strips over the roll: sections, then chord names
MIN_CHORD_PX = 12.0  # the smallest chord name drawn over the roll (drawing units)
CHAR_WIDTH = 0.62  # a sans-serif character's width, a share of its font size
ROLE_COLOURS = {"piano": "#4f6bed", "drums": "#9a9a9a", "bass": "#2e9e6b", "melody": "#e0663a"}
ROLE_NAMES = {"melody": "Melody", "piano": "Piano", "bass": "Bass", "drums": "Drums"}
BAND_COLOURS = {"i": "#eceff4", "o": "#eceff4", "A": "#dbe7fb", "B": "#fde2cf", "C": "#dcf2e3",
                "b": "#f1e6fa"}  # fmt: skip
PITCH_NAMES = ("C", "C#", "D", "Eb", "E", "F", "F#", "G", "Ab", "A", "Bb", "B")


@dataclass
class Roll:
    """What a player draws: notes (start s, end s, pitch, role), bar lines (s) with their
    chord names (one a bar), the sections (start s, end s, name), where the prompt ends (s;
    None from scratch), the audio's length, the key and the tempo (qpm) it names."""

    notes: list[tuple[float, float, int, str]]
    bars: list[float]
    chords: list[str] = field(default_factory=list)
    prompt_end: float | None = None
    seconds: float = 0.0
    roles: dict[str, str] = field(default_factory=dict)  # role -> colour, beyond ROLE_COLOURS
    sections: list[tuple[float, float, str]] = field(default_factory=list)
    key: str = ""
    tempo: float | None = None


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
    label per bar, '' for none; the last carries on to the end, as a chord token is written
    only where the chord changes), its sections (its phrase markers) and tempo, and the
    prompt's end (in quarters)."""
    timed = score.to("second")
    notes = [
        (n.time, n.time + n.duration, n.pitch, _role(t)) for t in timed.tracks for n in t.notes
    ]
    quarter = score.to("quarter")
    last = max((n.time for t in quarter.tracks for n in t.notes), default=0.0)
    count = int(last // beats_per_bar) + 1  # the bars that notes begin in (a held note is cut)
    bars = seconds_of(score, [k * beats_per_bar for k in range(count + 1)])
    prompt_end = None if prompt_quarters is None else seconds_of(score, [prompt_quarters])[0]
    chords = list(chords or [])[:count]
    chords += chords[-1:] * (count - len(chords))
    roll = Roll(notes, bars, chords, prompt_end, bars[-1])
    roll.sections = _sections(score, count, beats_per_bar)
    roll.tempo = round(score.tempos[0].qpm) if len(score.tempos) else None
    return roll


def _sections(score: symusic.Score, count: int, beats_per_bar: int) -> list:
    """The score's phrases (its markers, `form.add_markers`) within its `count` bars, in
    seconds, by name."""
    out = []
    for s in read_markers(score):
        first, end = max(s.bar, 0), min(s.bar + s.bars, count)
        if first < end:
            start, stop = seconds_of(score, [first * beats_per_bar, end * beats_per_bar])
            out.append((start, stop, section_name(s.label)))
    return out


def meta(roll: Roll) -> str:
    """The key and tempo the player's title names ('A minor · 100 bpm')."""
    tempo = f"{roll.tempo:g} bpm" if roll.tempo else ""
    return " · ".join(x for x in (roll.key, tempo) if x)


def _role(track: symusic.Track) -> str:
    """A track's part: drums, bass (by its General MIDI program or name), else piano."""
    if track.is_drum:
        return "drums"
    if 32 <= track.program <= 39 or "bass" in track.name.lower():
        return "bass"
    return "melody" if "melody" in track.name.lower() else "piano"


def svg(roll: Roll, audio_id: str) -> str:
    """The roll as an SVG in a box the page's script finds (`.mg-roll`, `data-audio`: the
    elem_id of the audio player it follows, `data-seconds`: the length drawn, `data-left`:
    where the time axis starts, a share of the width), with its legend and chords under it."""
    total = max(roll.seconds, 1e-3)
    x = lambda s: round(AXIS + s / total * (WIDTH - AXIS), 2)  # noqa: E731
    pitches = [p for _, _, p, _ in roll.notes] or [60]
    low, high = min(pitches) - 2, max(pitches) + 2
    row = (HEIGHT - HEADER) / max(high - low, 1)
    y = lambda p: round(HEADER + (high - p) * row, 2)  # noqa: E731
    colours = {**ROLE_COLOURS, **roll.roles}
    parts = [f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" class="mg-bg"/>']
    parts += _bands(roll, x) + _axis(low, high, y) + _bar_lines(roll, x)
    for a, b, p, role in (n for n in roll.notes if n[0] < total):
        wide = max(x(min(b, total)) - x(a), 1.5)
        parts.append(
            f'<rect x="{x(a)}" y="{y(p) - row / 2:.2f}" width="{wide}" '
            f'height="{max(row, 1.5):.2f}" fill="{colours.get(role, colours["piano"])}" '
            f'class="mg-note mg-{role}"/>'
        )
    if roll.prompt_end is not None:
        px = x(roll.prompt_end)
        parts.append(f'<rect x="{AXIS}" y="0" width="{px - AXIS}" height="{HEIGHT}" '
                     'class="mg-prompt"/>')  # fmt: skip
        parts.append(f'<line x1="{px}" x2="{px}" y1="0" y2="{HEIGHT}" class="mg-prompt-end"/>')
        parts.append(f'<text x="{px + 6}" y="{HEIGHT - 10}" class="mg-label">new bars start</text>')
    parts.append(f'<line x1="{AXIS}" x2="{AXIS}" y1="0" y2="{HEIGHT}" class="mg-playhead"/>')
    return (
        f'<div class="mg-roll" data-audio="{html.escape(audio_id)}" data-seconds="{total:.3f}" '
        f'data-left="{AXIS / WIDTH:.4f}" title="click to play from there">'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="piano roll">'
        f"{''.join(parts)}</svg>{legend(roll)}{chord_line(roll)}</div>"
    )


def _bands(roll: Roll, x) -> list[str]:
    """The sections as named bands over the roll, with a faint shade down through it."""
    out = []
    for start, end, name in roll.sections:
        letter = next((k for k, v in _NAMES.items() if v == name), "")
        fill = BAND_COLOURS.get(letter, "#eef0f3")
        out.append(f'<rect x="{x(start)}" y="0" width="{x(end) - x(start)}" height="{BANDS}" '
                   f'fill="{fill}" class="mg-band"/>')  # fmt: skip
        out.append(f'<text x="{x(start) + 6}" y="{BANDS - 8}" class="mg-section">'
                   f"{html.escape(name)}</text>")  # fmt: skip
    return out


def _axis(low: int, high: int, y) -> list[str]:
    """The pitch axis: each C named (C4: middle C) with a faint line across the roll."""
    out = [f'<rect x="0" y="{HEADER}" width="{AXIS}" height="{HEIGHT - HEADER}" class="mg-axis"/>']
    for p in range(low, high + 1):
        if p % 12 == 0:
            name = f"{PITCH_NAMES[p % 12]}{p // 12 - 1}"
            out.append(f'<line x1="{AXIS}" x2="{WIDTH}" y1="{y(p)}" y2="{y(p)}" class="mg-c"/>')
            out.append(f'<text x="4" y="{y(p) + 6}" class="mg-pitch">{name}</text>')
    return out


def _bar_lines(roll: Roll, x) -> list[str]:
    """Bar lines, and each bar's chord in the strip over the roll, sized to its bar (at least
    `MIN_CHORD_PX`); a chord that would run into the one before is left to the line under the
    roll, which names every bar's, so two names never run together ("AmC")."""
    out, free = [], 0.0
    widest = max((len(c) for c in roll.chords), default=1) or 1
    for k, start in enumerate(roll.bars):
        out.append(f'<line x1="{x(start)}" x2="{x(start)}" y1="{BANDS}" y2="{HEIGHT}" '
                   'class="mg-bar"/>')  # fmt: skip
        name = roll.chords[k] if k < len(roll.chords) and k < len(roll.bars) - 1 else ""
        if not name or x(start) + 3 < free:
            continue
        room = x(roll.bars[k + 1]) - x(start) - 6
        size = max(min(22.0, room / (CHAR_WIDTH * widest)), MIN_CHORD_PX)
        free = x(start) + 3 + CHAR_WIDTH * size * len(name) + 4
        out.append(f'<text x="{x(start) + 3}" y="{HEADER - 10}" class="mg-chord" '
                   f'font-size="{size:.1f}">{html.escape(name)}</text>')  # fmt: skip
    return out


def legend(roll: Roll) -> str:
    """The parts drawn, each with its colour."""
    colours = {**ROLE_COLOURS, **roll.roles}
    roles = sorted({r for *_, r in roll.notes}, key=lambda r: list(ROLE_NAMES).index(r)
                   if r in ROLE_NAMES else len(ROLE_NAMES))  # fmt: skip
    items = [
        f'<span><i style="background:{colours.get(r, colours["piano"])}"></i>'
        f"{html.escape(ROLE_NAMES.get(r, r.title()))}</span>"
        for r in roles
    ]
    return f'<div class="mg-legend">{"".join(items)}</div>' if items else ""


def chord_line(roll: Roll) -> str:
    """The chords bar by bar under the roll, as text (readable on a phone, where the roll's
    own labels are small), each section's name where it begins."""
    starts = {round(s, 3): name for s, _, name in roll.sections}
    cells = []
    for k, name in enumerate(roll.chords):
        section = starts.get(round(roll.bars[k], 3)) if k < len(roll.bars) else None
        if section:
            cells.append(f'<span class="mg-at">{html.escape(section)}</span>')
        if name:
            cells.append(f"<span><b>{k + 1}</b> {html.escape(name)}</span>")
    return f'<div class="mg-chords">{" ".join(cells)}</div>' if cells else ""


# The page's style for the roll and the script that moves every roll's playhead to its audio
# player's time (a frame loop: rolls come and go as results are shown).
PLAYER_CSS = """
.mg-roll svg { width: 100%; height: auto; display: block; border-radius: 6px; cursor: pointer; }
.mg-bg { fill: #fbfbfd; }
.mg-bar { stroke: #d0d3dc; stroke-width: 1.5; }
.mg-c { stroke: #c4c8d2; stroke-width: 1; stroke-dasharray: 2 4; }
.mg-axis { fill: #f1f2f6; }
.mg-chord { font-family: sans-serif; font-weight: 600; fill: #333; }
.mg-section { font: 600 17px sans-serif; fill: #333; }
.mg-pitch, .mg-label { font: 16px sans-serif; fill: #555; }
.mg-chords { font-size: 13px; margin-top: 4px; display: flex; flex-wrap: wrap; gap: 4px 12px; }
.mg-at { font-weight: 600; color: #4f6bed; }
.mg-legend { font-size: 12px; margin-top: 4px; display: flex; gap: 12px; }
.mg-legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px;
  border-radius: 2px; }
.mg-prompt { fill: #000; opacity: 0.06; }
.mg-prompt-end { stroke: #e0663a; stroke-width: 3; stroke-dasharray: 6 4; }
.mg-playhead { stroke: #d62828; stroke-width: 3; }
"""

# Every roll's playhead follows its audio player's time (a frame loop: rolls come and go as
# results are shown); a click on a roll moves its audio there.
PLAYHEAD_JS = """
<script>
(() => {
  const audioOf = (box) => document.querySelector('#' + box.dataset.audio + ' audio');
  const tick = () => {
    document.querySelectorAll('.mg-roll').forEach((box) => {
      const audio = audioOf(box);
      const head = box.querySelector('.mg-playhead');
      if (!audio || !head) return;
      const seconds = parseFloat(box.dataset.seconds) || 1;
      const left = parseFloat(box.dataset.left) || 0;
      const x = (left + Math.min(audio.currentTime / seconds, 1) * (1 - left)) * 1200;
      head.setAttribute('x1', x); head.setAttribute('x2', x);
    });
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  document.addEventListener('click', (event) => {
    const svg = event.target.closest && event.target.closest('.mg-roll svg');
    if (!svg) return;
    const box = svg.closest('.mg-roll');
    const audio = audioOf(box);
    if (!audio) return;
    const rect = svg.getBoundingClientRect();
    const left = parseFloat(box.dataset.left) || 0;
    const share = ((event.clientX - rect.left) / rect.width - left) / (1 - left);
    const seconds = parseFloat(box.dataset.seconds) || 0;
    audio.currentTime = Math.max(0, Math.min(share, 1)) * seconds;
  });
})();
</script>
"""
