"""sm90: the generic-to-async proxy fence (PTX ISA 9.4 §9.7.15.4 ``fence.proxy.async``; the async proxy of
§9.7.10.28 and §9.7.17).

A memory proxy is a method of memory access, and a proxy fence is required to synchronize memory operations across
different proxies (§8.6): §8.9.5's proxy-preserved base causality order relates only same-proxy accesses, so a generic
and an async-proxy access of one byte are unordered without one (two writes: unrelated in coherence order, §8.9.6, a
data race, §8.7.1). "Accessing the same memory location across multiple proxies needs a cross-proxy fence"
(§9.7.10.28.2), reads as writes. So a thread's generic-proxy access of shared memory (a write: ``st.shared``, a
``cp.async``; a read: ``ld.shared``) is ordered before a later async-proxy access of the same bytes only after THAT
thread's ``fence.proxy.async`` (no space, ``.shared::cta`` or ``.shared::cluster``), and that fence must be ordered
before the async-proxy access (a barrier or an mbarrier wait after it, or the issuing thread's own program order: the
TMA's operations are ordered after the issuing thread's prior instructions, §8.9.1.1). Checked: an async READ (a TMA
store's box, a wgmma's descriptor operand) after the byte's last generic write; an async WRITE (a TMA load's box)
after its last generic write and its last generic read (CUTLASS's epilogue fences before releasing a C buffer it
read). A TMA load writes through the async proxy and its completion is followed by an implicit generic-async proxy
fence (§9.7.10.28.2): an access after it needs no fence.
The rule is the conservative one, the pattern of the CUDA programming guide's TMA example and CUTLASS
(``fence_view_async_shared`` before the barrier): a fence run only by the async-proxy thread after the barrier,
which a reading of the memory model's cumulativity may admit, is reported too. No kernel of the package relies on it.

Bookkeeping, all vectorized: per shared byte, the thread whose generic write is its last write (-1: none or an
async-proxy write, ``Buffer.proxy_writer``) and that thread's count of fences at the time (``Buffer.proxy_count``),
the same for its last generic read since then (``proxy_reader``, ``proxy_rcount``: one reader, the last, is kept);
per thread, its count of fences that followed a generic shared access and the epochs of its last ``RING`` such
fences (:class:`ProxyFences`). An async access is unfenced where the thread's count has not moved since its access,
and late where the fence that covers it is not ordered before the async access (``Machine.unordered``).
"""

from __future__ import annotations

import numpy as np

from .errors import EmulationError

RING = 4
"""Fences per thread whose epochs are kept: an older fence counts as ordered before any async access."""

COVERS_SHARED = (None, "shared::cta", "shared::cluster")
"""The ``fence.proxy.async`` state spaces that cover a CTA's shared memory (none: all of them)."""


class ProxyFences:
    """Per thread (``machine.state["proxy"]``): fences after a generic shared access, and their epochs."""

    def __init__(self, machine):
        T = machine.nthreads
        self.machine = machine
        self.count = np.zeros(T, np.int64)
        self.dirty = np.zeros(T, bool)  # a generic shared write or read since the thread's last fence
        self.epochs = np.zeros((T, RING), np.int64)  # fence n of thread t at [t, n % RING]

    def fence(self, mask) -> None:
        m = self.machine
        t = np.flatnonzero(m.active(mask) & self.dirty)
        self.epochs[t, self.count[t] % RING] = m.epoch[m.wg_of[t]]
        self.count[t] += 1
        self.dirty[t] = False


def _fences(machine) -> ProxyFences:
    return machine.state_of("proxy", ProxyFences)


def _track(buf) -> None:
    if buf.proxy_writer is None:
        buf.proxy_writer, buf.proxy_reader = (np.full(buf.data.shape, -1, np.int32) for _ in range(2))
        buf.proxy_count, buf.proxy_rcount = (np.zeros(buf.data.shape, np.int64) for _ in range(2))


