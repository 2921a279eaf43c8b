"""Write checkpoints/<name>/README.md (model cards) from the outputs of evaluate_shipped.sh.

    python scripts/write_model_cards.py [--eval out/eval]

Each card states the data and its licence, the architecture, the training run (steps, wall time),
validation loss within and beyond the training length, the evaluation metrics and the commands
that reproduce it. Numbers come from the JSON files only, never typed by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from musicgen.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]

DATA = {
    "remi": "POP909 (Music X Lab; 850 pop songs arranged for piano; MIT licence, "
    "https://github.com/music-x-lab/POP909-Dataset): 811 songs for training, 39 held out "
    "by musicgen's stable hashed split. The weights are a derivative of POP909 and are "
    "shared under the same MIT terms with its attribution.",
    "groove": "the synthetic trio set bundled in `data/trio/` (300 songs: bass, drums, piano; "
    "240/30/30 with test styles never seen in training), built from POP909 chord "
    "annotations (MIT) and Groove MIDI Dataset drum grooves (Magenta, CC BY 4.0; see "
    "`data/trio/README.md`). The weights carry both attributions (CC BY 4.0).",
}

LIMITS = {
    "remi": "A small model trained for about an hour on a CPU: validation loss 2.6-2.7 nats/token, "
    "far from a converged paper-size model. Its pieces keep POP909's pitch, harmony and "
    "rhythm statistics (table above) but have little long-range structure. Chord tokens "
    "are sparse in this REMI variant (see docs/tokenization.md).",
    "groove": "Per track, the continuations follow the prompt's drum groove closely (time-pitch "
    "similarity about 0.85 on the drum track, as high as the real continuation) but "
    "play few bass and piano notes, which often sustain too long: at the paper's "
    "T = 0.6 the model mostly continues the drums alone, hence the low averages above "
    "(`musicgen demo` samples it at T = 1.0). The training set is small (240 songs; "
    "training loss 1.9 against 2.5 on validation: it overfits); a real Groove2Groove-"
    "sized corpus and a larger model are the way to better accompaniments.",
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


def card(name: str, ev: Path) -> str:
    ckpt = ROOT / "checkpoints" / name  # the model folder
    loaded = load_checkpoint(ckpt)
    cfg, m = loaded.config, loaded.config.model
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
        f"A {'pop-piano' if loaded.tokenizer.name == 'remi' else 'groove (bass, drums, piano)'} "
        f"model: a Performer of {m.n_layers} layers, d_model {m.d_model}, {m.n_heads} heads, FFN "
        f"{m.d_ff}, {m.feature_map.upper()} features ({m.n_features}), positional encoding "
        f"**{pe}**{spe}; {params:.1f} M parameters; {loaded.tokenizer.name} tokens "
        f"(vocabulary {loaded.tokenizer.vocab_size}). Weights in half precision in "
        f"`model.safetensors`{precision_note(ckpt)} (converted bit for bit from the training "
        "export by `scripts/convert_checkpoint.py`), with `config.json` and `tokenizer.json` "
        f'beside it: `musicgen.load("checkpoints/{name}")` or `--checkpoint checkpoints/{name}`.',
        "",
        "## Data and licence",
        "",
        f"Trained on {DATA[loaded.tokenizer.name]}",
        "",
        "## Training",
        "",
        f"`{cfg.name}` (configs/{'pop909' if cfg.tokenizer == 'remi' else 'groove'}/small.yaml"
        f" with the overrides in `scripts/train_shipped.sh`): {info['steps_trained']} steps of "
        f"batch {cfg.train.batch_size} x {cfg.data.crop_len} tokens (Adam, lr {cfg.optim.lr:g}, "
        f"{cfg.optim.warmup_steps} warm-up steps, cosine to {cfg.optim.min_lr:g} at step 1000, "
        f"then resumed to step {cfg.train.max_steps} with the cosine recomputed — a warm restart; "
        f"transposition {cfg.data.transpose[0]}..{cfg.data.transpose[1]}), "
        f"{info['train_minutes']} minutes of "
        "wall time on a 2-core CPU shared with other jobs. Shipped: the checkpoint with the best "
        f"validation loss (step {info['step']}).",
        "",
        "## Validation: per-position loss (nats/token), held-out songs",
        "",
    ]
    nll_dir = ev / ("pop909_nll" if loaded.tokenizer.name == "remi" else "groove_nll")
    nll = json.loads((nll_dir / "nll.json").read_text())
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
            "8 pieces of 16 bars from scratch (T = 1.2, top-p 0.9, grammar on, seed 0) "
            "against 8 held-out POP909 songs (`musicgen evaluate music`):",
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
    for folder in ("groove_style", "groove_style_t1"):
        style = ev / folder / "style.json"
        if loaded.tokenizer.name == "groove" and style.exists():
            lines += style_section(json.loads(style.read_text()))
    lines += ["## Limitations", "", LIMITS[loaded.tokenizer.name], ""]
    lines += [
        "## Reproduce",
        "",
        "```bash",
        "scripts/train_shipped.sh      # the three shipped runs side by side",
        "scripts/evaluate_shipped.sh   # export to checkpoints/ and measure",
        "python scripts/write_model_cards.py",
        "```",
        "",
    ]
    return "\n".join(lines)


def style_section(d: dict) -> list[str]:
    t = d["sampling"]["temperature"]
    out = [
        f"## Style similarity of continuations (unseen styles, T = {t:g})",
        "",
        f"{len(d['songs'])} test-split trio songs (styles never seen in training), "
        f"{d['samples']} samples each: the first 2 bars as prompt, continued to "
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
    args = ap.parse_args()
    for name in ("pop909_sine_spe_gated", "pop909_ape", "groove_sine_spe_gated"):
        path = ROOT / "checkpoints" / name / "README.md"
        path.write_text(card(name, args.eval))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
