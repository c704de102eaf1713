"""Hopper ``wgmma.mma_async`` (sm_90a) as a checked tile pattern.

``T.sm90.tile.apply(T.wgmma["m64n128k16.f32.bf16.bf16"], D, A, B, scope="warpgroup", **parameters)``

The instruction is the PTX spelling of the form (the ``wgmma.mma_async.sync.aligned.`` prefix may be
left out); the registered forms (``isa.wgmma_table``) are f16 / bf16 (K 16) and e4m3 / e5m2 (K 32,
A and B types may differ) with an f32 accumulator, N a multiple of 8 in [8, 256]. The form is A's
storage: a shared tile is the SS form (a matrix descriptor), a register tile the RS form.

Operands are ``(*repeat, *atom)`` regions (no group axes: each warpgroup runs its own instance):

====  ====================  ====================================================================
D     (M, N, 64, n)         ``local`` f32 accumulator: thread ``t`` of the warpgroup holds element
                            ``accumulator_coords(t, r)`` in register ``r`` (``isa.hopper_layout``)
A     (M, K, 64, k)         SS: a ``shared`` tile in a canonical layout; RS: ``local`` registers,
                            element ``a_fragment_coords(t, e, bits)`` in consecutive storage, 32-bit aligned
B     (N, K, n, k)          a ``shared`` tile in a canonical layout
====  ====================  ====================================================================

M, N, K are repeat axes (unrolled loops; each K repeat after the first accumulates, D = A*B + D).
A register layout names its threads with the warpgroup axes (``tid_in_wg``, or ``wid_in_wg`` and
``laneid``) and its registers with ``m``.

Shared operands: the layout declared on the tile must be one of the descriptor's canonical layouts
(PTX ISA "Shared Memory Matrix Layout"; ``isa.hopper_layout.canonical_offset``). Its swizzle is read
from the layout (a ``TileLayout``: none; ``ComposeLayout(per_element=log2(16 bytes / element),
swizzle_len=1/2/3, atom_len=3, tile)``: 32/64/128 B), LBO / SBO from the layout's strides, and every
element of the atom is proven to sit where the descriptor says, no two at one address. The tile's
data must be aligned to the swizzle period (8 rows of the swizzle width; 16 bytes without one)
and the atom's start 16-byte aligned. ``a_major`` / ``b_major`` (``"k"`` default, or ``"mn"``:
M/N-major, f16/bf16 only) say which canonical family the tile uses.

Parameters: ``scale_d`` (bool or a boolean expression, default True: D = A*B + D on the first K
repeat; False: D = A*B), ``scale_a`` / ``scale_b`` (1 or -1), ``a_major`` / ``b_major``, ``wait``
(None default, or 0..7), ``hoist`` (False default; True: each shared descriptor's low word is the tile's
loop-invariant base plus the atom's byte offset in 16-byte units, ``wgmma_shared.descriptor``: one add an
instruction in place of the add, shift, mask and or of the start field).

Lowering: a register fence on every D register (and every RS A register) by reference
(``patterns.wgmma_fence.fence_operand``, CUTLASS's ``warpgroup_fence_operand``: an empty ``asm
volatile`` with a ``"+f"``/``"+r"`` operand, no instruction), ``wgmma.fence`` before the first
instruction (registers written before it are visible to it), the instructions, ``wgmma.commit_group``
after them: one call is one wgmma group. The wait is the caller's: ``T.ptx["wgmma.wait_group.sync.aligned"](n)``
before D (or an RS A) is read or written again, then ``T.sm90.fence_operand(reg)`` on each D register
(so that the compiler moves no read of D above the wait); or ``wait=n`` here, which emits the wait
after the commit and the same fences on D (and RS A) after it. ``cuda.wgmma_check`` (run by
``cuda.build``) refuses a kernel that reads or writes D before the wait that retires it.

Errors are ``ContractError`` s naming the operand and the rule (``check``): ``target`` (sm_90a only),
``scope`` (``scope="warpgroup"``, 128-thread aligned warpgroups of a ``T.cuda.LaunchConfig`` launch), ``operands``, ``storage scope``,
``shape``, ``dtype``, ``owner map`` (D, RS A), ``registers`` (RS A not in consecutive aligned 32-bit
registers), ``swizzle`` / ``layout`` / ``alignment`` / ``major`` (shared operands), ``parameters``.
"""

from __future__ import annotations

from tvm_tirx.ir import Bind, Evaluate, IntImm, Range, SeqStmt, TensorRegion, Var
from tvm_tirx.runtime import MemoryScope
from tvm_tirx.script import tirx as T

