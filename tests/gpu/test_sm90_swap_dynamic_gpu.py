"""The swapped sm90 GEMM at a run-time M through ``tvm_cdna4.torch.gemm`` on a Hopper GPU (``cuda(arch="sm_90a")``):
with the buckets weighing swap (``gemm_cost.WEIGH_SWAP_DYNAMIC``, off by default since its timing; on here, each
test's kernels built afresh) the torch op runs its shape class's bucket plan swapped (``Sm90Config.swap_ab``, with a
K split on the long-K down projection at M = 17 and 77) at M = 17, 77 and 200, against torch's product, with and without fused
steps. Skipped without such a GPU (passed on an H100, 2026-12-06, with the flag then on by default)."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.cuda(arch="sm_90a"),  # the project plugin (tvm_cdna4.testing)
              pytest.mark.usefixtures("swapped_buckets")]  # tests/gpu/conftest.py

import tvm_cdna4.torch as ours  # noqa: E402
from gemm_gpu import assert_fused_silu_matches  # noqa: E402

SHAPES = ((4608, 3584), (3584, 18944))


def _plan(N: int, K: int, M: int, fused: bool = False):
    # the kernel of (N, K) with (fused) or without fused steps: its key's Fusion (torch.kernel_cache) tells them
    # apart (the first of (N, K) alone may be another test's kernel of another epilogue)
    kernels = [k for key, k in ours.kernel_cache().items()
               if key[:2] == (N, K) and key[-1] == "sm90" and (not key[5].empty) == fused]
    assert len(kernels) == 1, "the torch op ran no (or more than one) sm90 kernel of this epilogue"
    return kernels[0].dynamic.plan(M)


@pytest.mark.parametrize("M, N, K, split", [(M, 4608, 3584, False) for M in (17, 77, 200)]  # Qwen2.5-7B's QKV
                         + [(M, 3584, 18944, True) for M in (17, 77)])  # and down (K split; unswapped at 193..256)
def test_the_torch_op_runs_the_swapped_bucket_plan(M, N, K, split):
    g = torch.Generator(device="cuda").manual_seed(M + N)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    b = torch.randn(N, K, device="cuda", generator=g).bfloat16()
    y = ours.gemm(a, b)
    p = _plan(N, K, M)
    assert p.config.swap_ab and (p.config.split_k > 1) == split, p.config
    ref = a.float() @ b.float().t()
    assert y.shape == (M, N) and not y.float().isnan().any()
    assert float((y.float() - ref).abs().max() / ref.abs().max()) <= 1e-2
    assert torch.equal(ours.gemm(a, b), y)  # a second launch: the split's workspace and tickets were left for it


@pytest.mark.parametrize("M", (17, 77, 200))
def test_the_swapped_plan_with_fused_steps_through_the_torch_op(M):
    N, K = 4608, 3584
    assert_fused_silu_matches(ours.gemm, M, N, K, seed=M)
    assert _plan(N, K, M, fused=True).config.swap_ab
