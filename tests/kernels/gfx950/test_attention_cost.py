"""The attention forward's static model (``kernels.gfx950.attention_cost``, ``report.lds_bytes``):
pure functions checked against hand-computed values on a small case, no kernel built."""

import pytest

from tvm_cdna4.report import issue_costs, lds_bytes, wave_cycles
from tvm_cdna4.kernels.gfx950.attention_cost import LoopWork, attention_estimate, hbm_bytes, workgroup_tiles
from tvm_cdna4.kernels.gfx950.attention_plan import AttentionProblem
from tvm_cdna4.kernels.gfx950.gemm_cost import CLOCK_HZ, HBM_LATENCY_S

WORK = LoopWork(mfma_cycles=256, mfma_ops=262144, valu=50, trans=10, lds_read_bytes=4096, lds_write_bytes=1024,
                chain_cycles=626)


def test_loop_work_prices_each_pipe_and_the_chain():
    assert WORK.valu_cycles == 4 * 40 + 16 * 10 == 320
    assert WORK.lds_cycles == 4 * (4096 / 256 + 1024 / 128) == 96
    assert WORK.cycles == WORK.chain_cycles == 626  # the wave alone, issued in order
    assert WORK.fraction(1024) == pytest.approx(262144 / 626 / 1024)
    assert WORK.pipes(2) == {"mfma": 256, "valu": 320, "lds": 96, "chain": 313}
    assert (WORK.overlapped(2), WORK.bound(2), WORK.overlapped(1), WORK.bound(1)) == (320, "valu", 626, "chain")


def test_causal_estimate_by_hand():
    """B 1, H 2 (one kv head), S 256, D 64, causal, 128 x 64 blocks, 4 waves, 2 CUs: query blocks run
    2 and 4 kv tiles; dispatched 2, 4, 2, 4 to the least loaded CU: loads (2 + 2, 4 + ...) -> 4 and 8."""
    p = AttentionProblem(1, 2, 1, 256, 256, 64, causal=True)
    assert workgroup_tiles(p, 128, 64) == [2, 4] and workgroup_tiles(p, 128, 64, skip_masked=False) == [4, 4]
    assert hbm_bytes(p) == 2 * (2 * 256 * 64 * 2 + 2 * 256 * 64) + 4 * 2 * 256
    fp8 = AttentionProblem(1, 2, 1, 256, 256, 64, causal=True, dtype="fp8")  # e4m3 Q, K, V; bf16 O
    assert hbm_bytes(fp8) == (2 * 256 * 64 + 2 * 256 * 64) + 2 * (2 * 256 * 64) + 4 * 2 * 256
    e = attention_estimate(p, 128, 64, 4, WORK, waves_per_simd=2, cus=2)
    assert (e.workgroups, e.kv_tiles, e.busiest_cu_iterations) == (4, 12, 8)
    assert e.compute_s == pytest.approx(8 * 626 / CLOCK_HZ) and e.time_s == pytest.approx(e.compute_s + HBM_LATENCY_S)
    assert e.flops == 4 * 64 * 2 * (256 * 257 // 2)
    assert e.tflops == pytest.approx(e.flops / e.time_s / 1e12)
    assert e.overlapped_tflops == pytest.approx(e.flops / (8 * 320 / CLOCK_HZ + HBM_LATENCY_S) / 1e12)
    with pytest.raises(ValueError, match="does not fit"):
        attention_estimate(p, 128, 64, 4, WORK, waves_per_simd=0)


@pytest.mark.parametrize("line, moved", [
    ("  ds_read_b128 v[0:3], v1 offset:32", (1024, 0)), ("  ds_read_b64_tr_b16 v[0:1], v2", (512, 0)),
    ("  ds_read2_b32 v[0:1], v2 offset1:4", (512, 0)), ("  ds_write_b128 v1, v[2:5]", (0, 1024)),
    ("  buffer_load_dwordx4 v1, s[0:3], 0 offen lds", (0, 1024)), ("  buffer_load_dwordx4 v[0:3], v1, s[0:3], 0 offen", (0, 0)),
    ("  ds_bpermute_b32 v0, v1, v2", (256, 0)), ("  v_add_f32_e32 v0, v1, v2", (0, 0))])
def test_lds_bytes_of_an_instruction(line, moved):
    assert lds_bytes(line) == moved


def test_in_order_issue_overlaps_independent_valu_with_the_mfma_pipe():
    """An MFMA (32 cycles), two dependent VALU adds (4 each) that do not read its result, a VALU
    multiply that does, the branch: the adds hide under the MFMA, 32 + 1 + 1 cycles per iteration."""
    body = ["  v_mfma_f32_32x32x16_bf16 v[0:15], v[16:19], v[20:23], v[0:15]", "  v_add_f32_e32 v30, v31, v32",
            "  v_add_f32_e32 v33, v30, v32", "  v_mul_f32_e32 v34, v0, v33", "  s_cbranch_scc1 .LBB0_1"]
    assert wave_cycles(body) == 34
    assert issue_costs(body[0]) == ("mfma", 32, 32, None) and issue_costs("  v_exp_f32_e32 v1, v2") == ("valu", 16, 16, None)


def test_in_order_issue_waits_for_lds_at_the_waitcnt():
    """ds_read_b128: 1 KiB over a SIMD's 64 B/clk share (16 cycles) + 64 latency = 80; the wait,
    the add, the branch: 83 cycles per iteration."""
    body = ["  ds_read_b128 v[0:3], v10", "  s_waitcnt lgkmcnt(0)", "  v_add_f32_e32 v4, v0, v1", "  s_branch .LBB0_1"]
    assert issue_costs(body[0]) == ("lds", 16, 80, "lgkm") and wave_cycles(body) == 83
    # one read may stay in flight: each wait is for the read of the iteration before (83 cycles per two)
    assert wave_cycles([body[0], "  s_waitcnt lgkmcnt(1)", "  v_add_f32_e32 v4, v5, v6", body[3]]) == 41.5
