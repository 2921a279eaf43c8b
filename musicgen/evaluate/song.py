"""`musicgen evaluate form --whole-song`: whole songs with a given form, beside the real ones.

Each validation song of POP909 that aligns with its phrase annotation (`data.pop909_structure`)
is one case: its form (from its first annotated phrase, optionally cut at `max_bars`), its notes
through the model's tokenizer (melody and accompaniment apart, its annotated chords as Chord
tokens), and its first `prompt_bars` bars as a prompt. The model writes, per sampling setting
(the model's defaults and the bar-copy rule off, `repeat=0`, unless given): the whole form from
scratch, and the form continuing the song's first bars; with `chords`, also the form from
scratch with the song's own chords forced; with `densities` (a model with density tokens), the
form from scratch with each phrase at the song's own density level (`A8@3`). Every piece and
the real song are scored on the same sections with `measures.song`; per measure, the spread
over songs and each run minus the real songs per song with a bootstrap 95 % CI
(`measures.form.paired_difference`). Written: song.json, song.md (the table) and every piece as
samples/<run>/<song>.mid.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import symusic
from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.evaluate.common import write_json
from musicgen.evaluate.form import sampling_label
from musicgen.evaluate.song_table import markdown_table
from musicgen.generation.rules import BarEcho
from musicgen.measures import form as fm
from musicgen.measures.song import MEASURES, QUALITIES, Chord, Song, song_from_score, song_measures
from musicgen.tokenizers.form import Phrase, Section, form_text, place

PROMPT_BARS = 2
MAX_SONGS = 4  # the default: 4 songs x 4 runs of ~60 bars are minutes on a CPU
CHORD_HOLD_BARS = 2  # an annotated chord holds until the next one, at most this long
SEEDS_PER_RUN = 1000  # song k: seed SEEDS_PER_RUN * seed + k (disjoint across seeds to 1000 songs)


@dataclass
class SongCase:
    """One validation song: its form from bar 0, its ids and notes from there, its chords."""

    name: str
    phrases: list[Phrase]  # the form, from the song's first annotated phrase
    ids: list[int]  # the whole song as the model's tokenizer reads it
    first_bar: int  # the song's bar (in `ids`) where the form begins
    score: symusic.Score  # the real song's bars of the form, bar 0 = first_bar
    chords: list[Chord]  # its annotated chords (beats from first_bar)

    @property
    def sections(self) -> list[Section]:
        return place(self.phrases)

    @property
    def real(self) -> Song:
        return song_from_score(self.score, self.sections)


def cut_form(phrases: Sequence[Phrase], max_bars: int | None) -> list[Phrase]:
    """The phrases within the first `max_bars` bars (the last one cut short); all for None."""
    if max_bars is None:
        return list(phrases)
    out, left = [], max_bars
    for p in phrases:
        if left < 1:
            break
        out.append(Phrase(p.label, min(p.bars, left), p.density))
        left -= p.bars
    return out


def encode_aligned(tokenizer, path: Path, folder: Path):
    """(ids, sections) of a POP909 song on its annotated bars (`align_song`), its
    chord_midi.txt moved with it, as `prepare --structure` reads it; None if it does not
    align."""
    from musicgen.data.pop909_structure import align_song, delay_seconds
    from musicgen.tokenizers.chords import CHORD_FILE, ChordSpan, read_chord_file

    score = tokenizer.load_score(path)  # size and length limits checked
    song = align_song(score, folder)
    if not song.aligned or not song.sections:
        return None
    chords = None
    if (path.parent / CHORD_FILE).is_file():
        dt = delay_seconds(score, song.delay)
        spans = read_chord_file(path.parent / CHORD_FILE)
        chords = [ChordSpan(c.start + dt, c.end + dt, c.label) for c in spans]
    return tokenizer.encode(song.score, chords=chords, sections=song.sections), song.sections


def chords_from_ids(tokenizer, ids: Sequence[int], first_bar: int, bars: int) -> list[Chord]:
    """The Chord tokens of `ids` as chords from bar `first_bar` on (beats from it), each
    holding until the next (at most `CHORD_HOLD_BARS` bars), within `bars` bars."""
    from musicgen.generation.controls.progression import chord_events

    per_bar = tokenizer.time_tables().positions_per_bar
    starts = [
        ((bar - first_bar) * fm.BAR_BEATS + pos * fm.BAR_BEATS / per_bar, tok)
        for bar, pos, tok in chord_events(tokenizer, ids)
        if first_bar <= bar < first_bar + bars
    ]
    end = bars * fm.BAR_BEATS
    out = []
    for k, (start, tok) in enumerate(starts):
        stop = starts[k + 1][0] if k + 1 < len(starts) else end
        root, quality = tokenizer.tables.chord[tok]
        stop = min(stop, start + CHORD_HOLD_BARS * fm.BAR_BEATS, end)
        if quality in QUALITIES and stop > start:
            out.append(Chord(start, stop, int(root), quality))
    return out


def make_song_case(
    tokenizer, path: Path, folder: Path, max_bars: int | None, prompt_bars: int = PROMPT_BARS
) -> SongCase | str:
    """The case of one song, or why it has none (no alignment, a form no longer than the
    prompt)."""
    encoded = encode_aligned(tokenizer, path, folder)
    if encoded is None:
        return "does not align with its annotation"
    ids, sections = encoded
    first = sections[0].bar
    have = len(tokenizer.bar_starts(np.asarray(ids, dtype=np.int64))) - first
    density = {s.bar: s.density for s in tokenizer.sections(ids)}  # where the tokens write one
    phrases = cut_form([Phrase(s.label, s.bars, density.get(s.bar)) for s in sections], max_bars)
    phrases = cut_form(phrases, have)  # an annotation past the MIDI's last bar
    if sum(p.bars for p in phrases) <= prompt_bars:
        return f"fewer than {prompt_bars + 1} annotated bars"
    bars = sum(p.bars for p in phrases)
    score = window_score(tokenizer.decode(ids), first, bars)
    return SongCase(
        name=path.stem,
        phrases=phrases,
        ids=list(ids),
        first_bar=first,
        score=score,
        chords=chords_from_ids(tokenizer, ids, first, bars),
    )


def window_score(score: symusic.Score, first_bar: int, bars: int) -> symusic.Score:
    """Bars first_bar .. first_bar + bars - 1 of a 4/4 score, moved to start at time 0."""
    bar = 4 * score.ticks_per_quarter
    part = score.clip(first_bar * bar, (first_bar + bars) * bar, clip_end=False)
    return part.shift_time(-first_bar * bar) if first_bar else part


def song_cases(
    tokenizer, data: str | Path, structure: str | Path, split: str, max_songs: int | None,
    max_bars: int | None, prompt_bars: int = PROMPT_BARS,
) -> tuple[list[SongCase], list[dict]]:  # fmt: skip
    """The first `max_songs` songs of `split` in `data` (POP909: NNN/NNN.mid) with a folder in
    `structure` that align; and the skipped ones, with why."""
    from musicgen.evaluate.form import benchmark_songs

    if not Path(structure).is_dir():
        raise MusicgenError(f"{structure}: structure folder not found")
    cases, skipped = [], []
    for path in benchmark_songs(data, split):
        if max_songs is not None and len(cases) >= max_songs:
            break
        folder = Path(structure) / path.parent.name
        if not folder.is_dir():
            skipped.append({"song": path.stem, "reason": f"no folder in {structure}"})
            continue
        try:
            case = make_song_case(tokenizer, path, folder, max_bars, prompt_bars)
        except MusicgenError as exc:
            case = str(exc)
        if isinstance(case, str):
            skipped.append({"song": path.stem, "reason": case})
        else:
            cases.append(case)
    if not cases:
        raise MusicgenError(f"{data}: no song of split '{split}' aligns with {structure}")
    return cases, skipped


@dataclass(frozen=True)
class Run:
    """One way of writing each song: `mode` scratch or continue, sampling options, the song's
    chords or its phrases' densities forced."""

    mode: str
    sampling: dict
    chords: bool = False
    densities: bool = False

    @property
    def label(self) -> str:
        forced = (" chords" if self.chords else "") + (" densities" if self.densities else "")
        return f"{self.mode}{forced} {sampling_label(self.sampling)}"


