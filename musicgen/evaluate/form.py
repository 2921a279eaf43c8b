"""`musicgen evaluate form`: a continuation benchmark that hears form (form.json + form.png).

In the form of the MIREX 2025 symbolic continuation task: each held-out song's first
`PROMPT_BARS` bars that hold music are the prompt, the model writes `NEW_BARS` bars after them,
and the continuation is scored beside the song's real continuation (the bars that really
followed the prompt, read through the same tokenizer) on the measures of `musicgen.measures.form`
(repeats, self-similarity by lag, the top voice, key, groove) and the texture measures of
`musicgen.measures.metrics`. Per measure: the spread over songs, and the per-song difference
model - real with a bootstrap 95 % CI; with several runs (checkpoints x sampling settings), the
paired difference between each pair of runs, so a change can be called better or not.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from musicgen.errors import MusicgenError
from musicgen.evaluate.common import write_json
from musicgen.generation.api.options import OPTIONS, SWEEP
from musicgen.generation.api.prompt import Prompt, encode_song, select_bars
from musicgen.measures import form as fm
from musicgen.measures.metrics import (
    Notes,
    duplicate_note_rate,
    groove_consistency,
    notes_from_score,
    notes_per_onset,
    pitch_class_entropy,
    scale_consistency,
    stacked_onset_rate,
)

PROMPT_BARS = 4
NEW_BARS = 12
BAR_TOKEN_CAP = 512  # sampled ids per new bar at most (as `Model.generate_many`)

# the measures, in the order of form.json and the printed table
MEASURES = (
    "rhythm_repeat_rate",
    "repeated_bar_rate",
    "near_repeat_rate",
    *(f"self_similarity_lag{k}" for k in fm.LAGS),
    *(f"repeat_lag{k}" for k in fm.LAGS),
    "bar_self_similarity",
    "top_voice_coverage",
    "top_voice_line",
    "top_voice_interval",
    "top_voice_range",
    "top_voice_run",
    "scale_consistency",
    "prompt_key_rate",
    "key_match",
    "groove_similarity",
    "chroma_similarity",
    "groove_consistency",
    "notes_per_bar",
    "notes_per_onset",
    "stacked_onset_rate",
    "pitch_class_entropy",
    "duplicate_note_rate",
)


@dataclass
class Case:
    """One benchmark song: the prompt the model is fed and the notes both sides are scored on."""

    name: str
    prompt: Prompt
    first_bar: int  # the song's bar where the prompt begins
    prompt_notes: Notes  # the prompt bars, from time 0
    real: Notes  # the NEW_BARS bars that followed them in the song, from time 0


def window(notes: Notes, start_bar: int, bars: int) -> Notes:
    """Notes starting in bars start_bar .. start_bar + bars - 1, shifted to start at time 0."""
    lo, hi = start_bar * fm.BAR_BEATS, (start_bar + bars) * fm.BAR_BEATS
    kept = notes.select((notes.onset >= lo) & (notes.onset < hi))
    kept.onset = kept.onset - lo
    return kept


def form_measures(
    cont: Notes, prompt: Notes, bars: int = NEW_BARS, prompt_bars: int = PROMPT_BARS
) -> dict[str, float]:
    """Every measure of `MEASURES` for a continuation of `bars` bars after its prompt of
    `prompt_bars` bars (one more than `PROMPT_BARS` when a pickup joins the first bar)."""
    out = {
        "rhythm_repeat_rate": fm.rhythm_repeat_rate(cont),
        "repeated_bar_rate": fm.repeated_bar_rate(cont),
        "near_repeat_rate": fm.near_repeat_rate(cont, bars),
        **{f"self_similarity_lag{k}": fm.lag_similarity(cont, k, bars) for k in fm.LAGS},
        **{f"repeat_lag{k}": fm.lag_repeat_rate(cont, k, bars) for k in fm.LAGS},
        "bar_self_similarity": fm.bar_self_similarity(cont),
    }
    line = fm.top_voice_measures(cont, beats=bars * fm.BAR_BEATS)
    out.update({f"top_voice_{k}": v for k, v in line.items()})
    root, own = fm.scale_root(prompt), fm.scale_root(cont)
    out.update(
        scale_consistency=scale_consistency(cont),
        prompt_key_rate=fm.in_scale_rate(cont, root),
        key_match=float("nan") if root is None or own is None else float(root == own),
        groove_similarity=fm.bar_similarity(cont, prompt, bars, prompt_bars),
        chroma_similarity=fm.bar_similarity(cont, prompt, bars, prompt_bars, groove=False),
        groove_consistency=groove_consistency(cont),
        notes_per_bar=len(cont) / bars,
        notes_per_onset=notes_per_onset(cont),
        stacked_onset_rate=stacked_onset_rate(cont),
        pitch_class_entropy=pitch_class_entropy(cont),
        duplicate_note_rate=duplicate_note_rate(cont),
    )
    return out


def benchmark_songs(data: str | Path, split: str) -> list[Path]:
    """The MIDI files of `data` in `split`, assigned as `prepare` assigns them (a top folder
    named train/validation/test, else POP909's stable hash of the relative path: its 39
    validation songs, 49 test songs); `all`: every file. POP909's versions/ folders are left
    out."""
    from musicgen.data.prepare import SPLITS, assign_split, find_midi

    root = Path(data)
    if not root.is_dir():
        raise MusicgenError(f"{data}: not a folder of songs")
    if split not in (*SPLITS, "all"):
        raise MusicgenError(f"split: must be one of {', '.join(SPLITS)}, all; got '{split}'")
    files = find_midi(root, "pop909")
    if split != "all":
        files = [
            p
            for p in files
            if assign_split(p.relative_to(root).as_posix(), _kind(p, root), {}) == split
        ]
    if not files:
        raise MusicgenError(f"{data}: no MIDI file in split '{split}'")
    return files


def _kind(path: Path, root: Path) -> str:
    """How `prepare` would split a file of `root`: by its top folder when that names a split
    ("folder"), else by POP909's hash, with its test split ("pop909")."""
    from musicgen.data.sources import SPLIT_FOLDERS

    top = path.relative_to(root).parts[0].lower()
    return "folder" if len(path.relative_to(root).parts) > 1 and top in SPLIT_FOLDERS else "pop909"


