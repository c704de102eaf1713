"""Whole-kernel rules for gfx950 kernels, as analyses of the TIR (before or after TIRx lowers it).

``check_kernel(func, target)`` is the one entry point: ``tvm_cdna4.build`` runs it on the kernel it
is given, the emulator on the kernel and on the device function it executes, and the
``tvm_tirx.tirx.compile`` route on the module as written (default pipeline) and on every device
function that reaches ROCm codegen (``rocm.build.install_hooks``). The patterns' lowering also
runs ``check_target`` (TileDispatch's context knows the target on every pipeline). The LDS
synchronization check is ``rocm.lds_sync`` (on the lowered device function, in ``target.build.rocm``).

Rules, each a ``ContractError`` whose ``check`` names it:

- ``backend``: a kernel written for one backend (CUDA: ``T.cuda`` ops, a ``T.cuda.LaunchConfig``;
  ROCm: ``T.rocm`` ops, ``llvm.amdgcn`` intrinsics, ``tvm_cdna4_`` helpers) is refused for a target
  of another kind (TIRx would stop on a C++ ``Check failed``); ``check_backend``, also run by
  ``emulate(..., target="sm80")``.
- ``target``: a wave-collective instruction (MFMA, ds_read_tr, a wave reduction) needs ``mcpu`` gfx950.
- ``workgroup size`` / ``whole waves``: at most 256 threads, a whole number of 64-lane waves.
- ``wave count``: at ``scope="workgroup"`` wave ``w`` computes slice ``w`` of every operand, so the
  launch has exactly as many waves as the operands' leading (wave) axis.
- ``wave-uniform control``: all 64 lanes of a wave execute a wave-collective instruction, so no
  enclosing branch condition, loop bound or early exit may differ between the lanes of a wave.
- ``wave-uniform operand``: the LDS destination of a direct-to-LDS load (``T.rocm.buffer_load_lds``)
  is the wave's base address (``M0``), so its indices must be wave-uniform.
- ``LDS alignment``: that destination must be 4-byte aligned; refused when its byte offset is
  provably never a multiple of 4 (modular analysis of the index).
- ``LDS view``: a tensor view of shared memory must not be accessed (TIRx 0.1.0a4's ROCm codegen
  gives the view its own LDS symbol, reached through a cast to a global pointer).
- ``math call``: a math function gfx950 code cannot compile (a C-library call such as ``T.log1p``,
  ``T.atan``; ``T.exp10``; ``T.log`` / ``T.sin`` / ``T.cos`` / ``T.pow`` / ``T.erf`` on float64) is
  refused, naming what to write instead (``rocm.math_calls``).

Lane dependence is a symbolic analysis, not a pattern match. ``threadIdx.x`` (extent a multiple of
64) is rewritten as ``64 * wave + lane`` with ``lane`` in ``[0, 64)``; a value is lane-varying when
TIRx's simplifier cannot eliminate ``lane`` (nor an opaque lane-varying value) from it. So
``tx // 64``, ``(tx >> 7) == 1``, ``T.rocm.wave_id()`` (``readfirstlane``), kernel arguments,
``blockIdx`` and loops with such bounds are wave-uniform, and ``tx < 32`` is not. Values flow
through let-bound variables, through buffers (a store of a lane-varying value, at a lane-varying
index or under lane-varying control makes every later read of that storage lane-varying, views
included) and through control flow (loop variables of lane-varying loops, code after a ``break``,
``continue`` or ``return`` that only some lanes take), to a fixed point.
"""

from __future__ import annotations

import functools
import itertools
import re

import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.codegen.llvm import get_intrinsic_name
from tvm_tirx.ir import Range, Var, prim
from tvm_tirx.sym import Analyzer, ConstraintContext, RangeConstraint

from ..errors import ContractError
from ..isa import WAVE_SIZE
from ..isa.llvm_helpers import BUFFER_LOAD_LDS_MNEMONICS, PREFIX, buffer_load_lds_helper
from ..patterns import as_target as _as_target, check_target
from .launch import launch_extents
from .math_calls import check_math_calls

