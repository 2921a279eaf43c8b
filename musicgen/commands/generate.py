"""`musicgen generate` (pieces from scratch) and `musicgen continue` (a MIDI prompt continued).

Both read everything from the checkpoint (model, tokenizer, config), sample with the paper's
settings for that tokenizer unless told otherwise, and write `<name>.mid` files into `--out`
without ever overwriting an existing file silently.
"""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import symusic
import torch

from musicgen.device import pick_device
from musicgen.errors import MusicgenError, check_range, check_seed
from musicgen.io import atomic_write_text, ensure_dir, write_score
from musicgen.sample import Generated, SamplingOptions, default_options, generate, invalid_rate
from musicgen.tokenizers.base import Tokenizer

BAR_TOKEN_CAP = 512  # with --bars, at most this many sampled ids per requested bar


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="sample new pieces from a checkpoint",
        description="Sample pieces from scratch; writes OUT/<checkpoint>_<seed>_<i>.mid. Sampling "
        "defaults follow the paper: REMI T=1.2 with top-p 0.9, groove T=0.6.",
    )
    length = p.add_mutually_exclusive_group()
    length.add_argument("--max-tokens", type=int, default=None,
                        help="ids to sample per piece (default 2048)")
    length.add_argument("--bars", type=int, default=None,
                        help="stop each piece after this many bars")
    _add_common(p)
    p.set_defaults(func=run_generate)

    c = sub.add_parser(
        "continue",
        help="continue bars of a MIDI prompt",
        description="Encode a MIDI prompt with the checkpoint's tokenizer, keep some of its bars "
        "and sample a continuation; the output holds the prompt then the continuation, at the "
        "prompt's tempo.",
    )
    c.add_argument("--prompt", required=True, help="the MIDI file to continue")
    c.add_argument("--bars", type=int, default=None,
                   help="use the first N bars of the prompt (default 2)")
    c.add_argument("--prompt-bars", default=None, metavar="START:END",
                   help="use bars START..END-1 (0-based, END excluded) instead of --bars")
    c.add_argument("--max-tokens", type=int, default=1024, help="ids to sample (default 1024)")
    c.add_argument("--continuation-only", action="store_true",
                   help="write only the continuation, without the prompt")
    _add_common(c)
    c.set_defaults(func=run_continue)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checkpoint", required=True, help="a checkpoint file (or its run folder)")
    p.add_argument("--out", required=True, help="output folder (created)")
    p.add_argument("--num", type=int, default=4, help="pieces to write (default 4)")
    p.add_argument("--temperature", type=float, default=None, help=">= 0 (0 = greedy)")
    p.add_argument("--top-k", type=int, default=None, help="keep the K likeliest ids (0 = off)")
    p.add_argument("--top-p", type=float, default=None, help="nucleus mass in (0, 1] (1 = off)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: drawn, printed)")
    p.add_argument("--no-grammar", action="store_true",
                   help="do not mask invalid tokens (ablation)")
    p.add_argument("--save-tokens", action="store_true",
                   help="also write <name>.json with the ids (see `musicgen export`)")
    p.add_argument("--overwrite", action="store_true", help="replace existing files")
    p.add_argument("--batch-size", type=int, default=8, help="samples decoded together")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N | mps")
    p.add_argument("--render", action="store_true", help="also write a piano roll and audio")


# ---------------------------------------------------------------------------------------------
# shared steps


def check_common(args: argparse.Namespace) -> None:
    """Range checks before anything is loaded; argparse only checks the types."""
    for opt, value, low in (("--num", args.num, 1), ("--batch-size", args.batch_size, 1),
                            ("--max-tokens", args.max_tokens, 1), ("--bars", args.bars, 1)):
        check_range(opt, value, low)
    check_seed("--seed", args.seed)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise MusicgenError(f"{args.out}: is a file, not a folder (--out)")
    SamplingOptions(
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k or 0,
        top_p=1.0 if args.top_p is None else args.top_p,
    ).validate()


def sampling_options(args: argparse.Namespace, tokenizer: Tokenizer) -> SamplingOptions:
    """The paper's defaults for this tokenizer, with every option given on the command line."""
    opts = default_options(tokenizer.name)
    if args.temperature is not None:
        opts.temperature = args.temperature
    if args.top_k is not None:
        opts.top_k = args.top_k
    if args.top_p is not None:
        opts.top_p = args.top_p
    opts.grammar = not args.no_grammar
    return opts.validate()


