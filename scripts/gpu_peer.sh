#!/usr/bin/env bash
# One call on one NVIDIA H200: Mini-SGLang beside our engine (bench/results/peer-h200.json and
# Mini-SGLang's recorded runs in assets/recorded/), then our forward's kernel profile. Run from
# the project root after scripts/prepare_peer.sh (WHL: its folder, default .whl-peer):
#   OUT=out WHL=.whl-peer COMMIT=$(git rev-parse HEAD) bash scripts/gpu_peer.sh
# Mini-SGLang's first start compiles FlashInfer's kernels (about 100 s). The compiled kernels come
# back as $OUT/jit-cache.tar (gzip); put it at $WHL/jit-cache.tar and a later call unpacks it
# after the install, newer than the headers the builds name, to skip the compile. Everything
# is logged to $OUT/log; the profile also to $OUT/profile.md (PROFILE=0: no profile).
set -u
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-out}
WHL=${WHL:-.whl-peer}
JIT=${JIT:-/tmp/peer-jit}
mkdir -p "$OUT" "$JIT"
LOG=${LOG:-$OUT/log}
BUDGET_S=${BUDGET_S:-540}
source "$(dirname "$0")/steps.sh"

step env 20 bash -c "nvidia-smi -L; python3 -c 'import torch, triton, transformers; \
print(torch.__version__, triton.__version__, transformers.__version__)'"
step install 60 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site "$WHL"/*.whl
if [ -f "$WHL/jit-cache.tar" ]; then
    # After the install: the builds' ninja files name the wheels' headers, just written, and
    # rebuild whatever is older than them; touched, the unpacked builds are newer.
    step jit_unpack 30 bash -c "tar xf $WHL/jit-cache.tar -C $JIT && find $JIT -exec touch {} +"
fi
step peer 330 python3 -m bench --peer mini-sglang --minisgl "$WHL/python" --site /tmp/site \
    --jit-cache "$JIT" --peer-record assets/recorded --json bench/results/peer-h200.json \
    --commit "${COMMIT:-}"
cp bench/results/peer-h200.json assets/recorded/h200-minisglang-*.json "$OUT"/ 2>/dev/null
if [ "${PROFILE:-1}" != 0 ]; then
    step profile 150 bash -c "python3 -m bench --forward --profile --models qwen2.5-0.5b-shape \
        --batches 1 64 --variants triton triton+compile | tee $OUT/profile.md"
fi
tar czf "$OUT/jit-cache.tar" -C "$JIT" .
size=$(stat -c %s "$OUT/jit-cache.tar")
echo "=== jit-cache.tar: $size bytes" | tee -a "$LOG"
((size > 16 * 1024 * 1024)) && rm -f "$OUT/jit-cache.tar" && echo "(too large to bring back)"
echo "=== done t=$(($(date +%s) - START))s" | tee -a "$LOG"
