#!/usr/bin/env bash
# Prepares Mini-SGLang (the code the article reads) for a GPU machine without network, for
#   python -m studies peers mini-sglang
# Given a checkout of github.com/sgl-project/mini-sglang, puts into DEST (default .whl-peer/):
#   - the three wheels such a machine lacks (Python 3.12, x86-64): flashinfer-python (attention,
#     norms, RoPE; compiles its kernels with the machine's nvcc on first use), apache-tvm-ffi
#     (Mini-SGLang's own small kernels, compiled at run time) and pyzmq (imported by its scheduler);
#   - its package, python/minisgl, as DEST/python/minisgl, and the checkout's commit in
#     DEST/python/COMMIT (the peer benchmark writes it into its results).
# Everything else Mini-SGLang imports (torch, transformers, triton, ...) is on the machine.
# Usage, from the project root:
#   bash studies/peers/minisglang/prepare.sh PATH/TO/mini-sglang [DEST]
# PATH may also be a bare git directory (a mirror): its HEAD is exported, or COMMIT=<rev>'s.
set -euo pipefail
SRC=${1:?usage: bash studies/peers/minisglang/prepare.sh PATH/TO/mini-sglang [DEST]}
DEST=${2:-.whl-peer}
mkdir -p "$DEST"
rm -rf "$DEST/python"
mkdir -p "$DEST/python"
if [ -d "$SRC/python/minisgl" ]; then
    cp -r "$SRC/python/minisgl" "$DEST/python/"
    commit=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)
else                                        # a bare repository: export the package from it
    rev=${COMMIT:-HEAD}
    git --git-dir="$SRC" archive "$rev" python/minisgl | tar -x -C "$DEST"
    commit=$(git --git-dir="$SRC" rev-parse "$rev")
fi
echo "$commit" >"$DEST/python/COMMIT"
find "$DEST/python" -name __pycache__ -prune -exec rm -rf {} +

python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$DEST" flashinfer-python==0.6.6 apache-tvm-ffi==0.1.9 pyzmq==27.3.0

du -sh "$DEST"
cat <<EOF
Mini-SGLang $commit is in $DEST/python, its wheels in $DEST:
$(cd "$DEST" && ls -1 ./*.whl)
Carry "$DEST" to the GPU machine (the device tool: carry=["$DEST"]), and there run
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \\
      --target /tmp/site $DEST/*.whl
  python3 -m studies peers mini-sglang --minisgl $DEST/python --site /tmp/site
Its first start compiles FlashInfer's kernels (about 100 s); FLASHINFER_WORKSPACE_BASE and
TVM_FFI_CACHE_DIR say where the compiled kernels are kept (--jit-cache DIR sets both).
EOF
