"""The sm90 GEMM in clusters of two CTAs (``Sm90Config.cluster_m=2``; docs/sm90_gemm.md "Clusters") on a Hopper GPU
(``cuda(arch="sm_90a")``): B multicast to both CTAs of a cluster, the stage released in both; odd M / N / K, a pair
whose second tile row lies past M, one and two consumers, ping-pong, the TMA epilogue with a TMA-read residual, a
dynamic-M plan, uneven shares of B (168 = 88 + 80, 72 = 40 + 32); each within ``error_bound``. Skipped without
such a GPU."""

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)


@pytest.mark.parametrize("M, N, K, cfg, fusion", [
    (77, 200, 264, Sm90Config(128, 64, 4, 2, cluster_m=2), Fusion()),                   # one pair, its second row past M
    (333, 1000, 520, Sm90Config(128, 128, 4, 2, cluster_m=2, ctas=4), Fusion()),        # 2 clusters walking 3 x 8 pairs
    (1000, 776, 4104, Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, cluster_m=2), Fusion()),  # N = 776: a last tile of 8 columns
    (333, 1000, 520, Sm90Config(128, 128, 4, 2, epilogue="tma", residual_read="tma", cluster_m=2),
     Fusion(bias=True, activation="gelu", residual=True)),
    (300, 1000, 520, Sm90Config(128, 128, 5, 2, schedule="pingpong", cluster_m=2), Fusion(col_scale=True)),
    (200, 4600, 520, Sm90Config(64, 176, 6, 1, cluster_m=2), Fusion()),                 # one consumer, 88-row B halves
    (3000, 4608, 3584, Sm90Config(128, 192, 4, 2, epilogue="tma", cluster_m=2), Fusion(residual=True)),
    # uneven shares of B (gemm_plan.b_shares): 88 + 80 rows of 168 through maps B and B1, the model's config of
    # Qwen's o projection at M = 768 (a 40-column tail block); odd M / N with a TMA-read residual; 40 + 32 of 72
    (768, 3584, 3584, Sm90Config(128, 168, 4, 2, epilogue="tma", cluster_m=2), Fusion()),
    (333, 1000, 520, Sm90Config(128, 168, 4, 2, epilogue="tma", residual_read="tma", cluster_m=2),
     Fusion(residual=True)),
    (77, 1001, 264, Sm90Config(64, 72, 4, 1, cluster_m=2), Fusion()),
])
def test_clustered_plans_validate_on_a_hopper_gpu(M, N, K, cfg, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    out = "bf16" if cfg.epilogue == "tma" or fusion.residual else "f32"
    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


@pytest.mark.parametrize("cfg", [Sm90Config(128, 224, 3, 2, epilogue="tma", cluster_m=2),
                                 Sm90Config(128, 168, 4, 2, epilogue="tma", cluster_m=2)])
def test_the_clustered_persistent_grid_is_resident_in_one_wave(cfg):
    """The persistent grid (the SMs rounded down to whole clusters) runs as one wave of clusters:
    ``cuOccupancyMaxActiveClusters`` of the kernel as built (``benchmarks/sm90_clusters.py``'s residency line)
    is at least the grid's cluster count; else the last clusters start only after the first ones end."""
    from benchmark_modules import benchmark_module

    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    p = gemm.plan(GemmProblem(3000, 3584, 3584, "bf16", "nt", "bf16"), "sm90", cfg)
    r = benchmark_module("sm90_clusters").residency(build_plan(p), p)
    assert "max_active_clusters" in r, r
    assert r["grid_clusters"] == p.ctas // 2 and r["max_active_clusters"] >= r["grid_clusters"], r
