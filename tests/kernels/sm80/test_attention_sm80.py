"""The sm80 attention forward (issue 26 part 2) in the CUDA emulator against the float64 reference
(odd sequence lengths, causal and not, GQA, head dims 64 and 128, both fragment layouts), its plan
and cost model, its imports; on an NVIDIA GPU (``cuda`` marker) the same bound on larger shapes."""

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels.attention.problem import AttentionProblem, error_bound, kv_tiles_for, reference
from tvm_cdna4.kernels.sm80.attention_emit import emit_sm80_attention
from tvm_cdna4.kernels.sm80.attention_plan import (CANDIDATES, Sm80AttentionConfig, default_config,
                                                     plan_sm80_attention, registers_estimate)

C = Sm80AttentionConfig
CASES = {
    "odd lengths, causal, GQA 2:1, D 64": (AttentionProblem(1, 2, 1, 130, 130, 64, causal=True), C(32, 4, 2)),
    "odd lengths, D 128, 8 warps": (AttentionProblem(1, 2, 2, 130, 130, 128), C(64, 8, 2)),
    "one token, causal, GQA 2:1": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True), C(32, 4, 2)),
    "257 keys, 3 stages, two m-tiles": (AttentionProblem(1, 1, 1, 257, 257, 64), C(64, 4, 3, 2, True)),
    "causal D 128, Q from shared memory": (AttentionProblem(1, 2, 1, 130, 130, 128, causal=True), C(32, 4, 2, 2, False)),
    "more keys than queries, causal, f16": (AttentionProblem(1, 2, 1, 70, 200, 64, True, "f16"), C(128, 4, 2)),
    "overlapped softmax, causal, odd tile count": (AttentionProblem(1, 2, 1, 100, 100, 128, True), C(32, 4, 3, overlap=True)),
    "skewed warps, causal, GQA 2:1, 5 tiles": (AttentionProblem(1, 2, 1, 130, 130, 64, True), C(32, 4, 3, skew=True)),
    "mbarrier sync, causal, GQA 2:1, 5 tiles": (AttentionProblem(1, 2, 1, 130, 130, 64, True),
                                                C(32, 4, 3, sync="mbarrier")),
    "mbarrier sync, odd lengths, 4 stages": (AttentionProblem(1, 1, 1, 70, 200, 128), C(32, 4, 4, sync="mbarrier")),
    "two m-tiles at 64 keys, lazy rescale, heads in groups of 2": (AttentionProblem(2, 3, 3, 130, 130, 64, causal=True),
                                                                   C(64, 8, 2, 2, False, rescale_slack=8, head_group=2)),
    "mbarrier sync, causal, f16, lazy rescale at 15, 9 tiles (a buffer's third use)": (
        AttentionProblem(1, 2, 1, 130, 130, 64, True, "f16"), C(16, 2, 3, 2, True, sync="mbarrier", rescale_slack=15)),
}


def _inputs(problem, seed=0):
    rng = np.random.default_rng(seed)
    s = problem.shapes()
    dt = ml_dtypes.bfloat16 if problem.dtype == "bf16" else np.float16
    return [rng.standard_normal(s[n]).astype(dt) for n in ("Q", "K", "V")]


def _run(plan, q, k, v):
    s = plan.problem.shapes()
    o, lse = np.full(s["O"], np.nan, q.dtype), np.full(s["LSE"], np.nan, np.float32)
    stats = {}
    emulate(emit_sm80_attention(plan), q, k, v, o, lse, target="sm80", stats=stats)
    return o.astype(np.float64), lse, stats


SLOW_CASES = ("causal D 128, Q from shared memory", "odd lengths, D 128, 8 warps",
              "skewed warps, causal, GQA 2:1, 5 tiles", "257 keys, 3 stages, two m-tiles",
              "two m-tiles at 64 keys, lazy rescale, heads in groups of 2")  # suite time: their features run in the other cases
