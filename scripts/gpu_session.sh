#!/usr/bin/env bash
# One call on one NVIDIA H200 that re-checks and re-makes everything GPU-side (device time is
# scarce, so every step has a time limit and the whole a budget):
#   OUT=out BUDGET_S=480 bash scripts/gpu_session.sh
# 1. every CUDA test; 2. the launch cost per forward; 3. the recorded runs the app shows
# (scripts/h200_runs.sh record, into $OUT/recorded.tgz); 4. torch.profiler traces of real decode
# loops for the importer (scripts/profile_traces.py, into $OUT/traces.tgz). Log: $OUT/log.txt.
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/steps.sh"

step env 20 bash -c "nvidia-smi -L; python3 -c 'import torch, triton, transformers; \
print(torch.__version__, triton.__version__, transformers.__version__)'"
step cuda_tests 170 python3 -m pytest -q -p no:cacheprovider -m cuda -n 6 -rs tests/
step launch_cost 40 python3 -m bench --launch-cost --models qwen2.5-0.5b-shape --batches 8
step record 200 env OUT="$OUT" bash scripts/h200_runs.sh record
step traces 100 python3 scripts/profile_traces.py --out "$OUT/traces"
tar czf "$OUT/traces.tgz" -C "$OUT" traces 2>/dev/null && rm -rf "$OUT/traces"
rm -rf "$OUT/rec"
echo "=== done t=$(($(date +%s) - START))s" | tee -a "$LOG"
