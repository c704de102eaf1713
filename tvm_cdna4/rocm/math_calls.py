"""The ``math call`` rule of ``analysis.check_kernel``: math functions gfx950 code cannot compile.

TIRx 0.1.0a4's ROCm intrinsic rules lower ``T.exp``, ``T.exp2``, ``T.log``, ``T.log2``, ``T.log10``,
``T.sqrt``, ``T.sin``, ``T.cos``, ``T.pow``, ``T.erf``, ``T.tanh``, ``T.fabs``, ``T.floor``,
``T.ceil``, ``T.trunc``, ``T.round``, ``T.nearbyint`` and ``T.fma`` to LLVM intrinsics, and
``T.sigmoid`` / ``T.rsqrt`` to expressions of them (the emulator runs all of these:
``emulator.mathcalls``). The other math functions become calls of the C library (``log1pf``,
``atanf``, ...), which a gfx950 code object has no definition of: ld.lld stops with ``undefined
symbol``, and without ld.lld the build "succeeds" with a code object that cannot load. ``T.exp10``
has no rule at all (TIRx: ``unknown intrinsic``). For float64, LLVM's AMDGPU backend lowers only
``exp``, ``exp2``, ``sqrt`` and the rounding functions: ``log``, ``log2``, ``log10`` compile to a
kernel that stores an uncomputed register, ``sin``, ``cos`` and ``pow`` abort the process in LLVM,
``erf`` stops TIRx. Each is refused here, before TIRx runs, naming what to write instead.

Measured by compiling ``C[t] = T.<fn>(A[t])`` for gfx950 with ``tvm_cdna4.build`` (ld.lld 22) in
float16, float32 and float64 (tests/emulator/test_emulator_math.py).
"""

from __future__ import annotations

import functools

import tvm_ffi
from tvm_tirx import ir
from tvm_tirx.codegen.llvm import get_intrinsic_name

from ..errors import ContractError

NO_LOWERING = "it has no gfx950 lowering to rewrite it with; approximate it with the functions that have one " \
    "(T.exp, T.log, T.sqrt, T.sin, T.cos, T.pow, T.erf, T.tanh), e.g. by a polynomial or rational approximation"
# T.<name> -> what to write instead (x, y: the operands)
LIBM = {
    "log1p": "T.log(1 + x) (less accurate for |x| much below 1)",
    "tan": "T.sin(x) / T.cos(x)",
    "sinh": "(T.exp(x) - T.exp(-x)) / 2",
    "cosh": "(T.exp(x) + T.exp(-x)) / 2",
    "asinh": "T.log(x + T.sqrt(x * x + 1))",
    "acosh": "T.log(x + T.sqrt(x * x - 1))",
    "atanh": "T.log((1 + x) / (1 - x)) / 2",
    "hypot": "T.sqrt(x * x + y * y)",
    "fmod": "x - T.trunc(x / y) * y",
    "ldexp": "x * T.exp2(T.Cast(x.dtype, y))",
    "copysign": "T.if_then_else(y < 0, -T.fabs(x), T.fabs(x)) (or the sign bit through T.reinterpret)",
    "exp10": "T.exp2(x * 3.321928094887362) (log2 10)",
    **{name: NO_LOWERING for name in ("asin", "acos", "atan", "atan2", "nextafter")},
}
FLOAT64_UNLOWERED = ("log", "log2", "log10", "sin", "cos", "pow", "erf")
EXTERN_OPS = ("tirx.call_extern", "tirx.call_pure_extern")
LLVM_OPS = ("tirx.call_llvm_intrin", "tirx.call_llvm_pure_intrin")
_EXTERN = {**{f"{name}f": name for name in LIBM}, **{name: name for name in LIBM}}  # libm symbol -> T.<name>


def _function(call) -> str | None:
    """The ``T.<name>`` a call is (as written: ``prim.<name>``; lowered: an ``llvm.<name>`` intrinsic
    or a libm symbol), else None."""
    op = call.op.name if isinstance(call.op, ir.Op) else ""
    if op.startswith("prim."):
        return op[len("prim."):]
    if op in EXTERN_OPS and isinstance(call.args[0], ir.StringImm):
        return _EXTERN.get(call.args[0].value)
    if op in LLVM_OPS and isinstance(call.args[0], ir.IntImm):
        name = _intrinsic_name(int(call.args[0].value))
        return name[len("llvm."):] if name.startswith("llvm.") else None
    return None


@functools.cache
def _intrinsic_name(intrinsic_id: int) -> str:
    return get_intrinsic_name(intrinsic_id)


def math_error(call) -> ContractError | None:
    """The refusal of one call, or None."""
    name = _function(call)
    if name in LIBM:
        why = "TIRx has no lowering for it" if name == "exp10" else \
            f"TIRx lowers it to a call of the C library's {name}, which gfx950 code cannot link"
        advice = LIBM[name] if LIBM[name] == NO_LOWERING else f"write {LIBM[name]} instead"
        return ContractError(f"T.{name} cannot be compiled for gfx950 ({why})", suggestion=advice, check="math call")
    dtype = str(call.ty.dtype) if hasattr(call.ty, "dtype") else ""
    if name in FLOAT64_UNLOWERED and dtype.startswith("float64"):
        return ContractError(f"T.{name} on float64 cannot be compiled for gfx950 (LLVM's AMDGPU backend lowers it "
                             "for float16 and float32 only)", suggestion="compute it in float32 (the operands through "
                             "T.Cast(\"float32\", ...), the result back through T.Cast(\"float64\", ...))",
                             check="math call")
    return None


def check_math_calls(func) -> None:
    """Refuse the first math call of ``func`` that gfx950 cannot compile (the module docstring)."""
    errors = []

    def visit(call):
        if not errors:
            error = math_error(call)
            if error is not None:
                errors.append(error)

    tvm_ffi.structural_walk(func.body, [(ir.Call, visit)])
    if errors:
        raise errors[0]
