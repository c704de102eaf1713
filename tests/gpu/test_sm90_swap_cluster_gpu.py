"""The swapped sm90 GEMM in clusters of two token tiles (``Sm90Config(swap_ab=True, cluster_m=2)``: the weights, the
kernel's A role, multicast to both CTAs; docs/sm90_gemm.md "Clusters") on a Hopper GPU (``cuda(arch="sm_90a")``):
cuBLAS's tiles at M = 200 on the o and down projections' shapes, odd M with a pair's second token tile wholly past M,
two consumers, a fused epilogue, a dynamic-M plan at several M; each within ``error_bound``. Skipped without such a
GPU."""

import pytest

from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)


@pytest.mark.parametrize("M, N, K, cfg, fusion", [
    (200, 3584, 3584, Sm90Config(64, 104, 8, 1, swap_ab=True, cluster_m=2), Fusion()),   # Qwen o, cuBLAS's 64x104
    (200, 3584, 4104, Sm90Config(128, 104, 7, 2, swap_ab=True, cluster_m=2), Fusion()),  # 128x104, two consumers
    (101, 1000, 520, Sm90Config(64, 48, 8, 1, swap_ab=True, cluster_m=2), Fusion()),     # a pair's second past M
    (240, 1001, 264, Sm90Config(128, 48, 6, 2, swap_ab=True, cluster_m=2, ctas=4),       # 2 clusters walking pairs
     Fusion(bias=True, activation="silu", residual=True)),
])
def test_swapped_clusters_validate_on_a_hopper_gpu(M, N, K, cfg, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    out = "bf16" if fusion.residual else "f32"
    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


def test_a_swapped_clustered_dynamic_m_plan_is_exact_at_several_m():
    from tvm_cdna4.runtime.cuda import run_gemm

    device = devices.planned("sm80")
    cfg = Sm90Config(64, 104, 8, 1, swap_ab=True, cluster_m=2)
    p = plan(MBucket(1, 256), 3584, 3584, "bf16", "nt", "bf16", cfg, device.units, device.smem_per_unit)
    for m in (5, 104, 105, 200, 256):  # one token tile (its pair's second past M), two, three (a second pair)
        data = random_inputs(GemmProblem(m, 3584, 3584, "bf16", "nt", "bf16"), seed=m)
        c = data.output()
        run_gemm(p, data.arguments(p.params, c))
        assert data.ratio(c) <= 1.0, m
