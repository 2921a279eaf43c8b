"""Turn a training run into a shippable checkpoint: half-precision weights, no optimiser state.

    python scripts/reproduce/export_checkpoint.py runs/pop909_sine_spe_gated \
        checkpoints/pop909_sine_spe_gated

Reads RUN/best.pt (or last.pt), keeps the config, tokenizer and a summary of the training
(`musicgen.cards.export_summary`: step, wall time, best validation loss, the validation record;
for a fine-tune, `init_from` holds the same summary of the run it started from, and so on back
to the first phase) and writes OUT/model.pt, which `load_checkpoint` reads like any other
checkpoint. SPE parameters and gates stay float32 (`musicgen.checkpoint.full_precision_names`):
rounding them would shift the positional kernel's phase by radians at long lags. Prints the
summary as JSON, and copies the run's `forms.json` (what `--form auto` draws from) beside the
model. `--set sample.temperature=1.0` keeps the model's own sampling defaults with it;
`--base FOLDER` takes the previous phase's summary from its exported folder.
RUN may also be a model folder (a committed phase of a training done in parts, e.g.
training/pop909_phase7/pop909_ape): its stored summary is kept as it is, the weights (already
half) are written unchanged.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from musicgen.cards import export_summary
from musicgen.checkpoint import load_checkpoint, save_checkpoint
from musicgen.config import apply_overrides, config_from_dict, to_dict
from musicgen.errors import MusicgenError


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--which", default="best.pt", help="checkpoint of the run to ship")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config value kept with the export, e.g. sample.temperature=1.0 (the model's own "
        "sampling defaults, chosen on the form benchmark)",
    )
    ap.add_argument(
        "--base",
        type=Path,
        help="the exported model folder of the phase this run started from, whose stored "
        "summary (and chain of phases) the card takes, where the run's own init_from was a run "
        "folder that is gone or whose chain is (that folder's export)",
    )
    args = ap.parse_args()
    try:
        export(args)
    except MusicgenError as exc:
        sys.exit(f"export_checkpoint: {exc}")


def export(args: argparse.Namespace) -> None:
    folder = (args.run / "config.json").is_file() and not (args.run / args.which).exists()
    loaded = load_checkpoint(args.run if folder else args.run / args.which)
    step = int(loaded.train_state.get("step", 0))
    if folder:  # a model folder keeps the summary its own export wrote
        stored = loaded.train_state.get("summary")
        info = json.loads(stored) if stored else {"step": step}
    else:
        info = export_summary(args.run, loaded.config, step, base=args.base)
    config = config_from_dict(apply_overrides(to_dict(loaded.config), args.set))
    path = save_checkpoint(
        args.out / "model.pt",
        loaded.model,
        config,
        loaded.tokenizer,
        train_state={"step": info["step"], "summary": json.dumps(info)},
        half=True,
    )
    forms = args.run / "forms.json"  # the training songs' forms (`--form auto`)
    if forms.is_file():
        (args.out / "forms.json").write_text(forms.read_text())
    info["file"] = str(path)
    info["megabytes"] = round(path.stat().st_size / 1e6, 2)
    print(json.dumps(info, indent=1))


if __name__ == "__main__":
    main()
