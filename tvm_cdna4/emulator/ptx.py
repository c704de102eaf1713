"""Semantics of the CUDA device ops (``tirx.cuda.*``) and table-driven PTX instructions (``tirx.ptx.*``)
that TIRx's CUDA tile patterns emit, for 32-lane warps (the emulator's "waves").

Section numbers are those of the PTX ISA 9.4, the edition ``tvm_tirx.backend.cuda.ptx.table`` cites
(other editions number the chapters differently: the warp-level matrix chapter, 9.7.16 here, is
9.7.13/9.7.14 in 8.x editions; the data-movement chapter, 9.7.10 here, is 9.7.8/9.7.9 there).

A ``T.ptx`` call is ``tirx.ptx.<entry>(operands..., [pred], slot tokens..., marker)``; it is decoded
with the instruction table itself (:class:`PtxCall`, through ``tirx_private.decode_ptx_call``), so
operand groups are found by their PTX names (``d``, ``a``, ``addr``...). Destination operands are register references (``tile_dst[0]``):
the instruction writes into them.

Numerics. ``mma`` multiplies f16/bf16 fragments exactly in float64, sums in float64 and rounds the
result to f32 once. Hardware tensor cores use their own (non-IEEE, truncating) accumulation, so the
emulated result is bit-identical to the GPU's when every product and partial sum is exactly
representable, e.g. for small-integer-valued inputs; for arbitrary data expect agreement to f32
rounding, not bit identity. ``cvt`` rounds as IEEE (numpy / ml_dtypes round to nearest even).

Asynchronous copies (``cp.async``) read global memory when issued and land in shared memory when
the issuing thread's ``cp.async.wait_group``/``wait_all`` retires their group; until then their
destination bytes are *in flight* and any shared access to them is reported, so a missing wait or a
wait for the wrong group count is an ``EmulationError``, not a silently stale value.

Barriers: ``__syncthreads`` / ``bar.sync a`` (the whole block), named barriers ``bar.sync a, b`` /
``bar.arrive a, b`` (:class:`~.machine.NamedBarrier`) and ``mbarrier`` objects (:mod:`.mbarrier`); the
shared-memory race checks follow the order they create (``Machine.unordered``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from tvm_tirx import ir as I

from ..tirx_private import decode_ptx_call, ptx_entry
from . import banks
from .errors import EmulationError
from .globalmem import cta_writes as global_writes
from .interp import _any, _mand, np_dtype, where_of
from .machine import NamedBarrier
from .mbarrier import MBarriers
from .memory import InFlightLdsWrites, Pointer, TensorView, check_lds_read, check_writable, load, store

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


def _pointer(value, space: str, what: str, where: str) -> Pointer:
    """The emulated address of a PTX address operand in state space ``space`` ("" = generic)."""
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


# ----------------------------------------------------------------------------------------------
# warp-level matrix instructions
# ----------------------------------------------------------------------------------------------


def _ldmatrix(compiler, call: PtxCall):
    """``ldmatrix.sync.aligned.m8n8{.x1,.x2,.x4}{.trans}.shared{::cta}.b16 r, [p]`` (PTX ISA 9.7.16.5.15).

    Matrix ``i`` (of 1/2/4) has eight 16-byte rows of eight b16 elements; lane ``8*i + row`` supplies
    the shared address of that row (for .x1/.x2 the other lanes' addresses are ignored). Lane ``l``
    receives in register ``r[i]`` the elements ``(l/4, 2*(l%4))`` and ``(l/4, 2*(l%4)+1)`` of matrix
    ``i`` (lower column in the low half); with ``.trans`` the elements ``(2*(l%4), l/4)`` and
    ``(2*(l%4)+1, l/4)``. Row addresses must be 16-byte aligned; all 32 lanes execute it."""
    machine = compiler.machine
    mods = call.mods
    if mods["shape"] != "m8n8" or mods["type"] != "b16":
        raise NotImplementedError(f"emulator: ldmatrix .{mods['shape']}.{mods['type']}")
    count = int(mods["num"][1:])
    trans = mods["trans"] == "trans"
    regs = [_writer(compiler, n) for n in call.operands["r"]]
    ptr = compiler.expr(call.operands["p"][0])
    row, col = _LANE // 4, 2 * (_LANE % 4)
    where = call.where

    def run(env, mask):
        warps = _warps(machine, mask, "ldmatrix", where)
        if not len(warps):
            return
        p = _pointer(ptr(env, mask), "shared", "ldmatrix", where)
        buf, T = p.buffer, machine.nthreads
        addr = _per_thread(np.asarray(p.offset, np.int64), T)
        providers = warps[:, : 8 * count]
        a = addr[providers]
        _check_span(machine, buf, providers, a, 16, 16, "ldmatrix", where)
        reading = np.zeros(T, bool)
        reading[providers.ravel()] = True
        inst = machine.instance(buf)
        check_lds_read(machine, buf, inst, addr, 16, reading, where)
        if machine.stats is not None:  # one phase per matrix: its 8 row-address lanes
            phase = np.arange(providers.size) // 8
            banks.record(machine.stats, "ldmatrix", phase, a, 16)
        rows = buf.data[inst[providers][..., None], a[..., None] + np.arange(16)]  # (W, 8*count, 16)
        M = np.ascontiguousarray(rows).view("<u2").reshape(len(warps), count, 8, 8)  # [w, matrix, row, col]
        lo, hi = (M[:, :, col, row], M[:, :, col + 1, row]) if trans else (M[:, :, row, col], M[:, :, row, col + 1])
        words = lo.astype(np.uint32) | (hi.astype(np.uint32) << 16)  # (W, count, 32)
        out = np.zeros((T, count), np.uint32)
        out[warps] = words.transpose(0, 2, 1)
        raw = out.view(np.uint8).reshape(T, count, 4)
        active = np.zeros(T, bool)
        active[warps.ravel()] = True
        for i, write in enumerate(regs):
            write(env, active, raw[:, i])
    return run


def mma_fragments(k: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(row, col) of each fragment element per lane for ``mma.m16n8k{16,8}`` with 16-bit A/B and f32
    C/D, from the "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8" (floating point) tables of PTX
    ISA 9.7.16.5. ``groupID = lane / 4``, ``tid = lane % 4``; element ``i`` of a fragment is half
    ``i % 2`` of register ``i / 2`` (A, B) or register ``i`` (C, D). Arrays are (32, elements):

    * A (16 x k, row): row ``groupID + 8*((i/2)%2)``, col ``2*tid + i%2 + 8*(i/4)``;
    * B (k x 8, col): row ``2*tid + i%2 + 8*(i/2)``, col ``groupID``;
    * C/D (16 x 8): row ``groupID + 8*(i/2)``, col ``2*tid + i%2``.
    """
    g, t = (_LANE // 4)[:, None], (_LANE % 4)[:, None]
    ia, ib, ic = np.arange(k // 2)[None], np.arange(k // 4)[None], np.arange(4)[None]
    maps = {
        "a": (g + 8 * ((ia // 2) % 2), 2 * t + ia % 2 + 8 * (ia // 4)),
        "b": (2 * t + ib % 2 + 8 * (ib // 2), g),
        "c": (g + 8 * (ic // 2), 2 * t + ic % 2),
    }
    n = {"a": k // 2, "b": k // 4, "c": 4}
    return {key: tuple(np.broadcast_to(x, (WARP, n[key])) for x in rc) for key, rc in maps.items()}


_MMA_INPUTS = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


def _mma(compiler, call: PtxCall):
    """``mma.sync.aligned.m16n8k{16,8}.row.col.f32.{f16,bf16}.{f16,bf16}.f32 d, a, b, c``
    (PTX ISA 9.7.16.5.14): ``D = A * B + C`` per warp, fragments per :func:`mma_fragments`.
    Products are exact in float64, the sum is taken in float64 and rounded to f32 once (see the
    module docstring for when that is bit-identical to tensor cores)."""
    machine = compiler.machine
    mods = call.mods
    k = {"m16n8k16": 16, "m16n8k8": 8}.get(mods["shape"])
    if (k is None or mods["atype"] not in _MMA_INPUTS or mods["btype"] != mods["atype"]
            or (mods["alayout"], mods["blayout"]) != ("row", "col") or (mods["dtype"], mods["ctype"]) != ("f32", "f32")):
        raise NotImplementedError(f"emulator: mma .{'.'.join(v for v in mods.values() if v)}")
    elem = _MMA_INPUTS[mods["atype"]]
    frag = mma_fragments(k)
    a_regs = [_reader(compiler, n, 4) for n in call.operands["a"]]
    b_regs = [_reader(compiler, n, 4) for n in call.operands["b"]]
    c_regs = [_reader(compiler, n, 4) for n in call.operands["c"]]
    d_regs = [_writer(compiler, n) for n in call.operands["d"]]
    where = call.where

    def fragment(regs, env, mask, warps, dtype):
        raw = np.stack([r(env, mask) for r in regs], axis=1)[warps]  # (W, 32, regs, 4)
        return np.ascontiguousarray(raw).view(dtype).reshape(len(warps), WARP, -1).astype(np.float64)

    def run(env, mask):
        warps = _warps(machine, mask, "mma.sync", where)
        W = len(warps)
        if not W:
            return
        A, B, C = np.zeros((W, 16, k)), np.zeros((W, k, 8)), np.zeros((W, 16, 8))
        A[(slice(None), *frag["a"])] = fragment(a_regs, env, mask, warps, elem)
        B[(slice(None), *frag["b"])] = fragment(b_regs, env, mask, warps, elem)
        C[(slice(None), *frag["c"])] = fragment(c_regs, env, mask, warps, np.float32)
        D = (np.matmul(A, B) + C).astype(np.float32)
        T = machine.nthreads
        out = np.zeros((T, 4), np.float32)
        out[warps] = D[(slice(None), *frag["c"])]
        raw = out.view(np.uint8).reshape(T, 4, 4)
        active = np.zeros(T, bool)
        active[warps.ravel()] = True
        for i, write in enumerate(d_regs):
            write(env, active, raw[:, i])
    return run


# ----------------------------------------------------------------------------------------------
# asynchronous copies
# ----------------------------------------------------------------------------------------------


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
        pd = _pointer(dst(env, mask), call.mods["dst"], "cp.async", where)
        ps = _pointer(src(env, mask), call.mods["src"], "cp.async", where)
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


# ----------------------------------------------------------------------------------------------
# ld / st / cvt / mov / shfl / barriers
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
            p = _pointer(addr(env, mask), space, what, where)
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
                    global_writes(machine, p.buffer, threads, off[threads], total, False, where)
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
            p = _pointer(addr(env, mask), space, what, where)
            off = _per_thread(np.asarray(p.offset, np.int64), T)
            threads = np.nonzero(machine.active(mask))[0]
            _check_span(machine, p.buffer, threads, off[threads], dtype.itemsize, dtype.itemsize, what, where)
            check_writable(p.buffer)
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
        p = _pointer(addr(env, mask), space, "prefetch", where)
        off = _per_thread(np.asarray(p.offset, np.int64), machine.nthreads)
        threads = np.nonzero(machine.active(mask))[0]
        _check_span(machine, p.buffer, threads, off[threads], 1, 1, "prefetch", where)
    return run


def _fence(compiler, call: PtxCall):
    """``fence{.sem}.scope`` (PTX ISA 9.7.13.4): no emulated effect (each emulated instruction
    completes before the next; CTAs of later batches see all earlier writes)."""
    return lambda env, mask: None


_CANONICAL_NAN = {np.dtype(np.float16): 0x7FFF, np.dtype(ml_dtypes.bfloat16): 0x7FFF}


def _round(x: np.ndarray, dtype: np.dtype, mods: dict) -> np.ndarray:
    """IEEE conversion of float values ``x`` to ``dtype`` with cvt's .rn/.rz, .relu, .satfinite."""
    rnd = mods.get("rnd") or "rn"
    with np.errstate(all="ignore"):
        y = x.astype(dtype)
        if rnd == "rz":
            over = np.abs(y.astype(np.float64)) > np.abs(x.astype(np.float64))
            y = np.where(over, _toward_zero(y, dtype), y)
        elif rnd != "rn":
            raise NotImplementedError(f"emulator: cvt rounding .{rnd}")
        bits = y.view(f"<u{dtype.itemsize}").copy()
        nan = np.isnan(x)
        if mods.get("satfinite") and dtype in _CANONICAL_NAN:
            big = np.asarray(ml_dtypes.finfo(dtype).max if dtype == ml_dtypes.bfloat16 else np.finfo(dtype).max, dtype)
            y = np.clip(y.astype(np.float32), -float(big), float(big)).astype(dtype)
            bits = y.view(f"<u{dtype.itemsize}").copy()
        if mods.get("relu"):
            bits[(y.astype(np.float32) < 0)] = 0
        if (mods.get("relu") or mods.get("satfinite")) and dtype in _CANONICAL_NAN:
            bits[nan] = _CANONICAL_NAN[dtype]
    return bits.view(dtype)


def _toward_zero(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The neighbour of ``y`` one unit in the last place toward zero (same sign)."""
    bits = y.view(f"<u{dtype.itemsize}")
    step = np.where((bits & ((1 << (8 * dtype.itemsize - 1)) - 1)) != 0, 1, 0).astype(bits.dtype)
    return (bits - step).view(dtype)


def _cvt_x2(dtype):
    def factory(compiler, call: PtxCall):
        """``cvt{.rn,.rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`` (PTX ISA 9.7.10.24): ``a``
        converted goes to the upper half of ``d``, ``b`` to the lower half."""
        machine = compiler.machine
        (d,), (a,), (b,) = (call.operands[k] for k in ("d", "a", "b"))
        write, ra, rb = _writer(compiler, d), _reader(compiler, a, 4, "f32"), _reader(compiler, b, 4, "f32")

        def run(env, mask):
            T = machine.nthreads
            hi = _round(ra(env, mask).view(np.float32)[:, 0], dtype, call.mods)
            lo = _round(rb(env, mask).view(np.float32)[:, 0], dtype, call.mods)
            raw = np.stack([lo.view(np.uint16), hi.view(np.uint16)], axis=1).view(np.uint8).reshape(T, 4)
            write(env, mask, raw)
        return run
    return factory


_FLOATS = ("f16", "bf16", "f32", "f64")


def _cvt(compiler, call: PtxCall):
    """``cvt{.rnd}.dtype.atype d, a`` (PTX ISA 9.7.10.24) between floating-point types (.rn/.rz, or
    no rounding modifier for exact widening); other forms are not emulated."""
    mods = call.mods
    if mods["dtype"] not in _FLOATS or mods["atype"] not in _FLOATS or mods["ftz"] or mods["sat"]:
        raise NotImplementedError(f"emulator: cvt .{'.'.join(v for v in mods.values() if v)}")
    machine = compiler.machine
    src_t, dst_t = _type_dtype(mods["atype"]), _type_dtype(mods["dtype"])
    read = _reader(compiler, call.operands["a"][0], src_t.itemsize, mods["atype"])
    write = _writer(compiler, call.operands["d"][0])

    def run(env, mask):
        x = read(env, mask).view(src_t)[:, 0]
        exact = dst_t.itemsize > src_t.itemsize  # widening (f16/bf16 -> f32 -> f64) needs no rounding
        y = x.astype(dst_t) if exact else _round(x, dst_t, mods)
        write(env, mask, np.ascontiguousarray(y).view(np.uint8).reshape(machine.nthreads, -1))
    return run


def _mov(compiler, call: PtxCall):
    """``mov.type d, a`` and the pack/unpack forms ``mov.b32 d, {a, b}`` / ``mov.b32 {a, b}, d``
    (PTX ISA 9.7.10.4): a bit copy; the first element of a brace vector is the least significant."""
    machine = compiler.machine
    if call.mods["type"] == "pred":
        raise NotImplementedError("emulator: mov.pred")
    total = int(call.mods["type"][1:]) // 8
    srcs, dsts = call.operands["a"], call.operands["d"]
    reads = [_reader(compiler, n, total // len(srcs), "b" + str(8 * total // len(srcs))) for n in srcs]
    writes = [_writer(compiler, n) for n in dsts]

    def run(env, mask):
        raw = np.concatenate([r(env, mask) for r in reads], axis=1).reshape(machine.nthreads, len(writes), -1)
        for i, write in enumerate(writes):
            write(env, mask, raw[:, i])
    return run


def _shfl_ptx(compiler, call: PtxCall):
    """``shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask`` (PTX ISA 9.7.10.6)::

        maxLane = (lane & segmask) | (cval & ~segmask);  minLane = lane & segmask   (c = segmask<<8 | cval)
        up: j = lane - b, p = j >= maxLane;  down: j = lane + b, p = j <= maxLane
        bfly: j = lane ^ b, p = j <= maxLane;  idx: j = minLane | (b & ~segmask), p = j <= maxLane
        if !p: j = lane;  d = a of lane j
    """
    machine = compiler.machine
    mode = call.mods["mode"]
    a = _reader(compiler, call.operands["a"][0], 4, "b32")
    b, c, member = (compiler.expr(call.operands[k][0]) for k in ("b", "c", "membermask"))
    write = _writer(compiler, call.operands["d"][0])
    write_p = _writer(compiler, call.operands["p"][0]) if "p" in call.operands else None
    where = call.where

    def run(env, mask):
        T = machine.nthreads
        lane = machine.lane_of.astype(np.int64)
        bv = _per_thread(np.asarray(b(env, mask)).astype(np.int64), T) & 31
        cv = _per_thread(np.asarray(c(env, mask)).astype(np.int64), T)
        seg, cval = (cv >> 8) & 31, cv & 31
        max_lane, min_lane = (lane & seg) | (cval & ~seg), lane & seg
        j = {"up": lane - bv, "down": lane + bv, "bfly": lane ^ bv, "idx": min_lane | (bv & ~seg)}[mode]
        ok = j >= max_lane if mode == "up" else j <= max_lane
        j = np.where(ok, j, lane)
        out = _gather_lanes(machine, mask, a(env, mask), j, member(env, mask), "shfl.sync", where)
        write(env, mask, out)
        if write_p is not None:
            write_p(env, mask, ok.astype(np.uint32).view(np.uint8).reshape(T, 4))
    return run


def _gather_lanes(machine, mask, values, src_lane, membermask, what: str, where: str):
    """``values`` of lane ``src_lane`` of each thread's warp, after the membermask rules: every
    executing thread is in the mask, every lane of the mask executes, and sources are active."""
    T = machine.nthreads
    active = machine.active(mask)
    lane = machine.lane_of.astype(np.int64)
    members = _per_thread(np.asarray(membermask).astype(np.int64) & 0xFFFFFFFF, T)
    warp_bits = np.zeros((len(machine.groups), machine.waves_per_group), np.int64)
    np.add.at(warp_bits, (machine.wg_of, machine.wave_of), np.where(active, np.int64(1) << lane, 0))
    present = warp_bits[machine.wg_of, machine.wave_of]
    for bad, why in ((active & ((members >> lane) & 1 == 0), "executed by a lane that is not in its membermask"),
                     (active & (members & ~present != 0), "membermask names a lane that does not execute it")):
        if bad.any():
            raise EmulationError(f"{what}: {why}", where, *machine.coords(int(np.argmax(bad))))
    src = np.arange(T) - lane + np.asarray(src_lane, np.int64)
    if (active & ~active[src]).any():
        t = int(np.argmax(active & ~active[src]))
        raise EmulationError(f"{what}: source lane {int(src_lane[t])} is inactive", where, *machine.coords(t))
    return np.asarray(values)[src]


def _shfl_cuda(mode: str):
    def factory(compiler, node, args):
        """CUDA ``__shfl{,_up,_down,_xor}_sync(mask, var, lane|delta|laneMask, width)`` (CUDA C++
        Programming Guide, Warp Shuffle Functions): lanes form segments of ``width`` (a power of two);
        idx reads lane ``srcLane % width`` of the segment, up/down keep their own value when the source
        is outside the segment, xor may read earlier segments but not later ones."""
        machine = compiler.machine
        m, var, b, w = (compiler.expr(a) for a in args)
        dtype, _ = np_dtype(node.ty.dtype)
        where = where_of(node)

        def run(env, mask):
            T = machine.nthreads
            lane = machine.lane_of.astype(np.int64)
            bv = _per_thread(np.asarray(b(env, mask)).astype(np.int64), T)
            width = _per_thread(np.asarray(w(env, mask)).astype(np.int64), T)
            base = lane & ~(width - 1)
            if mode == "idx":
                j = base + (bv & (width - 1))
            elif mode == "up":
                j = np.where(lane - base >= bv, lane - bv, lane)
            elif mode == "down":
                j = np.where(lane - base + bv < width, lane + bv, lane)
            else:
                j = lane ^ bv
                j = np.where(j < base + width, j, lane)
            v = _per_thread(var(env, mask), T)
            return _gather_lanes(machine, mask, v, j, m(env, mask), f"__shfl_{mode}_sync", where).astype(dtype)
        return run
    return factory


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
            ptr = _pointer(addr(env, mask), "shared", f"mbarrier {action}", where)
            bars = _mbarriers(machine)
            n = (np.ones(len(threads), np.int64) if count is None else
                 _per_thread(np.asarray(count(env, mask), np.int64), machine.nthreads)[threads])
            if action == "init":
                for g, bar, pos in bars.by_barrier(ptr, threads):
                    bar.init(g, int(n[pos[-1]]), where)
            elif action == "arrive":
                bars.arrive(ptr, threads, n, where)
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
    ptr = _pointer(addr(env, mask), "shared", "mbarrier wait", where)
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


def _cvta_to_shared(compiler, node, args):
    """``__cvta_generic_to_shared``: the emulator keeps shared addresses as (buffer, offset)."""
    ptr = compiler.expr(args[0])
    where = where_of(node)
    return lambda env, mask: _pointer(ptr(env, mask), "shared", "cvta_generic_to_shared", where)


def _addr(compiler, node, args):
    """``tirx.ptx.addr(base, byte_offset)``: an address operand ``[base + imm]``."""
    base, off = compiler.expr(args[0]), compiler.expr(args[1])
    where = where_of(node)

    def run(env, mask):
        p = _pointer(base(env, mask), "", "ptx.addr", where)
        return Pointer(p.buffer, p.offset + np.asarray(off(env, mask), np.int64))
    return run


def _f32_map(compiler, args, fn, **errstate):
    """The run function of a one-argument f32 math call: numpy's ``fn`` on the f32 operand, under
    ``np.errstate(**errstate)`` (the IEEE cases the call's hardware instruction meets silently)."""
    (x,) = (compiler.expr(a) for a in args)

    def run(env, mask):
        with np.errstate(**errstate):
            return fn(np.asarray(x(env, mask), np.float32))
    return run


def _exp2f(compiler, node, args):
    """``exp2f(x)`` on f32, what TIRx writes for ``T.exp2`` (NVRTC, with TIRx's ``--use_fast_math``,
    compiles it to ``ex2.approx.ftz.f32``, PTX ISA 9.7.3.21, relative error about 2^-22): numpy's
    ``exp2`` rounded to f32 (overflow to inf, as the hardware), within that error of the GPU's value."""
    return _f32_map(compiler, args, np.exp2, over="ignore", under="ignore")


def _log2f(compiler, node, args):
    """``log2f(x)`` on f32, what TIRx writes for ``T.log2`` (NVRTC, with TIRx's ``--use_fast_math``,
    compiles it to ``lg2.approx.ftz.f32``, PTX ISA 9.7.3.20, maximum relative error about 2^-22 away
    from 1): numpy's ``log2`` rounded to f32 (``-inf`` at 0, NaN below), within that error of the GPU's
    value."""
    return _f32_map(compiler, args, np.log2, divide="ignore", invalid="ignore")


def _any_sync(compiler, node, args):
    """CUDA ``__any_sync(mask, pred)`` (CUDA C++ Programming Guide, Warp Vote Functions): non-zero on
    every lane of ``mask`` if ``pred`` is non-zero on one of them; the membermask rules as shuffles'."""
    machine = compiler.machine
    m, pred = (compiler.expr(a) for a in args)
    where = where_of(node)

    def run(env, mask):
        lane = machine.lane_of.astype(np.int64)
        _gather_lanes(machine, mask, lane, lane, m(env, mask), "__any_sync", where)
        vote = machine.active(mask) & (_per_thread(np.asarray(pred(env, mask)), machine.nthreads) != 0)
        warps = np.zeros((len(machine.groups), machine.waves_per_group), bool)
        np.logical_or.at(warps, (machine.wg_of, machine.wave_of), vote)
        return warps[machine.wg_of, machine.wave_of].astype(np.int32)
    return run


def _fmaxf(compiler, node, args):
    """``fmaxf(x, y)`` on f32 (CUDA's ``FMNMX``): the larger, the other operand where one is NaN."""
    x, y = (compiler.expr(a) for a in args)

    def run(env, mask):
        return np.fmax(np.asarray(x(env, mask), np.float32), np.asarray(y(env, mask), np.float32))
    return run


def _index(kind: str):
    def factory(compiler, node, args):
        machine, tag = compiler.machine, f"{kind}.{args[0].value}"
        return lambda env, mask: machine.thread_index(tag)
    return factory


def _extent(attr: str):
    def factory(compiler, node, args):
        value = np.int32(getattr(compiler.machine, attr).get(str(args[0].value), 1))
        return lambda env, mask: value
    return factory


def _ptx(name: str, semantics):
    """Factory for ``tirx.ptx.<name>``: decode the call, then build its (predicated) closure."""
    entry = ptx_entry(name)

    def factory(compiler, node, args):
        call = PtxCall(entry, node)
        return _predicated(compiler, call, semantics(compiler, call))
    return entry.op_name, factory


def calls() -> dict:
    machine_ops = {
        "tirx.cuda.thread_idx": _index("threadIdx"),
        "tirx.cuda.block_idx": _index("blockIdx"),
        "tirx.cuda.block_dim": _extent("block"),
        "tirx.cuda.grid_dim": _extent("grid"),
        "tirx.cuda.lane_id": lambda c, n, a: (lambda env, mask: c.machine.lane_of.astype(np.int32)),
        "tirx.cuda.warp_id": lambda c, n, a: (lambda env, mask: c.machine.wave_of.astype(np.int32)),
        "tirx.cuda.cta_sync": lambda c, n, a: _barrier(c, where_of(n)),
        "tirx.cuda.warp_sync": lambda c, n, a: (lambda env, mask: None),
        "tirx.cuda.thread_fence": lambda c, n, a: (lambda env, mask: None),
        "tirx.cuda.cvta_generic_to_shared": _cvta_to_shared,
        "tirx.cuda.__shfl_sync": _shfl_cuda("idx"),
        "tirx.cuda.__shfl_up_sync": _shfl_cuda("up"),
        "tirx.cuda.__shfl_down_sync": _shfl_cuda("down"),
        "tirx.cuda.__shfl_xor_sync": _shfl_cuda("xor"),
        "tirx.cuda.any_sync": _any_sync,
        "tirx.ptx.addr": _addr,
        "tirx.cuda.mbarrier_wait": _mbarrier_wait_cuda,
        "exp2f": _exp2f,
        "log2f": _log2f,
        "fmaxf": _fmaxf,
    }
    ptx_ops = dict(_ptx(name, sem) for name, sem in (
        ("ldmatrix", _ldmatrix),
        ("mma", _mma),
        *((f"cp_async_{cop}{form}", _cp_async) for cop in ("ca", "cg") for form in ("", "_src_size", "_ignore_src")),
        ("cp_async_commit_group", _cp_async_commit),
        ("cp_async_wait_group", _cp_async_wait),
        ("cp_async_wait_all", _cp_async_wait_all),
        ("ld", _ld_st(True)), ("ld_vec", _ld_st(True)),
        ("st", _ld_st(False)), ("st_vec", _ld_st(False)),
        ("cvt_f16x2_f32", _cvt_x2(np.dtype(np.float16))),
        ("cvt_bf16x2_f32", _cvt_x2(np.dtype(ml_dtypes.bfloat16))),
        ("cvt", _cvt),
        ("mov", _mov), *((f"mov_{d}_{w}", _mov) for d in ("pack", "unpack")
                         for w in ("b16x2", "b32x2", "b16x4", "b64x2", "b32x4")),
        ("shfl_sync", _shfl_ptx), ("shfl_sync_p", _shfl_ptx),
        ("bar_sync", _bar_sync), ("barrier_sync", _bar_sync),
        ("bar_sync_count", _named_barrier(True)), ("barrier_sync_count", _named_barrier(True)),
        ("bar_arrive", _named_barrier(False)), ("barrier_arrive", _named_barrier(False)),
        ("mbarrier_init", _mbarrier_op("init")), ("mbarrier_arrive", _mbarrier_op("arrive")),
        ("mbarrier_arrive_nocount", _mbarrier_op("arrive")), ("cp_async_mbarrier_arrive", _mbarrier_op("cp_arrive")),
        *((n, _mbarrier_wait_ptx) for n in ("mbarrier_test_wait_parity", "mbarrier_try_wait_parity",
                                             "mbarrier_try_wait_parity_no_hint")),
        ("atom", _atomic(True)), ("red", _atomic(False)), ("fence", _fence), ("prefetch", _prefetch),
    ))
    return {**machine_ops, **ptx_ops}


__all__ = ["AsyncCopies", "PtxCall", "calls", "mma_fragments", "unfinished_barriers"]
