"""Shared checks of the paged decode kernels in the CUDA emulator (CPU)."""

import numpy as np
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.sm80 import paged_target


def assert_lying_data_stay_inside(p, problem, arrays) -> None:
    """``p`` run in the CUDA emulator on ``arrays`` whose lengths or block table lie (the emulator raises on any access
    outside a buffer): O and the LSE within the bound of the reference of the clamped data, O finite."""
    (o, lse), where = paged_target.execute(p, arrays)
    assert where.startswith("the CUDA emulator")
    o_ratio, lse_ratio = paged.compare(problem, arrays, o, lse)
    assert 0 < o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)
    assert np.isfinite(np.asarray(o, np.float64)).all()