def load(args: argparse.Namespace):
    from musicgen.checkpoint import load_checkpoint

    device = pick_device(args.device)
    loaded = load_checkpoint(args.checkpoint, device)
    return loaded, device


def checkpoint_stem(path: str | Path) -> str:
    """Output names start with the model's name: runs/pop/best.pt -> pop_best, x/model.pt -> x."""
    path = Path(path)
    if path.is_dir():
        return path.name
    if path.stem == "model":
        return path.parent.name or "model"
    if path.stem in ("last", "best") and path.parent.name:
        return f"{path.parent.name}_{path.stem}"
    return path.stem


def free_path(folder: Path, stem: str, suffixes: tuple[str, ...], overwrite: bool) -> Path:
    """`folder/stem` (without suffix), or `stem-1`, `stem-2`, ... if any of its files exist."""
    n = 0
    while True:
        base = folder / (stem if n == 0 else f"{stem}-{n}")
        if overwrite or not any(base.with_name(base.name + s).exists() for s in suffixes):
            return base
        n += 1


def write_midi(tokenizer: Tokenizer, ids: list[int], path: Path, tempo: float | None) -> None:
    """Decode and write atomically; `tempo` (qpm) replaces whatever the ids set at time 0."""
    score = tokenizer.decode(ids)
    if tempo is not None:
        later = [t for t in score.tempos if t.time > 0]
        score.tempos.clear()
        score.tempos.append(symusic.Tempo(0, float(tempo)))
        for t in later:
            score.tempos.append(t)
    write_score(score, path)  # verified: a full disk is an error, never an empty file


def sample_all(args, loaded, device, prompt: list[int], max_new: int, bars: int | None,
               seed: int) -> Iterator[tuple[int, list[Generated]]]:
    """`args.num` continuations of `prompt` from one seed, yielded a batch at a time (with the
    index of its first piece) so that each batch is written before the next one starts."""
    opts = sampling_options(args, loaded.tokenizer)
    cfg = loaded.config.model
    if cfg.head == "lm" and cfg.pe == "ape_learned" and len(prompt) + max_new > cfg.max_len:
        max_new = max(cfg.max_len - len(prompt), 1)
        print(f"note: learned positions stop at {cfg.max_len}: sampling {max_new} ids at most")
    torch.manual_seed(seed)  # the model's positional noise (init_state)
    gen = torch.Generator(device=device).manual_seed(seed)
    for start in range(0, args.num, args.batch_size):
        n = min(args.batch_size, args.num - start)
        yield start, generate(loaded.model, loaded.tokenizer, [list(prompt)] * n, opts,
                              max_new_tokens=max_new, bars=bars, generator=gen, progress=True)


def save_all(args, loaded, batches: Iterator[tuple[int, list[Generated]]], stem: str, seed: int,
             tempo: float | None = None, continuation_only: bool = False) -> list[Path]:
    """Write `<stem>_<seed>_<i>.mid` (+ `.json`) for every piece, batch by batch."""
    out_dir = ensure_dir(args.out)
    tok = loaded.tokenizer
    suffixes = (".mid", ".json") if args.save_tokens else (".mid",)
    written, everything = [], []
    for first, results in batches:
        everything += results
        for i, res in enumerate(results, start=first):
            base = free_path(out_dir, f"{stem}_{seed}_{i}", suffixes, args.overwrite)
            ids = [tok.bos_id, *res.continuation] if continuation_only else res.ids
            midi = base.with_name(base.name + ".mid")
            write_midi(tok, ids, midi, tempo)
            written.append(midi)
            if args.save_tokens:
                record = {"tokenizer": tok.name, "ids": ids,
                          "prompt_len": 1 if continuation_only else res.prompt_len,
                          "checkpoint": str(args.checkpoint), "seed": seed, "index": i,
                          "stop": res.stop, "grammar_errors": res.errors}
                atomic_write_text(base.with_name(base.name + ".json"), json.dumps(record) + "\n")
            print(f"wrote {midi} ({res.sampled} ids sampled, stop: {res.stop})")
            if args.render:
                _render(midi, out_dir)
    if args.no_grammar:
        print(f"invalid token rate (grammar off): {invalid_rate(everything):.4f}")
    return written


def _render(midi: Path, out_dir: Path) -> None:
    try:
        from musicgen.render import render_midi
    except ModuleNotFoundError:
        print("note: musicgen.render is not available; --render skipped")
        return
    for path in render_midi(midi, out_dir, png=True, wav=True):
        print(f"wrote {path}")


# ---------------------------------------------------------------------------------------------
# the two commands