def plan_runs(settings: Sequence[dict], chords: bool, densities: bool = False) -> list[Run]:
    """From scratch and continuing at every setting; with `chords` (`densities`), from scratch
    with the song's chords (its phrases' densities) forced too."""
    runs = [Run(mode, dict(s)) for mode in ("scratch", "continue") for s in settings]
    runs += [Run("scratch", dict(s), chords=True) for s in settings] if chords else []
    runs += [Run("scratch", dict(s), densities=True) for s in settings] if densities else []
    return runs


def progression(case: SongCase):
    """The song's annotated chords as a Progression from its form's bar 0 (not cycled)."""
    from musicgen.generation.controls.progression import Progression, Slot
    from musicgen.tokenizers.chords import HarteChord

    bars: list[list[Slot]] = [[] for _ in range(case.real.bars)]
    for c in case.chords:
        bar, onset = divmod(c.start, fm.BAR_BEATS)
        if bars[int(bar)] and bars[int(bar)][-1].onset == onset / fm.BAR_BEATS:
            continue
        chord = HarteChord(c.root, QUALITIES[c.quality][0], c.root)
        bars[int(bar)].append(Slot(onset / fm.BAR_BEATS, chord, f"{c.root}:{c.quality}"))
    return Progression(tuple(tuple(b) for b in bars), repeat=False, strict=False)


