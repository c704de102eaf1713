"""The persistent tile order (issue 36): the ``raster`` field, the DRAM-bytes model of an order (``gemm_order``), the
order the cost model takes where ``WEIGH_ORDER``, and the new orders validated in the CUDA emulator."""

from __future__ import annotations

import attrs
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_order
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

MIB = 2 ** 20
H100 = devices.DEVICES["H100"]
BIG = Sm90Config(128, 256, 3, 2, epilogue="tma")


def py_tiles(p):
    return [p.tile_of(t, lambda a, b: a // b, lambda a, b: a % b, min) for t in range(p.units)]


def test_a_raster_outside_the_two_is_refused_naming_it():
    with pytest.raises(ContractError) as e:
        gemm.plan(GemmProblem(256, 256, 64, "bf16", "nt", "f32"), "sm90", Sm90Config(128, 128, 2, 2, raster="k"))
    assert e.value.operand == "raster" and e.value.expected == ("m", "n") and e.value.found == "'k'"


def test_the_grouped_kernel_refuses_the_n_raster():
    from tvm_cdna4.kernels.sm90.grouped_plan import check_grouped_config

    with pytest.raises(ContractError, match="sm90 grouped GEMM config raster") as e:
        check_grouped_config(Sm90Config(raster="n"))
    assert e.value.operand == "raster" and e.value.found == "'n'"


def test_the_raster_is_an_sm90_option_replacing_the_field():
    problem = GemmProblem(4096, 4096, 4096, "bf16", "nt", "bf16")
    cfg = gemm.config_from_options(problem, "sm90", group_m=16, raster="n")
    assert (cfg.group_m, cfg.raster) == (16, "n")
    with pytest.raises(ValueError, match="--raster"):
        gemm.config_from_options(problem, "sm80", raster="n")


def test_the_n_raster_walks_group_m_tile_columns_along_n_and_visits_every_tile_once():
    p = gemm.plan(GemmProblem(1000, 1000, 64, "bf16", "nt", "f32"), "sm90", Sm90Config(128, 128, 2, 2, group_m=3,
                                                                                        raster="n"))
    seen = py_tiles(p)
    assert sorted(seen) == [(m, n) for m in range(8) for n in range(8)]
    assert seen[:5] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]   # three columns along N, then the next tile row
    assert seen[24:27] == [(0, 3), (0, 4), (0, 5)]                 # the second group of three columns
    assert seen[-2:] == [(7, 6), (7, 7)]                           # the last group: the two columns left


def test_a_cluster_in_the_n_raster_keeps_its_pair_of_rows_on_one_column():
    p = gemm.plan(GemmProblem(300, 500, 64, "bf16", "nt", "f32"), "sm90", Sm90Config(64, 64, 2, 1, group_m=2,
                                                                                      cluster_m=2, raster="n"))
    seen = py_tiles(p)  # 5 tile rows in 3 pairs (the last pair's second row past M), 8 columns
    assert seen[:6] == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0)]
    assert sorted(seen) == [(m, n) for m in range(6) for n in range(8)]


@pytest.mark.parametrize("cfg, shape", [
    (Sm90Config(64, 64, 2, 1, group_m=3), (1000, 700)),
    (Sm90Config(64, 64, 2, 1, group_m=3, raster="n"), (1000, 700)),
    (Sm90Config(64, 64, 2, 1, group_m=4, cluster_m=2), (900, 500)),
    (Sm90Config(64, 64, 2, 1, group_m=2, cluster_m=2, raster="n"), (900, 500)),
    (Sm90Config(64, 64, 2, 1, group_m=64), (700, 300)),
])
def test_the_wave_panels_counted_by_groups_are_the_tiles_the_kernel_walks(cfg, shape):
    p = gemm.plan(GemmProblem(*shape, 64, "bf16", "nt", "f32"), "sm90", cfg)
    tiles = py_tiles(p)
    for ctas in ((7, 12, 40) if cfg.cluster_m == 1 else (8, 12, 40)):  # a cluster's grid: whole clusters
        for lo in range(0, p.units, ctas):
            wave = [t for t in tiles[lo:lo + ctas] if t[0] < p.tiles_m]
            got = gemm_order.tile_panels(cfg, p.tiles_m, p.tiles_n, lo, min(p.units, lo + ctas))
            assert got == ({r for r, _ in wave}, {c for _, c in wave}), (ctas, lo)


