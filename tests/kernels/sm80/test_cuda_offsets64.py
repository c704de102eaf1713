"""64-bit element offsets on sm80 (issue 35, item 3): every CUDA kernel kind (the static tile GEMM, a
dynamic-M bucket, the decode kernel, the grouped GEMM, attention) indexes a tensor an element offset of
which reaches 2^31 with ``int64`` (the plan's ``offsets64``), or refuses the problem with a
``ContractError`` naming the operand and the limit; every smaller problem keeps its 32-bit code (the
golden digests, tests/kernels/sm80/test_cuda_gemm_golden.py).

Before the fix the kernels computed every offset in ``int``: the LM head below (32,768 tokens x a
128,256 vocabulary x 4,096, bf16, nt) stored its last CTA's C tile at a negative byte offset, the decode
kernel read a large vocabulary's weights below W, the dynamic-M GEMM refused M past 16,743 for that N
and attention refused 2^31-element tensors. A whole problem of this size cannot be emulated, so the
tests emulate the last CTA alone (``emulate(..., workgroups=[last])``) with the parts of the tensors
it touches (``emulator.Window``), and check its addresses (the emulator's bounds checks against the
whole tensors) and its results (against numpy, exact on small-integer data)."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import Window, emulate
from tvm_cdna4.kernels.attention.problem import AttentionProblem, error_bound, reference
from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm
from tvm_cdna4.kernels.sm80.attention_emit import emit_sm80_attention
from tvm_cdna4.kernels.sm80.attention_plan import plan_sm80_attention
from tvm_cdna4.kernels.sm80.decode_emit import emit_decode
from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, plan_decode
from tvm_cdna4.kernels.sm80.gemm_emit import emit
from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig, MBucket, plan

LM_HEAD = (32768, 128256, 4096)  # tokens x vocabulary x hidden: C has 4.2e9 elements
BF16 = ml_dtypes.bfloat16
NVCC = shutil.which("nvcc")


def _ints(rng, shape):
    return rng.integers(-3, 4, shape).astype(BF16)


def _last_tile(p):
    """The last CTA of a tile plan and its output tile's origin (m0, n0)."""
    last = p.grid.ctas - 1
    tile = p.grid.decode(last)
    return last, tile.m * p.tiling.block_m, tile.n * p.tiling.block_n


def _emulate_last_cta(func, p, M, N, K, **scalars):
    """The last CTA of an nt GEMM plan on windows of A's and B's rows from its tile on and C's rows from its
    tile on (small integers: exact); C's tile against numpy, every other element of C's window untouched."""
    last, m0, n0 = _last_tile(p)
    rng = np.random.default_rng(35)
    a, b = _ints(rng, (M - m0, K)), _ints(rng, (N - n0, K))
    c = np.full((M - m0, N), np.nan, BF16)
    emulate(func, Window.rows(a, (M, K), m0), Window.rows(b, (N, K), n0), Window.rows(c, (M, N), m0),
            target="sm80", workgroups=[last], **scalars)
    tile = c[:p.tiling.block_m, n0:n0 + p.tiling.block_n].astype(np.float32)
    want = (a[:p.tiling.block_m].astype(np.float32) @ b[:p.tiling.block_n].astype(np.float32).T).astype(BF16)
    np.testing.assert_array_equal(tile, want.astype(np.float32))
    outside = np.ones(c.shape, bool)
    outside[:p.tiling.block_m, n0:n0 + p.tiling.block_n] = False
    assert np.isnan(c[outside].astype(np.float32)).all()


@pytest.fixture(scope="module")
def lm_head():
    p = plan(*LM_HEAD, "bf16", "nt", "bf16")
    return p, emit(p)


def test_the_lm_head_plan_indexes_c_with_64_bit_offsets(lm_head):
    p, _ = lm_head
    assert p.offsets64 == ("C",)  # A (134M elements) and B (525M) keep 32-bit offsets
    assert (p.tiling.block_m, p.tiling.block_n, p.grid.ctas) == (128, 256, 256 * 501)
    assert _last_tile(p) == (128255, 32640, 128000)
    # every smaller problem keeps 32-bit code: no parameter is wide
    assert plan(4096, 4096, 4096, "f16", "nt").offsets64 == ()
    assert plan(16384, 128256, 4096, "bf16", "nt", "bf16").offsets64 == ()


