"""Write checkpoints/<name>/README.md (model cards) from the outputs of evaluate_shipped.sh.

    python scripts/reproduce/write_model_cards.py [--eval out/eval] [NAME ...]

Each card states the data and its licence, the architecture, the training run (steps, wall time),
validation loss within and beyond the training length, the evaluation metrics and the commands
that reproduce it. Numbers come from the JSON files only, never typed by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from musicgen.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]

DATA = {
    "pop909": "POP909 (Music X Lab; 850 pop songs arranged for piano; MIT licence, "
    "https://github.com/music-x-lab/POP909-Dataset): 811 songs for training, 39 held out "
    "by musicgen's stable hashed split. The weights are a derivative of POP909 and are "
    "shared under the same MIT terms with its attribution.",
    "maestro": "ASAP's 595 MAESTRO v3 performances (Foscarin et al. 2020, ASAP, from Hawthorne et "
    "al. 2019, MAESTRO; `../shared/data/asap_maestro`), split per piece: 505 pieces for "
    "training, 60 validation, 29 test (one duplicate skipped), tokenized with the expressive "
    "REMI (`configs/tokenizer/remi_expressive.yaml`: 16 positions per beat, 32 velocities, "
    "pedal folded into durations). MAESTRO and ASAP are CC BY-NC-SA 4.0, so these weights are "
    "too: **non-commercial use only, share-alike, with attribution** to MAESTRO (Google "
    "Magenta) and ASAP.",
    "groove": "the synthetic trio set bundled in `data/trio/` (300 songs: bass, drums, piano; "
    "240/30/30 with test styles never seen in training), built from POP909 chord "
    "annotations (MIT) and Groove MIDI Dataset drum grooves (Magenta, CC BY 4.0; see "
    "`data/trio/README.md`). The weights carry both attributions (CC BY 4.0).",
}

LIMITS = {
    "pop909": "A small model (4.9 M parameters, 15.8 M training tokens on a CPU), far from a "
    "converged paper-size model. It knows where it is in the bar and when the notes at one onset "
    "make a full chord (stacked onsets above; `scripts/experiments/onset_hazard.py`), but it does not yet "
    "repeat itself as songs do. At the default T = 1.2 no generated bar repeats an earlier one "
    "exactly (the first 16 bars of the held-out songs: 2.6 %; whole songs, with their choruses: "
    "20 %), and 7-14 % of bars bring back an earlier bar's rhythm against 30 % in those 16-bar "
    "heads. Colder sampling brings the figures back: the sineSPE model at T = 1.0 repeats the "
    "rhythm of 25 % of its bars, at T = 0.8 50 % (pitches more in key, 0.99, but fewer notes per "
    "onset, 1.69 against 1.91, and then mostly accompaniment without a top line). The windowed "
    "softmax blocks (phase 4) can copy a sequence they have seen (`scripts/experiments/copy_probe.py`: NLL "
    "0.03 on a repeat), yet on the held-out songs the notes of a bar that exactly repeats an "
    "earlier bar are predicted only 0.06-0.11 nats better than those of a new bar "
    "(`scripts/experiments/repeat_nll.py`): in these songs an exact repeat lies a median 883 tokens (about "
    "14 bars) back, beyond the 512-position window for four repeats in five, and the repeats "
    "within reach (0.7 % of the Position and Pitch ids) are too rare a signal for 1000 "
    "fine-tuning steps (docs/evaluation.md, 'Does a model copy?'). Duplicate notes are 0 by "
    "construction: the grammar lets a pitch sound once per position, and the mass the model "
    "still puts on such a pitch is counted as forbidden above.",
    "maestro": "Trained for the comparison of docs/perceiver.md, not for quality: 4 blocks of "
    "d_model 256 and 0.8 M target tokens (about an eighth of one pass over the training "
    "pieces). It does not yet play music: its onsets stack (3.3 notes per sixteenth-note onset "
    "against 1.6 in the real performances, 9.6 % of onsets with 8 or more), its pitches leave the "
    "key (scale consistency 0.61 against 0.89), and long generations collapse into brief chords "
    "at the start of each window. Maestro has one tempo per file (120 bpm), so a 'bar' is a "
    "2-second window. The repetition claim of the Perceiver S paper could not be tested at this "
    "scale: no arm repeated whole bars (docs/perceiver.md).",
    "groove": "Per track, the continuations follow the prompt's drum groove closely (time-pitch "
    "similarity about 0.85 on the drum track, as high as the real continuation) but "
    "play few bass and piano notes, which often sustain too long: at the paper's "
    "T = 0.6 the model mostly continues the drums alone, hence the low averages above "
    "(`musicgen demo` samples it at T = 1.0). The training set is small (240 songs; "
    "training loss 1.9 against 2.5 on validation: it overfits); a real Groove2Groove-"
    "sized corpus and a larger model are the way to better accompaniments.",
}


SHIPPED = ("pop909_sine_spe_gated", "pop909_ape", "groove_sine_spe_gated", "maestro_perceiver_s")

# How each shipped run was trained (the numbers come from the run's log through export.json).
TRAINING = {
    "pop909": "one cosine schedule over all steps; musical-position embeddings on (position "
    "in bar, beat, bar mod 4; docs/model.md). The two POP909 runs trained side by side, one "
    "thread each, with nothing else on the machine (`scripts/reproduce/train_shipped.sh pop909`); the "
    "sineSPE run, the slower, was stopped at step 3672 when the APE run ended and resumed "
    "(`--resume`) on two threads for its last 828 steps",
    "maestro": "the Perceiver S arm of the comparison at equal compute (docs/perceiver.md), "
    "seed 1, two threads, the only job on the machine (`SEED=1 scripts/reproduce/compare_perceiver.sh`)",
    "groove": "cosine to the minimum at step 1000, then resumed to step 1500 with the cosine "
    "recomputed (a warm restart), on a machine shared with other jobs "
    "(`scripts/reproduce/train_shipped.sh groove`)",
}

# Phases 2 to 4 of the POP909 pair (scripts/reproduce/train_shipped.sh): what each fine-tune changed, and
# how it ran
FINE_TUNES = [
    (
        "with one input added, the count of notes the current onset already holds "
        "(`model.musical.notes_at_onset`, a zero-initialised embedding; docs/model.md), on the "
        "data as prepared since notes of one pitch at one position are merged",
        "one cosine schedule; the two runs side by side, one thread each, with beside them only "
        "one-thread helper jobs for the first minutes and, at the lowest CPU priority (nice 19), "
        "data preparation and tests",
    ),
    (
        "on crops of 1024 tokens (twice the bars to repeat from) that start on bars 0, 4, 8, ... "
        "of the song (`data.start_bar_every: 4`), so the bar-mod-4 embedding counts the song's "
        "own bars",
        "one cosine schedule; the two runs side by side, one thread each, with beside them two "
        "short one-thread tests at the lowest CPU priority (nice 19) and, once the APE run had "
        "ended (the sineSPE run's last 17 minutes), at nice 19 a one-thread benchmark of "
        "`torch.compile` (whose compilation starts more processes) and the APE model's "
        "evaluation",
    ),
    (
        "with blocks 2 and 4 turned into exact causal softmax attention over the last 512 "
        "positions with rotary positions (`model.local_layers`, `model.local_window`, "
        "`model.local_rope`; docs/model.md): attention that can be sharp enough to copy a bar, "
        'which FAVOR+ is not (docs/evaluation.md, "Does a model copy?"); the two blocks keep '
        "their learned q, k, v and output weights",
        "one cosine schedule; the two runs side by side, one thread each, with beside them only "
        "one-thread tests at the lowest CPU priority (nice 19): a 2-minute test module and, as "
        "the APE run ended, the 3-minute test suite",
    ),
]

# What the piano rolls of the pieces in out/eval/samples_<name> show (looked at, not computed).
SEEN = {
    "pop909_ape": "Pieces from scratch: no note pile-ups; a top line in MIDI 70-80 that runs "
    "through most of the piece in single notes and short held notes over two- and three-note "
    "chord tones in the middle register and a low note (MIDI 40-55) on or near most downbeats: "
    "the layout of a melody over an accompaniment, but the top line wanders rather than "
    "phrases and no figure returns bar by bar. Continuations: the 2 prompt bars come back "
    "unchanged; the prompt's register and density carry on, its figures do not return.",
    "maestro_perceiver_s": "Pieces from scratch (4096 tokens, about 100 two-second windows): "
    "for the first 40 windows or so, clusters of chord tones and scattered notes over MIDI "
    "40-85 with no voice that continues; after that the texture collapses into brief chords "
    "struck at the start of each window with little between them. The real performances it is "
    "compared with (e.g. a Bach fugue) move in continuous, overlapping voices; nothing of that "
    "is there yet.",
    "pop909_sine_spe_gated": "Pieces from scratch (16 at T = 1.2, and `make demo`'s): no note "
    "pile-ups; some open with a bar or two of long held chords, then single notes and two- to "
    "three-note chords over MIDI 40-80, an upper voice in MIDI 65-80 for stretches of two to "
    "four bars, low notes (MIDI 40-55) held under many bar starts; no figure repeats bar by bar "
    "at this temperature. At T = 0.8 the pieces turn into a regular broken-chord accompaniment "
    "in MIDI 35-65 whose rhythm comes back in half of the bars, without a line on top. "
    "Continuations (song 005 of `make demo`): the 2 prompt bars come back unchanged; the "
    "prompt's high melody register (MIDI 75-90) carries on in scattered notes for about six "
    "bars over chord tones and downbeat bass notes, then the texture settles in the middle "
    "register; the prompt's figures do not return.",
}


def precision_note(ckpt: Path) -> str:
    """How the file stores its SPE parameters: float32 since the export policy, float16 before."""
    import torch

    from musicgen.checkpoint import read_payload

    stored = read_payload(ckpt)["model"]  # a .pt file or a model folder
    spe = [v for k, v in stored.items() if k.startswith("spe.")]
    if not spe:
        return ""
    if spe[0].dtype == torch.float32:
        return "; SPE parameters and gates in float32"
    return (
        "; exported before SPE parameters were kept in float32, so its SPE frequencies, "
        "phases, gains and gates are float16-rounded too (every number here is of this file)"
    )


PREVIOUS_TOKENS = 1500 * 4 * 512  # what the models shipped before issue #12 were trained on


def tokens_note(info: dict, ratio: bool = True) -> str:
    tokens = info.get("tokens_trained")
    if not tokens:
        return ""
    times = f" ({tokens / PREVIOUS_TOKENS:.1f}x the previous models')" if ratio else ""
    return f", {tokens / 1e6:.1f} M tokens{times}"


def speed_note(info: dict) -> str:
    rate = info.get("tokens_per_s")
    return (
        f", {rate:,} tokens/s over the whole run (validation and checkpoints included)"
        if rate
        else ""
    )


def family(cfg) -> str:
    """Which shipped family a config belongs to: pop909, maestro or groove."""
    if cfg.tokenizer == "groove":
        return "groove"
    return "maestro" if "maestro" in cfg.data.path else "pop909"


# per family: what it is, its preset, where evaluate_shipped.sh / compare_perceiver.sh left the
# numbers (under --eval), what the generated pieces were and how to reproduce it
FAMILIES = {
    "pop909": {
        "kind": "pop-piano",
        "preset": "configs/pop909/small.yaml with the overrides in `scripts/reproduce/train_shipped.sh`",
        "nll": "pop909_nll",
        "pieces": "pieces of 16 bars from scratch (T = 1.2, top-p 0.9, grammar on, seed 0)",
        "reference": "held-out POP909 songs",
        "reproduce": [
            "scripts/reproduce/train_shipped.sh pop909      # trains into runs/ (rerun to resume)",
            "PREVIOUS_FULL=1 scripts/reproduce/evaluate_shipped.sh pop909   # export, measure",
        ],
    },
    "maestro": {
        "kind": "expressive classical-piano",
        "preset": "configs/maestro/compare_perceiver_s.yaml, `train.seed=1`",
        "nll": "maestro_nll",
        "pieces": "pieces of 4096 tokens from scratch (T = 1.2, top-p 0.9, grammar on, seed 0)",
        "reference": "held-out MAESTRO performances (their first 4096 tokens)",
        "reproduce": [
            'SEED=1 ARMS="perceiver_s perceiver_ar" RUNS=runs/perceiver_compare_seed1 \\',
            "  OUT=out/perceiver_compare_seed1 scripts/reproduce/compare_perceiver.sh   # train, measure",
            "scripts/reproduce/evaluate_shipped.sh maestro   # export to checkpoints/",
        ],
    },
    "groove": {
        "kind": "groove (bass, drums, piano)",
        "preset": "configs/groove/small.yaml with the overrides in `scripts/reproduce/train_shipped.sh`",
        "nll": "groove_nll",
        "pieces": "",
        "reference": "",
        "reproduce": [
            "scripts/reproduce/train_shipped.sh groove      # trains into runs/ (rerun to resume)",
            "scripts/reproduce/evaluate_shipped.sh groove   # export to checkpoints/, measure",
        ],
    },
}


def phase_text(cfg, info: dict, how: str, ratio: bool = True) -> str:
    """One training run: config, steps, tokens, optimiser, wall time and speed."""
    return (
        f"`{cfg.name}` ({FAMILIES[family(cfg)]['preset']}): {info['steps_trained']} steps of "
        f"{batch_text(cfg)}{tokens_note(info, ratio and family(cfg) == 'pop909')} "
        f"(Adam, lr {cfg.optim.lr:g}, {cfg.optim.warmup_steps} warm-up "
        f"steps, min lr {cfg.optim.min_lr:g}; transposition {cfg.data.transpose[0]}.."
        f"{cfg.data.transpose[1]}); {how}. {info['train_minutes']} minutes of wall time on a "
        f"2-core CPU{speed_note(info)}"
    )


def batch_text(cfg) -> str:
    """What one step trains on: crops, or Perceiver windows with their trained positions."""
    b, m = cfg.train.batch_size, cfg.model
    if m.head == "perceiver_s":
        p = m.perceiver
        return f"batch {b} windows of {p.context_len} tokens ({p.n_queries} trained positions each)"
    return f"batch {b} x {cfg.data.crop_len} tokens"


def phases(info: dict) -> list[dict]:
    """The training phases of an export summary, first to last (a fine-tune's `init_from` chain)."""
    chain = [info]
    while "init_from" in chain[0]:
        chain.insert(0, chain[0]["init_from"])
    return chain


def training_text(cfg, info: dict, fam: str) -> str:
    """The training paragraph; a fine-tuned model (`train.init_from`) describes every phase."""
    shipped = f"Shipped: the checkpoint with the best validation loss (step {info['step']})."
    chain = phases(info)
    if len(chain) == 1:
        return f"{phase_text(cfg, info, TRAINING[fam])}. {shipped}"
    cfgs = [load_checkpoint(ROOT / p["path"]).config for p in chain[:-1]] + [cfg]
    parts = [f"Phase 1, {phase_text(cfgs[0], chain[0], TRAINING[fam])}."]
    for k, (c, p) in enumerate(zip(cfgs[1:], chain[1:], strict=True), start=1):
        what, how = FINE_TUNES[k - 1]
        parts.append(
            f"Phase {k + 1}, a fine-tune from phase {k}'s best checkpoint "
            f"(`train.init_from`) {what}: {phase_text(c, p, how, ratio=False)}."
        )
    total = {"tokens_trained": sum(p["tokens_trained"] for p in chain)}
    return f"{len(chain)} phases. " + " ".join(parts) + f" In all{tokens_note(total)}. {shipped}"


def card(name: str, ev: Path) -> str:
    ckpt = ROOT / "checkpoints" / name  # the model folder
    loaded = load_checkpoint(ckpt)
    cfg, m = loaded.config, loaded.config.model
    fam, spec = family(cfg), FAMILIES[family(cfg)]
    info = json.loads((ev / f"{name}.export.json").read_text())
    params = sum(p.numel() for p in loaded.model.parameters()) / 1e6
    pe = m.pe + (" (gated)" if m.gated and m.pe.endswith("spe") else "")
    spe = {
        "sine_spe": f", K = {m.num_sines} sines, R = {m.num_realizations}",
        "conv_spe": f", P = {m.kernel_size}, R = {m.num_realizations}",
    }.get(m.pe, "")
    lines = [
        f"# {name}",
        "",
        f"{article(spec['kind'])} {spec['kind']} model: {head_text(m)}a Performer of "
        f"{m.n_layers} layers, d_model "
        f"{m.d_model}, {m.n_heads} heads, FFN {m.d_ff}, {m.feature_map.upper()} features "
        f"({m.n_features}), positional encoding **{pe}**{spe}{local_text(m)}; "
        f"{params:.1f} M parameters; "
        f"{loaded.tokenizer.name} tokens "
        f"(vocabulary {loaded.tokenizer.vocab_size}). Weights in half precision in "
        f"`model.safetensors`{precision_note(ckpt)} (converted bit for bit from the training "
        "export by `scripts/convert_checkpoint.py`), with `config.json` and `tokenizer.json` "
        f'beside it: `musicgen.load("checkpoints/{name}")` or `--checkpoint checkpoints/{name}`.',
        "",
        "## Data and licence",
        "",
        f"Trained on {DATA[fam]}",
        "",
        "## Training",
        "",
        training_text(loaded.config, info, fam),
        "",
        "## Validation: per-position loss (nats/token), held-out songs",
        "",
    ]
    nll = json.loads((ev / spec["nll"] / "nll.json").read_text())
    crop, top = cfg.data.crop_len, next(iter(nll["models"].values()))["max_len"]
    lines += [
        f"| model | songs | within the training length (0-{crop}) | beyond it ({crop}-{top}) |",
        "|---|---:|---:|---:|",
    ]
    for label, r in nll["models"].items():
        lines.append(
            f"| {label} | {nll['songs']} | {r['mean_within']:.3f} | {r['mean_beyond']:.3f} |"
        )
    per_note = [
        f"{label} {r['nll_per_note']:.3f}"
        for label, r in nll["models"].items()
        if r.get("nll_per_note") is not None
    ]
    if per_note:  # total NLL / notes scored: comparable across tokenizations
        lines += ["", f"NLL per note (nats; total NLL / notes scored): {', '.join(per_note)}."]
    lines += ["", "Per 128-token segment: `musicgen evaluate nll` (figure in `docs/figures/`).", ""]
    music = ev / f"music_{name}" / "music.json"
    if music.exists():
        d = json.loads(music.read_text())
        lines += [
            "## Music statistics",
            "",
            f"{len(d['files'])} {spec['pieces']} against {len(d.get('reference_files', []))} "
            f"{spec['reference']}{head_note(d)} (`musicgen evaluate music`; mean ± std over "
            "pieces):",
            "",
            "| statistic | generated | held-out songs |",
            "|---|---:|---:|",
        ]
        for key, g in d["generated"].items():
            r = d["reference"].get(key, {"mean": float("nan"), "std": float("nan")})
            lines.append(
                f"| {key} | {g['mean']:.3f} ± {g['std']:.3f} | {r['mean']:.3f} ± {r['std']:.3f} |"
            )
        lines.append("")
    if fam == "pop909":
        lines += acceptance(name, ev, cfg.data.crop_len)
        if (ev / f"style_{name}" / "style.json").exists():
            style = json.loads((ev / f"style_{name}" / "style.json").read_text())
            lines += style_section(style, groove=False)
    if name in SEEN:
        lines += ["## What the piano rolls show", "", SEEN[name], ""]
    for folder in ("groove_style", "groove_style_t1"):
        style = ev / folder / "style.json"
        if fam == "groove" and style.exists():
            lines += style_section(json.loads(style.read_text()))
    lines += ["## Limitations", "", LIMITS[fam], ""]
    lines += ["## Reproduce", "", "```bash", *spec["reproduce"]]
    lines += [f"python scripts/reproduce/write_model_cards.py {name}", "```", ""]
    return "\n".join(lines)


def article(word: str) -> str:
    return "An" if word[0] in "aeiou" else "A"


def head_note(music: dict) -> str:
    """How much of each reference song was measured (`evaluate music --reference-bars`)."""
    bars = music.get("reference_bars")
    return f", each its first {bars} bars from its first note" if bars else ""


def local_text(m) -> str:
    """The windowed softmax blocks in words (empty without them)."""
    if not m.local_layers:
        return ""
    blocks = " and ".join(str(i) for i in m.local_layers)
    rope = " with rotary positions" if m.local_rope else ""
    return (
        f"; blocks {blocks} exact causal softmax attention over the last {m.local_window} "
        f"positions{rope} (`model.local_layers`)"
    )


def head_text(m) -> str:
    """The Perceiver-S head in words (empty for the plain Performer)."""
    if m.head != "perceiver_s":
        return ""
    p = m.perceiver
    return (
        f"**Perceiver S** (causal and scale-masked softmax cross-attention over a window of m = "
        f"{p.context_len} tokens, n = {p.n_queries} latents, effective segmentation) over "
    )


def _entry(nll: dict, name: str) -> dict:
    """The nll.json entry of the checkpoint folder called `name`."""
    return next(r for r in nll["models"].values() if Path(r["checkpoint"]).name == name)


def _quarters(style: dict) -> tuple[int, list[dict], list[dict]]:
    """Quarters where the continuations' time-pitch similarity reaches the other-song baseline."""
    tp, base = style["summary"]["time_pitch"], style["baseline_summary"]["time_pitch"]
    return sum(a["mean"] >= b["mean"] for a, b in zip(tp, base, strict=True)), tp, base


# The replaced models' texture and continuation numbers as docs/evaluation.md records them
# (same commands; 8 pieces, 10 prompts): quoted when PREVIOUS_FULL=1 did not measure them again.
PREVIOUS_DOCUMENTED = {
    "pop909_sine_spe_gated": {
        "stacked": "15.4 % (docs/evaluation.md)",
        "duplicates": "20.4 % (docs/evaluation.md)",
        "kept": "0/20 with the old prompt cut; 20/20 with today's (README)",
        "quarters": "0 of 4 (0.44 / 0.36 / 0.40 / 0.47 vs 0.64 / 0.68 / 0.70 / 0.73; "
        "docs/evaluation.md)",
    },
    "pop909_ape": {
        "stacked": "12.4 % (docs/evaluation.md)",
        "duplicates": "15.4 % (docs/evaluation.md)",
        "kept": "0/20 with the old prompt cut (issue #12)",
    },
}


def _previous(ev: Path, name: str) -> dict:
    """The replaced model's texture and continuation numbers, measured by the same commands
    (with today's prompt builder) when evaluate_shipped.sh ran them (PREVIOUS_FULL=1)."""
    out = dict(PREVIOUS_DOCUMENTED.get(name, {}))
    music = ev / f"music_previous_{name}" / "music.json"
    if music.exists():
        g = json.loads(music.read_text())["generated"]
        out["stacked"] = _pct(g["stacked_onset_rate"]["mean"])
        out["duplicates"] = _pct(g["duplicate_note_rate"]["mean"])
    style = ev / f"style_previous_{name}" / "style.json"
    if style.exists():
        d = json.loads(style.read_text())
        k = d["prompts_kept"]
        out["kept"] = f"{k['written']}/{k['samples']} / {k['decoded']}/{k['samples']}"
        q, tp, base = _quarters(d)
        out["quarters"] = f"{q} of 4 ({_means(tp)} vs {_means(base)})"
    return out


def _means(segments: list[dict]) -> str:
    return " / ".join(f"{seg['mean']:.2f}" for seg in segments)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _forbidden(fm: dict) -> str:
    """'5.4 % (Pitch 5.2 %, Position 0.2 %)': Position = a position behind the current one (what
    issue #12 measured), Pitch = one already played at this position (forbidden since
    merge_duplicates)."""
    kinds = sorted(fm.get("after_note_by_kind", {}).items(), key=lambda kv: -kv[1])
    parts = ", ".join(f"{k} {100 * v:.2f} %" for k, v in kinds if v >= 5e-5)
    return _pct(fm["after_note"]) + (f" ({parts})" if parts else "")


def acceptance(name: str, ev: Path, crop: int) -> list[str]:
    """Issue #12's acceptance table: this model against the target and the model it replaced."""
    nll = json.loads((ev / "pop909_nll" / "nll.json").read_text())
    me, twin = _entry(nll, name), _entry(nll, "pop909_ape" if name != "pop909_ape" else SHIPPED[0])
    prev_path = ev / "pop909_nll_previous" / "nll.json"
    prev = _entry(json.loads(prev_path.read_text()), name) if prev_path.exists() else None
    music = json.loads((ev / f"music_{name}" / "music.json").read_text())
    style = json.loads((ev / f"style_{name}" / "style.json").read_text())
    g = music["generated"]
    kept = style["prompts_kept"]
    old = _previous(ev, name)
    quarters, tp, base = _quarters(style)
    rows = [
        (
            "probability on forbidden tokens after a note (today's grammar; by kind of token)",
            "≤ 5 %",
            _forbidden(me["forbidden_mass"]),
            _forbidden(prev["forbidden_mass"]) if prev else "n/a",
        ),
        (
            "generated onsets with ≥ 8 notes",
            "≤ 1 %",
            _pct(g["stacked_onset_rate"]["mean"]),
            old.get("stacked", "n/a"),
        ),
        (
            "duplicate (onset, pitch) notes",
            "≤ 5 %",
            _pct(g["duplicate_note_rate"]["mean"]),
            old.get("duplicates", "n/a"),
        ),
        (
            f"NLL per note, {nll['songs']} held-out songs, first {me['max_len']} tokens",
            "≥ 10 % below the previous model",
            f"{me['nll_per_note']:.2f}"
            + (
                f" ({100 * (1 - me['nll_per_note'] / prev['nll_per_note']):.1f} % below)"
                if prev
                else ""
            ),
            f"{prev['nll_per_note']:.2f} (its own, detected chords)" if prev else "n/a",
        ),
        (
            "2-bar prompts kept note for note (written files / model's own ids)",
            "100 %",
            f"{kept['written']}/{kept['samples']} / {kept['decoded']}/{kept['samples']}",
            old.get("kept", "n/a"),
        ),
        (
            "quarters where continuation time-pitch ≥ other-song baseline",
            "4 of 4",
            f"{quarters} of 4 ({_means(tp)} vs {_means(base)})",
            old.get("quarters", "n/a"),
        ),
        (
            f"NLL beyond the training length ({crop}-{me['max_len']}), this model vs its twin",
            "SPE below APE",
            f"{me['mean_beyond']:.3f} vs {twin['mean_beyond']:.3f}",
            f"{prev['mean_beyond']:.3f} (beyond its {prev['crop_len']})" if prev else "n/a",
        ),
    ]
    out = [
        "## Acceptance (issue #12), measured on the held-out songs",
        "",
        "| measure | target | this model | the model it replaced |",
        "|---|---|---|---|",
    ]
    out += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return out + [""]


def style_section(d: dict, groove: bool = True) -> list[str]:
    t = d["sampling"]["temperature"]
    songs = (
        f"{len(d['songs'])} test-split trio songs (styles never seen in training)"
        if groove
        else f"{len(d['songs'])} held-out POP909 songs"
    )
    out = [
        f"## Style similarity of continuations ({'unseen styles' if groove else 'held-out songs'}, "
        f"T = {t:g})",
        "",
        f"{songs}, {d['samples']} sample{'s' if d['samples'] > 1 else ''} each: the first 2 bars "
        "as prompt, continued to "
        f"{d['max_tokens']} tokens at T = {t:g} with grammar masking; the continuation is cut "
        "into 4 equal time segments, each scored against the whole source song by cosine "
        "similarity of style histograms (`musicgen evaluate style`):",
        "",
        "| feature | segment 1 | segment 2 | segment 3 | segment 4 |",
        "|---|---:|---:|---:|---:|",
    ]
    for feat, segs in d["summary"].items():
        cells = [f"{s['mean']:.3f} ± {s['std']:.3f}" for s in segs]
        out.append(f"| {feat}, sampled | " + " | ".join(cells) + " |")
        ref = [f"{s['mean']:.3f}" for s in d["reference_summary"][feat]]
        out.append(f"| {feat}, the song's real continuation | " + " | ".join(ref) + " |")
        if feat in d.get("baseline_summary", {}):  # evaluate style since the other-song baseline
            base = [
                "n/a" if s["mean"] is None else f"{s['mean']:.3f}"
                for s in d["baseline_summary"][feat]
            ]
            out.append(
                f"| {feat}, an unrelated song's real continuation | " + " | ".join(base) + " |"
            )
    out.append("")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", type=Path, default=ROOT / "out" / "eval")
    ap.add_argument("names", nargs="*", default=list(SHIPPED), help="cards to write")
    args = ap.parse_args()
    for name in args.names:
        path = ROOT / "checkpoints" / name / "README.md"
        path.write_text(card(name, args.eval))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
