"""The compile-time LDS synchronization check: ``check_lds_sync(func)`` on a lowered gfx950 device function.

Two waves of a workgroup that access the same LDS bytes, at least one of them writing, must be
ordered by a barrier that the first access completed before: a plain LDS store completes at an
``s_waitcnt lgkmcnt`` (``T.rocm.workgroup_barrier()`` waits ``lgkmcnt(0)``, then ``s_barrier``), a
direct-to-LDS load (``T.rocm.buffer_load_lds``) at the ``s_waitcnt vmcnt(n)`` that leaves at most
``n`` newer vector-memory loads of its wave outstanding; a bare ``s_barrier`` waits for nothing. A
wave that reads the bytes of its own direct-to-LDS load before that wait reads them in flight.

What it sees: plain LDS loads and stores, every call of ``isa.llvm_helpers.lds_effects()`` (derived
from the catalog and the helper table: the 6 ``ds_read_tr`` opcodes, by intrinsic or bf16 helper,
each lane reading its chunk at its address; the direct-to-LDS loads; the workgroup barrier; the
agent-scope fences, which wait ``vmcnt(0)`` / ``lgkmcnt(0)``), ``s_barrier``, ``s_waitcnt`` and the
vector-memory loads vmcnt counts. No helper issues an LDS atomic. Any other call that takes an LDS
pointer (``T.address_of(S[i])``, ``S.data``: an LDS atomic, an unknown extern) is not decided.

The check executes the device function abstractly: every thread of one workgroup at once (numpy
over ``threadIdx.x``; ``T.rocm.lane_id()`` and ``T.rocm.wave_id()``, i.e. ``mbcnt`` and
``readfirstlane(workitem.id.x // 64)``, evaluated), statement by statement; barriers count epochs.
An access's byte set is its index (or address) evaluated per thread; each LDS byte keeps its last
writer (wave, statement, the epoch from which it is visible to other waves) and its last read per
wave. A loop with a static trip count ``n`` runs iterations ``0 .. 5`` and then the last ones from a
multiple of 6 on (all of them when ``n <= 12``; ``lds_values.iterations``): the loop-carried hazards
of double and triple buffering (indices periodic in the iteration, period 2 or 3) show between
consecutive iterations, the prologue before the first, the epilogue after the last.

Workgroups (``blockIdx``, a static grid): the run starts with every workgroup at once, ``blockIdx``
one value per workgroup (``lds_values.PerBlock``). Where the check must use one value (a loop's trip
count, a branch condition, an LDS index) that differs between them, it splits them into groups with
one value each and runs each group, in value order: every distinct behaviour the check can tell
apart runs, and ``for kv in range(f(blockIdx.x))`` (causal attention) runs once per trip count,
except that of the trip counts above 12 of one tail length (``lds_values.trip_count_groups``) only
the smallest and the largest run, by the loops' own premise. A race names the workgroup (the first
``blockIdx`` of its group).

Branches it cannot evaluate: one whose condition is the same in every thread of the workgroup runs
both ways, in two runs (a race names the outcome). Such a condition is built from values it knows
are (what it evaluates to one number for every thread, ``blockIdx``), scalar kernel arguments, LDS
elements at such an index (their read is checked: every thread reads the published bytes; a split-K
GEMM's ticket ``if ticket[0] == k_splits - 1:``), global elements at such an index (one address:
assumed to give every thread of the workgroup the same value, i.e. not written meanwhile) and
register elements every thread stored such a value into (the grouped GEMM's group search). A branch
that accesses no LDS and has no barrier, wait, vector-memory load or direct-to-LDS load (a store
guard of the workgroup's rows) is skipped. At most ``MAX_RUNS`` runs (groups of workgroups times
branch outcomes).

What it cannot decide (an index read from memory or depending on a kernel argument, a dynamic loop
bound, a grid that is not static, any other branch it cannot evaluate, a barrier under a branch
that only some waves take, ``break``/``while``, an unknown call that takes an LDS pointer, more than
``MAX_RUNS`` runs) is logged as a WARNING on the ``tvm_cdna4.rocm.lds_sync`` logger, naming the
statement (a ``T.rocm.tile.apply`` as written, ``patterns.origins``) and why: the case is left to
the emulator (which checks every access it runs). In strict mode (``tvm_cdna4.build(...,
check="strict")``, or ``TVM_CDNA4_LDS_CHECK=strict`` for every route, ``tvm_tirx.tirx.compile``
included; ``rocm.build.lds_check_mode``) it is a ``ContractError`` instead.

Refused: a ``ContractError`` (``check="LDS synchronization"``) naming the buffer, the byte, the
workgroup, both waves and both statements (as written, with their loop iterations), and the fix.
"""

