"""The forward-gap benchmark's kernel kinds (its timing needs CUDA: ``bash scripts/h200.sh gap``)."""

from __future__ import annotations

import pytest

from bench.forward_gap import kind_of


@pytest.mark.parametrize("name, kind", [
    ("nvjet_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "matmul (GEMM / GEMV)"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64", "matmul (GEMM / GEMV)"),
    ("_gemv_kernel", "matmul (GEMM / GEMV)"),
    ("_split_kernel", "attention (our Triton kernel: split, merge)"),
    ("_merge_kernel", "attention (our Triton kernel: split, merge)"),
    ("triton_red_fused_argmax_1", "sampling (argmax)"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", "compiled norms, RoPE, SiLU, adds"),
    ("void at::native::index_elementwise_kernel<128, 4>", "gathers, scatters, copies"),
    ("Memcpy DtoD (Device -> Device)", "gathers, scatters, copies"),
    ("void something_unheard_of<float>", "other"),
])
def test_kernels_sort_into_kinds_by_name(name, kind):
    assert kind_of(name) == kind
