"""The sm90 GEMM's residual read ahead of the epilogue (``Sm90Config.residual_read="preread"``: ``tma``'s load into
the staging buffer, each thread's words read into registers under the mainloop's last wgmma; docs/sm90_gemm.md) on a
Hopper GPU (``cuda(arch="sm_90a")``): the cost model's configs of odd shapes with the read changed, a tail block,
one consumer, every fused step, each within ``error_bound``. Skipped without such a GPU."""

import attrs
import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("M, N, K, out, fusion", [
    (1000, 1000, 520, "bf16", Fusion(residual=True)),                     # ragged M and N
    (777, 3000, 1000, "bf16", ALL),
    (3000, 1000, 1000, "f16", Fusion(activation="silu", residual=True)),
    (4096, 4096, 4096, "bf16", Fusion(residual=True)),                     # the --epilogue case: 128x256, 3 stages
])
def test_the_cost_model_s_config_with_the_preread_validates(M, N, K, out, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    problem = GemmProblem(M, N, K, "bf16", "nt", out, fusion)
    cfg = attrs.evolve(gemm.plan(problem, "sm90").config, residual_read="preread")
    v = gemm.validate(problem, "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


@pytest.mark.parametrize("M, N, K, out, fusion, cfg", [
    (1000, 1000, 1000, "bf16", ALL, Sm90Config(128, 168, 3, 2, epilogue="tma", residual_read="preread")),  # 40-column tail
    (300, 1000, 520, "f16", Fusion(residual=True, col_scale=True), Sm90Config(64, 128, 4, 1, epilogue="tma",
                                                                             residual_read="preread")),
])
def test_a_tail_block_and_one_consumer_validate(M, N, K, out, fusion, cfg):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"
