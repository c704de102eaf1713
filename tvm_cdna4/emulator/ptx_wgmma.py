"""Warpgroup matrix multiply (``wgmma``, PTX ISA 9.4 §9.7.17: ``mma_async`` §9.7.17.5.2, the
descriptors §9.7.17.5.1, ``fence`` / ``commit_group`` / ``wait_group`` §9.7.17.7) for the sm90
emulator: ``wgmma.mma_async`` SS and RS forms, f16/bf16 and fp8 (e4m3/e5m2) inputs with f32
accumulators, m64nNk16 / m64nNk32; ``wgmma.fence``, ``commit_group``, ``wait_group N``.

Operands: shared A/B through matrix descriptors (``isa.hopper_layout.decode_descriptor`` and
``operand_address``: start, LBO, SBO, swizzle none/32/64/128B; K-major, or MN-major with
imm-trans-a/b = 1), A of the RS form and the accumulator D through the register fragments
(``a_fragment_coords``, ``accumulator_coords``). ``D = scale_a*A * scale_b*B + (scale-d ? D : 0)``;
products exact in float64, summed in float64, rounded to f32 once (as ``mma``: bit-identical to the
tensor cores when every product and partial sum is exact). fp8 inputs with ``emulate(..., fp8_accumulation=bits)``
(``isa.wgmma_table.FP8_ACCUMULATION_BITS``, Hopper's 14): each output's K products and its accumulator aligned to
the largest one's exponent and truncated toward zero to ``bits`` significant bits, then summed
(``fp8_accumulate``), as Hopper's tensor cores do (docs/sm90_attention.md, "fp8 accumulation").

Asynchrony. The emulator computes D when the instruction issues, but until the ``wgmma.wait_group``
that retires its group: a read or write of the D registers (and the RS form's A registers) by any
other instruction of the issuing threads is reported, and so is a write of the shared bytes A and B
were read from (a TMA load or a store into them): ``EmulationError`` naming the register or buffer
and the wgmma. Later wgmmas of the same accumulator chain on it without a wait, as on hardware. A
``wgmma.mma_async`` whose D registers are not a local tensor (TIR variables) is computed but its
registers are not tracked. ``wgmma.fence`` is accepted; its absence is not reported.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from tvm_tirx import ir as I

from ..isa.hopper_layout import (WARPGROUP_THREADS as WARPGROUP, a_fragment_coords, accumulator_coords,
                                 decode_descriptor, k_of, operand_address)
from ..isa.wgmma_table import FP8
from .errors import EmulationError
from .memory import check_lds_read
from .ptx_operands import PtxCall, _per_thread, _reader, _writer

INPUTS = {"f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
          "e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}


def fp8_accumulate(a, b, d, bits: int):
    """``a (M, K) @ b (K, N) + d (M, N)`` (float64) with Hopper's fp8 accumulation: per output, the K products and
    ``d`` aligned to the largest one's exponent, each truncated toward zero to ``bits`` significant bits, summed
    (exactly: K + 1 values on one grid of ``bits`` bits)."""
    add = np.concatenate([d[:, None, :], a[:, :, None] * b[None, :, :]], axis=1)
    _, e = np.frexp(np.abs(add).max(1, keepdims=True))  # the largest is f 2^e, f in [0.5, 1)
    grid = np.ldexp(1.0, e - bits)
    return (np.trunc(add / grid) * grid).sum(1)


class Wgmmas:
    """The launch's wgmmas in flight (``machine.state["wgmma"]``): per issue, the threads, their
    register bytes and the shared bytes read, and the group (-1 until ``commit_group``)."""

    def __init__(self, machine):
        self.machine = machine
        self.ops: list[dict] = []
        self.committed = np.zeros(machine.nthreads, np.int64)

    def issue(self, threads, regs, smem, what: str) -> None:
        for buf, inst, byte, size in regs:
            buf.add_pending(inst, byte, size, +1)
        for buf, inst, byte in smem:
            buf.add_async_reads(inst, byte, +1)
        self.ops.append(dict(threads=threads, regs=regs, smem=smem, group=-1, what=what))

    def commit(self, mask) -> None:
        active = self.machine.active(mask)
        for op in self.ops:
            if op["group"] < 0 and active[op["threads"]].all():
                op["group"] = int(self.committed[op["threads"][0]])
        self.committed[active] += 1

    def wait(self, n: int, mask) -> None:
        active = self.machine.active(mask)
        keep = []
        for op in self.ops:
            t = op["threads"][0]
            if active[t] and 0 <= op["group"] < self.committed[t] - n:
                for buf, inst, byte, size in op["regs"]:
                    buf.add_pending(inst, byte, size, -1)
                for buf, inst, byte in op["smem"]:  # the reads complete now, seen by the warpgroup's first warp
                    buf.add_async_reads(inst, byte, -1)
                    buf.retire_async_reads(inst, byte, int(self.machine.wave_of[t]), self.machine.epoch[inst])
            else:
                keep.append(op)
        self.ops = keep

    def issued_at(self, buf) -> str:
        """The instruction of the latest in-flight wgmma that uses ``buf``."""
        for op in reversed(self.ops):
            if any(r[0] is buf for r in op["regs"]) or any(s[0] is buf for s in op["smem"]):
                return op["what"]
        return "wgmma.mma_async"


def _wgmmas(machine) -> Wgmmas:
    return machine.state_of("wgmma", Wgmmas)


def _warpgroups(machine, mask, where: str) -> np.ndarray:
    """(G, 128) thread indices of the warpgroups executing a warpgroup-collective instruction; each
    must have all 128 threads active."""
    active = machine.active(mask)
    wg = machine.wg_of * (-(-machine.block_threads // WARPGROUP)) + machine.tid // WARPGROUP
    ids = np.unique(wg[active])
    rows = []
    for i in ids:
        members = np.flatnonzero(wg == i)
        if len(members) != WARPGROUP or not active[members].all():
            t = int(members[np.argmax(~active[members])]) if len(members) == WARPGROUP else int(members[0])
            raise EmulationError(f"warpgroup-collective wgmma executed with {int(active[members].sum())} of "
                                 f"{WARPGROUP} threads of the warpgroup active", where, *machine.coords(t))
        rows.append(members)
    return np.stack(rows) if rows else np.zeros((0, WARPGROUP), np.int64)


def _register_slots(compiler, node):
    """(env, mask) -> (buffer, per-thread byte offset) of a register operand that is an element of a
    local tensor, or None for a TIR variable."""
    if not isinstance(node, I.TensorLoad):
        return None
    slot, index = compiler.slot(node.source), compiler.flat_index(node.indices)

    def where(env, mask):
        view = env.values[slot]
        flat = np.asarray(index(env, mask, view), np.int64)
        return view.buffer, view.offset + flat * view.dtype.itemsize
    return where


def _uniform(values: np.ndarray, rows: np.ndarray, what: str, machine, where: str) -> list[int]:
    out = []
    for r in rows:
        v = values[r]
        if (v != v[0]).any():
            raise EmulationError(f"wgmma: {what} differs across the warpgroup", where, *machine.coords(int(r[0])))
        out.append(int(v[0]))
    return out


def _shared_operand(machine, desc: int, rows: int, K: int, e: int, major: str, readers, where: str):
    """(values (rows, K) float64, (buffer, inst, flat bytes)) of a descriptor-addressed operand."""
    d = decode_descriptor(desc)
    mn, k = np.meshgrid(np.arange(rows), np.arange(K), indexing="ij")
    addr = operand_address(d, major, mn, k, 8 * e)
    p = machine.shared_pointer(addr, "wgmma operand", where)
    buf, off = p.buffer, np.asarray(p.offset, np.int64)
    T = machine.nthreads
    inst = machine.instance(buf)
    flat = off.ravel()
    sel = np.zeros(T, bool)
    sel[readers] = True
    check_lds_read(machine, buf, np.broadcast_to(inst[:, None], (T, flat.size)), np.broadcast_to(flat, (T, flat.size)),
                   e, sel, where, record=False,  # the read completes at the wait_group that retires it
                   async_proxy="wgmma.mma_async reading a descriptor operand")
    raw = buf.data[inst[readers[0]], flat[:, None] + np.arange(e)]
    byte = (flat[:, None] + np.arange(e)).ravel()
    return raw, (buf, np.full(byte.size, inst[readers[0]]), byte)


def _wgmma(compiler, call: PtxCall):
    """``wgmma.mma_async.sync.aligned.m64nNkK.f32.atype.btype d, {a-desc | a}, b-desc, scale-d,
    imm-scale-a, imm-scale-b{, imm-trans-a}{, imm-trans-b}`` (module docstring)."""
    machine, mods, where = compiler.machine, call.mods, call.where
    if mods["dtype"] != "f32" or mods["atype"] not in INPUTS or mods["btype"] not in INPUTS:
        raise NotImplementedError(f"emulator: wgmma .{mods['dtype']}.{mods['atype']}.{mods['btype']}")
    ta, tb = INPUTS[mods["atype"]], INPUTS[mods["btype"]]
    e = ta.itemsize
    N = int(mods["shape"].split("n")[1].split("k")[0])
    K = k_of(8 * e)
    ss = "a_desc" in call.operands
    d_nodes = call.operands["d"]
    d_read = [_reader(compiler, n, 4) for n in d_nodes]
    d_write = [_writer(compiler, n) for n in d_nodes]
    d_slots = [_register_slots(compiler, n) for n in d_nodes]
    a_nodes = [] if ss else call.operands["a"]
    a_read = [_reader(compiler, n, 4) for n in a_nodes]
    a_slots = [_register_slots(compiler, n) for n in a_nodes]
    a_desc = compiler.expr(call.operands["a_desc"][0]) if ss else None
    b_desc = compiler.expr(call.operands["b_desc"][0])
    scale_d = compiler.expr(call.operands["scale_d"][0])
    sa, sb = call.imm("scale_a"), call.imm("scale_b")
    trans_a = call.imm("trans_a") if "trans_a" in call.operands else 0
    trans_b = call.imm("trans_b") if "trans_b" in call.operands else 0
    truncated = mods["atype"] in FP8 and machine.fp8_accumulation is not None
    tid = np.arange(WARPGROUP)
    d_rc = accumulator_coords(tid[:, None], np.arange(N // 2)[None])
    a_rc = a_fragment_coords(tid[:, None], np.arange(16 // e)[None], 8 * e)

    def run(env, mask):
        groups = _warpgroups(machine, mask, where)
        if not len(groups):
            return
        T = machine.nthreads
        state = _wgmmas(machine)
        machine.async_registers = True  # the wgmma's own accesses of its in-flight registers
        try:
            old = [r(env, mask) for r in d_read]
            a_raw = [r(env, mask) for r in a_read]
            dv = _per_thread(np.asarray(b_desc(env, mask)).astype(np.uint64), T)
            av = _per_thread(np.asarray(a_desc(env, mask)).astype(np.uint64), T) if ss else None
            sd = _per_thread(np.asarray(scale_d(env, mask)) != 0, T)
            out = np.zeros((T, N // 2), np.float32)
            for rows in groups:
                readers = rows[::32]
                (bd,) = _uniform(dv, rows[None], "b-desc", machine, where)
                braw, bsm = _shared_operand(machine, bd, N, K, e, "mn" if trans_b else "k", readers, where)
                B = braw.view(tb).reshape(N, K).astype(np.float64).T  # (K, N)
                smem = [bsm]
                if ss:
                    (ad,) = _uniform(av, rows[None], "a-desc", machine, where)
                    araw, asm = _shared_operand(machine, ad, 64, K, e, "mn" if trans_a else "k", readers, where)
                    A = araw.view(ta).reshape(64, K).astype(np.float64)
                    smem.append(asm)
                else:
                    regs = np.stack([r[rows] for r in a_raw], axis=1).reshape(WARPGROUP, -1)  # (128, 16 bytes)
                    A = np.zeros((64, K))
                    A[a_rc] = regs.view(ta).astype(np.float64)
                (scale,) = _uniform(sd.astype(np.int64), rows[None], "scale-d", machine, where)
                D = np.zeros((64, N))
                if scale:
                    D[d_rc] = np.stack([o[rows] for o in old], axis=1).reshape(WARPGROUP, -1).view(np.float32)
                if truncated:
                    res = fp8_accumulate(sa * A, sb * B, D, machine.fp8_accumulation).astype(np.float32)
                else:
                    res = ((sa * A) @ (sb * B) + D).astype(np.float32)
                out[rows] = res[d_rc]
                state.issue(rows, _in_flight(d_slots + a_slots, env, mask, rows), smem, f"wgmma.mma_async.{mods['shape']}")
            raw = out.view(np.uint8).reshape(T, N // 2, 4)
            active = np.zeros(T, bool)
            active[groups.ravel()] = True
            for i, w in enumerate(d_write):
                w(env, active, raw[:, i])
        finally:
            machine.async_registers = False
    return run


def _in_flight(slots, env, mask, rows):
    """The register bytes (buffer, thread instances, byte offsets, 4) of the warpgroup's operands that
    are local-tensor elements (a local buffer's instance is its thread)."""
    regs = []
    for s in slots:
        if s is not None:
            buf, off = s(env, mask)
            o = np.asarray(off, np.int64)
            regs.append((buf, rows, o[rows] if o.ndim else np.full(len(rows), int(o)), 4))
    return regs


def _wgmma_fence(compiler, call: PtxCall):
    """``wgmma.fence.sync.aligned``: accepted (its absence is not checked)."""
    machine, where = compiler.machine, call.where

    def run(env, mask):
        _warpgroups(machine, mask, where)
    return run


def _wgmma_commit(compiler, call: PtxCall):
    """``wgmma.commit_group.sync.aligned``: the warpgroup's uncommitted wgmmas form its next group."""
    machine, where = compiler.machine, call.where

    def run(env, mask):
        _warpgroups(machine, mask, where)
        _wgmmas(machine).commit(mask)
    return run


def _wgmma_wait(compiler, call: PtxCall):
    """``wgmma.wait_group.sync.aligned N``: all but the ``N`` most recent committed groups retire."""
    machine, where = compiler.machine, call.where
    n = call.imm("group")

    def run(env, mask):
        _warpgroups(machine, mask, where)
        _wgmmas(machine).wait(n, mask)
    return run