tvm_ffi.register_error(ContractError)  # raised inside target.build.rocm, it reaches the caller as itself

MAX_WORKGROUP = 256  # what TIRx 0.1.0a4's AMDGPU codegen emits without a ROCm device
TILE_APPLY = "tirx.rocm.tile.apply"
COLLECTIVE_PREFIXES = ("llvm.amdgcn.mfma.", "llvm.amdgcn.ds.read.tr", PREFIX + "mfma", PREFIX + "ds_read_tr",
                       PREFIX + "wave_reduce")
UNIFORM_INTRINSICS = ("llvm.amdgcn.readfirstlane",)
LANE_ID_INTRINSICS = ("llvm.amdgcn.mbcnt.lo", "llvm.amdgcn.mbcnt.hi")
LLVM_INTRINSIC_OPS = ("tirx.call_llvm_intrin", "tirx.call_llvm_pure_intrin")
EXTERN_OPS = ("tirx.call_extern", "tirx.call_pure_extern")
STORAGE_OPS = ("tirx.alloc_tensor", "tirx.decl_tensor")
SHARED_SCOPES = ("shared", "shared.dyn")
LDS_DMA_HELPERS = {buffer_load_lds_helper(size): f"{name} ... lds" for size, name in BUFFER_LOAD_LDS_MNEMONICS.items()}
LDS_DMA_DESTINATION = 5  # call_extern(helper, ptr, num_bytes, voffset, soffset, lds_dst)
UNIFORM_ADVICE = "branch on a wave-uniform value instead (T.rocm.wave_id(), threadIdx.x // 64, a kernel argument, blockIdx)"


def check_kernel(func, target) -> None:
    """Run every whole-kernel rule on ``func``: a TIRx function before TileDispatch or a lowered
    device function. ``target``: a ``Target``, its dict, or a target string."""
    target = _as_target(target)
    check_backend(func, target)
    for call in _owned_calls(func.body):
        check_target(_owned_name(call), target)
    for root in _workgroup_roots(func.body):
        extents = _thread_extents(root)
        check_workgroup_size(extents)
        threads = _product(extents)
        for call in _collectives(root):
            if _callee(call) == TILE_APPLY and _scope(call) == "workgroup" and threads is not None:
                check_wave_count(call.args[0].value, call.args[1].fields, threads)
    check_wave_uniform_control(func)
    check_lds_views(func)
    check_math_calls(func)


# ---- backend ----------------------------------------------------------------------------------

BACKEND_TARGETS = {"rocm": '{"kind": "rocm", "mcpu": "gfx950"} (emulate: target="gfx950")',
                   "cuda": '{"kind": "cuda", "arch": "sm_80"} (emulate: target="sm80")'}


CUDA_LAUNCH = "cuda.launch_fields"  # the device_entry attribute of a T.cuda.LaunchConfig


def kernel_backends(func) -> dict:
    """``{backend: what shows it}`` for the backends ``func`` is written for (``"cuda"``, ``"rocm"``)."""
    found = {}

    def call(node):
        name = _callee(node)
        backend = name.split(".")[1] if name.startswith(("tirx.cuda.", "tirx.rocm.")) else None
        if backend is None and _owned_name(node):
            backend, name = "rocm", _owned_name(node)
        if backend is not None:
            found.setdefault(backend, f"it calls {name}")

    def region(node):
        if node.op.name == "tirx.device_entry" and node.attrs is not None and node.attrs.get(CUDA_LAUNCH) is not None:
            found.setdefault("cuda", "its T.device_entry has a CUDA launch configuration (T.cuda.LaunchConfig)")

    tvm_ffi.structural_walk(func.body, [(ir.Call, call), (ir.RegionStmt, region)])
    return found


