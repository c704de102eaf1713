"""The sm90 GEMM's residual reads spread over the mainloop (``Sm90Config.residual_read`` ``"sliced"`` and
``"prefetch"``, docs/sm90_gemm.md) on a Hopper GPU (``cuda(arch="sm_90a")``): odd shapes, N not a multiple of the
tile, tail blocks, the sub-tiled staging and the register epilogue with the prefetch, every fused step, each within
``error_bound``. Skipped without such a GPU."""

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("M, N, K, out, fusion, cfg", [
    (1000, 1000, 1000, "bf16", ALL, Sm90Config(128, 96, 4, 2, epilogue="tma", residual_read="sliced")),
    (3000, 1000, 1000, "f16", Fusion(activation="silu", residual=True), Sm90Config(128, 256, 3, 2, epilogue="tma",
                                                                                   residual_read="sliced")),
    (777, 3000, 1000, "bf16", ALL, Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, residual_read="prefetch")),
    (300, 1000, 520, "f32", Fusion(residual=True, col_scale=True), Sm90Config(128, 128, 4, 2, residual_read="prefetch")),
])
def test_the_spread_reads_validate_on_a_hopper_gpu(M, N, K, out, fusion, cfg):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
