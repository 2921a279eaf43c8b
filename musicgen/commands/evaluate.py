"""`musicgen evaluate nll|style|music|form|memory`: numbers (JSON) and a figure (PNG) in --out."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from musicgen.commands.evaluate_form import add_form
from musicgen.commands.evaluate_memory import add_memory
from musicgen.errors import MusicgenError, check_range, check_seed
from musicgen.generation.api.options import OPTIONS
from musicgen.generation.api.request import flag, help_text

STYLE_SAMPLING = ("temperature", "top_p")  # the sampling options `evaluate style` may set


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="per-position NLL, style continuation and music statistics",
        description="Evaluate checkpoints or generated music; each task writes TASK.json and "
        "TASK.png into --out.",
    )
    tasks = p.add_subparsers(dest="task", metavar="TASK", required=True)
    nll = _add_nll(tasks)
    style = _add_style(tasks)
    music = _add_music(tasks)
    form = add_form(tasks)  # its options, in commands/evaluate_form.py
    form.set_defaults(func=run_form)
    add_memory(tasks)  # its own options, in commands/evaluate_memory.py

    for task in (nll, style, music, form):
        task.add_argument("--out", default="out/eval", help="output folder (default: out/eval)")
        if task is not music:
            task.add_argument("--device", default="auto", help="auto | cpu | cuda | mps")


def _add_nll(tasks: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`evaluate nll`: its parser and options."""
    nll = tasks.add_parser(
        "nll",
        help="per-position NLL on held-out songs (several checkpoints on one plot)",
        description="Feed whole held-out songs (up to --max-len tokens, default twice the "
        "training crop) and average the NLL per 128-token segment, within and beyond the "
        "training length; also the NLL per note (total NLL / notes scored), comparable across "
        "tokenizations, and the mean probability put on grammar-forbidden tokens (overall and "
        "right after a note).",
    )
    nll.add_argument(
        "--checkpoint", nargs="+", required=True, help="checkpoint file(s) or run folder(s)"
    )
    nll.add_argument("--data", required=True, help="folder written by `musicgen prepare`")
    nll.add_argument(
        "--split",
        default="validation",
        help="train | validation | test | all (every song of the folder)",
    )
    nll.add_argument("--max-len", type=int, help="tokens per song (default: 2 x crop_len)")
    nll.add_argument("--max-songs", type=int, help="use only the first N songs of the split")
    nll.add_argument("--batch-size", type=int, default=1)
    nll.add_argument("--seed", type=int, default=0, help="seed of the SPE noise draws")
    nll.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="average over this many SPE noise draws per song (default 1)",
    )
    nll.set_defaults(func=run_nll)
    return nll


