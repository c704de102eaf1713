"""The gfx950 attention forward (issue 26 stage 3) in the emulator against the float64 reference:
odd sequence lengths (masked tails of queries and keys), causal (fully masked kv tiles skipped),
GQA, head dim 64 and 128, one token; the whole-kernel checks and the compiled code."""

import logging
import re

import ml_dtypes
import numpy as np
import pytest

import tvm_cdna4
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG
from tvm_cdna4.report import attention_kernel_report, main_loop
from tvm_cdna4.rocm import lds_sync
from tvm_cdna4.kernels.gfx950.attention_emit import emit_gfx950_attention
from tvm_cdna4.kernels.gfx950.attention_plan import (AttentionConfig, AttentionProblem, dequantize, error_bound, kv_tiles_for,
                                                output_arrays, plan_gfx950_attention, random_inputs, reference)

CASES = {
    "odd lengths, D 64": (AttentionProblem(1, 2, 2, 130, 130, 64), AttentionConfig(64, 32)),
    "causal, GQA 2:1, D 128": (AttentionProblem(1, 2, 1, 130, 130, 128, causal=True), AttentionConfig(128, 64)),
    "one token, causal, GQA": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True), AttentionConfig(64, 32)),
    "257 keys and queries, MFMAs not deferred": (AttentionProblem(1, 1, 1, 257, 257, 64), AttentionConfig(64, 64, defer_pv=False)),
    # causal, two query blocks that each see one kv tile: no block enters the masked loop (its empty
    # range once failed the ds_read_tr bounds proof at lowering, a ContractError for a valid plan)
    "causal, 50 queries over 150 keys, one wave": (AttentionProblem(1, 1, 1, 50, 150, 64, causal=True),
                                                   AttentionConfig(32, 64)),
}


def _inputs(problem, seed=0):
    rng = np.random.default_rng(seed)
    s = problem.shapes()
    return [rng.standard_normal(s[n]).astype(ml_dtypes.bfloat16) for n in ("Q", "K", "V")]


def _run(plan, q, k, v):
    s = plan.problem.shapes()
    o, lse = np.full(s["O"], np.nan, ml_dtypes.bfloat16), np.full(s["LSE"], np.nan, np.float32)
    emulate(emit_gfx950_attention(plan), q, k, v, o, lse)
    return o.astype(np.float64), lse


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "257 keys and queries, MFMAs not deferred"
                                  else n for n in CASES])  # suite time: the fp8 cases run MFMAs not deferred
def test_emulated_attention_is_within_the_documented_bound(name):
    problem, config = CASES[name]
    q, k, v = _inputs(problem)
    o, lse = _run(plan_gfx950_attention(problem, config), q, k, v)
    want_o, want_lse = reference(q, k, v, problem.causal)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal)
    assert (np.abs(o - want_o) <= bound_o).all(), np.abs(o - want_o).max()
    assert (np.abs(lse - want_lse) <= bound_lse).all(), np.abs(lse - want_lse).max()
    assert problem.seq_kv == 1 or np.abs(o - want_o).max() > 0  # not vacuous: 16-bit P and O round (one key: O = V)


@pytest.mark.parametrize("skip", [True, False])
def test_causal_blocks_skip_the_kv_tiles_above_their_diagonal(skip):
    """64 queries, 130 keys: the block sees keys 0-63 (2 tiles of 32); keys 64 on hold NaN, which
    reach O through 0 * NaN only if their tiles run."""
    problem = AttentionProblem(1, 1, 1, 64, 130, 64, causal=True)
    plan = plan_gfx950_attention(problem, AttentionConfig(64, 32, skip_masked=skip, lds_dma=False, defer_pv=skip))  # staged loads
    assert kv_tiles_for(problem, 64, 32, 0, skip) == (2 if skip else 5)
    q, k, v = _inputs(problem, seed=1)
    k[:, :, 64:], v[:, :, 64:] = np.nan, np.nan
    o, lse = _run(plan, q, k, v)
    if skip:
        want_o, want_lse = reference(q, k[:, :, :64], v[:, :, :64], causal=True)
        bound_o, bound_lse = error_bound(q, k[:, :, :64], v[:, :, :64], causal=True)
        assert (np.abs(o - want_o) <= bound_o).all() and (np.abs(lse - want_lse) <= bound_lse).all()
    else:
        assert np.isnan(o).all() and np.isfinite(lse).all()


