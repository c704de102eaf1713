"""Bulk tensor copies (TMA, ``cp.async.bulk.tensor``, PTX ISA 9.4 §9.7.10.28.5; tensor maps §5.5) in
tile mode, 1-5D, with tensor maps, for the sm90 emulator.

A tensor map is the host's ``cuTensorMapEncodeTiled`` call (TIRx's TMA tile pattern emits it in the
host function and passes the ``CUtensorMap`` as a kernel parameter): :func:`tensor_maps` reads the
call's operands from the lowered host function (the ``runtime.cuTensorMapEncodeTiled`` packed call's
argument fields) into a :class:`TensorMap` record, bound to the device function's parameter.

Load (global -> shared, ``.mbarrier::complete_tx::bytes``): at issue the box is read from global
memory, element ``j`` of each dimension at ``coord + j * elementStride``; elements out of the
tensor's bounds read zeros (``oobFill`` NaN: NaN). The box lands compact, innermost dimension
contiguous, at the shared address ``dst + offset`` swizzled per the map (``isa.hopper_layout.swizzle``,
the pattern a wgmma descriptor of that swizzle reads). Its bytes are in flight from issue until the
copy completes: the emulator completes it (and makes the complete-tx of all the box's bytes, OOB ones
included, on the mbarrier) when a warp waits on that mbarrier and its phase is not complete; a read of
the bytes before is reported, as a ``cp.async`` read before its wait.

Store (shared -> global, ``.bulk_group``): reads the shared box at issue (the race checks of a read by
the issuing warp) and writes the in-bounds elements to global memory (out-of-bounds ones are clipped),
at issue. The hardware may read the box as late as the issuing thread's ``cp.async.bulk.wait_group{.read} N``
that retires the store's bulk group (``cp.async.bulk.commit_group``: the thread's stores since its last one),
so until then the box's bytes count as read in flight (``BulkStores``): a write of one is reported, and a
write after the retirement by another warp must be ordered after it (a barrier the retiring warp reached
after its wait).

Prefetch (global -> L2, ``cp.async.bulk.prefetch.tensor``): no effect; its map, coordinates and in-bounds
elements are checked as a load's (out-of-bounds ones are not fetched, on the GPU as here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..isa.hopper_layout import TMA_OOB_NAN, TMA_SWIZZLE, swizzle
from .errors import EmulationError
from .globalmem import record_store
from .mbarrier import progressed
from .memory import InFlightLdsWrites, check_lds_read, held_offsets
from .ptx_operands import PtxCall, _per_thread, _pointer

ENCODE = "runtime.cuTensorMapEncodeTiled"


@dataclass
class TensorMap:
    """A tiled tensor map (``cuTensorMapEncodeTiled``'s operands). Dimensions innermost first."""

    param: str  # the global tensor parameter it describes
    buffer: object  # its emulated global Buffer
    origin: int  # byte address of element (0, ..., 0) in the buffer
    dtype: np.dtype
    dims: tuple  # globalDim
    strides: tuple  # globalStrides in bytes, of dims 1.. (dim 0's is the element size)
    box: tuple  # boxDim
    element_strides: tuple
    interleave: int
    swizzle: int  # width in bytes (0: none)
    oob_nan: bool

    def shared_shape(self) -> tuple:
        return tuple(-(-b // s) for b, s in zip(self.box, self.element_strides))

    def nbytes(self) -> int:
        return int(np.prod(self.shared_shape())) * self.dtype.itemsize

    def box_elements(self, coords):
        """(global byte address of each box element in C order of the shared box (outermost first),
        whether it is in bounds)."""
        shape = self.shared_shape()
        grids = np.meshgrid(*(np.arange(n) for n in reversed(shape)), indexing="ij")  # outermost first
        addr = np.full(grids[0].shape, self.origin, np.int64)
        inside = np.ones(grids[0].shape, bool)
        byte_strides = (self.dtype.itemsize, *self.strides)
        for i in range(len(shape)):
            g = int(coords[i]) + grids[len(shape) - 1 - i] * self.element_strides[i]
            inside &= (g >= 0) & (g < self.dims[i])
            addr += g * byte_strides[i]
        return addr.ravel(), inside.ravel()


def tensor_maps(host, func, globals_: dict, scalars: dict) -> dict:
    """{device parameter index: TensorMap} for the tensor maps the host function encodes and passes to
    ``func`` (read from its packed calls' argument fields, in program order)."""
    import tvm_ffi
    from tvm_tirx import ir

    fields: dict[int, object] = {}
    maps: dict = {}  # the host's tensor-map variable (by identity: several may share a name) -> TensorMap
    bound: dict[int, TensorMap] = {}  # by index: the device parameters may share a name
    name = str(func.attrs["global_symbol"]) if func.attrs is not None and "global_symbol" in func.attrs else None

    def visit(node):
        op = getattr(node.op, "name", None)
        if op == "tirx.abi_field_set" and int(node.args[2].value) == 15:
            fields[int(node.args[1].value)] = node.args[3]
        elif op == "tirx.call_packed_lowered":
            callee = node.args[0].value
            if callee == ENCODE:
                maps[hash(fields[0])] = _record(fields, globals_, scalars)
            elif callee == name or callee.endswith("_kernel"):
                for i, p in enumerate(func.params):
                    v = fields.get(i)
                    if isinstance(v, ir.Var) and hash(v) in maps:
                        bound[i] = maps[hash(v)]
            fields.clear()

    if host is not None:
        for f in host.functions.values():
            tvm_ffi.structural_walk(f.body, [(ir.Call, visit)])
    return bound


def _record(fields: dict, globals_: dict, scalars: dict) -> TensorMap:
    from tvm_tirx import ir

    from .interp import evaluate, np_dtype

    def num(i):
        node = fields[i]
        while type(node).__name__ == "Cast":  # evaluate reads a node with a ``value`` as a constant
            node = node.value
        return evaluate(node, scalars)

    dtype_node = fields[1]
    while not isinstance(dtype_node, ir.StringImm):
        dtype_node = dtype_node.args[0]
    dtype, _ = np_dtype(dtype_node.value)
    rank = num(2)
    load = fields[3].args[0] if getattr(fields[3], "op", None) is not None else fields[3]
    param = re.sub(r"_\d+$", "", load.source.name)
    if param not in globals_:
        raise NotImplementedError(f"emulator: the tensor map's global address {fields[3]} is not a kernel tensor")
    elem, _ = np_dtype(load.ty.dtype)
    flat = evaluate(load.indices[0], scalars) if load.indices else 0
    at = 4
    dims = tuple(num(at + i) for i in range(rank))
    strides = tuple(num(at + rank + i) for i in range(rank - 1))
    box = tuple(num(at + 2 * rank - 1 + i) for i in range(rank))
    estr = tuple(num(at + 3 * rank - 1 + i) for i in range(rank))
    interleave, swz, _l2, oob = (num(at + 4 * rank - 1 + i) for i in range(4))
    if interleave:
        raise NotImplementedError("emulator: interleaved tensor maps")
    tmap = TensorMap(param, globals_[param], flat * elem.itemsize, dtype, dims, strides, box, estr, interleave,
                     TMA_SWIZZLE[swz], oob == TMA_OOB_NAN)
    check_encoding(tmap)
    return tmap


def check_encoding(tmap: TensorMap):
    """An EmulationError where ``tmap`` breaks ``cuTensorMapEncodeTiled``'s rules (CUDA driver API, "Tensor Map
    Object Management"), which the driver refuses or a GPU reads wrongly while the emulator's own indexing would
    not notice: the global address 16-byte aligned (from the tensor's first byte), each byte stride a multiple of 16
    that spans the previous dimension (``globalStrides[0] = globalDim[0] * elementSize + padding``), each box
    dimension 1..256, the box's inner row whole 16-byte chunks and, swizzled, at most the swizzle's width."""
    size = tmap.dtype.itemsize
    spans = (tmap.dims[0] * size, *(d * s for d, s in zip(tmap.dims[1:], tmap.strides)))
    bad = [f"globalStrides[{i}] = {s} (a multiple of 16 of at least {span} bytes: globalDim[{i}] x the previous "
           f"dimension's stride)" for i, (s, span) in enumerate(zip(tmap.strides, spans)) if s % 16 or s < span]
    bad += [f"boxDim[{i}] = {b} (1..256)" for i, b in enumerate(tmap.box) if not 1 <= b <= 256]
    if tmap.origin % 16:
        bad.append(f"globalAddress at byte {tmap.origin} of the tensor (16-byte aligned)")
    inner = tmap.box[0] * size
    if inner % 16 or (tmap.swizzle and inner > tmap.swizzle):
        bad.append(f"boxDim[0] x {size} bytes = {inner} (whole 16-byte chunks"
                   + (f", at most the {tmap.swizzle}-byte swizzle)" if tmap.swizzle else ")"))
    if bad:
        raise EmulationError(f"tensor map over {tmap.param!r} breaks cuTensorMapEncodeTiled's rules: "
                             + "; ".join(bad), "cuTensorMapEncodeTiled")


class BulkTensorLoads(InFlightLdsWrites):
    """TMA loads in flight (``machine.state["tma"]``): each issue is a ticket, completed (landed, then
    complete-tx on its mbarrier) by :meth:`land` when a warp waits on that mbarrier."""

    what = "cp.async.bulk.tensor"
    async_proxy = "the TMA load cp.async.bulk.tensor writing its box"

    def __init__(self, machine):
        super().__init__(machine)
        self.tickets: list[dict] = []

    def issue(self, thread: int, buf, addr, data, bar, g: int, nbytes: int, where: str):
        """Thread ``thread`` (of workgroup ``g``: a multicast's is the issuing thread's peer of its index) writes
        ``data`` at ``addr`` of ``g``'s instance of ``buf``, complete-tx ``nbytes`` on ``bar`` there."""
        from .ptx_sync import _mbarriers

        ticket = len(self.tickets) + 1
        m = self.machine
        threads = np.full(len(addr), thread, np.int64)
        self.start(threads, buf, np.full(len(addr), g, np.int64), addr, data, where,
                   ticket=np.full(len(addr), ticket, np.int64))
        # the issuing thread's clock now: its complete-tx orders what the thread did before the issue, not after
        snaps, stamps = _mbarriers(m).snapshot(np.array([thread]))
        self.tickets.append(dict(ticket=ticket, thread=thread, bar=bar, g=g, nbytes=nbytes, done=False, buf=buf,
                                 where=where, snap=snaps[0], stamp=stamps[0]))
        progressed(m)  # a wait on ``bar`` may now land it

    def in_flight(self, bar, g: int) -> str | None:
        """The TMA load still in flight that completes on ``bar`` in workgroup ``g``, described (None: none): what a
        re-arming arrival overtakes (``MBarrier.arrive``'s overshoot)."""
        for t in self.tickets:
            if not t["done"] and t["bar"] is bar and t["g"] == g:
                return (f"while the TMA load into shared '{t['buf'].name}' that completes its phase is still in "
                        f"flight (issued at: {t['where']}): a producer issuing the ring slot's next load before "
                        "the consumers released it (a missing wait on the ring's \"empty\" mbarrier?)")
        return None

    def land(self, bar, where: str) -> None:
        m = self.machine
        for t in self.tickets:
            if t["done"] or t["bar"] is not bar:
                continue
            saved = m.epoch.copy()
            m.epoch[t["g"]] = t["stamp"]
            try:
                self.retire(lambda c, k=t["ticket"]: c["ticket"] == k, where)
            finally:
                m.epoch[:] = saved
            t["done"] = True
            bar.transact(t["g"], -t["nbytes"], t["snap"], where)


def _tma(machine) -> BulkTensorLoads:
    return machine.state_of("tma", BulkTensorLoads)


def _shared_box(machine, tm: TensorMap, base: int, what: str, where: str):
    """(buffer, per-element byte offsets) of the swizzled shared box at shared-window address ``base``."""
    e = tm.dtype.itemsize
    if base % 128:
        raise EmulationError(f"{what}: shared address {base} is not 128-byte aligned", where)
    flat = np.arange(int(np.prod(tm.shared_shape())), dtype=np.int64) * e + base
    p = machine.shared_pointer(swizzle(flat, tm.swizzle), what, where)
    return p.buffer, np.asarray(p.offset, np.int64)


def _address(machine, value, where, what):
    if isinstance(value, np.ndarray) or np.isscalar(value):
        return np.asarray(value, np.int64)
    p = _pointer(value, "shared", what, where, machine)
    return np.asarray(machine.shared_address(p), np.int64)


def _tma_load(compiler, call: PtxCall):
    """``cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst],
    [tmap, {c0, ..}], [mbar]`` (module docstring)."""
    from .ptx_sync import _mbarriers

    machine, where = compiler.machine, call.where
    dst, tmap, mbar = (compiler.expr(call.operands[k][0]) for k in ("dst_mem", "tmap", "mbar"))
    coords = [compiler.expr(n) for n in call.operands["coords"]]
    multicast = compiler.expr(call.operands["cta_mask"][0]) if call.mods.get("multicast") else None

    def run(env, mask):
        threads = np.flatnonzero(machine.active(mask))
        T = machine.nthreads
        ctas = _destinations(machine, multicast, env, mask, where)
        d = _per_thread(_address(machine, dst(env, mask), where, "cp.async.bulk.tensor"), T)
        bar_ptr = _pointer(mbar(env, mask), "shared", "cp.async.bulk.tensor mbarrier", where, machine)
        bar_off = _per_thread(np.asarray(bar_ptr.offset, np.int64), T)
        for t in threads:
            tm, c = _coords(tmap, coords, env, mask, t, where)
            src, inside = tm.box_elements(c)
            e = tm.dtype.itemsize
            rows = np.zeros((len(src), e), np.uint8)
            if tm.oob_nan:
                rows[:] = np.full(1, np.nan, tm.dtype).view(np.uint8)
            g_off = held_offsets(machine, tm.buffer, src[inside], e, None, where, np.full(int(inside.sum()), t))
            rows[inside] = tm.buffer.data[0, np.asarray(g_off)[:, None] + np.arange(e)]
            buf, offs = _shared_box(machine, tm, int(d[t]), "cp.async.bulk.tensor", where)
            bar = _mbarriers(machine).barrier(bar_ptr.buffer, int(bar_off[t]))
            for g, mirror in ctas(int(t)):
                _tma(machine).issue(mirror, buf, offs, rows, bar, g, tm.nbytes(), where)
    return run


def _destinations(machine, multicast, env, mask, where):
    """``t -> [(workgroup, thread)]``: where thread ``t``'s box lands and whose write it counts as: its own
    workgroup and itself, or (``.multicast::cluster``, ``ctaMask`` bit ``r``: the cluster's CTA of rank ``r``)
    each masked CTA and its thread of ``t``'s index (``emulator.cluster``)."""
    if multicast is None:
        return lambda t: [(int(machine.wg_of[t]), t)]
    from .cluster import require

    c = require(machine, "cp.async.bulk.tensor.multicast::cluster", where)
    masks = _per_thread(np.asarray(multicast(env, mask)).astype(np.int64), machine.nthreads)

    def each(t):
        bits = int(masks[t]) & 0xFFFF
        ranks = np.array([r for r in range(16) if bits >> r & 1], np.int64)
        if not ranks.size:
            raise EmulationError("cp.async.bulk.tensor.multicast::cluster: the CTA mask is empty", where,
                                 *machine.coords(t))
        g = int(machine.wg_of[t])
        peers = c.peer(np.full(len(ranks), g), ranks, "cp.async.bulk.tensor.multicast::cluster", where)
        if (peers != g).any():
            c.note_remote([g], "cp.async.bulk.tensor.multicast::cluster", where)
        tid = t - g * machine.block_threads
        return [(int(h), int(h) * machine.block_threads + tid) for h in peers]
    return each


def _coords(tmap, coords, env, mask, t, where):
    tm = tmap(env, mask)
    if not isinstance(tm, TensorMap):
        raise EmulationError("cp.async.bulk.tensor: the tensor-map operand is not a tensor map the host encoded "
                             "(cuTensorMapEncodeTiled)", where)
    c = []
    for x in coords:
        v = np.asarray(x(env, mask))
        c.append(int(v.reshape(-1)[t] if v.ndim else v))
    if len(c) != len(tm.dims):
        raise EmulationError(f"cp.async.bulk.tensor.{len(c)}d with a rank-{len(tm.dims)} tensor map", where)
    return tm, c


def _tma_store(compiler, call: PtxCall):
    """``cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group [tmap, {c0, ..}], [src]`` (module
    docstring): in-bounds elements written to global memory at issue, the rest clipped."""
    machine, where = compiler.machine, call.where
    src, tmap = compiler.expr(call.operands["src_mem"][0]), compiler.expr(call.operands["tmap"][0])
    coords = [compiler.expr(n) for n in call.operands["coords"]]

    def run(env, mask):
        threads = np.flatnonzero(machine.active(mask))
        T = machine.nthreads
        s = _per_thread(_address(machine, src(env, mask), where, "cp.async.bulk.tensor store"), T)
        for t in threads:
            tm, c = _coords(tmap, coords, env, mask, t, where)
            dst, inside = tm.box_elements(c)
            e = tm.dtype.itemsize
            buf, offs = _shared_box(machine, tm, int(s[t]), "cp.async.bulk.tensor store", where)
            sel = np.zeros(T, bool)
            sel[t] = True
            inst = machine.instance(buf)
            check_lds_read(machine, buf, np.broadcast_to(inst[:, None], (T, len(offs))),
                           np.broadcast_to(offs, (T, len(offs))), e, sel, where,
                           async_proxy="the TMA store cp.async.bulk.tensor reading its box")
            rows = buf.data[inst[t], offs[:, None] + np.arange(e)][inside]
            _stores(machine).issue(int(t), buf, int(inst[t]), offs[:, None] + np.arange(e))
            out = dst[inside]
            record_store(machine, tm.buffer, out, e, np.full(len(out), t), where)
            g_off = held_offsets(machine, tm.buffer, out, e, None, where, np.full(len(out), t))
            tm.buffer.data[0, np.asarray(g_off)[:, None] + np.arange(e)] = rows
    return run


def _tma_prefetch(compiler, call: PtxCall):
    """``cp.async.bulk.prefetch.tensor.Nd.L2.global.tile [tmap, {c0, ..}]`` (a hint: no emulated effect): the map
    and the coordinates checked as a load's, and the box's in-bounds elements inside the part of the tensor the
    emulator holds; out-of-bounds elements are skipped, as the hardware's prefetch skips them."""
    machine, where = compiler.machine, call.where
    tmap = compiler.expr(call.operands["tmap"][0])
    coords = [compiler.expr(n) for n in call.operands["coords"]]

    def run(env, mask):
        for t in np.flatnonzero(machine.active(mask)):
            tm, c = _coords(tmap, coords, env, mask, t, where)
            src, inside = tm.box_elements(c)
            held_offsets(machine, tm.buffer, src[inside], tm.dtype.itemsize, None, where, np.full(int(inside.sum()), t))
    return run


class BulkStores:
    """The launch's TMA stores whose shared box may still be read (``machine.state["bulk_store"]``): per store,
    its thread, buffer, instance and bytes, and its bulk group (-1 until the thread's ``commit_group``)."""

    def __init__(self, machine):
        self.machine = machine
        self.ops: list[dict] = []
        self.committed = np.zeros(machine.nthreads, np.int64)

    def issue(self, thread: int, buf, inst: int, byte) -> None:
        byte = np.asarray(byte, np.int64).ravel()
        buf.add_async_reads(np.full(byte.shape, inst), byte, +1)
        self.ops.append(dict(thread=thread, buf=buf, inst=inst, byte=byte, group=-1))

    def commit(self, mask) -> None:
        active = self.machine.active(mask)
        for op in self.ops:
            if op["group"] < 0 and active[op["thread"]]:
                op["group"] = int(self.committed[op["thread"]])
        self.committed[active] += 1

    def wait(self, n: int, mask) -> None:
        """All but the ``n`` most recent committed groups of each active thread have read their boxes."""
        active, keep = self.machine.active(mask), []
        for op in self.ops:
            t = op["thread"]
            if active[t] and 0 <= op["group"] < self.committed[t] - n:
                inst = np.full(op["byte"].shape, op["inst"])
                op["buf"].add_async_reads(inst, op["byte"], -1)
                op["buf"].retire_async_reads(inst, op["byte"], int(self.machine.wave_of[t]),
                                             self.machine.epoch[op["inst"]], "store")
            else:
                keep.append(op)
        self.ops = keep

    def reading(self, buf) -> bool:
        """Whether a store still reads bytes of ``buf``."""
        return any(op["buf"] is buf for op in self.ops)


def _stores(machine) -> BulkStores:
    return machine.state_of("bulk_store", BulkStores)


def _bulk_group(compiler, call: PtxCall):
    """``cp.async.bulk.commit_group``: the thread's stores since its last one form its next bulk group;
    ``cp.async.bulk.wait_group{.read} N``: all but its ``N`` most recent groups have read their boxes (the
    emulator's stores write at issue, so both forms retire the reads; ``BulkStores``)."""
    machine = compiler.machine
    if call.entry.name == "cp_async_bulk_commit_group":
        return lambda env, mask: _stores(machine).commit(mask)
    n = call.imm("group")
    return lambda env, mask: _stores(machine).wait(n, mask)