"""Run with TVM_CDNA4_SLOW=1 (suite time): D 128 stays in the default run through the overlapped and the
4-stage mbarrier cases."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CASES else n for n in CASES])
def test_emulated_attention_is_within_the_documented_bound(name):
    problem, config = CASES[name]
    q, k, v = _inputs(problem)
    o, lse, stats = _run(plan_sm80_attention(problem, config), q, k, v)
    want_o, want_lse = reference(q, k, v, problem.causal)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal, dtype=problem.dtype)
    assert (np.abs(o - want_o) <= bound_o).all(), np.abs(o - want_o).max()
    assert (np.abs(lse - want_lse) <= bound_lse).all(), np.abs(lse - want_lse).max()
    assert problem.seq_kv == 1 or np.abs(o - want_o).max() > 0  # not vacuous: 16-bit P and O round
    assert stats["ldmatrix conflicts"] == 0 and stats["cp.async conflicts"] == 0  # the XOR swizzle


@pytest.mark.parametrize("skip", [True, False])
def test_causal_blocks_skip_the_kv_tiles_above_their_diagonal(skip):
    """64 queries, 130 keys: the block sees keys 0-63 (2 tiles of 32); keys 64 on hold NaN, which
    reach O through 0 * NaN only if their tiles run."""
    problem = AttentionProblem(1, 1, 1, 64, 130, 64, causal=True)
    plan = plan_sm80_attention(problem, C(32, 4, 2, skip_masked=skip))
    assert kv_tiles_for(problem, 64, 32, 0, skip) == (2 if skip else 5)
    q, k, v = _inputs(problem, seed=1)
    k[:, :, 64:], v[:, :, 64:] = np.nan, np.nan
    o, _, _ = _run(plan, q, k, v)
    assert np.isfinite(o).all() == skip


def test_the_plan_and_its_refusals():
    p = plan_sm80_attention(AttentionProblem(2, 32, 8, 4096, 4096, 128, causal=True), C(64, 8, 2))
    assert (p.threads, p.config.block_q, p.q_blocks, p.ctas, p.kv_tiles) == (256, 128, 32, 32 * 64, 64)
    assert p.smem_bytes == 2 * 128 * (128 + 2 * 2 * 64) and p.mma_instr.endswith("f32.bf16.bf16.f32")
    assert p.registers == registers_estimate(128, p.config) == 192  # ptxas 13.0 used 178 (docs/attention.md)
    with pytest.raises(ValueError, match="registers per thread"):
        plan_sm80_attention(AttentionProblem(1, 1, 1, 64, 64, 128), C(64, 4, 2, 2, False))
    lazy = plan_sm80_attention(AttentionProblem(1, 1, 1, 64, 64, 128), C(64, 4, 2, 2, False, rescale_slack=8))
    assert lazy.registers == 262  # REGISTER_LIMIT 264: ptxas 13.0 spilled 24-56 bytes (docs/attention.md)
    for slack in (16, None, 2.5, True):  # not an int from 0 to 15: a ValueError, not a TypeError or a float slack
        with pytest.raises(ValueError, match="rescale_slack"):
            C(rescale_slack=slack)
    with pytest.raises(ValueError, match="shared memory"):
        plan_sm80_attention(AttentionProblem(1, 1, 1, 64, 64, 128), C(256, 8, 4))
    # 2^31 elements or more: 64-bit offsets where the gfx950 planner refuses (issue 35; the last CTA of such a
    # problem emulated: tests/kernels/sm80/test_cuda_offsets64.py)
    assert plan_sm80_attention(AttentionProblem(64, 64, 64, 8192, 8192, 128)).offsets64 == ("Q", "K", "V", "O")
    with pytest.raises(ValueError, match="m_tiles"):
        C(64, 4, 2, 3)
    with pytest.raises(ValueError, match="stages >= 3"):
        C(64, 4, 2, overlap=True)
    with pytest.raises(ValueError, match="skew"):
        C(64, 8, 2, skew=True)
    assert (C(64, 8, 3).lead, C(64, 8, 3, skew=True).lead) == (2, 1)


def test_lazy_rescale_takes_both_branches_within_the_bound():
    """``rescale_slack``: keys whose norm grows along the sequence push some rows' max past 2^8 after the
    first tile (every row of the warp then rescales: the vote), while others keep a stale max; O and LSE
    stay within the bound, and differ from the always-rescaling kernel's (the stale branch ran)."""
    problem = AttentionProblem(1, 2, 1, 130, 130, 64)
    q, k, v = _inputs(problem, seed=4)
    k = (k.astype(np.float32) * np.linspace(1, 6, 130)[None, None, :, None]).astype(k.dtype)
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), np.repeat(k, 2, 1).astype(np.float64)) * problem.scale_log2
    first, total = s[..., :32].max(-1), s.max(-1)
    assert ((total - first) > 8).any() and ((total - first) <= 8).any()  # both branches: rows grow and rows do not
    want_o, want_lse = reference(q, k, v, problem.causal)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal, dtype=problem.dtype)
    outs = []
    for slack in (0, 8):
        o, lse, _ = _run(plan_sm80_attention(problem, C(32, 4, 2, rescale_slack=slack)), q, k, v)
        assert (np.abs(o - want_o) <= bound_o).all() and (np.abs(lse - want_lse) <= bound_lse).all()
        outs.append(o)
    assert (outs[0] != outs[1]).any()


