#!/usr/bin/env bash
# Short-run comparison of the musical-position inputs (docs/model.md, "Musical position"):
# trains each variant of configs/pop909/musical_compare.yaml on one thread (same seed, same
# crops), then scores all of them with `musicgen evaluate nll` (NLL and forbidden mass).
# Usage: scripts/experiments/compare_musical.sh [PREPARED_POP909] [OUT]   (defaults below)
set -euo pipefail
DATA=${1:-data/prepared/pop909}
OUT=${2:-runs/musical_compare}
PY=${PYTHON:-python}
export OMP_NUM_THREADS=1
declare -A VARIANTS=(
  [none]=""
  [embed]="--model.musical.embed=true"
  [mspe]="--model.musical.spe=sine_spe"
  [both]="--model.musical.embed=true --model.musical.spe=sine_spe"
  [mspe_alone]="--model.pe=none --model.musical.spe=sine_spe"
)
ORDER=(none embed mspe both mspe_alone)
for v in "${ORDER[@]}"; do
  if [ ! -f "$OUT/$v/last.pt" ]; then
    # shellcheck disable=SC2086
    timeout 1200 "$PY" -m musicgen.cli train --config configs/pop909/musical_compare.yaml \
      --data "$DATA" --out "$OUT/$v" ${VARIANTS[$v]} > "$OUT.$v.log" 2>&1
  fi
done
timeout 1800 "$PY" -m musicgen.cli evaluate nll --data "$DATA" --max-len 1024 --out "$OUT/eval" \
  --checkpoint "${ORDER[@]/#/$OUT/}"
