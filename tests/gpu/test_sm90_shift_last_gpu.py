"""The sm90 GEMM's shifted last tile row (``Sm90Config.shift_last``: the last token tile row loads its whole box at
``M - block``, inside the tokens, and stores only its own rows; ``kernels.sm90.gemm_shift``) through
``tvm_cdna4.torch.gemm`` on a Hopper GPU (``cuda(arch="sm_90a")``): with ``gemm_shift.SHIFT_LAST`` on (each setting's
kernels built afresh) the torch op's bucket plans shift at M past one tile, and their C is the unshifted kernel's bit
for bit (every row of the wgmma product depends only on its row of A: the box's position changes no sum; an ordered K
split alike), within the bound of torch's product, with and without fused steps."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

import tvm_cdna4.torch as ours  # noqa: E402
from gemm_gpu import assert_fused_silu_matches, assert_near_the_product, random_ab, sm90_plan_config  # noqa: E402

SHAPES = ((3584, 18944), (3584, 3584), (1000, 1032))


def _config(N: int, K: int, M: int, fused: bool = False):
    return sm90_plan_config(ours, N, K, M, fused)


def _both(planner_flags, run):
    """``run()`` with ``SHIFT_LAST`` off, then on (the torch op's kernels built afresh for each)."""
    from tvm_cdna4.kernels.sm90 import gemm_shift

    planner_flags(gemm_shift, SHIFT_LAST=False)
    off = run()
    planner_flags(gemm_shift, SHIFT_LAST=True)
    return off, run()


@pytest.mark.parametrize("M, N, K", [(200, 3584, 18944), (300, 3584, 18944),  # Qwen2.5-7B down: issue 36's worst
                                     (77, 3584, 3584), (260, 3584, 3584),  # o: a swapped bucket, then 64-row tiles
                                     (129, 1000, 1032), (200, 1000, 1032)])  # N and K not multiples of 64
def test_the_shifted_bucket_plan_stores_the_unshifted_kernel_s_c(planner_flags, M, N, K):
    a, b = random_ab(torch, M, N, K)
    off, on = _both(planner_flags, lambda: ours.gemm(a, b))
    cfg = _config(N, K, M)
    assert cfg.shift_last
    assert_near_the_product(on, a, b)
    if cfg.reduction == "ordered":  # atomics add in the order they land
        assert torch.equal(on, off)


def test_a_shifted_plan_with_fused_steps_through_the_torch_op(planner_flags):
    M, N, K = 200, 3584, 3584  # the residual and the bias read at the shifted rows
    off, on = _both(planner_flags, lambda: assert_fused_silu_matches(ours.gemm, M, N, K, seed=M))
    assert _config(N, K, M, fused=True).shift_last
    assert torch.equal(on, off)