from ..errors import ContractError
from ..isa import hopper_layout as L
from ..isa import wgmma_table as W
from ..tirx_private import CudaContext, CudaRegion
from .common import printed_call, unpacked
from .wgmma_fence import fence_operand, fenced

SCOPE = "warpgroup"
OPERANDS = ("D", "A", "B")
PARAMETERS = {"scale_d": True, "scale_a": 1, "scale_b": 1, "a_major": "k", "b_major": "k", "wait": None,
              "hoist": False}
TARGET_ARCH = "sm_90a"
FENCE = "wgmma.fence.sync.aligned"
COMMIT = "wgmma.commit_group.sync.aligned"
WAIT = "wgmma.wait_group.sync.aligned"


class Form(str):
    """An instruction of ``T.wgmma[...]``: its full PTX spelling (stored in IR as a string)."""

    @property
    def shape(self) -> W.WgmmaShape:
        return W.parse(self)


class WgmmaNamespace:
    """``T.wgmma["m64n64k16.f32.bf16.bf16"]`` (or the full ``wgmma.mma_async.sync.aligned...`` spelling)."""

    def __getitem__(self, name) -> Form:
        name = getattr(name, "value", name)
        try:
            return Form(W.parse(str(name)).ptx)
        except ValueError as err:
            raise KeyError(f"T.wgmma[{name!r}]: {err}") from None


def _error(form, rule, *, check, operand=None, expected=None, found=None, suggestion=None) -> ContractError:
    return ContractError(rule, opcode=str(form), operand=operand, expected=expected, found=found,
                         suggestion=suggestion, check=check)


def check_scope(form, scope) -> None:
    name = str(getattr(scope, "local_name", scope)).rsplit(".", 1)[-1]
    if name != SCOPE:
        raise _error(form, "wgmma is warpgroup-collective (128 aligned threads issue it together)",
                     expected="scope='warpgroup'", found=f"scope={name!r}", check="scope")


def check_target(form, target) -> None:
    kind, arch = target.kind.name, target.attrs.get("arch")
    if kind == "cuda" and str(arch) == TARGET_ARCH:
        return
    raise _error(form, "wgmma compiles only for the architecture-specific Hopper target", check="target",
                 expected=f"kind 'cuda', arch '{TARGET_ARCH}'", found=f"kind {kind!r}, arch {str(arch)!r}",
                 suggestion=f'Target({{"kind": "cuda", "arch": "{TARGET_ARCH}"}})')


