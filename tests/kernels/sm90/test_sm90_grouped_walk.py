"""The sm90 grouped GEMM's walks over its row tiles (``Sm90Config.tile_walk``, docs/grouped_gemm.md "The walk over
the row tiles"): the prefix walk's tiles and search (every row of every group in exactly one unit), the kernel in the
CUDA emulator on skewed groups (an empty group, odd N and K, the TMA epilogue), bad offsets kept inside C, the plan's
shared memory and refusals, the cost model's choice, and the gaps walk's generated code pinned (unchanged)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.gemm.grouped import expected_row_tiles, offsets_of
from tvm_cdna4.kernels.sm90 import gemm_cost
from tvm_cdna4.kernels.sm90.gemm_plan import PREFIX_WORDS, Sm90Config, prefix_bytes
from tvm_cdna4.kernels.sm90.grouped_plan import prefix_locate, prefix_tiles

EMULATOR = "the CUDA emulator (no GPU runner)"


@pytest.mark.parametrize("sizes, block_m", [([9, 0, 130, 5], 128), ([0, 0, 64, 65, 1, 0, 300], 64), ([7], 64)])
def test_the_prefix_walk_finds_every_row_once(sizes, block_m):
    offsets = offsets_of(sizes)
    prefix = prefix_tiles(offsets, block_m)
    assert prefix[-1] == sum(math.ceil(s / block_m) for s in sizes)  # the units with rows, no gap tile
    seen = np.zeros(sum(sizes), int)
    for r in range(prefix[-1]):
        g, m0, m_end = prefix_locate(r, offsets, prefix, block_m)
        assert offsets[g] <= m0 < m_end == offsets[g + 1]  # a tile of the group that holds rows
        seen[m0:min(m0 + block_m, m_end)] += 1
    assert (seen == 1).all()


@pytest.mark.parametrize("problem, config, sizes", [
    # one consumer over 2 CTAs, an empty group, a group across two row tiles, one of 5 rows; N and K not tile
    # multiples (K: 2 k-tiles, the second partial), 2 stages
    (GemmProblem(None, 40, 72, "bf16", "nt", "f32", groups=4), Sm90Config(64, 64, 2, 1, ctas=2, tile_walk="prefix"),
     [9, 0, 70, 5]),
    # TMA stores (group 1's second tile split inside: warpgroup 0 by TMA, 1 from registers), the per-group bias
    (GemmProblem(None, 128, 64, "bf16", "nt", "bf16", Fusion(bias=True), groups=3),
     Sm90Config(128, 128, 2, 2, epilogue="tma", epilogue_tile=64, tile_walk="prefix"), [0, 200, 64]),
])
def test_the_emulator_validates_the_prefix_walk(problem, config, sizes):
    p = gemm.plan(problem, "sm90", config, m=sum(sizes))
    assert p.smem_bytes == config.stages * config.stage_bytes() + config.staging_bytes() + 4 * PREFIX_WORDS * (len(sizes) + 1)
    v = gemm.validate(problem, "sm90", config, group_rows=sizes)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.parametrize("offsets, rows", [
    ([0, 50, 60, 70], {0: (0, 40)}),            # past T: group 0's rows end at T, groups 1 and 2 start past it
    ([0, 7, 90, 40], {0: (0, 7), 1: (7, 40)}),  # decreasing: group 2 has no tiles (90 .. 40)
])
@pytest.mark.parametrize("walk", ["prefix", "windows"])
def test_bad_offsets_never_write_outside_c_in_the_prefix_walk(offsets, rows, walk):
    """Offsets past T or decreasing: the prefix counts tiles the launch may not reach and tiles past T, yet every
    access stays inside A, B and C (the emulator checks each) and the rows of the groups with rows are right."""
    import ml_dtypes

    from tvm_cdna4.emulator import emulate

    G, N, K, T = 3, 24, 64, 40
    grp = gemm.build(GemmProblem(None, N, K, "bf16", "nt", "f32", groups=G), "sm90",
                     Sm90Config(64, 64, 2, 1, tile_walk=walk))
    rng = np.random.default_rng(5)
    a = (rng.integers(-4, 5, (T, K)) / 8).astype(ml_dtypes.bfloat16)
    b = (rng.integers(-4, 5, (G, N, K)) / 8).astype(ml_dtypes.bfloat16)
    c = np.full((T, N), np.nan, np.float32)
    emulate(grp.primfunc(T), a, b, c, np.asarray(offsets, np.int32), target="sm90")
    want = np.full((T, N), np.nan, np.float32)
    for g, (lo, hi) in rows.items():
        want[lo:hi] = a[lo:hi].astype(np.float64) @ b[g].astype(np.float64).T
    assert np.array_equal(c, want, equal_nan=True)


def test_the_prefix_walk_plan_and_refusals():
    dev = devices.DEVICES["H100"]
    problem = GemmProblem(None, 256, 128, "bf16", "nt", "bf16", groups=128)
    p = gemm.plan(problem, "sm90", Sm90Config(128, 128, 2, 2, tile_walk="prefix"), m=4096)
    assert p.smem_bytes == 2 * Sm90Config(128, 128).stage_bytes() + prefix_bytes(128, "prefix") == 65536 + 1032
    assert p.prefix_at * 2 == 65536  # after the ring (no staging with register stores)
    with pytest.raises(ContractError) as e:  # the dense GEMM has one walk
        gemm.plan(GemmProblem(256, 256, 128, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 128, 2, 2, tile_walk="prefix"))
    assert e.value.operand == "tile_walk" and e.value.check == "parameters"
    with pytest.raises(ContractError) as e:
        gemm.plan(problem, "sm90", Sm90Config(128, 128, 2, 2, tile_walk="sorted"), m=4096)
    assert e.value.operand == "tile_walk"
    # the ring (128 KB) and the prefix of 2^14 groups (128 KB of words) past the SM's shared memory
    deep = Sm90Config(128, 128, 4, 2, tile_walk="prefix")
    with pytest.raises(ContractError) as e:
        gemm.plan(GemmProblem(None, 256, 128, "bf16", "nt", "bf16", groups=16384), "sm90", deep, m=16384)
    assert e.value.operand == "stages" and "prefix walk" in str(e.value)
    assert 4 * deep.stage_bytes() + 1024 <= dev.smem_per_unit  # the ring alone fits


def test_the_cost_model_walks_the_prefix_and_charges_the_gaps():
    dev = devices.DEVICES["H100"]
    # Qwen3-30B-A3B gate/up at 2048 tokens (128 rows per group): the choice walks the prefix
    choice = gemm_cost.choose_grouped(128, 128, 1536, 2048, 2, dev)
    assert choice.tile_walk == "prefix" == gemm_cost.GROUPED_WALK
    assert {c.tile_walk for c in gemm_cost.grouped_configs(2048, 1536, 2, dev, groups=128)} == {"prefix"}
    # the gaps walk: its launched row tiles (rows / block_m + 1 a group), the prefix walk's expected ones
    gaps = Sm90Config(128, 256, 4, 2)
    prefix = Sm90Config(128, 256, 4, 2, tile_walk="prefix")
    for cfg, per_group in ((gaps, 128 / 128 + 1), (prefix, expected_row_tiles(128, 128))):
        want = gemm_cost.estimate(cfg, math.ceil(128 * per_group) * 128, 1536, 2048, 2, dev, "bf16", 128)
        assert gemm_cost.grouped_estimate(cfg, 128, 128, 1536, 2048, 2, dev) == want
    assert (gemm_cost.grouped_estimate(gaps, 128, 128, 1536, 2048, 2, dev).compute
            > gemm_cost.grouped_estimate(prefix, 128, 128, 1536, 2048, 2, dev).compute)


def test_the_gaps_walks_code_is_unchanged():
    """The gaps walk's kernel (every grouped plan before the prefix walk) is the one it was: its TIR's digest."""
    problem = GemmProblem(None, 40, 136, "bf16", "nt", "f32", groups=4)
    script = gemm.emit(gemm.plan(problem, "sm90", Sm90Config(128, 64, 2, 2, ctas=2), m=144)).script()
    assert hashlib.sha256(script.encode()).hexdigest() == "c34ab1c27d734583eae634f41a926ac479f954105ab36ab86f4dffe337709e66"
    # the prefix walk's (the cost model's configs) beside the windows walk: unchanged by it (stop 53)
    script = gemm.emit(gemm.plan(problem, "sm90", Sm90Config(128, 64, 2, 2, ctas=2, tile_walk="prefix"), m=144)).script()
    assert hashlib.sha256(script.encode()).hexdigest() == "46de57ca820805a62692c716ab8b674cd3f8b83b467312f456bd3341fa165790"


def test_the_walks_benchmark_plans_old_and_new_and_counts_the_busiest_cta():
    """benchmarks/grouped_sm90_sweep.py --walks: the torch op's old plan (gaps walk) and new plan (prefix walk) of a
    shape, and the busiest CTA's units on each walk (the arithmetic of docs/grouped_gemm.md)."""
    import sys

    import attrs
    from paths import TESTS

    sys.path.insert(0, str(TESTS))
    from benchmark_modules import benchmark_module

    sweep = benchmark_module("grouped_sm90_sweep")
    plans = dict(sweep.walk_configs(128, 1536, 2048, 16384))  # Qwen3-30B-A3B gate/up at 2048 tokens
    old, new = plans["old plan"], plans["new plan"]
    assert (old.tile_walk, new.tile_walk) == ("gaps", "prefix") and attrs.evolve(old, tile_walk="prefix") == new
    assert plans[sweep.DENSE] == attrs.evolve(new, tile_walk="gaps")  # the per-unit reference: the dense kernel
    # groups of 9, 0, 130 and 5 rows in 128-row tiles, one column, two CTAs: the gaps walk's five row tiles are
    # g0's, the empty g1's gap, g2's two, g3's; CTA 0 takes units 0, 2, 4 (three with rows), CTA 1 units 1, 3 (one)
    gaps = Sm90Config(128, 64, 2, 2)
    assert sweep.busiest_units([9, 0, 130, 5], 4, 64, gaps, 2) == (3, 2.0)
    assert sweep.busiest_units([9, 0, 130, 5], 4, 64, attrs.evolve(gaps, tile_walk="prefix"), 2) == (2, 2.0)


