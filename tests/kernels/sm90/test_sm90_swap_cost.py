"""The sm90 cost model weighs the swapped kernel (``gemm_cost.swap_configs``, ``WEIGH_SWAP``): its two terms
(``FEW_CTAS``: the loads' HBM rate of a grid of fewer CTAs than SMs; ``SWAPPED_EFFICIENCY``) fitted to the H100's 72
swap timings (``benchmarks/runs/sm90_swap_ab_h100_2026-12-06d.json``, ``benchmarks/sm90_fit.py --swap``), the
faster of each shape's two measured kernels ranked first, and the bucket plans it makes (swapped, with a K split on
the long K, up to one wgmma N of M; the decode bucket kept)."""

from __future__ import annotations

import json
import math

import paths
import pytest

from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.sm80.decode_plan import DecodePlan
from tvm_cdna4.kernels.sm90 import gemm_cost
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = devices.DEVICES["H100"]
SWAP_RUN = paths.RUNS / "sm90_swap_ab_h100_2026-12-06d.json"


def swap_timings():
    rows = json.loads(SWAP_RUN.read_text())["rows"]
    return [(Sm90Config(**r["config"]), r["M"], r["N"], r["K"], r["us"]) for r in rows if r["ok"]]


def test_the_estimate_follows_the_swap_timings_and_ranks_the_faster_kernel_first():
    data = swap_timings()
    assert len(data) == 72 and sum(cfg.swap_ab for cfg, *_ in data) == 36
    logs = [math.log(us * 1e-6 / gemm_cost.estimate(cfg, M, N, K, 2, H100).total) for cfg, M, N, K, us in data]
    assert math.sqrt(sum(x * x for x in logs) / 72) < 0.075 and max(map(abs, logs)) < 0.15  # 7.3 %, 14.3 %
    shapes = {}
    for cfg, M, N, K, us in data:
        shapes.setdefault((M, N, K), []).append((gemm_cost.estimate(cfg, M, N, K, 2, H100).total, us))
    right = sum(min(runs)[1] == min(us for _, us in runs) for runs in shapes.values())
    # 33 of 36: the split epilogue's count (gemm_cost.WEIGH_SPLIT_EPILOGUE) puts the timed 128x192 /k3 tma of M = 200,
    # N = 3584, K = 14336 0.1 us under the 64x200 swap (64.3 / 64.4 us; measured 65.1 / 60.8), where it was 34
    assert len(shapes) == 36 and right == 33


def test_the_loads_slow_with_fewer_ctas_than_sms_and_the_swapped_tile_keeps_more_of_the_tensor_rate():
    assert gemm_cost.few_ctas(132, H100) == gemm_cost.few_ctas(500, H100) == 1.0
    assert gemm_cost.few_ctas(72, H100) == pytest.approx((72 / 132) ** gemm_cost.FEW_CTAS)
    assert 0.9 < gemm_cost.few_ctas(72, H100) < 0.95
    assert gemm_cost.efficiency(Sm90Config(64, 96, 8, 1, swap_ab=True)) == pytest.approx(
        gemm_cost.efficiency(Sm90Config(64, 96, 8, 1)) * gemm_cost.SWAPPED_EFFICIENCY)


def test_the_choice_weighs_swapped_splits_up_to_one_wgmma_n_of_m():
    # Qwen2.5-7B's down projection (K 18944) at M = 32: the swapped tile in two K slices, ranked first
    first = gemm_cost.ranked(32, 3584, 18944, 2, H100)[0][1]
    assert (first.swap_ab, first.block_n, first.split_k) == (True, 32, 2)
    assert all(not cfg.swap_ab for _, cfg in gemm_cost.ranked(257, 3584, 18944, 2, H100))
    assert gemm_cost.swap_ab_ranked(32, 3584, 18944, 2, H100)[0][1].split_k == 1  # --swap-ab: unsplit


