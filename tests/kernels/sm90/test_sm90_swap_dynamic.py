"""The swapped sm90 GEMM (``Sm90Config.swap_ab``: C^T = B A^T) at a run-time M (``kernels.sm90.gemm_dynamic``) and
with a K split: the kernel over ``(N, M, K)`` with M's tiles counted at launch, A's tensor map (the kernel's B role)
over the run-time rows, C^T's stores masked at M; the split's workspace and tickets in C^T's coordinates; validated in
the CUDA emulator at odd M inside a bucket, with and without the fused epilogue, both reductions."""

from __future__ import annotations

import numpy as np
import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_emit import emit, signature_source
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan

H100 = devices.DEVICES["H100"]
ALL = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)


def _plan(bucket, N, K, cfg, out="f32", fusion=Fusion()):
    return plan(bucket, N, K, "bf16", "nt", out, cfg, H100.units, H100.smem_per_unit, fusion)


def test_the_swapped_dynamic_plan_counts_m_s_tiles_at_launch():
    p = _plan(MBucket(97, 192), 3584, 18944, Sm90Config(64, 96, 8, 1, swap_ab=True), "bf16")
    assert p.config.swap_ab and p.dynamic_m == MBucket(97, 192) and p.tiles_m == 56  # N's tiles: static
    assert str(p.tiles_n) == "T.Div(M + 95, 96)" and str(p.ctas) == "T.min(56 * T.Div(M + 95, 96), 132)"
    assert [(q.name, [str(x) for x in q.shape]) for q in p.params] == [
        ("A", ["M", "18944"]), ("B", ["3584", "18944"]), ("C", ["M", "3584"])]
    source = signature_source(p)  # the kernel's B role: A's run-time rows, boxes of block_n = 96 rows
    assert "mapA = " in source and "p.M" in source and "(mapB, mapA,)" in source