@pytest.mark.slow
def test_the_prefix_walk_with_more_groups_than_threads():
    """300 groups over a CTA of 256 threads (two rounds of the offsets' copy, 38 steps of the sum), four with rows
    (one of 70 rows across two tiles), three CTAs: every row right in the emulator."""
    sizes = [0] * 300
    sizes[0], sizes[137], sizes[255], sizes[299] = 3, 70, 1, 9
    problem = GemmProblem(None, 24, 64, "bf16", "nt", "f32", groups=300)
    v = gemm.validate(problem, "sm90", Sm90Config(64, 64, 2, 1, ctas=3, tile_walk="prefix"), group_rows=sizes)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


def test_a_one_consumer_grouped_tile_keeps_its_share_of_the_compute_rate():
    dev = devices.DEVICES["H100"]
    cfg = Sm90Config(64, 256, 5, 1, tile_walk="prefix")
    dense = gemm_cost.estimate(cfg, math.ceil(128 * expected_row_tiles(128, 64)) * 64, 1536, 2048, 2, dev, "bf16", 128)
    got = gemm_cost.grouped_estimate(cfg, 128, 128, 1536, 2048, 2, dev)
    assert got.compute == pytest.approx(dense.compute / gemm_cost.GROUPED_ONE_CONSUMER, rel=1e-12)
    assert (got.memory, got.fill, got.epilogue) == (dense.memory, dense.fill, dense.epilogue)
    two = Sm90Config(128, 256, 4, 2, tile_walk="prefix")  # two consumers: the dense estimate's compute
    dense = gemm_cost.estimate(two, math.ceil(128 * expected_row_tiles(128, 128)) * 128, 1536, 2048, 2, dev, "bf16", 128)
    assert gemm_cost.grouped_estimate(two, 128, 128, 1536, 2048, 2, dev).compute == dense.compute


