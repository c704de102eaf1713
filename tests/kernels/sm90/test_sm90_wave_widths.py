"""Wave-fitting tile widths of the sm90 GEMM (docs/sm90_gemm.md "Tile widths"): ``gemm_cost.wave_widths`` derives, from
the shape and the SM count, the narrowest ``block_n`` (a multiple of 8) whose tiles fill 1..``MAX_WAVES`` waves, the
estimate ranks them beside ``CANDIDATES``; the kernel runs them through the register epilogue and through the TMA
epilogue's tail block of any multiple of 8 columns (``gemm_plan.TAIL_SWIZZLE``), validated in the CUDA emulator."""

from __future__ import annotations

import pytest

from tvm_cdna4.isa import hopper_layout as L
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.common import ceil_div
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_emit
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

H100 = DEVICES["H100"]


def test_the_widths_are_the_narrowest_that_fit_each_count_of_waves():
    # M = 768, N = 3584 on 132 SMs: 6 row tiles of 128, at most 22 column tiles in one wave: 3584 / 22 -> 168
    # (cuBLAS's 168x128 on the o / down projections, benchmarks/runs/peer_kernels_h100_2026-12-06f.json)
    widths = gemm_cost.wave_widths(768, 3584, 132)
    assert widths[0] == (128, 168, 2) and (128, 88, 2) in widths and (64, 112, 1) in widths
    for M, N, sms in ((768, 3584, 132), (3000, 4608, 132), (200, 7680, 132), (96, 37888, 132), (768, 3584, 108)):
        for bm, bn, consumers in gemm_cost.wave_widths(M, N, sms):
            assert (bm, consumers) in gemm_cost.WAVE_ROWS and bn % 8 == 0 and 64 <= bn <= 256
            assert (bm, bn, consumers) not in gemm_cost.CANDIDATES
            tiles = ceil_div(M, bm) * ceil_div(N, bn)
            waves = ceil_div(tiles, sms)
            assert waves <= gemm_cost.MAX_WAVES  # fits whole waves, and 8 columns narrower would not
            assert ceil_div(M, bm) * ceil_div(N, bn - 8) > waves * sms
    # from the device, not a table: 108 SMs (A100's count) fit 18 column tiles of 6 rows a wave: 3584 / 18 -> 200
    assert gemm_cost.wave_widths(768, 3584, 108)[0] == (128, 200, 2)
    assert gemm_cost.wave_widths(96, 3584, 132) == ()  # every fitting width is 64 or less: CANDIDATES' 64


