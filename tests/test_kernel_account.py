"""A forward's kernels by kind (``studies.kernel_account``): the names of every engine's kernels
sort into the same kinds, an account adds up, and SGLang's own profiler trace is read step by
step from its marks (the CUDA figures themselves: ``bash studies/gpu.sh gap``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from record.imported.profiler_events import TraceImportError
from studies.kernel_account import GAPS, OTHER, account, format_account, kind_of, trace_accounts

TRACES = Path(__file__).parent / "data" / "traces"
MATMUL, ATTENTION, SAMPLING = "matmul (GEMM / GEMV)", "attention", "sampling (argmax, top-k)"
FUSED, COPIES = "norms, RoPE, SiLU, adds (fused)", "KV writes, gathers, copies, elementwise"


@pytest.mark.parametrize("name, kind", [
    ("nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", MATMUL),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64", MATMUL),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>", MATMUL),
    ("_gemv_kernel", MATMUL),
    ("_split_kernel", ATTENTION),                           # ours (Triton)
    ("_merge_kernel", ATTENTION),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<flashinfer::KernelTraits>", ATTENTION),
    ("void flashinfer::PersistentVariableLengthMergeStatesKernel<8u>", ATTENTION),
    ("triton_red_fused_argmax_1", SAMPLING),                # compiled, still sampling
    ("void at::native::reduce_kernel<512, 1, ReduceOp<c10::BFloat16, ArgMaxOps>>", SAMPLING),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", FUSED),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>", FUSED),
    ("void (anonymous namespace)::act_and_mul_kernel<__nv_bfloat16>", FUSED),
    ("void (anonymous namespace)::store_kvcache<256l, 256l, 1, true, long>", COPIES),
    ("void at::native::index_elementwise_kernel<128, 4>", COPIES),
    ("void something_unheard_of<float>", OTHER),
])
def test_kernels_sort_into_kinds_by_name(name, kind):
    assert kind_of(name) == kind


def test_an_account_adds_up_per_step():
    kernels = [("nvjet_a", 10.0), ("nvjet_a", 12.0), ("_split_kernel", 4.0), ("_split_kernel", 6.0),
               ("mystery", 2.0)]
    acc = account(kernels, steps=2, step_us=20.0)
    assert acc.kernel_us == 17.0 and acc.gap_us == 3.0 and acc.count == 2.5
    assert [(r.name, r.per_step, r.us_per_step) for r in acc.kinds] == [
        (MATMUL, 1.0, 11.0), (ATTENTION, 1.0, 5.0), (OTHER, 0.5, 1.0)]
    assert acc.kernels[0].name == "nvjet_a" and acc.kernels[0].us_each == 11.0
    table = format_account(acc, floor_us=8.0)
    assert f"| {GAPS} | – | 3.0 | 15.0% |" in table and "weight-read floor 8.0 µs" in table


def test_sglangs_trace_is_read_by_its_step_marks():
    """SGLang 0.5.17's overlap loop at B = 1 (the 0.5B shape): 16 decode steps marked
    ``step[DECODE bs=1]``, each a CUDA graph of 24 layers; the first left out."""
    accs = trace_accounts(TRACES / "sglang-overlap-b1.trace.json.gz")
    assert set(accs) == {"EXTEND bs=1", "DECODE bs=1"}
    decode = accs["DECODE bs=1"]
    kinds = {r.name: r for r in decode.kinds}
    assert decode.steps == 15
    assert kinds[MATMUL].per_step == 121                    # 5 a layer and the LM head
    assert kinds[ATTENTION].per_step >= 48                  # FlashInfer's kernel and its merge
    assert kinds[FUSED].per_step >= 72                      # 2 RMSNorms, RoPE, SiLU a layer
    assert 0 < decode.kernel_us < decode.step_us
    assert sum(r.us_per_step for r in decode.kinds) == pytest.approx(decode.kernel_us)


def test_a_trace_without_step_marks_has_no_steps_and_garbage_is_refused(tmp_path):
    assert trace_accounts(TRACES / "engine-graph-qwen05-b8.json.gz") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.raises(TraceImportError):
        trace_accounts(bad)
