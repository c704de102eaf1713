"""Semantics of the ``llvm.amdgcn.*`` intrinsics (and our LLVM helpers) that gfx950 kernels use.

MFMA and ds_read_tr semantics come from ``tvm_cdna4.isa.reference`` (never restated here); this
module only moves register words between emulated lanes and the reference.
"""

from __future__ import annotations

import numpy as np

from ..isa import CATALOG, SCALE_FORMAT_CODES, DsReadTrOp, MfmaOp, lanes, reference
from ..isa.llvm_types import tir_dtype
from ..isa.mfma_table import SCALE_VECTOR_WORDS
from ..isa.llvm_helpers import (
    _SCHED_PROGRAMS,
    BARRIER,
    BUFFER_LOAD_DTYPES,
    BUFFER_LOAD_LDS_MNEMONICS,
    CVT_PK_BF16_FP8,
    CVT_PK_FP8,
    EXP2,
    LOG2,
    FENCE_ACQUIRE_AGENT,
    FENCE_RELEASE_AGENT,
    GLOBAL_ATOMIC_ADD_F32,
    GLOBAL_ATOMIC_ADD_F32_MNEMONIC,
    GLOBAL_ATOMIC_ADD_U32,
    GLOBAL_ATOMIC_ADD_U32_MNEMONIC,
    PREFIX,
    WAVE_REDUCE_COMBINES,
    buffer_load_helper,
    buffer_load_lds_helper,
    wave_reduce_helper,
)
from . import mathcalls
from .errors import EmulationError
from .interp import np_dtype, where_of
from .globalmem import GlobalAtomics
from .memory import InFlightLdsWrites, Pointer, check_bounds, check_lds_read, check_writable

WAVE = 64


def _words(value, nthreads: int) -> np.ndarray:
    """Per-thread register contents -> uint32 words (T, nwords)."""
    v = np.asarray(value)
    if v.ndim == 0 or v.shape[0] != nthreads:
        v = np.broadcast_to(v, (nthreads, *v.shape))
    v = np.ascontiguousarray(v.reshape(nthreads, -1))
    return v.view(np.uint8).reshape(nthreads, -1).view("<u4")


def _from_words(words: np.ndarray, dtype: np.dtype, lanes: int):
    out = np.ascontiguousarray(words).view(dtype)
    return out if lanes > 1 else out[:, 0]


def _imm(node) -> int:
    return int(node.value)


def _mfma_call(op: MfmaOp, fixed: dict | None = None):
    """Handler factory for an MFMA intrinsic or helper (``fixed`` holds immediates baked into helpers)."""

    def factory(compiler, node, args):
        machine = compiler.machine
        a, b, c = (compiler.expr(x) for x in args[:3])
        if op.kind == "mfma_scale":
            cbsz, blgp, op_sel_a, op_sel_b = (_imm(args[i]) for i in (3, 4, 5, 7))
            sa, sb = compiler.expr(args[6]), compiler.expr(args[8])
            mods = dict(cbsz=cbsz, blgp=blgp, op_sel_a=op_sel_a, op_sel_b=op_sel_b)
        else:
            mods = fixed or {k: _imm(args[3 + i]) for i, k in enumerate(("cbsz", "abid", "blgp"))}
        dtype, lanes = np_dtype(node.ty.dtype)
        where = where_of(node)
        na, nb = (SCALE_VECTOR_WORDS[SCALE_FORMAT_CODES[mods[k]]] for k in ("cbsz", "blgp")) \
            if op.kind == "mfma_scale" else (None, None)

        def run(env, mask):
            machine.require_full_waves(mask, op.mnemonic, where)
            T = machine.nthreads
            aw, bw, cw = (_words(f(env, mask), T) for f in (a, b, c))
            out = np.zeros_like(cw)
            extra = {}
            if op.kind == "mfma_scale":
                sav = np.broadcast_to(np.asarray(sa(env, mask)), (T,)).astype(np.int64) & 0xFFFFFFFF
                sbv = np.broadcast_to(np.asarray(sb(env, mask)), (T,)).astype(np.int64) & 0xFFFFFFFF
            for _, _, lanes_idx in machine.waves(mask):
                if op.kind == "mfma_scale":
                    extra = dict(scale_a=sav[lanes_idx].astype(np.uint32), scale_b=sbv[lanes_idx].astype(np.uint32))
                    out[lanes_idx] = reference.mfma_words(op, aw[lanes_idx][:, :na], bw[lanes_idx][:, :nb],
                                                          cw[lanes_idx], **mods, **extra)
                else:
                    out[lanes_idx] = reference.mfma_words(op, aw[lanes_idx], bw[lanes_idx], cw[lanes_idx], **mods)
            return _from_words(out, dtype, lanes)
        return run
    return factory


