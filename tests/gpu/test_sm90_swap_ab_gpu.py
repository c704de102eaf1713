"""The sm90 GEMM's swapped plan (``Sm90Config.swap_ab``) on a Hopper GPU (``cuda(arch="sm_90a")``): the
best-estimated swapped config (``gemm_cost.swap_ab_config``) of the widest and the longest-K projection of each
model ``benchmarks/sm90_sweep.py --swap-ab`` times, at M = 32, 96 and 200, against torch's product; odd shapes
with every fused step within ``error_bound``. Skipped without such a GPU."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

from benchmark_modules import benchmark_module  # noqa: E402
from tvm_cdna4.kernels import devices, gemm  # noqa: E402
from tvm_cdna4.kernels.gemm import GemmProblem  # noqa: E402
from tvm_cdna4.kernels.gemm.epilogue import Fusion  # noqa: E402
from tvm_cdna4.kernels.sm90 import gemm_cost  # noqa: E402
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config  # noqa: E402

MODELS = ("qwen2.5-7b", "gemma-2-9b", "phi-3-medium")


def _shapes():
    torch_gemm = benchmark_module("torch_gemm")
    return [(model, proj, N, K) for model in MODELS for proj, N, K in torch_gemm.projections(model)
            if proj in ("gate_up", "down")]


@pytest.mark.parametrize("M", (32, 96, 200))
@pytest.mark.parametrize("model, proj, N, K", _shapes())
def test_the_swapped_kernel_matches_torch_on_the_projections(model, proj, N, K, M):
    from tvm_cdna4.runtime.cuda import Kernel, load_build

    problem = GemmProblem(M, N, K, "bf16", "nt", "bf16")
    cfg = gemm_cost.swap_ab_config(M, N, K, 2, devices.planned("sm80"))
    p = gemm.plan(problem, "sm90", cfg)
    assert p.config.swap_ab
    kernel = Kernel(load_build(gemm.build(problem, "sm90", cfg)), p)
    g = torch.Generator(device="cuda").manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
    kernel.launch(a, b, c)
    ref = a.float() @ b.float().t()
    assert not c.float().isnan().any()
    assert float((c.float() - ref).abs().max() / ref.abs().max()) <= 1e-2


@pytest.mark.parametrize("M, N, K, out, fusion, config", [
    (5, 200, 520, "f32", Fusion(), Sm90Config(64, 8, 4, 1, swap_ab=True)),
    (77, 200, 264, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True),
     Sm90Config(128, 80, 4, 2, swap_ab=True)),
    (200, 333, 136, "bf16", Fusion(bias=True, activation="silu", row_scale=True), Sm90Config(128, 200, 4, 2, swap_ab=True)),
    (37, 150, 128, "f32", Fusion(), Sm90Config(128, 40, 2, 2, ctas=1, schedule="pingpong", swap_ab=True)),
])
def test_odd_shapes_with_the_fused_steps_within_the_bound(M, N, K, out, fusion, config):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", config, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU", v
