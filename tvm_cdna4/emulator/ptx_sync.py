"""Barriers: ``__syncthreads`` / ``bar.sync a`` (the whole block), named barriers ``bar.sync a, b`` /
``bar.arrive a, b`` (:class:`~.machine.NamedBarrier`) and ``mbarrier`` objects (:mod:`.mbarrier`).
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import numpy as np
from tvm_tirx import ir as I

from .cluster import targets
from .errors import EmulationError
from .interp import where_of
from .machine import NamedBarrier
from .mbarrier import MBarriers
from .ptx_async import _async_copies
from .ptx_operands import PtxCall, _active_address, _per_thread, _pointer, _writer


# ----------------------------------------------------------------------------------------------
# barriers
# ----------------------------------------------------------------------------------------------


def _barrier(compiler, where: str):
    """``__syncthreads()`` / ``bar.sync 0`` (PTX ISA 9.7.15.1): every thread of the block must arrive;
    it separates the epochs of the cross-warp shared-memory race checks."""
    machine = compiler.machine

    def run(env, mask):
        if mask is not None:
            counts = machine.wave_counts(mask).sum(axis=1)
            bad = (counts > 0) & (counts < machine.block_threads)
            if bad.any():
                g = int(np.argmax(bad))
                t = int(np.nonzero(~machine.active(mask) & (machine.wg_of == g))[0][0])
                raise EmulationError("barrier reached by only part of the thread block", where, *machine.coords(t))
        machine.barrier(mask, where)
    return run


def _bar_sync(compiler, call: PtxCall):
    """``bar{.cta}.sync a`` / ``barrier{.cta}.sync{.aligned} a`` without a thread count (PTX ISA
    9.7.13.1): every thread of the block takes part, which is ``__syncthreads`` for any barrier ``a``."""
    (bid,) = call.operands["a"]
    if not isinstance(bid, I.IntImm):
        raise NotImplementedError(f"emulator: barrier id {where_of(bid)} is not a constant")
    return _barrier(compiler, call.where)


def _named_barrier(wait: bool):
    def factory(compiler, call: PtxCall):
        """``bar{.cta}.sync a, b`` (``wait``) / ``bar{.cta}.arrive a, b`` and their ``barrier`` spellings
        (PTX ISA 9.7.13.1): whole warps arrive on barrier ``a`` (0-15, the same in a warp), which
        completes when ``b`` threads have; :class:`~.machine.NamedBarrier` keeps the phases and the
        ordering, and reports a deadlock or a count mismatch."""
        machine = compiler.machine
        bid, count = (compiler.expr(call.operands[k][0]) for k in ("a", "b"))
        what = f"bar.{'sync' if wait else 'arrive'}"
        where = call.where

        def run(env, mask):
            machine.require_full_waves(mask, what, where)
            active = machine.active(mask)
            if not active.any():
                return
            ids = _per_thread(np.asarray(bid(env, mask), np.int64), machine.nthreads)
            counts = _per_thread(np.asarray(count(env, mask), np.int64), machine.nthreads)
            for b in np.unique(ids[active]):
                if not 0 <= b < 16:
                    raise EmulationError(f"{what}: barrier id {int(b)} is not in 0..15", where)
                on = active & (ids == b)
                warps = machine.wave_counts(on) > 0
                per_group = np.zeros(len(machine.groups), np.int64)
                per_group[machine.wg_of[on]] = counts[on]
                barrier = machine.named.get(int(b)) or machine.named.setdefault(int(b), NamedBarrier(machine, int(b)))
                barrier.arrive(warps, per_group, wait, where)
        return run
    return factory


def unfinished_barriers(machine) -> None:
    """At the end of a launch: EmulationError for a named barrier phase begun and never completed."""
    for barrier in machine.named.values():
        why = barrier.unfinished()
        if why:
            raise EmulationError(why, "end of kernel")


# ----------------------------------------------------------------------------------------------
# mbarriers
# ----------------------------------------------------------------------------------------------


def _mbarriers(machine) -> MBarriers:
    return machine.state_of("mbarrier", MBarriers)


def _mbarrier_op(action: str):
    def factory(compiler, call: PtxCall):
        """``mbarrier.init.shared.b64 [a], count``, ``mbarrier.arrive{.shared}.b64 _, [a]{, count}``,
        ``cp.async.mbarrier.arrive.noinc.shared.b64 [a]`` (PTX ISA 9.7.13.15): :mod:`.mbarrier`."""
        machine, where = compiler.machine, call.where
        if action == "cp_arrive" and call.mods.get("noinc") != "noinc":
            raise NotImplementedError("emulator: cp.async.mbarrier.arrive without .noinc")
        addr = compiler.expr(call.operands["addr"][0])
        count = compiler.expr(call.operands["count"][0]) if "count" in call.operands else None

        def run(env, mask):
            threads = np.flatnonzero(machine.active(mask))
            if not threads.size:
                return
            raw, dest = _active_address(addr(env, mask), threads), None
            if action == "arrive" and machine.integer_shared:  # .shared::cluster: a peer's barrier (emulator.cluster)
                raw, dest = targets(machine, raw, threads, f"mbarrier {action}", where)
            ptr = _pointer(raw, "shared", f"mbarrier {action}", where, machine)
            bars = _mbarriers(machine)
            n = (np.ones(len(threads), np.int64) if count is None else
                 _per_thread(np.asarray(count(env, mask), np.int64), machine.nthreads)[threads])
            if action == "init":
                for g, bar, pos in bars.by_barrier(ptr, threads):
                    bar.init(g, int(n[pos[-1]]), where)
            elif action == "arrive":
                bars.arrive(ptr, threads, n, where, dest)
            else:
                bars.defer(ptr, threads, _async_copies(machine).seq + 1, where)
        return run
    return factory


def _waiters(machine, addr, parity, env, mask, where):
    """An mbarrier wait's operands: (the active threads, the barrier's shared pointer, each thread's
    parity bit), or None without active threads."""
    threads = np.flatnonzero(machine.active(mask))
    if not threads.size:
        return None
    ptr = _pointer(_active_address(addr(env, mask), threads), "shared", "mbarrier wait", where, machine)
    return threads, ptr, _per_thread(np.asarray(parity(env, mask), np.int64), machine.nthreads)[threads] & 1


def _mbarrier_wait_ptx(compiler, call: PtxCall):
    """``mbarrier.{test,try}_wait.parity{.shared}.b64 p, [a], parity`` (PTX ISA 9.7.13.15.16): ``p`` =
    whether the phase of ``parity`` has completed (:meth:`.mbarrier.MBarriers.wait`)."""
    machine, where = compiler.machine, call.where
    addr, parity = compiler.expr(call.operands["addr"][0]), compiler.expr(call.operands["phase"][0])
    write = _writer(compiler, call.operands["wait_complete"][0])

    def run(env, mask):
        waiting = _waiters(machine, addr, parity, env, mask, where)
        if waiting is None:
            return
        threads, ptr, par = waiting
        ok = np.zeros(machine.nthreads, np.uint32)
        ok[threads] = _mbarriers(machine).wait(_async_copies(machine), ptr, threads, par, where, blocking=False)
        write(env, mask, ok.view(np.uint8).reshape(machine.nthreads, 4))
    return run


def _mbarrier_wait_cuda(compiler, node, args):
    """TIRx's ``T.cuda.mbarrier_wait(addr, parity)``: a ``try_wait.parity`` loop until the phase of
    ``parity`` completes; in the emulator an incomplete phase is a deadlock error."""
    machine, where = compiler.machine, where_of(node)
    addr, parity = compiler.expr(args[0]), compiler.expr(args[1])

    def run(env, mask):
        waiting = _waiters(machine, addr, parity, env, mask, where)
        if waiting is not None:
            threads, ptr, par = waiting
            _mbarriers(machine).wait(_async_copies(machine), ptr, threads, par, where, blocking=True)
    return run
