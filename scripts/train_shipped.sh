#!/usr/bin/env bash
# Reproduce the checkpoints shipped in checkpoints/ (CPU, about 80 minutes of wall time each,
# the three runs side by side, one thread each). Data: POP909 from ../shared/data (or any copy).
set -euo pipefail
cd "$(dirname "$0")/.."
POP909=${POP909:-../shared/data/pop909}
MINUTES=${MINUTES:-80}
BIN=.venv/bin
export OMP_NUM_THREADS=1
[ -f data/prepared/pop909/tokenizer.json ] || $BIN/musicgen prepare --dataset pop909 --input "$POP909" --output data/prepared/pop909
[ -f data/prepared/trio/tokenizer.json ] || $BIN/musicgen prepare --dataset groove --input data/trio --output data/prepared/trio
mkdir -p runs
$BIN/musicgen train --config configs/pop909/small.yaml --out runs/pop909_sine_spe_gated \
  --train.max_minutes=$MINUTES > runs/pop909_sine_spe_gated.log 2>&1 &
$BIN/musicgen train --config configs/pop909/small.yaml --out runs/pop909_ape \
  --name=pop909_small_ape --model.pe=ape --model.gated=false --train.max_minutes=$MINUTES \
  > runs/pop909_ape.log 2>&1 &
$BIN/musicgen train --config configs/groove/small.yaml --out runs/groove_sine_spe_gated \
  --train.max_minutes=$MINUTES > runs/groove_sine_spe_gated.log 2>&1 &
wait
