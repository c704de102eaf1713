"""The sm90 GEMM's wave-friendly tile widths (``block_n`` 224 and 160 with the TMA epilogue's 32-column tail block,
docs/sm90_gemm.md "Tile widths") on a Hopper GPU (``cuda(arch="sm_90a")``): odd shapes, N not a multiple of the
tile, the fused epilogue with the residual read through TMA (its tail map too), each within ``error_bound``.
Skipped without such a GPU."""

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

FUSED = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("M, N, K, cfg, fusion", [
    (333, 3584, 520, Sm90Config(128, 224, 3, 2, epilogue="tma"), Fusion()),  # N = 16 tiles of 224
    (77, 1000, 264, Sm90Config(128, 224, 3, 2, epilogue="tma"), Fusion()),   # 1000 = 4 x 224 + 104: the tail clipped
    (333, 1000, 520, Sm90Config(128, 224, 3, 2, epilogue="tma", residual_read="tma", activation_form="tanh"), FUSED),
    (333, 4200, 264, Sm90Config(128, 160, 5, 2, epilogue="tma"), Fusion(residual=True)),  # 4200 = 26 x 160 + 40
    (1000, 3584, 512, Sm90Config(128, 224, 3, 2, epilogue="tma", residual_read="tma"), Fusion(residual=True)),
])
def test_the_tail_block_validates_on_a_hopper_gpu(M, N, K, cfg, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
