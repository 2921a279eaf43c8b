#!/usr/bin/env bash
# Export the runs of scripts/train_shipped.sh into checkpoints/ and measure them; the numbers go
# into each checkpoints/<name>/README.md (scripts/write_model_cards.py) and README.md's figures.
#   scripts/evaluate_shipped.sh pop909   # the two POP909 models (issue #12's acceptance)
#   scripts/evaluate_shipped.sh groove   # the groove model
# pop909 compares with the models shipped before #12 when PREVIOUS (default out/eval/previous)
# holds copies of their folders; they are scored on detected chords, the data they were trained
# on (data/prepared/pop909_detected, prepared here if missing). MODELS="pop909_ape" exports and
# measures one model only (NLL is measured when both are in checkpoints/ as trained now).
set -euo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-pop909}
BIN=.venv/bin
POP909=${POP909:-../shared/data/pop909}
PREVIOUS=${PREVIOUS:-out/eval/previous}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# sizes (smaller ones only to check the pipeline quickly)
PIECES=${PIECES:-16}; PROMPTS=${PROMPTS:-20}; SONGS=${SONGS:-39}
E=${EVAL:-out/eval}
mkdir -p $E
ship() {  # run folder -> checkpoints/<name> model folder, weights bit-identical to the export
  $BIN/python scripts/export_checkpoint.py runs/$1 checkpoints/$1 > $E/$1.export.json
  $BIN/python scripts/convert_checkpoint.py checkpoints/$1/model.pt checkpoints/$1
  rm checkpoints/$1/model.pt
}
if [ "$WHAT" = pop909 ]; then
  MODELS=${MODELS:-pop909_sine_spe_gated pop909_ape}
  for name in $MODELS; do [ "${SKIP_EXPORT:-0}" = 1 ] || ship $name; done
  # validation songs, each with its chord_midi.txt (prompts read the annotation beside a file)
  VAL=$($BIN/python -c "import json; rows = map(json.loads, open('data/prepared/pop909/manifest.jsonl')); print(*[r['path'] for r in rows if r['split'] == 'validation'])")
  rm -rf $E/val_songs $E/reference && mkdir -p $E/val_songs $E/reference
  for s in $VAL; do
    mkdir -p $E/val_songs/$(dirname $s)
    cp "$POP909/$s" "$POP909/$(dirname $s)/chord_midi.txt" $E/val_songs/$(dirname $s)/
  done
  for s in $(echo $VAL | tr ' ' '\n' | head -$PIECES); do cp "$POP909/$s" $E/reference/; done
  # NLL per position and per note, forbidden mass, up to 4x the 512-token training crop
  if [ "$MODELS" = "pop909_sine_spe_gated pop909_ape" ]; then
    $BIN/musicgen evaluate nll --checkpoint checkpoints/pop909_sine_spe_gated checkpoints/pop909_ape \
      --data data/prepared/pop909 --max-len 2048 --seeds 3 --max-songs $SONGS --out $E/pop909_nll
  fi
  if [ -d "$PREVIOUS/pop909_ape" ] && [ ! -f $E/pop909_nll_previous/nll.json ]; then
    [ -f data/prepared/pop909_detected/tokenizer.json ] || $BIN/musicgen prepare --dataset folder \
      --input "$POP909" --output data/prepared/pop909_detected
    $BIN/musicgen evaluate nll --checkpoint $PREVIOUS/pop909_sine_spe_gated $PREVIOUS/pop909_ape \
      --data data/prepared/pop909_detected --max-len 2048 --seeds 3 --max-songs $SONGS --out $E/pop909_nll_previous
  fi
  # the replaced models through the same texture and continuation commands (PREVIOUS_FULL=1)
  LIST=""
  for name in $MODELS; do
    LIST="$LIST $name:checkpoints"
    if [ "${PREVIOUS_FULL:-0}" = 1 ]; then LIST="$LIST $name:$PREVIOUS"; fi
  done
  # texture: 16 pieces of 16 bars from scratch per model, against 16 held-out songs
  # continuation: 2-bar prompts of the first 20 validation songs, kept intact? style per quarter
  for item in $LIST; do
    name=${item%%:*}; dir=${item#*:}
    tag=$([ "$dir" = checkpoints ] && echo "$name" || echo "previous_$name")
    $BIN/musicgen generate --checkpoint $dir/$name --out $E/samples_$tag \
      --num $PIECES --bars 16 --seed 0 --overwrite > /dev/null
    $BIN/musicgen evaluate music $E/samples_$tag --reference $E/reference \
      --checkpoint $dir/$name --out $E/music_$tag
    $BIN/musicgen evaluate style --checkpoint $dir/$name --prompts $E/val_songs \
      --max-prompts $PROMPTS --samples 1 --max-tokens 1024 --out $E/style_$tag
  done
elif [ "$WHAT" = groove ]; then
  [ "${SKIP_EXPORT:-0}" = 1 ] || ship groove_sine_spe_gated
  $BIN/musicgen evaluate nll --checkpoint checkpoints/groove_sine_spe_gated \
    --data data/prepared/trio --max-len 2048 --out $E/groove_nll
  # continue 2-bar prompts of unseen (test) styles, style similarity per time segment
  for t in 0.6 1.0; do
    $BIN/musicgen evaluate style --checkpoint checkpoints/groove_sine_spe_gated \
      --prompts data/trio/test --max-prompts 10 --samples 2 --max-tokens 1024 --temperature $t \
      --out $E/groove_style$([ $t = 1.0 ] && echo _t1 || true)
  done
else
  echo "usage: scripts/evaluate_shipped.sh pop909|groove" >&2; exit 2
fi
