"""The measured half of `scripts/bench/gpu_check.sh`: paper-size bf16 training, parallel vs
recurrent agreement, generation speed; writes the "gpu check" section of docs/benchmarks.md.

    python scripts/bench/gpu_check.py --tests "310 passed in 95 s"       # on a CUDA machine
    GPU_CHECK_DRY=1 python scripts/bench/gpu_check.py --write /tmp/b.md  # CPU, tiny: the code paths

1. `musicgen.train.train` on the bundled POP909 songs (prepared into a temporary folder) with
   configs/pop909/sine_spe_gated.yaml (the paper's 24-layer gated sineSPE model, 2048-token crops,
   batch 4), bf16 autocast, `--steps` steps: tokens/s from the trainer's own log (the last record,
   over the whole run), wall time per step, peak CUDA memory (torch.cuda.max_memory_allocated).
2. The trained model, parallel forward vs `step` one token at a time with the same SPE noise, on
   `--agree-len` tokens, in fp32 and under bf16 autocast: largest |log-prob difference| and the
   share of positions whose argmax agrees.
3. `generation.decoding.sample.generate` (grammar on, T = 1) at batch 1 and 8 under bf16:
   sampled tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "bench"))

from benchlib import machine, write_section  # noqa: E402

import musicgen  # noqa: E402
from musicgen.config import load_config  # noqa: E402
from musicgen.data.prepare import prepare  # noqa: E402
from musicgen.train.log import read_log  # noqa: E402
from musicgen.train.run import train  # noqa: E402

SECTION = "## gpu check"
CONFIG = ROOT / "configs" / "pop909" / "sine_spe_gated.yaml"
DRY = os.environ.get("GPU_CHECK_DRY") == "1"  # CPU, tiny sizes: exercises every code path
TINY = [
    "model.n_layers=2",
    "model.d_model=64",
    "model.n_heads=2",
    "model.d_ff=128",
    "model.n_features=16",
    "model.num_realizations=8",
    "data.crop_len=128",
    "train.val_max_len=256",
]


def prepared_songs(tmp: Path) -> Path:
    """The bundled POP909 songs: three for training, one held out."""
    songs = sorted((ROOT / "tests" / "data" / "pop909").glob("*/*.mid"))
    for i, f in enumerate(songs):
        split = tmp / "midi" / ("validation" if i == len(songs) - 1 else "train")
        split.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, split / f.name)
    prepare("folder", tmp / "midi", tmp / "prepared", tokenizer="remi", workers=1)
    return tmp / "prepared"


def training(tmp: Path, device: str, steps: int, minutes: float):
    overrides = [
        f"train.max_steps={steps}",
        f"train.device={device}",
        f"train.max_minutes={minutes}",
        "train.precision=bf16",
        f"train.val_every={steps}",
        f"train.ckpt_every={steps}",
        "train.val_songs=1",
        "train.val_seeds=1",
        "log.every=1",
        "optim.warmup_steps=20",
        *(TINY if DRY else []),
    ]
    cfg = load_config(CONFIG, overrides)
    cfg.data.path = str(prepared_songs(tmp))
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    result = train(cfg, tmp / "run")
    wall = time.perf_counter() - t0
    rows = read_log(tmp / "run")
    logged = [r for r in rows if r["kind"] == "train"]
    last = logged[-1]
    val = [r for r in rows if r["kind"] == "val"][-1]
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
    info = {
        "steps": result.step,
        "layers": cfg.model.n_layers,
        "d_model": cfg.model.d_model,
        "crop": cfg.data.crop_len,
        "batch": cfg.train.batch_size,
        "params_m": sum(p.numel() for p in result.model.parameters()) / 1e6,
        "tok_s": last["tok_per_s"],
        "s_per_step": wall / result.step,
        "peak_gib": peak,
        "first_loss": logged[0]["loss"],
        "last_loss": last["loss"],
        "val_loss": val["loss"],
        "precision": "bf16",
        "max_minutes": minutes,
    }
    return result.model.eval(), info


@torch.no_grad()
def agreement(model, device: str, n: int) -> dict:
    """Parallel forward vs recurrent steps with one SPE noise draw, fp32 and bf16 autocast."""
    ids = torch.randint(3, model.cfg.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    out, ref = {}, None
    for name, dtype in (("fp32", None), ("bf16", torch.bfloat16)):
        ctx = (
            torch.autocast(device, dtype=dtype) if dtype else torch.autocast(device, enabled=False)
        )
        with ctx:
            full = model(ids, noise=model.new_noise(device, seed=3)).float()  # (1, n, V)
            state, steps = model.init_state(1, device, seed=3), []
            for t in range(n):
                logits, state = model.step(ids[:, t], state)
                steps.append(logits.float())
        par, rec = full.log_softmax(-1), torch.stack(steps, 1).log_softmax(-1)
        ref = par if ref is None else ref  # fp32 parallel: the scale of bf16's own rounding
        out[name] = {
            "max_abs_logp": float((par - rec).abs().max()),
            "vs_fp32": float((par - ref).abs().max()),
            "argmax_agree": float((par.argmax(-1) == rec.argmax(-1)).float().mean()),
        }
    return out


def generation(model: musicgen.Model, device: str, tokens: int) -> dict:
    """Sampling speed through the API (`Model.pieces`, plain sampling at T = 1), bf16."""
    out = {}
    plain = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "repeat": 0.0}
    for batch in (1, 8):
        with torch.autocast(device, dtype=torch.bfloat16):
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            done = list(model.pieces(batch, max_tokens=tokens, seed=0, batch_size=batch, **plain))
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - t0
        sampled = sum(g.sampled for g in done)
        out[batch] = {"sampled": sampled, "seconds": seconds, "tok_s": sampled / seconds}
    return out


def write(
    path: str, device: str, tests: str, tr: dict, agree: dict, gen: dict, seconds: float
) -> None:
    gpu = torch.cuda.get_device_name() if device == "cuda" else "the CPU (GPU_CHECK_DRY dry run)"
    peak = f"{tr['peak_gib']:.2f} GiB" if device == "cuda" else "n/a (CPU)"
    lines = [
        SECTION,
        "",
        f"`bash scripts/bench/gpu_check.sh` on {gpu}; {machine()}; {seconds / 60:.1f} min for the "
        "measurements below.",
        "",
        f"Test suite with MUSICGEN_TEST_DEVICE={device}: {tests}.",
        "",
        f"Training: configs/pop909/sine_spe_gated.yaml ({tr['layers']} layers, d_model "
        f"{tr['d_model']}, {tr['params_m']:.1f} M parameters), {tr['precision']}, batch "
        f"{tr['batch']} x {tr['crop']} tokens, {tr['steps']} steps on the 3 bundled POP909 "
        "songs, at most "
        f"{tr['max_minutes']:g} min (loss from "
        f"{tr['first_loss']:.2f} to {tr['last_loss']:.2f}; validation {tr['val_loss']:.2f} on the "
        "held-out one).",
        "",
        "| tokens/s (trainer log) | s/step (wall, incl. start-up and validation) | peak memory |",
        "|---:|---:|---:|",
        f"| {tr['tok_s']:.0f} | {tr['s_per_step']:.3f} | {peak} |",
        "",
        "Parallel forward vs recurrent `step` on the trained model, same SPE noise:",
        "",
        "| precision | tokens | max abs log-prob difference | argmax agreement | parallel vs "
        "fp32 parallel |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, a in agree.items():
        lines.append(
            f"| {name} | {a['n']} | {a['max_abs_logp']:.2e} | "
            f"{100 * a['argmax_agree']:.1f} % | {a['vs_fp32']:.2e} |"
        )
    lines += [
        "",
        "Generation (`musicgen.generation.decoding.sample.generate`, grammar on, T = 1, bf16):",
        "",
        "| batch | sampled tokens | seconds | tokens/s |",
        "|---:|---:|---:|---:|",
    ]
    for batch, g in gen.items():
        lines.append(f"| {batch} | {g['sampled']} | {g['seconds']:.1f} | {g['tok_s']:.0f} |")
    write_section(path, SECTION, "\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5 if DRY else 300)
    ap.add_argument(
        "--train-minutes",
        type=float,
        default=2.0,
        help="the trainer's max_minutes: fewer steps if they do not fit",
    )
    ap.add_argument("--agree-len", type=int, default=64 if DRY else 512)
    ap.add_argument("--gen-tokens", type=int, default=32 if DRY else 256)
    ap.add_argument("--tests", default="not run", help="the test suite's summary line")
    ap.add_argument("--write", default=str(ROOT / "docs" / "benchmarks.md"))
    args = ap.parse_args()
    device = "cpu" if DRY else "cuda"
    if not DRY and not torch.cuda.is_available():
        sys.exit("gpu_check: CUDA is not available (GPU_CHECK_DRY=1 runs the CPU dry run)")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        model, tr = training(Path(tmp), device, args.steps, args.train_minutes)
        print(json.dumps({"training": tr}), flush=True)
        loaded = musicgen.load(Path(tmp) / "run" / "last.pt", device)
    agree = agreement(model, device, args.agree_len)
    for a in agree.values():
        a["n"] = args.agree_len
    print(json.dumps({"agreement": agree}), flush=True)
    gen = generation(loaded, device, args.gen_tokens)
    print(json.dumps({"generation": gen}), flush=True)
    write(args.write, device, args.tests, tr, agree, gen, time.perf_counter() - t0)
    print(f"wrote the '{SECTION[3:]}' section of {args.write}")


if __name__ == "__main__":
    main()
