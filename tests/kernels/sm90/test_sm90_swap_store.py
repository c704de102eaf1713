"""The swapped sm90 GEMM's store of C^T from registers (``kernels.sm90.gemm_store``): column pairs of C after one
``shfl.xor`` between the lanes of fragment rows n and n + 1, predicated, no branch a store (even N); one element a
store at an odd N. The generated code, and the emulator at odd M (a pair's rows straddling M) and odd N."""

from __future__ import annotations

import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_target
from tvm_cdna4.kernels.sm90.gemm_emit import emit
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan
from tvm_cdna4.kernels.sm90.gemm_store import PAIR_LANES

H100 = devices.DEVICES["H100"]


def _source(bucket, N, K, cfg, out):
    p = plan(bucket, N, K, "bf16", "nt", out, cfg, H100.units, H100.smem_per_unit, Fusion())
    return p, gemm_target.build_plan(p, cache=False).source


@pytest.mark.parametrize("out, store", [("bf16", "st_global_b32_pred"), ("f32", "st_vec_global_v2_f32_pred")])
def test_the_swapped_kernel_stores_column_pairs_of_c_after_one_lane_exchange(out, store):
    # Qwen2.5-7B's QKV bucket 193..256 swapped (128x88, two consumers): a thread's 44 accumulators are 22 column pairs
    # of C, each one shfl.xor and one predicated pair store (before: 44 element stores, each behind its own branch)
    p, source = _source(MBucket(193, 256), 4608, 3584, Sm90Config(128, 88, 8, 2, swap_ab=True), out)
    pairs = p.config.rows // 64 * p.config.block_n // 4
    body = source[source.index("__global__"):]
    assert pairs == 22 and body.count("__shfl_xor_sync(") == pairs and body.count(f", {PAIR_LANES}, 32)") == pairs
    assert body.count(f"tvm_builtin_ptx_{store}(") == pairs and "C_ptr[" not in body.replace(f"{store}((&(C_ptr[", "")


def test_an_odd_n_keeps_one_element_a_store():
    # a pair's 4 bytes would be unaligned at every other row of C
    p, source = _source(MBucket(193, 256), 4607, 3584, Sm90Config(128, 88, 8, 2, swap_ab=True), "bf16")
    body = source[source.index("__global__"):]
    assert "__shfl_xor_sync(" not in body and body.count("C_ptr[") == p.config.rows // 64 * p.config.block_n // 2


@pytest.mark.parametrize("bucket, cfg, m, out", [
    # M = 131 in 64-row tiles of M, two consumers: the third tile's lanes pair rows 130 | 131 (past M), f32 pairs
    (MBucket(97, 256), Sm90Config(128, 64, 2, 2, swap_ab=True), 131, "f32"),
    # M = 45 in one tile of 48, one consumer, 16-bit pairs
    (MBucket(33, 48), Sm90Config(64, 48, 2, 1, swap_ab=True), 45, "bf16"),
])
def test_the_emulator_validates_the_paired_store_at_an_odd_run_time_m(bucket, cfg, m, out):
    N, K = 136, 64  # N: a ragged third tile of N's 64-row tiles
    p = plan(bucket, N, K, "bf16", "nt", out, cfg, H100.units, H100.smem_per_unit, Fusion())
    data = random_inputs(GemmProblem(m, N, K, "bf16", "nt", out), seed=m)
    c = data.output()
    emulate(emit(p), *data.arguments(p.params, c), target="sm90")
    assert data.ratio(c) <= 1.0


def test_the_emulator_validates_the_swapped_kernel_at_an_odd_n():
    v = gemm.validate(GemmProblem(19, 75, 128, "bf16", "nt", "bf16", Fusion(bias=True)), "sm90",
                      Sm90Config(64, 24, 2, 1, swap_ab=True))
    assert v.ok and "emulator" in v.where and v.ratio <= 1.0
