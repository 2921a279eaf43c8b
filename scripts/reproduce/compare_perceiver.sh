#!/usr/bin/env bash
# Perceiver S against Perceiver AR and the plain Performer at equal compute on expressive piano
# (docs/perceiver.md, "Comparison at equal compute"). Steps (1 is skipped and
# 2 resumed when their output is there; 3-5 always rerun, about 10 minutes):
#   1. prepare ASAP/MAESTRO with the expressive REMI (prepare's default for --dataset maestro);
#   2. train configs/maestro/compare_{perceiver_s,perceiver_ar,performer}.yaml into RUNS/<arm>
#      (--resume when RUNS/<arm>/last.pt exists; a finished run resumes in seconds);
#   3. `musicgen evaluate nll` of the three on the held-out split, up to MAX_LEN tokens per piece;
#   4. PIECES generations of GEN_TOKENS tokens (4 windows of m) per arm, fixed seed, and
#      `musicgen evaluate music` (repetition) against the same length of real held-out pieces;
#   5. scripts/reproduce/perceiver_compare.py report: OUT/summary.json, the figure, a markdown table.
# Usage: scripts/reproduce/compare_perceiver.sh            (full size: about 12 min per arm on 2 threads)
#        TINY=1 scripts/reproduce/compare_perceiver.sh     (tiny sizes, a few steps: checks the pipeline)
# Environment: PYTHON, OMP_NUM_THREADS (default 2), MAESTRO, DATA, SPLIT (validation | test),
# DEVICE (evaluation and generation), RUNS, OUT, FIG; full size only: MAX_LEN (2048), SONGS
# (default all of the split), PIECES (4 generations per arm), REF (16 real pieces), SEED (the
# training seed, default the presets' 0), ARMS (a subset, e.g. "perceiver_s perceiver_ar").
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python)}
MG="$PY -m musicgen.cli"
MAESTRO=${MAESTRO:-../shared/data/asap_maestro}
SPLIT=${SPLIT:-validation}
DEVICE=${DEVICE:-auto}  # of evaluation and generation (training: train.device, default auto)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
read -ra ARMS <<< "${ARMS:-perceiver_s perceiver_ar performer}"
if [ "${TINY:-0}" = 1 ]; then  # m = 256, n = 128, a 1-layer d_model 32 model, 3 steps, 2 pieces
  M=256; N=128
  RUNS=${RUNS:-runs/perceiver_compare_tiny}; OUT=${OUT:-out/perceiver_compare_tiny}
  FIG=${FIG:-$OUT/perceiver_compare.png}
  DATA=${DATA:-data/prepared/asap_maestro_tiny}  # 6 pieces per split of MAESTRO, below
  MAX_LEN=512; SONGS=2; PIECES=2; REF=2; GEN_TOKENS=$((4 * M))
  TRAIN=(model.n_layers=1 model.d_model=32 model.n_heads=2 model.d_ff=64 model.n_features=16
         model.num_realizations=8 model.perceiver.context_len=$M model.perceiver.n_queries=$N
         data.crop_len=$M train.max_steps=3 train.ckpt_every=2 train.val_songs=1
         train.val_max_len=$MAX_LEN log.every=1)
  BATCH_S=2; BATCH_P=1  # B x n target tokens per step in every arm: 2 x 128 = 1 x 256
else
  M=1024; N=256
  RUNS=${RUNS:-runs/perceiver_compare}; OUT=${OUT:-out/perceiver_compare}
  FIG=${FIG:-docs/figures/perceiver_compare.png}
  DATA=${DATA:-data/prepared/asap_maestro_expressive}
  MAX_LEN=${MAX_LEN:-2048}; SONGS=${SONGS:-}; PIECES=${PIECES:-4}; REF=${REF:-16}
  GEN_TOKENS=$((4 * M))
  TRAIN=(${SEED:+train.seed=$SEED}); BATCH_S=""; BATCH_P=""
fi
mkdir -p "$RUNS" "$OUT"
say() { echo "[$(date +%H:%M:%S)] $*"; }

if [ ! -f "$DATA/tokenizer.json" ]; then
  if [ "${TINY:-0}" = 1 ]; then
    $PY scripts/reproduce/perceiver_compare.py subset --input "$MAESTRO" --per-split 6 --out "$OUT/maestro"
    MAESTRO=$OUT/maestro
  fi
  say "prepare $MAESTRO -> $DATA"
  $MG prepare --dataset maestro --input "$MAESTRO" --output "$DATA" --workers "$OMP_NUM_THREADS"
fi

CKPTS=()
for arm in "${ARMS[@]}"; do
  run=$RUNS/$arm
  CKPTS+=("$run/last.pt")
  resume=(); [ -f "$run/last.pt" ] && resume=(--resume)
  batch=$([ "$arm" = performer ] && echo "$BATCH_P" || echo "$BATCH_S")
  say "train $arm -> $run ${resume[*]:-}"
  $MG train --config "configs/maestro/compare_$arm.yaml" --data "$DATA" --out "$run" \
    "${resume[@]}" "${TRAIN[@]}" ${batch:+train.batch_size=$batch} > "$run.train.log" 2>&1 \
    || { echo "training $arm failed: see $run.train.log" >&2; exit 1; }
  tail -1 "$run.train.log"
done

say "evaluate nll ($SPLIT, up to $MAX_LEN tokens per piece)"
$MG evaluate nll --checkpoint "${CKPTS[@]}" --data "$DATA" --split "$SPLIT" \
  --max-len "$MAX_LEN" ${SONGS:+--max-songs $SONGS} --seed 0 --device "$DEVICE" --out "$OUT/nll"

say "reference: the first $GEN_TOKENS tokens of $REF $SPLIT pieces"
$PY scripts/reproduce/perceiver_compare.py reference --data "$DATA" --split "$SPLIT" --pieces "$REF" \
  --tokens "$GEN_TOKENS" --out "$OUT/reference"
for arm in "${ARMS[@]}"; do
  say "generate $PIECES x $GEN_TOKENS tokens with $arm, then evaluate music"
  $MG generate --checkpoint "$RUNS/$arm/last.pt" --out "$OUT/samples_$arm" --num "$PIECES" \
    --max-tokens "$GEN_TOKENS" --min-tokens "$GEN_TOKENS" --seed 0 --batch-size "$PIECES" \
    --device "$DEVICE" --overwrite \
    > "$OUT/samples_$arm.log" 2>&1
  $MG evaluate music "$OUT/samples_$arm" --reference "$OUT/reference" \
    --checkpoint "$RUNS/$arm/last.pt" --out "$OUT/music_$arm" > "$OUT/music_$arm.log"
done

say "report"
$PY scripts/reproduce/perceiver_compare.py report --out "$OUT" --runs "$RUNS" --arms "${ARMS[@]}" \
  --n "$N" --m "$M" --figure "$FIG"
