"""Turn a `.pt` checkpoint into a model folder (model.safetensors, config.json, tokenizer.json).

    python scripts/convert_checkpoint.py checkpoints/pop909_ape/model.pt checkpoints/pop909_ape

The weights are stored exactly as in the checkpoint and compared bit for bit after writing; a
README.md card already in the folder is kept; of the training state only what JSON holds (step,
best loss) goes to config.json, the optimiser state stays in the `.pt`. Prints the files
written; a bad input is one `error:` line (exit 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from musicgen.checkpoint import convert_to_folder
from musicgen.errors import MusicgenError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    try:
        folder = convert_to_folder(args.checkpoint, args.folder)
    except MusicgenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for p in sorted(folder.iterdir()):
        print(f"wrote {p} ({p.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