def check_backend(func, target) -> None:
    """Refuse ``func`` for a ``target`` of another kind than the backend it is written for."""
    target = _as_target(target)
    kind = target.kind.name
    for backend, evidence in kernel_backends(func).items():
        if backend != kind and kind in BACKEND_TARGETS:
            raise ContractError(
                f"the kernel is written for the {backend} backend ({evidence}), but the target is {kind}",
                expected=f"a {kind} kernel", found=f"a {backend} kernel",
                suggestion=f"compile it for {BACKEND_TARGETS[backend]}, or write it for {kind}",
                check="backend",
            )


# ---- workgroup size and wave count ------------------------------------------------------------

def check_workgroup_size(extents: dict) -> None:
    """At most 256 threads, a whole number of 64-lane waves (static extents only)."""
    size = _product(extents)
    if size is None:
        return
    if size > MAX_WORKGROUP:
        raise ContractError(
            f"workgroup of {size} threads: TIRx 0.1.0a4's AMDGPU codegen compiles every kernel with "
            f'"amdgpu-flat-work-group-size"="1,{MAX_WORKGROUP}" when no ROCm device is present, so '
            f"this kernel would be register-allocated for {MAX_WORKGROUP} threads and fail at launch",
            expected=f"at most {MAX_WORKGROUP} threads", found=f"{size}",
            suggestion=f"use at most {MAX_WORKGROUP} threads (4 waves) per workgroup",
            check="workgroup size",
        )
    if size % WAVE_SIZE:
        raise ContractError(
            f"workgroup of {size} threads is not a whole number of 64-lane waves: wave-collective "
            "instructions (MFMA, ds_read_tr) need all 64 lanes of every wave active",
            expected="a multiple of 64 threads", found=f"{size}", check="whole waves",
        )


def check_wave_count(opcode: str, operands, threads: int) -> None:
    """At workgroup scope every tensor operand's leading axis is the wave axis: one slice per wave.
    Register operands all laid out without the wave axis are laid out for scope='wave': said so."""
    from ..patterns.common import APPLY_AT, uses_wave_axis

    layouts = [o.source.ty.layout for o in operands if isinstance(o, ir.TensorRegion)
               and str(o.source.ty.scope) == "local" and o.source.ty.layout is not None]
    for_wave = bool(layouts) and not any(uses_wave_axis(layout) for layout in layouts)
    for operand in operands:
        if not isinstance(operand, ir.TensorRegion) or not len(operand.region):
            continue
        axis = _const(operand.region[0].extent)
        if axis is not None and axis * WAVE_SIZE != threads:
            raise ContractError(
                f"scope='workgroup' launches {threads} threads ({threads / WAVE_SIZE:g} waves), but the operand "
                f"has a wave axis of {axis}: wave w computes slice w, so fewer waves leave slices uncomputed "
                "and more waves access past the operands",
                opcode=opcode, operand=str(operand), expected=f"{axis * WAVE_SIZE} threads", found=f"{threads}",
                suggestion=f"launch {axis * WAVE_SIZE} threads (threadIdx.x extent) or give the operands a "
                           f"leading axis of {threads // WAVE_SIZE}" + (
                               "; its register operands are laid out for scope='wave' (no wave axis 'wave_id'): "
                               + APPLY_AT["wave"] if for_wave else ""),
                check="wave count",
            )


def _workgroup_roots(body) -> list:
    """The bodies of the device entries in ``body`` (a lowered device function: ``body`` itself)."""
    roots = []

    def visit(node):
        if node.op.name == "tirx.device_entry":
            roots.append(node.body)

    tvm_ffi.structural_walk(body, [(ir.RegionStmt, visit)])
    return roots or [body]


def _thread_extents(root) -> dict:
    """``{"x": 256, ...}``: the threadIdx launches under ``root`` (None for a symbolic extent)."""
    return launch_extents(root).block


def _const(expr) -> int | None:
    return int(expr.value) if isinstance(expr, ir.IntImm) else None


