"""The generic-to-async proxy fence in the sm90 CUDA emulator (emulator/proxy.py): 128 threads write a shared box
with st.shared, then thread 0 TMA-stores it. The writers' ``fence.proxy.async`` before the barrier makes the writes
visible to the store; without it, or with the fence after the barrier, the store may read stale shared memory on a
GPU, and the emulator reports it. A TMA-loaded box stored back needs no fence (the async proxy wrote it)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hopper_kernels import TMA_STORE, swizzled, tma_copy_kernel

from tvm_cdna4.emulator import EmulationError, emulate
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

BF16 = ml_dtypes.bfloat16
ROWS, COLS = 16, 64


def written_then_stored(fence: str, space: str = "shared::cta"):
    """Each of 128 threads writes 8 elements of the 16x64 bf16 box ``SM`` (128-byte swizzle), ``+ 1`` on ``A``'s;
    ``fence``: each thread's ``fence.proxy.async.<space>`` before the CTA barrier (``"before"``), after it
    (``"after"``) or none (``"none"``); then thread 0 TMA-stores the box to ``Out`` and waits."""

    @T.function
    def kernel(A: T.Tensor((ROWS, COLS), "bfloat16"), Out: T.Tensor((ROWS, COLS), "bfloat16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((ROWS, COLS), "bfloat16", scope="shared",
                                              layout=swizzled(ROWS, COLS, 128), align=1024)])
        for i in range(ROWS * COLS // 128):
            e = i * 128 + tid
            SM[e // COLS, e % COLS] = T.Cast("bfloat16", T.Cast("float32", A[e // COLS, e % COLS]) + T.float32(1))
        if I.constexpr(fence == "before"):
            T.ptx[f"fence.proxy.async.{space}"]()
        T.cuda.cta_sync()
        if I.constexpr(fence == "after"):
            T.ptx[f"fence.proxy.async.{space}"]()
        if tid == 0:
            T.cuda.tile.apply(T.ptx[TMA_STORE], Out[0:ROWS, 0:COLS], SM[0:ROWS, 0:COLS], box=(ROWS, COLS),
                              coords=(0, 0), swizzle=3)
            T.ptx["cp.async.bulk.commit_group"]()
            T.ptx["cp.async.bulk.wait_group"](0)

    return kernel


def _a():
    return (np.arange(ROWS * COLS) % 251).reshape(ROWS, COLS).astype(BF16)


@pytest.mark.parametrize("space", ["shared::cta", "shared::cluster"])
def test_the_writers_fence_before_the_barrier_lets_the_store_read_the_box(space):
    a, out = _a(), np.zeros((ROWS, COLS), BF16)
    emulate(written_then_stored("before", space), a, out, target="sm90")
    np.testing.assert_array_equal(out, (a.astype(np.float32) + 1).astype(BF16))


@pytest.mark.parametrize("fence, words", [
    ("none", r"shared 'SM' byte 0: written by the generic proxy \(wave 0 lane 0 of workgroup 0\) and read by the "
             r"async proxy \(the TMA store cp.async.bulk.tensor reading its box\) with no fence.proxy.async by the "
             r"writer between"),
    # lane 0 of wave 0 is the storing thread itself (program order): the first late byte is wave 1's
    ("after", r"written by the generic proxy \(wave 1 lane 0 of workgroup 0\) and read by the async proxy \(the TMA "
              r"store cp.async.bulk.tensor reading its box\) and the writer's fence.proxy.async is not ordered "
              r"before the read"),
])
def test_a_store_of_generic_writes_without_the_writers_fence_first_is_reported(fence, words):
    with pytest.raises(EmulationError, match=words):
        emulate(written_then_stored(fence), _a(), np.zeros((ROWS, COLS), BF16), target="sm90")


def test_a_global_only_fence_does_not_cover_shared_memory():
    with pytest.raises(EmulationError, match="with no fence.proxy.async by the writer between"):
        emulate(written_then_stored("before", "global"), _a(), np.zeros((ROWS, COLS), BF16), target="sm90")


def test_a_tma_loaded_box_stored_back_needs_no_fence():
    """The TMA load writes through the async proxy: the round trip (the kernel's fence is dropped) passes."""
    from hopper_kernels import dropping

    a, out = _a(), np.zeros((ROWS, COLS), BF16)
    kernel = dropping(tma_copy_kernel(shape=(ROWS, COLS), box=(ROWS, COLS), store=True), "tirx.ptx.fence_proxy", 1)
    emulate(kernel, a, out, target="sm90")
    np.testing.assert_array_equal(out, a)
