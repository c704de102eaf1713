"""The sm90 GEMM's wave-fitting tile widths (``gemm_cost.wave_widths``: 168, 176, 104, 72, ...; docs/sm90_gemm.md
"Tile widths") on a Hopper GPU (``cuda(arch="sm_90a")``): static kernels through the TMA epilogue's tail block of
any multiple of 8 columns (unswizzled 40- and 8-column tails, a 32-byte swizzled 16-column one) and from registers,
odd shapes, N not a multiple of the tile, the fused epilogue with the residual read through TMA, each within
``error_bound``; and the torch op's bucket plan at M = 768 (128x168). Skipped without such a GPU."""

import pytest

from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

FUSED = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)


@pytest.mark.parametrize("M, N, K, cfg, fusion", [
    (768, 3584, 3584, Sm90Config(128, 168, 4, 2, epilogue="tma"), Fusion()),  # 6 x 22 tiles: one wave
    (333, 1000, 520, Sm90Config(128, 168, 4, 2, epilogue="tma", residual_read="tma", activation_form="tanh"), FUSED),
    (768, 7680, 264, Sm90Config(128, 176, 4, 2, epilogue="tma"), Fusion()),   # a 48-column tail
    (200, 4600, 520, Sm90Config(128, 104, 5, 2, epilogue="tma"), Fusion(residual=True)),
    (77, 1000, 264, Sm90Config(128, 72, 6, 2, epilogue="tma"), Fusion()),     # an 8-column tail
    (333, 1000, 520, Sm90Config(128, 80, 6, 2, epilogue="tma"), Fusion()),    # a 16-column tail, 32-byte swizzle
    (200, 4608, 3584, Sm90Config(64, 144, 6, 1), Fusion()),                  # from registers, one consumer
    (768, 3584, 520, Sm90Config(128, 168, 4, 2), FUSED),
])
def test_the_wave_fitting_widths_validate_on_a_hopper_gpu(M, N, K, cfg, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    v = gemm.validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", cfg, run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


def test_the_torch_op_runs_the_168_column_bucket_plan_at_m_768():
    torch = pytest.importorskip("torch")
    import tvm_cdna4.torch as ours

    M, N, K = 768, 3584, 3584  # Qwen2.5-7B's o projection
    g = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    y = ours.gemm(a, b)
    kernels = [k for key, k in ours.kernel_cache().items() if key[:2] == (N, K) and key[-1] == "sm90"]
    assert kernels and kernels[0].dynamic.plan(M).config.block_n == 168
    ref = a.float() @ b.float().t()
    assert float((y.float() - ref).abs().max() / ref.abs().max()) <= 1e-2