def run_generate(args: argparse.Namespace) -> int:
    check_common(args)
    loaded, device = load(args)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    if args.bars is not None:
        max_new = BAR_TOKEN_CAP * args.bars
    else:
        max_new = args.max_tokens if args.max_tokens is not None else 2048
    print(f"seed {seed}")
    batches = sample_all(args, loaded, device, [loaded.tokenizer.bos_id], max_new, args.bars, seed)
    save_all(args, loaded, batches, checkpoint_stem(args.checkpoint), seed)
    return 0


def parse_bar_range(args: argparse.Namespace) -> tuple[int, int]:
    if args.prompt_bars is None:
        return 0, 2 if args.bars is None else args.bars
    if args.bars is not None:
        raise MusicgenError("--bars and --prompt-bars: give one of them, not both")
    text = str(args.prompt_bars)
    try:
        start_s, end_s = text.split(":")
        start, end = int(start_s), int(end_s)
    except ValueError:
        raise MusicgenError(f"--prompt-bars: expected START:END (e.g. 0:2), got '{text}'") from None
    if start < 0 or end <= start:
        raise MusicgenError(f"--prompt-bars: need 0 <= START < END, got '{text}'")
    return start, end


def prompt_ids(tokenizer: Tokenizer, path: Path, start: int, end: int) -> list[int]:
    """BOS + the ids of bars start..end-1, cut at the tokenizer's bar starts.

    Ids that the grammar rejects at the cut (e.g. a note ended whose start lies before it) are
    dropped, so the prompt is always a valid prefix.
    """
    if not path.exists():
        raise MusicgenError(f"{path}: prompt file not found")
    if path.is_dir():
        raise MusicgenError(f"{path}: is a directory, not a MIDI file")
    if path.stat().st_size == 0:
        raise MusicgenError(f"{path}: empty file (not a MIDI file)")
    ids = np.asarray(tokenizer.encode(path), dtype=np.int64)
    starts = tokenizer.bar_starts(ids)
    if len(starts) < end:
        raise MusicgenError(
            f"{path}: has {len(starts)} bars, fewer than the {end} that bars {start}:{end} need"
        )
    stop = int(starts[end]) if end < len(starts) else len(ids) - 1  # before EOS
    grammar = tokenizer.grammar()
    grammar.advance(tokenizer.bos_id)
    kept = [tokenizer.bos_id]
    for tok in ids[int(starts[start]) : stop].tolist():
        if tok in (tokenizer.bos_id, tokenizer.eos_id):
            continue
        if grammar.allowed()[tok]:
            grammar.advance(tok)
            kept.append(tok)
    if len(kept) == 1:
        raise MusicgenError(f"{path}: bars {start}:{end} hold no tokens")
    return kept


def tempo_at_bar(path: Path, bar: int) -> float | None:
    """The tempo (qpm) in effect where bar `bar` of the file begins (time signatures followed)."""
    score = symusic.Score(str(path))
    if len(score.tempos) == 0:
        return None
    tpq, tick, left = score.ticks_per_quarter, 0, bar
    sigs = sorted((ts.time, ts.numerator, ts.denominator) for ts in score.time_signatures)
    sigs = sigs or [(0, 4, 4)]
    for k, (_, num, den) in enumerate(sigs):
        bar_len = max(tpq * 4 * num // den, 1)
        nxt = sigs[k + 1][0] if k + 1 < len(sigs) else None
        while left > 0 and (nxt is None or tick + bar_len <= nxt):
            tick += bar_len
            left -= 1
        if left == 0:
            break
    qpm = score.tempos[0].qpm
    for t in score.tempos:
        if t.time <= tick:
            qpm = t.qpm
    return float(qpm)


def run_continue(args: argparse.Namespace) -> int:
    check_common(args)
    start, end = parse_bar_range(args)
    prompt_path = Path(args.prompt)
    if not prompt_path.exists():
        raise MusicgenError(f"{prompt_path}: prompt file not found")
    loaded, device = load(args)
    tok = loaded.tokenizer
    prompt = prompt_ids(tok, prompt_path, start, end)
    tempo = tempo_at_bar(prompt_path, start)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"seed {seed}; prompt: bars {start}:{end} of {prompt_path.name} ({len(prompt)} ids)")
    batches = sample_all(args, loaded, device, prompt, args.max_tokens, None, seed)
    stem = f"{checkpoint_stem(args.checkpoint)}_{prompt_path.stem}"
    save_all(args, loaded, batches, stem, seed, tempo, args.continuation_only)
    return 0
