#!/usr/bin/env bash
# Export the runs of scripts/train_shipped.sh into checkpoints/ and measure them; the numbers go
# into each checkpoints/<name>/README.md and README.md (figures in docs/figures/).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
for name in pop909_sine_spe_gated pop909_ape groove_sine_spe_gated; do
  $BIN/python scripts/export_checkpoint.py runs/$name checkpoints/$name > out/eval/$name.export.json
  # ship a model folder (model.safetensors + config.json + tokenizer.json), weights bit-identical
  $BIN/python scripts/convert_checkpoint.py checkpoints/$name/model.pt checkpoints/$name
  rm checkpoints/$name/model.pt
done
# per-position NLL on held-out songs up to 4x the 512-token training crop (extrapolation)
$BIN/musicgen evaluate nll --checkpoint checkpoints/pop909_sine_spe_gated \
  checkpoints/pop909_ape --data data/prepared/pop909 --max-len 2048 --out out/eval/pop909_nll
$BIN/musicgen evaluate nll --checkpoint checkpoints/groove_sine_spe_gated \
  --data data/prepared/trio --max-len 2048 --out out/eval/groove_nll
# music statistics of 8 pieces from scratch per pop model, against 8 held-out POP909 songs
mkdir -p out/eval/reference
for s in $($BIN/python -c "import json; rows = map(json.loads, open('data/prepared/pop909/manifest.jsonl')); print(*[r['path'] for r in rows if r['split'] == 'validation'][:8])"); do
  cp "${POP909:-../shared/data/pop909}/$s" out/eval/reference/
done
for name in pop909_sine_spe_gated pop909_ape; do
  $BIN/musicgen generate --checkpoint checkpoints/$name --out out/eval/samples_$name \
    --num 8 --bars 16 --seed 0 --overwrite > /dev/null
  $BIN/musicgen evaluate music out/eval/samples_$name --reference out/eval/reference \
    --checkpoint checkpoints/$name --out out/eval/music_$name
done
# groove: continue 2-bar prompts of unseen (test) styles, style similarity per time segment
$BIN/musicgen evaluate style --checkpoint checkpoints/groove_sine_spe_gated \
  --prompts data/trio/test --max-prompts 10 --samples 2 --max-tokens 1024 --out out/eval/groove_style
$BIN/musicgen evaluate style --checkpoint checkpoints/groove_sine_spe_gated \
  --prompts data/trio/test --max-prompts 10 --samples 2 --max-tokens 1024 --temperature 1.0 \
  --out out/eval/groove_style_t1
