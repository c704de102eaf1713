"""``gemm_cost.WEIGH_SWAP_NARROW``: the dynamic-M buckets past ``SWAP_DYNAMIC_MAX_M`` cut into swapped parts of
``SWAP_NARROW_ROWS`` rows (``gemm_dynamic.narrowed``), one token tile whose wgmma N is the part's top; off, the buckets
and plans as before. The narrow part's kernel validated in the CUDA emulator at its ends and inside (odd N, K past
whole k-tiles)."""

from __future__ import annotations

import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_dynamic
from tvm_cdna4.kernels.sm90.gemm_emit import emit
from tvm_cdna4.kernels.sm90.gemm_plan import TMA_BOX_MAX, Sm90Config, plan

H100 = devices.DEVICES["H100"]
GEMMA_QKV = (8192, 3584)  # Gemma-2-9B's fused QKV (N, K): the 193..256 bucket's plan unswapped 128x128


def _buckets(narrow: bool, monkeypatch, N: int, K: int):
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", narrow)
    return gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", H100)


def _plan_of(b: MBucket, N: int, K: int) -> Sm90Config:
    return gemm_dynamic.plan_bucket(b, N, K, "bf16", "nt", "bf16", Fusion(), H100).config


def test_off_the_buckets_past_the_swapped_ones_stay_whole(monkeypatch):
    b = MBucket(129, 256)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", False)
    assert gemm_dynamic.narrowed(b, *GEMMA_QKV, "bf16", 2, H100) == ((b, False),)
    assert MBucket(193, 256) in _buckets(False, monkeypatch, *GEMMA_QKV)
    assert not _plan_of(MBucket(193, 256), *GEMMA_QKV).swap_ab


def test_on_m_200_runs_one_token_tile_of_208_columns(monkeypatch):
    off, on = _buckets(False, monkeypatch, *GEMMA_QKV), _buckets(True, monkeypatch, *GEMMA_QKV)
    step, top = gemm_cost.SWAP_NARROW_ROWS, gemm_cost.SWAP_DYNAMIC_MAX_M
    assert [b for b in on if b.hi <= top or b.lo > TMA_BOX_MAX] == [b for b in off if b.hi <= top or b.lo > TMA_BOX_MAX]
    assert all(a.hi + 1 == b.lo for a, b in zip(on, on[1:])) and on[0].lo == off[0].lo and on[-1].hi == off[-1].hi
    part = next(b for b in on if 200 in b)
    assert part == MBucket(193, 208) and part.hi - part.lo + 1 == step
    cfg = _plan_of(part, *GEMMA_QKV)
    assert cfg.swap_ab and cfg.block_n == 208 and cfg.split_k == 1  # N 208 for M = 200 (the 193..256 bucket's: 256)
    assert gemm_cost.swap_weighed(193, 208) and not gemm_cost.swap_weighed(193, 256)


def test_a_part_whose_plan_stays_unswapped_rejoins_its_neighbours(monkeypatch):
    # Gemma-2-9B's o projection: 129..144 swapped, 145..192 one unswapped part, 193..256 whole (the model's choice)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", True)
    parts = gemm_dynamic.narrowed(MBucket(129, 192), 3584, 4096, "bf16", 2, H100)
    assert parts == ((MBucket(129, 144), True), (MBucket(145, 192), False))


@pytest.mark.parametrize("N, K, out", [(75, 136, "bf16"), pytest.param(72, 200, "f32", marks=pytest.mark.slow)])
def test_the_emulator_validates_a_narrow_swapped_part_at_its_ends_and_inside(N, K, out):
    # one token tile of 208 columns at M = 193 (15 past M), 200 and 208 (whole); odd N: element stores, K: a partial k-tile
    p = plan(MBucket(193, 208), N, K, "bf16", "nt", out, Sm90Config(64, 208, 2, 1, swap_ab=True, raster="n"),
             H100.units, H100.smem_per_unit, Fusion())
    f = emit(p)
    for m in (193, 200, 208):
        data = random_inputs(GemmProblem(m, N, K, "bf16", "nt", out), seed=m)
        c = data.output()
        emulate(f, *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


def test_the_parts_stop_at_swap_narrow_max_m(monkeypatch):
    # Phi-3-medium's QKV: past the cap 209..256 is one unswapped part, the off plan (128x120); without the cap
    # 225..240 runs the swapped 64x240 that the H100 timed at 0.89x (WEIGH_SWAP_NARROW's docstring)
    N, K = 7680, 5120
    on = _buckets(True, monkeypatch, N, K)
    cap = gemm_cost.SWAP_NARROW_MAX_M
    past = next(b for b in on if b.lo == cap + 1)
    assert past == MBucket(cap + 1, 256) and not _plan_of(past, N, K).swap_ab
    assert _plan_of(past, N, K) == _plan_of(MBucket(193, 256), N, K)  # the flag off's plan of 193..256
    assert _plan_of(next(b for b in on if cap in b), N, K).swap_ab
    monkeypatch.setattr(gemm_cost, "SWAP_NARROW_MAX_M", TMA_BOX_MAX)
    part = next(b for b in gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", H100) if 240 in b)
    cfg = _plan_of(part, N, K)
    assert part == MBucket(225, 240) and cfg.swap_ab and cfg.block_n == 240


def test_a_bucket_starting_or_ending_between_the_cuts_is_cut_at_the_multiples(monkeypatch):
    # narrowed on any bucket (a coarse edge or m_limit inside 129..208): the first part ends at the next multiple of
    # SWAP_NARROW_ROWS, the last at the bucket's top; past SWAP_NARROW_MAX_M one unswapped part (Gemma-2-9B's QKV)
    monkeypatch.setattr(gemm_cost, "WEIGH_SWAP_NARROW", True)
    step, cap = gemm_cost.SWAP_NARROW_ROWS, gemm_cost.SWAP_NARROW_MAX_M
    assert [(b.lo, b.hi, n) for b, n in gemm_dynamic.narrowed(MBucket(150, 200), *GEMMA_QKV, "bf16", 2, H100)] == [
        (150, 160, True), (161, 176, True), (177, 192, True), (193, 200, True)]
    parts = gemm_dynamic.narrowed(MBucket(100, 300), *GEMMA_QKV, "bf16", 2, H100)
    assert parts[0] == (MBucket(100, gemm_cost.SWAP_DYNAMIC_MAX_M), False) and parts[-1] == (MBucket(cap + 1, 300), False)
    assert all(b.hi % step == 0 and b.hi - b.lo < step and n for b, n in parts[1:-1])
    assert all(a.hi + 1 == b.lo for (a, _), (b, _) in zip(parts, parts[1:]))
    plan = _plan_of(MBucket(193, 200), *GEMMA_QKV)
    assert plan.swap_ab and plan.block_n == 200  # the part's top, not the multiple's