class WarpgroupContext(CudaContext):
    """One wgmma application: no group axes, a symbolic warpgroup thread ``thread`` for the owner
    proofs, the runtime thread bound once; failed proofs are ``ContractError`` s."""

    def __init__(self, sctx, form):
        self.sctx, self.form = sctx, form
        from tvm_tirx.sym import Analyzer, ConstraintContext

        self.analyzer, self.constraints, self.static_ranges = Analyzer(), ConstraintContext(), {}
        for var, bound in sctx.var_range_map.items():
            self.add_range(var, Range.from_min_extent(bound.begin, bound.extent))
            low, ext = (self.analyzer.simplify(x) for x in (bound.begin, bound.extent))
            if isinstance(low, IntImm) and isinstance(ext, IntImm):
                self.static_ranges[var] = range(int(low), int(low) + int(ext))
        self.bindings, self.group, self.group_shape = [], [], []
        self.repeat = self.repeat_shape = None
        self.thread = Var("wg_thread", "int32")
        self.add_range(self.thread, Range(0, L.WARPGROUP_THREADS))
        self.owners = {"wid_in_wg": self.thread // L.WARP}
        self.runtime_thread = Var("thread_in_wg", "int32")
        self.bindings.append(Bind(self.runtime_thread, T.cast(T.cuda.thread_in_warpgroup(), ty="int32")))

    def index_coordinates(self, expr):
        return expr

    def check(self, condition, rule, *, check, operand, expected=None, found=None):
        try:
            super().require(condition, rule)
        except ValueError as err:  # TIRx's text: the rule, then ": cannot prove <residue>"
            raise ContractError(rule, opcode=self.form, operand=operand, expected=expected, found=found,
                                proof=str(err).removeprefix(rule).removeprefix(": "), check=check) from None

    def require(self, condition, message):  # TIRx's region checks ("B: region exceeds ..."): a ContractError
        operand, _, rule = message.partition(": ")  # the sentence names the operand once
        self.check(condition, rule or message, check="shape", operand=operand if rule else None)

    def at_runtime(self, expr):
        from .common import substitute

        return substitute(expr, self.thread, self.runtime_thread)


def _region(ctx, name, arg, atom, scopes, repeat_axes) -> CudaRegion:
    if not isinstance(arg, TensorRegion):
        raise _error(ctx.form, "must be a tensor region", operand=name, found=type(arg).__name__, check="operands")
    scope = arg.source.ty.scope
    if scope not in tuple(MemoryScope(s) for s in scopes):
        raise _error(ctx.form, "is in the wrong storage", operand=name, check="storage scope",
                     expected=f"storage scope {' or '.join(map(repr, scopes))}", found=f"a {scope} tensor")
    shape = tuple(int(r.extent) for r in arg.region)
    if len(shape) != len(atom) + 2 or shape[2:] != tuple(atom):
        raise _error(ctx.form, "the region must be two repeat axes and the instruction's atom", operand=name,
                     expected=f"(*repeat(2), {', '.join(map(str, atom))})", found=shape, check="shape")
    if arg.source.ty.layout is None:
        raise _error(ctx.form, "needs an explicit layout", operand=name, found="a tensor declared without layout=",
                     check="layout")
    try:
        return CudaRegion(ctx, name, arg, atom, scopes, repeat_axes, True)
    except ContractError:  # a region check's own (``require``): already names the operand and the residue
        raise
    except ValueError as err:
        raise _error(ctx.form, str(err).split(": ", 1)[-1], operand=name, check="shape") from None


def _dtype(ctx, region, allowed, what) -> None:
    found = str(region.dtype)
    if found not in allowed:
        raise _error(ctx.form, f"must hold {what}", operand=region.name, expected=" or ".join(allowed), found=found,
                     check="dtype")


def _owner(ctx, region, coord):
    """The storage slot of atom coordinate ``coord`` (of the proof thread), proving that the proof
    thread owns it."""
    try:
        return region.owner(coord, lane=ctx.thread % L.WARP)
    except ContractError as err:
        err.rule, err.check = f"the fragment does not follow the wgmma owner map ({err.rule})", "owner map"
        raise
    except ValueError as err:
        raise _error(ctx.form, f"the fragment does not follow the wgmma owner map: {err}", operand=region.name,
                     check="owner map") from None


def _params(form, params: dict) -> dict:
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise _error(form, f"unknown parameter(s) {unknown}", expected=f"parameters from {sorted(PARAMETERS)}",
                     check="parameters")
    values = {**PARAMETERS, **params}
    for name in ("scale_a", "scale_b", "wait"):
        v = values[name]
        values[name] = int(v.value) if isinstance(v, IntImm) else v
    for name in ("a_major", "b_major"):
        values[name] = str(getattr(values[name], "value", values[name]))
    values["hoist"] = getattr(values["hoist"], "value", values["hoist"])
    if not isinstance(values["hoist"], (bool, int)) or values["hoist"] not in (0, 1):
        raise _error(form, "hoist chooses how the descriptors are built, at compile time", expected="True or False",
                     found=values["hoist"], check="parameters")
    values["hoist"] = bool(values["hoist"])
    for name in ("scale_a", "scale_b"):
        if values[name] not in (1, -1):
            raise _error(form, f"{name} is an immediate of the instruction", expected="1 or -1", found=values[name],
                         check="parameters")
    if values["wait"] is not None and values["wait"] not in range(8):
        raise _error(form, "wait is wgmma.wait_group's group count", expected="None or 0..7", found=values["wait"],
                     check="parameters")
    return values


def _check_threads(form, sctx) -> None:
    """The launch is a ``LaunchConfig`` (TIRx resolves the pattern's ``T.cuda.thread_in_warpgroup()`` only
    there) of whole warpgroups: ``threadIdx.x`` a multiple of 128 (y, z one)."""
    extents = {k: v[1] for k, v in sctx.launch_params.items() if k.startswith("threadIdx.")}
    if not extents:
        raise _error(form, "wgmma reads its warpgroup thread (T.cuda.thread_in_warpgroup()), which TIRx resolves "
                     "only in a kernel launched through a LaunchConfig", check="scope",
                     expected="T.device_entry(launch=T.cuda.LaunchConfig(grid=..., block=...))",
                     found="a launch without a LaunchConfig (T.launch_thread)",
                     suggestion="launch with T.device_entry(launch=T.cuda.LaunchConfig(grid=G, block=128)) and take "
                                "the thread from T.cuda.thread_in_warpgroup() (docs/patterns.md, Hopper wgmma)")
    x = extents.get("threadIdx.x")
    others = [int(v) for k, v in extents.items() if k != "threadIdx.x" and isinstance(v, IntImm)]
    if isinstance(x, IntImm) and (int(x) % L.WARPGROUP_THREADS or any(o != 1 for o in others)):
        raise _error(form, "wgmma needs whole, aligned warpgroups of 128 threads", check="scope",
                     expected="a launch of threadIdx.x a multiple of 128",
                     found=f"threadIdx {', '.join(f'{k[-1]}={v}' for k, v in sorted(extents.items()))}")


def _ptx(name, *args):
    from tvm_tirx.backend.cuda.ptx import PTXNamespace

    return PTXNamespace()[name](*args)


def _accumulator(ctx, args, shape):
    d = _region(ctx, "D", args[0], (L.M, shape.n), ("local",), (0, 1))
    _dtype(ctx, d, (W.ACC_DTYPE,), f"the {W.ACC_DTYPE} accumulator")
    for r in range(shape.acc_registers):
        _owner(ctx, d, L.accumulator_coords(ctx.thread, r))
    return d


def _register_a(ctx, args, shape, kind):
    """RS A: the proof thread's elements in consecutive storage from a 32-bit boundary; the four
    32-bit registers (a uint32 view of the tile's storage) at the runtime thread."""
    a = _region(ctx, "A", args[1], (L.M, shape.k), ("local",), (0, 2))
    _dtype(ctx, a, kind.tir_dtypes, f"{shape.atype} elements")
    slots = [_owner(ctx, a, L.a_fragment_coords(ctx.thread, e, kind.bits)) for e in range(shape.a_elements)]
    p = kind.elems_per_register
    for e, slot in enumerate(slots):
        ctx.check(slot == slots[0] + e, "a thread's A elements must be consecutive registers, in the owner map's "
                  "order", check="registers", operand="A", expected=f"element {e} at slot base+{e}",
                  found=f"slot {ctx.analyzer.simplify(slot - slots[0])} from the base")
    ctx.check(slots[0] % p == 0, f"a thread's A fragment must start a 32-bit register ({p} elements each)",
              check="registers", operand="A", expected=f"a base slot multiple of {p}", found=str(slots[0]))
    span = int(a.layout.span("m"))
    words = Var("tile_A_words", T.Tensor((-(-span // p),), "uint32", scope="local", layout="default"))
    ctx.bindings.append(Bind(words, T.decl_tensor(a.tensor.data, ty_args=[words.ty])))
    base = ctx.at_runtime(slots[0]) // p
    return [words[base + j] for j in range(shape.a_elements // p)]


def _shared(ctx, name, arg, atom, repeat_axes, kind, major, hoist=False):
    from .wgmma_shared import descriptor

    smem = _region(ctx, name, arg, atom, ("shared", "shared.dyn"), repeat_axes)
    _dtype(ctx, smem, kind.tir_dtypes, f"{kind.atype} elements")
    if major not in L.MAJORS:
        raise _error(ctx.form, f"{name.lower()}_major names the tile's canonical layout family", operand=name,
                     expected="'k' or 'mn'", found=repr(major), check="major")
    if major == "mn" and not kind.transposable:
        raise _error(ctx.form, f"an M/N-major shared operand exists only for f16/bf16 (imm-trans); {kind.atype} "
                     "operands are K-major", operand=name, expected="a K-major tile (major='k')",
                     found="major='mn'", check="major")
    return descriptor(ctx, smem, major, atom, hoist)[0]


def lower(form: Form, args, params, sctx):
    shape = form.shape
    if len(args) != len(OPERANDS):
        raise _error(form, f"expects operands {', '.join(OPERANDS)}", found=len(args), check="operands")
    values = _params(form, params)
    _check_threads(form, sctx)
    ctx = WarpgroupContext(sctx, str(form))
    ctx.loops(tuple(int(r.extent) for r in args[0].region[:2]) + (int(args[1].region[1].extent),)
              if all(isinstance(a, TensorRegion) and len(a.region) >= 2 for a in args[:2]) else (1, 1, 1))
    d = _accumulator(ctx, args, shape)
    ka, kb = W.KIND[shape.atype], W.KIND[shape.btype]
    rs = isinstance(args[1], TensorRegion) and args[1].source.ty.scope == MemoryScope("local")
    if rs:
        if values["a_major"] != "k":
            raise _error(form, "a register A has no major order (the RS form takes no imm-trans-a)", operand="A",
                         expected="a_major='k' (the default)", found=f"a_major={values['a_major']!r}", check="major")
        a_operand = _register_a(ctx, args, shape, ka)
    else:
        a_operand = [_shared(ctx, "A", args[1], (L.M, shape.k), (0, 2), ka, values["a_major"], values["hoist"])]
    b_desc = _shared(ctx, "B", args[2], (shape.n, shape.k), (1, 2), kb, values["b_major"], values["hoist"])
    t = ctx.runtime_thread
    dregs = [d.value(L.accumulator_coords(t, r)) for r in range(shape.acc_registers)]
    scale_d = values["scale_d"]
    scale_d = T.bool(bool(scale_d)) if isinstance(scale_d, bool | int) else T.cast(scale_d, ty="bool")
    scale_d = T.Or(ctx.repeat[2] != 0, scale_d)
    trans = [] if ka.atype in W.FP8 else (
        ([] if rs else [int(values["a_major"] == "mn")]) + [int(values["b_major"] == "mn")])
    imms = [values["scale_a"], values["scale_b"]]
    mma = _ptx(str(form), *dregs, *a_operand, b_desc, scale_d, *imms, *trans)
    bindings, ctx.bindings = ctx.bindings, []
    issue = ctx.finish([mma])

    def fences():  # D over the M, N repeats; an RS A over the M, K repeats
        return [fenced(ctx, (0, 1), dregs), *([fenced(ctx, (0, 2), a_operand)] if rs else [])]
    body = [*bindings, *fences(), Evaluate(_ptx(FENCE)), issue, Evaluate(_ptx(COMMIT))]
    if values["wait"] is not None:
        body += [Evaluate(_ptx(WAIT, values["wait"])), *fences()]
    return SeqStmt(body)


def _lower(view, sctx):
    form, args, params = unpacked(view)
    form = Form(form)
    try:
        check_target(form, sctx.target)
        return lower(form, args, params, sctx)
    except ContractError as err:
        err.location = str(view.call)
        raise


OP_NAME = "tirx.cuda.sm90.tile.apply"
_REGISTERED: dict = {}


def register() -> dict:
    """Register ``tirx.cuda.sm90.tile.apply`` and the ``T.sm90`` / ``T.wgmma`` script namespaces (idempotent)."""
    if _REGISTERED:
        return _REGISTERED
    from types import SimpleNamespace

    # T.cuda's module makes a script function of every tirx.cuda.* op it finds when first imported, and refuses
    # one under a namespace it lacks (sm90): import it before tirx.cuda.sm90.tile.apply exists
    import tvm_tirx.backend.cuda.script as cuda_script
    from tvm_tirx.ir import StringImm
    from tvm_tirx.script.ir_builder.base import auto_emit_void_call
    from tvm_tirx.tirx.script.ir_builder import op as builder_op
    from tvm_tirx.tirx.tile.instruction import Instruction, Operand

    from .. import tirx_private
    from ..errors import unwrapped_dispatch

    construct = Instruction(OP_NAME, "wgmma_pattern",
                            (Operand("instruction"), Operand("operands"), Operand("parameters", default=None)),
                            (SCOPE,), lower=_lower).register()
    tirx_private.wrap_tile_dispatch(OP_NAME, unwrapped_dispatch)
    wgmma = WgmmaNamespace()

    def apply(instruction, *operands, scope=SCOPE, **parameters):
        if isinstance(instruction, StringImm):
            instruction = instruction.value
        operands, parameters = printed_call(operands, parameters)  # printed IR parses back
        form = wgmma[instruction]
        check_scope(form, scope)
        if len(operands) != len(OPERANDS):
            raise _error(form, f"expects operands {', '.join(OPERANDS)}", found=len(operands), check="operands")
        ctor = {k: parameters.pop(k) for k in ("attrs", "ty", "ty_args", "loc") if k in parameters}
        packed = tuple((k, v) for k, v in sorted(parameters.items()))
        return construct(form, operands, packed, scope=scope, **ctor)

    apply.__doc__ = __doc__
    sm90 = SimpleNamespace(tile=SimpleNamespace(apply=auto_emit_void_call(apply)), fence_operand=fence_operand)
    builder_op.register_script_namespace("sm90", sm90)
    # the printer spells the op by its name, tirx.cuda.sm90.tile.apply: T.cuda.sm90.tile.apply, so printed IR
    # parses back (T.cuda is TIRx's public CUDA script namespace, a module; nothing of it is replaced)
    cuda_script.sm90 = sm90
    builder_op.register_script_namespace("wgmma", wgmma)
    _REGISTERED.update(sm90=sm90, wgmma=wgmma)
    return _REGISTERED


# A program whose first import is this module: TIRx's backend autoload registered the package while this
# module was half-made (``patterns.register_patterns`` left its part for here)
_PENDING = globals().pop("REGISTER_WHEN_WHOLE", None)
if _PENDING is not None:
    _PENDING.update(register())
