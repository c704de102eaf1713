"""Emulated memories and the checks made on every access.

Every buffer is a byte array with one row per *instance*: global buffers have one instance (the
caller's array, written in place), LDS/shared buffers one per workgroup, register (local) buffers
one per thread. Typed accesses use numpy views of the same bytes.

Checks (each raises ``EmulationError`` naming kernel location, workgroup, wave and lane):
out-of-bounds access; LDS read of bytes never written; an LDS byte written by one wave and read or
written by another wave of the workgroup with no barrier in between (``Machine.unordered``: a
barrier orders the waves it joins), or
after a barrier that the writing wave reached with the write still in flight (gfx950: no
``s_waitcnt lgkmcnt`` covering it, ``Machine.issue_lds``); an LDS byte read or written while an
asynchronous copy into it is still in flight (``Buffer.pending``); global bytes stored by two
workgroups, or updated by an atomic and read or written by a plain access, in one launch without a
release/acquire pair between them (:mod:`.globalmem`); sm90: a shared byte read by the async proxy (a TMA
store, a wgmma) or written by it (a TMA load) after a generic write its writer did not fence for it (:mod:`.proxy`).
"""

from __future__ import annotations

import numpy as np

from .errors import EmulationError
from .globalmem import record_store
from .proxy import check_read, check_write, record_read, record_write


class Buffer:
    def __init__(self, name: str, scope: str, data: np.ndarray, track: bool = False, origin: int = 0,
                 nbytes: int | None = None):
        self.name, self.scope = name, scope
        self.data = data  # uint8 (instances, held bytes)
        # a global buffer of which only bytes [origin, origin + held) are held (an ``arguments.Window``):
        # ``nbytes`` is its whole size, what the bounds checks see; ``held_offsets`` turns addresses into
        # offsets in ``data``
        self.origin, self.held = origin, data.shape[1]
        self.nbytes = data.shape[1] if nbytes is None else nbytes
        self._views: dict = {}
        self.track = track
        if track:
            shape = data.shape
            self.written = np.zeros(shape, bool)
            self.w_wave = np.full(shape, -1, np.int32)
            self.w_epoch = np.full(shape, -1, np.int64)
            self.r_wave = np.full(shape, -1, np.int32)
            self.r_epoch = np.full(shape, -1, np.int64)
            self.w_seq = np.zeros(shape, np.int64)  # the writing wave's LDS operation number (Machine.issue_lds)
        self.readonly = not data.flags.writeable  # a caller's read-only array (check_writable)
        self.pending = None  # in-flight asynchronous writes per byte (created on first use)
        self.async_reads = None  # sm90: in-flight asynchronous reads (wgmma operands, TMA store boxes) per byte
        self.async_done: dict = {}  # sm90: (wave, reader) -> per byte, the epoch its read retired at (-1: none)
        self.records = None  # global buffers: the launch's race records (globalmem.Records, on first write)
        # sm90 (emulator.proxy): per byte, the last generic writer and reader and their fence counts
        self.proxy_writer = self.proxy_count = self.proxy_reader = self.proxy_rcount = None
        self.proxy_more = None  # and the earlier readers of other threads: (instances, bytes, threads, counts)
        self.after_wait = False  # read only after the reading thread's griddepcontrol.wait (emulate's after_wait)

    def add_pending(self, inst, byte, size: int, delta: int) -> None:
        """Count (+1) or retire (-1) an asynchronous write of ``size`` bytes at each (inst, byte)."""
        if self.pending is None:
            self.pending = np.zeros(self.data.shape, np.int32)
        b = (np.asarray(byte, np.int64).reshape(-1, 1) + np.arange(size)).ravel()
        np.add.at(self.pending, (np.repeat(np.asarray(inst).ravel(), size), b), delta)

    def retire_async_reads(self, inst, byte, wave: int, epoch, reader: str = "wgmma") -> None:
        """Asynchronous reads (a wgmma's operands; ``reader="store"``: a TMA store's box) completed by
        ``wave``'s wait (``wgmma.wait_group``, ``cp.async.bulk.wait_group.read``) at ``epoch``: a later
        write must be ordered after that wave's retirement (``check_lds_write``)."""
        key = (wave, reader)
        if key not in self.async_done:
            self.async_done[key] = np.full(self.data.shape, -1, np.int64)
        self.async_done[key][np.asarray(inst).ravel(), np.asarray(byte, np.int64).ravel()] = epoch

    def add_async_reads(self, inst, byte, delta: int) -> None:
        """Count (+1) or retire (-1) an in-flight asynchronous read of each (inst, byte)."""
        if self.async_reads is None:
            self.async_reads = np.zeros(self.data.shape, np.int32)
        np.add.at(self.async_reads, (np.asarray(inst).ravel(), np.asarray(byte, np.int64).ravel()), delta)

    def typed(self, dtype: np.dtype) -> np.ndarray:
        view = self._views.get(dtype)
        if view is None:
            usable = self.held - self.held % dtype.itemsize
            view = self.data[:, :usable].view(dtype)
            self._views[dtype] = view
        return view