# benchmarks/runs/grouped_sm90_walks_h100_2026-12-06g.json (H100, prefix walk): (G, N, K, rows per group) and its
# timed configs, fastest first, µs
TIMED = [
    # Qwen3-30B-A3B down at 2048 tokens
    ((128, 2048, 768, 128), [(Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, tile_walk="prefix"), 194.7),
                             (Sm90Config(64, 256, 5, 1, tile_walk="prefix"), 216.7),
                             (Sm90Config(64, 128, 8, 1, tile_walk="prefix"), 217.0)]),
    # Qwen3-30B-A3B gate/up at 2048 tokens
    ((128, 1536, 2048, 128), [(Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, tile_walk="prefix"), 400.3),
                              (Sm90Config(64, 256, 5, 1, tile_walk="prefix"), 409.6)]),
    # Mixtral-8x7B gate/up at 2048 tokens
    ((8, 28672, 4096, 512), [(Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, tile_walk="prefix"), 1853.9),
                             (Sm90Config(128, 256, 3, 2, epilogue="tma", tile_walk="prefix"), 1949.6)]),
]


@pytest.mark.parametrize("shape,timed", TIMED, ids=["qwen3-down", "qwen3-gate_up", "mixtral-gate_up"])
def test_the_grouped_ranking_puts_the_measured_best_first(shape, timed):
    """The H100's fastest of each shape's timed configs is the one the grouped ranking puts first among them, and
    the model's first config overall (``GROUPED_ONE_CONSUMER``: docs/grouped_gemm.md, "The estimate against the
    walks run")."""
    G, N, K, rows = shape
    dev = devices.DEVICES["H100"]
    ranked = [cfg for _, cfg in gemm_cost.grouped_ranked(rows, G, N, K, 2, dev)]
    assert all(cfg in ranked for cfg, _ in timed)
    assert sorted((cfg for cfg, _ in timed), key=ranked.index)[0] == timed[0][0] == ranked[0]


