"""End to end on the sm90 CUDA emulator: one warpgroup computes a 64 x N x 64 bf16 GEMM tile; a producer
warp's elected lane (``elect.sync``) loads A and B by TMA with 128B swizzle onto one mbarrier with
expect-tx; the warpgroup waits on it, runs four wgmma m64nNk16 (SS) over K, commits, waits for the group
and stores the accumulators. The result equals numpy's; removing the wait_group or the mbarrier wait is
reported."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hopper_kernels import wgmma_gemm_kernel

from tvm_cdna4.emulator import EmulationError, compare, emulate

BF16 = ml_dtypes.bfloat16


def _run(n=64, **kw):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 64)).astype(BF16)
    bt = rng.standard_normal((n, 64)).astype(BF16)
    c = np.full((64, n), np.nan, np.float32)
    emulate(wgmma_gemm_kernel(n=n, **kw), a, bt, c, target="sm90")
    return c, a.astype(np.float64) @ bt.astype(np.float64).T


def test_tma_wgmma_tile_equals_numpy():
    got, want = _run()
    assert compare("C", got, want, rtol=1e-5, atol=1e-5).startswith("C: 4096 elements match")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_missing_wait_group_is_reported():
    with pytest.raises(EmulationError, match="read of register 'acc' byte 0 while a wgmma.mma_async.m64n16k16"):
        _run(n=16, wait_group=False)


def test_missing_mbarrier_wait_is_reported():
    with pytest.raises(EmulationError, match=r"read of LDS 'S[AB]' byte 0 while an asynchronous copy into it is "
                                             r"still in flight"):
        _run(n=16, wait_bar=False)
