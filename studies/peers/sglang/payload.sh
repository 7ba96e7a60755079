#!/bin/bash
# Builds site.tar.xz: the packages SGLang 0.5.17 needs on an offline GPU machine (torch 2.11,
# CUDA 13) beyond what the machine has, slimmed to what an offline sglang.Engine uses. Run from
# any folder on a machine with network (about 5 minutes; xz is most of it):
#   bash studies/peers/sglang/payload.sh OUTDIR
# then carry OUTDIR to the GPU machine: `python -m studies peers sglang --sglang-site DIR` reads
# the unpacked set (studies/gpu.sh sglang unpacks it).
set -euo pipefail
OUT=$(mkdir -p "${1:?output folder}" && cd "$1" && pwd); W=$(mktemp -d); S=$W/site; mkdir -p $S $W/whl
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_34_x86_64
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64
  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64 --platform any"
python3 -m pip download -q --no-deps $PLAT -d $W/whl annotated_types==0.8.0 apache_tvm_ffi==0.1.11 \
  asttokens==3.0.2 compressed_tensors==0.20.1 decorator==5.3.1 dill==0.4.1 distro==1.9.0 \
  executing==2.3.0 fastapi==0.165.0 gguf==0.19.0 ipython==9.18.1 ipython_pygments_lexers==1.1.1 \
  jedi==0.20.1 jiter==0.19.0 loguru==0.7.3 matplotlib_inline==0.2.2 msgspec==0.23.0 openai==2.6.1 \
  opentelemetry_api==1.45.2 orjson==3.13.0 parso==0.8.7 partial_json_parser==0.2.1.1.post7 \
  pexpect==4.9.0 prompt_toolkit==3.0.53 ptyprocess==0.7.0 pure_eval==0.2.4 pybase64==1.5.1 \
  pydantic==2.14.4 pydantic_core==2.50.5 pyzmq==27.3.0 setproctitle==1.3.8 sniffio==1.3.1 \
  stack_data==0.6.3 starlette==1.10.0 tokenizers==0.22.2 traitlets==5.16.1 transformers==5.12.1 \
  typing_extensions==4.16.0 typing_inspection==0.4.5 uvicorn==0.55.0 wcwidth==0.9.4 xgrammar==0.2.1 \
  flashinfer_python==0.6.15.post1 sglang==0.5.17 sglang_kernel==0.4.5
cd $W/whl
for w in *.whl; do case $w in sglang_kernel-*) ;; *) unzip -q -o "$w" -d $S ;; esac; done
# sglang-kernel: Python files, triton_kernels and the sm90 library; not FA3 (flash_ops, 1.1 GB), FlashMLA,
# InfLLM or sm100 (so attention_backend="fa3" is impossible: use flashinfer or triton)
unzip -q -o sglang_kernel-*.whl -d $S -x 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/flashmla_ops.abi3.so' \
  'sgl_kernel/infllm_ops*' 'sgl_kernel/sm100/*'
# sglang: no diffusion, tests, or the Rust server/gRPC/multimodal extensions (sglang.Engine uses none)
rm -rf $S/sglang/multimodal_gen $S/sglang/test $S/sglang/srt/server/_core*.so $S/sglang/srt/grpc/_core*.so \
  $S/sglang/srt/multimodal/_core*.so
# flashinfer: only the headers its JIT compiles against
F=$S/flashinfer/data
rm -rf $F/cutlass/test $F/cutlass/python $F/cutlass/examples $F/cutlass/docs $F/cutlass/media $F/cccl/benchmarks \
  $F/cccl/ci $F/cccl/docs $F/cccl/python $F/cccl/c $F/cccl/cudax $F/cccl/examples $F/cccl/test
find $F/cutlass/tools -mindepth 1 -maxdepth 1 ! -name util -exec rm -rf {} +
find $F/cutlass/tools/util -mindepth 1 -maxdepth 1 ! -name include -exec rm -rf {} +
find $F/cccl/libcudacxx -mindepth 1 -maxdepth 1 ! -name include -exec rm -rf {} +
rm -rf $S/xgrammar/lib/libxgrammar.a $S/bin       # keep tvm_ffi/lib/libtvm_ffi_testing.so (see README)
find $S -name __pycache__ -type d -prune -exec rm -rf {} +
find $S -name "*.so*" -type f -exec strip --strip-debug {} + 2>/dev/null || true
du -sh $S
(cd $W && tar -cf - site | xz -9e -T0 > "$OUT/site.tar.xz"); ls -la "$OUT/site.tar.xz"; rm -rf $W
