#!/usr/bin/env bash
# Export the runs of scripts/reproduce/train_shipped.sh into checkpoints/ and measure them; the numbers go
# into each checkpoints/<name>/README.md (scripts/reproduce/write_model_cards.py) and README.md's figures.
#   scripts/reproduce/evaluate_shipped.sh pop909 [export] [sweep] [nll] [form] [texture] [memory]
#   scripts/reproduce/evaluate_shipped.sh groove   # the groove model
#   scripts/reproduce/evaluate_shipped.sh maestro [noexport] [sweep]  # the MAESTRO model
# pop909 compares with the models it replaces when PREVIOUS (default out/eval/previous) holds
# copies of their folders (copy checkpoints/pop909_* there before `export`): NLL on the same
# songs and tokens, the form benchmark in the same run. Steps default to all four;
# MODELS="pop909_ape" limits export and texture to one model (e.g. while the other trains).
# FROM_TRAINING=DIR exports the model folders DIR/<name> (a training committed in parts)
# instead of the runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-pop909}
BIN=.venv/bin
POP909=${POP909:-../shared/data/pop909}
POP909_STRUCTURE=${POP909_STRUCTURE:-../shared/data/pop909_structure}
PREVIOUS=${PREVIOUS:-out/eval/previous}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# sizes (smaller ones only to check the pipeline quickly)
PIECES=${PIECES:-16}; PROMPTS=${PROMPTS:-20}; SONGS=${SONGS:-39}
E=${EVAL:-out/eval}
mkdir -p $E
# each model's own sampling defaults (config `sample`), chosen on the form benchmark's sweep
# (docs/evaluation.md, "Phrase lags"); a model not named keeps the paper's. With the bar-copy
# rule on the phrase lags (4 and 8 bars back), T 1.0, top-p 0.9 x repeat 3 / 3.5 / 4 / 4.5:
# each model's nearest setting that meets every acceptance band (docs/evaluation.md)
declare -A SAMPLE=([pop909_piano_sine_spe_gated]="sample.temperature=1.0 sample.top_p=0.9 sample.repeat=4"
                   [pop909_ape]="sample.temperature=1.0 sample.top_p=0.9 sample.repeat=3.5")
