"""The math calls TIRx lowers ``T.exp`` & co. to on ROCm (LLVM intrinsics ``llvm.<name>``), for gfx950.

TIRx's ROCm rules turn ``T.exp``, ``T.exp2``, ``T.log``, ``T.log2``, ``T.log10``, ``T.sqrt``, ``T.sin``,
``T.cos``, ``T.pow``, ``T.fabs``, ``T.floor``, ``T.ceil``, ``T.trunc``, ``T.round`` / ``T.nearbyint``
into ``llvm.<name>`` calls of the value's type (``T.tanh``, ``T.sigmoid`` and ``T.rsqrt`` into
expressions of ``llvm.exp`` / ``llvm.sqrt``, ``T.erf`` into a polynomial of ``llvm.fmuladd``; bf16
goes through f32). Each runs here as numpy's function of the float64 value, rounded once to the
call's dtype (f16, f32; f64 is computed in float64): the correctly rounded result to within
float64's own error. LLVM's AMDGPU lowering (``v_exp_f32``, ``v_log_f32``, ``v_sin_f32`` with range
reduction and denormal scaling; ``v_sqrt_f32`` corrected to IEEE) is accurate to about 1 ulp for the
transcendentals, which is not modelled; ``sqrt``, ``fabs``, ``floor``, ``ceil``, ``trunc`` and
``nearbyint`` (round half to even) are exact on both.

What gfx950 cannot compile (libm calls, float64 functions without an AMDGPU lowering) is refused
at build by ``rocm.math_calls``.
"""

from __future__ import annotations

import numpy as np

from .interp import np_dtype

# llvm.<name> -> numpy on float64
FUNCTIONS = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
    "sin": np.sin, "cos": np.cos, "pow": np.power, "fabs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "nearbyint": np.rint, "rint": np.rint,
}


def _math(fn):
    def factory(compiler, node, args):
        operands = [compiler.expr(a) for a in args]
        dtype, _ = np_dtype(node.ty.dtype)

        def run(env, mask):
            values = [np.asarray(x(env, mask)).astype(np.float64) for x in operands]
            with np.errstate(all="ignore"):
                return np.asarray(fn(*values)).astype(dtype)
        return run
    return factory


def calls() -> dict:
    """The call table entries (``llvm.<name>`` -> handler factory)."""
    return {f"llvm.{name}": _math(fn) for name, fn in FUNCTIONS.items()}
