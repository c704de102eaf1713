"""The asynchronous copies (``cp.async``, PTX ISA 9.7.10.28): issued, committed in groups, landing in shared
memory when the issuing thread's wait retires their group (:class:`AsyncCopies`).
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import numpy as np

from . import banks
from .errors import EmulationError
from .memory import InFlightLdsWrites, held_offsets
from .ptx_operands import PtxCall, _check_span, _per_thread, _pointer


class AsyncCopies(InFlightLdsWrites):
    """Per-thread ``cp.async`` bookkeeping of one launch (PTX ISA 9.7.10.28.3): copies issued and not
    yet committed, the number of groups each thread has committed, and completion at wait_group.
    A copy is in flight from issue to its group's retirement (``InFlightLdsWrites``)."""

    what = "cp.async"

    def __init__(self, machine):
        super().__init__(machine)
        self.committed = np.zeros(machine.nthreads, np.int64)
        self.seq = 0  # issue instructions so far (cp.async.mbarrier.arrive waits for the earlier ones)

    def issue(self, threads, buf, inst, addr, data, where: str):
        self.seq += 1
        self.start(threads, buf, inst, addr, data, where, group=np.full(len(threads), -1, np.int64),
                   seq=np.full(len(threads), self.seq, np.int64))

    def land_before(self, threads, seq: int, stamps, where: str):
        """Land the copies of ``threads`` issued before instruction ``seq`` (a deferred
        ``cp.async.mbarrier.arrive``), their writes stamped ``stamps`` (per thread: the clock of the
        arrive instruction, so later accesses of the issuing warp are not ordered by the arrival)."""
        m = self.machine
        saved = m.epoch.copy()
        m.epoch[m.wg_of[threads]] = stamps
        try:
            self.retire(lambda c: np.isin(c["thread"], threads) & (c["seq"] < seq), where)
        finally:
            m.epoch[:] = saved

    def commit(self, mask):
        """``cp.async.commit_group`` (9.7.10.28.3.2): the thread's uncommitted copies form its next group."""
        active = self.machine.active(mask)
        for c in self.copies:
            new = active[c["thread"]] & (c["group"] < 0)
            c["group"][new] = self.committed[c["thread"][new]]
        self.committed[active] += 1

    def wait(self, n: int, mask, where: str):
        """``cp.async.wait_group n`` (9.7.10.28.3.3): all but the ``n`` most recent committed groups of
        each executing thread complete; uncommitted copies are not waited for."""
        active = self.machine.active(mask)
        self.retire(lambda c: active[c["thread"]] & (c["group"] >= 0) & (c["group"] < self.committed[c["thread"]] - n),
                    where)


def _async_copies(machine) -> AsyncCopies:
    return machine.state_of("cp.async", AsyncCopies)


def _cp_async(compiler, call: PtxCall):
    """``cp.async.{ca,cg}.shared{::cta}.global [dst], [src], cp-size{, src-size | , ignore-src}``
    (PTX ISA 9.7.10.28.3.1): copy ``cp-size`` (4, 8, 16; .cg: 16) bytes; only the first ``src-size``
    bytes are read from ``src`` (none when ``ignore-src`` holds), the rest of ``dst`` is zero-filled.
    Both addresses are ``cp-size`` aligned. Completion per :class:`AsyncCopies`."""
    machine = compiler.machine
    size = call.imm("cp_size")
    where = call.where
    if size not in (4, 8, 16) or (call.mods["cop"] == "cg" and size != 16):
        raise EmulationError(f"cp.async.{call.mods['cop']} with cp-size {size}", where)
    dst, src = compiler.expr(call.operands["dst_mem"][0]), compiler.expr(call.operands["src_mem"][0])
    src_size = compiler.expr(call.operands["src_size"][0]) if "src_size" in call.operands else None
    ignore = compiler.expr(call.operands["ignore_src"][0]) if "ignore_src" in call.operands else None

    def run(env, mask):
        T = machine.nthreads
        threads = np.nonzero(machine.active(mask))[0]
        if not threads.size:
            return
        pd = _pointer(dst(env, mask), call.mods["dst"], "cp.async", where, machine)
        ps = _pointer(src(env, mask), call.mods["src"], "cp.async", where, machine)
        da = _per_thread(np.asarray(pd.offset, np.int64), T)[threads]
        sa = _per_thread(np.asarray(ps.offset, np.int64), T)[threads]
        n = np.full(threads.shape, size, np.int64)
        if src_size is not None:
            n = _per_thread(np.asarray(src_size(env, mask)).astype(np.int64), T)[threads]
            bad = (n < 0) | (n > size)
            if bad.any():
                k = int(np.argmax(bad))
                raise EmulationError(f"cp.async: src-size {int(n[k])} is not in [0, {size}]", where,
                                     *machine.coords(int(threads[k])))
        if ignore is not None:
            n = np.where(_per_thread(np.asarray(ignore(env, mask)) != 0, T)[threads], 0, size)
        _check_span(machine, pd.buffer, threads, da, size, size, "cp.async destination", where)
        if machine.stats is not None:  # the shared-memory store side, per warp and lane phase
            lpp = banks.lanes_per_phase(size)
            warp = machine.wg_of[threads] * machine.waves_per_group + machine.wave_of[threads]
            banks.record(machine.stats, "cp.async", warp * (32 // lpp) + machine.lane_of[threads] // lpp, da, size)
        reads = n > 0
        _check_span(machine, ps.buffer, threads[reads], sa[reads], n[reads], size, "cp.async source", where)
        sa = np.where(reads, held_offsets(machine, ps.buffer, sa, n, reads, where, threads), 0)
        j = np.arange(size)
        valid = j < n[:, None]
        src_bytes = ps.buffer.data[machine.instance(ps.buffer)[threads][:, None], np.where(valid, sa[:, None] + j, 0)]
        data = np.where(valid, src_bytes, 0).astype(np.uint8)
        _async_copies(machine).issue(threads, pd.buffer, machine.instance(pd.buffer)[threads], da, data, where)
    return run


def _cp_async_commit(compiler, call: PtxCall):
    machine = compiler.machine
    return lambda env, mask: _async_copies(machine).commit(mask)


def _cp_async_wait(compiler, call: PtxCall):
    machine, where = compiler.machine, call.where
    n = call.imm("group")
    return lambda env, mask: _async_copies(machine).wait(n, mask, where)


def _cp_async_wait_all(compiler, call: PtxCall):
    """``cp.async.wait_all`` = ``cp.async.commit_group; cp.async.wait_group 0`` (9.7.10.28.3.3)."""
    machine, where = compiler.machine, call.where

    def run(env, mask):
        state = _async_copies(machine)
        state.commit(mask)
        state.wait(0, mask, where)
    return run
