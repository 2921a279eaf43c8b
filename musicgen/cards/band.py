"""The groove card's band table: a music.json's band measure (`musicgen evaluate music --band`,
`musicgen.measures.band`) beside the test songs', every number from that file."""

from __future__ import annotations

BAND_ROWS = (
    ("drum_pitches", "drum pitches", "{:.1f}"),
    ("bass_bars", "bars where the bass sounds", "pct"),
    ("third_bars", "bars where the piano sounds", "pct"),
    ("longest_note_bars", "longest bass or piano note (bars)", "{:.2f}"),
    ("drum_hits_per_bar", "drum hits per bar", "{:.1f}"),
)


def _band_cell(stats: dict, form: str) -> str:
    if form == "pct":
        return f"{100 * stats['mean']:.0f} % ± {100 * stats['std']:.0f} %"
    return f"{form.format(stats['mean'])} ± {form.format(stats['std'])}"


def band_section(d: dict, sampling: str) -> list[str]:
    """The band measure of a music.json (`musicgen evaluate music --band`): the pieces against
    the test songs read as pieces of the same length."""
    g, r = d["generated"], d["reference"]
    lines = [
        "## Does it play as a band? (from scratch)",
        "",
        f"{g['pieces']} pieces from scratch ({sampling}, grammar on) against the test songs "
        f"read as {r['pieces']} pieces of the same length (`musicgen evaluate music --band`; "
        "mean ± std over pieces). A piece plays as a band with drums on >= 3 pitches, bass and "
        "piano in >= 75 % of its bars and no note over 2 bars.",
        "",
        "| measure | generated | test songs |",
        "|---|---:|---:|",
    ]
    for key, label, form in BAND_ROWS:
        lines.append(
            f"| {label} | {_band_cell(g['measures'][key], form)} | "
            f"{_band_cell(r['measures'][key], form)} |"
        )
    share = f"| plays as a band | {100 * g['band_share']:.0f} % | {100 * r['band_share']:.1f} % |"
    return lines + [share, ""]