def test_the_tile_efficiency_is_smooth_in_the_width():
    # per k-tile 4 bn tensor clocks against (256 + 3 bn) shared-memory clocks (128 rows), at most bn / 128 below
    # WGMMA_FULL_N; 64 rows: bn / (64 + bn): no step at the widths between the candidates
    eff = {(bm, bn): gemm_cost.efficiency(Sm90Config(bm, bn, 3, bm // 64)) / gemm_cost.TENSOR_EFFICIENCY
           for bm, bn in ((128, 168), (128, 72), (128, 216), (64, 112), (64, 104))}
    assert eff[(128, 168)] == pytest.approx(4 * 168 / (256 + 3 * 168)) == pytest.approx(0.8842, abs=1e-4)
    assert eff[(128, 216)] == pytest.approx(4 * 216 / (256 + 3 * 216))
    assert eff[(128, 72)] == pytest.approx(72 / 128)  # a narrow wgmma, not shared memory, bounds it
    assert eff[(64, 112)] == pytest.approx(112 / 176 * gemm_cost.ONE_CONSUMER)
    assert eff[(64, 104)] < eff[(64, 112)] < gemm_cost.efficiency(Sm90Config(64, 128, 3, 1)) / gemm_cost.TENSOR_EFFICIENCY


@pytest.mark.parametrize("shape, before, after", [
    ((768, 3584, 3584), 192, 168),   # Qwen2.5-7B o: 114 tiles of 192 (one wave) -> 132 of 168, each narrower
    ((768, 3584, 18944), 192, 168),  # Qwen2.5-7B down (cuBLAS: 168x128)
    ((768, 7680, 5120), 192, 176),   # Phi-3 qkv: 6 x 44 = 264 tiles, two waves (cuBLAS: 176x128)
    ((3000, 3584, 3584), 224, 224),  # 24 x 22 = 528 of 168 are four waves: three of 224 stay
])
def test_the_model_takes_a_wave_fitting_width_where_the_estimate_says(shape, before, after, monkeypatch):
    new = gemm_cost.choose_config(*shape, 2, H100)
    assert (new.block_m, new.block_n, new.consumers, new.epilogue) == (128, after, 2, "tma")
    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # CANDIDATES alone: the choice before
    old = gemm_cost.choose_config(*shape, 2, H100)
    assert old.block_n == before
    t_new, t_old = (gemm_cost.estimate(c, *shape, 2, H100).total for c in (new, old))
    assert t_new < t_old * 0.95 if after != before else t_new == t_old


def test_a_dynamic_bucket_weighs_the_widths_of_its_sampled_m():
    # 513..768: the widths of each sampled M (range_samples) are candidates, the minimax regret picks 168
    cfg = gemm_cost.choose_for_range(513, 768, 3584, 3584, 2, H100)
    assert (cfg.block_m, cfg.block_n, cfg.epilogue) == (128, 168, "tma")
    assert any((128, 168, 2) in gemm_cost.wave_widths(m, 3584, 132) for m in gemm_cost.range_samples(513, 768))


def test_the_tail_maps_of_the_new_widths():
    # 168 = 2 x 64 + 40: an unswizzled 40-column tail box; 80 = 64 + 16: a 32-byte swizzled one (mode 1)
    for block_n, tail, mode in ((168, 40, 0), (80, 16, 1)):
        p = gemm.plan(GemmProblem(768, 3584, 3584, "bf16", "nt", "bf16"), "sm90",
                      Sm90Config(128, block_n, 3, 2, epilogue="tma"))
        assert (p.config.tail_columns, L.TMA_SWIZZLE_MODE[p.config.tail_swizzle]) == (tail, mode)
        assert (f"tensormap_encode_tiled(mapCTail, C.ptr_to([0, 0]), 3584, 768, 7168, {tail}, 64, 1, 1, "
                f"descriptor_dtype='bfloat16', rank=2, swizzle={mode}") in gemm_emit.signature_source(p)


@pytest.mark.parametrize("problem, config", [
    # 168 columns (two whole blocks and a 40-column unswizzled tail), N = 296 (the second tile clipped inside its
    # tail), K = 136 (a partial last k-tile), ragged M
    (GemmProblem(77, 296, 136, "bf16", "nt", "bf16"), Sm90Config(128, 168, 2, 2, epilogue="tma")),
    # 104 columns (a 40-column tail) with the fused epilogue, the residual read by TMA through its tail map
    (GemmProblem(130, 200, 72, "bf16", "nt", "bf16", Fusion(bias=True, activation="silu", residual=True, col_scale=True)),
     Sm90Config(128, 104, 2, 2, epilogue="tma", residual_read="tma", activation_form="tanh")),
    # 80 columns: a 16-column tail, 32-byte swizzled; 64x72 from registers with one consumer
    (GemmProblem(77, 152, 72, "bf16", "nt", "bf16"), Sm90Config(128, 80, 2, 2, epilogue="tma")),
    (GemmProblem(77, 152, 72, "bf16", "nt", "bf16"), Sm90Config(64, 72, 2, 1)),
])
def test_the_emulator_validates_the_new_widths(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.ratio <= 1.0


@pytest.mark.slow  # a benchmark script's job list (5 s); its plans are the cost model's, tested beside
def test_the_sweep_times_the_new_choice_beside_the_old_and_cublas():
    import argparse

    from benchmark_modules import benchmark_module

    sweep = benchmark_module("sm90_sweep")
    args = argparse.Namespace(models="qwen2.5-7b", ms="768,3000", device="H100")
    jobs = {(key[1], key[2], key[5]): cfg for key, _, cfg in sweep.wave_jobs(args, H100)}
    assert jobs[("o", 768, "old=bucket-old")]["block_n"] == 192 and jobs[("o", 768, "new=bucket-new")]["block_n"] == 168
    assert not any(k[:2] == ("o", 3000) for k in jobs)  # one config for all four: nothing to compare (--all times it)
    table = "\n".join(sweep.wave_model_table(args))
    assert "| qwen2.5-7b | o | 768 | 3584 | 3584 | 128x192/2 tma 32.4 | 128x168/2 tma 30.0 |" in table


def test_the_sweeps_bucket_plan_is_the_torch_ops_of_the_refined_bucket():
    # Qwen2.5-7B's QKV at M = 3000: the coarse 2561..3072 is cut (gemm_dynamic.refined), and the bucket plan the sweep
    # times is the one the torch op runs (gemm_dynamic.plan_bucket), not the coarse bucket's 128x256
    from benchmark_modules import benchmark_module
    from tvm_cdna4.kernels.sm90 import gemm_dynamic

    sweep = benchmark_module("sm90_sweep")
    (_, cfg), bucket = sweep.model_choices(3000, 4608, 3584, H100)
    assert (bucket.lo, bucket.hi) == (2817, 3072) and (cfg.block_m, cfg.block_n) == (128, 216)
    assert cfg == gemm_dynamic.plan_bucket(bucket, 4608, 3584, "bf16", "nt", "bf16", Fusion(), H100).config