def _validate(bucket, cfg, ms, out, fusion, N=72, K=136):
    p = _plan(bucket, N, K, cfg, out, fusion)
    f = emit(p)
    for m in ms:
        data = random_inputs(GemmProblem(m, N, K, "bf16", "nt", out, fusion), seed=m)
        c = data.output()
        emulate(f, *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


def test_the_emulator_validates_the_swapped_kernel_at_a_run_time_m_with_every_fused_step():
    # M = 77 of the bucket 65..96, one tile of M (block_n = 96); N = 72: a ragged second tile of N
    _validate(MBucket(65, 96), Sm90Config(64, 96, 2, 1, swap_ab=True), (77,), "bf16", ALL, K=128)


@pytest.mark.slow  # suite time: the sweep of odd M (run with TVM_CDNA4_SLOW=1)
@pytest.mark.parametrize("bucket, cfg, ms, out, fusion", [
    # one tile of M covering the bucket (block_n = 96): M = 17, 77, 96
    (MBucket(17, 96), Sm90Config(64, 96, 2, 1, swap_ab=True), (17, 77, 96), "f32", Fusion()),
    # tiles of M (block_n = 64, ceil(M / 64) of them at launch), two consumers, every fused step: M = 130, 200
    (MBucket(97, 256), Sm90Config(128, 64, 2, 2, swap_ab=True), (130, 200), "bf16", ALL),
])
def test_the_emulator_validates_the_swapped_kernel_at_odd_run_time_m(bucket, cfg, ms, out, fusion):
    _validate(bucket, cfg, ms, out, fusion)


@pytest.mark.parametrize("raster", ["m", "n"])
def test_the_emulator_validates_a_swapped_plan_over_several_tiles_of_m(raster):
    # block_n 72: M = 45 (under one tile), 145 (odd, three tiles, the last of one column); N = 40: a ragged tile of N;
    # M's tiles counted at launch (gemm_cost.swap_widths' plans: several tiles of M in a bucket); raster "n": a weight
    # panel's token tiles on adjacent CTAs (gemm_cost.SWAP_PANEL_ADJACENT, the run-time tile columns fastest)
    cfg = Sm90Config(64, 72, 2, 1, raster=raster, swap_ab=True)
    assert str(_plan(MBucket(129, 192), 40, 64, cfg).tiles_n) == "T.Div(M + 71, 72)"
    _validate(MBucket(129, 192), cfg, (45, 145), "f32", Fusion(), N=40, K=64)


@pytest.mark.slow  # suite time (run with TVM_CDNA4_SLOW=1)
@pytest.mark.parametrize("bucket, cfg, ms, out, fusion", [
    # two consumers (128 rows of N), 104 columns: M = 200 in two tiles, 209 in three; every fused step
    (MBucket(193, 256), Sm90Config(128, 104, 2, 2, swap_ab=True), (200, 209), "bf16", ALL),
    # a K split over tiles of 72 columns: M = 77 (two tiles), 200 (three)
    (MBucket(193, 256), Sm90Config(64, 72, 2, 1, split_k=2, decomposition="split-k", swap_ab=True), (77, 200), "f32",
     Fusion(bias=True)),
    # the same in gemm_cost.SWAP_PANEL_ADJACENT's walk (raster "n": the run-time tile columns fastest)
    (MBucket(193, 256), Sm90Config(128, 104, 2, 2, raster="n", swap_ab=True), (200, 209), "bf16", ALL),
    (MBucket(193, 256), Sm90Config(64, 72, 2, 1, split_k=2, decomposition="split-k", raster="n", swap_ab=True), (77, 200),
     "f32", Fusion(bias=True)),
])
def test_the_emulator_validates_swapped_plans_over_several_tiles_of_m(bucket, cfg, ms, out, fusion):
    _validate(bucket, cfg, ms, out, fusion, N=72, K=256)


def test_a_swapped_split_keeps_its_workspace_and_tickets_in_c_transposed_coordinates():
    cfg = Sm90Config(64, 96, 8, 1, split_k=2, decomposition="split-k", swap_ab=True)
    p = _plan(MBucket(65, 96), 3584, 18944, cfg, "bf16")
    assert [(q.name, q.shape) for q in p.params[3:]] == [("W", (2, 3584, 96)), ("S", (56,))]  # N x the bucket's M
    static = plan(77, 3584, 18944, "bf16", "nt", "bf16", Sm90Config(128, 80, 8, 2, split_k=3, reduction="atomic",
                                                                      decomposition="split-k", swap_ab=True),
                  H100.units, H100.smem_per_unit)
    assert (static.units, [q.shape for q in static.params[3:]]) == (28 * 3, [(1, 3584, 77), (28 * 2,)])


def test_the_emulator_validates_a_swapped_split_at_a_run_time_m_and_leaves_the_tickets_zero():
    # M = 45 of 33..64, block_n 64: the partials in pairs along M (W's rows are the bucket's 64), the pair (44, 45)
    # straddling the run-time M; columns past it never written; the last slice stores C transposed
    cfg = Sm90Config(64, 64, 2, 1, split_k=2, decomposition="split-k", swap_ab=True)
    p = _plan(MBucket(33, 64), 40, 256, cfg)
    data = random_inputs(GemmProblem(45, 40, 256, "bf16", "nt", "f32"), seed=4)
    c = data.output()
    args = data.arguments(p.params, c)
    emulate(emit(p), *args, target="sm90")
    assert data.ratio(c) <= 1.0
    w, tickets = args[-2:]
    assert w.shape == (2, 40, 64) and not tickets.any() and np.abs(w[:, :, 46:]).max() == 0


@pytest.mark.slow  # suite time (run with TVM_CDNA4_SLOW=1)
@pytest.mark.parametrize("bucket, cfg, ms, out, fusion", [
    # atomic, two consumers, every fused step, a static M of 77 (odd: the partials one element at a time)
    (None, Sm90Config(128, 80, 2, 2, split_k=3, reduction="atomic", decomposition="split-k", swap_ab=True), (77,),
     "bf16", ALL),
    # ordered, tiles of M at launch, one CTA walking every unit: M = 130, 200
    (MBucket(97, 256), Sm90Config(64, 64, 2, 1, ctas=1, split_k=2, decomposition="split-k", swap_ab=True), (130, 200),
     "f32", Fusion(bias=True)),
])
def test_the_emulator_validates_swapped_splits(bucket, cfg, ms, out, fusion):
    for m in ms:
        _validate(bucket or m, cfg, (m,), out, fusion, K=320)