def test_the_whole_kernel_checks_accept_it_and_the_code_is_mfma_tr_reads_and_lane_swaps(caplog):
    caplog.set_level(logging.DEBUG, logger=lds_sync.logger.name)
    plan = plan_gfx950_attention(*CASES["odd lengths, D 64"])
    result = tvm_cdna4.build(emit_gfx950_attention(plan))  # rocm.analysis and rocm.lds_sync run here
    assert not [r for r in caplog.records if "left to the emulator" in r.getMessage()]  # decided, not skipped
    kernel = result.kernel()
    # direct-to-LDS: K 2 + V 3 stages (one deferred, one landing); the planner's figure is the compiler's
    assert kernel.scratch_bytes == 0 and kernel.lds_bytes == plan.lds_bytes == 5 * 36 * 72 * 2
    assert plan.masked_tiles and plan.config.defer_pv and plan.config.lds_dma
    plan = plan_gfx950_attention(*CASES["causal, GQA 2:1, D 128"])  # causal: run-time trip counts, real loops
    result = tvm_cdna4.build(emit_gfx950_attention(plan))  # the LDS check: every query block's trip counts (blockIdx)
    assert not [r for r in caplog.records if "left to the emulator" in r.getMessage()]
    body = "\n".join(main_loop(result.asm))  # the unmasked tiles' loop (each loop once: not unrolled)
    count = lambda mnemonic: len(re.findall(rf"^\s+{mnemonic}\b", body, flags=re.M))  # noqa: E731
    per_tile = plan.kv_blocks * plan.k_steps + 2 * plan.kv_blocks * plan.d_tiles  # S^T, then O^T MFMAs
    assert count("v_mfma_f32_32x32x16_bf16") == per_tile
    assert count("ds_read_b64_tr_b16") == 2 * 2 * plan.kv_blocks * plan.d_tiles  # two per V^T fragment
    assert count("ds_read_b128") == plan.kv_blocks * plan.k_steps  # one per K fragment
    assert count("v_permlane32_swap_b32_e64") == 1  # the row max (the row sum's at the end)
    report = attention_kernel_report(result.asm, result.kernel(), plan.problem, 128, 64, plan.waves)  # the model's counts
    w = report.work
    assert w.mfma_cycles == per_tile * CATALOG[plan.mfma].cycles and w.trans == 1 + 16 * plan.kv_blocks  # alpha, scores
    assert w.lds_read_bytes == 64 * (16 * count("ds_read_b128") + 8 * count("ds_read_b64_tr_b16"))
    dma = len(re.findall(r"^\s+buffer_load_dwordx4 .* lds$", body, flags=re.M))  # per wave: K's and V's of 17
    assert count("ds_write_b128") == 0 and dma == 2 * -(-plan.dma.loads // plan.waves) == 10
    assert w.lds_write_bytes == 64 * 16 * dma and w.chain_cycles > w.mfma_cycles
    assert report.estimate.workgroups == plan.grid.groups and report.estimate.kv_tiles == 2 * (2 + 3)  # causal


FP8_CASES = {
    "fp8 odd lengths, D 64, staged loads, MFMAs not deferred": (
        AttentionProblem(1, 2, 2, 130, 130, 64, dtype="fp8"), AttentionConfig(64, 64, lds_dma=False, defer_pv=False)),
    "fp8 causal, GQA 2:1, D 128": (AttentionProblem(1, 2, 1, 130, 130, 128, causal=True, dtype="fp8"),
                                   AttentionConfig(128, 64)),
    "fp8 one token, causal, GQA, staged loads": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True, dtype="fp8"),
                                                 AttentionConfig(64, 64, lds_dma=False)),
}


@pytest.mark.parametrize("name", FP8_CASES)
def test_emulated_fp8_attention_is_within_its_bound(name):
    """e4m3 Q, K, V with per-tensor scales, P as e4m3 (times 2^8) for P V, bf16 O: against the
    float64 reference of the dequantized inputs, within ``error_bound(..., "fp8")``."""
    problem, config = FP8_CASES[name]
    plan = plan_gfx950_attention(problem, config)
    arrays = {**random_inputs(problem, seed=1), **output_arrays(problem)}
    emulate(emit_gfx950_attention(plan), *(arrays[p.name] for p in plan.params))
    q, k, v = dequantize(problem, arrays)
    o, lse = arrays["O"].astype(np.float64), arrays["LSE"]
    want_o, want_lse = reference(q, k, v, problem.causal)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal, dtype="fp8")
    assert (np.abs(o - want_o) <= bound_o).all(), (np.abs(o - want_o) / bound_o).max()
    assert (np.abs(lse - want_lse) <= bound_lse).all(), (np.abs(lse - want_lse) / bound_lse).max()
    if problem.seq_kv > 1:  # not vacuous: P's e4m3 rounding shows beyond what a 16-bit P would give
        assert (np.abs(o - want_o) > error_bound(q, k, v, problem.causal, dtype="bf16")[0]).any()


