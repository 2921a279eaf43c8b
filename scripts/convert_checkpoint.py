"""Turn a `.pt` checkpoint into a model folder (model.safetensors, config.json, tokenizer.json).

    python scripts/convert_checkpoint.py checkpoints/pop909_ape/model.pt checkpoints/pop909_ape

The weights are stored exactly as in the checkpoint and compared bit for bit after writing; a
README.md card already in the folder is kept. Prints the files written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from musicgen.checkpoint import convert_to_folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("folder", type=Path)
    args = ap.parse_args()
    folder = convert_to_folder(args.checkpoint, args.folder)
    for p in sorted(folder.iterdir()):
        print(f"wrote {p} ({p.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
