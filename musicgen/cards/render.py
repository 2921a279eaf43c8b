"""A shipped model's card (checkpoints/<name>/README.md) from its model folder, the training
summary of its export (<name>.export.json) and the JSON files of `musicgen evaluate` (nll.json,
music.json, style.json) under one evaluation folder. Numbers come from those files only, never
typed by hand; the prose about each shipped family (its data and licence, how it was trained,
what its piano rolls show, its limits) is the caller's `CardText`
(scripts/reproduce/write_model_cards.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from musicgen.cards.acceptance import acceptance, maestro_acceptance
from musicgen.cards.band import band_section
from musicgen.checkpoint import load_checkpoint, read_payload
from musicgen.config import Config, config_from_dict
from musicgen.io import atomic_write_text


@dataclass
class CardText:
    """The prose of the cards, per family ("pop909", "maestro", "groove") unless said."""

    data: dict[str, str]  # the training data and its licence
    limits: dict[str, str]
    training: dict[str, str]  # how the (first) run was trained
    fine_tunes: dict[str, list[tuple[str, str]]]  # phases 2, 3, ...: (what changed, how it ran)
    seen: dict[str, str]  # per model: what its piano rolls show (looked at, not computed)
    # per family: kind, preset, nll (the folder under the eval folder), pieces, reference,
    # reproduce (command lines)
    families: dict[str, dict]
    previous_documented: dict[str, dict]  # per model: the replaced model's numbers, quoted
    previous_tokens: int  # what the models they replaced were trained on
    twin: dict[str, str]  # per POP909 model: the model its NLL beyond the crop is set against
    script: str  # the command that rewrites a card, followed by the model's name


def family(cfg: Config) -> str:
    """Which shipped family a config belongs to: pop909, maestro or groove."""
    if cfg.tokenizer == "groove":
        return "groove"
    return "maestro" if "maestro" in cfg.data.path else "pop909"


def precision_note(ckpt: Path) -> str:
    """How the file stores its SPE parameters: float32 since the export policy, float16 before."""
    import torch

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


def tokens_note(info: dict, previous_tokens: int | None = None) -> str:
    """', 9.2 M tokens', with the ratio to `previous_tokens` when given."""
    tokens = info.get("tokens_trained")
    if not tokens:
        return ""
    times = f" ({tokens / previous_tokens:.1f}x the previous models')" if previous_tokens else ""
    return f", {tokens / 1e6:.1f} M tokens{times}"


def speed_note(info: dict) -> str:
    rate = info.get("tokens_per_s")
    return (
        f", {rate:,} tokens/s over the whole run (validation and checkpoints included)"
        if rate
        else ""
    )


def batch_text(cfg: Config) -> str:
    """What one step trains on: crops, or Perceiver windows with their trained positions."""
    b, m = cfg.train.batch_size, cfg.model
    if m.head == "perceiver_s":
        p = m.perceiver
        return f"batch {b} windows of {p.context_len} tokens ({p.n_queries} trained positions each)"
    return f"batch {b} x {cfg.data.crop_len} tokens"


def phase_text(cfg: Config, info: dict, how: str, text: CardText, ratio: bool = True) -> str:
    """One training run: config, steps, tokens, optimiser, wall time and speed."""
    fam = family(cfg)
    previous = text.previous_tokens if ratio and fam == "pop909" else None
    return (
        f"`{cfg.name}` ({text.families[fam]['preset']}): {info['steps_trained']} steps of "
        f"{batch_text(cfg)}{tokens_note(info, previous)} "
        f"(Adam, lr {cfg.optim.lr:g}, {cfg.optim.warmup_steps} warm-up "
        f"steps, min lr {cfg.optim.min_lr:g}; transposition {cfg.data.transpose[0]}.."
        f"{cfg.data.transpose[1]}); {how}. {info['train_minutes']} minutes of wall time on a "
        f"2-core CPU{speed_note(info)}"
    )


def phase_config(phase: dict, root: Path) -> Config | None:
    """A phase's config: kept in its summary (newer exports), else read from its
    checkpoint (a path relative to `root`) when that is still at hand; None when neither is."""
    if "config" in phase:
        return config_from_dict(phase["config"])
    path = root / phase["path"]
    return load_checkpoint(path).config if path.exists() else None


def any_phase_text(
    cfg: Config | None, info: dict, how: str, text: CardText, ratio: bool = True
) -> str:
    """`phase_text`, or for a phase whose config is gone (an older run folder) the
    figures its summary kept."""
    if cfg is not None:
        return phase_text(cfg, info, how, text, ratio)
    return (
        f"{info['steps_trained']} steps{tokens_note(info)}; {how}. {info['train_minutes']} "
        f"minutes of wall time on a 2-core CPU{speed_note(info)} (its run, `{info['path']}`, "
        "is not kept: its settings are in `scripts/reproduce/train_shipped.sh`)"
    )


def phases(info: dict) -> list[dict]:
    """The training phases of an export summary, first to last (a fine-tune's `init_from` chain)."""
    chain = [info]
    while "init_from" in chain[0]:
        chain.insert(0, chain[0]["init_from"])
    return chain


def training_text(cfg: Config, info: dict, text: CardText, root: Path) -> str:
    """The training paragraph; a fine-tuned model (`train.init_from`) describes every phase, the
    configs of the earlier ones read from their checkpoints (paths relative to `root`)."""
    fam = family(cfg)
    shipped = f"Shipped: the checkpoint with the best validation loss (step {info['step']})."
    chain = phases(info)
    if len(chain) == 1:
        return f"{phase_text(cfg, info, text.training[fam], text)}. {shipped}"
    cfgs = [phase_config(p, root) for p in chain[:-1]] + [cfg]
    parts = [f"Phase 1, {any_phase_text(cfgs[0], chain[0], text.training[fam], text)}."]
    for k, (c, p) in enumerate(zip(cfgs[1:], chain[1:], strict=True), start=1):
        tunes = text.fine_tunes.get(fam, [])  # a phase without written prose says what it did
        what, how = tunes[k - 1] if k <= len(tunes) else ("", "continued from that checkpoint")
        parts.append(
            f"Phase {k + 1}, a fine-tune from phase {k}'s best checkpoint "
            f"(`train.init_from`){' ' + what if what else ''}: "
            f"{any_phase_text(c, p, how, text, ratio=False)}."
        )
    total = {"tokens_trained": sum(p.get("tokens_trained") or 0 for p in chain)}
    return (
        f"{len(chain)} phases. "
        + " ".join(parts)
        + f" In all{tokens_note(total, text.previous_tokens if fam == 'pop909' else None)}. "
        + shipped
    )


def article(word: str) -> str:
    return "An" if word[0] in "aeiou" else "A"


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


def intro(folder: Path, loaded, kind: str) -> str:
    """The card's first paragraph: architecture, size, tokens, files and how to load it."""
    name, m = folder.name, loaded.config.model
    params = sum(p.numel() for p in loaded.model.parameters()) / 1e6
    pe = m.pe + (" (gated)" if m.gated and m.pe.endswith("spe") else "")
    spe = {
        "sine_spe": f", K = {m.num_sines} sines, R = {m.num_realizations}",
        "conv_spe": f", P = {m.kernel_size}, R = {m.num_realizations}",
    }.get(m.pe, "")
    return (
        f"{article(kind)} {kind} model: {head_text(m)}a Performer of "
        f"{m.n_layers} layers, d_model "
        f"{m.d_model}, {m.n_heads} heads, FFN {m.d_ff}, {m.feature_map.upper()} features "
        f"({m.n_features}), positional encoding **{pe}**{spe}{local_text(m)}; "
        f"{params:.1f} M parameters; "
        f"{loaded.tokenizer.name} tokens "
        f"(vocabulary {loaded.tokenizer.vocab_size}). Weights in half precision in "
        f"`model.safetensors`{precision_note(folder)} (converted bit for bit from the training "
        "export by `scripts/convert_checkpoint.py`), with `config.json` and `tokenizer.json` "
        f'beside it: `musicgen.load("checkpoints/{name}")` or `--checkpoint checkpoints/{name}`. '
        f"Sampling defaults: {sampling_text(loaded)}."
    )


def sampling_text(loaded, source: bool = True) -> str:
    """'T = 1.0, top-p 0.9 (its own, ...)': what generation uses when no option is given;
    `source=False` leaves out where the setting comes from."""
    import torch

    from musicgen.generation.api import Model
    from musicgen.generation.api.options import describe

    o = Model(loaded, torch.device("cpu"), "").options()  # the rule generation applies
    own = any(v is not None for v in loaded.config.sample.values())
    text = describe(o)
    where = (
        "the model's own, `sample` in config.json, chosen by measurement: docs/evaluation.md"
        if own
        else "the paper's for these tokens"
    )
    return f"{text} ({where})" if source else text


def nll_section(nll: dict, crop: int) -> list[str]:
    """The validation table of an nll.json: within and beyond the training length (the second
    column only where the songs were read past it)."""
    top = next(iter(nll["models"].values()))["max_len"]
    beyond = top > crop
    head = f"| model | songs | within the training length (0-{min(crop, top)}) |"
    lines = [head + (f" beyond it ({crop}-{top}) |" if beyond else ""),
             "|---|---:|---:|" + ("---:|" if beyond else "")]  # fmt: skip
    for label, r in nll["models"].items():
        row = f"| {label} | {nll['songs']} | {r['mean_within']:.3f} |"
        lines.append(row + (f" {r['mean_beyond']:.3f} |" if beyond else ""))
    per_note = [
        f"{label} {r['nll_per_note']:.3f}"
        for label, r in nll["models"].items()
        if r.get("nll_per_note") is not None
    ]
    if per_note:  # total NLL / notes scored: comparable across tokenizations
        lines += ["", f"NLL per note (nats; total NLL / notes scored): {', '.join(per_note)}."]
    return lines + [
        "",
        "Per 128-token segment: `musicgen evaluate nll` (figure in `docs/figures/`).",
        "",
    ]


def head_note(music: dict) -> str:
    """How much of each reference song was measured (`evaluate music --reference-bars`)."""
    bars = music.get("reference_bars")
    return f", each its first {bars} bars from its first note" if bars else ""


def music_section(d: dict, spec: dict, sampling: str = "") -> list[str]:
    """The statistics of a music.json: generated pieces against the reference, mean ± std."""
    lines = [
        "## Music statistics",
        "",
        f"{len(d['files'])} {spec['pieces'].format(sampling=sampling)} against "
        f"{len(d.get('reference_files', []))} "
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
    return lines + [""]


def style_section(d: dict, groove: bool = True) -> list[str]:
    """The time-segment table of a style.json (`musicgen evaluate style`)."""
    from musicgen.generation.api.options import describe

    sampling = describe(d["sampling"])
    songs = (
        f"{len(d['songs'])} test-split trio songs (styles never seen in training)"
        if groove
        else f"{len(d['songs'])} held-out POP909 songs"
    )
    out = [
        f"## Style similarity of continuations ({'unseen styles' if groove else 'held-out songs'}, "
        f"{sampling})",
        "",
        f"{songs}, {d['samples']} sample{'s' if d['samples'] > 1 else ''} each: the first 2 bars "
        "as prompt, continued to "
        f"{d['max_tokens']} tokens at {sampling} with grammar masking; the continuation is cut "
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


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def render_card(folder: Path, ev: Path, text: CardText, root: Path) -> str:
    """The card of the model folder `folder` from the evaluation outputs under `ev`
    (<name>.export.json, the family's nll folder, music_<name>, style_<name>, band_groove,
    groove_style*)."""
    name, loaded = folder.name, load_checkpoint(folder)
    cfg = loaded.config
    fam = family(cfg)
    spec = text.families[fam]
    info = _json(ev / f"{name}.export.json")
    lines = [f"# {name}", "", intro(folder, loaded, spec["kind"]), "", "## Data and licence", ""]
    lines += [f"Trained on {text.data[fam]}", "", "## Training", ""]
    lines += [training_text(cfg, info, text, root), ""]
    lines += ["## Validation: per-position loss (nats/token), held-out songs", ""]
    lines += nll_section(_json(ev / spec["nll"] / "nll.json"), cfg.data.crop_len)
    if (ev / f"music_{name}" / "music.json").exists():
        sampling = sampling_text(loaded, source=False)
        lines += music_section(_json(ev / f"music_{name}" / "music.json"), spec, sampling)
        if fam == "maestro":
            lines += maestro_acceptance(name, ev, text)
    if fam == "pop909":
        lines += acceptance(name, ev, cfg.data.crop_len, text)
        if (ev / f"style_{name}" / "style.json").exists():
            lines += style_section(_json(ev / f"style_{name}" / "style.json"), groove=False)
    if name in text.seen:
        lines += ["## What the piano rolls show", "", text.seen[name], ""]
    if fam == "groove" and (ev / "band_groove" / "music.json").exists():
        band = _json(ev / "band_groove" / "music.json")["band"]
        lines += band_section(band, sampling_text(loaded, source=False))
    for sub in ("groove_style", "groove_style_t1"):
        if fam == "groove" and (ev / sub / "style.json").exists():
            lines += style_section(_json(ev / sub / "style.json"))
    lines += ["## Limitations", "", text.limits[fam], ""]
    lines += ["## Reproduce", "", "```bash", *spec["reproduce"]]
    lines += [f"{text.script} {name}", "```", ""]
    return "\n".join(lines)


def write_cards(root: Path, names: list[str], ev: Path, text: CardText) -> list[Path]:
    """Write root/checkpoints/<name>/README.md for each name; the paths written."""
    written = []
    for name in names:
        folder = root / "checkpoints" / name
        path = folder / "README.md"
        atomic_write_text(path, render_card(folder, ev, text, root))
        written.append(path)
    return written