@pytest.mark.slow  # nvcc; the generated CUDA's compile tests (test_cuda_gemm.py) run every time
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
def test_the_lm_head_compiles_without_spills(tmp_path):
    from tvm_cdna4.runtime import cuda as runner

    src = cuda_gemm.build(*LM_HEAD, "bf16", "nt", "bf16").source
    c_lines = [line for line in src.splitlines() if "C_ptr[" in line]
    assert c_lines and all("int64_t" in line for line in c_lines)
    assert not any("int64_t" in line for line in src.splitlines() if "A_ptr[" in line or "B_ptr[" in line)
    (tmp_path / "k.cu").write_text(src)
    r = subprocess.run([NVCC, "-arch=sm_80", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"),
                        str(tmp_path / "k.cu")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    usage = runner.ptxas_usage(r.stderr)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, r.stderr[-3000:]


@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
def test_the_lm_heads_last_cta_in_the_emulator(lm_head):
    # before: "st: global address -217126912 of 'C' (+4 bytes) is out of bounds of 8405385216 bytes"
    p, func = lm_head
    _emulate_last_cta(func, p, *LM_HEAD)


@pytest.mark.slow  # ~7 s; the lm_head's plan and last-CTA emulation above keep the 64-bit path in every run
def test_weights_past_2_31_elements_in_the_static_gemm():
    # B [N, K] of 2.5e9 elements: its rows in 64 bits, A and C in 32
    M, N, K = 64, 600000, 4096
    p = plan(M, N, K, "bf16", "nt", "bf16", GemmConfig(block_m=64, block_n=128, block_k=64, warps_m=2, warps_n=2,
                                                         stages=3))
    assert p.offsets64 == ("B",)
    _emulate_last_cta(emit(p), p, M, N, K)


def test_the_dynamic_m_lm_head_runs_in_a_64_bit_bucket():
    dyn = cuda_gemm.build_dynamic(LM_HEAD[1], LM_HEAD[2], "bf16", "nt", "bf16")
    bucket = dyn.bucket(LM_HEAD[0])
    assert bucket == dyn.buckets[-1] and bucket.lo <= 16488 and dyn.limit > 10**8
    # the 32-bit buckets keep 32-bit code; the last, A [M, K] and C [M, N] at 64 bits
    assert [dyn.plan(b.lo).offsets64 for b in dyn.buckets] == [()] * (len(dyn.buckets) - 1) + [("A", "C")]
    p = dyn.plan(LM_HEAD[0])
    assert p.dynamic_m == bucket and p.grid.grid_n == 501
    # the bucket's kernel indexes A and C (only) with 64-bit offsets; the static LM head's last CTA, the
    # same tile and grid at M = 32768, runs in the emulator in test_the_lm_heads_last_cta_in_the_emulator
    static = plan(*LM_HEAD, "bf16", "nt", "bf16", p.config)
    assert (static.tiling.block_m, static.tiling.block_n, static.grid.grid_n) == (
        p.tiling.block_m, p.tiling.block_n, p.grid.grid_n)
    script = dyn.primfunc(LM_HEAD[0]).script()
    for name, wide in (("A", True), ("C", True), ("B", False)):
        lines = [line for line in script.splitlines() if f"{name}[" in line or f"{name}_ptr" in line]
        assert lines and any("int64" in line for line in lines) == wide, name


def test_the_decode_kernel_reads_a_large_vocabulary_with_64_bit_offsets():
    M, N, K = 3, 600000, 4096
    p = plan_decode(M, N, K, "bf16", "nt", "bf16", DecodeConfig())
    assert p.offsets64 == ("B",)
    last = p.ctas - 1
    n0 = (last % p.row_blocks) * p.config.block_rows
    rng = np.random.default_rng(35)
    a, b = _ints(rng, (M, K)), _ints(rng, (N - n0, K))
    c = np.full((M, N), np.nan, BF16)
    emulate(emit_decode(p), a, Window.rows(b, (N, K), n0), c, target="sm80", workgroups=[last])
    want = (a.astype(np.float32) @ b.astype(np.float32).T).astype(BF16)
    np.testing.assert_array_equal(c[:, n0:].astype(np.float32), want.astype(np.float32))
    assert np.isnan(c[:, :n0].astype(np.float32)).all()
    # the element loads (K not a multiple of 8) index the weights with 64 bits too
    odd = plan_decode(M, 1100000, 2049, "bf16", "nt", "bf16", DecodeConfig())
    assert odd.offsets64 == ("B",) and not odd.pipelined
    assert "int64" in emit_decode(odd).script()


def test_grouped_weights_past_2_31_elements_and_the_rows_refused_past_32_bits():
    grouped = cuda_gemm.build_grouped(8, 600000, 4096, "bf16", "nt", "bf16")
    assert grouped.plan(64).offsets64 == ("B",)  # one group's weights [N, K]: 2.5e9 elements
    assert cuda_gemm.build_grouped(8, 4096, 4096, "bf16", "nt", "bf16").plan(64).offsets64 == ()
    with pytest.raises(ContractError, match=r"operand A: .*T = 3324 rows is outside 0\.\.3323 .*32-bit element offsets "
                                            r"of A \[T, K\] and C \[T, N\]"):
        grouped.plan(grouped.limit + 1)


def test_attention_past_2_31_elements_uses_64_bit_offsets():
    # Q, K, V, O of 512 x 128 x 264 x 128 = 2.2e9 elements each (before: refused, "32-bit integers")
    problem = AttentionProblem(512, 128, 128, 264, 264, 128)
    p = plan_sm80_attention(problem)
    assert p.offsets64 == ("Q", "K", "V", "O") and p.config.head_group in (None, 1) and p.head_group == 1
    # non-causal, one head per group: the last CTA is the last (batch, head)'s first query block
    last, S, D = p.ctas - 1, problem.seq_q, problem.head_dim
    shape, start = (512, 128, S, D), (512 * 128 - 1) * S * D
    rng = np.random.default_rng(35)
    q, k, v = (rng.standard_normal((1, 1, S, D)).astype(BF16) for _ in range(3))
    o, lse = np.full((1, 1, S, D), np.nan, BF16), np.full((1, 1, S), np.nan, np.float32)
    emulate(emit_sm80_attention(p), *(Window(shape, BF16, start, x) for x in (q, k, v, o)),
            Window(shape[:3], np.float32, start // D, lse), target="sm80", workgroups=[last])
    rows = p.config.block_q
    want_o, want_lse = reference(q, k, v)
    bound_o, bound_lse = error_bound(q, k, v)
    got = o.astype(np.float64)[..., :rows, :]
    assert (np.abs(got - want_o[..., :rows, :]) <= bound_o[..., :rows, :]).all()
    assert (np.abs(lse[..., :rows] - want_lse[..., :rows]) <= bound_lse[..., :rows]).all()
    assert np.isnan(o[..., rows:, :].astype(np.float32)).all()
    assert plan_sm80_attention(AttentionProblem(2, 4, 4, 256, 256, 64)).offsets64 == ()


@pytest.mark.parametrize("make,operand,limit", [
    # a cp.async view 32 rows of 2^22 elements apart (TIRx's pattern computes its strides in 32-bit bits: before,
    # "Literal value 2147483648 exceeds range of int32" deep in the build)
    (lambda: plan(128, 128, 2**22, "f16", "nt", "f32", GemmConfig(block_m=128, block_n=128, block_k=32, warps_m=2,
                                                                  warps_n=2, stages=3)), "A", "stride x 16 bits < 2^31"),
    (lambda: plan(16, 2**31, 64, "f16", "nt"), "B", "dimension 0 < 2^31"),
    (lambda: plan_decode(1, 2**31, 64, "bf16", "nt", "bf16"), "B", "dimension 0 < 2^31"),
    (lambda: plan_sm80_attention(AttentionProblem(1, 1, 1, 2**31, 64, 64)), "Q", "dimension 2 < 2^31"),
    (lambda: cuda_gemm.build_dynamic(4096, 4096).bucket(2**31 - 1), "A", "1 <= M <= "),
])
def test_what_no_plan_indexes_is_refused_naming_the_operand_and_the_limit(make, operand, limit):
    with pytest.raises(ContractError) as err:
        make()
    assert err.value.operand == operand and limit in str(err.value), str(err.value)
    assert err.value.check == "shape"


def test_a_dynamic_bucket_is_planned_at_an_m_it_serves():
    assert MBucket(16488, 274329216).representative == 16488
    assert MBucket(4097, 524031).representative == 8192
