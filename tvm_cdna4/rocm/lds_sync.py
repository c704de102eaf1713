"""The compile-time LDS synchronization check: ``check_lds_sync(func)`` on a lowered gfx950 device function.

Two waves of a workgroup that access the same LDS bytes, at least one of them writing, must be
ordered by a barrier that the first access completed before: a plain LDS store completes at an
``s_waitcnt lgkmcnt`` (``T.rocm.workgroup_barrier()`` waits ``lgkmcnt(0)``, then ``s_barrier``), a
direct-to-LDS load (``T.rocm.buffer_load_lds``) at the ``s_waitcnt vmcnt(n)`` that leaves at most
``n`` newer vector-memory loads of its wave outstanding; a bare ``s_barrier`` waits for nothing. A
wave that reads the bytes of its own direct-to-LDS load before that wait reads them in flight.

The check executes the device function abstractly: every thread of one workgroup at once (numpy
over ``threadIdx.x``, the wave is ``threadIdx.x // 64``), statement by statement; barriers count
epochs. An access's byte set is its index (or address) evaluated per thread; each LDS byte keeps
its last writer (wave, statement, the epoch from which it is visible to other waves) and its last
read per wave. A loop with a static trip count ``n`` runs iterations ``0 .. 5`` and then the last
ones from a multiple of 6 on (all of them when ``n <= 12``): the loop-carried hazards of double and
triple buffering (indices periodic in the iteration, period 2 or 3) show between consecutive
iterations, the prologue before the first, the epilogue after the last. What it cannot evaluate (an
index read from memory, a kernel argument, ``blockIdx`` in an LDS index, a dynamic loop bound, a
barrier under a branch that only some waves take, ``break``/``while``) ends the check for that
function: logged at DEBUG, the case is left to the emulator (which checks every access it runs). A
branch whose condition it cannot evaluate but which accesses no LDS and has no barrier, wait or
vector-memory load (a store guard of the workgroup's rows) is skipped.

Refused: a ``ContractError`` (``check="LDS synchronization"``) naming the buffer, the byte, both
waves and both statements (with their loop iterations), and the fix.
"""

from __future__ import annotations

import logging
import re

import numpy as np
import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.ir import Var, prim

from ..errors import ContractError
from ..isa import WAVE_SIZE
from ..isa.llvm_helpers import BARRIER, BUFFER_LOAD_LDS_MNEMONICS, PREFIX, buffer_load_lds_helper

logger = logging.getLogger(__name__)
DECLARATION = re.compile(r"^\w+ = T\.(Var|dynamic)\(")

CHECK = "LDS synchronization"
PERIOD = 6  # consecutive-iteration coverage: index periods dividing 6 (double, triple buffering)
SHARED_SCOPES = ("shared", "shared.dyn")
BARRIERS = {BARRIER: True, "llvm.amdgcn.s.barrier": False, "tirx.gpu_storage_sync": False}  # -> waits lgkmcnt(0)
DMA_HELPERS = {buffer_load_lds_helper(size): size for size in BUFFER_LOAD_LDS_MNEMONICS}
VMEM_PREFIX = PREFIX + "buffer_load"
LANE_ID = "llvm.amdgcn.mbcnt.hi"
NEVER = np.iinfo(np.int32).max
FIX = ("order them with T.rocm.workgroup_barrier() (s_waitcnt lgkmcnt(0), then s_barrier) after the first access; "
       "for a direct-to-LDS load, T.rocm.s_waitcnt_vmcnt(n) covering it before that barrier")
BINARY = {prim.Add: np.add, prim.Sub: np.subtract, prim.Mul: np.multiply, prim.FloorDiv: np.floor_divide,
          prim.FloorMod: np.mod, prim.Min: np.minimum, prim.Max: np.maximum, prim.EQ: np.equal,
          prim.NE: np.not_equal, prim.LT: np.less, prim.LE: np.less_equal, prim.GT: np.greater,
          prim.GE: np.greater_equal, prim.And: np.logical_and, prim.Or: np.logical_or,
          prim.BitwiseAnd: np.bitwise_and, prim.BitwiseOr: np.bitwise_or, prim.BitwiseXor: np.bitwise_xor,
          prim.LShift: np.left_shift, prim.RShift: np.right_shift,
          prim.Div: lambda a, b: np.trunc(np.true_divide(a, b)).astype(np.int64),
          prim.Mod: np.fmod}
