"""TMA (``cp.async.bulk.tensor``) and mbarrier transaction counts in the sm90 CUDA emulator
(emulator/ptx_tma.py, emulator/mbarrier.py): TIRx's TMA tile pattern, its host-encoded tensor map, the
swizzled shared box, out-of-bounds zeros on load and clipping on store; a read before the mbarrier wait
is reported, and a store's box rewritten before the storing thread's wait_group.read retired its read."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hopper_kernels import tma_3d_kernel, tma_copy_kernel

from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.isa.hopper_layout import swizzle

BF16 = ml_dtypes.bfloat16


def _a(rows, cols):
    return (np.arange(rows * cols) % 251).reshape(rows, cols).astype(BF16)


def test_load_128b_swizzle_fills_out_of_bounds_rows_with_zeros():
    a = _a(20, 64)
    out = np.full((16, 64), np.nan, BF16)
    emulate(tma_copy_kernel(shape=(20, 64), box=(16, 64), coords=(8, 0)), a, out, target="sm90")
    want = np.zeros((16, 64), BF16)
    want[:12] = a[8:]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("width", [32, 64])
def test_load_narrow_swizzles(width):
    a = _a(16, width // 2)
    out = np.zeros_like(a)
    emulate(tma_copy_kernel(shape=a.shape, box=a.shape, width=width), a, out, target="sm90")
    np.testing.assert_array_equal(out, a)


def test_store_clips_out_of_bounds_rows():
    a = _a(20, 64)
    out = np.zeros((20, 64), BF16)
    emulate(tma_copy_kernel(shape=(20, 64), box=(16, 64), coords=(8, 0), store=True), a, out, target="sm90")
    want = np.zeros((20, 64), BF16)
    want[8:] = a[8:]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("rewrite, words", [
    ("ordered", None),
    # a barrier orders the store's issue, not its read: the box is read until the storing thread's wait_group.read
    ("no_wait", r"write of shared 'SM' byte 0 while a TMA store \(cp.async.bulk.tensor\) reading it is still in "
                r"flight \(issued, not retired: missing cp.async.bulk.wait_group.read\)"),
    # the wait after the barrier: warp 2's write is not ordered after the retirement
    ("wait_after_barrier", r"race on shared 'SM' byte 0: read by a TMA store of wave 0 \(retired at its "
                           r"cp.async.bulk.wait_group.read\) and then written by wave 2 with no barrier"),
])
def test_a_store_box_rewritten_before_its_read_retired_is_reported(rewrite, words):
    a = _a(16, 64)
    out = np.zeros((16, 64), BF16)
    kernel = tma_copy_kernel(shape=(16, 64), box=(16, 64), store=True, rewrite=rewrite)
    if words is None:
        emulate(kernel, a, out, target="sm90")
        np.testing.assert_array_equal(out, a)  # the store read the box before the rewrite
        return
    with pytest.raises(EmulationError, match=words):
        emulate(kernel, a, out, target="sm90")


def test_read_before_the_mbarrier_wait_is_reported():
    with pytest.raises(EmulationError, match=r"read of LDS 'SM' byte 0 while an asynchronous copy into it is still "
                                             r"in flight .*an mbarrier wait for cp.async.bulk.tensor"):
        emulate(tma_copy_kernel(shape=(8, 64), box=(8, 64), wait=False), _a(8, 64), np.zeros((8, 64), BF16),
                target="sm90")


def test_arrival_without_expect_tx_completes_the_phase_before_the_bytes_land():
    """Without expect-tx the phase completes at the arrival: the wait passes and the box is still in flight."""
    with pytest.raises(EmulationError, match="still in flight"):
        emulate(tma_copy_kernel(shape=(8, 64), box=(8, 64), expect=False), _a(8, 64), np.zeros((8, 64), BF16),
                target="sm90")


def test_swizzle_is_the_xor_of_the_16_byte_chunk_with_the_128_byte_row():
    assert swizzle(0, 128) == 0 and swizzle(128, 128) == 128 + 16 and swizzle(7 * 128 + 16, 128) == 7 * 128 + 6 * 16
    assert swizzle(3 * 128 + 32, 64) == 3 * 128 + 16 and swizzle(128 + 16, 32) == 128
    assert all(swizzle(swizzle(a, w), w) == a for a in range(0, 2048, 16) for w in (32, 64, 128))


def test_3d_box_with_an_outer_and_an_inner_dimension_out_of_bounds():
    a = np.arange(4 * 4 * 16, dtype=np.float32).reshape(4, 4, 16) + 1
    out = np.full((2, 4, 16), np.nan, np.float32)
    emulate(tma_3d_kernel(coords=(3, 1, -4)), a, out, target="sm90")
    want = np.zeros((2, 4, 16), np.float32)
    want[0, :3, 4:] = a[3, 1:, :12]
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("strides, box, swz, words", [
    ((96,), (32, 13), 0, r"globalStrides\[0\] = 96 \(a multiple of 16 of at least 192 bytes"),  # f32 rows of 48
    ((200,), (32, 13), 0, r"globalStrides\[0\] = 200"),  # not whole 16-byte chunks
    ((192,), (48, 300), 0, r"boxDim\[1\] = 300 \(1..256\)"),
    ((192,), (36, 8), 128, r"boxDim\[0\] x 4 bytes = 144 \(whole 16-byte chunks, at most the 128-byte swizzle\)"),
    ((192,), (32, 13), 0, r"globalAddress at byte 8 of the tensor \(16-byte aligned\)"),
])
def test_a_tensor_map_the_driver_would_refuse_is_reported(strides, box, swz, words):
    from tvm_cdna4.emulator.ptx_tma import TensorMap, check_encoding

    def tmap(strides, box, swz, origin=0):
        return TensorMap("residual", None, origin, np.dtype(np.float32), (48, 77), strides, box, (1, 1), 0, swz, False)

    check_encoding(tmap((192,), (32, 13), 0))  # f32 rows of 48: 192 bytes, a 128-byte box row
    with pytest.raises(EmulationError, match=words):
        check_encoding(tmap(strides, box, swz, 8 if "globalAddress" in words else 0))
