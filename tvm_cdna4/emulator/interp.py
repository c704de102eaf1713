"""A vectorized interpreter for device TIR (the function TIRx hands to codegen).

The TIR is compiled once into nested Python closures; each closure runs *all* emulated threads at
once on numpy arrays. A scalar value is an int/numpy scalar (uniform) or a ``(T,)`` array; a
vector value has a trailing lanes axis. Control flow carries an active-thread mask (``None`` = all):
``if`` runs each branch under its mask, loops whose bounds differ between threads run to the
largest bound with the shorter threads masked off, and ``if_then_else`` evaluates each side only
for its threads (so guarded out-of-bounds loads stay unchecked, as on hardware).
"""

from __future__ import annotations

import numpy as np
import tvm_ffi
from tvm_tirx import ir as I
from tvm_tirx.ir import prim as P

from ..isa.formats import FORMATS
from .errors import EmulationError, EmulationUnsupported
from .memory import Buffer, Pointer, TensorView, load, store

_SIMPLIFY = None
LAUNCH_INDEX_CALLS = frozenset(f"tirx.cuda.{name}" for name in (
    "linear_thread_id", "thread_in_warpgroup", "warp_in_warpgroup", "warpgroup_id"))
"""TIRx's thread-index calls that only a ``T.cuda.LaunchConfig`` launch resolves (a ``T.launch_thread`` kernel
reaches codegen, and the emulator, with them unresolved)."""


def static_extent(x, name: str) -> int:
    """A tensor extent as an int. A pattern applied inside a loop that unrolls after lowering
    (the CUDA GEMM's mma and ldmatrix loops) declares regions like ``(j + 1) - j``: constant once
    simplified."""
    global _SIMPLIFY
    if isinstance(x, int) or hasattr(x, "value"):
        return int(x)
    if _SIMPLIFY is None:
        from tvm_tirx.sym import Analyzer

        _SIMPLIFY = Analyzer().simplify
    folded = _SIMPLIFY(x)
    if not hasattr(folded, "value"):
        raise NotImplementedError(f"emulator: tensor {name} has a runtime extent {x}")
    return int(folded.value)


def view_shape(extents, name: str) -> tuple[int, ...]:
    """The shape of a global tensor view. A view's shape gives only its strides (the buffer checks the
    bounds of every access itself), so a run-time leading extent (a dynamic-M kernel's ``M`` rows,
    or the flat ``M * K`` view of A) is taken as 1; a run-time inner extent is not supported."""
    head, *rest = extents
    try:
        first = static_extent(head, name)
    except NotImplementedError:
        first = 1
    return (first, *(static_extent(x, name) for x in rest))


def evaluate(expr, values: dict[str, int]) -> int:
    """A uniform integer expression of named scalar variables (a launch extent or a tensor extent of
    a dynamic-M kernel, whose ``M`` is bound from the arguments' shapes): ``values`` maps names to ints."""
    if isinstance(expr, int) or hasattr(expr, "value"):
        return int(expr)
    found, local = [], set()
    tvm_ffi.structural_walk(expr, [(I.Var, found.append), (P.Let, lambda let: local.add(let.var.name))])
    compiler = Compiler(None, {})
    env_values = {}
    for var in found:
        if var.name in local:
            continue
        if var.name not in values:
            raise ValueError(f"emulate: the extent {expr} needs a value for {var.name}")
        env_values[compiler.slot(var)] = values[var.name]
    run = compiler.expr(expr)
    env = Env(len(compiler.slots))
    for slot, value in env_values.items():
        env.values[slot] = np.int64(value)
    return int(run(env, None))

# TIR dtype -> numpy: the integers, and every matrix element format's own dtype (isa.formats:
# float16/32/64, bfloat16 and float8_* as ml_dtypes)
_NP = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    **{f.tir_dtype: f.dtype for f in FORMATS.values() if f.tir_dtype},
}


def np_dtype(dtype) -> tuple[np.dtype, int]:
    """(numpy element dtype, lanes) of a TIR dtype."""
    d = tvm_ffi.dtype(str(dtype))
    base = str(d).split("x")[0] if d.lanes > 1 else str(d)
    if base not in _NP:
        raise NotImplementedError(f"emulator: dtype {d} is not supported")
    return np.dtype(_NP[base]), int(d.lanes)


