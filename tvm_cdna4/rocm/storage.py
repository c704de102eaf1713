"""bf16 / fp8 tensors as users write them: 16/8-bit storage and bit moves, before TIRx legalizes them.

TIRx's BF16/FP8 legalization (``BF16ComputeLegalize`` ... ``BF16StorageLegalize``) widens every
``bfloat16`` / ``float8_e4m3fn`` / ``float8_e5m2`` allocation on ROCm to one float32 per element,
while views of it (the ``decl_tensor`` of a fragment, the bits an instruction reads) stay 16/8-bit:
packed bits and widened values disagree. For a function that calls this package, ``keep_bits`` runs
after TIRx's preparation (TileDispatch ... LowerThreadAllreduce) and before that legalization:

- every ``local``/``shared`` tensor of those dtypes (allocation or view) becomes a tensor of its
  integer bit storage (``isa.formats.BIT_STORAGE``: int16, uint8), same shape, layout and alignment;
- a load from it yields the integer bits, re-read as the original dtype (``T.reinterpret``) where a
  value is computed from it; a store into it stores the bits of the value (a computed bf16 value
  rounded to nearest even, as TIRx rounds a store into a bfloat16 tensor);
- computing with float8 values (a conversion or arithmetic) is refused (``_check_fp8_values``);
- a store whose value is an element loaded from another tensor (TIRx's implicit store conversion
  included) copies the bits when the two element dtypes have the same width and one of them is
  bf16/fp8 (a ``bfloat16`` global into an ``int16`` LDS tile, an ``int16`` tile into a ``bfloat16``
  global), instead of converting the value.

Global tensors keep their dtype (the kernel's signature, ``ml_dtypes`` arrays in and out): TIRx
stores them as 16/8-bit data. ``install()`` puts the pass into the ``"tirx"`` and ``"default"``
pipelines (``tvm_tirx.tirx.compile``, ``tvm_cdna4.build`` and the emulator all lower through one of
them); a module that calls nothing of this package is lowered by the original pipeline untouched,
except that every module's call types are first made the building thread's (``this_thread_types``:
a kernel made on one thread builds on any other).
"""

from __future__ import annotations

import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.ir import Bind, Call, TensorLoad, TensorStore, Var
from tvm_tirx.ir import prim as P
from tvm_tirx.ir.prim import Cast
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.tensor import TensorType

from ..errors import ContractError
from ..isa.formats import BIT_STORAGE
from ..patterns.common import keep_bit_storage

STORAGE_OPS = ("tirx.alloc_tensor", "tirx.decl_tensor")
PIPELINES = ("tirx", "default")
ARITHMETIC = (P.Add, P.Sub, P.Mul, P.Div, P.Mod, P.FloorDiv, P.FloorMod, P.Min, P.Max, P.EQ, P.NE, P.LT, P.LE,
              P.GT, P.GE)
_installed = False


def _dtype(expr) -> tvm_ffi.dtype:
    return tvm_ffi.dtype(str(expr.ty.dtype))


def _with_elem(dtype: tvm_ffi.dtype, elem: str) -> str:
    return elem if dtype.lanes == 1 else f"{elem}x{dtype.lanes}"


def _elem(dtype) -> str:
    return str(dtype).partition("x")[0]


def _op(call) -> str:
    return call.op.name if isinstance(call.op, ir.Op) else ""


def _narrow_tensor(node) -> bool:
    """A ``Bind`` of a local/shared bf16/fp8 tensor (allocation or view)."""
    value = node.value
    return (isinstance(value, Call) and _op(value) in STORAGE_OPS and len(value.ty_args) == 1
            and str(value.ty_args[0].dtype) in BIT_STORAGE and str(value.ty_args[0].scope) != "global")


def _retyped(var) -> Var:
    ty = var.ty
    bits = TensorType(ty.shape, BIT_STORAGE[str(ty.dtype)], ty.scope, data_alignment=int(ty.data_alignment),
                      layout=ty.layout)
    return Var(var.name, bits)


def _bf16_bits(value, bits: str):
    """The bf16 bit pattern (as ``bits``) of a computed bf16 ``value``: its float32 value rounded to
    nearest even, the rounding TIRx's BF16 legalization applies to a store into a bfloat16 tensor."""
    dtype = _dtype(value)
    wide = value.value if isinstance(value, Cast) and _elem(value.value.ty.dtype) == "float32" else (
        T.Cast(_with_elem(dtype, "float32"), value))
    const = (lambda x: T.uint32(x)) if dtype.lanes == 1 else (lambda x: T.broadcast(T.uint32(x), dtype.lanes))
    u = T.reinterpret(wide, ty=_with_elem(dtype, "uint32"))
    rounded = (u + ((u >> const(16)) & const(1)) + const(0x7FFF)) >> const(16)
    return T.Cast(_with_elem(dtype, bits), rounded)


