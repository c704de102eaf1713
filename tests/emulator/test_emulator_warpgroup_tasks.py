"""Warp-specialized branches split by warpgroup in the CUDA emulator (``emulator/tasks.py``): a branch
with a named-barrier ``bar.arrive`` runs one task per warpgroup, so a warpgroup's ``bar.sync`` that
comes before the other's ``bar.arrive`` in program order waits for it (the sm90 ping-pong schedule's
ordering); a ``bar.sync`` no arrival completes is still a deadlock (docs/emulator.md,
"Warp-specialized branches")."""

from __future__ import annotations

import numpy as np
import pytest
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from tvm_cdna4.emulator import EmulationError, emulate

ORDER = 3


def relay_kernel(arrive=True):
    """384 threads: warpgroup 0 (the producer) writes ``A`` into shared ``SM`` and arrives on the mbarrier
    ``BAR`` (count 128); warpgroups 1 and 2 wait on it. Warpgroup 1 first ``bar.sync``s barrier ``ORDER``
    (256 threads), then copies ``SM`` reversed to ``Out``; warpgroup 2 (later in program order) doubles
    ``SM`` and ``bar.arrive``s on ``ORDER``: ``Out[k] = 2 A[127 - k]``. ``arrive=False`` drops that arrive."""

    @T.function
    def kernel(A: T.Tensor((128,), "int32"), Out: T.Tensor((128,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=384))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((128,), "int32", scope="shared", layout="default", align=16)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint64", scope="shared", layout="default", align=8)])
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(128))
        T.cuda.cta_sync()
        if tid < 128:
            SM[tid] = A[tid]
            T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([0]), T.uint32(1))
        else:
            T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
            if tid < 256:
                T.ptx["bar.sync"](ORDER, 256)
                Out[tid - 128] = SM[255 - tid]
            else:
                SM[tid - 256] = SM[tid - 256] * 2
                if I.constexpr(arrive):
                    T.ptx["bar.arrive"](ORDER, 256)

    return kernel


def test_a_bar_sync_waits_for_a_later_warpgroups_arrive():
    a = np.arange(128, dtype=np.int32) * 3 + 1
    out = np.full(128, -1, np.int32)
    emulate(relay_kernel(), a, out, target="sm90")
    np.testing.assert_array_equal(out, 2 * a[::-1])


def test_a_missing_arrive_is_still_a_deadlock():
    with pytest.raises(EmulationError, match=r"deadlock on barrier 3: warps \[4, 5, 6, 7\] wait with 128 of 256 "
                                             r"threads arrived \(warps \[4, 5, 6, 7\]\)"):
        emulate(relay_kernel(arrive=False), np.zeros(128, np.int32), np.zeros(128, np.int32), target="sm90")
