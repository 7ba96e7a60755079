#!/usr/bin/env bash
# Everything this project measures or records on a CUDA GPU (docs/benchmarks.md names the card and
# host of each table), one subcommand per job, run from the repository root:
#
#   OUT=out bash studies/gpu.sh suite        # every CUDA test, then the warm-up timing test alone
#   OUT=out bash studies/gpu.sh bench        # the H200 tables of docs/benchmarks.md
#   OUT=out bash studies/gpu.sh first-click  # the page's first clicks (needs the UI's wheels)
#   OUT=out bash studies/gpu.sh ui           # every UI and server test (needs the UI's wheels)
#   OUT=out bash studies/gpu.sh record       # assets/recorded/, into $OUT/recorded.tgz
#   OUT=out bash studies/gpu.sh sized        # only the three records sized against the forward
#   OUT=out bash studies/gpu.sh gap          # the loop's forward vs its graph alone, kernels
#   OUT=out bash studies/gpu.sh ours-record  # only our record beside the peers' (both loops,
#                                             # their workload), into $OUT/rec
#   OUT=out bash studies/gpu.sh traces       # tests/data/traces/, into $OUT/traces.tgz
#   OUT=out bash studies/gpu.sh peer         # Mini-SGLang at its best beside our engine, ours
#                                            # timed at the call's start and end (after
#                                            # studies/peers/minisglang/prepare.sh; WHL=its folder)
#   OUT=out bash studies/gpu.sh sglang       # SGLang at its best beside our engine, likewise
#                                            # (SGLANG=the folder holding its site.tar.xz, or the
#                                            # parts of it: studies/peers/sglang/payload.sh's set)
#   OUT=out bash studies/gpu.sh stash-sglang # keep the parts of SGLang's set this call carries,
#                                            # for a later call on the same machine
#
# The peer calls of one machine add their rows to $RESULTS/peer-<gpu>.json (one GPU, one file;
# every row names its call and the GPU's UUID), returned as $OUT/results-*.tgz.
#
# Several subcommands may be given at once (`bash studies/gpu.sh suite bench`). Each step runs
# under its own time limit and all of them within BUDGET_S seconds (default 540), so one call
# returns what it measured even when a step hangs; the output of every step goes to
# $OUT/log.txt. An offline GPU machine lacks the web UI's libraries: carry their wheels in
# folders named .whl-ui-* (gradio, plotly, fastapi, openai and their dependencies, downloaded for
# the machine's Python with `pip download --no-deps --only-binary=:all:`); they are installed
# into /tmp/site, where a later call on the same machine finds them again.
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# The copy of the project here has no git: the commit it was made from, named by the caller
# (COMMIT), goes into every record and table (engine/provenance.py).
export ENGINE_COMMIT=${COMMIT:-}
OUT=${OUT:-out}
mkdir -p "$OUT"
LOG=${LOG:-$OUT/log.txt}
BUDGET_S=${BUDGET_S:-540}
# The peer benchmarks' JSON and records: outside the project's copy, so that calls on the same
# machine add to one document (each call's copy of the project is fresh).
RESULTS=${RESULTS:-/tmp/peer-results}
mkdir -p "$RESULTS/recorded"
START=$(date +%s)
PT="python3 -m pytest -q -p no:cacheprovider -rs"
E="python3 -m engine --device cuda"
# The bundled model's small workload, shared by several records.
SMALL="--model bundled --requests 16 --batch-size 16 --prompt-len 24 --max-new-tokens 48"

# step NAME LIMIT_S command...: run the command under min(LIMIT_S, what is left of the budget).
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET_S - ($(date +%s) - START)))
    if ((left < 15)); then echo "=== SKIP $name (budget)" | tee -a "$LOG"; return; fi
    ((limit > left)) && limit=$left
    echo "=== $name (limit ${limit}s, t=$(($(date +%s) - START))s)" | tee -a "$LOG"
    # Peers' loggers stamp dates and colour codes; the log keeps the time of day only.
    timeout "$limit" "$@" 2>&1 | grep -v -e "Warning" -e "warnings.warn" -e "^Loading" \
        | sed -E 's/\x1b\[[0-9;]*m//g; s/\[[0-9]{4}-[0-9]{2}-[0-9]{2}[| ]/[/g' | tee -a "$LOG"
    echo "=== $name rc=${PIPESTATUS[0]} t=$(($(date +%s) - START))s" | tee -a "$LOG"
}