def _scalar_int(expr) -> bool:
    """Whether ``expr`` is a scalar signed or unsigned integer (not a bool, not a vector)."""
    return isinstance(expr.ty, ir.PrimType) and re.fullmatch(r"u?int\d+", str(expr.ty)) is not None


def _product(extents: dict) -> int | None:
    if not extents or any(v is None for v in extents.values()):
        return None
    size = 1
    for value in extents.values():
        size *= value
    return size


# ---- calls ------------------------------------------------------------------------------------

@functools.cache
def _intrinsic_name(intrinsic_id: int) -> str:
    """LLVM's name of an intrinsic id (fixed for the process: an FFI call each time otherwise)."""
    return get_intrinsic_name(intrinsic_id)


def _callee(call) -> str:
    """What a call stands for: the LLVM intrinsic, the extern symbol, or the op name."""
    op = call.op.name if isinstance(call.op, ir.Op) else str(call.op)
    if op in LLVM_INTRINSIC_OPS:
        first = call.args[0]
        return _intrinsic_name(int(first.value)) if isinstance(first, ir.IntImm) else first.value
    if op in EXTERN_OPS:
        return call.args[0].value
    return op


def _collective_name(call) -> str | None:
    """The instruction a wave-collective call issues (the opcode of a tile.apply), else None."""
    name = _callee(call)
    if name == TILE_APPLY:
        return call.args[0].value
    return name if name.startswith(COLLECTIVE_PREFIXES) else None


def _collectives(node) -> list:
    found = []
    tvm_ffi.structural_walk(node, [(ir.Call, lambda c: found.append(c) if _collective_name(c) else None)])
    return found


def _owned_name(call) -> str | None:
    """What a call of this package is (a wave-collective instruction or a ``tvm_cdna4_`` helper)."""
    name = _collective_name(call)
    return name if name is not None or not _callee(call).startswith(PREFIX) else _callee(call)


def _owned_calls(node) -> list:
    found = []
    tvm_ffi.structural_walk(node, [(ir.Call, lambda c: found.append(c) if _owned_name(c) else None)])
    return found


def uses_cdna4(func) -> bool:
    """Whether ``func`` calls anything of this package (then the rules apply to it)."""
    return bool(_owned_calls(func.body))


def _scope(call) -> str | None:
    scope = getattr(call.attrs, "scope", None) if call.attrs is not None else None
    return scope.local_name if scope is not None else None


def _storage_scope(call) -> str | None:
    """The storage scope of an ``alloc_tensor`` / ``decl_tensor`` call."""
    return str(call.ty_args[0].scope) if len(call.ty_args) else None


# ---- LDS views --------------------------------------------------------------------------------

def check_lds_views(func) -> None:
    """Refuse an access through a ``decl_tensor`` view of shared memory (``rearrange`` and
    ``decl_tensor`` on an LDS tensor): TIRx 0.1.0a4's ROCm codegen lowers the view to a global
    pointer (``addrspacecast`` from addrspace(3) to addrspace(1)), i.e. silently wrong loads."""
    views = {}

    def bind(node):
        value = node.value
        if isinstance(value, ir.Call) and _callee(value) == "tirx.decl_tensor" and _storage_scope(value) in SHARED_SCOPES:
            views[node.var] = value

    tvm_ffi.structural_walk(func.body, [(ir.Bind, bind)])
    accesses = []
    tvm_ffi.structural_walk(func.body, [(ir.TensorLoad, lambda n: accesses.append((n, n.source))),
                                        (ir.TensorStore, lambda n: accesses.append((n, n.dest)))])
    for node, tensor in accesses:
        if isinstance(tensor, Var) and tensor in views:
            raise ContractError(
                f"`{node}` accesses `{tensor}`, a view of shared memory (LDS); TIRx 0.1.0a4's rocm codegen "
                "lowers such a view to a global-memory pointer (addrspacecast from addrspace(3) to "
                "addrspace(1)), so the access would read the wrong memory",
                operand=str(tensor),
                suggestion="give the LDS allocation itself the layout you index with instead of a "
                           "rearrange()/decl_tensor() view",
                check="LDS view",
            )