class where_of:  # noqa: N801 (used like the function it replaces)
    """Where in the kernel: ``node`` as one line of TVMScript (at most 160 characters). Printing a
    node costs more than emulating it, and only an error shows it, so the text is made on first use."""

    __slots__ = ("_node", "_text")

    def __init__(self, node):
        self._node, self._text = node, None

    def __str__(self) -> str:
        if self._text is None:
            text = " ".join(str(self._node).split())
            self._text = text if len(text) < 160 else text[:157] + "..."
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _mand(mask, cond):
    cond = np.asarray(cond, bool)
    if cond.ndim == 0:
        return mask if bool(cond) else False
    return cond if mask is None else (mask & cond)


def _any(mask):
    return mask is None or (mask is not False and bool(np.any(mask)))


def _cast(value, dtype: np.dtype):
    arr = np.asarray(value)
    if dtype.kind in "iu" and arr.dtype.kind == "f":
        arr = np.trunc(arr)
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(dtype)


def _tdiv(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        q = np.abs(a) // np.maximum(np.abs(b), 1)
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))
    return a / b


def _tmod(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu":
        return (a - _tdiv(a, b) * b).astype(np.result_type(a, b))
    return np.fmod(a, b)


_BINARY = {
    P.Add: np.add, P.Sub: np.subtract, P.Mul: np.multiply, P.Div: _tdiv, P.Mod: _tmod,
    P.FloorDiv: lambda a, b: np.floor_divide(a, b) if np.asarray(a).dtype.kind in "iu" else np.floor(np.divide(a, b)),
    P.FloorMod: lambda a, b: np.mod(a, b),
    P.Min: np.minimum, P.Max: np.maximum,
    P.EQ: np.equal, P.NE: np.not_equal, P.LT: np.less, P.LE: np.less_equal, P.GT: np.greater, P.GE: np.greater_equal,
    P.And: np.logical_and, P.Or: np.logical_or,
    P.BitwiseAnd: np.bitwise_and, P.BitwiseOr: np.bitwise_or, P.BitwiseXor: np.bitwise_xor,
    P.LShift: np.left_shift, P.RShift: np.right_shift,
}


class Env:
    """Variable slots of one run (closures index it by slot number)."""

    __slots__ = ("values",)

    def __init__(self, n: int):
        self.values = [None] * n

    def copy(self) -> Env:
        """Another run's slots, bound as these are now (a warpgroup's task: ``emulator.tasks``)."""
        out = Env(0)
        out.values = list(self.values)
        return out


class Compiler:
    def __init__(self, machine, calls):
        self.machine = machine
        self.calls = calls  # op/extern/intrinsic name -> handler factory
        self.slots: dict[int, int] = {}
        self.allocs: dict[int, TensorView] = {}
        self.tasks = False  # run warp-specialized if/else branches as tasks (emulator.tasks)

    # -- variables -----------------------------------------------------------------------------
    def slot(self, var) -> int:
        key = hash(var)
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    def bound(self, var) -> bool:
        return hash(var) in self.slots

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, node):
        method = getattr(self, "s_" + type(node).__name__, None)
        if method is None:
            raise NotImplementedError(f"emulator: statement {type(node).__name__} is not supported: {where_of(node)}")
        return method(node)

    def s_SeqStmt(self, node):
        parts = [self.stmt(s) for s in node.seq]

        def run(env, mask):
            for part in parts:
                part(env, mask)
        return run

    def s_Bind(self, node):
        value = node.value
        slot = self.slot(node.var)
        if isinstance(value, I.Call) and value.op.name in ("tirx.alloc_tensor", "tirx.decl_tensor"):
            make = self.tensor_binding(node.var, value)

            def run(env, mask):
                env.values[slot] = make(env, mask)
            return run
        ev = self.expr(value)

        def run(env, mask):
            env.values[slot] = ev(env, mask)
        return run

    def tensor_binding(self, var, call):
        ty = var.ty
        dtype, lanes = np_dtype(ty.dtype.dtype)
        scope = str(ty.scope) if ty.scope is not None else "global"
        name = var.name
        if call.op.name == "tirx.decl_tensor" and scope == "global":  # a dynamic-M kernel's views of A, C, ...
            shape = view_shape(ty.shape, name)
        else:
            shape = tuple(static_extent(x, var.name) for x in ty.shape)
        if call.op.name == "tirx.alloc_tensor":
            nbytes = int(np.prod(shape)) * dtype.itemsize * lanes
            key = hash(var)

            def make(env, mask):
                view = self.allocs.get(key)
                if view is None:
                    buf = self.machine.allocate(name, scope, nbytes)
                    view = self.allocs[key] = TensorView(buf, 0, dtype, shape)
                return view
            return make
        ptr = self.expr(call.args[0])

        def make(env, mask):
            p = ptr(env, mask)
            if isinstance(p, TensorView):
                p = Pointer(p.buffer, p.offset)
            if not isinstance(p, Pointer):
                raise EmulationError(f"decl_tensor of {name} over a non-pointer", where_of(call))
            return TensorView(p.buffer, p.offset, dtype, shape)
        return make

    def s_RegionStmt(self, node):
        if node.op.name != "tirx.launch_thread":
            raise NotImplementedError(f"emulator: region {node.op.name} is not supported")
        tag = node.args[0].value
        slots = [self.slot(v) for v in node.body_params]
        body = self.stmt(node.body)
        machine = self.machine

        def run(env, mask):
            for s in slots:
                env.values[s] = machine.thread_index(tag)
            body(env, mask)
        return run

    def s_For(self, node):
        slot = self.slot(node.var)
        begin, end, step = self.expr(node.begin), self.expr(node.end), self.expr(node.step)
        body = self.stmt(node.body)

        def run(env, mask):
            b, e, s = begin(env, mask), end(env, mask), step(env, mask)
            if np.ndim(b) == 0 and np.ndim(e) == 0 and np.ndim(s) == 0:
                for i in range(int(b), int(e), int(s)):
                    env.values[slot] = np.int32(i)
                    body(env, mask)
                return
            b, e = np.broadcast_to(b, (self.machine.nthreads,)), np.broadcast_to(e, (self.machine.nthreads,))
            live = mask if mask is not None else np.ones(self.machine.nthreads, bool)
            i = b.astype(np.int32).copy()
            while True:
                m = live & (i < e)
                if not m.any():
                    return
                env.values[slot] = i.copy()
                body(env, m)
                i = i + np.asarray(s, np.int32)
        return run

    def s_While(self, node):
        cond, body = self.expr(node.condition), self.stmt(node.body)

        def run(env, mask):
            m = mask
            while True:
                m = _mand(m, cond(env, m))
                if not _any(m):
                    return
                body(env, m)
        return run

    def s_If(self, node):
        from .tasks import Tasks, branch_tasks, forks, splits

        cond = self.expr(node.condition)
        then = self.stmt(node.then_case)
        other = self.stmt(node.else_case) if node.else_case is not None else None
        fork = self.tasks and forks(node)  # warp-specialized branches: emulator.tasks
        split = fork and (splits(node.then_case), splits(node.else_case))
        machine = self.machine

        def run(env, mask):
            c = np.asarray(cond(env, mask), bool)
            if c.ndim == 0:
                if c:
                    then(env, mask)
                elif other is not None:
                    other(env, mask)
                return
            m, n = _mand(mask, c), _mand(mask, ~c)
            if fork and _any(m) and _any(n) and machine.state_of("tasks", Tasks).forking():
                machine.state["tasks"].fork(branch_tasks(machine, env, [(then, m, split[0]), (other, n, split[1])]))
                return
            if _any(m):
                then(env, m)
            if other is not None and _any(n):
                other(env, n)
        return run

    def s_TensorStore(self, node):
        tensor = self.slot(node.dest)
        index = self.flat_index(node.indices)
        value = self.expr(node.value)
        where = where_of(node)
        machine = self.machine

        def run(env, mask):
            view = env.values[tensor]
            store(machine, view, index(env, mask, view), value(env, mask), mask, where)
        return run

    def s_Evaluate(self, node):
        ev = self.expr(node.value)

        def run(env, mask):
            ev(env, mask)
        return run

    def s_AssertStmt(self, node):
        cond = self.expr(node.condition)
        where = where_of(node)
        machine = self.machine

        def run(env, mask):
            c = np.broadcast_to(np.asarray(cond(env, mask), bool), (machine.nthreads,))
            bad = ~c if mask is None else (~c & mask)
            if bad.any():
                raise EmulationError("assertion failed", where, *machine.coords(int(np.argmax(bad))))
        return run

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, node):
        method = getattr(self, "e_" + type(node).__name__, None)
        if method is None:
            raise NotImplementedError(f"emulator: expression {type(node).__name__} is not supported: {where_of(node)}")
        return method(node)

    def e_IntImm(self, node):
        dtype, _ = np_dtype(node.ty.dtype)
        value = dtype.type(node.value)
        return lambda env, mask: value

    e_FloatImm = e_IntImm

    def e_StringImm(self, node):
        value = node.value
        return lambda env, mask: value

    def e_Var(self, node):
        if not self.bound(node):
            raise EmulationError(f"variable {node.name} is used before it is bound", where_of(node))
        slot = self.slot(node)
        return lambda env, mask: env.values[slot]

    def _binary(self, node, fn):
        a, b = self.expr(node.a), self.expr(node.b)
        dtype, _ = np_dtype(node.ty.dtype)

        def run(env, mask):
            with np.errstate(all="ignore"):
                return np.asarray(fn(a(env, mask), b(env, mask))).astype(dtype, copy=False)
        return run

    def __getattr__(self, name):
        if name.startswith("e_"):
            for cls, fn in _BINARY.items():
                if cls.__name__ == name[2:]:
                    return lambda node, fn=fn: self._binary(node, fn)
        raise AttributeError(name)

    def e_Not(self, node):
        a = self.expr(node.a)
        return lambda env, mask: np.logical_not(a(env, mask))

    def e_BitwiseNot(self, node):
        a = self.expr(node.a)
        return lambda env, mask: np.invert(a(env, mask))

    def e_Cast(self, node):
        value = self.expr(node.value)
        dtype, _ = np_dtype(node.ty.dtype)
        return lambda env, mask: _cast(value(env, mask), dtype)

    def e_Select(self, node):
        c, t, f = self.expr(node.condition), self.expr(node.true_value), self.expr(node.false_value)
        return lambda env, mask: np.where(c(env, mask), t(env, mask), f(env, mask))

    def e_Let(self, node):
        slot, value, body = self.slot(node.var), self.expr(node.value), None
        body = self.expr(node.body)

        def run(env, mask):
            env.values[slot] = value(env, mask)
            return body(env, mask)
        return run

    def e_Ramp(self, node):
        base, stride = self.expr(node.base), self.expr(node.stride)
        lanes = int(node.lanes)
        steps = np.arange(lanes)

        def run(env, mask):
            b = np.asarray(base(env, mask))
            return b[..., None] + np.asarray(stride(env, mask))[..., None] * steps.astype(b.dtype)
        return run

    def e_Broadcast(self, node):
        value = self.expr(node.value)
        lanes = int(node.lanes)

        def run(env, mask):
            v = np.asarray(value(env, mask))
            return np.repeat(v[..., None], lanes, axis=-1)
        return run

    def e_Shuffle(self, node):
        vectors = [self.expr(v) for v in node.vectors]
        indices = [int(i) for i in node.indices]

        def run(env, mask):
            parts = [np.asarray(v(env, mask)) for v in vectors]
            parts = [p if p.ndim and p.shape[-1:] != () else p[..., None] for p in parts]
            width = max(p.ndim for p in parts)
            parts = [np.broadcast_to(p, np.broadcast_shapes(*[q.shape[:-1] for q in parts]) + p.shape[-1:]) for p in parts]
            allv = np.concatenate(parts, axis=-1) if width else np.asarray(parts)
            out = allv[..., indices]
            return out[..., 0] if len(indices) == 1 else out
        return run

    def e_TensorLoad(self, node):
        tensor = self.slot(node.source)
        index = self.flat_index(node.indices)
        where = where_of(node)
        machine = self.machine

        def run(env, mask):
            view = env.values[tensor]
            return load(machine, view, index(env, mask, view), mask, where)
        return run

    def flat_index(self, indices):
        parts = [self.expr(i) for i in indices]

        def run(env, mask, view):
            if len(parts) == 1:
                return parts[0](env, mask)
            flat = 0
            for p, stride in zip(parts, view.strides):
                flat = flat + np.asarray(p(env, mask), np.int64) * stride
            return flat
        return run

    def e_Call(self, node):
        name = node.op.name
        if name in ("tirx.call_llvm_intrin", "tirx.call_llvm_pure_intrin"):
            from tvm_tirx.codegen.llvm import get_intrinsic_name

            name = get_intrinsic_name(int(node.args[0].value))
            args = list(node.args[1:])
        elif name in ("tirx.call_extern", "tirx.call_pure_extern"):
            name = node.args[0].value
            args = list(node.args[1:])
        else:
            args = list(node.args)
        builtin = getattr(self, "c_" + name.replace("prim.", "tirx.", 1).replace(".", "_"), None)
        if builtin is not None:
            return builtin(node, args)
        factory = self.calls.get(name)
        if factory is None:
            unresolved = (" (TIRx resolves it only in a kernel launched through a T.cuda.LaunchConfig: "
                          "T.device_entry(launch=T.cuda.LaunchConfig(grid=..., block=...)))"
                          if name in LAUNCH_INDEX_CALLS else "")
            raise EmulationUnsupported(f"emulate: the call {name} ({where_of(node)}) is not emulated{unresolved}; "
                                       "docs/emulator.md lists the calls the emulator runs")
        return factory(self, node, args)

    # built-in TIR calls
    def c_tirx_if_then_else(self, node, args):
        c, t, f = (self.expr(a) for a in args)

        def run(env, mask):
            cond = np.asarray(c(env, mask), bool)
            if cond.ndim == 0:
                return t(env, mask) if cond else f(env, mask)
            mt, mf = _mand(mask, cond), _mand(mask, ~cond)
            tv = t(env, mt) if _any(mt) else None
            fv = f(env, mf) if _any(mf) else None
            if tv is None:
                return fv
            if fv is None:
                return tv
            tv, fv = np.asarray(tv), np.asarray(fv)
            cc = cond.reshape(cond.shape + (1,) * (max(tv.ndim, fv.ndim) - cond.ndim))
            return np.where(cc, tv, fv)
        return run

    def c_tirx_reinterpret(self, node, args):
        value = self.expr(args[0])
        if not hasattr(node.ty, "dtype"):  # to a pointer type (sm90: a tensor map's address): the value itself
            return value
        dtype, lanes = np_dtype(node.ty.dtype)
        src_vector = _is_vector(args[0])

        def run(env, mask):
            v = np.asarray(value(env, mask))
            v = np.ascontiguousarray(v if src_vector else v[..., None])
            out = v.view(dtype)
            return out if lanes > 1 else out[..., 0]
        return run

    def c_tirx_isnan(self, node, args):
        """``T.isnan`` (also how TIRx writes ``T.isinf`` and ``T.isfinite``)."""
        value = self.expr(args[0])
        return lambda env, mask: np.isnan(np.asarray(value(env, mask)).astype(np.float64))

    def c_tirx_address_of(self, node, args):
        (target,) = args
        if isinstance(target, I.Var):  # a kernel parameter passed by address (sm90: a tensor map)
            return self.expr(target)
        if not isinstance(target, I.TensorLoad):
            raise NotImplementedError(f"emulator: address_of({where_of(target)})")
        tensor = self.slot(target.source)
        index = self.flat_index(target.indices)

        def run(env, mask):
            view = env.values[tensor]
            flat = np.asarray(index(env, mask, view), np.int64)
            return Pointer(view.buffer, view.offset + flat * view.dtype.itemsize)
        return run

    def c_tirx_tensor_data_ptr(self, node, args):
        tensor = self.expr(args[0])

        def run(env, mask):
            view = tensor(env, mask)
            return Pointer(view.buffer, view.offset)
        return run


def _is_vector(node) -> bool:
    return tvm_ffi.dtype(str(node.ty.dtype)).lanes > 1


__all__ = ["Compiler", "Env", "np_dtype", "where_of", "Buffer"]
