"""`musicgen evaluate music`: descriptive statistics of a folder of MIDI files (music.json/png)."""

from __future__ import annotations

from pathlib import Path

from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.evaluate.band import band_summary, folder_band
from musicgen.evaluate.common import midi_files, write_json
from musicgen.measures.metrics import (
    STATISTICS,
    grammar_error_rate,
    load_notes,
    music_statistics,
    summarize,
)


def folder_statistics(
    folder: str | Path, tokenizer=None, bars: int | None = None
) -> tuple[list[dict], list[dict]]:
    """Per-file statistics (and grammar error rate with a tokenizer); unreadable files skipped.
    With `bars`, of each file's first `bars` bars only (`Notes.first_bars`)."""
    rows, skipped = [], []
    for path in tqdm(midi_files(folder), desc=Path(folder).name, leave=False):
        try:
            notes = load_notes(path)
            notes = notes if bars is None else notes.first_bars(bars)
            row = {"path": str(path), "notes": len(notes), **music_statistics(notes)}
            if tokenizer is not None:
                row["grammar_error_rate"] = grammar_error_rate(
                    tokenizer.encode(path), tokenizer.grammar()
                )
        except MusicgenError as exc:
            skipped.append({"path": str(path), "reason": str(exc)})
            continue
        rows.append(row)
    return rows, skipped


def band_results(
    midi_dir: str | Path, reference: str | Path | None, reference_bars: int | None
) -> dict:
    """The band measure's summary and rows for a folder and, when given, its reference folder
    (read as consecutive `reference_bars`-bar pieces when that is given)."""
    rows, skipped = folder_band(midi_dir)
    out = {"generated": band_summary(rows), "files": rows, "skipped": skipped}
    if reference is not None:
        ref_rows, ref_skipped = folder_band(reference, reference_bars, reference_bars is not None)
        out["reference"] = band_summary(ref_rows)
        out["reference_files"] = ref_rows
        out["reference_skipped"] = ref_skipped
    return out


def evaluate_music(
    midi_dir: str | Path,
    out: str | Path,
    reference: str | Path | None = None,
    tokenizer=None,
    reference_bars: int | None = None,
    band: bool = False,
) -> dict:
    """Statistics of a folder of MIDI files, beside those of a reference folder; music.json/png.

    `reference_bars` compares with each reference song's first N bars (from its first note):
    a whole song repeats its chorus, a 16-bar piece has no chorus to repeat. `band` adds the
    band measure (`measures.band`) of both folders under "band"."""
    from musicgen.evaluate.plots import plot_music_stats

    names = list(STATISTICS) + (["grammar_error_rate"] if tokenizer is not None else [])
    gen_rows, gen_skipped = folder_statistics(midi_dir, tokenizer)
    if not gen_rows:
        raise MusicgenError(f"{midi_dir}: no readable MIDI file")
    columns = {n: [r[n] for r in gen_rows] for n in names}
    results = {
        "midi_dir": str(midi_dir),
        "generated": {n: summarize(columns[n]) for n in names},
        "files": gen_rows,
        "skipped": gen_skipped,
    }
    ref_columns = None
    if reference is not None:
        ref_rows, ref_skipped = folder_statistics(reference, tokenizer, reference_bars)
        ref_columns = {n: [r[n] for r in ref_rows] for n in names}
        results["reference_dir"] = str(reference)
        results["reference_bars"] = reference_bars  # None: whole songs
        results["reference"] = {n: summarize(ref_columns[n]) for n in names}
        results["reference_files"] = ref_rows
        results["reference_skipped"] = ref_skipped
    if band:
        results["band"] = band_results(midi_dir, reference, reference_bars)
    out = Path(out)
    write_json(out / "music.json", results)
    plot_music_stats(columns, ref_columns, out / "music.png")
    return results