def _tr_call(op: DsReadTrOp):
    def factory(compiler, node, args):
        machine = compiler.machine
        ptr = compiler.expr(args[0])
        dtype, lanes = np_dtype(node.ty.dtype)
        where = where_of(node)
        nbytes = op.load_bits // 8

        def run(env, mask):
            machine.require_full_waves(mask, op.mnemonic, where)
            p = ptr(env, mask)
            if not isinstance(p, Pointer) or not p.buffer.scope.startswith("shared"):
                raise EmulationError(f"{op.mnemonic} needs an LDS address", where)
            buf, T = p.buffer, machine.nthreads
            addr = np.broadcast_to(np.asarray(p.offset, np.int64), (T,))
            out = np.zeros((T, op.load_bits // 32), np.uint32)
            for g, w, idx in machine.waves(mask):
                try:  # the reference enforces the address contract (alignment, range)
                    out[idx] = reference.ds_read_tr(op, buf.data[g], addr[idx])
                except reference.LaneAddressError as err:
                    raise EmulationError(f"{op.mnemonic}: LDS {err.detail} ('{buf.name}')", where,
                                         int(machine.groups[g]), w, err.lane) from None
                m = np.zeros(T, bool)
                m[idx] = True
                check_lds_read(machine, buf, machine.wg_of, addr.reshape(T), nbytes, m, where)
            return _from_words(out, dtype, lanes)
        return run
    return factory


def _mbcnt(hi: bool):
    def factory(compiler, node, args):
        machine = compiler.machine
        m, x = (compiler.expr(a) for a in args)

        def run(env, mask):
            lane = machine.lane_of
            below = np.clip(lane - (32 if hi else 0), 0, 32).astype(np.uint64)
            bits = (np.asarray(m(env, mask)).astype(np.int64) & 0xFFFFFFFF).astype(np.uint64)
            sel = bits & ((np.uint64(1) << below) - np.uint64(1))
            sel = np.ascontiguousarray(np.broadcast_to(sel, lane.shape), np.uint64)
            count = np.unpackbits(sel.view(np.uint8)).reshape(*lane.shape, 64).sum(-1, dtype=np.int32)  # popcount
            return (np.asarray(x(env, mask)) + count).astype(np.int32)
        return run
    return factory


def _workitem(dim: str):
    def factory(compiler, node, args):
        machine = compiler.machine
        return lambda env, mask: machine.thread_index(f"threadIdx.{dim}")
    return factory


def _workgroup(dim: str):
    def factory(compiler, node, args):
        machine = compiler.machine
        return lambda env, mask: machine.thread_index(f"blockIdx.{dim}")
    return factory


def _readfirstlane(compiler, node, args):
    machine = compiler.machine
    x = compiler.expr(args[0])

    def run(env, mask):
        v = np.broadcast_to(np.asarray(x(env, mask)), (machine.nthreads,))
        out = v.copy()
        active = machine.active(mask)
        for _, _, idx in machine.waves(mask):
            first = idx[np.argmax(active[idx])]
            out[idx] = v[first]
        return out
    return run


F32_MIN_NORMAL = np.float32(2.0 ** -126)


def _exp2(compiler, node, args):
    """``llvm.amdgcn.exp2`` (``v_exp_f32``): 2^x in f32; a denormal input reads as 0 and a denormal
    result flushes to 0 (the hardware's; LLVM's ``llvm.exp2.f32`` lowering scales around it). The
    hardware's error (about 1 ulp) is not modelled: the result is 2^x rounded to f32."""
    x = compiler.expr(args[0])

    def run(env, mask):
        v = np.asarray(x(env, mask), np.float32)
        v = np.where(np.abs(v) < F32_MIN_NORMAL, np.float32(0), v)
        with np.errstate(over="ignore"):
            out = np.exp2(v.astype(np.float64)).astype(np.float32)
        return np.where(out < F32_MIN_NORMAL, np.float32(0), out)
    return run


def _log2(compiler, node, args):
    """``llvm.amdgcn.log`` (``v_log_f32``): log2 x in f32; a denormal input reads as 0 (-inf), a
    negative one gives NaN. The hardware's error (about 1 ulp) is not modelled."""
    x = compiler.expr(args[0])

    def run(env, mask):
        v = np.asarray(x(env, mask), np.float32)
        v = np.where(np.abs(v) < F32_MIN_NORMAL, np.float32(0), v).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log2(v).astype(np.float32)
    return run


def _fmuladd(compiler, node, args):
    """``llvm.fmuladd`` (TIRx's lowering of ``a * b + c`` on ROCm; ``v_fma_f32`` / ``v_fmac_f32`` on
    gfx950): fused, one rounding of the exact ``a * b + c`` (through float64, where ``a * b`` of two
    f32 values is exact)."""
    a, b, c = (compiler.expr(x) for x in args)
    dtype, _ = np_dtype(node.ty.dtype)

    def run(env, mask):
        wide = np.float64 if dtype.itemsize < 8 else np.longdouble
        fused = np.asarray(a(env, mask), wide) * np.asarray(b(env, mask), wide) + np.asarray(c(env, mask), wide)
        return fused.astype(dtype)
    return run


def _barrier(compiler, node, args):
    """``s_barrier``: no wait; LDS writes still in flight stay unordered (``Machine.issue_lds``)."""
    machine = compiler.machine
    where = where_of(node)

    def run(env, mask):
        machine.barrier(mask, where)
    return run


def _workgroup_barrier(compiler, node, args):
    """Our workgroup barrier: release fence (``s_waitcnt lgkmcnt(0)``), ``s_barrier``."""
    machine = compiler.machine
    where = where_of(node)

    def run(env, mask):
        machine.wait_lds(mask, 0)
        machine.barrier(mask, where)
    return run


def _waitcnt(compiler, node, args):
    """``s_waitcnt imm``: lgkmcnt (bits 11:8 of the gfx9 immediate) and vmcnt (bits 3:0 and 15:14;
    63 waits for nothing)."""
    machine = compiler.machine
    imm = _imm(args[0])
    lgkmcnt, vmcnt = (imm >> 8) & 0xF, (imm & 0xF) | ((imm >> 14) & 0x3) << 4
    where = where_of(node)

    def run(env, mask):
        machine.wait_lds(mask, lgkmcnt)
        if vmcnt < 63:
            _vmem(machine).wait(mask, vmcnt, where)
    return run


def _buffer_bytes(machine, p, size: int, v, s, width: int, mask, what: str, where: str):
    """Each active lane's ``width`` bytes at ``voffset + soffset`` of the raw buffer (``size`` bytes at
    global pointer ``p``): (bytes (T, width), lanes in range). Lanes with ``voffset >= size`` read zeros
    (the raw buffer range check). A lane only partly in range, or not 4-byte aligned, is an error: the
    kernel would depend on details of the hardware check."""
    T = machine.nthreads
    if not isinstance(p, Pointer) or p.buffer.scope != "global":
        raise EmulationError(f"{what} needs a global buffer pointer", where)
    v = np.broadcast_to(np.asarray(v, np.int64) & 0xFFFFFFFF, (T,))
    s = np.broadcast_to(np.asarray(s, np.int64) & 0xFFFFFFFF, (T,))
    inside = machine.active(mask) & (v < size)
    addr = v + s
    for why, bad in (("is only partly inside the buffer range", inside & (addr + width > size)),
                     ("is not 4-byte aligned", inside & (addr % 4 != 0))):
        if bad.any():
            t = int(np.argmax(bad))
            raise EmulationError(f"{what} at byte {int(addr[t])} (voffset {int(v[t])}, soffset {int(s[t])}, "
                                 f"range {size}) {why}", where, *machine.coords(t))
    byte = np.asarray(p.offset, np.int64) + addr
    check_bounds(machine, p.buffer, byte, width, inside, where)
    out = np.zeros((T, width), np.uint8)
    rows = np.flatnonzero(inside)
    if rows.size:
        out[rows] = p.buffer.data[0][byte[rows, None] + np.arange(width)]
    return out, inside


def _buffer_load(compiler, node, args):
    """``T.rocm.buffer_load``: 16 or 4 bytes at ``voffset + soffset`` (``_buffer_bytes``), one
    vector-memory load of each wave (``VmemLoads``)."""
    machine = compiler.machine
    ptr, nbytes, voff, soff = (compiler.expr(a) for a in args)
    dtype, lanes = np_dtype(node.ty.dtype)
    width = dtype.itemsize * lanes  # bytes per lane
    where = where_of(node)

    def run(env, mask):
        out, _ = _buffer_bytes(machine, ptr(env, mask), int(nbytes(env, mask)), voff(env, mask), soff(env, mask),
                               width, mask, "buffer_load", where)
        _vmem(machine).count(mask)
        return _from_words(out.view("<u4"), dtype, lanes)
    return run


class VmemLoads(InFlightLdsWrites):
    """Per-wave vector-memory load counting (``vmcnt``) and the direct-to-LDS loads in flight.

    Every ``T.rocm.buffer_load`` / ``T.rocm.buffer_load_lds`` is one load of each wave that issues it,
    numbered in issue order; loads return in order, so ``s_waitcnt vmcnt(n)`` completes every load
    of the waiting wave but its ``n`` newest. (Global loads written as TIR element accesses are not
    counted: the emulator then counts fewer newer loads than the hardware, so it may call a load
    outstanding that has completed, never the reverse.) A direct-to-LDS load's bytes are in flight
    (``Buffer.pending``) from issue to completion; its cross-wave race checks run at both points,
    so a barrier that its wave reaches before the wait does not publish it."""

    what = "the direct-to-LDS load"
    lgkm = False  # completed by vmcnt, not lgkmcnt

    def __init__(self, machine):
        super().__init__(machine)
        self.issued = np.zeros((len(machine.groups), machine.waves_per_group), np.int64)

    def count(self, mask) -> np.ndarray:
        """One load of each wave with active lanes; its number (per wave, shape of ``issued``)."""
        self.issued += 1 if mask is None else self.machine.wave_counts(mask) > 0
        return self.issued

    def issue_lds(self, mask, buf, inst, addr, data, where: str):
        machine = self.machine
        seq = self.count(mask)
        threads = np.flatnonzero(machine.active(mask))
        self.start(threads, buf, inst, addr, data, where, seq=seq[machine.wg_of[threads], machine.wave_of[threads]])

    def wait(self, mask, outstanding: int, where: str):
        """``s_waitcnt vmcnt(outstanding)`` in the waves with active lanes."""
        machine = self.machine
        waiting = machine.wave_counts(mask) > 0
        done_upto = np.where(waiting, self.issued - outstanding, 0)
        self.retire(lambda c: c["seq"] <= done_upto[machine.wg_of[c["thread"]], machine.wave_of[c["thread"]]], where)


def _vmem(machine) -> VmemLoads:
    return machine.state_of("vmem", VmemLoads)


def _buffer_load_lds(size: int):
    """``T.rocm.buffer_load_lds``: each active lane's ``size`` bytes (``_buffer_bytes``; masked lanes
    zeros) go to LDS bytes ``[base + lane*size, base + (lane+1)*size)`` of its wave's LDS base, which
    must be the same in all active lanes of the wave and 4-byte aligned; asynchronous
    (``VmemLoads``)."""
    mnemonic = BUFFER_LOAD_LDS_MNEMONICS[size] + " ... lds"

    def factory(compiler, node, args):
        machine = compiler.machine
        ptr, nbytes, voff, soff, dst = (compiler.expr(a) for a in args)
        where = where_of(node)

        def run(env, mask):
            data, _ = _buffer_bytes(machine, ptr(env, mask), int(nbytes(env, mask)), voff(env, mask), soff(env, mask),
                                    size, mask, mnemonic, where)
            q, T = dst(env, mask), machine.nthreads
            if not isinstance(q, Pointer) or not q.buffer.scope.startswith("shared"):
                raise EmulationError(f"{mnemonic} needs an LDS destination", where)
            base = np.broadcast_to(np.asarray(q.offset, np.int64), (T,))
            active = machine.active(mask)
            for g, w, idx in machine.waves(mask):
                lanes = idx[active[idx]]
                if (base[lanes] != base[lanes[0]]).any():
                    k = lanes[int(np.argmax(base[lanes] != base[lanes[0]]))]
                    raise EmulationError(f"{mnemonic}: the LDS destination is not wave-uniform (lane "
                                         f"{int(machine.lane_of[lanes[0]])}: byte {int(base[lanes[0]])}, lane "
                                         f"{int(machine.lane_of[k])}: byte {int(base[k])}); it goes to M0",
                                         where, *machine.coords(int(k)))
                if base[lanes[0]] % 4:
                    raise EmulationError(f"{mnemonic}: the LDS destination byte {int(base[lanes[0]])} is not 4-byte "
                                         "aligned", where, *machine.coords(int(lanes[0])))
            threads = np.flatnonzero(active)
            addr = base[threads] + machine.lane_of[threads] * size
            check_bounds(machine, q.buffer, addr, size, None, where)
            _vmem(machine).issue_lds(mask, q.buffer, machine.wg_of[threads], addr, data[threads], where)
        return run
    return factory


def _atomic_dwords(machine, name, p, index, mask, where):
    """The active threads of a 32-bit global atomic and the byte each one updates (element ``index``
    of the pointer ``p``), checked: a global buffer, 4-byte aligned, in bounds."""
    if not isinstance(p, Pointer) or p.buffer.scope != "global":
        raise EmulationError(f"{name} needs a global buffer pointer", where)
    threads = np.flatnonzero(machine.active(mask))
    T = machine.nthreads
    byte = (np.asarray(p.offset, np.int64) + np.broadcast_to(np.asarray(index, np.int64), (T,)) * 4)[threads]
    bad = byte % 4 != 0
    if bad.any():
        raise EmulationError(f"{name} at byte {int(byte[bad][0])} is not 4-byte aligned", where,
                             *machine.coords(int(threads[bad][0])))
    check_bounds(machine, p.buffer, byte, 4, None, where)
    check_writable(p.buffer)
    return threads, byte


def _global_atomic_add_f32(compiler, node, args):
    """``T.rocm.global_atomic_add_f32``: each active lane adds its f32 value to element ``index`` of
    the global buffer, one lane at a time in thread order (atomics to one address are ordered; a
    plain store to the same bytes in the launch is a race: ``GlobalAtomics``)."""
    machine = compiler.machine
    machine.state.setdefault("atomics", GlobalAtomics())
    ptr, index, value = (compiler.expr(a) for a in args)
    where = where_of(node)

    def run(env, mask):
        p, T = ptr(env, mask), machine.nthreads
        threads, byte = _atomic_dwords(machine, GLOBAL_ATOMIC_ADD_F32_MNEMONIC, p, index(env, mask), mask, where)
        machine.state["atomics"].record_atomic(machine, p.buffer, byte, 4, threads, where)
        v = np.broadcast_to(np.asarray(value(env, mask), np.float32), (T,))[threads]
        np.add.at(p.buffer.typed(np.dtype(np.float32))[0], byte // 4, v)  # in thread order, f32 each step
    return run


def _global_atomic_add_u32(compiler, node, args):
    """``T.rocm.global_atomic_add_u32``: each active lane adds its value to element ``index`` and
    gets the element's old value, one lane at a time in thread order (so of the lanes and
    workgroups that add to one counter, exactly one sees each old value)."""
    machine = compiler.machine
    machine.state.setdefault("atomics", GlobalAtomics())
    ptr, index, value = (compiler.expr(a) for a in args)
    where = where_of(node)
    name = GLOBAL_ATOMIC_ADD_U32_MNEMONIC

    def run(env, mask):
        p, T = ptr(env, mask), machine.nthreads
        threads, byte = _atomic_dwords(machine, name, p, index(env, mask), mask, where)
        machine.state["atomics"].record_atomic(machine, p.buffer, byte, 4, threads, where, returns=True)
        v = np.broadcast_to(np.asarray(value(env, mask)).astype(np.uint32), (T,))[threads]
        mem = p.buffer.typed(np.dtype(np.uint32))[0]
        old = np.zeros(T, np.uint32)
        for t, e, x in zip(threads, byte // 4, v):  # in thread order: each lane sees the ones before it
            old[t] = mem[e]
            mem[e] = np.uint32((int(mem[e]) + int(x)) & 0xFFFFFFFF)
        return old
    return run


def _fence(release: bool):
    """``T.rocm.fence_release`` / ``fence_acquire`` (agent scope): every emulated memory access has
    completed when the next instruction runs, so a fence orders by itself; what the emulator keeps
    is which atomic updates were released and which threads acquired after (``GlobalAtomics``)."""
    def factory(compiler, node, args):
        machine = compiler.machine
        machine.state.setdefault("atomics", GlobalAtomics())

        def run(env, mask):
            atomics = machine.state["atomics"]
            (atomics.release if release else atomics.acquire)(machine, mask)
        return run
    return factory


_COMBINE = {"max": np.maximum, "sum": np.add}


def _wave_reduce(combine: str, lane_mask: int):
    """``T.rocm.wave_reduce``: the helper's exchange steps (``lanes.reduce_steps``), each lane's f32
    value combined with its partner's (``lanes.exchange_partner``), step by step in f32 as the
    hardware rounds them; wave-collective. (``max`` propagates a NaN here; the helper's is
    unspecified.)"""
    fn, name = _COMBINE[combine], wave_reduce_helper(combine, lane_mask)

    def factory(compiler, node, args):
        machine = compiler.machine
        value = compiler.expr(args[0])
        where = where_of(node)

        def run(env, mask):
            machine.require_full_waves(mask, name, where)
            x = np.array(np.broadcast_to(np.asarray(value(env, mask), np.float32), (machine.nthreads,)))
            base = machine.tid - machine.lane_of + (machine.wg_of * machine.block_threads)  # thread of lane 0
            for step in lanes.reduce_steps(lane_mask):
                x = fn(x, x[base + lanes.exchange_partner(step, machine.lane_of)]).astype(np.float32)
            return x
        return run
    return factory


FP8_MAX = 448.0  # e4m3's largest finite value


def _cvt_pk_fp8(compiler, node, args):
    """``llvm.amdgcn.cvt.pk.fp8.f32(a, b, old, word_sel)`` (``v_cvt_pk_fp8_f32``; gfx950: OCP e4m3):
    ``a`` and ``b`` rounded to nearest even into bytes 0 and 1 (``word_sel`` false) or 2 and 3 of
    ``old``, the other half of ``old`` kept. Out of e4m3's range (``|x| > 448``, not NaN) the
    hardware's result depends on its clamp mode, which is not modelled: an ``EmulationError``."""
    import ml_dtypes

    a, b, old, sel = (compiler.expr(x) for x in args)
    where = where_of(node)
    dtype, _ = np_dtype(node.ty.dtype)  # i32

    def run(env, mask):
        pair = [np.asarray(f(env, mask), np.float32) for f in (a, b)]
        for v in pair:
            if (np.abs(np.where(np.isnan(v), 0, v)) > FP8_MAX).any():
                raise EmulationError(f"v_cvt_pk_fp8_f32: a value beyond e4m3's {FP8_MAX:g} (clamp mode not modelled)",
                                     where)
        lo, hi = (v.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.uint32) for v in pair)
        packed = lo | (hi << np.uint32(8))
        shift = np.where(np.asarray(sel(env, mask), bool), np.uint32(16), np.uint32(0))
        keep = np.asarray(old(env, mask)).astype(np.uint32) & ~(np.uint32(0xFFFF) << shift)
        return (keep | (packed << shift)).astype(np.uint32).view(dtype)
    return run


def _cvt_pk_bf16_fp8(high: bool):
    """``CVT_PK_BF16_FP8[high](word)`` (``v_cvt_scalef32_pk_bf16_fp8``, scale 1): bytes 0-1 (or 2-3) of
    ``word`` as OCP e4m3, to two bf16 (exact) in one 32-bit word, the first in the low half."""
    def factory(compiler, node, args):
        import ml_dtypes

        (word,) = (compiler.expr(x) for x in args)
        dtype, _ = np_dtype(node.ty.dtype)

        def run(env, mask):
            w = np.asarray(word(env, mask)).astype(np.uint32) >> np.uint32(16 if high else 0)
            pair = [((w >> np.uint32(8 * i)) & np.uint32(0xFF)).astype(np.uint8).view(ml_dtypes.float8_e4m3fn)
                    for i in (0, 1)]
            lo, hi = (v.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.uint32) for v in pair)
            return (lo | (hi << np.uint32(16))).astype(np.uint32).view(dtype)
        return run
    return factory


def _noop(compiler, node, args):
    return lambda env, mask: None


def calls() -> dict:
    table = {
        "llvm.amdgcn.mbcnt.lo": _mbcnt(False),
        "llvm.amdgcn.mbcnt.hi": _mbcnt(True),
        "llvm.amdgcn.readfirstlane": _readfirstlane,
        "llvm.amdgcn.s.barrier": _barrier,
        "tirx.gpu_storage_sync": _barrier,  # TIRx's ROCm codegen emits a bare s_barrier for it
        "llvm.amdgcn.s.waitcnt": _waitcnt,
        "llvm.amdgcn.iglp.opt": _noop,  # scheduling hints: no semantics
        "llvm.amdgcn.sched.group.barrier": _noop,
        "llvm.amdgcn.sched.barrier": _noop,
        BARRIER: _workgroup_barrier,
        EXP2: _exp2,
        LOG2: _log2,
        CVT_PK_FP8: _cvt_pk_fp8,
        CVT_PK_BF16_FP8[False]: _cvt_pk_bf16_fp8(False),
        CVT_PK_BF16_FP8[True]: _cvt_pk_bf16_fp8(True),
        "llvm.fmuladd": _fmuladd,
        **{f"llvm.amdgcn.workitem.id.{d}": _workitem(d) for d in "xyz"},
        **{f"llvm.amdgcn.workgroup.id.{d}": _workgroup(d) for d in "xyz"},
    }
    table.update(mathcalls.calls())
    table.update({name: _noop for name in _SCHED_PROGRAMS})
    table.update({buffer_load_helper(d): _buffer_load for d in BUFFER_LOAD_DTYPES})
    table.update({buffer_load_lds_helper(n): _buffer_load_lds(n) for n in BUFFER_LOAD_LDS_MNEMONICS})
    table[GLOBAL_ATOMIC_ADD_F32] = _global_atomic_add_f32
    table[GLOBAL_ATOMIC_ADD_U32] = _global_atomic_add_u32
    table[FENCE_RELEASE_AGENT] = _fence(True)
    table[FENCE_ACQUIRE_AGENT] = _fence(False)
    table.update({wave_reduce_helper(c, m): _wave_reduce(c, m) for c in WAVE_REDUCE_COMBINES
                  for m in lanes.REDUCE_MASKS})
    tr_by_base: dict[str, list[DsReadTrOp]] = {}
    for op in CATALOG.values():
        if isinstance(op, DsReadTrOp):
            # LLVM names overloaded intrinsics without the suffix: pick the variant by result type
            tr_by_base.setdefault(op.llvm_intrinsic.rsplit(".", 1)[0], []).append(op)
            table[PREFIX + op.name] = _tr_call(op)
        elif op.kind == "mfma_scale":
            table[op.llvm_intrinsic.rsplit(".", 2)[0]] = _mfma_call(op)
        else:
            table[op.llvm_intrinsic] = _mfma_call(op)
            if op.a_vector == "<8 x bfloat>":
                for blgp in range(8):
                    table[f"{PREFIX}{op.name}_blgp{blgp}"] = _mfma_call(op, dict(cbsz=0, abid=0, blgp=blgp))
    for base, ops in tr_by_base.items():
        table[base] = _tr_by_type(ops)
    return table


def _tr_by_type(ops: list[DsReadTrOp]):
    def factory(compiler, node, args):
        dtype = str(node.ty.dtype)
        for op in ops:
            if tir_dtype(op.result_vector) == dtype and "bfloat" not in op.result_vector:
                return _tr_call(op)(compiler, node, args)
        raise NotImplementedError(f"emulator: {ops[0].llvm_intrinsic} returning {dtype}")
    return factory