def make_case(tokenizer, path: Path, new_bars: int = NEW_BARS) -> Case | str:
    """The benchmark case of one song, or why it has none (too short)."""
    ids = encode_song(tokenizer, path)  # with the song's chord_midi.txt, as training read it
    try:  # the project's one prompt rule: the first bars that hold music, a pickup joined
        prompt = select_bars(tokenizer, ids, PROMPT_BARS, where=str(path))
    except MusicgenError as exc:
        return str(exc)
    starts = tokenizer.bar_starts(np.asarray(ids, dtype=np.int64))
    first = int(np.searchsorted(starts, prompt.offset))
    if first + prompt.bars + new_bars > len(starts):
        return f"fewer than {prompt.bars + new_bars} bars from bar {first}"
    song = notes_from_score(tokenizer.decode(ids))
    return Case(
        name=path.stem,
        prompt=prompt,
        first_bar=first,
        prompt_notes=window(song, first, prompt.bars),
        real=window(song, first + prompt.bars, new_bars),
    )


def continue_cases(
    model, prompts: Sequence[Prompt], new_bars: int, seed: int, batch_size: int, **sampling
) -> list:
    """THE ONE PLACE the benchmark generates: each prompt continued by `new_bars` bars, as
    `musicgen.Music` pieces (prompt notes kept as `Model.continue_midi` keeps them), through the
    one generation path (`Model.pieces` with a list of prompts: several songs share a batch)."""
    pieces = model.pieces(
        len(prompts), prompt=list(prompts), bars=new_bars, seed=int(seed),
        batch_size=batch_size, **sampling,
    )  # fmt: skip
    return list(tqdm(pieces, desc="continue", total=len(prompts), leave=False))