CALLS = {"tirx.shift_right": np.right_shift, "tirx.shift_left": np.left_shift, "tirx.bitwise_and": np.bitwise_and,
         "tirx.bitwise_or": np.bitwise_or, "tirx.bitwise_xor": np.bitwise_xor}


class Undecided(Exception):
    """What the check cannot evaluate; the case is left to the emulator. ``Undecided(text, node)``:
    ``text`` with ``{}`` replaced by the statement or expression ``node`` as TVMScript (``_short``),
    printed only when the message is read (a value that cannot be evaluated is often never needed)."""

    def __init__(self, text: str, node=None):
        super().__init__(text)
        self.text, self.node = text, node

    def __str__(self) -> str:
        return self.text if self.node is None else self.text.format(_short(self.node))


def check_lds_sync(func) -> None:
    """Refuse a cross-wave LDS access pair that no barrier orders (see the module docstring)."""
    name = func.attrs.get("global_symbol", "kernel") if func.attrs is not None else "kernel"
    try:
        _Sync().stmt(func.body, iteration="")
    except Undecided as why:
        logger.debug("LDS synchronization of %s is left to the emulator: %s", name, why)


def iterations(n: int) -> list[int]:
    """The iterations of a loop of ``n`` that the check runs (see the module docstring)."""
    if n <= 2 * PERIOD:
        return list(range(n))
    tail = (n - 2) // PERIOD * PERIOD
    return list(range(PERIOD)) + list(range(tail, n))


def _callee(call) -> str:
    from .analysis import _callee as callee

    return callee(call)


def _short(node) -> str:
    """The statement as TVMScript, without the printer's variable declarations, on one line (shortened)."""
    lines = [ln for ln in str(node).splitlines() if not DECLARATION.match(ln)]
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= 160 else text[:157] + "..."


class _Lds:
    """One LDS allocation: the per-byte writer and reader state."""

    def __init__(self, name: str, nbytes: int, waves: int):
        self.name = name
        self.w_wave = np.full(nbytes, -1, np.int16)
        self.w_event = np.full(nbytes, -1, np.int32)
        self.w_visible = np.full(nbytes, NEVER, np.int64)  # first epoch in which other waves may access it
        self.w_dma_pending = np.zeros(nbytes, bool)
        self.r_epoch = np.full((waves, nbytes), -1, np.int64)
        self.r_event = np.full((waves, nbytes), -1, np.int32)


