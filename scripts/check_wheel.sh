#!/usr/bin/env bash
# Build the wheel and install it into a fresh virtual environment, then use it as a newcomer
# would: presets by name, the shipped models, `musicgen demo` with audio, the Python API. Run from
# a folder outside the checkout so nothing can be imported from the source tree.
# Fast: the new venv borrows the already installed dependencies (torch, miditok, ...) of .venv
# through a .pth line instead of downloading them again; `pip check` still verifies that the
# wheel's declared dependencies are met. Usage: scripts/check_wheel.sh [.venv]
set -euo pipefail
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # tiny models: a second thread only costs
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="$(cd "${1:-$ROOT/.venv}" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cd "$ROOT"
rm -rf build
isolation=--no-build-isolation  # reuse the venv's setuptools when it has one (no download)
"$VENV/bin/python" -c "import setuptools" 2>/dev/null || isolation=
"$VENV/bin/pip" wheel . --no-deps $isolation -q -w "$WORK/dist" 2>/dev/null
rm -rf build ./*.egg-info
WHEEL="$(ls "$WORK"/dist/musicgen-*.whl)"
echo "built $(basename "$WHEEL") ($(du -m "$WHEEL" | cut -f1) MB)"

python_bin="$(readlink -f "$VENV/bin/python")"
"$python_bin" -m venv --without-pip "$WORK/venv"
DEPS="$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
OWN="$("$WORK/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
echo "$DEPS" > "$OWN/_musicgen_deps.pth"
"$VENV/bin/pip" --python "$WORK/venv/bin/python" install -q --no-deps "$WHEEL"
"$VENV/bin/pip" --python "$WORK/venv/bin/python" check | grep -v "^musicgen " || true

cd "$WORK"
BIN="$WORK/venv/bin"
MUSICGEN_CHECKOUT="$ROOT" "$BIN/python" - <<'PY'
import importlib
import os
import sys
from pathlib import Path

import musicgen
from musicgen.config import load_config
from musicgen.resources import shipped_dir

assert musicgen.__file__.startswith(sys.prefix), musicgen.__file__  # the wheel, not a checkout
checkout = Path(os.environ["MUSICGEN_CHECKOUT"])
for init in sorted((checkout / "musicgen").rglob("__init__.py")):  # every package made the wheel
    module = importlib.import_module(".".join(init.parent.relative_to(checkout).parts))
    assert module.__file__.startswith(sys.prefix), f"not in the wheel: {module.__name__}"
assert "_shipped" in str(shipped_dir("checkpoints")), shipped_dir("checkpoints")
assert load_config("pop909/small").model.pe == "sine_spe"
m = musicgen.load("pop909_sine_spe_gated")  # a shipped model by name
piece = m.generate(bars=2, seed=1)  # 2: a song may open with a silent bar, as POP909's do
assert piece.score.note_num() > 0 and piece.piano_roll().shape[0] == 128
print("wheel: every package, presets by name, shipped models and the API work")
PY
"$BIN/musicgen" demo --out "$WORK/demo" --bars 1 --max-tokens 32 --device cpu > "$WORK/demo.log" 2>&1 \
  || { cat "$WORK/demo.log"; exit 1; }
ls "$WORK/demo"/*.wav > /dev/null
echo "wheel: musicgen demo wrote $(ls "$WORK/demo" | wc -l) files ($(ls "$WORK/demo"/*.wav | wc -l) WAV)"