# ---- wave-uniform control ---------------------------------------------------------------------

def check_wave_uniform_control(func) -> None:
    """Refuse a wave-collective instruction under lane-varying control, and a direct-to-LDS load
    whose LDS destination is lane-varying or misaligned (see the module docstring)."""
    lanes = _LaneDependence(func)
    violation = lanes.violation()
    if violation is not None:
        name, (where, why) = violation
        raise ContractError(
            f"a wave-collective instruction runs under `{where}`, which is lane-varying ({why}): "
            "all 64 lanes of a wave must execute it",
            opcode=name, suggestion=UNIFORM_ADVICE, check="wave-uniform control",
        )
    if lanes.dma_found is not None:
        raise lanes.dma_found


def _lds_destination_error(call, form, why: str, analyzer) -> ContractError | None:
    """The contract error of a direct-to-LDS load's destination ``address_of(S[i])``, if any:
    lane-varying index (``why``), or a byte offset never a multiple of 4 (1-D ``S``)."""
    opcode, dst = LDS_DMA_HELPERS[_callee(call)], call.args[LDS_DMA_DESTINATION]
    if why:
        return ContractError(
            f"the LDS destination `{dst}` is lane-varying ({why}); it is the wave's base address (M0), one value "
            "for all 64 lanes, and the hardware itself puts lane l's bytes at base + l * size",
            opcode=opcode, operand="lds_dst", expected="a wave-uniform LDS address", found=str(dst),
            suggestion="index the destination with wave-uniform values (T.rocm.wave_id(), threadIdx.x // 64, loop "
                       "variables); choose the lanes' global offsets so that the hardware's placement gives the "
                       "layout you want (tvm_cdna4.patterns.dma.lane_sources)",
            check="wave-uniform operand")
    load = dst.args[0]
    if form is None or len(load.indices) != 1:
        return None
    dtype = tvm_ffi.dtype(str(load.source.ty.dtype))
    m = analyzer.modular_set(form * (dtype.bits * dtype.lanes // 8))
    coeff, base = int(m.coeff), int(m.base)
    if coeff % 4 == 0 and base % 4:
        return ContractError(
            "the LDS destination of a direct-to-LDS load must be 4-byte aligned (the DMA writes whole dwords)",
            opcode=opcode, operand="lds_dst", expected="a byte offset that is a multiple of 4",
            found=f"`{dst}` at byte offset {base} + {coeff}k" if coeff else f"`{dst}` at byte offset {base}",
            check="LDS alignment")
    return None


_EARLY_EXIT = ("code after a break/continue/return", "only some lanes of the wave take that exit")


class _LaneDependence:
    """Lane dependence of every value of a function, to a fixed point over its storage.

    Persistent across passes: ``tainted`` (storage root -> why its contents are lane-varying) and
    ``varying_vars`` (variables bound under lane-varying control). Per pass: ``forms`` (variable ->
    its value over the lane and wave-uniform variables) and ``sources`` (opaque lane-varying
    placeholder -> what it stands for).

    A pass reads the persistent state at its loads (``tainted``) and bindings (``varying_vars``);
    another pass is needed only when a key that the pass found absent is added later in the same
    pass (``stale``): otherwise every read of the next pass would give the same answer, and the next
    pass would repeat this one exactly."""

    def __init__(self, func):
        self.func = func
        self.params = set(func.params)
        self.tainted: dict = {}
        self.varying_vars: dict = {}
        self.names = itertools.count()
        self.printed: dict = {}
        self.dma_found: ContractError | None = None  # first bad direct-to-LDS destination (last pass)

    def violation(self):
        """``(instruction, (control, why))`` of the first wave-collective call under lane-varying
        control, or None."""
        while True:
            self._start_pass()
            self._stmt(self.func.body, ())
            if not self.stale:
                return self.found

    def _start_pass(self):
        self.forms, self.sources, self.roots, self.threads, self.storage = {}, {}, {}, {}, set()
        self.found = self.dma_found = None
        self.absent, self.stale = set(), False  # keys of tainted / varying_vars read while absent
        self.constraints = ConstraintContext()
        self.analyzer = Analyzer()
        self.extents = _thread_extents(self.func.body)

    # -- values

    def _fresh(self, like, what: str | None):
        """A placeholder for an opaque value: lane-varying (``what`` says why) or wave-uniform."""
        var = Var(f"{'lane_varying' if what else 'uniform'}_{next(self.names)}", like.ty)
        if what:
            self.sources[var] = what
        return var

    def _add_range(self, var, extent: int):
        self.constraints.append(RangeConstraint(var, Range(0, extent)))
        self.analyzer.sync_constraint_context(self.constraints)

    def _launch_thread(self, var, axis: str):
        """threadIdx.x = 64 * wave + lane when its extent is whole waves; threadIdx.y/.z are then
        wave-uniform. Otherwise waves mix thread indices: opaque lane-varying values."""
        x = self.extents.get("x")
        whole_waves = x is not None and x % WAVE_SIZE == 0
        if axis == "x" and whole_waves:
            wave, lane = Var(f"{var.name}_wave", "int32"), Var(f"{var.name}_lane", "int32")
            self._add_range(wave, x // WAVE_SIZE)
            self._add_range(lane, WAVE_SIZE)
            self.sources[lane] = f"it depends on threadIdx.x `{var.name}`"
            form = wave * WAVE_SIZE + lane
        elif whole_waves:
            form = var
        else:
            form = self._fresh(var, f"it depends on threadIdx.{axis} `{var.name}` and threadIdx.x is not whole waves")
        self.forms[var] = self.threads[axis] = form

    def _form(self, expr):
        """``expr`` over the lane, wave-uniform variables and opaque placeholders."""
        return tvm_ffi.structural_map(expr, self._rewrite, order="pre")

    def _rewrite(self, node):
        if isinstance(node, Var):
            return self.forms.get(node, node)
        if isinstance(node, ir.TensorLoad):
            return self._load(node)
        if isinstance(node, ir.Call):
            return self._call(node)
        if isinstance(node, prim.Let):
            return _substitute(node.body, node.var, node.value)
        shifts = isinstance(node, prim.RShift | prim.LShift | prim.BitwiseAnd) and _scalar_int(node.a)
        shift = _const(node.b) if shifts else None  # a boolean `cond & True` is no floor-mod
        if isinstance(node, prim.RShift | prim.LShift) and shift is not None and shift >= node.a.ty.dtype.bits - 1:
            shift = None  # 2^shift is no int32 literal (a sign test, x >> 31): left as it is
        if shift is not None and shift >= 0:  # exact in two's complement: >> floors, & 2^n-1 is floormod
            if isinstance(node, prim.RShift):
                return prim.FloorDiv(node.a, ir.IntImm(node.a.ty, 1 << shift))
            if isinstance(node, prim.LShift):
                return prim.Mul(node.a, ir.IntImm(node.a.ty, 1 << shift))
            if shift & (shift + 1) == 0:
                return prim.FloorMod(node.a, ir.IntImm(node.a.ty, shift + 1))
        return node

    def _load(self, node):
        where = self._why(*node.indices)
        if where:
            return self._fresh(node, f"it reads `{self._printed(node.source)}` at a lane-varying index ({where})")
        why = self._tainted(self._root(node.source))
        if why:
            return self._fresh(node, f"it reads `{self._printed(node.source)}`, which holds lane-varying data ({why})")
        return node

    def _call(self, node):
        name = _callee(node)
        if name in UNIFORM_INTRINSICS:
            return self._fresh(node, None)
        if name.startswith("llvm.amdgcn.workitem.id."):
            axis = name[-1]
            return self.threads.get(axis) or self._fresh(node, f"it depends on {name}")
        if name in LANE_ID_INTRINSICS:
            return self._fresh(node, "it depends on the lane id (llvm.amdgcn.mbcnt)")
        if _collective_name(node):
            return self._fresh(node, f"it is the per-lane result of {_collective_name(node)}")
        if _callee_op(node) == "tirx.call_extern" and not name.startswith(PREFIX):
            return self._fresh(node, f"it is the result of the extern call {name}")
        return node

    def _known(self, condition) -> bool | None:
        """The value of a condition that simplifies to a constant (a dead branch), else None."""
        value = _const(self.analyzer.simplify(self._form(condition)))
        return None if value is None else bool(value)

    def _why(self, *exprs) -> str:
        """Why any of ``exprs`` is lane-varying ('' when all are wave-uniform)."""
        reasons = []
        for expr in exprs:
            form = self._form(expr)
            if isinstance(form.ty, ir.PrimType) and str(form.ty).startswith(("int", "uint", "bool")):
                form = self.analyzer.simplify(form)
            tvm_ffi.structural_walk(form, [(Var, lambda v: reasons.append(self.sources[v]) if v in self.sources else None)])
        return "; ".join(dict.fromkeys(reasons))

    # -- storage

    def _root(self, var):
        while var in self.roots:
            var = self.roots[var]
        return var

    def _bind_storage(self, var, call):
        """A view shares the storage of the tensors its pointer comes from (merged when several)."""
        self.storage.add(var)
        bases = []
        tvm_ffi.structural_walk(call.args, [(Var, lambda v: bases.append(self._root(v)) if self._is_storage(v) else None)])
        bases = list(dict.fromkeys(bases))
        if not bases:
            return
        first = bases[0]
        for other in bases[1:]:
            self.roots[other] = first
            if self._tainted(other):
                self._add(self.tainted, first, self.tainted[other])
        self.roots[var] = first

    def _printed(self, var) -> str:
        """``str(var)`` (TVMScript), once per variable."""
        text = self.printed.get(var)
        if text is None:
            text = self.printed[var] = str(var)
        return text

    def _read(self, table: dict, key):
        """``table[key]`` or None, remembering an absent key (see ``stale``)."""
        if key not in table:
            self.absent.add((id(table), key))
            return None
        return table[key]

    def _tainted(self, root):
        return self._read(self.tainted, root)

    def _add(self, table: dict, key, why: str):
        """``table.setdefault(key, why)``; a key read absent earlier in this pass makes it stale."""
        if key not in table:
            table[key] = why
            self.stale = self.stale or (id(table), key) in self.absent

    def _is_storage(self, var) -> bool:
        return var in self.params or var in self.roots or var in self.storage

    def _taint(self, tensor, why: str):
        vars_ = []
        tvm_ffi.structural_walk(tensor, [(Var, lambda v: vars_.append(v) if self._is_storage(v) else None)])
        for var in vars_:
            self._add(self.tainted, self._root(var), why)

    # -- statements

    def _stmt(self, node, control: tuple) -> str | None:
        """Walk ``node`` under ``control`` (the lane-varying conditions around it, innermost last).
        Returns "loop" / "return" when it may leave its loop / the function on some lanes only."""
        if isinstance(node, ir.SeqStmt):
            exit_kind = None
            for child in node.seq:
                kind = self._stmt(child, control if exit_kind is None else control + (_EARLY_EXIT,))
                exit_kind = exit_kind or kind
            return exit_kind
        if isinstance(node, ir.Bind):
            self._bind(node, control)
        elif isinstance(node, ir.TensorStore):
            self._collectives(node.value, control)
            why = self._why(node.value, *node.indices) or (control[-1][1] if control else "")
            if why:
                self._taint(node.dest, why)
        elif isinstance(node, ir.Evaluate):
            self._collectives(node.value, control)
            self._lds_destinations(node.value)
            if isinstance(node.value, ir.Call) and _callee(node.value) == TILE_APPLY:
                self._taint(node.value.args[1].fields[0], f"it is the per-lane result of {node.value.args[0].value}")
        elif isinstance(node, ir.If):
            known = self._known(node.condition)
            inner = self._branch(control, lambda: f"if {node.condition}:", node.condition)
            kinds = [self._stmt(node.then_case, inner)] if known is not False else []
            if node.else_case is not None and known is not True:
                kinds.append(self._stmt(node.else_case, inner))
            return _first_exit(kinds)
        elif isinstance(node, ir.While):
            return self._loop(node.body, self._branch(control, lambda: f"while {node.condition}:", node.condition))
        elif isinstance(node, ir.For):
            why = self._why(node.begin, node.end, node.step)
            self.forms[node.var] = self._fresh(node.var, why) if why else node.var
            where = f"for {node.var} in range({node.begin}, {node.end}):" if why else ""
            return self._loop(node.body, control + ((where, why),) if why else control)
        elif isinstance(node, ir.Break | ir.Continue):
            return "loop" if control else None
        elif isinstance(node, ir.Return):
            self._collectives(node.value, control)
            return "return" if control else None
        elif isinstance(node, ir.RegionStmt):
            return self._region(node, control)
        return None

    def _branch(self, control, where, condition):
        """``control`` and, when ``condition`` is lane-varying, ``(where(), why)`` (printed only then)."""
        self._collectives(condition, control)
        why = self._why(condition)
        return control + ((where(), why),) if why else control

    def _loop(self, body, control) -> str | None:
        kind = self._stmt(body, control)
        if kind == "loop":  # later iterations run on the lanes that did not leave
            kind = self._stmt(body, control + (_EARLY_EXIT,))
        return "return" if kind == "return" else None

    def _bind(self, node, control):
        value, var = node.value, node.var
        self._collectives(value, control)
        if isinstance(value, ir.Call) and _callee(value) in STORAGE_OPS:
            self._bind_storage(var, value)
            return
        if control:
            self._add(self.varying_vars, var, f"`{var}` is bound under `{control[-1][0]}`")
        if self._read(self.varying_vars, var) is not None:
            self.forms[var] = self._fresh(var, self.varying_vars[var])
        else:
            self.forms[var] = self._form(value)

    def _region(self, node, control):
        op = node.op.name
        if op == "tirx.device_entry":
            self.extents = _thread_extents(node.body)
        elif op == "tirx.launch_thread" and node.args[0].value.startswith("threadIdx."):
            self._launch_thread(node.body_params[0], node.args[0].value.split(".")[1])
        return self._stmt(node.body, control)

    def _lds_destinations(self, expr):
        calls = []
        tvm_ffi.structural_walk(expr, [(ir.Call, lambda c: calls.append(c) if _callee(c) in LDS_DMA_HELPERS else None)])
        for call in calls:
            dst = call.args[LDS_DMA_DESTINATION]
            if self.dma_found is not None or not isinstance(dst, ir.Call) or _callee(dst) != "tirx.address_of" \
                    or not isinstance(dst.args[0], ir.TensorLoad):
                continue
            indices = dst.args[0].indices
            form = self._form(indices[0]) if len(indices) == 1 else None
            self.dma_found = _lds_destination_error(call, form, self._why(*indices), self.analyzer)

    def _collectives(self, expr, control):
        if control and self.found is None:
            calls = _collectives(expr)
            if calls:
                self.found = (_collective_name(calls[0]), control[-1])


def _callee_op(call) -> str:
    return call.op.name if isinstance(call.op, ir.Op) else ""


def _first_exit(kinds) -> str | None:
    return "return" if "return" in kinds else ("loop" if "loop" in kinds else None)


def _substitute(expr, var, value):
    return tvm_ffi.structural_map(expr, (Var, lambda v: value if v.same_as(var) else v), order="post")