class _Sync:
    """The abstract execution of one workgroup (module docstring)."""

    def __init__(self):
        self.env: dict = {}
        self.tx = None
        self.waves = 0
        self.lds: dict = {}  # var -> (_Lds, byte offset (int), element bytes)
        self.events: list = []  # (statement, loop iterations) per access
        self.loads: dict = {}  # hash(expr) -> (expr, its reads): _loads
        self.epoch = 0
        self.pending_lds: list = []  # (_Lds, event) of plain stores not yet complete
        self.vmem: list = []  # per issue, oldest first: (_Lds, event) of a direct-to-LDS load, or None

    # -- values

    def value(self, expr):
        """``expr`` per thread: an int, or an array over threads (a second axis for vector lanes)."""
        if isinstance(expr, ir.IntImm):
            return int(expr.value)
        if isinstance(expr, Var):
            if expr not in self.env:
                raise Undecided(f"`{expr.name}` has no value known at compile time")
            return self.env[expr]
        kind = type(expr)
        if kind in BINARY:
            return BINARY[kind](self.value(expr.a), self.value(expr.b))
        if isinstance(expr, prim.Not):
            return np.logical_not(self.value(expr.a))
        if isinstance(expr, prim.Cast):
            return self.value(expr.value)
        if isinstance(expr, prim.Select):
            return np.where(self.value(expr.condition), self.value(expr.true_value), self.value(expr.false_value))
        if isinstance(expr, prim.Ramp):
            lanes = np.arange(int(expr.lanes))
            return np.add.outer(np.broadcast_to(self.value(expr.base), (len(self.tx),)), lanes * self.value(expr.stride))
        if isinstance(expr, prim.Broadcast):
            return np.repeat(np.broadcast_to(self.value(expr.value), (len(self.tx),))[:, None], int(expr.lanes), 1)
        if isinstance(expr, prim.Let):
            self.env[expr.var] = self.value(expr.value)
            return self.value(expr.body)
        if isinstance(expr, ir.Call):
            return self._call_value(expr)
        raise Undecided("cannot evaluate `{}`", expr)

    def _call_value(self, call):
        name = _callee(call)
        if name == LANE_ID:
            return self.tx % WAVE_SIZE
        if name == "llvm.amdgcn.readfirstlane":
            v = np.broadcast_to(self.value(call.args[-1]), self.tx.shape)
            return v[self.tx // WAVE_SIZE * WAVE_SIZE]
        if name in ("tirx.if_then_else", "prim.if_then_else"):
            return np.where(*(self.value(a) for a in call.args))
        if name in CALLS:
            return CALLS[name](self.value(call.args[0]), self.value(call.args[1]))
        raise Undecided("cannot evaluate the call `{}`", call)

    # -- statements

    def stmt(self, node, iteration: str, mask=None):
        if isinstance(node, ir.SeqStmt):
            for child in node.seq:
                self.stmt(child, iteration, mask)
        elif isinstance(node, ir.Bind):
            self._bind(node, iteration, mask)
        elif isinstance(node, ir.TensorStore):
            self._reads(node.value, node, iteration, mask)
            for index in node.indices:
                self._reads(index, node, iteration, mask)
            if node.dest in self.lds:
                self._access(node.dest, self._elements(node.dest, node.indices), node, iteration, mask, "write")
        elif isinstance(node, ir.Evaluate):
            self._evaluate(node, iteration, mask)
        elif isinstance(node, ir.If):
            self._if(node, iteration, mask)
        elif isinstance(node, ir.For):
            self._for(node, iteration, mask)
        elif isinstance(node, ir.RegionStmt):
            self._region(node, iteration, mask)
        elif isinstance(node, ir.Return) and mask is None:
            return
        elif self._touches_lds(node) or isinstance(node, ir.While | ir.Break | ir.Continue | ir.Return):
            raise Undecided(f"a {type(node).__name__} statement")

    def _region(self, node, iteration, mask):
        op = node.op.name
        if op == "tirx.launch_thread":
            axis, extent = node.args[0].value, node.args[1]
            var = node.body_params[0]
            if axis == "threadIdx.x":
                threads = int(extent.value) if isinstance(extent, ir.IntImm) else 0
                if not threads or threads % WAVE_SIZE:
                    raise Undecided("threadIdx.x is not a static whole number of waves")
                self.tx, self.waves = np.arange(threads, dtype=np.int64), threads // WAVE_SIZE
                self.env[var] = self.tx
            elif axis.startswith("threadIdx.") and not (isinstance(extent, ir.IntImm) and int(extent.value) == 1):
                raise Undecided(f"a workgroup over {axis}")
        self.stmt(node.body, iteration, mask)

    def _bind(self, node, iteration, mask):
        value, var = node.value, node.var
        if isinstance(value, ir.Call) and _callee(value) in ("tirx.alloc_tensor", "tirx.decl_tensor"):
            self._storage(var, value)
            return
        self._reads(value, node, iteration, mask)
        try:
            self.env[var] = self.value(value)
        except Undecided:
            self.env.pop(var, None)  # only an error where an LDS index, a branch or a bound uses it

    def _storage(self, var, call):
        if not len(call.ty_args) or str(call.ty_args[0].scope) not in SHARED_SCOPES:
            return
        ty = call.ty_args[0]
        dtype = tvm_ffi.dtype(str(ty.dtype))
        elem = dtype.bits * dtype.lanes // 8
        if _callee(call) == "tirx.alloc_tensor":
            if self.tx is None:
                raise Undecided("an LDS allocation outside the threadIdx.x launch")
            n = int(np.prod([int(d.value) for d in ty.shape])) * elem
            self.lds[var] = (_Lds(var.name, n, self.waves), 0, elem)
            return
        ptr = call.args[0]
        if not (isinstance(ptr, ir.Call) and _callee(ptr) == "tirx.address_of" and ptr.args[0].source in self.lds):
            raise Undecided(f"the LDS view `{var.name}`")
        base, offset, base_elem = self.lds[ptr.args[0].source]
        start = self.value(ptr.args[0].indices[0])
        if not isinstance(start, int) or len(ptr.args[0].indices) != 1:
            raise Undecided(f"the LDS view `{var.name}` at a thread-dependent offset")
        self.lds[var] = (base, offset + start * base_elem, elem)

    def _evaluate(self, node, iteration, mask):
        call = node.value
        name = _callee(call) if isinstance(call, ir.Call) else ""
        if name in BARRIERS:
            if mask is not None and not mask.all():
                raise Undecided("a barrier under a branch that only some threads take")
            if BARRIERS[name]:
                self._complete_lds()
            self.epoch += 1
        elif name == "llvm.amdgcn.s.waitcnt":
            imm = int(call.args[1].value)
            lgkmcnt, vmcnt = (imm >> 8) & 0xF, (imm & 0xF) | ((imm >> 14) & 0x3) << 4
            if lgkmcnt == 0:
                self._complete_lds()
            if vmcnt < 63:
                self._complete_vmem(vmcnt)
        elif name in DMA_HELPERS:
            self._dma(call, DMA_HELPERS[name], node, iteration, mask)
        elif name.startswith(VMEM_PREFIX):
            self._reads(call, node, iteration, mask)
            self.vmem.append(None)
        else:
            self._reads(call, node, iteration, mask)

    def _if(self, node, iteration, mask):
        try:
            value = self.value(node.condition)
        except Undecided:
            if self._inert(node):  # e.g. a store guard of the workgroup's rows: nothing to order
                return
            raise
        cond = np.broadcast_to(value, self.tx.shape if self.tx is not None else ())
        cond = cond.astype(bool) if mask is None else (cond.astype(bool) & mask)
        outer = np.ones_like(cond) if mask is None else mask
        if cond.any():
            self.stmt(node.then_case, iteration, None if cond.all() else cond)
        if node.else_case is not None and (outer & ~cond).any():
            rest = outer & ~cond
            self.stmt(node.else_case, iteration, None if rest.all() else rest)

    def _for(self, node, iteration, mask):
        begin, end = self.value(node.begin), self.value(node.end)
        step = self.value(node.step) if node.step is not None else 1
        if not all(isinstance(v, int) for v in (begin, end, step)):
            raise Undecided(f"the loop over `{node.var.name}` has no static, uniform trip count")
        n = max(0, -(-(end - begin) // step))
        for i in iterations(n):
            self.env[node.var] = begin + i * step
            self.stmt(node.body, f"{iteration}{', ' if iteration else ''}{node.var.name} = {begin + i * step}", mask)

    # -- LDS accesses

    def _inert(self, node) -> bool:
        """Whether ``node`` neither accesses LDS nor barriers, waits or issues vector-memory loads
        (what the check tracks): a branch of it whose condition is unknown changes nothing here."""
        calls = []
        tvm_ffi.structural_walk(node, [(ir.Call, lambda c: calls.append(_callee(c)))])
        tracked = (*BARRIERS, "llvm.amdgcn.s.waitcnt", VMEM_PREFIX, *DMA_HELPERS)
        return not self._touches_lds(node) and not any(name.startswith(tracked) for name in calls)

    def _touches_lds(self, node) -> bool:
        found = []
        tvm_ffi.structural_walk(node, [(Var, lambda v: found.append(v) if v in self.lds else None)])
        return bool(found)

    def _elements(self, var, indices):
        if len(indices) != 1:
            raise Undecided(f"a multi-dimensional access to the LDS tensor `{var.name}`")
        return self.value(indices[0])

    def _bytes(self, var, elements, width=None):
        """(allocation, byte addresses per thread: (threads, n))."""
        lds, offset, elem = self.lds[var]
        e = np.broadcast_to(elements, self.tx.shape if np.ndim(elements) < 2 else np.shape(elements))
        e = e.reshape(len(self.tx), -1)
        width = elem if width is None else width
        return lds, (offset + e * elem)[:, :, None].repeat(width, 2).reshape(len(self.tx), -1) + np.tile(
            np.arange(width), e.shape[1])

    def _reads(self, expr, node, iteration, mask):
        for load, width in self._loads(expr):
            if load.source in self.lds:
                self._access(load.source, self._elements(load.source, load.indices), node, iteration, mask, "read", width)

    def _loads(self, expr) -> list:
        """The memory reads of ``expr``: (load, None) per TensorLoad, (address, bytes) per ds_read_tr
        (an ``address_of`` is no read); cached per expression (loop bodies run many times)."""
        key = hash(expr)
        if key in self.loads:
            return self.loads[key][1]
        loads, addressed = [], []

        def call(c):
            name = _callee(c)
            if name == "tirx.address_of" and isinstance(c.args[0], ir.TensorLoad):
                addressed.append(c.args[0])
            if name.startswith("llvm.amdgcn.ds.read.tr"):
                address = next((a for a in c.args if isinstance(a, ir.Call) and _callee(a) == "tirx.address_of"), None)
                if address is None or not isinstance(address.args[0], ir.TensorLoad):
                    raise Undecided("the LDS address of `{}`", c)
                dtype = tvm_ffi.dtype(str(c.ty.dtype))
                loads.append((address.args[0], dtype.bits * dtype.lanes // 8))

        tvm_ffi.structural_walk(expr, [(ir.Call, call), (ir.TensorLoad, lambda n: loads.append((n, None)))])
        loads = [(x, w) for x, w in loads if w is not None or not any(x.same_as(a) for a in addressed)]
        self.loads[key] = (expr, loads)  # the expression kept alive: its hash is its address
        return loads

    def _dma(self, call, size, node, iteration, mask):
        dst = call.args[5]
        if not (isinstance(dst, ir.Call) and _callee(dst) == "tirx.address_of" and dst.args[0].source in self.lds):
            raise Undecided("the direct-to-LDS destination `{}`", dst)
        load = dst.args[0]
        base = np.broadcast_to(self._elements(load.source, load.indices), self.tx.shape)
        lds, offset, elem = self.lds[load.source]
        wave_base = offset + base[self.tx // WAVE_SIZE * WAVE_SIZE] * elem  # M0: the wave's first lane
        addresses = (wave_base + self.tx % WAVE_SIZE * size)[:, None] + np.arange(size)
        event = self._record(node, iteration)
        self._check_write(lds, addresses, event, mask, dma=True)
        self.vmem.append((lds, event))

    def _record(self, node, iteration) -> int:
        self.events.append((node, iteration))  # printed only for an error
        return len(self.events) - 1

    def _event(self, index: int) -> str:
        node, iteration = self.events[index]
        return f"`{_short(node)}`" + (f" ({iteration})" if iteration else "")

    def _access(self, var, elements, node, iteration, mask, kind, width=None):
        lds, addresses = self._bytes(var, elements, width)
        event = self._record(node, iteration)
        if kind == "read":
            self._check_read(lds, addresses, event, mask)
        else:
            self._check_write(lds, addresses, event, mask, dma=False)
            self.pending_lds.append((lds, event))

    def _per_wave(self, addresses, mask):
        for w in range(self.waves):
            rows = slice(w * WAVE_SIZE, (w + 1) * WAVE_SIZE)
            b = (addresses[rows] if mask is None else addresses[rows][mask[rows]]).ravel()
            if b.size:
                yield w, b

    def _bounds(self, lds, b):
        if b.min() < 0 or b.max() >= len(lds.w_wave):
            raise Undecided(f"an access outside the LDS tensor {lds.name} (the emulator reports it)")

    def _check_read(self, lds, addresses, event, mask):
        for w, b in self._per_wave(addresses, mask):
            self._bounds(lds, b)
            writer = lds.w_wave[b]
            hit = (writer >= 0) & (writer != w) & (lds.w_visible[b] > self.epoch)
            if hit.any():
                k = int(np.argmax(hit))
                self._race(lds, b[k], int(writer[k]), "wrote", int(lds.w_event[b[k]]), w, "reads", event)
            own = (writer == w) & lds.w_dma_pending[b]
            if own.any():
                k = int(np.argmax(own))
                raise ContractError(
                    f"wave {w} reads byte {int(b[k])} in {self._event(event)} while its own "
                    f"direct-to-LDS load {self._event(int(lds.w_event[b[k]]))} into it is still in flight",
                    operand=lds.name, suggestion="wait for the load first: T.rocm.s_waitcnt_vmcnt(n) with at most n "
                    "newer vector-memory loads outstanding (then T.rocm.workgroup_barrier() for other waves)",
                    check=CHECK)
            lds.r_epoch[w, b] = self.epoch
            lds.r_event[w, b] = event

    def _check_write(self, lds, addresses, event, mask, dma: bool):
        owner = None  # byte -> the wave of this statement that writes it (the last one), -1: none yet
        for w, b in self._per_wave(addresses, mask):
            self._bounds(lds, b)
            if owner is not None:
                first = owner[b]
                if (first >= 0).any():
                    k = int(np.argmax(first >= 0))
                    self._race(lds, b[k], int(first[k]), "writes", event, w, "writes", event)
            else:
                owner = np.full(len(lds.w_wave), -1, np.int16)
            owner[b] = w
            writer = lds.w_wave[b]
            hit = (writer >= 0) & (writer != w) & (lds.w_visible[b] > self.epoch)
            if hit.any():
                k = int(np.argmax(hit))
                self._race(lds, b[k], int(writer[k]), "wrote", int(lds.w_event[b[k]]), w, "writes", event)
            read = lds.r_epoch[:, b] == self.epoch  # (waves, bytes): read by each wave in this epoch
            read[w] = False
            if read.any():
                other = int(np.argmax(read.any(1)))
                k = int(np.argmax(read[other]))
                self._race(lds, b[k], other, "read", int(lds.r_event[other, b[k]]), w, "writes", event)
            lds.w_wave[b], lds.w_event[b], lds.w_visible[b], lds.w_dma_pending[b] = w, event, NEVER, dma

    def _complete(self, lds, event):
        done = lds.w_event == event
        lds.w_visible[done] = self.epoch + 1
        lds.w_dma_pending[done] = False

    def _complete_lds(self):
        for lds, event in self.pending_lds:
            self._complete(lds, event)
        self.pending_lds = []

    def _complete_vmem(self, outstanding: int):
        done, self.vmem = self.vmem[:max(0, len(self.vmem) - outstanding)], self.vmem[max(0, len(self.vmem) - outstanding):]
        for entry in done:
            if entry is not None:
                self._complete(*entry)

    def _race(self, lds, byte, w1, verb1, e1, w2, verb2, e2):
        raise ContractError(
            f"LDS race on byte {int(byte)}: wave {w1} {verb1} it in {self._event(e1)} and wave {w2} {verb2} it in "
            f"{self._event(e2)}, with no barrier ordering the two",
            operand=lds.name, suggestion=FIX, check=CHECK)
