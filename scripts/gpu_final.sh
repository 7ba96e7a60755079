#!/usr/bin/env bash
# The GPU side of issues 20-22 on one NVIDIA H200, in three calls (device time is scarce: every
# step has a time limit, the whole a budget; everything goes to $OUT/log.txt):
#   OUT=out bash scripts/gpu_final.sh engine   # every CUDA test; the result copy on either
#                                              # stream; the recorder's cost; the README's table
#   OUT=out bash scripts/gpu_final.sh stage    # (carries .whl-ui-a) the recorded runs, the
#                                              # shared-prefix serving bench; wheels to /tmp/whl
#   OUT=out bash scripts/gpu_final.sh ui       # (carries .whl-ui-b, within 30 s of stage) the UI
#                                              # and server tests, the page's first clicks on CUDA
# This session's two calls (one warm machine, the second within 30 s of the first):
#   OUT=out bash scripts/gpu_final.sh check    # (carries .whl-ui-a) the CUDA tests, copy
#                                              # placement, the shared-prefix serving bench
#   OUT=out bash scripts/gpu_final.sh page     # (carries .whl-ui-b) the page's first clicks, the
#                                              # server's restart test
#                                              # (UI_TESTS=1: and every UI and server test)
#   OUT=out bash scripts/gpu_final.sh next     # (carries .whl-ui-a) what this session could not
#                                              # run: warm test, recorder cost, 8B serving
#   OUT=out bash scripts/gpu_final.sh events   # every CUDA test, copy placement, launch cost and
#                                              # the recorder's cost (after a change to events)
#   OUT=out bash scripts/gpu_final.sh copy     # the same, after the copy stream came (a longer
#                                              # recorder-cost step)
#   OUT=out bash scripts/gpu_final.sh suite    # every CUDA test and the warm test, nothing else
#   OUT=out bash scripts/gpu_final.sh bounds   # the best TTFT ratio a prefix cache allows here
#                                              # (scripts/ttft_bound.py); the recorder's cost
# The UI's wheels: bash ../shared/gpu/ui-wheels.sh .whl-ui-a .whl-ui-b (or pinned to this
# checkout's versions, as this session did: see the closing note of issue 21).
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
BUDGET_S=${BUDGET_S:-540}
part=${1:?engine, stage or ui}
source "$(dirname "$0")/steps.sh"
PT="python3 -m pytest -q -p no:cacheprovider -rs"