def test_4096_cubed_reads_a_and_b_178_mib_in_groups_of_8_and_142_in_groups_of_16():
    """By hand: 32 x 16 tiles of 128x256, A panels 1 MiB, B panels 2 MiB, 4 waves of 132; every wave's panels
    (34-48 MiB) exceed the 25 MiB one wave can use, so each wave reads its own. group_m 8: 12 rows + 16 columns,
    16 + 16, 16 + 16, 8 + 15 -> 44 + 48 + 48 + 38 = 178 MiB. group_m 16: 16 + 9, 24 + 9, 16 + 9, 16 + 8 -> 34 + 42 +
    34 + 32 = 142 MiB (the floor: 64 MiB). ncu measured 215 MB of DRAM at group_m 8, C's 33.6 MB among them."""
    def mib(g, raster="m"):
        return gemm_order.order_bytes(attrs.evolve(BIG, group_m=g, raster=raster), 4096, 4096, 4096, 132,
                                      H100.l2_bytes) / MIB
    assert (mib(8), mib(16)) == (178, 142)
    assert gemm_order.L2_SHARE * H100.l2_bytes == 25 * MIB
    assert mib(8) * MIB + 4096 * 4096 * 2 == pytest.approx(215e6, rel=0.03)
    # the best of the orders weighed: 16 rows a group (16 x 8.25 tiles a wave, the squarest)
    best = gemm_order.best_order(BIG, 4096, 4096, 4096, 132, H100.l2_bytes)
    assert (best.group_m, best.raster) == (16, "m") and mib(16) == min(
        mib(g, r) for g in (1, 2, 4, 8, 16, 32) for r in "mn")


def test_waves_whose_panels_fit_the_l2_read_a_and_b_once():
    # K = 1024: a wave's 12 A panels of 256 KiB and 16 B panels of 512 KiB (11 MiB) fit; the next wave keeps them
    assert gemm_order.order_bytes(BIG, 4096, 4096, 1024, 132, H100.l2_bytes) == (4096 + 4096) * 1024 * 2
    # a ragged last tile row and column count their own rows; one wave reads each panel once
    assert gemm_order.order_bytes(Sm90Config(128, 128, 2, 2), 300, 200, 64, 132, H100.l2_bytes) == (300 + 200) * 64 * 2


def test_a_tie_keeps_the_configs_own_order_and_a_split_keeps_its_order():
    one_wave = gemm_order.best_order(BIG, 768, 4096, 4096, 132, H100.l2_bytes)   # 6 x 16 tiles: one wave
    assert one_wave == BIG
    split = Sm90Config(128, 256, 3, 2, split_k=2)
    assert gemm_order.best_order(split, 4096, 4096, 4096, 132, H100.l2_bytes) is split


def test_the_cost_model_weighs_the_order_only_where_asked(monkeypatch):
    off = gemm_cost.ranked(4096, 4096, 4096, 2, H100)[0]
    assert off[1].group_m == 8 and off[1].raster == "m"
    monkeypatch.setattr(gemm_order, "WEIGH_ORDER", True)
    on = gemm_cost.ranked(4096, 4096, 4096, 2, H100)[0]
    assert on[1] == attrs.evolve(off[1], group_m=16)
    # at 4096^3 the estimate's memory term is one SM's streaming bound (83 us), above the order's HBM time (82 us in
    # groups of 8, 68 in groups of 16): the estimate stays; the order's bytes show where HBM bounds it
    assert on[0] == off[0]
    slow = attrs.evolve(H100, hbm_bytes_s=H100.hbm_bytes_s / 4)
    est = gemm_cost.estimate(on[1], 4096, 4096, 4096, 2, slow)
    monkeypatch.setattr(gemm_order, "WEIGH_ORDER", False)
    floor = gemm_cost.estimate(on[1], 4096, 4096, 4096, 2, slow)
    rate = slow.hbm_bytes_s * gemm_cost.HBM_EFFICIENCY
    assert est.memory == pytest.approx((142 * MIB + 4096 * 4096 * 2) / rate)
    assert floor.memory == pytest.approx((64 * MIB + 4096 * 4096 * 2) / rate)


