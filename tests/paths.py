"""Where the tests find real MIDI: files bundled in tests/data, and the full sets in ../shared.

Everything the default suite reads lives in `tests/data/` (each folder keeps its licence), so a
fresh clone passes on its own. Tests that need a whole dataset are marked `shared` and skip, with
one line saying so, when `../shared/data` is absent (CI lays it beside the clone).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"  # the shared layout in miniature: pop909/NNN/, groove_drums/
SHARED = ROOT.parent / "shared" / "data"
# The four songs the unit tests prepare and train on (the other bundled songs are read one by one).
UNIT_SONGS = [DATA / "pop909" / n / f"{n}.mid" for n in ("001", "005", "100", "471")]