from __future__ import annotations

import logging

import numpy as np
import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.ir import Var, prim

from ..errors import ContractError
from ..isa import WAVE_SIZE
from ..isa.llvm_helpers import PREFIX, LdsEffect, lds_effects
from ..patterns import origins
from .lds_bytes import Conflict, LdsBytes
from .lds_values import (BINARY, BLOCKED, CALLS, MISSING, POINTERS, Deferred, PerBlock, apply, forget_callees,
                         grid, iterations, lds_pointer, per_block, trip_count_groups)
from .lds_values import callee as _callee

logger = logging.getLogger(__name__)

CHECK = "LDS synchronization"
MAX_RUNS = 64  # runs: groups of workgroups times branch outcomes (module docstring)
MAX_GRID = 1 << 22  # workgroups enumerated; a larger grid is not decided
SHARED_SCOPES = ("shared", "shared.dyn")
EFFECTS = lds_effects()
_NONE = LdsEffect("none")
BARRIERS = {"llvm.amdgcn.s.barrier": False, "tirx.gpu_storage_sync": False,  # -> waits lgkmcnt(0)
            **{name: e.lgkmcnt == 0 for name, e in EFFECTS.items() if e.kind == "barrier"}}
WAITCNT = "llvm.amdgcn.s.waitcnt"
VMEM_PREFIX = PREFIX + "buffer_load"
LANE_ID = "llvm.amdgcn.mbcnt.hi"
WORKITEM_ID = "llvm.amdgcn.workitem.id."
FIX = ("order them with T.rocm.workgroup_barrier() (s_waitcnt lgkmcnt(0), then s_barrier) after the first access; "
       "for a direct-to-LDS load, T.rocm.s_waitcnt_vmcnt(n) covering it before that barrier")
UNDECIDED_FIX = ("index LDS, bound loops and place barriers with values known at build time (threadIdx, blockIdx of a "
                 "static grid, loop variables, constants); or build without check='strict' and run the kernel in the "
                 "emulator (tvm_cdna4.emulator.emulate), which checks every access it runs")

# ---- the check --------------------------------------------------------------------------------

class Undecided(Exception):
    """What the check cannot decide; the case is left to the emulator. ``Undecided(text, node)``:
    ``text`` with ``{}`` replaced by the expression ``node`` as TVMScript (printed only when the
    message is read: a value that cannot be evaluated is often never needed), or by "it" when
    ``node`` is the whole value of the ``statement`` the check was running (``_Sync.where``)."""

    def __init__(self, text: str, node=None):
        super().__init__(text)
        self.text, self.node, self.statement, self.subject = text, node, None, None

    def reason(self) -> str:
        if self.node is None:
            return self.text
        whole = self.subject is not None and self.node.same_as(self.subject)
        return self.text.format("it" if whole else f"`{origins.one_line(self.node, 160)}`")

    def __str__(self) -> str:
        return self.reason() if self.statement is None else f"{self.statement}: {self.reason()}"


class _Split(Exception):
    """The run's workgroups differ in a value the check must use: ``groups`` (indices) to run instead."""

    def __init__(self, groups):
        super().__init__("split")
        self.groups = groups


class _Fork(Exception):
    """A branch on a value the check cannot evaluate but knows to be the same in every thread of the
    workgroup: the run again with it taken, and again with it not taken."""


def check_lds_sync(func, strict: bool = False) -> None:
    """Refuse a cross-wave LDS access pair that no barrier orders (see the module docstring). What it
    cannot decide: a WARNING, or with ``strict`` (``rocm.build``: the check's mode) a ContractError."""
    name = func.attrs.get("global_symbol", "kernel") if func.attrs is not None else "kernel"
    try:
        _check(func)
    except Undecided as why:
        if strict:
            raise ContractError(f"the LDS synchronization of {name} cannot be decided at build time"
                                + (f": {why.statement}" if why.statement else ""),
                                expected="LDS indices, loop bounds, barriers and LDS calls the check can evaluate",
                                found=why.reason(), suggestion=UNDECIDED_FIX, check=CHECK) from None
        logger.warning("LDS synchronization of %s is left to the emulator: %s", name, why)


def _check(func) -> None:
    """Run the groups of workgroups (module docstring); a race raises at once, the first undecided
    group after every group has run."""
    try:
        _run_groups(func)
    finally:
        forget_callees()