# The web UI's libraries, from the carried wheels (kept in /tmp/whl between calls).
ui_wheels() {
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    python3 -c "import gradio, plotly, fastapi, openai" 2>/dev/null && return
    mkdir -p /tmp/whl
    for d in .whl-ui-*; do [[ -d $d ]] && cp "$d"/*.whl /tmp/whl/; done
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
        /tmp/whl/*.whl 2>&1 | tail -3
}

suite() {
    # The warm-up test times the first loop: alone, not beside six other processes on the GPU.
    step cuda_tests "${SUITE_S:-300}" $PT -m cuda -n 6 tests/ \
        --deselect tests/test_warm.py::test_cuda_first_loop_pays_no_first_use
    step cuda_warm 50 $PT -m cuda tests/test_warm.py
}

bench() {
    step loops 120 python3 -m bench loops --device cuda --graphs graph --compile --batches 1 8 64 \
        --models qwen2.5-0.5b-shape --extra-cpu-us 0 200
    # The 0.5B shape: a forward longer than the scheduler's work, so what separates two forwards
    # is where the copy runs, not the host (the bundled model's compiled forward is shorter).
    step copy_placement 150 python3 -m studies copy-placement --models qwen2.5-0.5b-shape \
        --batches 1 16
    step launch_cost 30 python3 -m studies launch-cost --model bundled --batch 8
    step recorder_overhead 240 python3 -m bench recorder --models bundled qwen2.5-0.5b-shape \
        --batches 1 64 --new-tokens 256
    step ttft_bound 60 python3 -m studies ttft-bound
}

first_click() {
    ui_wheels
    step first_clicks 240 python3 -m studies gpu-first-click --clicks "${CLICKS:-5}" --out "$OUT"
}

ui() {
    ui_wheels
    step ui_tests 300 $PT -n 8 tests/test_ui_*.py tests/test_serve.py tests/test_faults.py \
        tests/test_service_arrivals.py
}

# The three records whose extra CPU work was sized against the forward (`bash studies/gpu.sh
# sized`, into $OUT/rec). They keep an uncompiled step (as the page runs it): compiled, the tiny
# model's forward is shorter than the scheduler's own work, and 200 µs would be 2.5 forwards,
# not one.
sized_runs() {
    local rec="$OUT/rec"
    mkdir -p "$rec"
    $E $SMALL --cuda-graph --no-compile --extra-cpu-us 200 --json "$rec/h200-bundled-graph-cpu200.json"
    $E $SMALL --cuda-graph --no-compile --extra-cpu-us 200 --mode overlap --decode-steps 4 \
        --json "$rec/h200-bundled-graph-cpu200-multistep4.json"
    # A scheduler twice as slow as the forward: normal, one-step overlap and multi-step (k=3).
    $E --model smollm2-135m-shape --requests 8 --batch-size 8 --prompt-len 32 --max-new-tokens 96 \
        --ignore-eos --cuda-graph --no-compile --extra-cpu-us 4000 --mode all --decode-steps 3 \
        --json "$rec/h200-smollm-graph-cpu4000-all.json"
}

# The recorded runs the page offers (schema-1 run records, each loop on one workload).
record_runs() {
    local rec="$OUT/rec"
    mkdir -p "$rec"
    $E $SMALL --json "$rec/h200-bundled-eager.json"
    sized_runs
    # KV memory: one shared system prompt of 256 tokens before every prompt, on a pool of 160
    # pages (16 requests at full length would need 336 unshared; sharing the prompt's 16 pages,
    # they fit: prefix-cache hits, no retractions).
    $E $SMALL --cuda-graph --extra-cpu-us 200 --shared-prefix 256 --kv-pages 160 \
        --json "$rec/h200-bundled-graph-shared-prefix-kv160.json"
    $E --model qwen2.5-0.5b-shape --requests 64 --batch-size 64 --prompt-len 32 \
        --max-new-tokens 128 --ignore-eos --cuda-graph --json "$rec/h200-qwen05-graph-b64.json"
    kernel_runs
    tar czf "$OUT/recorded.tgz" -C "$rec" . && rm -rf "$rec"
}

# The two kernel-lane records (also alone: `bash studies/gpu.sh kernels`): kernel lanes for
# steps 24-27 (the page's default window for a run with kernel lanes); the profiler's own
# start-up falls between steps 23 and 24, outside that window.
kernel_runs() {
    local rec="$OUT/rec" smol="--model smollm2-135m-shape --requests 8 --batch-size 8 --prompt-len 32 \
        --max-new-tokens 64 --ignore-eos --profile-steps 24 27"
    mkdir -p "$rec"
    $E $smol --json "$rec/h200-smollm-eager-kernels.json"
    $E $smol --cuda-graph --json "$rec/h200-smollm-graph-kernels.json"
}

# The loop's decode forward against its graph replayed alone, one ingredient at a time, and the
# kernels of a step (studies/forward_gap.py), both shapes.
gap() {
    step forward_gap 240 python3 -m studies forward-gap \
        --models ${MODELS:-qwen2.5-0.5b-shape llama-3.1-8b-shape} --batches 1 64
}

# Our record beside the peers' (the workload of studies/peers/work.py's record: B = 16, 32-token
# prompts, 64 new tokens, the first shape of MODELS), alone: without timing any peer again.
ours_record() {
    mkdir -p "$OUT/rec"
    step ours_record 200 python3 -c "import sys; from pathlib import Path
from studies.peers.ours import save_our_record; from studies.peers.work import PeerWork
print('wrote', save_our_record(PeerWork(), sys.argv[1], Path(sys.argv[2]), sys.argv[3]))" \
        "${MODELS%% *}" "$OUT/rec" "${COMMIT:-}"
}

traces() {
    step traces 100 python3 -m studies profile-traces --out "$OUT/traces"
    tar czf "$OUT/traces.tgz" -C "$OUT" traces 2>/dev/null && rm -rf "$OUT/traces"
}

# Mini-SGLang's wheels (WHL, default .whl-peer: studies/peers/minisglang/prepare.sh's folder),
# offline, into /tmp/site.
minisgl_wheels() {
    step peer_install 60 python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target /tmp/site "${WHL:-.whl-peer}"/*.whl
}

# Mini-SGLang at its best beside our engine (python -m studies peers mini-sglang): its rows and
# ours merged into $RESULTS/peer-<gpu>.json (studies/results/ keeps it), its record and ours
# (both loops, one workload) in assets/recorded/. Needs the folder studies/peers/minisglang/prepare.sh makes (WHL, default
# .whl-peer: the package and its wheels). Its first start compiles FlashInfer's kernels (one
# shape after another: its processes share one fixed port); they stay in JIT for a later call on
# the same machine.
peer() {
    local whl=${WHL:-.whl-peer} jit=${JIT:-/tmp/peer-jit}
    mkdir -p "$jit"
    minisgl_wheels
    local left=$((${PEER_S:-$((BUDGET_S - ($(date +%s) - START)))} - 30))
    step peer $((left + 15)) python3 -m studies peers mini-sglang --minisgl "$whl/python" \
        --site /tmp/site --models ${MODELS:-qwen2.5-0.5b-shape} ${PEER_ARGS:-} \
        --jit-cache "$jit" --json "$RESULTS/peer-$(gpu_tag).json" \
        --merge --budget-s "$left" --commit "${COMMIT:-}"
    tar czf "$OUT/results-peer.tgz" -C "$RESULTS" .
}

# The GPU's model in file names ("h100" for "NVIDIA H100 80GB HBM3"), as studies.peers.table.
gpu_tag() {
    nvidia-smi --query-gpu=name --format=csv,noheader -i 0 | tr ' ' '\n' \
        | grep -m1 -E '^[A-Za-z]+[0-9]+' | grep -vi nvidia | tr 'A-Z' 'a-z'
}

# SGLang's package set may come in parts (site.tar.xz.partNN, each call carrying what fits
# beside the project): each call keeps the parts it brings in /tmp/sglang-parts, on this machine,
# and the set is unpacked once they are all there.
stash_sglang() {
    local pay=${SGLANG:-.peer-sglang}
    mkdir -p /tmp/sglang-parts
    for f in "$pay"/site.tar.xz.part*; do [[ -f $f ]] && cp "$f" /tmp/sglang-parts/; done
    ls -la /tmp/sglang-parts
}

# SGLang beside our engine (python -m studies peers sglang): its rows and ours merged into
# $RESULTS/peer-<gpu>.json. Needs SGLANG (default .peer-sglang) holding site.tar.xz or its parts
# (this call's and those stash-sglang kept), unless a call before this one on the same machine
# unpacked it; FlashInfer's compiled kernels stay in JIT (a later call on the same machine, or
# jit.txz carried there, starts without compiling; JIT_BACK=1 sends it back). MODELS: the shapes
# timed; PEERS_OF=all: Mini-SGLang too (its wheels from WHL, default .whl-peer); SGLANG_ARGS:
# more flags (--only NAME-PART, --record DIR, --sglang-traces DIR, --sglang-compile, --warm-also
# SHAPE, --no-warm). Back under $OUT: results-sglang.tgz, jit.txz.
sglang() {
    local pay=${SGLANG:-.peer-sglang} jit=${JIT:-/tmp/peer-jit}
    mkdir -p /tmp/sglang "$jit" "$OUT/traces"
    local whole="$pay/site.tar.xz"
    if [[ ! -f $whole ]]; then                   # the parts this and earlier calls brought
        stash_sglang
        whole=/tmp/sglang-site.tar.xz
        cat /tmp/sglang-parts/site.tar.xz.part* > "$whole"
    fi
    [[ -d /tmp/sglang/site/sglang ]] || step sglang_unpack 90 tar -xJf "$whole" -C /tmp/sglang
    [[ -f $pay/jit.txz ]] && step jit_unpack 30 tar xJf "$pay/jit.txz" -C "$jit"
    export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} NCCL_NVLS_ENABLE=0 \
        TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    export PATH=$CUDA_HOME/bin:$PATH
    if [[ ${PEERS_OF:-} == all ]]; then minisgl_wheels; fi    # Mini-SGLang too
    local left=$((${SGLANG_S:-$((BUDGET_S - ($(date +%s) - START)))} - 45))
    step sglang $((left + 15)) python3 -m studies peers "${PEERS_OF:-sglang}" \
        --sglang-site /tmp/sglang/site --minisgl "${WHL:-.whl-peer}/python" --site /tmp/site \
        --models ${MODELS:-qwen2.5-0.5b-shape} ${SGLANG_ARGS:-} \
        --jit-cache "$jit" --json "$RESULTS/peer-$(gpu_tag).json" --merge \
        --budget-s "$left" --commit "${COMMIT:-}"
    tar czf "$OUT/results-sglang.tgz" -C "$RESULTS" .
    if [[ -n $(ls "$OUT/traces") ]]; then
        (cd "$OUT" && tar cf traces.tar traces && split -b 15000000 -d traces.tar traces.tar.part)
        rm -rf "$OUT/traces" "$OUT/traces.tar"
    else
        rmdir "$OUT/traces"
    fi
    if [[ -n ${JIT_BACK:-} ]]; then        # the compiled kernels, for a later call to carry
        tar cf - -C "$jit" . | xz -6 -T0 > "$OUT/jit.txz"
        (($(stat -c %s "$OUT/jit.txz") > 15000000)) && (cd "$OUT" && split -b 15000000 -d jit.txz jit.txz.part && rm jit.txz)
    fi
    ls -la "$OUT"
}

step env 20 bash -c "nvidia-smi -L; python3 -c 'import torch, triton, transformers; \
print(torch.__version__, triton.__version__, transformers.__version__)'"
for part in "${@:-suite}"; do
    case $part in
        suite) suite ;;
        bench) bench ;;
        first-click) first_click ;;
        ui) ui ;;
        record) export -f record_runs sized_runs kernel_runs; export E SMALL OUT
                step record 300 bash -c record_runs ;;
        sized) export -f sized_runs; export E SMALL OUT
               step sized 120 bash -c 'sized_runs && tar czf "$OUT/recorded.tgz" -C "$OUT/rec" .' ;;
        kernels) export -f kernel_runs; export E SMALL OUT; step kernels 150 bash -c kernel_runs ;;
        gap) gap ;;
        ours-record) MODELS=${MODELS:-qwen2.5-0.5b-shape} ours_record ;;
        traces) traces ;;
        peer) peer ;;
        stash-sglang) stash_sglang ;;
        sglang) sglang ;;
        *) echo "unknown part: $part (suite, bench, first-click, ui, record, sized, kernels, gap, ours-record, traces, peer, stash-sglang, sglang)"; exit 2 ;;
    esac
done
echo "=== done t=$(($(date +%s) - START))s" | tee -a "$LOG"
