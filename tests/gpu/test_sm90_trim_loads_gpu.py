"""The sm90 GEMM's trimmed loads (``Sm90Config.trim_loads``: a tile past M or N loads the rows that exist in the least
box of ``gemm_emit.trim_boxes`` that holds them, the rest of its ring rows stale) through ``tvm_cdna4.torch.gemm`` on a Hopper GPU
(``cuda(arch="sm_90a")``): with ``gemm_plan.TRIM_LOADS`` on (each test's kernels built afresh) the torch op's bucket
plans trim at odd M and N, and match torch's product, with and without fused steps."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

import tvm_cdna4.torch as ours  # noqa: E402
from gemm_gpu import assert_fused_silu_matches, sm90_plan_config  # noqa: E402

SHAPES = ((5120, 5120), (1000, 1032), (3584, 18944))


@pytest.fixture(autouse=True)
def trimmed(planner_flags):
    from tvm_cdna4.kernels.sm90 import gemm_plan

    planner_flags(gemm_plan, TRIM_LOADS=True)


def _config(N: int, K: int, M: int, fused: bool = False):
    return sm90_plan_config(ours, N, K, M, fused)


@pytest.mark.parametrize("M, N, K", [(M, 5120, 5120) for M in (77, 200, 260, 333)]  # Phi-3-medium o: N 80 rows short
                         + [(M, 1000, 1032) for M in (37, 129, 300)]  # N and K not multiples of 64
                         + [(300, 3584, 18944)])  # Qwen2.5-7B down (one-consumer 64-row tiles: 257..320 on an H100)
def test_the_torch_op_runs_trimmed_bucket_plans_exactly(M, N, K):
    g = torch.Generator(device="cuda").manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    y = ours.gemm(a, b)
    assert _config(N, K, M).trim_loads
    ref = a.float() @ b.float().t()
    assert y.shape == (M, N) and not y.float().isnan().any()
    assert float((y.float() - ref).abs().max() / ref.abs().max()) <= 1e-2
    assert torch.equal(ours.gemm(a, b), y)


@pytest.mark.parametrize("M", (77, 260))
def test_a_trimmed_plan_with_fused_steps_through_the_torch_op(M):
    N, K = 5120, 5120
    assert_fused_silu_matches(ours.gemm, M, N, K, seed=M)
    assert _config(N, K, M, fused=True).trim_loads