# The UI's wheels come in two calls (one call carries at most 64 MiB): .whl-ui-a waits in
# /tmp/whl (which survives on a warm machine), then .whl-ui-b joins it and both are installed.
first_half_of_wheels() { mkdir -p /tmp/whl && cp .whl-ui-a/*.whl /tmp/whl/; }
install_ui_wheels() {
    cp .whl-ui-b/*.whl /tmp/whl/
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        /tmp/whl/*.whl 2>&1 | tail -3
    export PYTHONPATH=/tmp/site
}

step env 20 bash -c "nvidia-smi -L; python3 -c 'import torch, triton, transformers; \
print(torch.__version__, triton.__version__, transformers.__version__)'"

if [[ $part == engine ]]; then
    # The timing test alone, not beside six other processes on the same GPU.
    step cuda_tests 200 $PT -m cuda -n 6 tests/ \
        --deselect tests/test_warm.py::test_cuda_first_loop_pays_no_first_use
    step cuda_warm 60 $PT -m cuda tests/test_warm.py
    step placement 60 python3 -m bench --copy-placement --models bundled --batches 1 16 \
        --graphs graph
    step overhead 150 python3 -m bench --overhead --models bundled qwen2.5-0.5b-shape \
        --batches 1 64 --graphs graph --new-tokens 256
    step launch_cost 30 python3 -m bench --launch-cost --models bundled --batches 8
    # The README's H200 table, with the new copy placement and recorder.
    step table 120 python3 -m bench --device cuda --graphs graph --compile --batches 1 8 64 \
        --models qwen2.5-0.5b-shape --extra-cpu-us 0 200
fi

if [[ $part == stage ]]; then
    first_half_of_wheels
    step record 200 env OUT="$OUT" bash scripts/h200_runs.sh record
    rm -rf "$OUT/rec"                          # (in recorded.tgz: $OUT holds few files)
    step launch_cost 30 python3 -m bench --launch-cost --models bundled --batches 8
    step serving 110 python3 -m bench --device cuda --rates 8 --requests 32 --prompt-len 32 \
        --new-tokens 64 --shared-prefix 512 --prefix-cache both --repeats 3 \
        --json "$OUT/serving-shared-prefix-h200.json"
fi

if [[ $part == check ]]; then
    first_half_of_wheels
    step cuda_tests 150 $PT -m cuda -n 6 tests/ \
        --deselect tests/test_warm.py::test_cuda_first_loop_pays_no_first_use
    step cuda_warm 40 $PT -m cuda tests/test_warm.py
    step placement 30 python3 -m bench --copy-placement --models bundled --batches 1 16 \
        --graphs graph
    # Issue 22: the bundled model, every step a CUDA graph (prefills too).
    step serving 90 python3 -m bench --device cuda --rates 8 --requests 32 --prompt-len 32 \
        --new-tokens 64 --shared-prefix 512 --prefix-cache both --repeats 3 \
        --json "$OUT/serving-shared-prefix-h200.json"
fi

if [[ $part == page ]]; then
    install_ui_wheels
    # First, on a machine with nothing else running: the page's first clicks.
    step first_clicks 60 python3 scripts/gpu_first_click.py --clicks 5 --out "$OUT"
    step serve_restart 60 $PT -rf tests/test_serve.py -k killed_scheduler
    [[ ${UI_TESTS:-0} == 1 ]] && step ui_tests 280 $PT -n 8 -v -rf tests/test_ui_live.py \
        tests/test_ui_lab.py tests/test_ui_replay.py tests/test_ui_latency_tab.py \
        tests/test_ui_recorded_runs.py tests/test_serve.py tests/test_faults.py
fi

if [[ $part == next ]]; then                    # (carries .whl-ui-a) left for the next session
    first_half_of_wheels
    [[ ${SERVING_ONLY:-0} == 1 ]] || step cuda_warm 40 $PT -m cuda tests/test_warm.py
    [[ ${SERVING_ONLY:-0} == 1 ]] || step overhead 80 python3 -m bench --overhead --models bundled \
        --batches 1 64 --graphs graph --new-tokens 256
    # Issue 22 with every step a graph, prefills too, on a model whose 512 tokens are compute.
    step serving 300 python3 -m bench --device cuda --models llama-3.1-8b-shape --rates 4 12 \
        --requests 24 --prompt-len 32 --new-tokens 64 --shared-prefix 512 --prefix-cache both \
        --repeats 3 --json "$OUT/serving-shared-prefix-h200-8b.json"
fi

# After a change to the device's events: every CUDA test, then what the events cost and where
# the copy leaves the GPU idle. $1: the recorder-cost step's time limit.
engine_checks() {
    step cuda_tests 170 $PT -m cuda -n 6 tests/ \
        --deselect tests/test_warm.py::test_cuda_first_loop_pays_no_first_use
    step cuda_warm 40 $PT -m cuda tests/test_warm.py
    step placement 45 python3 -m bench --copy-placement --models bundled --batches 1 16 \
        --graphs graph
    step launch_cost 30 python3 -m bench --launch-cost --models bundled --batches 8
    step overhead "$1" python3 -m bench --overhead --models bundled --batches 1 64 --graphs graph \
        --new-tokens 256
}

if [[ $part == events ]]; then                  # the recorder's timing events as the signals
    engine_checks 120
fi

if [[ $part == copy ]]; then                    # the result copy on a stream of its own
    engine_checks 150
fi

if [[ $part == last ]]; then                    # (carries .whl-ui-a) this session's last round
    first_half_of_wheels
    engine_checks 90
    # Issue 22 nearer the 8B shape's capacity with the cache off (48 requests each).
    step serving 200 python3 -m bench --device cuda --models llama-3.1-8b-shape --rates 16 20 \
        --requests 48 --prompt-len 32 --new-tokens 64 --shared-prefix 512 --prefix-cache both \
        --repeats 3 --json "$OUT/serving-shared-prefix-h200-8b-high.json"
fi

if [[ $part == suite ]]; then                   # every CUDA test (a session's first check)
    step cuda_tests 200 $PT -m cuda -n 6 tests/ \
        --deselect tests/test_warm.py::test_cuda_first_loop_pays_no_first_use
    step cuda_warm 50 $PT -m cuda tests/test_warm.py
fi

if [[ $part == bounds ]]; then                  # what a prefix cache can do at best; the recorder
    step ttft_bound 60 python3 scripts/ttft_bound.py
    step overhead 240 python3 -m bench --overhead --models bundled qwen2.5-0.5b-shape \
        --batches 1 64 --graphs graph --new-tokens 256
fi

if [[ $part == wheels ]]; then                  # (carries .whl-ui-a) a fresh machine's half
    first_half_of_wheels
fi

if [[ $part == ui ]]; then
    install_ui_wheels
    [[ ${SKIP_CUDA:-0} == 1 ]] || step cuda_again 100 $PT -m cuda -n 4 tests/test_kv_memory.py tests/test_engine.py \
        tests/test_hazards.py tests/test_request.py
    step ui_tests 260 $PT -n 4 -v tests/test_ui_live.py tests/test_ui_lab.py tests/test_ui_replay.py \
        tests/test_ui_latency_tab.py tests/test_ui_recorded_runs.py tests/test_serve.py tests/test_faults.py
    step first_clicks 240 python3 scripts/gpu_first_click.py --clicks 3 --out "$OUT"
fi
echo "=== done t=$(($(date +%s) - START))s" | tee -a "$LOG"
