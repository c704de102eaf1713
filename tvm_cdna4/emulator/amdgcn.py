"""Semantics of the ``llvm.amdgcn.*`` intrinsics (and our LLVM helpers) that gfx950 kernels use.

MFMA and ds_read_tr semantics come from ``tvm_cdna4.isa.reference`` (never restated here); this
module only moves register words between emulated lanes and the reference.
"""

from __future__ import annotations

import numpy as np

from ..isa import CATALOG, SCALE_FORMAT_CODES, DsReadTrOp, MfmaOp, reference
from ..isa.llvm_types import tir_dtype
from ..isa.mfma_table import SCALE_VECTOR_WORDS
from ..rocm.helpers import _SCHED_PROGRAMS, BARRIER, BUFFER_LOAD_DTYPES, PREFIX, buffer_load_helper
from .errors import EmulationError
from .interp import np_dtype, where_of
from .memory import Pointer, check_bounds, check_lds_read

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
            count = np.array([bin(int(v)).count("1") for v in np.broadcast_to(sel, lane.shape)], np.int32) \
                if np.ndim(sel) else np.full(lane.shape, bin(int(sel)).count("1"), np.int32)
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
    """``s_waitcnt imm``: the LDS part, lgkmcnt (bits 11:8 of the gfx9 immediate)."""
    machine = compiler.machine
    lgkmcnt = (_imm(args[0]) >> 8) & 0xF

    def run(env, mask):
        machine.wait_lds(mask, lgkmcnt)
    return run


def _buffer_load(compiler, node, args):
    """``T.rocm.buffer_load``: 16 or 4 bytes at ``voffset + soffset``; lanes with ``voffset >= num_bytes``
    read zeros (the raw buffer range check). A lane only partly in range, or a range larger than
    the buffer, is an error: the kernel would depend on details of the hardware check."""
    machine = compiler.machine
    ptr, nbytes, voff, soff = (compiler.expr(a) for a in args)
    dtype, lanes = np_dtype(node.ty.dtype)
    width = dtype.itemsize * lanes  # bytes per lane
    where = where_of(node)

    def run(env, mask):
        p, size, T = ptr(env, mask), int(nbytes(env, mask)), machine.nthreads
        if not isinstance(p, Pointer) or p.buffer.scope != "global":
            raise EmulationError("buffer_load needs a global buffer pointer", where)
        v = np.broadcast_to(np.asarray(voff(env, mask), np.int64) & 0xFFFFFFFF, (T,))
        s = np.broadcast_to(np.asarray(soff(env, mask), np.int64) & 0xFFFFFFFF, (T,))
        active = machine.active(mask)
        inside = active & (v < size)
        addr = v + s
        for what, bad in (("is only partly inside the buffer range", inside & (addr + width > size)),
                          ("is not 4-byte aligned", inside & (addr % 4 != 0))):
            if bad.any():
                t = int(np.argmax(bad))
                raise EmulationError(f"buffer_load at byte {int(addr[t])} (voffset {int(v[t])}, soffset {int(s[t])}, "
                                     f"range {size}) {what}", where, *machine.coords(t))
        byte = np.asarray(p.offset, np.int64) + addr
        check_bounds(machine, p.buffer, byte, width, inside, where)
        out = np.zeros((T, width), np.uint8)
        rows = np.flatnonzero(inside)
        if rows.size:
            out[rows] = p.buffer.data[0][byte[rows, None] + np.arange(width)]
        return _from_words(out.view("<u4"), dtype, lanes)
    return run


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
        **{f"llvm.amdgcn.workitem.id.{d}": _workitem(d) for d in "xyz"},
        **{f"llvm.amdgcn.workgroup.id.{d}": _workgroup(d) for d in "xyz"},
    }
    table.update({name: _noop for name in _SCHED_PROGRAMS})
    table.update({buffer_load_helper(d): _buffer_load for d in BUFFER_LOAD_DTYPES})
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