def test_the_fp8_kernel_is_scaled_mfmas_tr8_reads_and_packed_conversions(caplog):
    caplog.set_level(logging.DEBUG, logger=lds_sync.logger.name)
    plan = plan_gfx950_attention(*FP8_CASES["fp8 causal, GQA 2:1, D 128"])  # direct-to-LDS, deferred P V
    result = tvm_cdna4.build(emit_gfx950_attention(plan))
    assert not [r for r in caplog.records if "left to the emulator" in r.getMessage()]  # causal, tr8 reads: decided
    assert result.kernel().scratch_bytes == 0 and result.kernel().lds_bytes == plan.lds_bytes == 5 * 64 * 144  # 1 byte
    body = "\n".join(main_loop(result.asm))  # the unmasked tiles' loop
    count = lambda mnemonic: len(re.findall(rf"^\s+{mnemonic}\b", body, flags=re.M))  # noqa: E731
    assert count("v_mfma_scale_f32_32x32x64_f8f6f4") == plan.kv_blocks * plan.k_steps + plan.pv_steps * plan.d_tiles
    assert count("ds_read_b64_tr_b8") == 4 * plan.pv_steps * plan.d_tiles  # four per V^T fragment (32 keys a lane)
    assert count("v_cvt_pk_fp8_f32") == 2 * plan.kv_blocks * 16 // 4  # two per four scores
    assert count("v_exp_f32_e32") == 1 + 16 * plan.kv_blocks
    dma = len(re.findall(r"^\s+buffer_load_dwordx4 .* lds$", body, flags=re.M))  # K's and V's 1 KiB loads, per wave
    assert count("ds_write_b128") == 0 and dma == 2 * -(-plan.dma.loads // plan.waves)


def _pack_kernel():
    """One wave: row ``tx`` of A (4 f32) -> four e4m3 bytes of B by two ``v_cvt_pk_fp8_f32``."""
    from tvm_tirx.script import tirx as T

    from tvm_cdna4.isa.llvm_helpers import CVT_PK_FP8
    from tvm_cdna4.rocm.build import register
    from tvm_cdna4.kernels.gfx950.emit import kernel_function
    from tvm_cdna4.kernels.gfx950.gemm_plan import Param

    register()

    def pack(a, b, old, high):
        return T.call_llvm_pure_intrin(CVT_PK_FP8, a, b, old, T.bool(high), ty="int32")

    @T.macro
    def body(args):
        T.launch_thread("blockIdx.x", 1)
        tx = T.launch_thread("threadIdx.x", 64)
        w = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint8", scope="local")])
        W = T.decl_tensor(w.ptr_to([0]), ty_args=[T.Tensor((1,), "uint32", scope="local")])
        W[0] = T.reinterpret(pack(args.A[tx, 2], args.A[tx, 3], pack(args.A[tx, 0], args.A[tx, 1], T.int32(0), False),
                                  True), ty="uint32")
        for e in T.unroll(4):
            args.B[tx, e] = w[e]
    return kernel_function("pack", (Param("A", (64, 4), "float32"), Param("B", (64, 4), "uint8")), body)


def test_cvt_pk_fp8_rounds_to_e4m3_into_either_half_and_refuses_out_of_range_values():
    from tvm_cdna4.emulator import EmulationError

    kernel = _pack_kernel()
    a = (np.random.default_rng(0).standard_normal((64, 4)) * 40).astype(np.float32)
    a[0] = (2.0**-7, -2.0**-10, 0.0, 448.0)  # a subnormal, one that rounds to zero, zero, the largest
    b = np.zeros((64, 4), np.uint8)
    emulate(kernel, a, b)
    np.testing.assert_array_equal(b, a.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))
    a[5, 3] = 449.0
    with pytest.raises(EmulationError, match="beyond e4m3's 448"):
        emulate(kernel, a, b)
    asm = tvm_cdna4.build(kernel).asm
    assert "v_cvt_pk_fp8_f32" in asm and "op_sel:[0,0,1]" in asm  # the second pair into the high half
