"""The operand plumbing of the emulated PTX instructions and CUDA device ops: the decoded ``T.ptx`` call
(:class:`PtxCall`), readers and writers of its register operands, the predicate, the warps of a call,
pointers and the bounds check of an access.
Part of the CUDA device ops' semantics (``emulator.ptx``, whose docstring tells the conventions)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from tvm_tirx import ir as I

from ..tirx_private import decode_ptx_call
from .errors import EmulationError
from .interp import _any, _mand, np_dtype, where_of
from .memory import Pointer, store


WARP = 32
_LANE = np.arange(WARP)


# ----------------------------------------------------------------------------------------------
# operand plumbing
# ----------------------------------------------------------------------------------------------


class PtxCall:
    """One decoded ``tirx.ptx.<entry>`` call: its modifiers, operand nodes by slot name, predicate
    (TIRx's argument encoding is read by ``tvm_cdna4.tirx_private.decode_ptx_call``)."""

    def __init__(self, entry, node):
        call = decode_ptx_call(entry, node.args)
        if call.sunk:
            raise NotImplementedError(f"emulator: sunk destination lanes (T.ptx.SINK): {where_of(node)}")
        self.entry = entry
        self.pred = call.pred
        self.mods = call.mods
        self.operands = call.operands
        self.where = where_of(node)

    def imm(self, name: str) -> int:
        (node,) = self.operands[name]
        if not isinstance(node, I.IntImm):
            raise EmulationError(f"{self.entry.ptx_name}: immediate '{name}' is not a constant", self.where)
        return int(node.value)


def _type_dtype(token: str) -> np.dtype:
    """numpy dtype of a PTX fundamental type token (``.b32`` -> uint32, ``.s16`` -> int16, ...)."""
    if token == "bf16":
        return np.dtype(ml_dtypes.bfloat16)
    kind = {"b": "u", "u": "u", "s": "i", "f": "f"}[token[0]]
    return np.dtype(f"<{kind}{int(token[1:]) // 8}")


def _per_thread(value, T: int, tail: tuple = ()) -> np.ndarray:
    v = np.asarray(value)
    shape = (T, *tail)
    return v if v.shape == shape else np.broadcast_to(v, shape)


def _active_address(value, threads):
    """An address operand with the inactive threads' values replaced by the first active thread's: an
    integer shared-window address (sm90) is resolved over every thread, and an inactive one's may lie anywhere
    (a warp-dependent mbarrier index evaluated for the warps a branch left out)."""
    if isinstance(value, np.ndarray) and value.ndim == 1 and len(threads) and value.shape[0] > int(threads[-1]):
        out = np.full_like(value, value[threads[0]])
        out[threads] = value[threads]
        return out
    return value


def _reader(compiler, node, nbytes: int | None = None, token: str | None = None):
    """(env, mask) -> (T, nbytes) uint8: the raw register bits of a source operand. A value of
    another width (an integer constant for a .b16 operand, say) is converted to the PTX type."""
    T = compiler.machine.nthreads
    ev = compiler.expr(node)
    _, lanes = np_dtype(node.ty.dtype)
    tail = (lanes,) if lanes > 1 else ()

    def run(env, mask):
        v = _per_thread(ev(env, mask), T, tail)
        if nbytes is not None and v.dtype.itemsize * lanes != nbytes:
            if token is None or lanes > 1 or token == "b128":
                raise EmulationError(f"register {where_of(node)} has {v.dtype.itemsize * lanes} bytes, "
                                     f"the instruction needs {nbytes}", where_of(node))
            with np.errstate(all="ignore"):
                v = v.astype(_type_dtype(token))
        return np.ascontiguousarray(v).view(np.uint8).reshape(T, -1)
    return run


def _writer(compiler, node):
    """(env, mask, raw (T, nbytes) uint8) -> None: write a destination register reference."""
    machine = compiler.machine
    T = machine.nthreads
    dtype, lanes = np_dtype(node.ty.dtype)
    where = where_of(node)

    def value_of(raw):
        raw = np.ascontiguousarray(raw)
        if raw.shape[1] != dtype.itemsize * lanes:
            raise EmulationError(f"destination {where} has {dtype.itemsize * lanes} bytes, the instruction "
                                 f"writes {raw.shape[1]}", where)
        v = raw.view(dtype)
        return v if lanes > 1 else v[:, 0]

    if isinstance(node, I.TensorLoad):
        slot = compiler.slot(node.source)
        index = compiler.flat_index(node.indices)

        def write(env, mask, raw):
            view = env.values[slot]
            store(machine, view, index(env, mask, view), value_of(raw), mask, where)
        return write
    if isinstance(node, I.Var):
        slot = compiler.slot(node)

        def write(env, mask, raw):
            new, old = value_of(raw), env.values[slot]
            if mask is not None and old is not None:
                m = np.asarray(mask).reshape((T,) + (1,) * (new.ndim - 1))
                new = np.where(m, new, _per_thread(old, T, new.shape[1:]))
            env.values[slot] = new
        return write
    raise NotImplementedError(f"emulator: PTX destination {where} is not a register reference")


def _predicated(compiler, call: PtxCall, run):
    """Run ``run`` only for the threads whose ``@p`` guard holds (framework-level predication)."""
    if call.pred is None:
        return run
    pred = compiler.expr(call.pred)

    def guarded(env, mask):
        m = _mand(mask, np.asarray(pred(env, mask)) != 0)
        if _any(m):
            run(env, m)
    return guarded


def _warps(machine, mask, what: str, where: str) -> np.ndarray:
    """(W, 32) thread indices of the warps executing a warp-collective (``.sync.aligned``)
    instruction; every lane of such a warp must be active."""
    machine.require_full_waves(mask, what, where)
    if mask is None and machine.block_threads % WARP == 0:
        return np.arange(machine.nthreads).reshape(-1, WARP)
    rows = [idx for _, _, idx in machine.waves(mask)]
    return np.stack(rows) if rows else np.zeros((0, WARP), np.int64)


def _pointer(value, space: str, what: str, where: str, machine=None) -> Pointer:
    """The emulated address of a PTX address operand in state space ``space`` ("" = generic); an
    integer shared-window address (sm90's ``cvta_generic_to_shared``) is resolved by ``machine``."""
    if not isinstance(value, Pointer) and machine is not None and machine.integer_shared:
        value = machine.shared_pointer(value, what, where)
    if not isinstance(value, Pointer):
        raise EmulationError(f"{what}: the address operand is not a pointer into an emulated buffer", where)
    space = space.split("::")[0]
    if space and not value.buffer.scope.startswith(space):
        raise EmulationError(f"{what}: .{space} access to '{value.buffer.name}', which is in {value.buffer.scope} "
                             "memory", where)
    return value


def _check_span(machine, buf, threads, addr, size, align: int, what: str, where: str):
    """Alignment of ``addr`` to ``align`` and bounds of ``[addr, addr + size)`` for each thread."""
    addr = np.asarray(addr, np.int64)
    size = np.broadcast_to(np.asarray(size, np.int64), addr.shape)
    for bad, why in ((addr % align != 0, f"is not {align}-byte aligned"),
                     ((addr < 0) | (addr + size > buf.nbytes), f"is out of bounds of {buf.nbytes} bytes")):
        if bad.any():
            k = np.argwhere(bad)[0]
            t, a = int(np.asarray(threads)[tuple(k)]), int(addr[tuple(k)])
            raise EmulationError(f"{what}: {buf.scope} address {a} of '{buf.name}' (+{int(size[tuple(k)])} bytes) {why}",
                                 where, *machine.coords(t))
