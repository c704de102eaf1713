"""The CPU emulator on CUDA kernels (target "sm80": 32-lane warps, T.ptx / T.cuda semantics).

No GPU needed: the emulated kernels are checked against numpy. benchmarks/cuda_crosscheck.py
compares the same kernels with a real GPU, bit for bit.
"""

from __future__ import annotations

import paths
import os
import sys
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

ROOT = str(paths.ROOT)
sys.path.append(os.path.join(ROOT, "benchmarks"))  # after tests/: a benchmark script never shadows a test helper
sys.path.insert(0, os.path.join(ROOT, "tests"))

import cuda_crosscheck as xc  # noqa: E402
from cuda_seed_example import matrix_kernel  # noqa: E402
from tvm_tirx.script import ir as I  # noqa: E402
from tvm_tirx.script import tirx as T  # noqa: E402

from tvm_cdna4.emulator import EmulationError, emulate  # noqa: E402
from tvm_cdna4.emulator.ptx import mma_fragments  # noqa: E402
from tvm_cdna4.runtime import cuda as runner  # noqa: E402
from tvm_cdna4.kernels.sm80.gemm import GemmConfig, cuda_gemm, operand_shapes  # noqa: E402

SMALL = GemmConfig(block_m=128, block_n=128, block_k=32, warps_m=2, warps_n=2, stages=3)


# ------------------------------------------------------------------------------------------------
# ldmatrix
# ------------------------------------------------------------------------------------------------