def write_song(model, case: SongCase, run: Run, seed: int, prompt_bars: int):
    """THE ONE PLACE the whole-song mode generates: the case's form, from scratch or after its
    first `prompt_bars` bars, through `Model.pieces` (one song a call: a form per request)."""
    from musicgen.generation.api.prompt import select_bars

    tok = model.tokenizer
    extra: dict = {}
    if run.mode == "continue":
        span = (case.first_bar, case.first_bar + prompt_bars)
        prompt = select_bars(tok, case.ids, prompt_bars=span, where=case.name)
        # the song's own phrase tokens out: the form's go in (a form cut by --max-bars)
        phrase = tok.phrase_mask()
        extra["prompt"] = replace(prompt, ids=[i for i in prompt.ids if not phrase[i]])
    if run.chords:
        extra["chords"] = progression(case)  # laid on the form's bars, as the CLI lays it
    phrases = case.phrases if run.densities else [replace(p, density=None) for p in case.phrases]
    pieces = model.pieces(1, form=form_text(phrases), seed=seed, **extra, **run.sampling)
    return next(iter(pieces))


def score_song(
    score, case: SongCase, prompt_bars: int, chords: Sequence[Chord] | None = None
) -> dict[str, float]:
    """Every measure of a whole song (a real one or a piece) on the case's sections;
    `chord_*` against the case's annotated chords."""
    from musicgen.measures.song import chord_agreement

    song = song_from_score(score, case.sections)
    out = song_measures(song, chords, prompt_bars)
    agreement = chord_agreement(song, case.chords)
    out.update(chord_agree=agreement["agree"], chord_tone_share=agreement["tone_share"])
    out["prompt_kept"] = prompt_kept(song, case.real, prompt_bars) if prompt_bars else np.nan
    return out


def prompt_kept(song: Song, real: Song, bars: int) -> float:
    """Share of the real song's notes in its first `bars` bars that the piece has there too,
    in the same voice (melody or accompaniment) at the same grid onset and pitch."""

    def keys(s: Song) -> set[tuple[int, int, int]]:
        out = set()
        for voice, notes in enumerate((s.melody, s.accompaniment)):
            steps = fm.onset_steps(notes)
            inside = steps < bars * fm.BAR_BEATS * fm.ONSET_STEPS_PER_BEAT
            out |= {
                (voice, int(t), int(p))
                for t, p in zip(steps[inside], notes.pitch[inside], strict=True)
            }
        return out

    want = keys(real)
    return len(want & keys(song)) / len(want) if want else float("nan")


def piece_seeds(seed: int, songs: int) -> list[int]:
    """The seed of each song's piece: its own per song (one seed for every song would give
    songs whose forms open alike the same opening bars, and so the same texture), the same
    in every run (the copy rule on and off are paired piece by piece)."""
    return [SEEDS_PER_RUN * seed + k for k in range(songs)]


