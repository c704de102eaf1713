"""Named barriers in the CUDA emulator (``bar.sync a, b`` / ``bar.arrive a, b``): a producer warp
hands a shared buffer to a consumer warp through a "full" barrier and takes it back for the next
round through an "empty" barrier; a missing arrive, a missing wait and a too-early overwrite are
reported (docs/emulator.md, "Named barriers")."""

from __future__ import annotations

import numpy as np
import pytest
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from tvm_cdna4.emulator import EmulationError, emulate

FULL, EMPTY = 1, 2


def handoff_kernel(arrive_full=True, wait_full=True, arrive_empty=True, wait_empty=True, full_count=64):
    """64 threads, two rounds: warp 0 writes ``round + A[lane]`` into the shared row, arrives on FULL;
    warp 1 waits on FULL, copies the row to ``Out[round]``, arrives on EMPTY; before round 1 warp 0
    waits on EMPTY. The flags drop one barrier operation each (misuse cases)."""

    @T.function
    def kernel(A: T.Tensor((32,), "int32"), Out: T.Tensor((2, 32), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        lane = tid % 32
        SM = T.alloc_tensor(ty_args=[T.Tensor((32,), "int32", scope="shared", layout="default", align=16)])
        for r in range(2):
            if tid < 32:
                if I.constexpr(wait_empty):
                    if r > 0:
                        T.ptx["bar.sync"](EMPTY, 64)
                SM[lane] = A[lane] + r
                if I.constexpr(arrive_full):
                    T.ptx["bar.arrive"](FULL, full_count)
            else:
                if I.constexpr(wait_full):
                    T.ptx["bar.sync"](FULL, full_count)
                Out[r, lane] = SM[31 - lane]
                if I.constexpr(arrive_empty):
                    if r == 0:
                        T.ptx["bar.arrive"](EMPTY, 64)

    return kernel


def _run(**kw):
    a = np.arange(32, dtype=np.int32) * 3
    out = np.full((2, 32), -1, np.int32)
    emulate(handoff_kernel(**kw), a, out, target="sm80")
    return a, out


def test_producer_consumer_handoff():
    a, out = _run()
    np.testing.assert_array_equal(out, np.stack([a[::-1], a[::-1] + 1]))


def test_missing_arrive_is_a_deadlock():
    with pytest.raises(EmulationError, match=r"deadlock on barrier 1: warps \[1\] wait with 32 of 64 threads arrived \(warps \[1\]\)"):
        _run(arrive_full=False)


def test_missing_wait_is_a_race():
    # warp 1 does not wait on FULL: its read is unordered with warp 0's write
    with pytest.raises(EmulationError, match="race on LDS .* written by wave 0 and read by wave 1"):
        _run(wait_full=False)


def test_too_early_overwrite_is_a_race():
    # warp 0 rewrites the row for round 1 without waiting until warp 1 has read round 0
    with pytest.raises(EmulationError, match="race on LDS .* read by wave 1 and then written by wave 0"):
        _run(wait_empty=False, arrive_empty=False)


def test_unfinished_phase_and_bad_counts():
    @T.function
    def lonely(Out: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        if tid < 32:
            T.ptx["bar.arrive"](3, 64)
        Out[tid] = tid

    with pytest.raises(EmulationError, match=r"barrier 3: 32 of 64 threads arrived \(warps \[0\]\) and the phase never"):
        emulate(lonely, np.zeros(64, np.int32), target="sm80")
    with pytest.raises(EmulationError, match="thread count 48 is not a positive multiple"):
        _run(full_count=48)


@pytest.mark.parametrize("relay", [True, False])
def test_a_barrier_orders_only_the_warps_it_joins(relay):
    """Warp 0 writes, hands to warp 1 on barrier 1; warp 2 reads warp 0's data only after warp 1
    relays on barrier 2 (ordering is transitive); without the relay warp 2's read is a race."""

    @T.function
    def kernel(A: T.Tensor((32,), "int32"), Out: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
        tid = T.cuda.thread_idx("x")
        lane = tid % 32
        SM = T.alloc_tensor(ty_args=[T.Tensor((32,), "int32", scope="shared", layout="default", align=16)])
        if tid < 32:
            SM[lane] = A[lane]
            T.ptx["bar.arrive"](1, 64)
        elif tid < 64:
            T.ptx["bar.sync"](1, 64)
            Out[lane] = SM[31 - lane]
            if I.constexpr(relay):
                T.ptx["bar.arrive"](2, 64)
        else:
            if I.constexpr(relay):
                T.ptx["bar.sync"](2, 64)
            Out[32 + lane] = SM[lane]

    a = np.arange(32, dtype=np.int32) + 7
    out = np.zeros(64, np.int32)
    if relay:
        emulate(kernel, a, out, target="sm80")
        np.testing.assert_array_equal(out, np.concatenate([a[::-1], a]))
    else:
        with pytest.raises(EmulationError, match="race on LDS .* written by wave 0 and read by wave 2"):
            emulate(kernel, a, out, target="sm80")