# the Maestro model: T 0.9 / 1.0 / 1.1 / 1.2 at top-p 0.9 (`maestro sweep`); T 1.1 closest to
# the real performances' scale consistency, notes per onset and self-similarity (docs/evaluation.md)
SAMPLE[maestro_sine_spe_gated]="sample.temperature=1.1 sample.top_p=0.9"
ship() {  # NAME [RUN]: run folder -> checkpoints/NAME model folder, weights bit-identical
  local run=${2:-${FROM_TRAINING:-runs}/$1}  # a committed phase (training/pop909_phase7), or
  if [ -z "${2:-}" ] && [ -z "${FROM_TRAINING:-}" ]; then  # the last phase run (_notes ... _more2)
    for phase in _notes _long _local _form _more _more2; do [ -d runs/$1$phase ] && run=runs/$1$phase; done
  fi
  local sets=(); for kv in ${SAMPLE[$1]:-}; do sets+=(--set "$kv"); done
  $BIN/python scripts/reproduce/export_checkpoint.py $run checkpoints/$1 "${sets[@]}" \
    > $E/$1.export.json
  $BIN/python scripts/convert_checkpoint.py checkpoints/$1/model.pt checkpoints/$1
  rm checkpoints/$1/model.pt
}
texture() {  # 16 pieces from scratch, then 2-bar prompts continued: texture, prompts, style
  local name=$1 dir=$2 tag=$3
  $BIN/musicgen generate --checkpoint $dir/$name --out $E/samples_$tag \
    --num $PIECES --bars 16 --seed 0 --overwrite > /dev/null
  $BIN/musicgen evaluate music $E/samples_$tag --reference $E/reference \
    --reference-bars 16 --checkpoint $dir/$name --out $E/music_$tag
  $BIN/musicgen evaluate style --checkpoint $dir/$name --prompts $E/val_songs \
    --max-prompts $PROMPTS --samples 1 --max-tokens 1024 --out $E/style_$tag
}
if [ "$WHAT" = pop909 ]; then
  MODELS=${MODELS:-pop909_piano_sine_spe_gated pop909_ape}
  STEPS=${*:2}; STEPS=${STEPS:-export nll form texture}  # sweep: before choosing SAMPLE
  if [[ " $STEPS " == *" export "* ]]; then
    for name in $MODELS; do ship $name; done
  fi
  if [ ! -d $E/val_songs ]; then  # validation songs, each with its chord_midi.txt beside it
    VAL=$($BIN/python -c "import json; rows = map(json.loads, open('data/prepared/pop909/manifest.jsonl')); print(*[r['path'] for r in rows if r['split'] == 'validation'])")
    mkdir -p $E/val_songs $E/reference
    for s in $VAL; do
      mkdir -p $E/val_songs/$(dirname $s)
      cp "$POP909/$s" "$POP909/$(dirname $s)/chord_midi.txt" $E/val_songs/$(dirname $s)/
    done
    for s in $(echo $VAL | tr ' ' '\n' | head -$PIECES); do cp "$POP909/$s" $E/reference/; done
  fi
  if [[ " $STEPS " == *" nll "* ]]; then
    # NLL per position up to twice the 2048-token training crop (within / beyond), forbidden mass
    $BIN/musicgen evaluate nll --checkpoint checkpoints/pop909_piano_sine_spe_gated checkpoints/pop909_ape \
      --data data/prepared/pop909 --max-len 4096 --seeds 3 --max-songs $SONGS --out $E/pop909_nll
    if [ -d "$PREVIOUS/pop909_ape" ]; then  # per note on the first 2048 tokens, beside them
      $BIN/musicgen evaluate nll --checkpoint checkpoints/pop909_piano_sine_spe_gated \
        checkpoints/pop909_ape $PREVIOUS/pop909_piano_sine_spe_gated $PREVIOUS/pop909_ape \
        --data data/prepared/pop909 --max-len 2048 --seeds 3 --max-songs $SONGS \
        --out $E/pop909_nll_previous
    fi
  fi
  if [[ " $STEPS " == *" sweep "* ]]; then
    # the sampling sweep that chooses each model's own defaults (SAMPLE above; docs/evaluation.md):
    # T 1.0 (the phase-7 sweep's best) x the bar-copy bonus on the phrase lags, from too weak
    # (3: no exact repeat) to too strong (4.5); one process per model, one thread each
    pids=()
    for name in $MODELS; do
      OMP_NUM_THREADS=1 $BIN/musicgen evaluate form --checkpoint checkpoints/$name \
        --data "$POP909" --temperature 1.0 --top-p 0.9 --repeat 3 3.5 4 4.5 \
        --out $E/pop909_form_sweep_$name &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done  # a failed sweep fails the script
  fi
  if [[ " $STEPS " == *" form "* ]]; then
    # the form benchmark at each model's defaults, beside the models they replaced
    ckpts=(checkpoints/pop909_piano_sine_spe_gated checkpoints/pop909_ape)
    [ -d "$PREVIOUS/pop909_ape" ] && ckpts+=("$PREVIOUS/pop909_piano_sine_spe_gated" "$PREVIOUS/pop909_ape")
    $BIN/musicgen evaluate form --checkpoint "${ckpts[@]}" --data "$POP909" --out $E/pop909_form
  fi
  if [[ " $STEPS " == *" memory "* ]]; then
    # the memory probe (docs/evaluation.md): a passage, 0 / 16 / 32 bars, the passage again; the
    # song model with its phrase tokens; the validation and the test songs
    for name in pop909_sine_spe_gated pop909_piano_sine_spe_gated pop909_ape; do
      for split in validation test; do
        $BIN/musicgen evaluate memory --checkpoint checkpoints/$name --data "$POP909" \
          --structure "$POP909_STRUCTURE" --split $split --out $E/memory/${name}_$split
      done
    done
  fi
  if [[ " $STEPS " == *" texture "* ]]; then
    for name in $MODELS; do
      texture $name checkpoints $name
      # the replaced model through the same commands (with today's prompt builder)
      if [ "${PREVIOUS_FULL:-0}" = 1 ]; then texture $name $PREVIOUS previous_$name; fi
    done
  fi
