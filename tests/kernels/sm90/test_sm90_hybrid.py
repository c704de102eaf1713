"""The hybrid decomposition on sm90 (``Sm90Config.decomposition="hybrid"``: the full waves of tiles unsplit, the
tiles of the last, partial wave in ``split_k`` K slices through the split-K workspace): the config's rules, the
plan's units and ring positions, the cost model's term and choice, plans validated in the CUDA emulator (a
ragged problem whose last wave is split, the fused epilogue, dynamic M) and on a Hopper GPU."""

from __future__ import annotations

import json

import attrs
import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost
from tvm_cdna4.kernels.sm90.gemm_emit import emit
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan

H100 = devices.DEVICES["H100"]
EMULATOR = "the CUDA emulator (no GPU runner)"


def q(a, b):
    return a // b


def r(a, b):
    return a % b


def test_the_decomposition_defaults_from_split_k_and_is_in_the_plans_json():
    assert Sm90Config().decomposition == "data-parallel"
    assert Sm90Config(split_k=3).decomposition == "split-k"
    p = plan(3000, 3584, 18944, "bf16", "nt", "bf16", Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=3,
             decomposition="hybrid"), H100.units, H100.smem_per_unit)
    assert json.loads(p.to_json())["config"]["decomposition"] == "hybrid"


@pytest.mark.parametrize("cfg, found", [
    (Sm90Config(split_k=2, decomposition="stream-k"), ("stream-k", 2)),   # not (yet) a decomposition
    (Sm90Config(decomposition="hybrid"), ("hybrid", 1)),                 # hybrid without slices
    (Sm90Config(decomposition="split-k"), ("split-k", 1)),
    (Sm90Config(split_k=2, decomposition="data-parallel"), ("data-parallel", 2)),
    (Sm90Config(128, 128, 4, 2, schedule="pingpong", split_k=2, decomposition="hybrid"), ("hybrid", "pingpong")),
])
def test_a_bad_decomposition_is_refused_naming_the_field(cfg, found):
    with pytest.raises(ContractError) as e:
        plan(256, 256, 1024, "bf16", "nt", "f32", cfg, H100.units, H100.smem_per_unit)
    assert (e.value.operand, e.value.check, e.value.found) == ("decomposition", "parameters", found)


def test_only_the_last_waves_tiles_are_split():
    # M = 3000, N = 3584: 24 x 14 = 336 tiles of 128x256 on 132 SMs: two full waves (264 tiles) whole, the last
    # 72 tiles in 3 slices of 99 of the 296 k-tiles each: 480 units, every CTA 2 whole tiles then 1-2 slices
    cfg = Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=3, decomposition="hybrid")
    p = plan(3000, 3584, 18944, "bf16", "nt", "bf16", cfg, H100.units, H100.smem_per_unit)
    assert (p.tiles, p.ctas, p.waves, p.dp_tiles, p.units, p.slice_tiles) == (336, 132, 2, 264, 480, 99)
    assert [p.unit_of(u, q, r) for u in (0, 263, 264, 265, 266, 267, 479)] == [
        (0, 0), (0, 263), (0, 264), (1, 264), (2, 264), (0, 265), (2, 335)]
    # each CTA's split units: pid, pid + 132 below the 216 (Sm90Plan.split_unit), after its two whole tiles
    assert p.split_units == 216 and p.split_unit(132 + 5, q, r) == (2, 264 + 45)
    # sm80's workspace protocol, as split-K sizes it
    assert [(x.name, x.shape) for x in p.params[3:]] == [("W", (3, 3000, 3584)), ("S", (336 * 2,))]
    # a grid of whole waves only has nothing to split: the hybrid is the data-parallel plan's units
    whole = plan(128 * 12, 256 * 11, 4096, "bf16", "nt", "bf16", cfg, H100.units, H100.smem_per_unit)
    assert (whole.tiles, whole.waves, whole.units) == (132, 1, 132)
    assert [whole.unit_of(u, q, r) for u in (0, 131)] == [(0, 0), (0, 131)]


WHOLE_BLOCKS = tuple(c for c in gemm_cost.CANDIDATES if c[1] % 64 == 0)
"""The candidate tiles of whole 64-column widths: the hybrid's weighing among them (the 224-column tile leaves no
partial last wave on the shapes below: tests/kernels/sm90/test_sm90_tile_widths.py)."""


