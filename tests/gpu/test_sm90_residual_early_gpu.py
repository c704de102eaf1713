"""The sm90 GEMM's residual read in the mainloop (``Sm90Config.residual_read="early"``: ``global``'s column-pair loads
issued into registers after the wgmma issue of the mainloop's last k-tiles; docs/sm90_gemm.md) on a Hopper GPU
(``cuda(arch="sm_90a")``): the cost model's configs of odd shapes with the read changed (the whole-tile TMA epilogue at
4096^3, the --epilogue case), stores from registers, one consumer, ping-pong, an odd N, every fused step, each within
``error_bound``; and the residual's exact sum against torch. Skipped without such a GPU."""

import attrs
import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)
EARLY = dict(residual_read="early")


@pytest.mark.parametrize("M, N, K, out, fusion", [
    (1000, 1000, 520, "bf16", Fusion(residual=True)),                     # ragged M and N
    (777, 3000, 1000, "bf16", ALL),
    (3000, 1000, 1000, "f16", Fusion(activation="silu", residual=True)),
    (4096, 4096, 4096, "bf16", Fusion(residual=True)),                     # the --epilogue case: 128x256, 3 stages
    (4096, 4096, 4096, "bf16", ALL),                                       # "all five (early)"
])
def test_the_cost_model_s_config_with_the_early_read_validates(M, N, K, out, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    problem = GemmProblem(M, N, K, "bf16", "nt", out, fusion)
    cfg = attrs.evolve(gemm.plan(problem, "sm90").config, **EARLY)
    v = gemm.validate(problem, "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


@pytest.mark.parametrize("M, N, K, out, fusion, cfg", [
    (1000, 1000, 1000, "bf16", ALL, Sm90Config(128, 168, 3, 2, epilogue="tma", **EARLY)),      # a 40-column tail
    (300, 1000, 520, "f16", Fusion(residual=True, col_scale=True), Sm90Config(64, 128, 4, 1, **EARLY)),  # one consumer
    (1000, 1000, 1000, "bf16", ALL, Sm90Config(128, 128, 5, 2, schedule="pingpong", **EARLY)),
    (1000, 1001, 520, "bf16", Fusion(residual=True, bias=True), Sm90Config(128, 128, 4, 2, **EARLY)),  # odd N
    (4096, 4096, 4096, "bf16", ALL, Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, **EARLY)),
])
def test_registers_one_consumer_ping_pong_odd_n_and_chunks_validate(M, N, K, out, fusion, cfg):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


@pytest.mark.parametrize("N", [1000, 1001])
def test_the_residual_is_added_exactly_against_torch(N):
    # integer A and B in {-1, 0, 1}: the f32 product exact in any order, so C = bf16(acc + residual) equals torch's
    # bf16(A B^T + residual) bit for bit: each held word reaches its own pair (an even and an odd N)
    import torch

    from tvm_cdna4.runtime.cuda import Kernel, load_build

    M, K = 777, 512
    problem = GemmProblem(M, N, K, "bf16", "nt", "bf16", Fusion(residual=True))
    cfg = attrs.evolve(gemm.plan(problem, "sm90").config, **EARLY)
    kernel = Kernel(load_build(gemm.build(problem, "sm90", cfg)), gemm.plan(problem, "sm90", cfg))
    g = torch.Generator(device="cuda").manual_seed(N)
    a = torch.randint(-1, 2, (M, K), device="cuda", generator=g).bfloat16()
    b = torch.randint(-1, 2, (N, K), device="cuda", generator=g).bfloat16()
    res = torch.randn(M, N, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel.launch(a, b, c, res)
    torch.cuda.synchronize()
    assert torch.equal(c, (a.float() @ b.float().t() + res.float()).bfloat16())
