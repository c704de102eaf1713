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
the same for its last generic read since then (``proxy_reader``, ``proxy_rcount``), and every earlier generic read
since then by another thread (``Buffer.proxy_more``: (instance, byte, thread, count) rows, one a byte and thread, made
only where a second thread reads a byte: two warps reading one slot, of which each owes its own fence); per thread,
its count of fences that followed a generic shared access and the epochs of its last ``RING`` such fences
(:class:`ProxyFences`). An async access is unfenced where the thread's count has not moved since its access, and
late where the fence that covers it is not ordered before the async access (``Machine.unordered``).

The write-after-read check of a TMA load does not depend on the emulator's interleaving of warps (a ring's "empty"
wait dropped, the case stop 55 left open): the load is checked at its issue, with the issuing thread's clock then,
against every generic reader recorded so far (the LDS race check of ``memory.check_lds_write`` and this module's); a
read the emulator runs later finds the bytes in flight (reported) or, once landed, is ordered after the load only by
a wait on the mbarrier its complete-tx completes, and that complete-tx carries the issuing thread's clock at the
issue, not at the landing (``ptx_tma.BulkTensorLoads``). A producer without its "empty" wait runs ahead in the
emulator's order and re-arms the slot's "full" mbarrier while the slot's load is in flight: reported, naming the
load's buffer (``MBarrier.arrive``); a consumer without its "empty" arrival leaves the producer's wait a deadlock. Not
decided: which phase a parity wait means (a wait two or more phases behind is ordered after the newest completed
phase, as the hardware's parity test would pass it).
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
    if buf.proxy_more is not None:
        _forget(buf, i, b)
    if not generic:
        buf.proxy_writer[i, b] = -1
        return
    p = _fences(machine)
    buf.proxy_writer[i, b] = t
    buf.proxy_count[i, b] = p.count[t]
    p.dirty[t] = True


def record_read(machine, buf, i, b, t) -> None:
    """Bytes ``b`` of instances ``i`` read by threads ``t`` (one per byte) through the generic proxy: each byte's
    readers since its last write are kept (an async-proxy write after them needs every reader's fence): the last one
    in ``proxy_reader`` / ``proxy_rcount``, the earlier ones of other threads in ``proxy_more`` (:func:`_keep_earlier`)."""
    _track(buf)
    p = _fences(machine)
    _keep_earlier(buf, i, b, t, p)
    buf.proxy_reader[i, b] = t
    buf.proxy_rcount[i, b] = p.count[t]
    p.dirty[t] = True


def _keep_earlier(buf, i, b, t, p) -> None:
    """The readers a read displaces from ``proxy_reader``: the byte's previous reader where another thread reads it
    now, and, where several threads read one byte in this instruction, all but the last (numpy keeps the last
    assignment). Each (byte, thread) keeps its latest read (its first fence after it covers the earlier ones too); a
    reader more than ``RING`` fences past its read is dropped (its fence counts as ordered, as in :func:`_check`)."""
    old = buf.proxy_reader[i, b]
    moved = (old >= 0) & (old != t)
    parts = []
    if moved.any():
        parts.append((i[moved], b[moved], old[moved], buf.proxy_rcount[i[moved], b[moved]]))
    key = _key(buf, i, b)
    if len(key) > 1 and (t != t[0]).any():
        _, last = np.unique(key[::-1], return_index=True)
        if len(last) < len(key):
            dup = np.ones(len(key), bool)
            dup[len(key) - 1 - last] = False
            parts.append((i[dup], b[dup], t[dup], p.count[t[dup]]))
    if not parts:
        return
    if buf.proxy_more is not None:
        parts.insert(0, buf.proxy_more)
    ii, bb, tt, nn = (np.concatenate(c) for c in zip(*parts))
    live = p.count[tt] - nn <= RING
    ii, bb, tt, nn = ii[live], bb[live], tt[live], nn[live]
    order = np.lexsort((nn, tt, _key(buf, ii, bb)))[::-1]  # per (byte, thread) the latest read first
    k, th = _key(buf, ii, bb)[order], tt[order]
    first = np.ones(len(order), bool)
    first[1:] = (k[1:] != k[:-1]) | (th[1:] != th[:-1])
    sel = order[first]
    buf.proxy_more = (ii[sel], bb[sel], tt[sel], nn[sel]) if len(sel) else None


def _key(buf, i, b):
    return np.asarray(i, np.int64) * buf.data.shape[1] + b


def _forget(buf, i, b) -> None:
    """Written bytes ``b`` of instances ``i``: their earlier readers (``proxy_more``) are no longer owed a fence."""
    ii, bb, tt, nn = buf.proxy_more
    keep = ~np.isin(_key(buf, ii, bb), _key(buf, i, b))
    buf.proxy_more = (ii[keep], bb[keep], tt[keep], nn[keep]) if keep.any() else None


def check_read(machine, buf, i, b, t, reader: str, where: str) -> None:
    """An async-proxy read by ``reader`` (threads ``t``) of bytes ``b`` of instances ``i``: each byte's last
    generic write must be fenced by its writer, the fence ordered before this read."""
    if buf.proxy_writer is not None:
        _check(machine, buf.proxy_writer[i, b], buf.proxy_count[i, b], buf, i, b, t,
               f"written by the generic proxy ({{}}) and read by the async proxy ({reader})", "writer", "read", where)


def check_write(machine, buf, i, b, t, writer: str, where: str) -> None:
    """An async-proxy write by ``writer`` (issued by threads ``t``: a TMA load writing its box) of bytes ``b`` of
    instances ``i``: each byte's last generic write (write-after-write) and every generic read since (write-after-read:
    the last reader and the earlier ones, ``proxy_more``) must be fenced by its thread, the fence ordered before the
    issue (PTX ISA 9.4 §8.6, §9.7.10.28.2)."""
    if buf.proxy_writer is None:
        return
    checks = [(buf.proxy_writer[i, b], buf.proxy_count[i, b], i, b, t, "written", "writer"),
              (buf.proxy_reader[i, b], buf.proxy_rcount[i, b], i, b, t, "read", "reader")]
    if buf.proxy_more is not None:
        ii, bb, tt, nn = buf.proxy_more
        key, k = _key(buf, i, b), _key(buf, ii, bb)
        order = np.argsort(key, kind="stable")
        pos = np.minimum(np.searchsorted(key, k, sorter=order), len(key) - 1)
        hit = key[order[pos]] == k
        if hit.any():
            at = order[pos[hit]]
            checks.append((tt[hit], nn[hit], ii[hit], bb[hit], t[at], "read", "reader"))
    for who, counts, ci, cb, ct, did, role in checks:
        _check(machine, who, counts, buf, ci, cb, ct, f"{did} by the generic proxy ({{}}) and then written by the "
               f"async proxy ({writer})", role, "async write", where)


def _check(machine, who, counts, buf, i, b, t, access: str, role: str, verb: str, where: str) -> None:
    """Each byte's generic access by thread ``who`` (at its fence count ``counts``; one of each per byte) fenced by
    that thread, the fence ordered before the async-proxy access of threads ``t`` now."""
    has = who >= 0
    if not has.any():
        return
    i, b, t, w, n = i[has], b[has], t[has], who[has], counts[has]
    p = _fences(machine)
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