def test_seed_ldmatrix_example():
    x = np.arange(128, dtype="uint32").reshape(16, 4, 2)
    out = np.zeros((32, 12), dtype="uint32")
    emulate(matrix_kernel(), x, out, target="sm80")
    expected = np.full((32, 12), 4294966519, dtype="uint32")
    for lane in range(32):
        for k in range(2):
            for matrix in range(2):
                expected[lane, 8 * k + 2 * matrix] = x[2 * (lane // 4) + matrix, lane % 4, k]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("num,trans", [(1, False), (2, False), (4, False), (1, True), (4, True)])
def test_ldmatrix_forms(num, trans):
    a = np.random.default_rng(num + 10 * trans).integers(0, 1 << 16, size=(32, 8)).astype(np.uint16)
    out = np.zeros((32, 4), np.uint32)
    emulate(xc.ldmatrix_kernel(num, trans), a, out, target="sm80")
    np.testing.assert_array_equal(out, xc.ldmatrix_expected(a, num, trans))


def test_ldmatrix_needs_the_whole_warp():
    @T.function
    def kernel(A: T.Tensor((32, 8), "uint16"), Out: T.Tensor((32,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((32, 8), "uint16", scope="shared", layout="default", align=16)])
        for j in range(8):
            SM[lane, j] = A[lane, j]
        T.cuda.cta_sync()
        r = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
        r[0] = T.uint32(0)
        if lane < 16:
            T.ptx["ldmatrix.sync.aligned.m8n8.x1.shared.b16"](r[0], SM.ptr_to([lane % 8, 0]))
        Out[lane] = r[0]

    with pytest.raises(EmulationError, match="16 of 32 lanes active"):
        emulate(kernel, np.zeros((32, 8), np.uint16), np.zeros(32, np.uint32), target="sm80")


def test_bank_model():
    from tvm_cdna4.emulator.banks import lanes_per_phase, phases_and_conflicts

    assert [lanes_per_phase(s) for s in (16, 8, 4, 2)] == [8, 16, 32, 32]
    assert phases_and_conflicts(np.zeros(8), np.arange(8) * 16, 16) == (1, 0)  # 128 contiguous bytes
    assert phases_and_conflicts(np.zeros(8), np.arange(8) * 128, 16) == (1, 7)  # one bank group
    assert phases_and_conflicts(np.zeros(32), np.zeros(32), 4) == (1, 0)  # one word: broadcast
    assert phases_and_conflicts(np.zeros(32), np.arange(32) * 8, 4) == (1, 1)  # stride 2 words
    assert phases_and_conflicts(np.repeat([0, 1], 8), np.tile(np.arange(8) * 128, 2), 16) == (2, 14)


def _ldmatrix_rows_kernel(row_halves):
    # one warp, ldmatrix.x4: lane l supplies shared row l, rows `row_halves` halves apart
    @T.function
    def kernel(A: T.Tensor((32, row_halves), "uint16"), Out: T.Tensor((32, 4), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((32, row_halves), "uint16", scope="shared", layout="default", align=16)])
        for j in range(row_halves):
            SM[lane, j] = A[lane, j]
        T.cuda.cta_sync()
        r = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"](r[0], r[1], r[2], r[3], SM.ptr_to([lane, 0]))
        for i in T.unroll(4):
            Out[lane, i] = r[i]

    return kernel


@pytest.mark.parametrize("row_halves,conflicts", [(8, 0), (64, 4 * 7)])
def test_ldmatrix_bank_conflicts_are_counted(row_halves, conflicts):
    # 16-byte rows side by side: conflict-free; rows 128 bytes apart: each matrix's 8 rows share a
    # bank group, 8 wavefronts instead of 1
    stats = {}
    a = np.zeros((32, row_halves), np.uint16)
    emulate(_ldmatrix_rows_kernel(row_halves), a, np.zeros((32, 4), np.uint32), target="sm80", stats=stats)
    assert stats == {"ldmatrix phases": 4, "ldmatrix conflicts": conflicts}


# ------------------------------------------------------------------------------------------------
# mma.sync
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [16, 8])
def test_mma_fragment_maps_cover_each_element_once(k):
    f = mma_fragments(k)
    for key, (rows, cols) in (("a", (16, k)), ("b", (k, 8)), ("c", (16, 8))):
        r, c = f[key]
        hits = np.zeros((rows, cols), int)
        np.add.at(hits, (r.ravel(), c.ravel()), 1)
        assert (hits == 1).all(), key


@pytest.mark.parametrize("atype,k", [("f16", 16), ("bf16", 16), ("f16", 8)])
def test_mma_sync_matches_numpy(atype, k):
    dt = np.float16 if atype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(k)
    kernel = xc.mma_kernel(atype, k)
    # small integers: every product and partial sum is exact, so the result is bit-exact
    a, bt = xc._ints(rng, (16, k), dt, -8, 8), xc._ints(rng, (8, k), dt, -8, 8)
    c = xc._ints(rng, (16, 8), np.float32, -100, 100)
    d = np.zeros((16, 8), np.float32)
    emulate(kernel, a.view(np.uint32), bt.view(np.uint32), c, d, target="sm80")
    np.testing.assert_array_equal(d, a.astype(np.float64) @ bt.astype(np.float64).T + c)
    # arbitrary data: one rounding of the exact result
    a, bt = rng.standard_normal((16, k)).astype(dt), rng.standard_normal((8, k)).astype(dt)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    emulate(kernel, a.view(np.uint32), bt.view(np.uint32), c, d, target="sm80")
    np.testing.assert_allclose(d, a.astype(np.float64) @ bt.astype(np.float64).T + c, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# cp.async, barriers, shuffles
# ------------------------------------------------------------------------------------------------


def copy_kernel(wait=1, sync=True, src_size=16, read_rows=0):
    """64 threads, each commits two groups: warp 0 copies rows 0-31 in its first group (the second is
    empty), warp 1 copies rows 32-63 in its second group (the first is empty). Then
    ``cp.async.wait_group wait`` and warp 0 reads the half ``read_rows`` (0: rows 0-31, its own;
    1: rows 32-63, warp 1's) in reverse row order."""

    @T.function
    def kernel(A: T.Tensor((64, 8), "float16"), Out: T.Tensor((32, 8), "float16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((64, 8), "float16", scope="shared", layout="default", align=16)])
        if tid < 32:
            T.ptx["cp.async.cg.shared.global"](SM.ptr_to([tid, 0]), A.ptr_to([tid, 0]), 16, T.uint32(src_size))
        T.ptx["cp.async.commit_group"]()
        if tid >= 32:
            T.ptx["cp.async.cg.shared.global"](SM.ptr_to([tid, 0]), A.ptr_to([tid, 0]), 16, T.uint32(src_size))
        T.ptx["cp.async.commit_group"]()
        T.ptx["cp.async.wait_group"](wait)
        if I.constexpr(sync):
            T.cuda.cta_sync()
        if tid < 32:
            for j in range(8):
                Out[tid, j] = SM[32 * read_rows + 31 - tid, j]

    return kernel


def _run_copy(**kw):
    a = np.arange(512).astype(np.float16).reshape(64, 8)
    out = np.zeros((32, 8), np.float16)
    emulate(copy_kernel(**kw), a, out, target="sm80")
    return a, out


def test_cp_async_wait_group_completes_older_groups():
    # wait_group 1 retires each thread's first group: warp 0's rows land, warp 1's stay in flight
    a, out = _run_copy(wait=1, read_rows=0)
    np.testing.assert_array_equal(out, a[31::-1])
    a, out = _run_copy(wait=0, read_rows=1)
    np.testing.assert_array_equal(out, a[:31:-1])


def test_cp_async_zero_fills_past_src_size():
    a, out = _run_copy(wait=0, src_size=6)
    want = a[31::-1].copy()
    want[:, 3:] = 0
    np.testing.assert_array_equal(out, want)


def test_cp_async_group_still_in_flight_is_reported():
    # threads >= 32 issued their copy in their *second* group; wait_group 1 leaves it in flight
    with pytest.raises(EmulationError, match="still in flight"):
        _run_copy(wait=1, read_rows=1)
    with pytest.raises(EmulationError, match="still in flight"):
        _run_copy(wait=2)


def test_cp_async_without_barrier_is_a_race():
    with pytest.raises(EmulationError, match="race on LDS 'SM'.*written by wave 1 and read by wave 0"):
        _run_copy(wait=0, sync=False, read_rows=1)


def test_barrier_in_divergent_code_is_reported():
    @T.function
    def kernel(Out: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        if tid < 48:
            T.cuda.cta_sync()
        Out[tid] = tid

    with pytest.raises(EmulationError, match="barrier reached by only part of the thread block"):
        emulate(kernel, np.zeros(64, np.int32), target="sm80")


def test_uninitialized_shared_reads_are_errors_unless_allowed():
    @T.function
    def kernel(Out: T.Tensor((32,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((32,), "int32", scope="shared", layout="default")])
        Out[tid] = SM[tid]

    out = np.full(32, 7, np.int32)
    with pytest.raises(EmulationError, match="never written"):
        emulate(kernel, out, target="sm80")
    emulate(kernel, out, target="sm80", uninitialized="allow")
    np.testing.assert_array_equal(out, 0)


def test_warp_shuffles():
    x = np.random.default_rng(3).integers(-(1 << 31), 1 << 31, size=64).astype(np.int32)
    out = np.zeros((4, 64), np.int32)
    emulate(xc.shfl_kernel(), x, out, target="sm80")
    np.testing.assert_array_equal(out, xc.shfl_expected(x))


def test_warp_vote_any():
    """``__any_sync``: every lane of a warp gets 1 if one lane's predicate holds (warp 0: lane 7 only;
    warp 1: none); a membermask naming a lane that does not execute it is an error."""
    from tvm_tirx.script import tirx as T

    from tvm_cdna4.emulator import EmulationError

    def kernel_for(warp1_mask):
        @T.function
        def kernel(X: T.Tensor((64,), "int32"), Out: T.Tensor((64,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
            tid = T.cuda.thread_idx("x")
            if tid < 48:
                Out[tid] = T.cuda.any_sync(T.if_then_else(tid < 32, T.uint32(0xFFFFFFFF), T.uint32(warp1_mask)), X[tid])
        return kernel

    x = np.zeros(64, np.int32)
    x[7] = 5
    out = np.full(64, -1, np.int32)
    with pytest.raises(EmulationError, match="membermask names a lane that does not execute it"):
        emulate(kernel_for(0xFFFFFFFF), x, out, target="sm80")
    out = np.full(64, -1, np.int32)
    emulate(kernel_for(0xFFFF), x, out, target="sm80")  # warp 1: lanes 0-15 execute, its mask names them
    np.testing.assert_array_equal(out, np.r_[np.ones(32), np.zeros(16), np.full(16, -1)])


def test_vector_ld_st():
    a = np.arange(256, dtype=np.float32).reshape(64, 4).view(np.uint32)
    out = np.zeros((64, 4), np.float32)
    emulate(xc.ldst_kernel(), a, out, target="sm80")
    np.testing.assert_array_equal(out, xc.ldst_expected(a))


def test_unknown_target():
    with pytest.raises(ValueError, match="not supported"):
        emulate(matrix_kernel(), np.zeros((16, 4, 2), np.uint32), np.zeros((32, 12), np.uint32), target="sm100")


# ------------------------------------------------------------------------------------------------
# the CUDA GEMM (cp.async + ldmatrix + mma.sync + st.global)
# ------------------------------------------------------------------------------------------------

# (layout, M, N, K, dtype, out_dtype, uninitialized). The planner caps the stages at the k-tiles
# (``kernels.sm80.gemm_plan.fit_stages``), but not below 2: with one k-tile the schedule's last fragment prefetch
# reads the second stage, never written (and ignores it), so that shape runs with uninitialized="allow".
GEMMS = [
    ("nt", 64, 64, 32, "f16", "f32", "allow"),
    ("tn", 100, 70, 40, "f16", "f32", "error"),  # 2 k-tiles: 2 stages, not SMALL's 3
    ("nn", 100, 70, 96, "f16", "f32", "error"),
    ("tt", 130, 136, 96, "f16", "f16", "error"),
    ("nt", 64, 72, 96, "bf16", "bf16", "error"),
    # the stage-unrolled k-loop (8 k-tiles, 3 stages; suite time: test_cuda_gemm_unrolled_k_loop_exact runs it)
    pytest.param("nn", 64, 64, 256, "f16", "f32", "error", marks=pytest.mark.slow),
    ("tn", 33, 45, 40, "f16", "f32", "error"),  # odd N: one predicated st.global.f32 per element
    ("nn", 30, 37, 96, "bf16", "bf16", "error"),  # odd N, 16-bit C: cvt.rn.bf16.f32 + st.global.b16
]


def _assert_gemm_exact(M, N, K, layout, cfg, seed, dt="f16", ot="f32", uninit="error"):
    """Emulate the GEMM on small-integer inputs (every product and partial sum exact) and compare
    it bit for bit with the numpy product."""
    rng = np.random.default_rng(seed)
    sa, sb = operand_shapes(M, N, K, layout)
    a, b = xc._ints(rng, sa, runner.np_dtype(dt)), xc._ints(rng, sb, runner.np_dtype(dt))
    c = np.full((M, N), np.nan, runner.np_dtype(ot))
    emulate(cuda_gemm(M, N, K, dt, layout, ot, cfg), a, b, c, target="sm80", uninitialized=uninit)
    want = runner.reference(a, b, layout).astype(runner.np_dtype(ot))
    assert xc.first_difference(c, want) is None, xc.first_difference(c, want)


@pytest.mark.parametrize("layout,M,N,K,dt,ot,uninit", GEMMS)
def test_cuda_gemm_exact_on_small_integers(layout, M, N, K, dt, ot, uninit):
    _assert_gemm_exact(M, N, K, layout, SMALL, M * N + K, dt, ot, uninit)


def test_cuda_gemm_planned_small_k_reads_only_written_shared_memory():
    # the planner's 16x64x128 tile of 4 stages at 32 x 64 x 320 (3 k-tiles, the last masked) runs 3
    # stages: no read of a stage never written (uninitialized="error")
    _assert_gemm_exact(32, 64, 320, "nt", None, 5)


def test_cuda_gemm_unrolled_k_loop_exact():
    # K long enough (8 k-tiles >= 2 x 3 stages) for the stage-unrolled k-loop and its static tail;
    # both operands read with ldmatrix .trans (B's offsets as view offsets) and a masked K edge
    assert SMALL.unrolled_for(250, "tn")
    _assert_gemm_exact(72, 64, 250, "tn", SMALL, 7)


def test_cuda_gemm_persistent_exact():
    # 4 tiles (edges in M and N) on 3 persistent CTAs: CTA 0 takes tiles 0 and 3, and its
    # pipeline loads tile 3's first k-tiles during tile 0's last ones
    cfg = replace(SMALL, ctas=3)
    assert cfg.persistent_for(192, "tt")
    _assert_gemm_exact(200, 136, 192, "tt", cfg, 11)


# Which swizzle an operand's shared tile gets depends on its form (K-contiguous, or read with
# ldmatrix.trans) and its row length. These four kernels hold every (operand, form, row length) of
# both configs: default nn (A K-rows of 64, B N-rows of 256), default tt (A M-rows of 128, B K-rows
# of 64), SMALL nt (K-rows of 32 for both), SMALL tn (A M-rows of 128, B N-rows of 128).
BANK_CASES = [(GemmConfig(), "nn"), (GemmConfig(), "tt"), (SMALL, "nt"), (SMALL, "tn")]


@pytest.mark.parametrize("cfg,layout", BANK_CASES,
                         ids=[f"{c.block_m}x{c.block_n}x{c.block_k}-{lay}" for c, lay in BANK_CASES])
def test_cuda_gemm_shared_memory_is_bank_conflict_free(cfg, layout):
    # the swizzle's promise checked on the kernel's own addresses: every ldmatrix phase and every
    # cp.async store phase of the whole run uses each bank once
    M, N, K = cfg.block_m, cfg.block_n, 2 * cfg.block_k
    rng = np.random.default_rng(3)
    sa, sb = operand_shapes(M, N, K, layout)
    a, b = xc._ints(rng, sa, np.float16), xc._ints(rng, sb, np.float16)
    stats = {}
    emulate(cuda_gemm(M, N, K, "f16", layout, "f32", cfg), a, b, np.zeros((M, N), np.float32), target="sm80",
            stats=stats)  # 2 k-tiles: 2 stages, each written
    warps, k16 = cfg.threads // 32, K // 16
    assert stats["ldmatrix phases"] >= warps * k16 * (cfg.warp_m // 16 + cfg.warp_n // 16) * 4
    assert stats["cp.async phases"] == (M + N) * K * 2 // 128
    assert stats["ldmatrix conflicts"] == 0 and stats["cp.async conflicts"] == 0, stats


def test_cuda_gemm_random_data_within_tolerance():
    M, N, K, layout = 100, 70, 96, "nt"
    rng = np.random.default_rng(0)
    a, b = runner.random_inputs(M, N, K, "f16", layout, rng)
    c = np.full((M, N), np.nan, np.float32)
    emulate(cuda_gemm(M, N, K, "f16", layout, "f32", SMALL), a, b, c, target="sm80")
    assert runner.rel_error(c, runner.reference(a, b, layout)) < runner.tolerance("f32")


@pytest.mark.slow  # suite time: the script's CPU path; the kernels it runs are each validated by the tests above
def test_crosscheck_script_cpu_only(capsys):
    assert xc.main(["--cpu-only", "--quick"]) == 0
    assert "SUMMARY: 8/8 cases emulated == numpy" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# small-M tiles and split-K (issue 24)
# ------------------------------------------------------------------------------------------------


def _small_m(bm, wm, split=1, reduction="atomic", bn=64):
    return GemmConfig(block_m=bm, block_n=bn, block_k=64, warps_m=wm, warps_n=4, stages=3, split_k=split,
                      reduction=reduction)


def _emulate_split(M, N, K, layout, cfg, dt, ot, seed, data="ints"):
    """Emulate a plan with its workspace and tickets (zero before, checked zero after); C from NaN."""
    from tvm_cdna4.kernels.sm80.gemm_plan import plan

    p = plan(M, N, K, dt, layout, ot, cfg)
    rng = np.random.default_rng(seed)
    sa, sb = operand_shapes(M, N, K, layout)
    if data == "ints":
        a, b = xc._ints(rng, sa, runner.np_dtype(dt)), xc._ints(rng, sb, runner.np_dtype(dt))
    else:
        a, b = runner.random_inputs(M, N, K, dt, layout, rng)
    c = np.full((M, N), np.nan, runner.np_dtype(ot))
    extra = [np.zeros(q.shape, runner.np_dtype(q.dtype) if q.dtype != "uint32" else np.uint32) for q in p.params[3:]]
    emulate(cuda_gemm(M, N, K, dt, layout, ot, cfg), a, b, c, *extra, target="sm80", uninitialized="allow")
    if cfg.split_k > 1:
        assert not extra[1].any(), "every tile's ticket is reset by its last CTA"
        if cfg.reduction == "atomic":
            assert not extra[0].any(), "the atomic workspace is cleared by each tile's last CTA"
    return a, b, c


# (layout, M, N, K, dtype, out dtype, block_m, warps_m, split_k, reduction): M = 1, 7, 33; N and K not
# multiples of the tile; the last K slice partly or wholly past K
SMALL_M_GEMMS = [
    ("nt", 1, 70, 200, "bf16", "bf16", 16, 1, 1, "atomic"),
    ("nt", 7, 70, 200, "f16", "f32", 16, 1, 3, "atomic"),
    ("nt", 1, 37, 300, "bf16", "bf16", 16, 1, 4, "ordered"),
    pytest.param("tn", 33, 70, 250, "f16", "f16", 32, 1, 2, "atomic", marks=pytest.mark.slow),  # suite time: atomic
    # splits at M = 1 / 7 / 7 (nt, tt) and the tn layout (test_cuda_gemm_*) hold its coverage
    ("nn", 33, 45, 130, "bf16", "f32", 64, 2, 3, "ordered"),
    ("tt", 7, 72, 136, "f16", "bf16", 32, 2, 2, "atomic"),
]


@pytest.mark.parametrize("layout,M,N,K,dt,ot,bm,wm,split,red", SMALL_M_GEMMS)
def test_small_m_and_split_k_exact_on_small_integers(layout, M, N, K, dt, ot, bm, wm, split, red):
    # small-integer data: every partial sum is exact, so the reduction order cannot matter and the
    # result is bit-exact in both reduction modes
    a, b, c = _emulate_split(M, N, K, layout, _small_m(bm, wm, split, red), dt, ot, M + N + K)
    want = runner.reference(a, b, layout).astype(runner.np_dtype(ot))
    assert xc.first_difference(c, want) is None, xc.first_difference(c, want)


# the ordered reduction by column pairs (reduce_vector=2):
# N even (pairs) but not a multiple of the tile, K with the last slice partly past it; and odd N,
# where the plan falls back to one element per instruction
@pytest.mark.parametrize("M,N,K,bm,bk,vector", [(5, 70, 300, 16, 64, 2), (7, 37, 200, 32, 64, 1),
                                                 (17, 70, 200, 32, 64, 2)])
def test_split_k_ordered_pairs_exact_on_small_integers(M, N, K, bm, bk, vector):
    from tvm_cdna4.kernels.sm80.gemm_plan import plan

    cfg = replace(_small_m(bm, 1, 3, "ordered"), block_k=bk, reduce_vector=2)
    p = plan(M, N, K, "bf16", "nt", "bf16", cfg)
    assert (p.epilogue.reduce.vector, p.epilogue.reduce.instr) == (
        (2, "st.global.v2.f32") if vector == 2 else (1, "st.global.f32"))
    a, b, c = _emulate_split(M, N, K, "nt", cfg, "bf16", "bf16", M + N + K)
    want = runner.reference(a, b, "nt").astype(runner.np_dtype("bf16"))
    assert xc.first_difference(c, want) is None, xc.first_difference(c, want)


def test_split_k_random_data_within_reassociation_tolerance():
    # arbitrary data: each K slice rounds its partial sum to f32 and the slices are added in f32, a
    # reassociation of the unsplit sum: |error| <= (k_splits + 1) * 2^-24 * sum |a_ik b_kj| per element
    M, N, K = 7, 40, 320
    a, b, c = _emulate_split(M, N, K, "nt", _small_m(16, 1, 4, "ordered"), "f16", "f32", 5, data="random")
    exact = runner.reference(a, b, "nt")
    bound = 5 * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T)
    assert (np.abs(c - exact) <= bound + 1e-30).all()
    _, _, c2 = _emulate_split(M, N, K, "nt", _small_m(16, 1, 4, "ordered"), "f16", "f32", 5, data="random")
    np.testing.assert_array_equal(c, c2)  # the ordered reduction is deterministic


def _global_store_kernel(kind):
    # two CTAs of 32 threads write word `tid` of Out: plain stores (a race), or red.add (ordered)
    @T.function
    def kernel(Out: T.Tensor((32,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
        tid = T.cuda.thread_idx("x")
        if I.constexpr(kind == "red"):
            T.ptx["red.global.add.f32"](Out.ptr_to([tid]), T.float32(1.5))
        else:
            T.ptx["st.global.f32"](Out.ptr_to([tid]), T.float32(1.5))

    return kernel


def test_global_atomics_are_ordered_and_plain_stores_race():
    out = np.ones(32, np.float32)
    emulate(_global_store_kernel("red"), out, target="sm80")
    np.testing.assert_array_equal(out, 4.0)
    with pytest.raises(EmulationError, match="race on global 'Out' byte 0: stored by CTA 0 and by CTA 1"):
        emulate(_global_store_kernel("st"), np.zeros(32, np.float32), target="sm80")
    # one CTA per batch: the second CTA's stores meet the first's record of the launch
    with pytest.raises(EmulationError, match="byte 0: stored by CTA 0 and stored by CTA 1 in one launch"):
        emulate(_global_store_kernel("st"), np.zeros(32, np.float32), target="sm80", max_threads_per_batch=32)


def test_atom_returns_the_old_value_in_thread_order():
    @T.function
    def kernel(S: T.Tensor((1,), "uint32"), Out: T.Tensor((64,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32))
        tid = T.cuda.thread_idx("x")
        r = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
        T.ptx["atom.global.add.u32"](r[0], S.ptr_to([0]), T.uint32(2))
        Out[T.cuda.block_idx("x") * 32 + tid] = r[0]

    s, out = np.full(1, 10, np.uint32), np.zeros(64, np.uint32)
    emulate(kernel, s, out, target="sm80")
    assert s[0] == 10 + 2 * 64
    np.testing.assert_array_equal(out, 10 + 2 * np.arange(64))


def test_prmt_picks_and_sign_replicates_bytes():
    rng = np.random.default_rng(7)
    a, b, c = (rng.integers(0, 1 << 32, size=32, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    a[0], b[0], c[0] = 0x44332211, 0x88776655, 0xF740  # a's byte 0, b's 0, b's 3, its sign (0x88: 0xFF)
    out = np.zeros(32, np.uint32)
    emulate(xc.prmt_kernel(), a, b, c, out, target="sm80")
    assert out[0] == 0xFF885511
    np.testing.assert_array_equal(out, xc.prmt_expected(a, b, c))


def test_cvt_f16x2_e4m3x2_widens_every_byte_exactly_upper_byte_to_the_upper_half():
    from tvm_tirx.script import tirx as T

    @T.function
    def kernel(A: T.Tensor((256,), "uint16"), Out: T.Tensor((256,), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=256))
        tid = T.cuda.thread_idx("x")
        d = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
        T.ptx["cvt.rn.f16x2.e4m3x2"](d[0], A[tid])
        Out[tid] = d[0]

    low = np.arange(256, dtype=np.uint16)
    a = low | ((255 - low) << 8).astype(np.uint16)  # every e4m3 byte in each half, NaN (0x7f, 0xff) included
    out = np.zeros(256, np.uint32)
    emulate(kernel, a, out, target="sm90")
    halves = out.view(np.float16).reshape(256, 2)
    expected = a.view(np.uint8).reshape(256, 2).view(ml_dtypes.float8_e4m3fn).astype(np.float16)
    np.testing.assert_array_equal(halves, expected)  # NaN where NaN (assert_array_equal matches NaNs)
