"""``mbarrier`` in the CUDA emulator (emulator/mbarrier.py): a two-slot full/empty ring between a
producer warp and a consumer warp, with plain stores (``mbarrier.arrive``) or ``cp.async`` copies
(``cp.async.mbarrier.arrive.noinc``); a missing arrive is a deadlock, a producer that does not wait
for "empty" overwrites a slot too early (a race), a consumer that does not wait reads in flight."""

from __future__ import annotations

import numpy as np
import pytest
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from tvm_cdna4.emulator import EmulationError, emulate

ROUNDS, SLOTS = 4, 2


def ring_kernel(copy=False, wait_empty=True, wait_full=True, arrive_full=True, poll=False):
    """96 threads: warp 0 produces ``ROUNDS`` rows of ``A`` (8 x int32 each... 32 lanes x 4 bytes) into
    ``SLOTS`` shared slots; warps 1 and 2 consume each round (``Out[w - 1, r] = slot reversed``). Barriers
    ``FULL[s]`` (count 32: every producer lane arrives) and ``EMPTY[s]`` (count 2: lane 0 of each
    consumer warp); round ``r`` uses slot ``r % 2`` with parity ``(r / 2) % 2``; the producer waits
    on EMPTY with the opposite parity (the first pass succeeds at once)."""

    @T.function
    def kernel(A: T.Tensor((ROUNDS, 32), "int32"), Out: T.Tensor((2, ROUNDS, 32), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
        tid = T.cuda.thread_idx("x")
        lane = tid % 32
        SM = T.alloc_tensor(ty_args=[T.Tensor((SLOTS, 32), "int32", scope="shared", layout="default", align=16)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((2 * SLOTS,), "uint64", scope="shared", layout="default", align=8)])
        ok = T.local_scalar("uint32")
        if tid == 0:
            for s in range(SLOTS):
                T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([s]), T.uint32(32))
                T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([SLOTS + s]), T.uint32(2))
        T.cuda.cta_sync()
        for r in range(ROUNDS):
            if tid < 32:
                if I.constexpr(wait_empty):
                    T.cuda.mbarrier_wait(BAR.ptr_to([SLOTS + r % SLOTS]), (r // SLOTS) % 2 ^ 1)
                if I.constexpr(copy):
                    T.ptx["cp.async.ca.shared.global"](SM.ptr_to([r % SLOTS, lane]), A.ptr_to([r, lane]), 4)
                    if I.constexpr(arrive_full):
                        T.ptx["cp.async.mbarrier.arrive.noinc.shared.b64"](BAR.ptr_to([r % SLOTS]))
                else:
                    SM[r % SLOTS, lane] = A[r, lane]
                    if I.constexpr(arrive_full):
                        T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([r % SLOTS]), T.uint32(1))
            else:
                if I.constexpr(wait_full):
                    if I.constexpr(poll):
                        ok = T.uint32(0)
                        while ok == 0:
                            T.ptx.mbarrier.test_wait.parity.shared.b64(ok, BAR.ptr_to([r % SLOTS]),
                                                                       T.uint32((r // SLOTS) % 2))
                    else:
                        T.cuda.mbarrier_wait(BAR.ptr_to([r % SLOTS]), (r // SLOTS) % 2)
                Out[tid // 32 - 1, r, lane] = SM[r % SLOTS, 31 - lane]
                T.cuda.warp_sync()
                if lane == 0:
                    T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([SLOTS + r % SLOTS]), T.uint32(1))

    return kernel


def _run(**kw):
    a = (np.arange(ROUNDS * 32, dtype=np.int32) * 5).reshape(ROUNDS, 32)
    out = np.full((2, ROUNDS, 32), -1, np.int32)
    emulate(ring_kernel(**kw), a, out, target="sm80")
    return a, out


@pytest.mark.parametrize("copy,poll", [(False, False), (True, False), (False, True)])
def test_full_empty_ring(copy, poll):
    a, out = _run(copy=copy, poll=poll)
    np.testing.assert_array_equal(out, np.stack([a[:, ::-1]] * 2))


def test_missing_arrive_is_a_deadlock():
    with pytest.raises(EmulationError, match=r"deadlock: mbarrier 'BAR' byte 0: waiting for the phase of parity 0; "
                                             r"0 phases completed, 32 of 32 arrivals pending"):
        _run(arrive_full=False)


def test_overwrite_before_empty_is_a_race():
    with pytest.raises(EmulationError, match="race on LDS 'SM' .* read by wave [12] and then written by wave 0"):
        _run(wait_empty=False)


@pytest.mark.parametrize("copy", [False, True])
def test_read_without_full_wait(copy):
    want = "still in flight" if copy else "race on LDS 'SM' .* written by wave 0 and read by wave 1"
    with pytest.raises(EmulationError, match=want):
        _run(copy=copy, wait_full=False)


def test_copies_land_by_their_own_arrivals_stamp():
    """Warp 0 copies slot 0 then arrives on FULL[0], copies slot 1 then arrives on FULL[1]; warp 2 waits on
    FULL[1] (which lands slot 0's copy too), then warp 1 on FULL[0]. Slot 0's copy completed before the
    FULL[0] arrival, so that wait orders warp 1's read of it (the sm80 attention's mbarrier ring met this
    across workgroups of uneven causal length: a race reported on a correctly synchronized read)."""

    @T.function
    def kernel(A: T.Tensor((2, 32), "int32"), Out: T.Tensor((2, 32), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
        tid = T.cuda.thread_idx("x")
        lane = tid % 32
        SM = T.alloc_tensor(ty_args=[T.Tensor((2, 32), "int32", scope="shared", layout="default", align=16)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((2,), "uint64", scope="shared", layout="default", align=8)])
        if tid == 0:
            for s in range(2):
                T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([s]), T.uint32(32))
        T.cuda.cta_sync()
        if tid < 32:
            for s in range(2):
                T.ptx["cp.async.ca.shared.global"](SM.ptr_to([s, lane]), A.ptr_to([s, lane]), 4)
                T.ptx["cp.async.mbarrier.arrive.noinc.shared.b64"](BAR.ptr_to([s]))
        if tid >= 64:
            T.cuda.mbarrier_wait(BAR.ptr_to([1]), 0)
            Out[1, lane] = SM[1, 31 - lane]
        if tid >= 32 and tid < 64:
            T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
            Out[0, lane] = SM[0, 31 - lane]

    a = (np.arange(64, dtype=np.int32) * 3).reshape(2, 32)
    out = np.full((2, 32), -1, np.int32)
    emulate(kernel, a, out, target="sm80")
    np.testing.assert_array_equal(out, a[:, ::-1])