def _run_groups(func) -> None:
    axes, workgroups, why = grid(func, MAX_GRID)
    params = {p for p in func.params if isinstance(p.ty, ir.PrimType) and str(p.ty.dtype) != "handle"}
    work = [(np.arange(len(workgroups)) if workgroups is not None else None, ())]  # (workgroups, branch outcomes)
    shared, runs, undecided = {}, 0, None
    while work:
        members, forks = work.pop(0)
        if runs == MAX_RUNS:
            undecided = undecided or Undecided(f"it tells more than {MAX_RUNS} behaviours apart (groups of workgroups "
                                               "times branch outcomes); the others are not checked")
            break
        runs += 1
        sync = _Sync(axes, None if members is None else workgroups[members], why, shared,
                     several=workgroups is not None and len(workgroups) > 1, params=params, forks=forks)
        try:
            sync.stmt(func.body, iteration="")
        except _Split as split:
            work[:0] = [(members[g], forks) for g in split.groups]
        except _Fork:
            work[:0] = [(members, (*forks, True)), (members, (*forks, False))]
        except Undecided as error:
            if error.statement is None:
                error.statement, error.subject = sync.where()
            undecided = undecided or error
    if undecided is not None:
        raise undecided


class _Sync:
    """The abstract execution of one group of workgroups (module docstring)."""

    def __init__(self, axes, workgroups, grid_unknown, shared: dict, several: bool = False, params=(), forks=()):
        self.axes, self.workgroups, self.grid_unknown = axes, workgroups, grid_unknown
        self.shared = shared  # caches of the function's runs: hash(expr) -> (expr, its reads / free variables)
        self.env: dict = {}
        self.unknown: dict = {}  # var -> why it has no value
        self.tx = None
        self.waves = 0
        self.lds: dict = {}  # var -> (LdsBytes, byte offset (int), element bytes)
        self.events: list = []  # (statement, loop iterations, origin) per access
        self.epoch = 0
        self.pending_lds: list = []  # (LdsBytes, event) of plain stores not yet complete
        self.vmem: list = []  # per issue, oldest first: (LdsBytes, event) of a direct-to-LDS load, or None
        self.origin = None  # the tile.apply whose lowered statements follow (patterns.origins)
        self.at = None  # (statement, origin) being run
        self.several = several  # whether the grid has several workgroups (a race names its workgroup)
        self.params = set(params)  # the scalar kernel arguments: the same in every thread
        self.forks = tuple(forks)  # the outcomes of the workgroup-uniform branches it cannot evaluate, in order
        self.assumed: list = []  # (branch, outcome) of those run so far
        self.uniform_vars: set = set()  # variables it cannot evaluate, the same in every thread
        self.registers: dict = {}  # register tensor -> its elements that hold such a value (None: a view of it exists)

    # -- text

    def where(self) -> tuple[str | None, object]:
        """The statement being run, as written where known, and its value (for what the check cannot decide)."""
        if self.at is None:
            return None, None
        node, origin = self.at
        if isinstance(node, ir.If):
            return f"`if {origins.one_line(node.condition, 160)}:`", node.condition
        if isinstance(node, ir.For):
            return f"`for {node.var.name} in range({origins.one_line(node.begin)}, {origins.one_line(node.end, 120)}):`", None
        origin = origin if origin is not None and self._reads_origin(node, origin) else None
        return f"`{self._text(node, origin)}`", getattr(node, "value", None)

    def _text(self, node, origin=None) -> str:
        """A statement as the kernel spells it: its tile.apply (``origin``), a direct-to-LDS load as
        ``T.rocm.buffer_load_lds(...)``, else the lowered statement."""
        if origin is not None:
            return origin.text
        if isinstance(node, ir.If):
            return f"if {origins.one_line(node.condition, 160)}:"
        call = node.value if isinstance(node, ir.Evaluate) else None
        effect = EFFECTS.get(_callee(call)) if isinstance(call, ir.Call) else None
        if effect is not None and effect.kind == "dma":
            dst = call.args[5].args[0] if _callee(call.args[5]) == "tirx.address_of" else call.args[5]
            args = ", ".join(origins.one_line(a) for a in (*call.args[1:5], dst))
            return f"T.rocm.buffer_load_lds({args}, {effect.bytes})"
        return origins.one_line(node, 160)

    def _reads_origin(self, node, origin) -> bool:
        """Whether ``node`` has an LDS read of ``origin``'s opcode (then ``origin`` lowered to it)."""
        found = []
        tvm_ffi.structural_walk(node, [(ir.Call, lambda c: found.append(origin.opcode in EFFECTS.get(_callee(c), _NONE).opcodes))])
        return any(found)

    def _workgroup(self) -> str:
        """`` in workgroup blockIdx.x = 1`` (the run's first) when the grid has several, and the
        outcomes of the branches it could not evaluate (``_decide``)."""
        text = ""
        if self.several:
            text = " in workgroup " + ", ".join(f"{axis} = {int(v)}" for (_, axis), v in zip(self.axes, self.workgroups[0]))
        if self.assumed:
            text += " (" + ", ".join(f"`if {origins.one_line(node.condition, 120)}:` {'taken' if taken else 'not taken'}"
                                     for node, taken in self.assumed) + ")"
        return text

    # -- values

    def value(self, expr):
        """``expr`` per thread: an int, an array over threads (a second axis for vector lanes), or a
        ``PerBlock`` of them."""
        kind = type(expr)  # the common kinds by identity first (isinstance on IR classes is slow)
        binary = BINARY.get(kind)
        if binary is not None:
            return apply(binary, self.value(expr.a), self.value(expr.b))
        if kind is ir.IntImm or isinstance(expr, ir.IntImm):
            return int(expr.value)
        if kind is Var or isinstance(expr, Var):
            return self._var(expr)
        if isinstance(expr, prim.Not):
            return apply(np.logical_not, self.value(expr.a))
        if isinstance(expr, prim.Cast):
            return self.value(expr.value)
        if isinstance(expr, prim.Select):
            return apply(np.where, self.value(expr.condition), self.value(expr.true_value), self.value(expr.false_value))
        if isinstance(expr, prim.Ramp):
            lanes, threads = np.arange(int(expr.lanes)), (len(self.tx),)
            return apply(lambda b, s: np.add.outer(np.broadcast_to(b, threads), lanes * s), self.value(expr.base),
                         self.value(expr.stride), elementwise=False)
        if isinstance(expr, prim.Broadcast):
            lanes, threads = int(expr.lanes), (len(self.tx),)
            return apply(lambda v: np.repeat(np.broadcast_to(v, threads)[:, None], lanes, 1), self.value(expr.value),
                         elementwise=False)
        if isinstance(expr, prim.Let):
            self.env[expr.var] = self.value(expr.value)
            return self.value(expr.body)
        if isinstance(expr, ir.Call):
            return self._call_value(expr)
        if isinstance(expr, ir.TensorLoad):
            raise Undecided("{} is read from memory, not known at build time", expr)
        raise Undecided("cannot evaluate {}", expr)

    def _var(self, var):
        found = self.env.get(var, MISSING)
        if found is MISSING:
            raise Undecided(self.unknown.get(var) or f"`{var.name}` has no value known at compile time")
        return self._force(found) if type(found) is Deferred else found

    def _force(self, deferred: Deferred):
        """The value of a ``Deferred`` bind, evaluated with its variables' values when it was bound."""
        if deferred.done:
            if deferred.error is not None:
                raise deferred.error
            return deferred.result
        saved = {v: self.env.get(v, MISSING) for v in deferred.env}
        self._restore(deferred.env)
        try:
            deferred.result = self.value(deferred.expr)
        except Undecided as error:
            deferred.error = error
            raise
        finally:
            deferred.done = True
            self._restore(saved)
        return deferred.result

    def _restore(self, values: dict):
        for var, v in values.items():
            if v is MISSING:
                self.env.pop(var, None)
            else:
                self.env[var] = v

    def _call_value(self, call):
        name = _callee(call)
        if name == LANE_ID:
            return self.tx % WAVE_SIZE
        if name.startswith(WORKITEM_ID) and self.tx is not None:
            return self.tx if name.endswith(".x") else 0  # threadIdx.y/z of extent 1 (_region refuses others)
        if name == "llvm.amdgcn.readfirstlane":
            first = self.tx // WAVE_SIZE * WAVE_SIZE
            return apply(lambda v: np.broadcast_to(v, self.tx.shape)[first], self.value(call.args[-1]), elementwise=False)
        if name in ("tirx.if_then_else", "prim.if_then_else"):
            return apply(np.where, *(self.value(a) for a in call.args))
        if name in CALLS:
            return apply(CALLS[name], self.value(call.args[0]), self.value(call.args[1]))
        raise Undecided("cannot evaluate the call {}", call)

    def _uniform(self, value):
        """``value`` where the check must use one value: the run's workgroups split where it differs."""
        if isinstance(value, PerBlock):
            raise _Split(value.groups())
        return value

    def _free(self, expr) -> list:
        """The variables of ``expr`` (cached)."""
        key = ("free", hash(expr))
        if key not in self.shared:
            found = []
            tvm_ffi.structural_walk(expr, [(Var, found.append)])
            self.shared[key] = (expr, found)  # the expression kept alive: its hash is its address
        return self.shared[key][1]

    # -- statements

    def stmt(self, node, iteration: str, mask=None):
        if isinstance(node, ir.SeqStmt):
            outer, key = self.origin, ("seq", hash(node))
            if key not in self.shared:
                self.shared[key] = (node, list(node.seq))  # read once: each access of an FFI array is a call
            for child in self.shared[key][1]:
                self.stmt(child, iteration, mask)
            self.origin = outer
            return
        if isinstance(node, ir.RegionStmt):
            self._region(node, iteration, mask)
            return
        self.at = (node, self.origin)
        if isinstance(node, ir.Bind):
            self._bind(node, iteration, mask)
        elif isinstance(node, ir.TensorStore):
            self._reads(node.value, node, iteration, mask)
            for index in node.indices:
                self._reads(index, node, iteration, mask)
            if node.dest in self.lds:
                self._access(node.dest, self._elements(node.dest, node.indices), node, iteration, mask, "write")
            elif node.dest in self.registers:
                self._register_store(node, mask)
        elif isinstance(node, ir.Evaluate):
            self._evaluate(node, iteration, mask)
        elif isinstance(node, ir.If):
            self._if(node, iteration, mask)
        elif isinstance(node, ir.For):
            self._for(node, iteration, mask)
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
            elif axis.startswith("blockIdx."):
                index = next(i for i, (v, _) in enumerate(self.axes) if v.same_as(var))
                if self.workgroups is None:
                    self.unknown[var] = self.grid_unknown
                    self.uniform_vars.add(var)  # unknown, but one value in the workgroup
                else:
                    self.env[var] = per_block(self.workgroups[:, index])
        self.stmt(node.body, iteration, mask)

    def _bind(self, node, iteration, mask):
        value, var = node.value, node.var
        found = origins.origin(var)
        if found is not None:
            self.origin = found
        if isinstance(value, ir.Call) and _callee(value) in ("tirx.alloc_tensor", "tirx.decl_tensor"):
            self._storage(var, value)
            return
        self._reads(value, node, iteration, mask)
        free = self._free(value)
        if any(isinstance(self.env.get(v), BLOCKED) for v in free):  # used where needed, per workgroup
            self.env[var] = Deferred(value, {v: self.env.get(v, MISSING) for v in free})
            return
        self.uniform_vars.discard(var)
        try:
            self.env[var] = self.value(value)
        except Undecided:
            self.env.pop(var, None)  # only an error where an LDS index, a branch or a bound uses it
            if self._workgroup_uniform(value):
                self.uniform_vars.add(var)

    def _storage(self, var, call):
        if len(call.ty_args) and str(call.ty_args[0].scope) == "local":
            if _callee(call) == "tirx.alloc_tensor":
                self.registers[var] = set()
            else:  # a view: the check does not follow stores through it
                tvm_ffi.structural_walk(call.args, [(Var, lambda v: self.registers.__setitem__(v, None)
                                                     if v in self.registers else None)])
        if not len(call.ty_args) or str(call.ty_args[0].scope) not in SHARED_SCOPES:
            return
        ty = call.ty_args[0]
        dtype = tvm_ffi.dtype(str(ty.dtype))
        elem = dtype.bits * dtype.lanes // 8
        if _callee(call) == "tirx.alloc_tensor":
            if self.tx is None:
                raise Undecided("an LDS allocation outside the threadIdx.x launch")
            n = int(np.prod([int(d.value) for d in ty.shape])) * elem
            self.lds[var] = (LdsBytes(var.name, n, self.waves), 0, elem)
            return
        ptr = call.args[0]
        if not (isinstance(ptr, ir.Call) and _callee(ptr) == "tirx.address_of" and ptr.args[0].source in self.lds):
            raise Undecided(f"the LDS view `{var.name}`")
        base, offset, base_elem = self.lds[ptr.args[0].source]
        start = self._uniform(self.value(ptr.args[0].indices[0]))
        if np.ndim(start) or len(ptr.args[0].indices) != 1:
            raise Undecided(f"the LDS view `{var.name}` at a thread-dependent offset")
        self.lds[var] = (base, offset + int(start) * base_elem, elem)

    def _evaluate(self, node, iteration, mask):
        call = node.value
        name = _callee(call) if isinstance(call, ir.Call) else ""
        effect = EFFECTS.get(name)
        if name in BARRIERS:
            if mask is not None and not mask.all():
                raise Undecided("a barrier under a branch that only some threads take")
            if BARRIERS[name]:
                self._complete_lds()
            self.epoch += 1
        elif name == WAITCNT:
            imm = int(call.args[1].value)
            self._wait(lgkmcnt=(imm >> 8) & 0xF, vmcnt=(imm & 0xF) | ((imm >> 14) & 0x3) << 4)
        elif effect is not None and effect.kind == "wait":
            self._wait(lgkmcnt=effect.lgkmcnt, vmcnt=effect.vmcnt)
        elif effect is not None and effect.kind == "dma":
            self._dma(call, effect.bytes, node, iteration, mask)
        elif name.startswith(VMEM_PREFIX):
            self._reads(call, node, iteration, mask)
            self.vmem.append(None)
        else:
            self._reads(call, node, iteration, mask)

    def _wait(self, lgkmcnt: int | None, vmcnt: int | None):
        """``s_waitcnt``: plain LDS stores complete at ``lgkmcnt(0)``; the direct-to-LDS loads older
        than the newest ``vmcnt`` vector-memory loads complete (63, None: not waited for)."""
        if lgkmcnt == 0:
            self._complete_lds()
        if vmcnt is not None and vmcnt < 63:
            self._complete_vmem(vmcnt)

    def _if(self, node, iteration, mask):
        self._reads(node.condition, node, iteration, mask)
        try:
            value = self.value(node.condition)
        except Undecided:
            if self._inert(node):  # e.g. a store guard of the workgroup's rows: nothing to order
                return self._skip(node)
            if not self._workgroup_uniform(node.condition):
                raise
            value = self._decide(node)
        if isinstance(value, PerBlock) and self._inert(node):
            return self._skip(node)
        cond = np.broadcast_to(self._uniform(value), self.tx.shape if self.tx is not None else ())
        cond = cond.astype(bool) if mask is None else (cond.astype(bool) & mask)
        outer = np.ones_like(cond) if mask is None else mask
        if cond.any():
            self.stmt(node.then_case, iteration, None if cond.all() else cond)
        if node.else_case is not None and (outer & ~cond).any():
            rest = outer & ~cond
            self.stmt(node.else_case, iteration, None if rest.all() else rest)

    def _skip(self, node) -> None:
        """A branch not run: the register elements it may store no longer hold a known uniform value."""
        stored = []
        tvm_ffi.structural_walk(node, [(ir.TensorStore, lambda n: stored.append(n.dest))])
        for var in stored:
            if self.registers.get(var) is not None:
                self.registers[var] = set()

    def _decide(self, node) -> bool:
        """The outcome of a workgroup-uniform branch it cannot evaluate: this run's (``forks``), or
        both (``_Fork``: the run again with each)."""
        if len(self.assumed) == len(self.forks):
            raise _Fork()
        taken = self.forks[len(self.assumed)]
        self.assumed.append((node, taken))
        return taken

    def _workgroup_uniform(self, expr) -> bool:
        """Whether ``expr`` has one value in all the workgroup's threads: built from values it knows
        are, scalar kernel arguments and LDS elements at such an index (whose read it checks: every
        thread reads the bytes their last writer published)."""
        if type(expr) in BINARY:
            return self._workgroup_uniform(expr.a) and self._workgroup_uniform(expr.b)
        if isinstance(expr, prim.Not | prim.Cast):
            return self._workgroup_uniform(expr.a if isinstance(expr, prim.Not) else expr.value)
        if isinstance(expr, prim.Select):
            return all(self._workgroup_uniform(x) for x in (expr.condition, expr.true_value, expr.false_value))
        if isinstance(expr, ir.IntImm | ir.FloatImm):
            return True
        if isinstance(expr, ir.TensorLoad) and len(expr.indices) == 1:
            if expr.source in self.registers:
                elements = self.registers[expr.source]
                return elements is not None and self._invariant(expr.indices[0]) and \
                    int(self.value(expr.indices[0])) in elements
            scope = str(getattr(expr.source.ty, "scope", ""))
            return (expr.source in self.lds or scope == "global") and self._workgroup_uniform(expr.indices[0])
        if isinstance(expr, Var):
            found = self.env.get(expr)
            if type(found) is Deferred and not self._invariant(expr):  # per workgroup, unknown: its expression
                saved = {v: self.env.get(v, MISSING) for v in found.env}
                self._restore(found.env)
                try:
                    return self._workgroup_uniform(found.expr)
                finally:
                    self._restore(saved)
            return expr in self.params or expr in self.uniform_vars or self._invariant(expr)
        if isinstance(expr, ir.Call) and _callee(expr) in (*CALLS, "tirx.if_then_else", "prim.if_then_else"):
            return all(self._workgroup_uniform(a) for a in expr.args)
        return False

    def _register_store(self, node, mask):
        """A store into a register tensor: its element (at an index the same in every thread) holds a
        workgroup-uniform value when every thread stores the same value."""
        elements = self.registers[node.dest]
        if elements is None:
            return
        if len(node.indices) != 1 or not self._invariant(node.indices[0]):
            self.registers[node.dest] = set() if len(node.indices) == 1 else None
            return
        index = int(np.asarray(self.value(node.indices[0])).flat[0])
        if mask is None and self._workgroup_uniform(node.value):
            elements.add(index)
        else:
            elements.discard(index)

    def _invariant(self, expr) -> bool:
        """Whether ``expr`` evaluates to the same value in every thread (per workgroup)."""
        try:
            value = self.value(expr)
        except Undecided:
            return False
        values = value.values if isinstance(value, PerBlock) and not value.scalar else [value]
        return isinstance(value, PerBlock) and value.scalar or all(
            np.ndim(v) == 0 or (np.ndim(v) == 1 and (v == v.flat[0]).all()) for v in values)

    def _for(self, node, iteration, mask):
        begin, end = self.value(node.begin), self.value(node.end)
        step = self.value(node.step) if node.step is not None else 1
        n = apply(lambda b, e, s: np.maximum(0, -(-(e - b) // s)), begin, end, step)
        if isinstance(n, PerBlock) and n.scalar:  # a trip count that differs between workgroups (blockIdx)
            raise _Split(trip_count_groups(n.values))
        if isinstance(n, PerBlock) or np.ndim(n) or any(np.ndim(v) for v in (begin, step) if not isinstance(v, PerBlock)):
            raise Undecided(f"the loop over `{node.var.name}` has no static, uniform trip count")
        for i in iterations(int(n)):
            value = apply(lambda b, s: b + i * s, begin, step)
            self.env[node.var] = value
            shown = value.at(0) if isinstance(value, PerBlock) else value
            self.stmt(node.body, f"{iteration}{', ' if iteration else ''}{node.var.name} = {shown}", mask)

    # -- LDS accesses

    def _inert(self, node) -> bool:
        """Whether ``node`` neither accesses LDS nor barriers, waits or issues vector-memory loads
        (what the check tracks): a branch of it whose condition is unknown changes nothing here."""
        calls = []
        tvm_ffi.structural_walk(node, [(ir.Call, lambda c: calls.append(_callee(c)))])
        tracked = (*BARRIERS, WAITCNT, VMEM_PREFIX, *EFFECTS)
        return not self._touches_lds(node) and not any(name.startswith(tracked) for name in calls)

    def _touches_lds(self, node) -> bool:
        found = []
        tvm_ffi.structural_walk(node, [(Var, lambda v: found.append(v) if v in self.lds else None)])
        return bool(found)

    def _elements(self, var, indices):
        if len(indices) != 1:
            raise Undecided(f"a multi-dimensional access to the LDS tensor `{var.name}`")
        return self._uniform(self.value(indices[0]))

    def _bytes(self, var, elements, width=None):
        """(allocation, byte addresses per thread: (threads, n))."""
        lds, offset, elem = self.lds[var]
        e = np.broadcast_to(elements, self.tx.shape if np.ndim(elements) < 2 else np.shape(elements))
        e = e.reshape(len(self.tx), -1)
        width = elem if width is None else width
        return lds, (offset + e * elem)[:, :, None].repeat(width, 2).reshape(len(self.tx), -1) + np.tile(
            np.arange(width), e.shape[1])

    def _reads(self, expr, node, iteration, mask):
        for load, width, name in self._loads(expr):
            if load.source in self.lds:
                origin = self.origin if width is not None and self._of_origin(name, load) else None
                self._access(load.source, self._elements(load.source, load.indices), node, iteration, mask, "read",
                             width, origin)

    def _of_origin(self, name: str, load) -> bool:
        """Whether the ds_read_tr ``name`` of ``load`` is the current tile.apply's (``self.origin``)."""
        origin = self.origin
        return origin is not None and origin.opcode in EFFECTS[name].opcodes and load.source.name in origin.lds

    def _loads(self, expr) -> list:
        """The LDS reads of ``expr``: (load, None, "") per TensorLoad, (address, bytes, callee) per
        ds_read_tr (an ``address_of`` is no read); cached per expression (loop bodies run many times).
        Any other call that takes an LDS pointer is not decided."""
        key = ("loads", hash(expr))
        if key in self.shared:
            return self.shared[key][1]
        loads, addressed, undecided = [], [], []

        def call(c):  # no exception may leave a structural_walk callback: undecided ones are kept
            name = _callee(c)
            effect = EFFECTS.get(name)
            if name == "tirx.address_of" and isinstance(c.args[0], ir.TensorLoad):
                addressed.append(c.args[0])
            elif effect is not None and effect.kind == "read":
                address = next((a for a in c.args if isinstance(a, ir.Call) and _callee(a) == "tirx.address_of"), None)
                if address is None or not isinstance(address.args[0], ir.TensorLoad):
                    undecided.append(Undecided("the LDS address of {}", c))
                else:
                    loads.append((address.args[0], effect.bytes, name))
            elif name not in POINTERS and any(lds_pointer(a, self.lds) for a in c.args):
                undecided.append(Undecided("{} takes an LDS (addrspace 3) pointer, and the check does not know what it "
                                           "does there", c))

        tvm_ffi.structural_walk(expr, [(ir.Call, call), (ir.TensorLoad, lambda n: loads.append((n, None, "")))])
        if undecided:
            raise undecided[0]
        loads = [(x, w, n) for x, w, n in loads if w is not None or not any(x.same_as(a) for a in addressed)]
        self.shared[key] = (expr, loads)  # the expression kept alive: its hash is its address
        return loads

    def _dma(self, call, size, node, iteration, mask):
        dst = call.args[5]
        if not (isinstance(dst, ir.Call) and _callee(dst) == "tirx.address_of" and dst.args[0].source in self.lds):
            raise Undecided("the direct-to-LDS destination {}", dst)
        load = dst.args[0]
        base = np.broadcast_to(self._elements(load.source, load.indices), self.tx.shape)
        lds, offset, elem = self.lds[load.source]
        wave_base = offset + base[self.tx // WAVE_SIZE * WAVE_SIZE] * elem  # M0: the wave's first lane
        addresses = (wave_base + self.tx % WAVE_SIZE * size)[:, None] + np.arange(size)
        event = self._record(node, iteration)
        self._check_write(lds, addresses, event, mask, dma=True)
        self.vmem.append((lds, event))

    def _record(self, node, iteration, origin=None) -> int:
        self.events.append((node, iteration, origin))  # printed only for an error
        return len(self.events) - 1

    def _event(self, index: int) -> str:
        node, iteration, origin = self.events[index]
        return f"`{self._text(node, origin)}`" + (f" ({iteration})" if iteration else "")

    def _access(self, var, elements, node, iteration, mask, kind, width=None, origin=None):
        lds, addresses = self._bytes(var, elements, width)
        event = self._record(node, iteration, origin)
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
        if b.min() < 0 or b.max() >= len(lds):
            raise Undecided(f"an access outside the LDS tensor {lds.name} (the emulator reports it)")

    def _check_read(self, lds, addresses, event, mask):
        for w, b in self._per_wave(addresses, mask):
            self._bounds(lds, b)
            found = lds.read(w, b, self.epoch, event)
            if found is not None and found.in_flight:
                raise ContractError(
                    f"wave {w} reads byte {found.byte}{self._workgroup()} in {self._event(event)} while its own "
                    f"direct-to-LDS load {self._event(found.event)} into it is still in flight",
                    operand=lds.name, suggestion="wait for the load first: T.rocm.s_waitcnt_vmcnt(n) with at most n "
                    "newer vector-memory loads outstanding (then T.rocm.workgroup_barrier() for other waves)",
                    check=CHECK)
            if found is not None:
                self._race(lds, found, w, "reads", event)

    def _check_write(self, lds, addresses, event, mask, dma: bool):
        owner = np.full(len(lds), -1, np.int16)  # byte -> the wave of this statement that writes it (the last one)
        for w, b in self._per_wave(addresses, mask):
            self._bounds(lds, b)
            first = owner[b] >= 0
            if first.any():
                k = int(np.argmax(first))
                self._race(lds, Conflict(int(b[k]), int(owner[b[k]]), "writes", event), w, "writes", event)
            owner[b] = w
            found = lds.write(w, b, self.epoch, event, dma)
            if found is not None:
                self._race(lds, found, w, "writes", event)

    def _complete(self, lds, event):
        lds.complete(event, self.epoch)

    def _complete_lds(self):
        for lds, event in self.pending_lds:
            self._complete(lds, event)
        self.pending_lds = []

    def _complete_vmem(self, outstanding: int):
        done, self.vmem = self.vmem[:max(0, len(self.vmem) - outstanding)], self.vmem[max(0, len(self.vmem) - outstanding):]
        for entry in done:
            if entry is not None:
                self._complete(*entry)

    def _race(self, lds, first: Conflict, w: int, verb: str, event: int):
        raise ContractError(
            f"LDS race on byte {first.byte}{self._workgroup()}: wave {first.wave} {first.verb} it in "
            f"{self._event(first.event)} and wave {w} {verb} it in {self._event(event)}, with no barrier ordering the two",
            operand=lds.name, suggestion=FIX, check=CHECK)
