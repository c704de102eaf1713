"""wgmma in the sm90 CUDA emulator (emulator/ptx_wgmma.py, isa/hopper_layout.py): SS and RS forms, f16 /
bf16 / fp8 inputs, every descriptor swizzle (shared tiles laid out by TIRx's own layouts), K- and MN-major
B, imm-scale-a; a read of the accumulator before the wait_group, and a shared write to an operand of a
wgmma in flight, are reported. The end-to-end tile (TMA + mbarrier expect-tx + elect.sync + wgmma) is in
test_emulator_hopper_gemm.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hopper_kernels import wgmma_gemm_kernel

from tvm_cdna4.emulator import EmulationError, emulate

RNG = np.random.default_rng(7)


def _gemm(n=64, dtype="bfloat16", width=128, trans_b=False, **kw):
    """(C from the emulator, numpy's A @ B): small-integer data, so both are exact."""
    dt = np.dtype(getattr(ml_dtypes, dtype, dtype))
    K = (width or 32) // dt.itemsize
    if trans_b:
        n = (width or 32) // dt.itemsize
    a = RNG.integers(-3, 4, (64, K)).astype(dt)
    b = RNG.integers(-3, 4, (K, n)).astype(dt)
    c = np.full((64, n), np.nan, np.float32)
    emulate(wgmma_gemm_kernel(n=n, dtype=dtype, width=width, trans_b=trans_b, tma=False, **kw), a,
            b if trans_b else np.ascontiguousarray(b.T), c, target="sm90")
    sign = -1 if kw.get("negate") else 1
    return c, sign * (a.astype(np.float64) @ b.astype(np.float64))


@pytest.mark.parametrize("width,trans_b", [(0, False), (0, True), (32, False), (32, True), (64, False),
                                           (64, True), (128, True)])
def test_ss_descriptor_layouts(width, trans_b):
    got, want = _gemm(n=16, width=width, trans_b=trans_b)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype,form,n,kw", [
    ("bfloat16", "rs", 64, {"negate": True}),
    ("float16", "ss", 32, {}),
    ("float8_e4m3fn", "ss", 16, {}),
    ("float8_e5m2", "rs", 24, {}),
    ("bfloat16", "rs", 16, {"width": 0, "trans_b": True}),
])
def test_forms_and_types(dtype, form, n, kw):
    got, want = _gemm(n=n, dtype=dtype, form=form, **kw)
    np.testing.assert_array_equal(got, want)


def test_accumulator_read_before_wait_group_is_reported():
    with pytest.raises(EmulationError, match=r"read of register 'acc' byte 0 while a wgmma.mma_async.m64n16k16 "
                                             r"using it is still in flight .*missing wgmma.wait_group"):
        _gemm(n=16, width=32, wait_group=False)


def test_shared_write_to_an_operand_before_wait_group_is_reported():
    with pytest.raises(EmulationError, match=r"write of shared 'SA' byte \d+ while a wgmma.mma_async.m64n16k16 reading "
                                             r"it is still in flight"):
        _gemm(n=16, width=32, overwrite=True)