def test_the_cta_order_groups_heads():
    """``head_group``: the largest divisor of batch x heads not above the request; the L2 rule gives one head
    per group non-causal and, causal, as many heads as keep their K / V within half the L2."""
    from tvm_cdna4.kernels.sm80.attention_plan import L2_BYTES, l2_head_group

    big = AttentionProblem(4, 32, 32, 4096, 4096, 128, causal=True)
    assert l2_head_group(big) == L2_BYTES // 2 // (2 * 4096 * 128 * 2) == 12
    assert plan_sm80_attention(big).head_group == 8  # of 128 heads: 8 divides, 12 does not
    assert l2_head_group(AttentionProblem(4, 32, 32, 4096, 4096, 128)) == 1
    small = AttentionProblem(2, 3, 3, 130, 130, 64, causal=True)
    assert [plan_sm80_attention(small, C(32, 4, 2, head_group=g)).head_group for g in (1, 2, 4, 5, 99, None)] == [
        1, 2, 3, 3, 6, 6]
    for group in (0, "2", 2.5, True):
        with pytest.raises(ValueError, match="head_group"):
            C(head_group=group)


def test_the_default_config_is_the_cost_models_choice():
    for problem in (AttentionProblem(4, 32, 32, 4096, 4096, 128), AttentionProblem(1, 32, 32, 16384, 16384, 64, True)):
        config = default_config(problem)
        assert config in CANDIDATES and plan_sm80_attention(problem).config == config
    # the H200's long sequences at D 128: two m-tiles at 64 keys with the lazy rescale (benchmarks/RESULTS.md);
    # causal on sm_90 or later, its mbarrier twin (kernels.sm80.attention_plan.decoupled); the PrimFunc's default is sm_80's
    tile = C(64, 8, 2, 2, False, rescale_slack=8)
    for causal in (False, True):
        problem = AttentionProblem(4, 32, 32, 4096, 4096, 128, causal=causal)
        assert default_config(problem) == default_config(problem, arch="sm_80") == tile
        assert default_config(problem, arch="sm_90a") == (C(64, 8, 3, 2, False, sync="mbarrier", rescale_slack=8)
                                                          if causal else tile)
        assert plan_sm80_attention(problem, arch="sm_90a").config == default_config(problem, arch="sm_90a")
    from tvm_cdna4.kernels.sm80.attention_plan import decoupled  # one m-tile: its twin measured slower

    assert decoupled(AttentionProblem(4, 32, 32, 4096, 4096, 128, causal=True), C(128, 8, 2)) == C(128, 8, 2)
    for arch in ("gfx950", "sm_75"):  # sm_75 has no cp.async, ldmatrix or mma.sync m16n8k16: refused, not planned
        with pytest.raises(ValueError, match=f"sm80 attention arch: expected a CUDA arch sm_80 or newer, such as "
                                             f"'sm_80' or 'sm_90a', found '{arch}'"):
            plan_sm80_attention(AttentionProblem(1, 1, 1, 64, 64, 64), arch=arch)


def test_the_cuda_side_imports_no_gfx950_module():
    """Only what the CUDA GEMM itself loads (the GPU machine runs it from a bare TIRx install): no
    gfx950 plan, cost model or ROCm pattern beyond the GEMM's."""
    code = ("import sys\nimport tvm_cdna4.kernels.sm80.{}\n"
            "print(sorted(m for m in sys.modules if m.startswith('tvm_cdna4') and ('gfx950' in m or 'patterns' in m)))")
    seen = [subprocess.run([sys.executable, "-c", code.format(m)], capture_output=True, text=True, check=True).stdout
            for m in ("gemm", "attention")]
    assert seen[0] == seen[1] and "gfx950" not in seen[1]


# ---- on the GPU --------------------------------------------------------------------------------------