def _reinterpret(value, elem: str, dtype: str | None = None):
    """``value`` (a bit pattern or a value) re-read as ``elem`` of the same width, lanes kept (or as
    the full ``dtype``)."""
    dtype = dtype or _with_elem(_dtype(value), elem)
    if str(value.ty.dtype) == dtype:
        return value
    if isinstance(value, Call) and _op(value) == "tirx.reinterpret":  # bits of bits: one reinterpret
        return _reinterpret(value.args[0], elem, dtype)
    return T.reinterpret(value, ty=dtype)


class _Rewrite:
    """One function's rewrite (module docstring): ``old`` tensor vars -> their bit-storage vars."""

    def __init__(self, body):
        self.new: dict = {}
        self.dtype_of: dict = {}  # bit-storage var -> the dtype written
        tvm_ffi.structural_walk(body, [(Bind, self._collect)])

    def _collect(self, node):
        if _narrow_tensor(node) and node.var not in self.new:
            self.new[node.var] = _retyped(node.var)
            self.dtype_of[self.new[node.var]] = str(node.var.ty.dtype)

    def __call__(self, body):
        # (tvm_ffi.structural_map keeps a variable at its definition: each node that names a
        # retyped tensor is rebuilt with the new variable instead)
        return tvm_ffi.structural_map(body, [(Bind, self._bind), (TensorLoad, self._load), (Call, self._call),
                                             (TensorStore, self._store)], order="post")

    def _bind(self, node):
        var = self.new.get(node.var)
        if var is None:
            return node
        value = node.value
        return Bind(var, Call(value.op, list(value.args), value.attrs, ty_args=[var.ty]))

    def _load(self, node):
        source = self.new.get(node.source)
        if source is None:
            return node
        return _reinterpret(TensorLoad(source, list(node.indices)), self.dtype_of[source])

    def _call(self, call):
        op = _op(call)
        if op == "tirx.address_of" and self._bits_load(call.args[0]) is not None:
            return T.address_of(self._bits_load(call.args[0]))
        if op == "tirx.tensor_data_ptr" and call.args[0] in self.new:
            return self.new[call.args[0]].data
        if op == "tirx.reinterpret" and isinstance(call.args[0], Call) and _op(call.args[0]) == op:
            return _reinterpret(call.args[0], "", str(call.ty.dtype))
        return call

    def _bits_load(self, expr):
        """The bit-storage load inside ``expr`` when ``expr`` is one (re-read by ``_load``), else None."""
        if isinstance(expr, Call) and _op(expr) == "tirx.reinterpret":
            expr = expr.args[0]
        return expr if isinstance(expr, TensorLoad) and expr.source in self.dtype_of else None

    def _store(self, node):
        dest, value = self.new.get(node.dest, node.dest), node.value
        copied = self._copied(value)
        if dest in self.dtype_of:  # bit storage: the bits of the value (or of the copied element)
            bits = _elem(BIT_STORAGE[self.dtype_of[dest]])
            if copied is None and self._computed(value):
                value = _bf16_bits(value, bits)
            value = _reinterpret(copied if copied is not None else value, bits)
        elif copied is not None:
            value = _reinterpret(copied, _elem(dest.ty.dtype))
        else:
            return node
        return TensorStore(dest, list(node.indices), value)

    def _computed(self, value) -> bool:
        """A bf16 value computed in the kernel (not bits re-read from storage): TIRx's BF16 legalization
        rounds it only where it is stored into a bfloat16 tensor, not under a reinterpret."""
        return _elem(value.ty.dtype) == "bfloat16" and not (
            isinstance(value, Call) and _op(value) == "tirx.reinterpret") and not isinstance(value, TensorLoad)

    def _copied(self, value):
        """The element a store copies (bit move) when ``value`` converts a loaded element to a dtype
        of the same width and one of the two is bf16/fp8; else None."""
        if not isinstance(value, Cast):
            return None
        inner = value.value
        if not (isinstance(inner, TensorLoad) or self._bits_load(inner) is not None):
            return None
        src, dst = _dtype(inner), _dtype(value)
        widened = {_elem(src), _elem(dst)} & set(BIT_STORAGE)
        return inner if widened and src.bits == dst.bits and src.lanes == dst.lanes else None


def _line(stmt) -> str:
    """A statement as one line of TVMScript (without the declarations the printer puts first)."""
    return str(stmt).strip().splitlines()[-1].strip()


def _fp8_use(node) -> tuple[str, str] | None:
    """(the float8 dtype, what ``node`` does with it) when ``node`` computes with float8 values."""
    if isinstance(node, Cast):
        dtypes = (_elem(node.value.ty.dtype), _elem(node.ty.dtype))
        fp8 = [d for d in dtypes if d.startswith("float8")]
        return (fp8[0], f"a conversion {dtypes[0]} -> {dtypes[1]}") if fp8 else None
    dtype = _elem(node.a.ty.dtype)
    return (dtype, f"{type(node).__name__} of {dtype} values") if dtype.startswith("float8") else None