def test_the_bucket_plans_leave_swap_out_and_keep_the_decode_bucket(monkeypatch):
    # WEIGH_SWAP_DYNAMIC: the buckets' swapped plans ran 0.87x / 0.73x cuBLAS at M = 96 / 200 through the torch op
    # (H100, stop 44), the unswapped 0.93x / 0.82x; the static choice keeps weighing swap (WEIGH_SWAP). Since stop 50
    # the buckets up to SWAP_DYNAMIC_MAX_M weigh it in one tile of M (the A/B of 2026-12-07), the others do not
    qkv, o, down = (gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16"), "sm90")
                    for N, K in ((4608, 3584), (3584, 3584), (3584, 18944)))
    assert isinstance(qkv.plan(8), DecodePlan)  # M <= 16: DECODE_KEEPS
    assert all(k.plan(m).config.swap_ab for k in (qkv, o, down) for m in (32, 96))
    # past SWAP_DYNAMIC_MAX_M only the narrow parts (WEIGH_SWAP_NARROW, stop 53) swap: one token tile at most 15 past M
    narrow = [k.plan(m).config for k in (qkv, o, down) for m in (160, 200)]
    assert any(c.swap_ab for c in narrow)
    assert all(m <= c.block_n < m + gemm_cost.SWAP_NARROW_ROWS for c, m in zip(narrow, (160, 200) * 3) if c.swap_ab)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", False)
    qkv, o, down = (gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16"), "sm90")
                    for N, K in ((4608, 3584), (3584, 3584), (3584, 18944)))
    assert not any(k.plan(m).config.swap_ab for k in (qkv, o, down) for m in (160, 200))
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_DYNAMIC", False)
    qkv, o, down = (gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16"), "sm90")
                    for N, K in ((4608, 3584), (3584, 3584), (3584, 18944)))
    assert not any(k.plan(m).config.swap_ab for k in (qkv, o, down) for m in (32, 96, 200))
    assert gemm_cost.choose_config(32, 4608, 3584, 2, H100).swap_ab  # static M
    # weighed (the flag on), a bucket's swapped block_n covers its range: 64x96 for 65..96 (one tile of M at its top)
    lo, hi = 65, 96
    assert not gemm_cost.choose_for_range(lo, hi, 4608, 3584, 2, H100).swap_ab
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_DYNAMIC", True)
    cfg = gemm_cost.choose_for_range(lo, hi, 4608, 3584, 2, H100)
    o_cfg = gemm_cost.choose_for_range(lo, hi, 3584, 3584, 2, H100)  # was 64x72: two tiles of M at M = 96
    assert cfg.swap_ab and cfg.block_n == 96
    assert (o_cfg.swap_ab, o_cfg.block_n) == (True, 96)  # one tile of M (choose_for_range)
    # 193..256: a swapped split would hold 200-256 accumulators' columns (SWAP_SPLIT_ACC_MAX)
    assert all(cfg.split_k == 1 for cfg in gemm_cost.swap_configs(200, 3584, 18944, H100, allowed=(1, 2, 3)))


def test_the_torch_benchmark_names_the_bucket_plan_it_ran(capsys):
    from benchmark_modules import benchmark_module

    torch_gemm = benchmark_module("torch_gemm")
    down = gemm.build(GemmProblem(None, 3584, 18944, "bf16", "nt", "bf16"), "sm90")
    assert [torch_gemm.plan_label(down.plan(m)) for m in (8, 32)] == ["decode", "64x32 swap raster-n /k2 shift"]
    assert torch_gemm.main(["--plans", "--models", "qwen2.5-7b", "--ms", "200"]) == 0
    out = capsys.readouterr().out
    # o: 64x112, a wave-fitting width (gemm_cost.wave_widths: 4 x 32 = 128 tiles on 132 SMs; 64x128: 112)
    assert "| qwen2.5-7b | o | 3584 | 3584 | 64x112 shift (193-256) |" in out and "| 128x224 /k4 shift (193-256) |" in out