GPU_CASES = [
    (AttentionProblem(1, 4, 2, 1, 1, 128, causal=True), None),
    (AttentionProblem(2, 4, 2, 257, 257, 128, causal=True), None),
    (AttentionProblem(1, 4, 4, 1000, 1003, 64), None),
    (AttentionProblem(1, 8, 2, 777, 777, 128, causal=True, dtype="f16"), None),
    (AttentionProblem(1, 2, 2, 2049, 2049, 128, causal=True), C(32, 4, 2, 2, False)),
    (AttentionProblem(1, 2, 1, 1537, 1537, 64), C(128, 8, 3)),
    (AttentionProblem(2, 4, 2, 1031, 1031, 128, causal=True), C(64, 8, 3, overlap=True)),
    (AttentionProblem(1, 4, 4, 999, 1001, 128), C(32, 4, 4, overlap=True)),
    (AttentionProblem(2, 4, 2, 1031, 1031, 128, causal=True), C(128, 8, 3, skew=True)),
    (AttentionProblem(3, 4, 2, 1031, 1031, 128, causal=True), C(64, 8, 2, 2, False, rescale_slack=8, head_group=4)),
    (AttentionProblem(2, 4, 2, 999, 1001, 128), C(48, 8, 3, 2, False, sync="mbarrier", rescale_slack=8, head_group=1)),
    (AttentionProblem(1, 4, 4, 999, 1001, 128), C(32, 8, 3, 2, False, skew=True)),
]


@pytest.mark.cuda
@pytest.mark.parametrize("case", range(len(GPU_CASES)))
def test_on_the_gpu_within_the_documented_bound(case):
    import torch

    from tvm_cdna4.runtime.cuda import Kernel, device_arch, load_build
    from tvm_cdna4.kernels.sm80.attention import build_sm80_attention

    problem, config = GPU_CASES[case]
    exe = build_sm80_attention(problem, config, arch=device_arch())
    kernel = Kernel(load_build(exe, "attention_test_"), plan_sm80_attention(problem, exe.config))
    q, k, v = _inputs(problem, seed=case)
    tq, tk, tv = (torch.from_numpy(x.view(np.uint16).astype(np.int16)).cuda().view(
        torch.bfloat16 if problem.dtype == "bf16" else torch.float16) for x in (q, k, v))
    s = problem.shapes()
    o = torch.full(s["O"], float("nan"), dtype=tq.dtype, device="cuda")
    lse = torch.full(s["LSE"], float("nan"), dtype=torch.float32, device="cuda")
    kernel.launch(tq, tk, tv, o, lse)
    torch.cuda.synchronize()
    o, lse = o.float().cpu().numpy().astype(np.float64), lse.cpu().numpy()
    want_o, want_lse = reference(q, k, v, problem.causal)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal, dtype=problem.dtype)
    assert (np.abs(o - want_o) <= bound_o).all(), np.nanmax(np.abs(o - want_o) / bound_o)
    assert (np.abs(lse - want_lse) <= bound_lse).all(), np.nanmax(np.abs(lse - want_lse) / bound_lse)


def test_mbarrier_sync_is_opt_in_data_and_refused_where_it_cannot_work():
    """``sync="mbarrier"``: the barriers as plan data (full: one arrival per thread, empty: one per warp,
    8 bytes each after the K / V buffers), never a cost-model candidate (the default takes it only as the
    causal sm_90 twin), refused below 3 stages, with overlap or skew, and below sm_90 (TIRx's
    mbarrier.try_wait)."""
    from tvm_cdna4.kernels.sm80.attention import check_arch

    problem = AttentionProblem(1, 2, 1, 130, 130, 64)
    p, twin = (plan_sm80_attention(problem, C(32, 4, 3, sync=s)) for s in ("mbarrier", "cta"))
    assert p.mbarriers == {"full": (0, 128), "empty": (3, 4)} and twin.mbarriers == {}
    assert p.smem_bytes == twin.smem_bytes + 6 * 8
    assert 2 * p.mbarrier_elem(0) == twin.smem_bytes and 2 * p.mbarrier_elem(5) == p.smem_bytes - 8
    assert all(c.sync == "cta" for c in CANDIDATES) and default_config(problem).sync == "cta"
    for bad in (dict(stages=2), dict(stages=3, overlap=True), dict(stages=3, skew=True)):
        with pytest.raises(ValueError, match="sync='mbarrier'"):
            C(32, 4, sync="mbarrier", **bad)
    with pytest.raises(ValueError, match="attention sync: expected one of"):
        C(sync="named")
    with pytest.raises(ValueError, match="needs sm_90"):
        check_arch(p, "sm_80")
    check_arch(p, "sm_90a")
    check_arch(twin, "sm_80")