@pytest.mark.parametrize("sizes, block_m, tiles_n, group_m", [
    ([9, 0, 330, 5], 64, 3, 2), ([0, 0, 64, 65, 1, 0, 300], 64, 2, 4), ([7], 64, 5, 8), ([274, 1328, 340, 782], 128, 7, 8)])
def test_the_windows_walk_keeps_each_window_inside_its_group(sizes, block_m, tiles_n, group_m):
    """The windows walk (``tile_walk="windows"``): every row and column of every group in exactly one unit, a group's
    units consecutive (``prefix[g] tiles_n ..``), and each window of ``group_m`` row tiles within one group, where the
    prefix walk's windows span two groups' weights (units of two groups in one window)."""
    from tvm_cdna4.kernels.sm90.gemm_plan import grouped_index
    from tvm_cdna4.kernels.sm90.grouped_plan import window_locate

    offsets = offsets_of(sizes)
    prefix = prefix_tiles(offsets, block_m)
    seen = np.zeros((sum(sizes), tiles_n), int)
    groups_of = []
    for u in range(prefix[-1] * tiles_n):
        g, m0, m_end, col = window_locate(u, offsets, prefix, block_m, tiles_n, group_m)
        assert offsets[g] <= m0 < m_end == offsets[g + 1] and prefix[g] * tiles_n <= u < prefix[g + 1] * tiles_n
        seen[m0:min(m0 + block_m, m_end), col] += 1
        groups_of.append(g)
    assert (seen == 1).all() and groups_of == sorted(groups_of)
    per_window = group_m * tiles_n  # the prefix walk's windows over all row tiles: groups met by one window
    spans = {u // per_window: set() for u in range(prefix[-1] * tiles_n)}
    for u in range(prefix[-1] * tiles_n):
        r = grouped_index(u, prefix[-1], tiles_n, group_m, lambda a, b: a // b, lambda a, b: a % b, min)[0]
        spans[u // per_window].add(prefix_locate(r, offsets, prefix, block_m)[0])
    assert (max(map(len, spans.values())) > 1) == (len([s for s in sizes if s]) > 1)


@pytest.mark.parametrize("problem, config, sizes", [
    # skewed groups: an empty one, one of 1 row, one across three row tiles (windows of 2: one of 2 tiles, one of 1);
    # N and K not tile multiples (two tile columns, the second of 8); one consumer over 2 CTAs. The units' order is
    # not the prefix walk's (its windows of 2 row tiles span groups 0 and 2, 2 and 3)
    pytest.param(GemmProblem(None, 72, 72, "bf16", "nt", "f32", groups=5),
                 Sm90Config(64, 64, 2, 1, ctas=2, group_m=2, tile_walk="windows"), [9, 0, 140, 1, 70],
                 marks=pytest.mark.slow),  # the windows walk is opt-in: suite time
    # TMA stores, the per-group bias, two tile columns (N = 136: the second of 8 columns), a group's last tile split
    pytest.param(GemmProblem(None, 136, 64, "bf16", "nt", "bf16", Fusion(bias=True), groups=3),
                 Sm90Config(128, 128, 2, 2, epilogue="tma", epilogue_tile=64, group_m=2, tile_walk="windows"),
                 [70, 200, 64], marks=pytest.mark.slow),  # the windows walk is opt-in (timed level with the prefix)
])
def test_the_emulator_validates_the_windows_walk(problem, config, sizes):
    p = gemm.plan(problem, "sm90", config, m=sum(sizes))
    assert p.smem_bytes == config.stages * config.stage_bytes() + config.staging_bytes() + prefix_bytes(len(sizes), "windows")
    v = gemm.validate(problem, "sm90", config, group_rows=sizes)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


def test_the_windows_walk_is_the_grouped_choice_only_behind_its_flag(monkeypatch):
    """``gemm_cost.GROUPED_WALK``: the prefix walk by default (the Mixtral-8x7B plans as they were); "windows" moves
    only the walk of the configs, estimated alike (the same units with rows)."""
    import attrs

    dev = devices.DEVICES["H100"]
    before = gemm_cost.choose_grouped(512, 8, 28672, 4096, 2, dev)
    assert before.tile_walk == "prefix" == gemm_cost.GROUPED_WALK
    monkeypatch.setattr(gemm_cost, "GROUPED_WALK", "windows")
    after = gemm_cost.choose_grouped(512, 8, 28672, 4096, 2, dev)
    assert after == attrs.evolve(before, tile_walk="windows")
    assert (gemm_cost.grouped_estimate(after, 512, 8, 28672, 4096, 2, dev)
            == gemm_cost.grouped_estimate(before, 512, 8, 28672, 4096, 2, dev))
