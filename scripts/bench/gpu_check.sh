#!/usr/bin/env bash
# GPU readiness in one command (under 8 minutes on one GPU): the test suite on CUDA, a few hundred
# bf16 training steps of the paper's 24-layer gated sineSPE model (tokens/s, peak memory),
# parallel vs recurrent agreement under bf16, and generation speed. Writes the "gpu check" section
# of docs/benchmarks.md.
#
#   bash scripts/bench/gpu_check.sh                 # on a CUDA machine
#   GPU_CHECK_DRY=1 bash scripts/bench/gpu_check.sh # CPU dry run, tiny sizes, writes /tmp/gpu_check.md
#
# PYTHON overrides the interpreter (default: .venv/bin/python when present, else python).
set -uo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python )}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
  DEVICE=cpu; WRITE=${GPU_CHECK_WRITE:-/tmp/gpu_check.md}; TESTS=(tests/test_train.py -k "resume")
else
  DEVICE=cuda; WRITE=${GPU_CHECK_WRITE:-docs/benchmarks.md}; TESTS=(tests)
fi

echo "== test suite (MUSICGEN_TEST_DEVICE=$DEVICE)"
start=$(date +%s)
LOG=$(mktemp)
MUSICGEN_TEST_DEVICE=$DEVICE timeout 210 "$PY" -m pytest -q -p no:cacheprovider "${TESTS[@]}" \
  2>&1 | tee "$LOG" | tail -n 25
rc=${PIPESTATUS[0]}
summary=$(grep -E "(passed|failed|error)" "$LOG" | tail -n 1 | sed -E 's/=+//g; s/^ +| +$//g')
[ "$rc" = 124 ] && summary="stopped after 210 s ($summary)"
summary="${summary:-no summary (exit $rc)} (exit $rc, $(( $(date +%s) - start )) s)"
rm -f "$LOG"

echo "== training, agreement, generation"
timeout 260 "$PY" scripts/bench/gpu_check.py --tests "$summary" --write "$WRITE"
mrc=$?
echo "tests: $summary; measurements exit $mrc; results in $WRITE"
[ "$rc" = 0 ] && [ "$mrc" = 0 ]
