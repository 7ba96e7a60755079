#!/usr/bin/env bash
# One call on one NVIDIA H200 for issue 21 (device time is scarce: every step has a time limit):
#   OUT=out BUDGET_S=480 bash scripts/gpu_issue21.sh
# 1. every CUDA test (the timing test of tests/test_warm.py alone, not beside the others);
# 2. the result copy on either stream: gap between decode forwards, busy both ways;
# 3. the recorder's cost: decode tok/s with spans on vs off, both loops, B=1 and B=64;
# 4. the host cost per forward, primitive by primitive. Log: $OUT/log.txt.
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/steps.sh"

step env 20 bash -c "nvidia-smi -L; python3 -c 'import torch, triton, transformers; \
print(torch.__version__, triton.__version__, transformers.__version__)'"
step cuda_tests 220 python3 -m pytest -q -p no:cacheprovider -m cuda -n 6 -rs tests/ \
    --deselect tests/test_warm.py::test_cuda_first_loop_pays_no_first_use
step cuda_warm 60 python3 -m pytest -q -p no:cacheprovider -m cuda -rs tests/test_warm.py
step placement 90 python3 -m bench --copy-placement --models bundled --batches 1 16 \
    --graphs graph
step overhead 150 python3 -m bench --overhead --models bundled qwen2.5-0.5b-shape \
    --batches 1 64 --graphs graph
step launch_cost 40 python3 -m bench --launch-cost --models bundled --batches 8
echo "=== done t=$(($(date +%s) - START))s" | tee -a "$LOG"