def _check_fp8_values(body, rewrite: _Rewrite) -> None:
    """Refuse a float8 value converted to or from another dtype, or computed with (anything but a
    bit move): TIRx's FP8 legalization on ROCm decodes every code as a normal number (0 reads as
    2**-6, NaN as 960)."""
    nodes = []
    tvm_ffi.structural_walk(body, [((Cast, *ARITHMETIC), nodes.append)])
    if not any(_fp8_use(node) for node in nodes):  # no float8 value anywhere: nothing to refuse (nearly every kernel)
        return
    statements = []
    tvm_ffi.structural_walk(body, [(TensorStore, statements.append), (Bind, statements.append)])
    for stmt in statements:
        value = stmt.value
        if isinstance(stmt, TensorStore) and rewrite._copied(value) is not None:
            value = value.value  # the bit move itself
        nodes = []
        tvm_ffi.structural_walk(value, [((Cast, *ARITHMETIC), nodes.append)])
        for node in nodes:
            use = _fp8_use(node)
            if use is None:
                continue
            loads = []
            tvm_ffi.structural_walk(node, [(TensorLoad, loads.append)])
            raise ContractError(
                f"`{_line(stmt)}` computes with {use[0]} values ({use[1]}); TIRx's FP8 legalization on ROCm "
                "decodes every code as a normal number (0 reads as 2**-6), so only bit moves of float8 "
                "elements are supported", operand=str(loads[0].source) if loads else None,
                expected="float8 elements only copied (stores of loaded elements) and read by the instructions",
                found=use[1], check="bf16/fp8 storage",
                suggestion="convert on the host, or compute from the MFMA's float32 accumulators")


def keep_bits(func):
    """``func`` with its local/shared bf16/fp8 tensors as bit storage and its copies as bit moves;
    a ``ContractError`` for computing with float8 values (``_check_fp8_values``)."""
    rewrite = _Rewrite(func.body)
    _check_fp8_values(func.body, rewrite)
    stores = []
    tvm_ffi.structural_walk(func.body, [(TensorStore, stores.append)])
    if not rewrite.new and not any(rewrite._copied(s.value) is not None for s in stores):
        return func
    return func.with_body(rewrite(func.body))


def _uses_cdna4(mod) -> bool:
    from .analysis import uses_cdna4

    return any(hasattr(f, "body") and uses_cdna4(f) for f in mod.functions.values())


def _pass(mod):
    updates = {gv: keep_bits(f) for gv, f in mod.functions.items() if hasattr(f, "body")}
    for gv, func in updates.items():
        if not func.same_as(mod[gv]):
            mod = ir.IRModule({**{g: f for g, f in mod.functions.items()}, gv: func}, attrs=mod.attrs,
                              global_infos=mod.global_infos)
    return mod


def this_thread_types(mod):
    """``mod`` with every call's ``PrimType`` the one of this thread (``mod`` itself when they all are).

    TIRx interns ``PrimType`` per thread, and its tile-op validator compares a call's type by identity
    (``call->ty == PrimType::Void()``): a ``T.rocm.tile.apply`` / ``T.cuda.tile.apply`` made on one
    thread would fail TileDispatch on any other (``... must return void``)."""
    def retyped(call):
        ty = call.ty
        if not isinstance(ty, ir.PrimType):
            return call
        mine = ir.PrimType(str(ty.dtype))
        return call if mine.same_as(ty) else Call(call.op, list(call.args), call.attrs, ty_args=list(call.ty_args),
                                                  loc=call.loc, ty=mine)

    functions = {gv: f.with_body(tvm_ffi.structural_map(f.body, [(Call, retyped)], order="post"))
                 if hasattr(f, "body") else f for gv, f in mod.functions.items()}
    if all(not hasattr(f, "body") or f.body.same_as(mod[gv].body) for gv, f in functions.items()):
        return mod
    return ir.IRModule(functions, attrs=mod.attrs, global_infos=mod.global_infos)


def _with_bits(factory):
    """``factory``'s stages, its lowering split around ``keep_bits`` for modules of this package, every
    module's call types first made this thread's (``this_thread_types``)."""
    from tvm_tirx.tirx.compilation_pipeline import finalize_tir_pipeline, tirx_pipeline

    def stages(*, target=None, prepare_only=False, **kwargs):
        lowering, host, device = factory(target=target, **({"prepare_only": prepare_only} if prepare_only else {}),
                                         **kwargs)
        if prepare_only:
            return lowering, host, device
        prepare = tirx_pipeline(prepare_only=True, target=target)[0]

        @ir.transform.module_pass(opt_level=0, name="tvm_cdna4.KeepBits")
        def lower(mod, _ctx):
            mod = this_thread_types(mod)
            if (target is not None and target.kind.name != "rocm") or not _uses_cdna4(mod):
                return lowering(mod)
            with keep_bit_storage():
                prepared = prepare(mod)
            return finalize_tir_pipeline()(_pass(prepared))

        return lower, host, device

    stages.wraps = factory
    return stages


def install() -> None:
    """Put ``keep_bits`` into the ``"tirx"`` and ``"default"`` pipelines (idempotent)."""
    global _installed
    if _installed:
        return
    from tvm_tirx.tirx import compilation_pipeline as pipelines

    for name in PIPELINES:
        pipelines.register_tir_pipeline(name, _with_bits(pipelines.PIPELINE_MAP[name]))
    _installed = True