def test_the_cost_model_splits_only_the_last_wave_and_chooses_it_where_it_gains(monkeypatch):
    monkeypatch.setattr(gemm_cost, "WEIGH_HYBRID", True)  # weighed once timed (gemm_cost.WEIGH_HYBRID)
    monkeypatch.setattr(gemm_cost, "CANDIDATES", WHOLE_BLOCKS)
    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # nor the wave-fitting widths (gemm_cost.wave_widths)
    cfg = Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=3, decomposition="hybrid")
    plain = Sm90Config(128, 256, 3, 2, epilogue="tma")
    h, d = (gemm_cost.estimate(c, 3000, 3584, 18944, 2, H100) for c in (cfg, plain))
    # the busiest CTA: 2 whole tiles (of 3) and one slice of 99 k-tiles (of 296), 72 x 3 = 216 slices on 132 SMs
    assert h.compute == pytest.approx(d.compute * (2 * 296 + 2 * 99) / (3 * 296))
    # the reduction term of the 72 split tiles' partials only (gemm_cost.reduction over 72 x 128 rows)
    assert h.reduction == pytest.approx(gemm_cost.reduction(cfg, 72 * 128, 256, 1, H100)) and d.reduction == 0
    assert h.epilogue == d.epilogue  # each tile's C stored once: 3 per CTA either way
    # the model's choice: 4% below plain; its last tile row (56 of 128 tokens) shallow: shifted (gemm_shift.SHIFT_TMA)
    assert gemm_cost.choose_config(3000, 3584, 18944, 2, H100) == attrs.evolve(cfg, shift_last=True)
    # weighed past a full wave with a partial last one only (fewer tiles: split-K; whole waves: nothing to split)
    assert gemm_cost.decompositions(336, 132, (1, 2, 3)) == ((1, "data-parallel"), (2, "hybrid"), (3, "hybrid"))
    assert gemm_cost.decompositions(264, 132, (1, 2)) == ((1, "data-parallel"),)
    assert gemm_cost.decompositions(28, 132, (1, 2)) == ((1, "data-parallel"), (2, "split-k"))
    # a dynamic-M bucket weighs it too, its workspace sized at the bucket's largest M: within 32-bit offsets
    assert gemm_cost.choose_for_range(2049, 3072, 3584, 18944, 2, H100) == Sm90Config(  # shifted where shallow, at run time
        128, 256, 3, 2, epilogue="tma", split_k=2, decomposition="hybrid", shift_last=True)
    assert gemm_cost.choose_for_range(8193, 16386, 3584, 18944, 2, H100).decomposition == "hybrid"
    last = gemm_cost.choose_for_range(8193, 16386, 3584, 18944, 2, H100, m_max=599186)  # the last bucket's rows
    assert last.split_k == 1 and last.decomposition == "data-parallel"


@pytest.mark.slow  # the hybrid is not chosen yet (gemm_cost.WEIGH_HYBRID)
def test_the_emulator_validates_a_ragged_problem_whose_last_wave_is_split():
    # 130 x 72: 2 x 2 = 4 tiles of 128x64 (two consumer warpgroups) on 3 CTAs: one whole wave (tiles 0-2, C
    # through the TMA epilogue), tile 3 in two K slices (5 k-tiles: 3 and 2, the last box past K zero-filled)
    # gathered by the last of its slices' warpgroups, the fused epilogue (with the scales), f16 C
    problem = GemmProblem(130, 72, 320, "f16", "nt", "f16", Fusion(bias=True, activation="silu", residual=True,
                                                                   row_scale=True, col_scale=True))
    cfg = Sm90Config(128, 64, 2, 2, ctas=3, epilogue="tma", split_k=2, decomposition="hybrid")
    p = gemm.plan(problem, "sm90", cfg)
    assert (p.waves, p.units, [p.unit_of(u, q, r) for u in range(2, 5)]) == (1, 5, [(0, 2), (0, 3), (1, 3)])
    v = gemm.validate(problem, "sm90", cfg)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.slow  # the hybrid is not chosen yet (gemm_cost.WEIGH_HYBRID)
