"""The whole-GPU estimate (``kernels.gfx950.gemm_cost``): a pure function of the plan's work, the
occupancy and the per-wave loop estimate, checked without building big kernels."""

import json

import attrs
import pytest

from tvm_cdna4.kernels.gfx950.gemm_cost import (HBM_BYTES_PER_S, HBM_LATENCY_S, GemmWork, gpu_estimate,
                                             planned_loop_fraction, work_of)
from tvm_cdna4.kernels.gfx950.gemm_plan import plan_gfx950_gemm, plan_mx_gemm


def _bf16(M, N, K, block=(128, 128, 64), k_splits=1):
    return GemmWork(M, N, K, block, 2, 2, 2, k_splits)


def test_work_of_the_default_plans():
    w = work_of(plan_gfx950_gemm(16, 4096, 4096, "bf16", "nt", "bf16"))
    assert (w.M, w.N, w.K, w.block, w.a_bytes, w.c_bytes, w.k_splits, w.load_ahead) == (16, 4096, 4096, (128, 128, 64),
                                                                                         2, 2, 1, 2)
    assert w.workgroups == 32 and w.k_tiles == 64
    assert w.operand_bytes == 16 * 4096 * 2 + 4096 * 4096 * 2 + 16 * 4096 * 2
    mx = work_of(plan_mx_gemm(256, 256, 512, "mxfp4"))
    assert (mx.a_bytes, mx.c_bytes, mx.extra_bytes) == (0.5, 4, (256 + 256) * 512 // 32)


def test_4096_cube_is_compute_bound_above_90_percent():
    w = work_of(plan_gfx950_gemm(4096, 4096, 4096, "f16", "nt"))
    est = gpu_estimate(w, 2, 4, 0.986, 1024)
    assert est.bound == "compute" and est.tile_efficiency == 1.0
    assert (est.workgroups, est.workgroups_per_cu, est.waves, est.cus_used) == (1024, 2, 2, 256)
    assert 0.9 <= est.roofline_fraction < 0.986
    # compute: 4 workgroups per CU, each 2 * 128 * 128 * 4096 ops over 4 SIMDs at 98.6 % of 1024 ops/cycle
    assert est.compute_s == pytest.approx(4 * 2 * 128 * 128 * 4096 / (4 * 1024 * 0.986) / 2.4e9)
    assert est.time_s == pytest.approx(est.compute_s + HBM_LATENCY_S)


def test_small_m_counts_padding_and_idle_cus():
    # the example: 16x4096x4096 on 128x128 tiles, no split: 32 workgroups, 1/8 of the MFMA work useful
    est = gpu_estimate(_bf16(16, 4096, 4096), 2, 4, 0.79, 1024)
    assert (est.workgroups, est.cus_used, est.tile_efficiency) == (32, 32, 0.125)
    assert est.roofline_fraction < 0.35
    # 32-row tiles split 8 ways along K: every CU busy, a quarter of the rows padding
    split = gpu_estimate(_bf16(16, 4096, 4096, (32, 128, 64), 8), 2, 4, 0.6, 1024)
    assert (split.workgroups, split.cus_used, split.tile_efficiency) == (256, 256, 0.5)
    assert split.bound == "memory" and split.roofline_fraction > 2 * est.roofline_fraction


def test_in_flight_loads_cap_the_bandwidth():
    # Little's law: 32 workgroups x 2 K tiles x (16 rows of A, masked rows past M move nothing, + 128 of B)
    est = gpu_estimate(_bf16(16, 4096, 4096), 2, 4, 0.79, 1024)
    assert est.hbm_bytes_per_s == pytest.approx(32 * 2 * (16 + 128) * 64 * 2 / HBM_LATENCY_S)
    many = gpu_estimate(_bf16(4096, 4096, 4096), 2, 4, 0.79, 1024)
    assert many.hbm_bytes_per_s == HBM_BYTES_PER_S


def test_hipblaslt_anchor():
    # hipBLASLt on MI355X at M = 1, 8448x7168 bf16: 33.1 us (about 46 % of 8 TB/s). An unsplit
    # 128x128-tile plan is what the model's HBM latency is calibrated on: memory bound, within 5 %
    est = gpu_estimate(_bf16(1, 8448, 7168), 2, 4, planned_loop_fraction(512), 1024)
    assert est.bound == "memory" and 0.95 * 33.1e-6 < est.time_s < 1.05 * 33.1e-6
    assert est.roofline_s == pytest.approx(8448 * 7168 * 2 / HBM_BYTES_PER_S, rel=1e-3)


def test_more_cus_never_slower_and_cu_count_is_a_parameter():
    w = _bf16(64, 8192, 8192, (64, 128, 64), 2)
    times = [gpu_estimate(w, 2, 4, 0.7, 1024, cus=c).time_s for c in (64, 128, 256)]
    assert times[0] > times[1] >= times[2]


def test_refuses_meaningless_inputs():
    with pytest.raises(ValueError, match="loop_fraction"):
        gpu_estimate(_bf16(1, 64, 64), 2, 4, 0.0, 1024)
    with pytest.raises(ValueError, match="waves_per_simd"):
        gpu_estimate(_bf16(1, 64, 64), 0, 4, 0.5, 1024)


def test_as_dict_is_json_with_the_fraction():
    d = gpu_estimate(_bf16(1, 4096, 4096), 2, 4, 0.5, 1024).as_dict()
    assert json.loads(json.dumps(d))["roofline_fraction"] == pytest.approx(d["roofline_s"] / d["time_s"])
    assert {"workgroups", "waves", "tile_efficiency", "hbm_bytes", "bound"} <= d.keys()
    assert attrs.has(GemmWork)


def test_cli_report_json_is_one_object_with_the_estimate(capsys):
    from tvm_cdna4.cli import main

    tile = ["--block", "128x128x64"]  # the default tile as given (no planner)
    assert main(["gemm", "--target", "gfx950", "--dtype", "bf16", "-M", "16", "-N", "256", "-K", "1024",
                 "--report", "--json", *tile]) == 0
    out = json.loads(capsys.readouterr().out)
    gpu = out["gpu"]
    assert gpu["workgroups"] == 2 and gpu["tile_efficiency"] == 0.125 and gpu["bound"] in ("memory", "compute")
    assert 0 < gpu["roofline_fraction"] < 1 and out["est_fraction"] > 0.3
    assert main(["gemm", "--target", "gfx950", "--dtype", "bf16", "-M", "16", "-N", "256", "-K", "1024", "--report",
                 *tile]) == 0
    assert "whole-GPU estimate (MI355X, static): 2 workgroups on 2 CUs" in capsys.readouterr().out


def test_cli_without_a_tile_runs_the_planners_choice(capsys):
    from tvm_cdna4.cli import main
    from tvm_cdna4.kernels.gfx950.gemm_plan import plan_for

    args = ["gemm", "--target", "gfx950", "--dtype", "bf16", "--layout", "nt", "--out-dtype", "bf16", "-M", "1",
            "-N", "1024", "-K", "14336"]
    assert main([*args, "--emit", "config"]) == 0
    got, want = json.loads(capsys.readouterr().out), plan_for(1, 1024, 14336, "bf16", "nt", "bf16")
    assert (got["block_m"], got["split_k"], got["waves_m"]) == (want.block[0], want.grid.k_splits, 1)
    assert got["split_k"] > 1 and got["epilogue"] == ["reduce", "bf16_rne"] and got["workgroups"] == want.groups
    assert got["split_reduction"] == "atomic" and got["planned_estimate"]["bound"] == "memory"


def test_split_traffic_counts_every_partial_and_the_ticket_tail():
    from tvm_cdna4.kernels.gfx950.gemm_cost import split_traffic
    from tvm_cdna4.kernels.gfx950.gemm_plan import Gfx950GemmConfig

    cfg = Gfx950GemmConfig(16, 64, 128, waves_m=1)
    out = 4 * 7 * 130  # f32 bytes of C
    assert split_traffic(plan_gfx950_gemm(7, 130, 1024, "bf16", "nt", "bf16", cfg)) == (0, 1, 0)
    # f32 atomics into C: the 4 partials (C once is in the roofline bytes) and the zeroing, a second launch
    assert split_traffic(plan_gfx950_gemm(7, 130, 1024, "bf16", "nt", "f32", cfg, k_splits=4)) == (4 * out, 2, 0)
    # the workspace: 4 atomic partials, the read-back, the zeros; one launch and the ticket's tail
    assert split_traffic(plan_gfx950_gemm(7, 130, 1024, "bf16", "nt", "bf16", cfg, k_splits=4)) == (6 * out, 1, 1)
    ordered = attrs.evolve(cfg, reduction="ordered")
    assert split_traffic(plan_gfx950_gemm(7, 130, 1024, "bf16", "nt", "bf16", ordered, k_splits=4)) == (8 * out, 1, 1)
    w = work_of(plan_gfx950_gemm(7, 130, 1024, "bf16", "nt", "bf16", cfg, k_splits=4))
    est = gpu_estimate(w, 1, 4, 0.5, 1024)
    assert (w.extra_bytes, w.kernels, w.tails) == (6 * out, 1, 1)
    assert est.time_s == pytest.approx(max(est.compute_s, est.memory_s) + 2 * HBM_LATENCY_S)


def test_cli_reduction_ordered_plans_the_deterministic_split(capsys):
    from tvm_cdna4.cli import main

    assert main(["gemm", "--target", "gfx950", "--dtype", "bf16", "--layout", "nt", "--out-dtype", "bf16", "-M", "1",
                 "-N", "1024", "-K", "14336", "--reduction", "ordered", "--emit", "config"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["split_k"] > 1 and (got["reduction"], got["split_reduction"]) == ("ordered", "ordered")