def record_write(machine, buf, i, b, t, generic: bool) -> None:
    """Bytes ``b`` of instances ``i`` written by threads ``t`` (one per byte) through the generic proxy or
    (``generic=False``) the async one; either ends the bytes' generic reads (a write after them is ordered after
    them: the LDS race check)."""
    if buf.proxy_writer is None:
        if not generic:
            return
        _track(buf)
    buf.proxy_reader[i, b] = -1
    if not generic:
        buf.proxy_writer[i, b] = -1
        return
    p = _fences(machine)
    buf.proxy_writer[i, b] = t
    buf.proxy_count[i, b] = p.count[t]
    p.dirty[t] = True


def record_read(machine, buf, i, b, t) -> None:
    """Bytes ``b`` of instances ``i`` read by threads ``t`` (one per byte) through the generic proxy: the byte's last
    such reader is kept (an async-proxy write after it needs that reader's fence)."""
    _track(buf)
    p = _fences(machine)
    buf.proxy_reader[i, b] = t
    buf.proxy_rcount[i, b] = p.count[t]
    p.dirty[t] = True


def check_read(machine, buf, i, b, t, reader: str, where: str) -> None:
    """An async-proxy read by ``reader`` (threads ``t``) of bytes ``b`` of instances ``i``: each byte's last
    generic write must be fenced by its writer, the fence ordered before this read."""
    if buf.proxy_writer is not None:
        _check(machine, buf.proxy_writer, buf.proxy_count, buf, i, b, t,
               f"written by the generic proxy ({{}}) and read by the async proxy ({reader})", "writer", "read", where)


def check_write(machine, buf, i, b, t, writer: str, where: str) -> None:
    """An async-proxy write by ``writer`` (issued by threads ``t``: a TMA load writing its box) of bytes ``b`` of
    instances ``i``: each byte's last generic write (write-after-write) and last generic read (write-after-read) must
    be fenced by its thread, the fence ordered before the issue (PTX ISA 9.4 §8.6, §9.7.10.28.2)."""
    if buf.proxy_writer is None:
        return
    for who, counts, did, role in ((buf.proxy_writer, buf.proxy_count, "written", "writer"),
                                   (buf.proxy_reader, buf.proxy_rcount, "read", "reader")):
        _check(machine, who, counts, buf, i, b, t, f"{did} by the generic proxy ({{}}) and then written by the async "
               f"proxy ({writer})", role, "async write", where)


def _check(machine, who, counts, buf, i, b, t, access: str, role: str, verb: str, where: str) -> None:
    """Each byte's generic access by thread ``who[i, b]`` (at its fence count ``counts[i, b]``) fenced by that
    thread, the fence ordered before the async-proxy access of threads ``t`` now."""
    w = who[i, b]
    has = w >= 0
    if not has.any():
        return
    i, b, t, w = i[has], b[has], t[has], w[has]
    p = _fences(machine)
    n = counts[i, b]
    unfenced = p.count[w] == n
    if unfenced.any():
        _raise(machine, buf, i, b, t, w, unfenced, access, f"with no fence.proxy.async by the {role} between", where)
    recent = p.count[w] - n <= RING
    late = recent & machine.unordered(i, machine.wave_of[t], machine.wave_of[w], p.epochs[w, n % RING])
    if late.any():
        _raise(machine, buf, i, b, t, w, late, access, f"and the {role}'s fence.proxy.async is not ordered before the "
               f"{verb} (the {role} must fence before the barrier or mbarrier arrival that orders its access before "
               f"the {verb})", where)


def _raise(machine, buf, i, b, t, w, bad, access: str, what: str, where: str):
    k = int(np.argmax(bad))
    g, wave, lane = machine.coords(int(w[k]))
    thread = f"wave {wave} lane {lane} of workgroup {g}"
    raise EmulationError(f"shared '{buf.name}' byte {int(b[k])}: {access.format(thread)} {what}", where,
                         *machine.coords(int(t[k])))