@pytest.mark.parametrize("problem, config", [
    # the n raster: groups of 2 tile columns along N, two CTAs walking 3 x 3 ragged tiles
    (GemmProblem(150, 140, 64, "bf16", "nt", "f32"), Sm90Config(64, 64, 2, 1, group_m=2, ctas=2, raster="n")),
    # one group of every tile row (group_m past the tile rows), the TMA epilogue
    (GemmProblem(130, 128, 64, "f16", "nt", "f16"), Sm90Config(64, 64, 2, 1, group_m=32, ctas=3, epilogue="tma")),
    # a cluster of two in the n raster: pairs of rows on one column
    (GemmProblem(100, 130, 64, "bf16", "nt", "f32"), Sm90Config(64, 64, 2, 1, group_m=2, cluster_m=2, raster="n")),
])
def test_the_emulator_validates_the_new_orders(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.ratio <= 1.0


def test_the_benchmark_times_each_order_whose_modelled_bytes_differ_beside_its_bytes():
    import argparse

    from benchmark_modules import benchmark_module

    bench = benchmark_module("sm90_order")
    args = argparse.Namespace(models="qwen2.5-7b", ms="3000", square=True, model_only=True, device="H100",
                              ranks=("g16", "model"))
    todo, modelled = bench.order_jobs(args)
    square = {key[2]: (bench.order_of(cfg), modelled[key]) for key, _, cfg in todo if key[0] == "4096^3"}
    # the model's order is g16's (142 MiB): timed once, as g16
    assert square == {"g8": ("m8", 186.6), "g4": ("m4", 180.4), "g16": ("m16", 148.9), "n8": ("n8", 153.1)}
    rows = [dict(shape="4096^3", M=4096, rank=rank, ok=True, us=us, cublas_us=180.0, mb=mb,
                 config=dict(block_m=128, block_n=256, stages=3, epilogue="tma", raster="m", group_m=g))
            for rank, us, mb, g in (("g8", 190.0, 186.6, 8), ("g16", 176.0, 148.9, 16))]
    table = bench.summary(rows)
    assert "| 4096^3 | 4096 | 128x256 s3 tma | g16 | m16 | 148.9 | 176.0 | 180.0 | 1.080 | 1.023 |" in table
    assert table[-1] == "| g16 | 1 | 1.080 |"


def test_the_emulator_validates_a_dynamic_m_kernel_in_the_n_raster():
    """The run-time tile rows (``tiles_m`` an expression of M) are the n raster's other dimension."""
    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.kernels.gemm import random_inputs
    from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
    from tvm_cdna4.kernels.sm90 import gemm_target
    from tvm_cdna4.kernels.sm90.gemm_plan import plan

    p = plan(MBucket(1, 256), 136, 64, "bf16", "nt", "f32", Sm90Config(64, 64, 2, 1, group_m=2, ctas=2, raster="n"),
             132, 232448)
    data = random_inputs(GemmProblem(130, 136, 64, "bf16", "nt", "f32"), 130)
    c = data.output()
    emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
    assert data.ratio(c) <= 1.0


def test_a_clustered_candidate_in_groups_of_16_rows_reads_what_the_unclustered_one_does(monkeypatch):
    monkeypatch.setattr(gemm_order, "WEIGH_ORDER", True)
    two = next(c for _, c in gemm_cost.ranked(4096, 4096, 4096, 2, H100, cluster=True) if c.cluster_m == 2)
    # pairs of rows in groups of group_m // 2 pairs: the 16-row groups' bytes (142 MiB), as unclustered
    assert (two.group_m, two.raster) == (16, "m")
    assert gemm_order.order_bytes(two, 4096, 4096, 4096, 132, H100.l2_bytes) == 142 * MIB


@pytest.mark.parametrize("problem, config", [
    # the n raster's tiles through a K split's workspace and tickets (3 x 4 tiles, 2 slices, 3 CTAs)
    (GemmProblem(130, 200, 128, "bf16", "nt", "f32"),
     Sm90Config(64, 64, 2, 1, group_m=2, ctas=3, raster="n", split_k=2, decomposition="split-k")),
    # a hybrid in the n raster: 3 x 4 tiles on 5 CTAs, two whole waves, the last two tiles in 2 K slices
    pytest.param(GemmProblem(150, 200, 128, "bf16", "nt", "f32"),
                 Sm90Config(64, 64, 2, 1, group_m=2, ctas=5, raster="n", split_k=2, decomposition="hybrid"),
                 marks=pytest.mark.slow),
])
def test_the_emulator_validates_a_k_split_in_the_n_raster(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.ratio <= 1.0


def test_the_emulator_validates_a_dynamic_m_cluster_in_the_n_raster_past_m():
    """M = 63: one tile row counted at launch, its pair's second row past M (loads zero, stores clipped), the two
    CTAs of each cluster on one tile column of three."""
    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.kernels.gemm import random_inputs
    from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
    from tvm_cdna4.kernels.sm90 import gemm_target
    from tvm_cdna4.kernels.sm90.gemm_plan import plan

    p = plan(MBucket(1, 320), 136, 64, "bf16", "nt", "f32", Sm90Config(64, 64, 2, 1, group_m=2, cluster_m=2,
                                                                     raster="n"), 132, 232448)
    data = random_inputs(GemmProblem(63, 136, 64, "bf16", "nt", "f32"), 63)
    c = data.output()
    emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
    assert data.ratio(c) <= 1.0