def score_run(model, cases: Sequence[SongCase], run: Run, seed: int, prompt_bars: int,
              folder: Path) -> dict:  # fmt: skip
    """Every case written by `run` (saved as folder/<song>.mid) and measured; the measures as
    columns over the songs, with each piece's length in bars and how its sampling ended."""
    rows, stops = [], []
    held = prompt_bars if run.mode == "continue" else 0
    seeds = piece_seeds(seed, len(cases))
    for case, piece_seed in tqdm(list(zip(cases, seeds, strict=True)), desc=run.label, leave=False):
        piece = write_song(model, case, run, piece_seed, prompt_bars)
        piece.save(folder / f"{case.name}.mid")
        rows.append(score_song(piece.score, case, held))
        stops.append(piece.stop)
    return {"measures": fm.columns(rows, MEASURES), "stops": stops}


def summarize(
    real: dict[str, list[float]], runs: dict[str, dict], pairs: Sequence[tuple[str, str]], seed: int
) -> dict:
    """Spread per measure of the real songs and of each run; each run minus the real songs per
    song (bootstrap CI); and each of `pairs` of runs (first minus second), paired by song."""
    out: dict = {"real": {"spread": {m: fm.spread(v) for m, v in real.items()}}, "runs": {}}
    for label, res in runs.items():
        cols = res["measures"]
        out["runs"][label] = {
            "spread": {m: fm.spread(v) for m, v in cols.items()},
            "minus_real": {m: fm.paired_difference(v, real[m], seed=seed) for m, v in cols.items()},
        }
    out["pairs"] = {
        f"{a} - {b}": {
            m: fm.paired_difference(runs[a]["measures"][m], runs[b]["measures"][m], seed=seed)
            for m in MEASURES
        }
        for a, b in pairs
    }
    return out


def run_pairs(runs: Sequence[Run]) -> list[tuple[str, str]]:
    """The runs that differ only in sampling (the copy rule on and off), as label pairs."""
    return [
        (a.label, b.label)
        for a, b in itertools.combinations(runs, 2)
        if (a.mode, a.chords, a.densities) == (b.mode, b.chords, b.densities)
    ]


def evaluate_songs(
    checkpoint: str | Path,
    data: str | Path,
    structure: str | Path,
    out: str | Path,
    split: str = "validation",
    max_songs: int | None = MAX_SONGS,
    settings: Sequence[dict] = ({}, {BarEcho.option.name: 0.0}),
    seed: int = 0,
    device: str = "cpu",
    prompt_bars: int = PROMPT_BARS,
    max_bars: int | None = None,
    chords: bool = False,
    densities: bool = False,
) -> dict:
    """The whole-song evaluation (module docstring) of one model; song.json, song.md and
    samples/<run>/<song>.mid in `out`."""
    import musicgen

    if not Path(structure).is_dir():  # before the model is loaded
        raise MusicgenError(f"{structure}: structure folder not found")
    model = musicgen.load(checkpoint, device=device)
    if not model.tokenizer.section_mask().any():
        raise MusicgenError(f"{checkpoint}: its tokenizer has no section tokens (no form control)")
    tok = model.tokenizer
    if densities and not (tok.phrase_mask() & ~tok.section_mask()).any():  # no density ids
        raise MusicgenError(f"{checkpoint}: its tokenizer has no density tokens (--densities)")
    for sampling in settings:  # a bad value fails before any song is read
        model.options(**sampling)
    cases, skipped = song_cases(
        model.tokenizer, data, structure, split, max_songs, max_bars, prompt_bars
    )
    real = fm.columns([score_song(c.score, c, prompt_bars) for c in cases], MEASURES)
    out = Path(out)
    runs, plan = {}, plan_runs(settings, chords, densities)
    for run in plan:
        folder = out / "samples" / run.label.replace(" ", "_")
        runs[run.label] = score_run(model, cases, run, seed, prompt_bars, folder)
    results = {
        "checkpoint": str(checkpoint),
        "split": split,
        "seed": seed,
        "piece_seeds": piece_seeds(seed, len(cases)),
        "prompt_bars": prompt_bars,
        "max_bars": max_bars,
        "songs": [c.name for c in cases],
        "forms": [form_text(c.phrases) for c in cases],
        "first_bars": [c.first_bar for c in cases],
        "skipped": skipped,
        "measures": list(MEASURES),
        "per_song": {"real": real, **{k: v["measures"] for k, v in runs.items()}},
        "stops": {k: v["stops"] for k, v in runs.items()},
        **summarize(real, runs, run_pairs(plan), seed),
    }
    write_json(out / "song.json", results)
    (out / "song.md").write_text(markdown_table(results))
    return results