def save_bars(piece, bars: int, folder: Path, name: str) -> Path:
    """The piece's first `bars` bars (prompt and scored continuation) as folder/name.mid."""
    from musicgen.io import write_score

    score = piece.score
    return write_score(score.clip(0, bars * 4 * score.ticks_per_quarter), folder / f"{name}.mid")


def model_names(checkpoints: Sequence[str | Path]) -> list[str]:
    """Each checkpoint's name in run labels: its stem, or parent/stem where two share a stem
    (a shipped model beside the copy it replaced: checkpoints/x and previous/x)."""
    from musicgen.generation.api import checkpoint_stem

    stems = [checkpoint_stem(c) for c in checkpoints]
    names = [
        f"{Path(c).resolve().parent.name}/{s}" if stems.count(s) > 1 else s
        for c, s in zip(checkpoints, stems, strict=True)
    ]
    if len(set(names)) < len(names):
        raise MusicgenError(f"checkpoint: the same model is given twice ({', '.join(names)})")
    return names


# the sampling options a sweep varies and their labels (generation.api.options: those with a
# short label); `legato` is [False] (--no-legato) or None
SHORT = {name: OPTIONS[name].short for name in SWEEP} | {"legato": "legato"}
SWEPT = tuple(SHORT)


def sweep(given: dict[str, list | None]) -> list[dict]:
    """`evaluate form`'s runs: one sampling setting per combination of the values `given` (by
    option name); an option not given (None) is the model's own."""
    return [
        {k: v for k, v in zip(given, values, strict=True) if v is not None}
        for values in itertools.product(*(v or [None] for v in given.values()))
    ]


def sampling_label(sampling: dict) -> str:
    """The sampling options given, short ("T=1 r=0"; "default" for none)."""
    opts = " ".join(f"{SHORT[k]}={v:g}" for k, v in sampling.items() if v is not None)
    return opts or "default"


def run_label(name: str, sampling: dict) -> str:
    """A run's name: the model's name and the sampling options given (default: none given)."""
    return f"{name} {sampling_label(sampling)}"


def summarize_runs(real: dict, runs: dict[str, dict], seed: int = 0) -> dict:
    """Spread per measure of the real continuations and of each run; each run minus real per
    song (bootstrap CI); and each pair of runs (first minus second), paired by song."""
    out = {"real": {"spread": {m: fm.spread(v) for m, v in real.items()}}, "runs": {}}
    for label, cols in runs.items():
        out["runs"][label] = {
            "spread": {m: fm.spread(v) for m, v in cols.items()},
            "minus_real": {m: fm.paired_difference(v, real[m], seed=seed) for m, v in cols.items()},
        }
    out["pairs"] = {
        f"{a} - {b}": {m: fm.paired_difference(runs[a][m], runs[b][m], seed=seed) for m in MEASURES}
        for a, b in itertools.combinations(runs, 2)
    }
    return out


def score_run(
    model,
    cases: Sequence[Case],
    new_bars: int,
    seed: int,
    batch_size: int,
    folder: Path,
    sampling: dict,
) -> dict:
    """One model at one sampling setting: every case continued, its 16 bars written to
    `folder`, its continuation measured; the measures as columns over the songs."""
    pieces = continue_cases(
        model, [c.prompt for c in cases], new_bars, seed, batch_size, **sampling
    )
    rows = []
    for case, piece in tqdm(zip(cases, pieces, strict=True), desc=folder.name, leave=False):
        held = case.prompt.bars
        save_bars(piece, held + new_bars, folder, case.name)
        cont = window(notes_from_score(piece.score), held, new_bars)
        rows.append(form_measures(cont, case.prompt_notes, new_bars, held))
    return fm.columns(rows, MEASURES)


