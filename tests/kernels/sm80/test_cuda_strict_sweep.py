"""Strict emulation of small sm80 GEMMs (issue 35, item 6): a plan never reads a shared-memory stage it
did not write, so ``emulate(..., uninitialized="error")`` (the default, what ``gemm.validate`` runs)
reports only broken kernels.

Before the fix every tile plan with one k-tile per CTA (K below ``block_k``, or one k-tile per K slice)
failed here: ``fit_stages`` keeps two stages, and the last k-step's prefetch of the next k-tile's first
fragments read the stage no copy had filled (``EmulationError: read of LDS 'SMH' byte ..., never
written``). The sweep is derandomized: problems of 1-3 k-tiles per slice, split-K slices of both
reductions, every layout and output dtype, and the decode kernel."""

from __future__ import annotations

import inspect
import random

import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, DecodePlan
from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig

SEED = 35


def _tile_case(rng: random.Random):
    bm = rng.choice([16, 32, 64])
    bn = rng.choice([64, 128])
    bk = rng.choice([32, 64])
    split = rng.choice([1, 1, 2, 3])
    k_tiles = rng.choice([1, 1, 2, 3])
    K = k_tiles * split * bk - rng.choice([0, 8, 5])
    warps_m = 1 if bm <= 32 else 2
    cfg = GemmConfig(block_m=bm, block_n=bn, block_k=bk, warps_m=warps_m, warps_n=2, stages=rng.choice([2, 3, 4]),
                     split_k=split, reduction=rng.choice(["atomic", "ordered"]))
    problem = GemmProblem(rng.randint(1, 2 * bm), rng.randint(8, bn + 40), K, rng.choice(["f16", "bf16"]),
                          rng.choice(["nn", "nt", "tn", "tt"]), rng.choice(["f32", "f16", "bf16"]))
    return problem, cfg


def _decode_case(rng: random.Random):
    warps, unroll = rng.choice([2, 4]), rng.choice([1, 2])
    K = rng.randint(1, 3) * 32 * unroll * warps - rng.choice([0, 8, 13])
    cfg = DecodeConfig(warps=warps, row_tiles=rng.choice([1, 2]), unroll=unroll, split_k=rng.choice([1, 2]),
                       reduction=rng.choice(["atomic", "ordered"]), stages=rng.choice([2, 3]))
    return GemmProblem(rng.randint(1, 16), rng.randint(8, 80), K, rng.choice(["f16", "bf16"]), "nt",
                       rng.choice(["f32", "f16", "bf16"])), cfg


def sweep(count: int = 18, seed: int = SEED):
    """``count`` (problem, config) pairs: three tile plans to one decode plan."""
    rng = random.Random(seed)
    return [(_decode_case if i % 4 == 3 else _tile_case)(rng) for i in range(count)]


CASES = sweep() + [
    # the example and its neighbours: the planner's own choice, one k-tile per CTA
    (GemmProblem(40, 64, 96, "bf16", "tn", "bf16"), None),
    (GemmProblem(3, 200, 64, "f16", "nn", "f32"), None),
]


def _id(case) -> str:
    problem, cfg = case
    what = "planner" if cfg is None else (f"decode{cfg.warps}w_u{cfg.unroll}_s{cfg.split_k}" if isinstance(cfg, DecodeConfig)
                                          else f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k}_st{cfg.stages}_s{cfg.split_k}")
    return f"{problem.M}x{problem.N}x{problem.K}_{problem.layout}_{problem.dtype}_{problem.out}_{what}"


def test_validation_emulates_strictly():
    # what "strict" means here: the emulator's default refuses reads of never-written shared memory
    assert inspect.signature(emulate).parameters["uninitialized"].default == "error"


def test_sweep_covers_one_to_three_k_tiles_split_k_and_decode():
    plans = [gemm.plan(problem, "sm80", cfg) for problem, cfg in CASES]
    tiles = [p for p in plans if not isinstance(p, DecodePlan)]
    assert {p.kloop.k_tiles for p in tiles} == {1, 2, 3}
    assert any(p.kloop.k_tiles == 1 and p.config.split_k > 1 for p in tiles)
    assert sum(isinstance(p, DecodePlan) for p in plans) >= 4
    # the plan leaves out the prefetch past a single k-tile (KStep.fragments), and only there
    for p in tiles:
        assert [s.fragments for s in p.kloop.steps] == [True] * (p.tiling.k_steps - 1) + [p.kloop.k_tiles > 1]


# every other case of the sweep is marked slow (suite time; run with TVM_CDNA4_SLOW=1); the two stay
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if i % 2 and i < len(CASES) - 2 else c
                                  for i, c in enumerate(CASES)], ids=[_id(c) for c in CASES])
def test_small_problem_validates_in_the_strict_emulator(case):
    problem, cfg = case
    result = gemm.validate(problem, "sm80", cfg, seed=SEED)
    assert result.ok, (result.ratio, result.where)