def test_dynamic_m_runs_the_hybrid_at_the_run_time_tiles_and_leaves_the_tickets_zero():
    # one kernel for M = 33..256 (the workspace sized at 256); at M = 150: 3 x 2 = 6 tiles on 4 CTAs, one wave
    # whole, tiles 4 and 5 in two slices each, reduced atomically
    cfg = Sm90Config(64, 64, 2, 1, ctas=4, split_k=2, reduction="atomic", decomposition="hybrid")
    p = plan(MBucket(33, 256), 100, 256, "bf16", "nt", "f32", cfg, H100.units, H100.smem_per_unit)
    assert [x.shape for x in p.params[3:]] == [(1, 256, 100), (4 * 2,)]
    data = random_inputs(GemmProblem(150, 100, 256, "bf16", "nt", "f32"), seed=5)
    c = data.output()
    args = data.arguments(p.params, c)
    emulate(emit(p), *args, target="sm90")
    assert data.ratio(c) <= 1.0
    assert not args[-1].any() and not args[-2].any()  # the tickets and the atomic slice: zero again


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("M, N, K, cfg, fusion", [
    (3000, 3584, 4096, Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=3, decomposition="hybrid"), Fusion()),
    (333, 7000, 1000, Sm90Config(128, 128, 4, 2, split_k=2, decomposition="hybrid"),
     Fusion(bias=True, activation="gelu", residual=True, row_scale=True)),
    (1500, 4000, 2048, Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=4, reduction="atomic",
                                  decomposition="hybrid"), Fusion(col_scale=True)),
])
def test_hybrid_plans_validate_on_a_hopper_gpu(M, N, K, cfg, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


def test_the_sweep_times_the_hybrid_where_the_model_ranks_it_and_the_best_one_below_the_top(monkeypatch):
    monkeypatch.setattr(gemm_cost, "WEIGH_HYBRID", True)
    monkeypatch.setattr(gemm_cost, "CANDIDATES", WHOLE_BLOCKS)
    monkeypatch.setattr(gemm_cost, "MAX_WAVES", 0)  # nor the wave-fitting widths (gemm_cost.wave_widths)
    import argparse

    from benchmark_modules import benchmark_module

    sweep = benchmark_module("sm90_sweep")
    args = argparse.Namespace(models="qwen2.5-7b", ms="3000,768", top=2, hybrid=True, hybrid_min_slice=1)
    jobs = {(key[1], key[2], key[5]): cfg for key, _, cfg in sweep.jobs(args)}
    # M = 3000, down (336 tiles of 128x256): the model's first choice is the hybrid, timed as rank 0, no other
    assert jobs[("down", 3000, 0)]["decomposition"] == "hybrid" and jobs[("down", 3000, 0)]["split_k"] == 3
    assert len([k for k in jobs if k[:2] == ("down", 3000)]) == 2
    # M = 768, down: the hybrid ranked below the top two is timed too, at its rank
    below = [(rank, cfg) for (proj, m, rank), cfg in jobs.items() if (proj, m) == ("down", 768) and rank >= 2]
    assert len(below) == 1 and below[0][1]["decomposition"] == "hybrid"
    # qkv at M = 3000 (432 tiles, K = 3584): its slices are below MIN_SLICE_TILES, so the model never chooses
    # the hybrid, but the sweep times the best one with shorter slices (the rule's data), and not with the rule
    qkv = [(rank, cfg) for (proj, m, rank), cfg in jobs.items() if (proj, m) == ("qkv", 3000) and rank >= 2]
    assert len(qkv) == 1 and qkv[0][1]["decomposition"] == "hybrid" and qkv[0][0] >= len(
        gemm_cost.ranked(3000, 4608, 3584, 2, devices.planned("sm80")))  # ranked past every config the model weighs
    args.hybrid_min_slice = gemm_cost.MIN_SLICE_TILES
    assert all(key[5] < 2 for key, _, _ in sweep.jobs(args) if key[1:3] == ("qkv", 3000))
    args.hybrid = False
    assert len(sweep.jobs(args)) == 2 * 4 * 2


def test_the_choice_leaves_the_hybrid_out_until_a_timing_tests_it():
    device = devices.DEVICES["H100"]
    assert not gemm_cost.WEIGH_HYBRID
    assert all(c.decomposition != "hybrid" for _, c in gemm_cost.ranked(3000, 3584, 18944, 2, device))


def test_the_sweep_times_a_hybrid_while_the_choice_leaves_it_out():
    import argparse

    from benchmark_modules import benchmark_module

    sweep = benchmark_module("sm90_sweep")
    args = argparse.Namespace(models="qwen2.5-7b", ms="3000", top=2, hybrid=True, hybrid_min_slice=1)
    jobs = {(key[1], key[2], key[5]): cfg for key, _, cfg in sweep.jobs(args)}
    # the model's two first configs are not hybrids (not weighed), the extra one below them is
    assert all(cfg["decomposition"] != "hybrid" for (_, _, rank), cfg in jobs.items() if rank < 2)
    assert any(cfg["decomposition"] == "hybrid" for (_, _, rank), cfg in jobs.items() if rank >= 2)
    assert gemm_cost.WEIGH_HYBRID is False