def evaluate_form(
    checkpoints: Sequence[str | Path],
    data: str | Path,
    out: str | Path,
    split: str = "validation",
    max_songs: int | None = None,
    settings: Sequence[dict] = ({},),
    seed: int = 0,
    batch_size: int = 8,
    device: str = "cpu",
    new_bars: int = NEW_BARS,
) -> dict:
    """The benchmark (module docstring) for every checkpoint x sampling setting (dicts of
    `temperature` / `top_p` / `top_k` / `repeat`, {} = the model's defaults); form.json,
    form.png and the 16 bars of each piece as samples/<run>/<song>.mid in `out`."""
    import musicgen

    out = Path(out)
    names = model_names(checkpoints)  # a model given twice fails before anything is loaded
    models = [musicgen.load(c, device=device) for c in checkpoints]
    tokenizer = models[0].tokenizer
    for c, m in zip(checkpoints, models, strict=True):
        if m.tokenizer.to_dict() != tokenizer.to_dict():
            raise MusicgenError(f"{c}: its tokenizer differs from {checkpoints[0]}'s")
    for sampling in settings:  # a bad value fails before any song is read
        models[0].options(**sampling)
    cases, skipped = [], []
    for path in benchmark_songs(data, split)[:max_songs]:
        case = make_case(tokenizer, path, new_bars)
        if isinstance(case, str):
            skipped.append({"song": path.stem, "reason": case})
        else:
            cases.append(case)
    if not cases:
        raise MusicgenError(f"{data}: no song of split '{split}' is long enough for the benchmark")
    real = [form_measures(c.real, c.prompt_notes, new_bars, c.prompt.bars) for c in cases]
    runs: dict[str, dict] = {}
    for (name, model), sampling in itertools.product(zip(names, models, strict=True), settings):
        label = run_label(name, sampling)
        folder = out / "samples" / label.replace(" ", "_")
        runs[label] = score_run(model, cases, new_bars, seed, batch_size, folder, sampling)
    results = {
        "prompt_bars": PROMPT_BARS,
        "new_bars": new_bars,
        "split": split,
        "seed": seed,
        "songs": [c.name for c in cases],
        "first_bars": [c.first_bar for c in cases],
        "held_bars": [c.prompt.bars for c in cases],  # PROMPT_BARS, + 1 with a pickup
        "skipped": skipped,
        "measures": list(MEASURES),
        "per_song": {"real": fm.columns(real, MEASURES), **runs},
        **summarize_runs(fm.columns(real, MEASURES), runs, seed),
    }
    write_json(out / "form.json", results)
    plot_form(results, out / "form.png")
    return results


def plot_form(results: dict, path: Path) -> Path:
    """Per measure, each run's mean difference from the real continuations in units of the
    real songs' sd, with its 95 % CI: a bar whose CI crosses 0 is as far from real as noise."""
    from musicgen.evaluate.plots import DPI, FIG_SIZE, plt, save_figure

    fig, ax = plt.subplots(figsize=FIG_SIZE, dpi=DPI)
    labels = list(results["runs"])
    names = [m for m in MEASURES if (results["real"]["spread"][m]["sd"] or 0) > 0]
    height = 0.8 / max(len(labels), 1)
    for k, label in enumerate(labels):
        diff = results["runs"][label]["minus_real"]
        sd = np.array([results["real"]["spread"][m]["sd"] for m in names])
        mean = np.array([diff[m]["mean"] for m in names]) / sd
        err = np.abs(np.array([[diff[m]["low"], diff[m]["high"]] for m in names]).T / sd - mean)
        y = np.arange(len(names)) + k * height
        ax.errorbar(mean, y, xerr=err, fmt="o", ms=3, capsize=2, label=label)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(np.arange(len(names)) + 0.4 - height / 2, [n.replace("_", " ") for n in names])
    ax.tick_params(labelsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("model - real, in sd of the real continuations (95 % CI)", fontsize=8)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes
    fig.tight_layout()
    return save_figure(fig, path)
