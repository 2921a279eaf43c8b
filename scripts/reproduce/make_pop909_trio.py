"""Build the POP909 trio set (musicgen/data/trio_pop909.py): whole POP909 songs' piano, a bass line
from their chords and tempo-matched Groove MIDI drums, split so that no test drum genre trains.

Usage: .venv/bin/python scripts/reproduce/make_pop909_trio.py [--out out/trio_pop909] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from musicgen.data.trio import SPLITS  # noqa: E402
from musicgen.data.trio_pop909 import build_pop909_trio  # noqa: E402
from musicgen.errors import MusicgenError  # noqa: E402


def main() -> int:
    shared = ROOT.parent / "shared" / "data"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pop909", default=str(shared / "pop909"))
    ap.add_argument("--groove", default=str(shared / "groove_drums"))
    ap.add_argument("--out", default=str(ROOT / "out" / "trio_pop909"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--drum-bars", type=int, default=8, help="longest drum loop, in bars")
    ap.add_argument("--max-songs", type=int, help="build only the first N songs (by id)")
    a = ap.parse_args()
    try:
        rows, skipped = build_pop909_trio(
            a.pop909, a.groove, a.out, a.seed, a.drum_bars, a.max_songs
        )
    except MusicgenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(rows)} songs to {a.out} ({len(skipped)} skipped, see skipped.csv)")
    for split in SPLITS:
        mine = [r for r in rows if r["split"] == split]
        genres = Counter(r["drum_genre"] for r in mine)
        print(
            f"{split}: {len(mine)} songs, {sum(r['bars'] for r in mine)} bars, "
            f"{len({r['drum_style'] for r in mine})} drum styles, {len(genres)} genres "
            f"({', '.join(f'{g} {n}' for g, n in sorted(genres.items()))})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
