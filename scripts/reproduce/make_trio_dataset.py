"""Build the synthetic bass/drums/piano trio dataset (musicgen/data/trio.py) into data/trio/.

Usage: .venv/bin/python scripts/reproduce/make_trio_dataset.py [--out data/trio] [--songs 300] \
    [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from musicgen.data.trio import build_trio  # noqa: E402
from musicgen.errors import MusicgenError  # noqa: E402


def main() -> int:
    shared = ROOT.parent / "shared" / "data"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pop909", default=str(shared / "pop909"))
    ap.add_argument("--groove", default=str(shared / "groove_drums"))
    ap.add_argument("--out", default=str(ROOT / "data" / "trio"))
    ap.add_argument("--songs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--songs-per-style", type=int, default=3)
    ap.add_argument("--min-bars", type=int, default=16)
    ap.add_argument("--max-bars", type=int, default=48)
    a = ap.parse_args()
    try:
        rows = build_trio(
            a.pop909, a.groove, a.out, a.songs, a.seed, a.songs_per_style, a.min_bars, a.max_bars
        )
    except MusicgenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    counts = {s: sum(r["split"] == s for r in rows) for s in ("train", "validation", "test")}
    print(f"wrote {len(rows)} songs to {a.out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
