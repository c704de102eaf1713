"""The shifted last tile row with TMA stores (``gemm_shift.SHIFT_TMA``: the tile whose box starts at ``M - block`` stores
its own rows from registers, ``gemm_epilogue.store_shifted``; every other tile with TMA) through ``tvm_cdna4.torch.gemm``
on a Hopper GPU (``cuda(arch="sm_90a")``): with the flag on (each setting's kernels built afresh) the torch op's
TMA-store bucket plans at M = 260..333 shift, and their C is the unshifted TMA kernel's bit for bit (the box's position
changes no row's sum), within the bound of torch's product, with and without fused steps."""

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda(arch="sm_90a")  # the project plugin (tvm_cdna4.testing)

import tvm_cdna4.torch as ours  # noqa: E402
from gemm_gpu import assert_fused_silu_matches, assert_near_the_product, random_ab, sm90_plan_config  # noqa: E402

SHAPES = ((4608, 3584), (8192, 3584), (7680, 5120), (5120, 5120))


def _config(N: int, K: int, M: int, fused: bool = False):
    return sm90_plan_config(ours, N, K, M, fused)


def _both(planner_flags, run):
    """``run()`` with ``SHIFT_TMA`` off, then on (``SHIFT_LAST`` on; the torch op's kernels built afresh for each)."""
    from tvm_cdna4.kernels.sm90 import gemm_shift

    planner_flags(gemm_shift, SHIFT_LAST=True, SHIFT_TMA=False)
    off = run()
    planner_flags(gemm_shift, SHIFT_LAST=True, SHIFT_TMA=True)
    return off, run()


@pytest.mark.parametrize("M, N, K", [(260, 8192, 3584), (300, 7680, 5120),  # Gemma-2-9B / Phi-3-medium QKV
                                     (333, 4608, 3584), (333, 5120, 5120)])  # Qwen2.5-7B QKV, Phi-3-medium o
def test_the_shifted_tma_bucket_plan_stores_the_unshifted_kernel_s_c(planner_flags, M, N, K):
    a, b = random_ab(torch, M, N, K)
    off, on = _both(planner_flags, lambda: ours.gemm(a, b))
    cfg = _config(N, K, M)
    assert cfg.shift_last and cfg.epilogue == "tma"
    assert_near_the_product(on, a, b)
    assert torch.equal(on, off)


def test_a_shifted_tma_plan_with_fused_steps_through_the_torch_op(planner_flags):
    M, N, K = 333, 4608, 3584  # the bias and the residual read at the shifted rows
    off, on = _both(planner_flags, lambda: assert_fused_silu_matches(ours.gemm, M, N, K, seed=M))
    cfg = _config(N, K, M, fused=True)
    assert cfg.shift_last and cfg.epilogue == "tma"
    assert torch.equal(on, off)


@pytest.mark.parametrize("M, N, K", [(300, 7680, 5120), (333, 4608, 3584)])  # a shallow last tile (44 rows), a deep one (77)
def test_the_half_setting_shifts_only_the_shallow_last_tile_and_stores_the_unshifted_c(planner_flags, M, N, K):
    # gemm_shift.HALF: the bucket plan's kernel picks at run time; at 333 the 128-row tile's box stays at its own row
    from tvm_cdna4.kernels.sm90 import gemm_shift

    a, b = random_ab(torch, M, N, K)
    planner_flags(gemm_shift, SHIFT_LAST=True, SHIFT_TMA=False)
    off = ours.gemm(a, b)
    planner_flags(gemm_shift, SHIFT_LAST=True, SHIFT_TMA=gemm_shift.HALF)
    half = ours.gemm(a, b)
    cfg = _config(N, K, M)
    assert cfg.shift_last and cfg.epilogue == "tma"
    assert_near_the_product(half, a, b)
    assert torch.equal(half, off)