def _add_style(tasks: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`evaluate style`: its parser and options."""
    style = tasks.add_parser(
        "style",
        help="continue 2-bar prompts; style similarity of 4 segments to the source",
        description="For every prompt song: continue its first bars with the sampler, split the "
        "continuation into 4 equal time segments, and score each against the whole source song "
        "(time-pitch and onset-duration cosine similarity, per track).",
    )
    style.add_argument("--checkpoint", required=True)
    style.add_argument("--prompts", required=True, help="folder of MIDI songs")
    style.add_argument("--bars", type=int, default=2, help="prompt length in bars")
    style.add_argument("--max-tokens", type=int, default=1024, help="ids sampled after the prompt")
    style.add_argument("--samples", type=int, default=3, help="continuations per prompt")
    style.add_argument("--max-prompts", type=int, help="use only the first N prompt songs")
    for name in STYLE_SAMPLING:  # flags derived from the options' declarations, as generate's
        style.add_argument(
            flag(name), dest=name, type=OPTIONS[name].kind,
            help=f"{help_text(name)}; default: the model's own, else the paper's",
        )  # fmt: skip
    style.add_argument("--seed", type=int, default=0)
    style.set_defaults(func=run_style)
    return style


def _add_music(tasks: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """`evaluate music`: its parser and options."""
    music = tasks.add_parser(
        "music",
        help="descriptive statistics of a MIDI folder (vs a reference folder)",
        description="Pitch-class entropy, scale consistency, note density (notes per bar), "
        "polyphony, groove consistency, empty-bar rate, and texture: notes per onset, share of "
        "onsets with >= 8 notes, share of duplicate (onset, pitch) notes, share of bars with "
        "<= 2 notes; the grammar error rate too when a checkpoint or tokenizer is given.",
    )
    music.add_argument("midi_dir")
    music.add_argument("--reference", help="folder of reference MIDI files")
    music.add_argument(
        "--reference-bars",
        type=int,
        help="compare with each reference file's first N bars (from its first note), e.g. the "
        "generated pieces' length (default: whole files)",
    )
    music.add_argument("--checkpoint", help="take the tokenizer from this checkpoint")
    music.add_argument(
        "--tokenizer",
        help="a tokenizer name (remi, groove), a tokenizer.json or a prepared dataset folder",
    )
    music.add_argument(
        "--band",
        action="store_true",
        help="also the band measure of bass/drums/third-part pieces: drum pitches, share of bars "
        "with bass and with the third part, longest note (bars), drum hits per bar, and the "
        "share of pieces that play as a band; with --reference-bars N the reference songs are "
        "read as their consecutive N-bar pieces",
    )
    music.set_defaults(func=run_music)
    return music


def _fmt(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.4f}"


def run_nll(args: argparse.Namespace) -> int:
    from musicgen.evaluate import evaluate_nll

    check_range("--batch-size", args.batch_size, 1)
    check_range("--max-len", args.max_len, 2)
    check_range("--max-songs", args.max_songs, 1)
    check_seed("--seed", args.seed)
    res = evaluate_nll(
        args.checkpoint,
        args.data,
        args.out,
        split=args.split,
        max_len=args.max_len,
        max_songs=args.max_songs,
        device=args.device,
        batch_size=args.batch_size,
        seed=args.seed,
        seeds=args.seeds,
    )
    for label, m in res["models"].items():
        print(
            f"{label}: NLL within {m['crop_len']} = {_fmt(m['mean_within'])}, "
            f"beyond = {_fmt(m['mean_beyond'])}, per note = {_fmt(m['nll_per_note'])}"
        )
        fm = m["forbidden_mass"]
        top = sorted(fm["after_note_by_kind"].items(), key=lambda kv: -kv[1])[:3]
        kinds = f" (on {', '.join(f'{k} {_fmt(v)}' for k, v in top)})" if top else ""
        print(
            f"{label}: forbidden mass {_fmt(fm['overall'])}, "
            f"after a note {_fmt(fm['after_note'])}{kinds}"
        )
    for pair, ranges in res["paired"].items():  # per-song differences, 95 % bootstrap CI
        cells = [
            f"{key} {_fmt(d['mean'])} [{_fmt(d['low'])}, {_fmt(d['high'])}] ({d['n']} songs)"
            for key, d in ranges.items()
        ]
        print(f"{pair}: " + ", ".join(cells))
    print(f"wrote {args.out}/nll.json, {args.out}/nll.png")
    return 0


def run_style(args: argparse.Namespace) -> int:
    from musicgen.evaluate import evaluate_style

    for opt, value in (
        ("--bars", args.bars),
        ("--max-tokens", args.max_tokens),
        ("--samples", args.samples),
        ("--max-prompts", args.max_prompts),
    ):
        check_range(opt, value, 1)
    check_seed("--seed", args.seed)
    res = evaluate_style(
        args.checkpoint,
        args.prompts,
        args.out,
        bars=args.bars,
        max_tokens=args.max_tokens,
        samples=args.samples,
        **{name: getattr(args, name) for name in STYLE_SAMPLING},
        seed=args.seed,
        device=args.device,
        max_prompts=args.max_prompts,
    )
    rows = (
        ("summary", "sampled"),
        ("reference_summary", "true continuation"),
        ("baseline_summary", "other song"),
    )
    for metric in res["summary"]:
        for key, what in rows:
            print(
                f"{metric} ({what}): "
                + "  ".join(f"seg{i + 1} {_fmt(s['mean'])}" for i, s in enumerate(res[key][metric]))
            )
    kept = res["prompts_kept"]
    print(
        f"prompts kept: {kept['decoded']}/{kept['samples']} as decoded, "
        f"{kept['written']}/{kept['samples']} in the written files"
    )
    print(f"wrote {args.out}/style.json, {args.out}/style.png")
    return 0


def run_music(args: argparse.Namespace) -> int:
    from musicgen.evaluate import evaluate_music

    tokenizer = None
    if args.checkpoint:
        from musicgen.checkpoint import checkpoint_tokenizer

        tokenizer = checkpoint_tokenizer(args.checkpoint)
    elif args.tokenizer:
        from musicgen.tokenizers import REGISTRY, build_tokenizer, load_tokenizer

        tokenizer = (
            build_tokenizer(args.tokenizer)
            if args.tokenizer in REGISTRY
            else load_tokenizer(args.tokenizer)
        )
    if args.reference_bars is not None:
        check_range("--reference-bars", args.reference_bars, 1)
        if not args.reference:
            raise MusicgenError("--reference-bars: needs --reference")
    res = evaluate_music(
        args.midi_dir,
        args.out,
        reference=args.reference,
        tokenizer=tokenizer,
        reference_bars=args.reference_bars,
        band=args.band,
    )
    for name, s in res["generated"].items():
        ref = res.get("reference", {}).get(name)
        extra = f"  reference {_fmt(ref['mean'])} ± {_fmt(ref['std'])}" if ref else ""
        print(f"{name:>20}: {_fmt(s['mean'])} ± {_fmt(s['std'])}{extra}")
    if args.band:
        _print_band(res["band"])
    for folder, key in ((args.midi_dir, ""), (args.reference, "reference_")):  # not only in json
        read, skipped = res.get(f"{key}files", []), res.get(f"{key}skipped", [])
        if skipped:
            print(f"warning: {folder}: {len(skipped)} of {len(read) + len(skipped)} files "
                  f"unreadable, left out of the statistics (the first: {skipped[0]['path']}: "
                  f"{skipped[0]['reason']})", file=sys.stderr)  # fmt: skip
    print(f"wrote {args.out}/music.json, {args.out}/music.png")
    return 0


def _print_band(band: dict) -> None:
    """One line per band measure (mean ± sd [min, max]) and the share playing as a band."""
    ref = band.get("reference")
    for name, s in band["generated"]["measures"].items():
        r = ref["measures"][name] if ref else None
        extra = f"  reference {_fmt(r['mean'])} ± {_fmt(r['std'])}" if r else ""
        span = f"[{_fmt(s['min'])}, {_fmt(s['max'])}]"
        print(f"{name:>20}: {_fmt(s['mean'])} ± {_fmt(s['std'])} {span}{extra}")
    g = band["generated"]
    extra = f"  reference {_fmt(ref['band_share'])} of {ref['pieces']}" if ref else ""
    print(f"{'plays as a band':>20}: {_fmt(g['band_share'])} of {g['pieces']} pieces{extra}")


def run_form(args: argparse.Namespace) -> int:
    from musicgen.evaluate.form import MEASURES, SWEPT, evaluate_form, sweep

    if args.whole_song:
        return run_whole_song(args)
    check_range("--max-songs", args.max_songs, 1)
    check_range("--batch-size", args.batch_size, 1)
    check_range("--new-bars", args.new_bars, 1)
    if args.split not in ("train", "validation", "test", "all"):
        raise MusicgenError(f"--split: must be train, validation, test or all; got '{args.split}'")
    check_seed("--seed", args.seed)
    settings = sweep({n: getattr(args, n) for n in SWEPT})
    res = evaluate_form(
        args.checkpoint,
        args.data,
        args.out,
        split=args.split,
        max_songs=args.max_songs,
        settings=settings,
        seed=args.seed,
        batch_size=args.batch_size,
        device=args.device,
        new_bars=args.new_bars,
    )
    print(f"{len(res['songs'])} songs ({len(res['skipped'])} too short); model - real [95 % CI]")
    for name in MEASURES:
        real = res["real"]["spread"][name]
        cells = [
            f"{_fmt(run['spread'][name]['mean'])} ({_fmt(d['mean'])} "
            f"[{_fmt(d['low'])}, {_fmt(d['high'])}])"
            for run in res["runs"].values()
            for d in [run["minus_real"][name]]
        ]
        print(f"{name:>22}: real {_fmt(real['mean'])}  " + "  ".join(cells))
    print("runs: " + "; ".join(res["runs"]))
    print(f"wrote {args.out}/form.json, {args.out}/form.png, {args.out}/samples/")
    return 0


def run_whole_song(args: argparse.Namespace) -> int:
    """`evaluate form --whole-song`: musicgen.evaluate.song, its table printed."""
    from musicgen.evaluate.form import SWEPT, sweep
    from musicgen.evaluate.song import MAX_SONGS, evaluate_songs
    from musicgen.generation.rules import BarEcho

    if args.structure is None:
        raise MusicgenError("--whole-song: give --structure (POP909's pop909_structure folder)")
    if len(args.checkpoint) != 1:
        raise MusicgenError("--whole-song: give one --checkpoint")
    check_range("--max-songs", args.max_songs, 1)
    check_range("--prompt-bars", args.prompt_bars, 1)
    check_range("--max-bars", args.max_bars, args.prompt_bars + 1)
    if args.split not in ("train", "validation", "test", "all"):
        raise MusicgenError(f"--split: must be train, validation, test or all; got '{args.split}'")
    check_seed("--seed", args.seed)
    given = {n: getattr(args, n) for n in SWEPT}
    copy = BarEcho.option.name  # the copy rule on (the model's own) and off unless given
    settings = sweep({**given, copy: given[copy] or [None, 0.0]})
    res = evaluate_songs(
        args.checkpoint[0],
        args.data,
        args.structure,
        args.out,
        split=args.split,
        max_songs=args.max_songs or MAX_SONGS,
        settings=settings,
        seed=args.seed,
        device=args.device,
        prompt_bars=args.prompt_bars,
        max_bars=args.max_bars,
        chords=args.chords,
        densities=args.densities,
    )
    print(f"{len(res['songs'])} songs ({len(res['skipped'])} skipped); run (run - real [95 % CI])")
    print((Path(args.out) / "song.md").read_text(), end="")
    print(f"wrote {args.out}/song.json, {args.out}/song.md, {args.out}/samples/")
    return 0
