"""The swapped sm90 GEMM (``Sm90Config.swap_ab``: C^T = B A^T) at a run-time M (``kernels.sm90.gemm_dynamic``): the
kernel over ``(N, M, K)`` with M's tiles counted at launch, A's tensor map (the kernel's B role) over the run-time
rows, C^T's stores masked at M; validated in the CUDA emulator at odd M inside a bucket, with and without the fused
epilogue."""

from __future__ import annotations

import pytest

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels import devices, gemm
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