def held_offsets(machine, buf: Buffer, byte, size, mask, where: str, threads=None):
    """Offsets in ``buf.data`` of accesses of ``size`` bytes (an int, or one per access) at addresses ``byte`` (checked in bounds;
    first axis: the batch's threads, or ``threads``): the addresses themselves, or for a buffer held in
    part (``arguments.Window``) the addresses less its origin, an ``EmulationError`` naming an active
    access outside the part held."""
    if buf.origin == 0 and buf.held == buf.nbytes:
        return byte
    rel = np.asarray(byte, np.int64) - buf.origin
    bad = (rel < 0) | (rel + size > buf.held)
    if mask is not None:
        bad = bad & np.broadcast_to(_m(np.asarray(mask, bool), rel), rel.shape)
    if bad.any():
        k = _first_bad(bad)
        addr = int(np.asarray(byte, np.int64)[bad][0])
        end = addr + int(np.broadcast_to(np.asarray(size, np.int64), rel.shape)[bad][0])
        raise EmulationError(
            f"{buf.scope} access to '{buf.name}': bytes [{addr}, {end}) are outside the part of it the emulator "
            f"holds (bytes [{buf.origin}, {buf.origin + buf.held}) of {buf.nbytes}: emulator.Window)", where,
            *machine.coords(k if threads is None else int(np.asarray(threads)[k])))
    return rel


def check_writable(buf: Buffer) -> None:
    """A store into a caller's read-only array: a ValueError naming its parameter (numpy's own names none)."""
    if buf.readonly:
        raise ValueError(f"emulate: parameter {buf.name}: the kernel stores to it, but its array is read-only "
                         "(flags.writeable is False); pass a writable array")


class Pointer:
    """A byte address into a buffer; ``offset`` is an int or a per-thread array."""

    __slots__ = ("buffer", "offset")

    def __init__(self, buffer: Buffer, offset):
        self.buffer, self.offset = buffer, offset


class TensorView:
    """A typed, shaped window on a buffer (what a TIR tensor variable denotes)."""

    __slots__ = ("buffer", "offset", "dtype", "lanes_dtype", "shape", "strides")

    def __init__(self, buffer: Buffer, offset, dtype: np.dtype, shape: tuple[int, ...]):
        self.buffer, self.offset, self.dtype, self.shape = buffer, offset, dtype, shape
        strides, acc = [], 1
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        self.strides = tuple(reversed(strides))


def _addresses(view: TensorView, flat, itemsize: int):
    return view.offset + np.asarray(flat, dtype=np.int64) * itemsize


