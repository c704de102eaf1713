"""sm90: the generic-to-async proxy fence (PTX ISA 9.4 §9.7.15.4 ``fence.proxy.async``; the async proxy of
§9.7.10.28 and §9.7.17).

A thread's generic-proxy write of shared memory (``st.shared``, a ``cp.async``) is visible to the async proxy (a
TMA store reading its box, a wgmma reading a descriptor operand) only after the WRITING thread's
``fence.proxy.async`` (no space, ``.shared::cta`` or ``.shared::cluster``), and that fence must be ordered before
the async-proxy read (a barrier or an mbarrier wait after it, or the reading thread's own program order). A TMA
load writes through the async proxy (its mbarrier's complete-tx orders it for generic readers): no fence needed.
The rule is the conservative one, the pattern of the CUDA programming guide's TMA example and CUTLASS
(``fence_view_async_shared`` before the barrier): a fence run only by the READING thread after the barrier, which a
reading of the memory model's cumulativity may admit, is reported too. No kernel of the package relies on it.

Bookkeeping, all vectorized: per shared byte, the thread whose generic write is its last write (-1: none or an
async-proxy write, ``Buffer.proxy_writer``) and that thread's count of fences at the time (``Buffer.proxy_count``);
per thread, its count of fences that followed a generic shared write and the epochs of its last ``RING`` such
fences (:class:`ProxyFences`). A read is unfenced where the writer's count has not moved since the write, and
late where the fence that covers the write is not ordered before the reader (``Machine.unordered``).
"""

from __future__ import annotations

import numpy as np

from .errors import EmulationError

RING = 4
"""Fences per thread whose epochs are kept: an older fence counts as ordered before any read."""

COVERS_SHARED = (None, "shared::cta", "shared::cluster")
"""The ``fence.proxy.async`` state spaces that cover a CTA's shared memory (none: all of them)."""


class ProxyFences:
    """Per thread (``machine.state["proxy"]``): fences after a generic shared write, and their epochs."""

    def __init__(self, machine):
        T = machine.nthreads
        self.machine = machine
        self.count = np.zeros(T, np.int64)
        self.dirty = np.zeros(T, bool)  # a generic shared write since the thread's last fence
        self.epochs = np.zeros((T, RING), np.int64)  # fence n of thread t at [t, n % RING]

    def fence(self, mask) -> None:
        m = self.machine
        t = np.flatnonzero(m.active(mask) & self.dirty)
        self.epochs[t, self.count[t] % RING] = m.epoch[m.wg_of[t]]
        self.count[t] += 1
        self.dirty[t] = False


def _fences(machine) -> ProxyFences:
    return machine.state_of("proxy", ProxyFences)


def record_write(machine, buf, i, b, t, generic: bool) -> None:
    """Bytes ``b`` of instances ``i`` written by threads ``t`` (one per byte) through the generic proxy or
    (``generic=False``) the async one."""
    if buf.proxy_writer is None:
        if not generic:
            return
        buf.proxy_writer = np.full(buf.data.shape, -1, np.int32)
        buf.proxy_count = np.zeros(buf.data.shape, np.int64)
    if not generic:
        buf.proxy_writer[i, b] = -1
        return
    p = _fences(machine)
    buf.proxy_writer[i, b] = t
    buf.proxy_count[i, b] = p.count[t]
    p.dirty[t] = True


def check_read(machine, buf, i, b, t, reader: str, where: str) -> None:
    """An async-proxy read by ``reader`` (threads ``t``) of bytes ``b`` of instances ``i``: each byte's last
    generic write must be fenced by its writer, the fence ordered before this read."""
    if buf.proxy_writer is None:
        return
    w = buf.proxy_writer[i, b]
    has = w >= 0
    if not has.any():
        return
    i, b, t, w = i[has], b[has], t[has], w[has]
    p = _fences(machine)
    n = buf.proxy_count[i, b]
    unfenced = p.count[w] == n
    if unfenced.any():
        _raise(machine, buf, i, b, t, w, unfenced, reader, "with no fence.proxy.async by the writer between", where)
    recent = p.count[w] - n <= RING
    late = recent & machine.unordered(i, machine.wave_of[t], machine.wave_of[w], p.epochs[w, n % RING])
    if late.any():
        _raise(machine, buf, i, b, t, w, late, reader, "and the writer's fence.proxy.async is not ordered before the "
               "read (the writer must fence before the barrier or mbarrier arrival that orders its write before "
               "the read)", where)


def _raise(machine, buf, i, b, t, w, bad, reader: str, what: str, where: str):
    k = int(np.argmax(bad))
    g, wave, lane = machine.coords(int(w[k]))
    raise EmulationError(f"shared '{buf.name}' byte {int(b[k])}: written by the generic proxy (wave {wave} lane {lane} "
                         f"of workgroup {g}) and read by the async proxy ({reader}) {what}", where,
                         *machine.coords(int(t[k])))
