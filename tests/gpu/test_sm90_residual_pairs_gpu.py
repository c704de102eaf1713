"""The sm90 GEMM's residual read from global memory a column pair a load (``gemm_residual.residual_pairs``, stop 49)
on a Hopper GPU (``cuda(arch="sm_90a")``): stores from registers and through TMA, the sub-tiled staging with the L2
prefetch, ping-pong, ragged M and an even N off the tile, every fused step, each within ``error_bound``. Skipped
without such a GPU."""

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("M, N, K, out, fusion, cfg", [
    (1000, 1002, 520, "bf16", Fusion(residual=True), Sm90Config(128, 128, 4, 2)),          # registers, N % 8 == 2
    (777, 3000, 1000, "bf16", ALL, Sm90Config(128, 256, 3, 2, epilogue="tma", activation_form="tanh")),
    (3000, 1000, 1000, "f16", Fusion(activation="silu", residual=True), Sm90Config(128, 256, 4, 2, epilogue="tma",
                                                                                   epilogue_tile=64,
                                                                                   residual_read="prefetch")),
    (300, 1000, 520, "bf16", ALL, Sm90Config(128, 128, 5, 2, schedule="pingpong")),
])
def test_the_pair_reads_validate_on_a_hopper_gpu(M, N, K, out, fusion, cfg):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
