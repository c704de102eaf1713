"""The sm90 GEMM's persistent tile orders (``Sm90Config.group_m``, ``raster``; ``kernels.sm90.gemm_order``, issue 36) on a
Hopper GPU (``cuda(arch="sm_90a")``): the n raster, a group of every tile row, the model's order of 4096^3 (16 rows), a cluster
in the n raster and a fused residual read through TMA, each within ``error_bound``. Skipped without such a GPU."""

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)


@pytest.mark.parametrize("M, N, K, cfg, fusion", [
    (3000, 3584, 3584, Sm90Config(128, 224, 3, 2, epilogue="tma", group_m=32), Fusion()),   # every tile row a group
    (3000, 3584, 3584, Sm90Config(128, 224, 3, 2, epilogue="tma", raster="n"), Fusion()),
    # the model's order at 4096^3 (groups of 16 rows) on a problem of 16 x 16 tiles (a float64 reference of seconds)
    (2048, 4096, 2048, Sm90Config(128, 256, 3, 2, epilogue="tma", group_m=16), Fusion()),
    (2048, 4096, 2048, Sm90Config(128, 256, 3, 2, epilogue="tma", group_m=16, residual_read="tma"),
     Fusion(residual=True)),
    (1000, 3000, 520, Sm90Config(128, 168, 4, 2, epilogue="tma", group_m=3, raster="n", cluster_m=2), Fusion()),
    (333, 1000, 264, Sm90Config(64, 64, 4, 1, group_m=5, raster="n"), Fusion(bias=True)),
])
def test_the_tile_orders_validate_on_a_hopper_gpu(M, N, K, cfg, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
