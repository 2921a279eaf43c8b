#!/usr/bin/env bash
# Reproduce the checkpoints shipped in checkpoints/ on a 2-core CPU, with nothing else running.
#   scripts/reproduce/train_shipped.sh pop909   # the POP909 gated-sineSPE model and its APE twin
#   scripts/reproduce/train_shipped.sh groove   # the groove model on the POP909 trio set
#   scripts/reproduce/train_shipped.sh maestro  # the classical model with musical inputs
# pop909: the two runs side by side, one thread each, musical-position embeddings on (the
# presets' default), three phases, each with its own cosine schedule:
#   1. STEPS (4500) steps of 4 x 512 tokens from scratch (9.2 M tokens), crops on any bar;
#   2. FT_STEPS (1000) steps from 1's best with the count of notes at the onset as a further
#      input (runs/<name>_notes);
#   3. LONG_STEPS (1200) steps of 2 x 1024 tokens from 2's best, crops on bars 0, 4, 8, ... of
#      the song (the presets' data.start_bar_every), so the bar-mod-4 embedding counts the song's
#      bars and a crop holds twice the bars to copy from (runs/<name>_long);
#   4. LOCAL_STEPS (1000) steps of 2 x 1024 tokens from 3's best with blocks 2 and 4 turned into
#      windowed softmax attention over 512 positions with rotary positions (model.local_layers:
#      the attention that can copy a bar; runs/<name>_local);
#   5. FORM_STEPS (2200) steps of 1 x 2048 tokens from 4's best, crops on bars 0, 4, 8, ...,
#      with blocks 1-4 windowed over 1024 positions (the nearest earlier copy of a
#      repeated bar lies a median 883 tokens back; runs/<name>_form). FROM_SHIPPED=1 runs
#      this phase alone from the committed checkpoints/<name> folders (phase 4's weights).
#   6. MORE_STEPS (2400) steps as 5, lr 1.5e-4, from 5's weights (runs/<name>_more): twice
#      the phase-4 models' 15.8 M tokens. FROM_TRAINING=DIR runs this phase alone
#      from the committed DIR/<name> folders (training/pop909_phase5 made phase 6; a training
#      done in parts continues from the last committed phase, e.g.
#      FROM_TRAINING=training/pop909_phase6 SUFFIX=more2 MORE_STEPS=3400 made phase 7,
#      training/pop909_phase7: 31.7 M / 32.2 M tokens in all).
# MINUTES is a safety stop per phase (the run checkpoints and exits).
# Interrupted? Run it again: each run resumes from its last.pt.
# Data: POP909 from ../shared/data (or POP909=path); the groove model's POP909 trio set is built from
# ../shared/data's POP909 and Groove MIDI (scripts/reproduce/make_pop909_trio.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-pop909}
POP909=${POP909:-../shared/data/pop909}
STEPS=${STEPS:-4500}
FT_STEPS=${FT_STEPS:-1000}
LONG_STEPS=${LONG_STEPS:-1200}
LOCAL_STEPS=${LOCAL_STEPS:-1000}
FORM_STEPS=${FORM_STEPS:-2200}
MORE_STEPS=${MORE_STEPS:-2400}
MINUTES=${MINUTES:-150}  # phase 3 with 1200 steps: about 40 min
BIN=.venv/bin
export OMP_NUM_THREADS=1
mkdir -p runs
resume_if() { [ -f "$1/last.pt" ] && echo --resume || true; }
if [ "$WHAT" = pop909 ]; then
  [ -f data/prepared/pop909/tokenizer.json ] || $BIN/musicgen prepare --dataset pop909 \
    --input "$POP909" --output data/prepared/pop909
  COMMON=(--config configs/pop909/small.yaml --train.max_minutes=$MINUTES
          --train.val_every=500 --train.val_songs=16 --train.ckpt_every=100)
  done_at() { [ -f "$1/step_$(printf %07d "$2").pt" ]; }  # RUN STEPS: that phase has finished
  NOTES=--model.musical.notes_at_onset=true  # a zero-initialised embedding (docs/model.md)
  pop909() {  # RUN NAME [overrides]: the phases not yet finished, each resumable
    local run=$1 name=$2; shift 2
    done_at runs/$run $STEPS || $BIN/musicgen train "${COMMON[@]}" --data.start_bar_every=1 \
      --train.max_steps=$STEPS --name=$name --out runs/$run $(resume_if runs/$run) "$@" \
      >> runs/$run.log 2>&1
    done_at runs/${run}_notes $FT_STEPS || $BIN/musicgen train "${COMMON[@]}" $NOTES \
      --data.start_bar_every=1 --train.max_steps=$FT_STEPS --optim.lr=2.5e-4 \
      --optim.warmup_steps=50 --train.init_from=runs/$run/best.pt --name=${name}_notes \
      --out runs/${run}_notes $(resume_if runs/${run}_notes) "$@" >> runs/${run}_notes.log 2>&1
    done_at runs/${run}_long $LONG_STEPS || $BIN/musicgen train "${COMMON[@]}" $NOTES \
      --data.crop_len=1024 --train.batch_size=2 --train.val_max_len=2048 \
      --train.max_steps=$LONG_STEPS --optim.lr=2e-4 --optim.warmup_steps=50 \
      --train.init_from=runs/${run}_notes/best.pt --name=${name}_long \
      --out runs/${run}_long $(resume_if runs/${run}_long) "$@" >> runs/${run}_long.log 2>&1
    done_at runs/${run}_local $LOCAL_STEPS || $BIN/musicgen train "${COMMON[@]}" $NOTES \
      --data.crop_len=1024 --train.batch_size=2 --train.val_max_len=2048 \
      "--model.local_layers=[2, 4]" --model.local_window=512 --model.local_rope=true \
      --train.max_steps=$LOCAL_STEPS --optim.lr=2e-4 --optim.warmup_steps=50 \
      --train.init_from=runs/${run}_long/best.pt --name=${name}_local \
      --out runs/${run}_local $(resume_if runs/${run}_local) "$@" >> runs/${run}_local.log 2>&1
    form_phase "$run" "$name" runs/${run}_local/best.pt "$@"
  }
  form_phase() {  # RUN NAME FROM [overrides]: phases 5 and 6, from FROM
    local run=$1 name=$2 from=$3; shift 3
    phrase "$run" "$name" "$from" form $FORM_STEPS 2e-4 "$@"
    phrase "$run" "$name" runs/${run}_form/best.pt more $MORE_STEPS 1.5e-4 "$@"
  }
  phrase() {  # RUN NAME FROM SUFFIX STEPS LR [overrides]: 2048-token phrase crops, blocks 1-4 local
    local run=$1 name=$2 from=$3 suffix=$4 steps=$5 lr=$6; shift 6
    done_at runs/${run}_$suffix $steps || $BIN/musicgen train "${COMMON[@]}" $NOTES \
      --data.crop_len=2048 --train.batch_size=1 --train.val_max_len=4096 \
      "--model.local_layers=[1, 2, 3, 4]" --model.local_window=1024 --model.local_rope=true \
      --train.max_steps=$steps --optim.lr=$lr --optim.warmup_steps=50 \
      --train.init_from=$from --name=${name}_$suffix --out runs/${run}_$suffix \
      $(resume_if runs/${run}_$suffix) "$@" >> runs/${run}_$suffix.log 2>&1
  }
  if [ -n "${FROM_TRAINING:-}" ]; then  # one more phase, from committed folders
    from=$FROM_TRAINING suffix=${SUFFIX:-more}
    phrase pop909_piano_sine_spe_gated pop909_small $from/pop909_piano_sine_spe_gated $suffix $MORE_STEPS \
      1.5e-4 &
    phrase pop909_ape pop909_small_ape $from/pop909_ape $suffix $MORE_STEPS 1.5e-4 \
      --model.pe=ape --model.gated=false &
  elif [ "${FROM_SHIPPED:-0}" = 1 ]; then  # phase 5 only, from the committed phase-4 folders
    form_phase pop909_piano_sine_spe_gated pop909_small checkpoints/pop909_piano_sine_spe_gated &
    form_phase pop909_ape pop909_small_ape checkpoints/pop909_ape --model.pe=ape \
      --model.gated=false &
  else
    pop909 pop909_piano_sine_spe_gated pop909_small &
    pop909 pop909_ape pop909_small_ape --model.pe=ape --model.gated=false &
  fi
  wait
