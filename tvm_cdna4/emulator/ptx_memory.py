"""Loads and stores (``ld``, ``st``), atomics (``atom``, ``red``) with the global-memory race check
(``global_writes``), ``prefetch``, ``fence`` and ``griddepcontrol``.
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import numpy as np

from .globalmem import cta_writes as global_writes
from .memory import TensorView, check_writable, held_offsets, load, store
from .ptx_operands import PtxCall, _check_span, _per_thread, _pointer, _reader, _type_dtype, _writer


# ----------------------------------------------------------------------------------------------
# ld / st
# ----------------------------------------------------------------------------------------------


def _memory_view(buf, word: int) -> TensorView:
    return TensorView(buf, 0, np.dtype(f"<u{word}"), (buf.nbytes // word,))


def _ld_st(load_: bool):
    def factory(compiler, call: PtxCall):
        """``ld{.space}{.vec}.type d, [addr]`` (PTX ISA 9.7.10.8) and ``st{.space}{.vec}.type [addr], b``
        (9.7.10.11): ``count`` registers of ``type`` at consecutive addresses; the address is aligned
        to the whole access. Cache operators, eviction hints and ``.nc`` have no emulated effect."""
        machine = compiler.machine
        token = call.mods["type"]
        nbytes = int(token[1:]) // 8
        regs = call.operands["d" if load_ else "value"]
        count = len(regs)
        total = nbytes * count
        word = min(nbytes, 8)
        space = call.mods.get("space", "")
        addr = compiler.expr(call.operands["addr"][0])
        io = [(_writer if load_ else _reader)(compiler, n, *(() if load_ else (nbytes, token))) for n in regs]
        what = "ld" if load_ else "st"
        where = call.where

        def run(env, mask):
            T = machine.nthreads
            p = _pointer(addr(env, mask), space, what, where, machine)
            off = _per_thread(np.asarray(p.offset, np.int64), T)
            threads = np.nonzero(machine.active(mask))[0]
            _check_span(machine, p.buffer, threads, off[threads], total, total, what, where)
            view = _memory_view(p.buffer, word)
            flat = (off // word)[:, None] + np.arange(total // word)
            if load_:
                raw = np.ascontiguousarray(load(machine, view, flat, mask, where)).view(np.uint8).reshape(T, count, nbytes)
                for i, write in enumerate(io):
                    write(env, mask, raw[:, i])
            else:
                raw = np.concatenate([r(env, mask) for r in io], axis=1)
                if p.buffer.scope == "global":
                    global_writes(machine, p.buffer, threads,
                                  held_offsets(machine, p.buffer, off[threads], total, None, where, threads), total, False,
                                  where)
                store(machine, view, flat, raw.view(f"<u{word}"), mask, where)
        return run
    return factory


# ----------------------------------------------------------------------------------------------
# atomics (the global-memory race check: globalmem.cta_writes)
# ----------------------------------------------------------------------------------------------


_ATOMIC_OPS = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
               "or": np.bitwise_or, "xor": np.bitwise_xor}


def _atomic(returns: bool):
    def factory(compiler, call: PtxCall):
        """``atom{.sem}{.scope}{.space}.op.type d, [a], b`` (PTX ISA 9.7.15.5) and ``red`` (9.7.15.6,
        no ``d``): ``d = [a]; [a] = op([a], b)``, one thread after another in thread order (atomics
        to one address are serialized; any order is a legal outcome, and the emulator picks this
        one), so colliding threads see each other's updates. ``.sem`` / ``.scope`` have no emulated
        effect beyond that order (CTAs run one batch after another)."""
        machine = compiler.machine
        token, op = call.mods["type"], call.mods["op"]
        if op not in _ATOMIC_OPS:
            raise NotImplementedError(f"emulator: {call.entry.ptx_name} .{op}")
        dtype = _type_dtype(token)
        addr = compiler.expr(call.operands["addr"][0])
        value = _reader(compiler, call.operands["value"][0], dtype.itemsize, token)
        write = _writer(compiler, call.operands["d"][0]) if returns else None
        space, where, what = call.mods.get("space", ""), call.where, call.entry.ptx_name

        def run(env, mask):
            T = machine.nthreads
            p = _pointer(addr(env, mask), space, what, where, machine)
            off = _per_thread(np.asarray(p.offset, np.int64), T)
            threads = np.nonzero(machine.active(mask))[0]
            _check_span(machine, p.buffer, threads, off[threads], dtype.itemsize, dtype.itemsize, what, where)
            check_writable(p.buffer)
            off = off.copy()
            off[threads] = held_offsets(machine, p.buffer, off[threads], dtype.itemsize, None, where, threads)
            if p.buffer.scope == "global":
                global_writes(machine, p.buffer, threads, off[threads], dtype.itemsize, True, where)
            b = value(env, mask).view(dtype)[:, 0]
            mem = p.buffer.typed(dtype)
            inst = machine.instance(p.buffer)
            old = np.zeros(T, dtype)
            with np.errstate(all="ignore"):
                for t in threads:
                    i, e = inst[t], off[t] // dtype.itemsize
                    old[t] = mem[i, e]
                    mem[i, e] = _ATOMIC_OPS[op](mem[i, e], b[t]).astype(dtype)
            if write is not None:
                write(env, mask, old.view(np.uint8).reshape(T, -1))
        return run
    return factory


def _prefetch(compiler, call: PtxCall):
    """``prefetch{.space}.level [a]`` (PTX ISA 9.7.10.15): no emulated effect on memory (a cache hint),
    but the address must be one byte inside its buffer (the kernels prefetch only what they read)."""
    machine = compiler.machine
    addr = compiler.expr(call.operands["addr"][0])
    space, where = call.mods.get("space", ""), call.where

    def run(env, mask):
        p = _pointer(addr(env, mask), space, "prefetch", where, machine)
        off = _per_thread(np.asarray(p.offset, np.int64), machine.nthreads)
        threads = np.nonzero(machine.active(mask))[0]
        _check_span(machine, p.buffer, threads, off[threads], 1, 1, "prefetch", where)
    return run


def _fence(compiler, call: PtxCall):
    """``fence{.sem}.scope`` (PTX ISA 9.7.13.4): no emulated effect (each emulated instruction
    completes before the next; CTAs of later batches see all earlier writes)."""
    return lambda env, mask: None


def _griddepcontrol(compiler, call: PtxCall):
    """``griddepcontrol.wait`` / ``griddepcontrol.launch_dependents`` (PTX ISA 9.7.15.14): nothing to wait for (the
    emulator runs grids in order, one ``emulate`` after another); ``wait`` marks its threads as past it, which
    ``memory.check_waited`` asks of every read of an ``emulate(after_wait=...)`` buffer."""
    machine = compiler.machine
    if call.mods["action"] != "wait":
        return lambda env, mask: None

    def run(env, mask):
        waited = machine.state_of("grid_waited", lambda m: np.zeros(m.nthreads, bool))
        waited |= machine.active(mask)
    return run