def load(machine, view: TensorView, flat, mask, where: str):
    """Typed load of elements ``flat`` (per-thread (T,) or (T, L) or uniform) under ``mask``."""
    buf, dtype = view.buffer, view.dtype
    byte = _addresses(view, flat, dtype.itemsize)
    inst = machine.instance(buf)
    byte, inst = _broadcast(byte, inst, machine.nthreads)
    check_bounds(machine, buf, byte, dtype.itemsize, mask, where)
    if buf.after_wait:
        check_waited(machine, buf, mask, where)
    byte = held_offsets(machine, buf, byte, dtype.itemsize, mask, where)
    if buf.track:
        check_lds_read(machine, buf, inst, byte, dtype.itemsize, mask, where)
    elif buf.pending is not None and not machine.async_registers:
        _check_registers(machine, buf, inst, byte, dtype.itemsize, mask, "read", where)
    elif buf.records is not None and "atomics" in machine.state:
        active = np.broadcast_to(_m(machine.active(mask), byte), byte.shape)
        threads = np.broadcast_to(np.arange(machine.nthreads).reshape((-1,) + (1,) * (byte.ndim - 1)), byte.shape)
        machine.state["atomics"].check_load(machine, buf, byte[active], dtype.itemsize, threads[active], where)
    safe = byte if mask is None else np.where(_m(mask, byte), byte, 0)
    if np.all(safe % dtype.itemsize == 0):
        return buf.typed(dtype)[inst, safe // dtype.itemsize]
    raw = buf.data[inst[..., None], safe[..., None] + np.arange(dtype.itemsize)]
    return np.ascontiguousarray(raw).view(dtype)[..., 0]


def check_waited(machine, buf: Buffer, mask, where: str):
    """A read of ``buf`` (``emulate(after_wait=...)``: another grid writes it) by a thread that has not run
    ``griddepcontrol.wait`` (``ptx_memory._griddepcontrol``): on the GPU it may read before that grid finished."""
    waited = machine.state.get("grid_waited")
    early = machine.active(mask) & (True if waited is None else ~waited)
    if early.any():
        raise EmulationError(f"read of '{buf.name}' before the thread's griddepcontrol.wait (a programmatic "
                             "dependent launch may run before the grid that writes it finished)", where,
                             *machine.coords(_first_bad(early)))


def store(machine, view: TensorView, flat, value, mask, where: str):
    buf, dtype = view.buffer, view.dtype
    check_writable(buf)
    byte = _addresses(view, flat, dtype.itemsize)
    inst = machine.instance(buf)
    byte, inst = _broadcast(byte, inst, machine.nthreads)
    value = np.broadcast_to(np.asarray(value).astype(dtype, copy=False), byte.shape)
    check_bounds(machine, buf, byte, dtype.itemsize, mask, where)
    byte = held_offsets(machine, buf, byte, dtype.itemsize, mask, where)
    threads = np.broadcast_to(np.arange(machine.nthreads).reshape((-1,) + (1,) * (byte.ndim - 1)), byte.shape)
    if mask is not None:
        m = np.broadcast_to(_m(mask, byte), byte.shape)
        byte, inst, value, threads = byte[m], inst[m], value[m], threads[m]
    if buf.track:
        check_lds_write(machine, buf, inst, byte, dtype.itemsize, where, threads)
    elif buf.pending is not None and not machine.async_registers:
        _check_registers(machine, buf, inst, byte, dtype.itemsize, None, "write", where)
    elif buf.scope == "global":
        record_store(machine, buf, byte, dtype.itemsize, threads, where)
    if np.all(byte % dtype.itemsize == 0):
        buf.typed(dtype)[inst, byte // dtype.itemsize] = value
    else:
        raw = np.ascontiguousarray(value).reshape(-1, 1).view(np.uint8)
        buf.data[inst.reshape(-1, 1), byte.reshape(-1, 1) + np.arange(dtype.itemsize)] = raw


def _broadcast(byte, inst, nthreads):
    byte = np.asarray(byte, dtype=np.int64)
    if byte.ndim == 0 or byte.shape[0] != nthreads:
        byte = np.broadcast_to(byte, (nthreads, *byte.shape))
    inst = inst.reshape(inst.shape + (1,) * (byte.ndim - 1))
    return byte, np.broadcast_to(inst, byte.shape)


def _m(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1)) if like.ndim > 1 else mask


def _first_bad(bad: np.ndarray) -> int:
    idx = np.argwhere(bad)[0]
    return int(idx[0])


def check_bounds(machine, buf: Buffer, byte, size: int, mask, where: str):
    bad = (byte < 0) | (byte + size > buf.nbytes)
    if mask is not None:
        bad &= _m(mask, byte)
    if bad.any():
        t = _first_bad(bad)
        addr = int(np.asarray(byte)[bad][0])
        raise EmulationError(
            f"out-of-bounds {buf.scope} access to '{buf.name}': bytes [{addr}, {addr + size}) of {buf.nbytes}",
            where, *machine.coords(t))


def check_lds_read(machine, buf: Buffer, inst, byte, size: int, mask, where: str, record: bool = True,
                   async_proxy: str | None = None):
    """The checks of an LDS read (ordered after the bytes' writes, none in flight); ``record=False``: an
    asynchronous read (a wgmma operand) whose completion ``record_lds_read`` records later; ``async_proxy``:
    the async-proxy reader it is (a TMA store, a wgmma), whose generic-written bytes need the writer's
    ``fence.proxy.async`` (:mod:`.proxy`)."""
    m = np.ones(byte.shape, bool) if mask is None else np.broadcast_to(_m(mask, byte), byte.shape)
    threads = np.broadcast_to(np.arange(machine.nthreads).reshape((-1,) + (1,) * (byte.ndim - 1)), byte.shape)[m]
    inst, byte = inst[m], byte[m]
    if byte.size == 0:
        return
    b = (byte[:, None] + np.arange(size)).ravel()
    i = np.repeat(inst, size)
    t = np.repeat(threads, size)
    _check_pending(machine, buf, i, b, t, "read", where)
    unwritten = ~buf.written[i, b]
    if unwritten.any() and not machine.allow_uninitialized:
        k = int(np.argmax(unwritten))
        raise EmulationError(f"read of LDS '{buf.name}' byte {int(b[k])}, never written", where, *machine.coords(int(t[k])))
    wave = machine.wave_of[t]
    epoch = machine.epoch[i]
    raw = machine.unordered(i, wave, buf.w_wave[i, b], buf.w_epoch[i, b])
    if raw.any():
        k = int(np.argmax(raw))
        raise EmulationError(
            f"race on LDS '{buf.name}' byte {int(b[k])}: written by wave {int(buf.w_wave[i[k], b[k]])} and read by "
            f"wave {int(wave[k])} with no barrier in between", where, *machine.coords(int(t[k])))
    _check_published(machine, buf, i, b, t, wave, epoch, "read", where)
    if async_proxy is not None:
        check_read(machine, buf, i, b, t, async_proxy, where)
    if not record:
        return
    if machine.integer_shared and async_proxy is None:
        record_read(machine, buf, i, b, t)
    if machine.lds_waits:
        machine.issue_lds(t)
    record_lds_read(machine, buf, i, b, wave)


def record_lds_read(machine, buf: Buffer, i, b, wave) -> None:
    """Record reads of bytes ``b`` of instances ``i`` by ``wave`` at the workgroup's current epoch (a
    later write must be ordered after them)."""
    epoch = machine.epoch[i]
    fresh = ~machine.unordered(i, wave, buf.r_wave[i, b], buf.r_epoch[i, b])  # earlier reads ordered before this one
    buf.r_wave[i[fresh], b[fresh]] = wave[fresh]
    other = ~fresh & (buf.r_wave[i, b] != wave)
    buf.r_wave[i[other], b[other]] = -2  # read by several waves this epoch
    buf.r_epoch[i, b] = epoch


def _check_published(machine, buf: Buffer, i, b, t, wave, epoch, what: str, where: str):
    """Another wave's write from an earlier epoch must have completed before its wave's barrier."""
    writer = buf.w_wave[i, b]
    across = (buf.w_epoch[i, b] >= 0) & (buf.w_epoch[i, b] < epoch) & (writer != wave)
    if not machine.lds_waits or not across.any():
        return
    bad = across & machine.unpublished(i, writer, buf.w_seq[i, b], epoch)
    if bad.any():
        k = int(np.argmax(bad))
        raise EmulationError(
            f"LDS '{buf.name}' byte {int(b[k])}: written by wave {int(writer[k])} and {what} by wave {int(wave[k])} "
            f"after a barrier, but wave {int(writer[k])} reached the barrier with that write still in flight (no "
            "s_waitcnt lgkmcnt covering it before s_barrier; T.rocm.workgroup_barrier() waits, then barriers)",
            where, *machine.coords(int(t[k])))


def _check_registers(machine, buf: Buffer, inst, byte, size: int, mask, what: str, where: str):
    """sm90: a register (local) byte read or written while a ``wgmma`` that reads or writes it is in
    flight (issued, not retired by ``wgmma.wait_group``)."""
    m = np.ones(byte.shape, bool) if mask is None else np.broadcast_to(_m(np.asarray(mask, bool), byte), byte.shape)
    i, b0 = np.asarray(inst)[m], np.asarray(byte)[m]
    if not b0.size:
        return
    b = (b0[:, None] + np.arange(size)).ravel()
    i = np.repeat(i, size)
    busy = buf.pending[i, np.minimum(b, buf.nbytes - 1)] > 0
    if busy.any():
        k = int(np.argmax(busy))
        ops = machine.state.get("wgmma")
        op = ops.issued_at(buf) if ops is not None else "wgmma.mma_async"
        raise EmulationError(f"{what} of register '{buf.name}' byte {int(b[k])} while a {op} using it is still in "
                             "flight (issued, not retired: missing wgmma.wait_group)", where,
                             *machine.coords(int(i[k])))


def _check_pending(machine, buf: Buffer, i, b, t, what: str, where: str):
    if buf.pending is None:
        return
    busy = buf.pending[i, b] > 0
    if busy.any():
        k = int(np.argmax(busy))
        raise EmulationError(f"{what} of LDS '{buf.name}' byte {int(b[k])} while an asynchronous copy into it is "
                             "still in flight (missing wait: s_waitcnt vmcnt for a direct-to-LDS load, cp.async.wait_group for "
                             "cp.async, an mbarrier wait for cp.async.bulk.tensor)", where, *machine.coords(int(t[k])))


def _check_retired_reads(machine, buf: Buffer, i, b, t, wave, where: str):
    """A write of bytes a wgmma read (retired by ``wave`` w's ``wait_group``) must be ordered after w's
    retirement: an mbarrier arrival of w after it, waited on by the writer (``Buffer.retire_async_reads``)."""
    for (w, reader), stamps in buf.async_done.items():
        s = stamps[i, b]
        bad = machine.unordered(i, wave, np.where(s >= 0, w, -1).astype(np.int32), s)
        if bad.any():
            k = int(np.argmax(bad))
            raise EmulationError(
                f"race on shared '{buf.name}' byte {int(b[k])}: read by {RETIRED_READERS[reader].format(w=w)} and "
                f"then written by wave {int(wave[k])} with no barrier or mbarrier wait ordering the write after the "
                "retirement", where, *machine.coords(int(t[k])))


RETIRED_READERS = {"wgmma": "a wgmma of wave {w}'s warpgroup (retired at its wgmma.wait_group)",
                   "store": "a TMA store of wave {w} (retired at its cp.async.bulk.wait_group.read)"}
"""What read a shared byte asynchronously (``Buffer.retire_async_reads``' ``reader``), in the race message."""


def _async_reader(machine, buf: Buffer) -> str:
    """What still reads ``buf`` asynchronously, for a write's race message: a TMA store's box or a wgmma."""
    stores = machine.state.get("bulk_store")
    if stores is not None and stores.reading(buf):
        return ("a TMA store (cp.async.bulk.tensor) reading it is still in flight (issued, not retired: missing "
                "cp.async.bulk.wait_group.read)")
    ops = machine.state.get("wgmma")
    op = ops.issued_at(buf) if ops is not None else "wgmma.mma_async"
    return f"a {op} reading it is still in flight (issued, not retired: missing wgmma.wait_group)"


def check_lds_write(machine, buf: Buffer, inst, byte, size: int, where: str, threads, lgkm: bool = True,
                    async_proxy: str | None = None):
    """Race checks of an LDS write and its record; ``lgkm=False`` for a write that is not an LGKM
    operation of its wave (a direct-to-LDS load, completed by ``vmcnt``, not ``lgkmcnt``); ``async_proxy``: the
    sm90 async-proxy writer it is (a TMA load), whose bytes' generic writes need the writer's ``fence.proxy.async``
    first and which an async-proxy read needs no fence after (:mod:`.proxy`)."""
    if byte.size == 0:
        return
    b = (byte.reshape(-1, 1) + np.arange(size)).ravel()
    i = np.repeat(inst.ravel(), size)
    t = np.repeat(threads.ravel(), size)
    _check_pending(machine, buf, i, b, t, "write", where)
    if buf.async_reads is not None:
        busy = buf.async_reads[i, b] > 0
        if busy.any():
            k = int(np.argmax(busy))
            raise EmulationError(f"write of shared '{buf.name}' byte {int(b[k])} while {_async_reader(machine, buf)}",
                                 where, *machine.coords(int(t[k])))
    wave = machine.wave_of[t]
    epoch = machine.epoch[i]
    _check_retired_reads(machine, buf, i, b, t, wave, where)
    waw = machine.unordered(i, wave, buf.w_wave[i, b], buf.w_epoch[i, b])
    war = machine.unordered(i, wave, buf.r_wave[i, b], buf.r_epoch[i, b])
    # two waves writing one byte in the same instruction
    key = i.astype(np.int64) * buf.nbytes + b
    order = np.argsort(key, kind="stable")
    same = (key[order][1:] == key[order][:-1]) & (wave[order][1:] != wave[order][:-1])
    for bad, what in ((waw, "written by wave {a} and written again by wave {b}"),
                      (war, "read by wave {a} and then written by wave {b}")):
        if bad.any():
            k = int(np.argmax(bad))
            other = buf.w_wave[i[k], b[k]] if what.startswith("written") else buf.r_wave[i[k], b[k]]
            raise EmulationError(
                f"race on LDS '{buf.name}' byte {int(b[k])}: "
                + what.format(a="several" if other == -2 else int(other), b=int(wave[k]))
                + " with no barrier in between", where, *machine.coords(int(t[k])))
    if same.any():
        k = order[1:][int(np.argmax(same))]
        raise EmulationError(f"race on LDS '{buf.name}' byte {int(b[k])}: written by two waves in one instruction",
                             where, *machine.coords(int(t[k])))
    _check_published(machine, buf, i, b, t, wave, epoch, "written again", where)
    buf.written[i, b] = True
    buf.w_wave[i, b] = wave
    buf.w_epoch[i, b] = epoch
    if machine.lds_waits:
        buf.w_seq[i, b] = machine.issue_lds(t) if lgkm else 0
    if machine.integer_shared:
        if async_proxy is not None:
            check_write(machine, buf, i, b, t, async_proxy, where)
        record_write(machine, buf, i, b, t, async_proxy is None)


class InFlightLdsWrites:
    """Asynchronous writes into LDS / shared memory (CUDA ``cp.async``, gfx950 direct-to-LDS loads):
    a write's bytes count as written by its thread's wave both when it is issued (it may land at
    once) and when it completes (it may land as late as that), so the cross-wave race checks run at
    both points, and in between its destination bytes are in flight (``Buffer.pending``). Subclasses
    say which writes a wait completes (``retire``)."""

    what = "asynchronous write"  # named in the completion's race messages
    lgkm = True  # False: the write is not an LGKM operation of its wave (see check_lds_write)
    async_proxy = None  # sm90: the async-proxy writer it is (a TMA load; see check_lds_write)

    def __init__(self, machine):
        self.machine = machine
        self.copies: list[dict] = []

    def start(self, threads, buf: Buffer, inst, addr, data, where: str, **tags):
        """Issue: ``data[i]`` (one row of bytes per active thread ``threads[i]``) will land at
        ``addr[i]`` of instance ``inst[i]`` of ``buf``; ``tags`` are per-thread arrays kept with it."""
        size = data.shape[1]
        if buf.track:
            check_lds_write(self.machine, buf, inst, addr, size, where, threads, lgkm=self.lgkm,
                            async_proxy=self.async_proxy)
        buf.add_pending(inst, addr, size, +1)
        self.copies.append(dict(thread=threads, buf=buf, inst=inst, addr=addr, data=data, where=where, **tags))

    def retire(self, completes, where: str):
        """Land every write for which ``completes(copy)`` (a per-thread boolean array) holds."""
        keep = []
        for c in self.copies:
            done = completes(c)
            if done.any():
                self._land(c, done, where)
            if not done.all():
                keep.append({k: (v[~done] if isinstance(v, np.ndarray) else v) for k, v in c.items()})
        self.copies = keep

    def _land(self, c, done, where: str):
        buf, inst, addr, data = c["buf"], c["inst"][done], c["addr"][done], c["data"][done]
        size = data.shape[1]
        buf.add_pending(inst, addr, size, -1)
        if buf.track:
            check_lds_write(self.machine, buf, inst, addr, size, f"{where} (completing {self.what} at: {c['where']})",
                            c["thread"][done], lgkm=self.lgkm, async_proxy=self.async_proxy)
        buf.data[inst[:, None], addr[:, None] + np.arange(size)] = data