elif [ "$WHAT" = maestro ]; then
  # configs/maestro/musical_small.yaml (the small Performer with the musical
  # inputs), 3700 steps of 4 x 1024 tokens (15 M) in all, on both threads (THREADS=1 beside a
  # one-thread job); MINUTES per run. Trained in two parts, each
  # with its own cosine: MAESTRO_STEPS (1800) steps from scratch (runs/maestro_small), then
  # FROM_TRAINING=DIR MAESTRO_STEPS=1900 continues from the committed DIR/maestro_small folder
  # at half the learning rate with a 50-step warm-up (runs/maestro_small_more).
  MAESTRO=${MAESTRO:-../shared/data/asap_maestro}
  DATA=data/prepared/asap_maestro_expressive
  [ -f $DATA/tokenizer.json ] || $BIN/musicgen prepare --dataset maestro --input "$MAESTRO" \
    --output $DATA --workers 2
  run=runs/maestro_small; more=()
  if [ -n "${FROM_TRAINING:-}" ]; then
    run=runs/maestro_small_more
    more=(--train.init_from=$FROM_TRAINING/maestro_small --optim.lr=2.5e-4 --optim.warmup_steps=50
          --name=maestro_small_more)
  fi
  OMP_NUM_THREADS=${THREADS:-2} $BIN/musicgen train --config configs/maestro/musical_small.yaml \
    --train.max_steps=${MAESTRO_STEPS:-1800} --train.max_minutes=$MINUTES "${more[@]}" \
    --out $run $(resume_if $run) >> $run.log 2>&1
