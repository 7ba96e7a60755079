#!/usr/bin/env bash
# The GPU runs behind the README's tables and assets/recorded/: run on one NVIDIA H200 as
#   OUT=out bash scripts/h200_runs.sh tests|record|bench|fast|multistep|all
# Every number the README quotes from the H200 comes from the output of one of these commands.
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT/rec"
part=${1:-all}
E="python3 -m engine --device cuda"

if [[ $part == tests || $part == all ]]; then
    python3 -m pytest -q -m cuda tests/ -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log" | tail -15
fi

if [[ $part == record || $part == all ]]; then
    # Recorded runs for the UI (schema-1 run records, normal and overlap on one workload each).
    small="--model bundled --requests 16 --batch-size 16 --prompt-len 24 --max-new-tokens 48"
    $E $small --json "$OUT/rec/h200-bundled-eager.json"
    $E $small --cuda-graph --extra-cpu-us 200 --json "$OUT/rec/h200-bundled-graph-cpu200.json"
    $E $small --cuda-graph --extra-cpu-us 200 --mode overlap --decode-steps 4 \
        --json "$OUT/rec/h200-bundled-graph-cpu200-multistep4.json"
    # KV memory: one shared system prompt of 256 tokens before every prompt, on a pool of 160
    # pages (16 requests at full length would need 336 unshared; sharing the prompt's 16 pages,
    # they fit: prefix-cache hits, no retractions in the recorded run).
    $E $small --cuda-graph --extra-cpu-us 200 --shared-prefix 256 --kv-pages 160 \
        --json "$OUT/rec/h200-bundled-graph-shared-prefix-kv160.json"
    # A scheduler twice as slow as the forward: normal, one-step overlap and multi-step (k=3).
    $E --model smollm2-135m-shape --requests 8 --batch-size 8 --prompt-len 32 --max-new-tokens 96 \
        --ignore-eos --cuda-graph --extra-cpu-us 4000 --mode all --decode-steps 3 \
        --json "$OUT/rec/h200-smollm-graph-cpu4000-all.json"
    big="--model qwen2.5-0.5b-shape --requests 64 --batch-size 64 --prompt-len 32 \
        --max-new-tokens 128 --ignore-eos"
    $E $big --cuda-graph --json "$OUT/rec/h200-qwen05-graph-b64.json"
    # Kernel lanes for steps 24-27 (the app's default window for a run with kernel lanes); the
    # profiler's own start-up falls between steps 23 and 24, outside that window.
    smol="--model smollm2-135m-shape --requests 8 --batch-size 8 --prompt-len 32 \
        --max-new-tokens 64 --ignore-eos --profile-steps 24 27"
    $E $smol --json "$OUT/rec/h200-smollm-eager-kernels.json"
    $E $smol --cuda-graph --json "$OUT/rec/h200-smollm-graph-kernels.json"
    tar czf "$OUT/recorded.tgz" -C "$OUT/rec" .
fi

if [[ $part == bench || $part == all ]]; then
    B="python3 -m bench --device cuda"
    $B --graphs graph --hf --models bundled qwen2.5-0.5b-shape 2>&1 \
        | grep -v -e "^Loading" -e Warning -e warn | tee "$OUT/bench_graph.md" | tail -40
    $B --graphs graph --models smollm2-135m-shape qwen2.5-1.5b-shape 2>&1 \
        | grep -v -e "^Loading" -e Warning -e warn | tee "$OUT/bench_graph_more.md" | tail -30
    $B --graphs eager --models bundled qwen2.5-0.5b-shape --batches 64 --extra-cpu-us 0 \
        --repeats 1 --new-tokens 64 2>&1 | grep "^|" | tee "$OUT/bench_eager.md" | tail -16
    $B --overhead --models qwen2.5-0.5b-shape --batches 64 --graphs graph 2>&1 \
        | tee "$OUT/overhead.md"
    $B --multistep --models bundled --batches 8 --graphs graph --extra-cpu-us 200 2>&1 \
        | tee "$OUT/multistep.md" | tail -12
fi

if [[ $part == fast || $part == all ]]; then
    # Issue 14: the fast decode path. Forward-only step beside the weight-read floor per variant,
    # then the engine (both loops) with compiled regions; start-up time is printed per engine.
    python3 -m bench --forward --models qwen2.5-0.5b-shape qwen2.5-1.5b-shape --batches 1 8 64 \
        --variants triton triton+compile triton+compile+gemv 2>&1 | tee "$OUT/forward.md"
    python3 -m bench --device cuda --graphs graph --compile --hf --hf-dynamic-only \
        --models qwen2.5-0.5b-shape qwen2.5-1.5b-shape 2>&1 | grep -v -e Warning -e warn \
        | tee "$OUT/bench_compiled.md" | tail -40
fi

if [[ $part == multistep || $part == all ]]; then
    # Issue 8: multi-step overlap. SmolLM2-135M shape with a scheduler twice as slow as its
    # forward; the tiny bundled model, whose forward is as short as one launch's CPU cost.
    python3 -m bench --device cuda --multistep --models smollm2-135m-shape --batches 8 \
        --graphs graph --extra-cpu-us 4000 2>&1 | grep -v -e Warning -e warn \
        | tee "$OUT/multistep-smollm-4000.md" | tail -16
    for extra in 200 800; do
        python3 -m bench --device cuda --multistep --models bundled --batches 8 \
            --graphs graph --extra-cpu-us $extra 2>&1 | grep -v -e Warning -e warn \
            | tee "$OUT/multistep-$extra.md" | tail -16
    done
fi
