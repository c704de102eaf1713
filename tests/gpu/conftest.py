"""Fixtures of the GPU tests (each file skips without its GPU: ``pytest.mark.cuda``)."""

import pytest


@pytest.fixture
def planner_flags(request, monkeypatch):
    """``planner_flags(module, name=value, ...)``: set the planners' flags for the test and build the torch op's kernels
    of the test module's ``SHAPES`` ((N, K) pairs) afresh, now and after the test."""
    import tvm_cdna4.torch as ours

    shapes = request.module.SHAPES

    def drop():
        for key in [k for k in ours.kernel_cache() if k[:2] in shapes]:
            del ours.kernel_cache()[key]

    def setting(module, **flags):
        for name, value in flags.items():
            monkeypatch.setattr(module, name, value)
        drop()
    yield setting
    drop()


@pytest.fixture
def swapped_buckets(planner_flags):
    """Every sm90 dynamic-M bucket to ``TMA_BOX_MAX`` weighs swap (``gemm_cost.WEIGH_SWAP_DYNAMIC``; by default only those
    to ``SWAP_DYNAMIC_MAX_M``) in up to four tiles of M (``SWAP_M_TILES``; by default one), as before stop 50, and the
    torch op's kernels of the test module's ``SHAPES`` ((N, K) pairs) are built afresh before and after the test."""
    from tvm_cdna4.kernels.sm90 import gemm_cost

    planner_flags(gemm_cost, WEIGH_SWAP_DYNAMIC=True, SWAP_DYNAMIC_MAX_M=gemm_cost.TMA_BOX_MAX, SWAP_M_TILES=4)