elif [ "$WHAT" = groove ]; then
  # The POP909 trio set: phase 1 (training/groove_pop909_phase1/README.md), 7400 steps of
  # 4 x 512 tokens (15.2 M) with the musical-position inputs, one cosine schedule; phase 2
  # (training/groove_pop909_phase2/README.md), 2400 steps of 2 x 2048 tokens (9.8 M) from phase
  # 1's export, its own cosine schedule.
  [ -f out/trio_pop909/metadata.csv ] || $BIN/python scripts/reproduce/make_pop909_trio.py \
    --out out/trio_pop909 --seed 0
  [ -f data/prepared/trio_pop909/tokenizer.json ] || $BIN/musicgen prepare --dataset groove \
    --tokenizer groove --input out/trio_pop909 --output data/prepared/trio_pop909 --workers 2
  $BIN/musicgen train --config configs/groove/small.yaml --data data/prepared/trio_pop909 \
    --out runs/groove_sine_spe_gated $(resume_if runs/groove_sine_spe_gated) \
    --model.musical.embed=true --train.max_steps=7400 --train.val_every=1000 \
    --train.ckpt_every=250 --train.max_minutes=$MINUTES >> runs/groove.log 2>&1
  [ -f runs/groove_phase1/model.safetensors ] || {
    $BIN/python scripts/reproduce/export_checkpoint.py runs/groove_sine_spe_gated /tmp/groove_p1
    $BIN/python scripts/convert_checkpoint.py /tmp/groove_p1/model.pt runs/groove_phase1; }
  $BIN/musicgen train --config configs/groove/small.yaml --data data/prepared/trio_pop909 \
    --out runs/groove_sine_spe_gated_long $(resume_if runs/groove_sine_spe_gated_long) \
    --model.musical.embed=true --train.init_from=runs/groove_phase1 --data.crop_len=2048 \
    --train.batch_size=2 --train.max_steps=2400 --train.val_every=800 --train.val_max_len=4096 \
    --train.ckpt_every=100 --optim.lr=2.5e-4 --optim.warmup_steps=100 \
    --train.max_minutes=$MINUTES >> runs/groove.log 2>&1
else
  echo "usage: scripts/reproduce/train_shipped.sh pop909|groove|maestro" >&2; exit 2
fi
