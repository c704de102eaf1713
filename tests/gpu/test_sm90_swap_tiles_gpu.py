"""Swapped dynamic-M plans over several tiles of M on a Hopper GPU (``cuda(arch="sm_90a")``): the kernel of a bucket's
plan with ``block_n`` under the bucket's largest M (``gemm_cost.swap_widths``: M's tiles counted at launch, the
activations' boxes past M zero-filled by TMA, C^T's stores masked at M), launched at M under one tile, odd M and M
over two to four tiles, one and two consumers, a K split, every fused step, C poisoned first and compared with the
f64 product (``GemmData.ratio``); then the torch op with the buckets weighing swap (``WEIGH_SWAP_DYNAMIC`` on, off by
default) at M = 150 and 200 of Qwen2.5-7B's QKV and o, where the H100's model plans 128x88 / 64x128 (three and two
tiles of M at 200). Skipped without such a GPU."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

import tvm_cdna4.torch as ours  # noqa: E402
from tvm_cdna4.kernels import devices  # noqa: E402
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs  # noqa: E402
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket  # noqa: E402
from tvm_cdna4.kernels.gemm.epilogue import Fusion  # noqa: E402
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan  # noqa: E402

ALL = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)
SHAPES = ((4608, 3584), (3584, 3584))


@pytest.mark.parametrize("bucket, N, K, cfg, ms, out, fusion", [
    # Qwen2.5-7B's QKV in the 193..256 bucket: 128x88 (two consumers), three tiles of M at 193..256
    (MBucket(193, 256), 4608, 3584, Sm90Config(128, 88, 6, 2, swap_ab=True), (193, 200, 256), "bf16", Fusion()),
    # o in 64x128 tiles: M = 5 and 77 (one tile), 129 (two, the last one column), 255
    (MBucket(193, 256), 3584, 3584, Sm90Config(64, 128, 8, 1, swap_ab=True), (5, 77, 129, 255), "bf16", Fusion()),
    # the same in gemm_cost.SWAP_PANEL_ADJACENT's walk (raster "n": a weight panel's token tiles on adjacent CTAs)
    (MBucket(193, 256), 3584, 3584, Sm90Config(64, 128, 8, 1, raster="n", swap_ab=True), (77, 129, 200, 255), "bf16",
     Fusion()),
    # the down projection's K split over tiles of 72 columns: M = 150 (three tiles), 217 (four)
    (MBucket(129, 256), 3584, 18944, Sm90Config(64, 72, 8, 1, split_k=2, decomposition="split-k", swap_ab=True),
     (150, 217), "bf16", Fusion()),
    # odd N and K, every fused step, 104 columns: M = 200 (two tiles), 209 (three)
    (MBucket(193, 256), 333, 264, Sm90Config(128, 104, 4, 2, swap_ab=True), (200, 209), "bf16", ALL),
])
def test_a_swapped_plan_over_several_tiles_of_m_is_exact_on_the_card(bucket, N, K, cfg, ms, out, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    device = devices.planned("sm80")
    p = plan(bucket, N, K, "bf16", "nt", out, cfg, device.units, device.smem_per_unit, fusion)
    for m in ms:
        data = random_inputs(GemmProblem(m, N, K, "bf16", "nt", out, fusion), seed=m)
        c = data.output()
        run_gemm(p, data.arguments(p.params, c))
        assert data.ratio(c) <= 1.0, m


@pytest.mark.parametrize("M", (150, 200))
@pytest.mark.parametrize("N, K", SHAPES)
def test_the_torch_op_runs_the_swapped_bucket_plans_of_several_tiles(swapped_buckets, N, K, M):
    g = torch.Generator(device="cuda").manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    y = ours.gemm(a, b)
    kernels = [k for key, k in ours.kernel_cache().items() if key[:2] == (N, K) and key[-1] == "sm90"]
    assert len(kernels) == 1
    cfg = kernels[0].dynamic.plan(M).config
    assert cfg.swap_ab, cfg  # the model's plan on this card (H100: 128x88 / 64x128 at 193..256)
    ref = a.float() @ b.float().t()
    assert not y.float().isnan().any()
    assert float((y.float() - ref).abs().max() / ref.abs().max()) <= 1e-2
