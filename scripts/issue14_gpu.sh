#!/usr/bin/env bash
# Issue 14 on one NVIDIA H200, in one call each (device time is scarce):
#   OUT=out bash scripts/issue14_gpu.sh check    # kernel tests, forward variants vs floor, launch
#                                                # cost, attention sweep, engine CUDA tests
#   OUT=out bash scripts/issue14_gpu.sh tests    # all CUDA tests, GEMV vs cuBLAS, launch prototype
#   OUT=out bash scripts/issue14_gpu.sh final    # the bench table with the floor (engine, both loops)
# Every step has its own time limit and the whole script a budget (BUDGET_S), so one slow step
# can't eat the call; everything goes to $OUT/log.txt (the device tool returns few files).
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
BUDGET_S=${BUDGET_S:-480}
source "$(dirname "$0")/steps.sh"

step env 20 bash -c "nvidia-smi -L; python3 -c 'import torch, triton, transformers; \
print(torch.__version__, triton.__version__, transformers.__version__)'"
PT="python3 -m pytest -q -p no:cacheprovider -m cuda"

if [[ $part == check ]]; then
    step kernel_tests 100 $PT tests/test_paged_attention.py
    step forward_05b 130 python3 -m bench --forward --models qwen2.5-0.5b-shape \
        --batches 1 8 64 --variants triton triton+compile --repeats 5 --ceiling-iters 40 --profile
    step forward_15b 80 python3 -m bench --forward --models qwen2.5-1.5b-shape \
        --batches 1 64 --variants triton triton+compile --repeats 5 --ceiling-iters 40
    step launch_cost 30 python3 -m bench --launch-cost --models qwen2.5-0.5b-shape --batches 8
    step engine_tests 90 $PT tests/test_engine.py -k "graphs_match_eager or matches_reference \
        or (normal_equals_overlap and bfloat16)"
    step attention_sweep 45 python3 -m bench --attention-sweep
fi

if [[ $part == tests ]]; then   # second call: every CUDA test, the GEMV against cuBLAS in place
    step cuda_tests 170 $PT -n 6 tests/
    step forward_05b 85 python3 -m bench --forward --models qwen2.5-0.5b-shape \
        --batches 1 8 64 --variants triton+compile triton+compile+gemv --repeats 5 \
        --ceiling-iters 40 --profile
    step forward_15b 60 python3 -m bench --forward --models qwen2.5-1.5b-shape \
        --batches 1 64 --variants triton+compile triton+compile+gemv --repeats 5 --ceiling-iters 40
    step launch_cost 30 python3 -m bench --launch-cost --models qwen2.5-0.5b-shape --batches 8
fi

if [[ $part == final ]]; then  # third call: every CUDA test again, then the engine bench
    step cuda_tests 150 $PT -n 6 -rs tests/
    B="python3 -m bench --device cuda --graphs graph --compile --batches 1 8 64"
    step bench_05b 110 $B --models qwen2.5-0.5b-shape --extra-cpu-us 0 200 --hf --hf-dynamic-only
    step bench_15b 75 $B --models qwen2.5-1.5b-shape --extra-cpu-us 0
    step bench_smollm 45 $B --models smollm2-135m-shape --extra-cpu-us 0
    step forward_final 40 python3 -m bench --forward --models qwen2.5-0.5b-shape \
        --batches 1 8 64 --variants triton+compile --repeats 5 --ceiling-iters 40
fi
echo "=== done t=$(($(date +%s) - START))s" | tee -a "$LOG"