elif [ "$WHAT" = maestro ]; then
  # the small Performer with the musical inputs (train_shipped.sh maestro), in
  # place of Perceiver S: export; NLL and forbidden mass on the validation performances (beside
  # the model it replaces when PREVIOUS holds a copy of checkpoints/maestro_perceiver_s); PIECES
  # pieces of 4096 tokens from scratch against the first 4096 tokens of 16 validation
  # performances (texture, scale)
  name=maestro_sine_spe_gated DATA=data/prepared/asap_maestro_expressive
  run=${FROM_TRAINING:+$FROM_TRAINING/maestro_small}
  if [ -z "$run" ]; then
    for r in runs/maestro_small runs/maestro_small_more; do [ -d $r ] && run=$r; done
  fi
  [[ " ${*:2} " == *" noexport "* ]] || ship $name "$run"
  ckpts=(checkpoints/$name)
  [ -d "$PREVIOUS/maestro_perceiver_s" ] && ckpts+=("$PREVIOUS/maestro_perceiver_s")
  $BIN/musicgen evaluate nll --checkpoint "${ckpts[@]}" --data $DATA --max-len 2048 \
    --out $E/maestro_nll
  $BIN/python scripts/reproduce/perceiver_compare.py reference --data $DATA --split validation \
    --pieces 16 --tokens 4096 --out $E/maestro_reference
  if [[ " ${*:2} " == *" sweep "* ]]; then  # before choosing its SAMPLE: temperature, top-p 0.9
    for t in ${MAESTRO_TEMPS:-0.9 1.0 1.1 1.2}; do
      $BIN/musicgen generate --checkpoint checkpoints/$name --out $E/samples_${name}_T$t \
        --num $PIECES --max-tokens 4096 --min-tokens 4096 --temperature $t --top-p 0.9 \
        --seed 0 --overwrite > /dev/null
      $BIN/musicgen evaluate music $E/samples_${name}_T$t --reference $E/maestro_reference \
        --checkpoint checkpoints/$name --out $E/music_${name}_T$t
    done
  fi
  $BIN/musicgen generate --checkpoint checkpoints/$name --out $E/samples_$name --num $PIECES \
    --max-tokens 4096 --min-tokens 4096 --seed 0 --overwrite > /dev/null
  $BIN/musicgen evaluate music $E/samples_$name --reference $E/maestro_reference \
    --checkpoint checkpoints/$name --out $E/music_$name
elif [ "$WHAT" = groove ]; then
  # the committed phase (training/groove_pop909_phase2) unless GROOVE_RUN names a run folder
  ship groove_sine_spe_gated ${GROOVE_RUN:-training/groove_pop909_phase2/groove_small}
  $BIN/musicgen evaluate nll --checkpoint checkpoints/groove_sine_spe_gated \
    --data data/prepared/trio_pop909 --max-len 2048 --out $E/groove_nll
  # continue 2-bar prompts of unseen (test) styles, style similarity per time segment
  $BIN/musicgen evaluate style --checkpoint checkpoints/groove_sine_spe_gated \
    --prompts out/trio_pop909/test --max-prompts 10 --samples 2 --max-tokens 1024 \
    --out $E/groove_style
  # the band measure from scratch, against the test songs read as 8-bar pieces
  $BIN/musicgen generate --checkpoint checkpoints/groove_sine_spe_gated --out $E/samples_groove \
    --num 24 --bars 8 --seed 0 --overwrite > /dev/null
  $BIN/musicgen evaluate music $E/samples_groove --band --reference out/trio_pop909/test \
    --reference-bars 8 --out $E/band_groove
else
  echo "usage: scripts/reproduce/evaluate_shipped.sh pop909|groove|maestro" >&2; exit 2
fi
