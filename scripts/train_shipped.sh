#!/usr/bin/env bash
# Reproduce the checkpoints shipped in checkpoints/ on a 2-core CPU, with nothing else running.
#   scripts/train_shipped.sh pop909   # the POP909 gated-sineSPE model and its APE twin (#12)
#   scripts/train_shipped.sh groove   # the groove model (pre-#12 recipe, unchanged)
# pop909: the two runs side by side, one thread each, musical-position embeddings on (the
# presets' default), STEPS steps of 4 x 512 tokens (4500 = 9.2 M tokens, 3x the previous
# models), one cosine schedule; then FT_STEPS (1000) steps of fine-tuning with the count of
# notes at the onset as a further input (runs/<name>_notes, what is shipped). MINUTES is a
# safety stop per phase (the run checkpoints and exits).
# Interrupted? Run it again: each run resumes from its last.pt.
# Data: POP909 from ../shared/data (or POP909=path), the bundled trio set.
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-pop909}
POP909=${POP909:-../shared/data/pop909}
STEPS=${STEPS:-4500}
FT_STEPS=${FT_STEPS:-1000}
MINUTES=${MINUTES:-150}
BIN=.venv/bin
export OMP_NUM_THREADS=1
mkdir -p runs
resume_if() { [ -f "$1/last.pt" ] && echo --resume || true; }
if [ "$WHAT" = pop909 ]; then
  [ -f data/prepared/pop909/tokenizer.json ] || $BIN/musicgen prepare --dataset pop909 \
    --input "$POP909" --output data/prepared/pop909
  COMMON=(--config configs/pop909/small.yaml --train.max_minutes=$MINUTES
          --train.val_every=500 --train.val_songs=16 --train.ckpt_every=100)
  # phase 2: the same model given the count of notes at the current onset (a zero-initialised
  # embedding, docs/model.md), fine-tuned from phase 1's best checkpoint; lr 2.5e-4 peak, cosine
  NOTES=(--model.musical.notes_at_onset=true --train.max_steps=$FT_STEPS --optim.lr=2.5e-4
         --optim.warmup_steps=50)
  pop909() {  # RUN NAME [overrides]: phase 1 (unless done), then phase 2 into runs/RUN_notes
    local run=$1 name=$2; shift 2
    [ -f runs/$run/step_$(printf %07d $STEPS).pt ] || $BIN/musicgen train "${COMMON[@]}" \
      --train.max_steps=$STEPS --name=$name --out runs/$run $(resume_if runs/$run) "$@" \
      >> runs/$run.log 2>&1
    $BIN/musicgen train "${COMMON[@]}" "${NOTES[@]}" --train.init_from=runs/$run/best.pt \
      --name=${name}_notes --out runs/${run}_notes $(resume_if runs/${run}_notes) "$@" \
      >> runs/${run}_notes.log 2>&1
  }
  pop909 pop909_sine_spe_gated pop909_small &
  pop909 pop909_ape pop909_small_ape --model.pe=ape --model.gated=false &
  wait
elif [ "$WHAT" = groove ]; then
  # Phase 1: 1000 steps (warm-up, cosine to 5e-6); phase 2: resumed to 1500 steps with the cosine
  # recomputed over 1500 (a warm restart at lr ~1.4e-4), as the shipped groove model was trained.
  [ -f data/prepared/trio/tokenizer.json ] || $BIN/musicgen prepare --dataset groove \
    --input data/trio --output data/prepared/trio
  for phase in 1000 1500; do
    resume=(); [ "$phase" = 1500 ] && resume=(--resume)
    $BIN/musicgen train --config configs/groove/small.yaml --out runs/groove_sine_spe_gated \
      "${resume[@]}" --train.max_steps=$phase --train.max_minutes=110 >> runs/groove.log 2>&1
  done
else
  echo "usage: scripts/train_shipped.sh pop909|groove" >&2; exit 2
fi
