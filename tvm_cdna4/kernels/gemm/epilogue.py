"""The fused epilogue both GEMM families share (gfx950 and CUDA): what it computes, its inputs, its
numpy reference. Pure Python (attrs; numpy only in the reference), so every planner, the CLI and the
runtime read it without TIRx.

A GEMM with a ``Fusion`` computes, for every output element ``(m, n)`` of ``acc = op(A) @ op(B)``
(the f32 accumulator), in this order::

    v = acc[m, n]
    v = v * row_scale[m]            # row_scale: f32 [M]   (per token: fp8 activations' scale)
    v = v * col_scale[n]            # col_scale: f32 [N]   (per channel: fp8 weights' scale)
    v = v + bias[n]                 # bias:      f32 [N]
    v = act(v)                      # relu, silu or gelu (tanh form)
    v = v + residual[m, n]          # residual:  C's shape and dtype
    C[m, n] = cast(v, C.dtype)      # round to nearest even for 16-bit outputs

Every step but the cast is optional; all arithmetic is f32. The activations are written once here,
``activation(name, x, ops)``, over an operations namespace (``NUMPY`` here; the emitters pass the
TIR one), so the reference and both kernels evaluate the same formula:

* ``relu(x) = max(x, 0)``
* ``silu(x) = x / (1 + 2^(-x log2 e))``
* ``gelu(x) = 0.5 x (1 + tanh(u))``, ``u = sqrt(2/pi) (x + 0.044715 x^3)`` (PyTorch's
  ``gelu(approximate="tanh")``), evaluated as ``x / (1 + 2^(-2u log2 e))``: with
  ``tanh(u) = 1 - 2 / (e^(2u) + 1)``, ``0.5 x (1 + tanh(u)) = x e^(2u) / (e^(2u) + 1)``, a sigmoid of
  ``2u`` like silu's, whose exponent is ``x (GELU_A + GELU_B x^2)``. Four f32 operations, one
  exponential and one division (the tanh form took eleven and cancelled where ``tanh(u)`` nears -1).

Both targets evaluate ``2^x`` with the hardware's approximate exponential (``ex2.approx.f32`` on
sm_80, ``v_exp_f32`` on gfx950: a relative error of about 2^-22), so a fused kernel matches the float64
reference (``reference``) to the output dtype's rounding plus a few f32 ulps of the activation
(``tolerance``).

The kernel's parameters follow C in ``PARAM_ORDER`` (only those asked for), before a split-K
workspace: ``A, B, C, row_scale, col_scale, bias, residual[, W, S]``.
"""

from __future__ import annotations

from types import SimpleNamespace
import attrs

from ..common import Extent, Param  # noqa: F401 (re-exported: the shared vocabulary)

ACTIVATIONS = ("relu", "silu", "gelu")
"""The activations a fused epilogue applies (``gelu`` is the tanh form)."""

PARAM_ORDER = ("row_scale", "col_scale", "bias", "residual")
"""The epilogue's inputs, in the order they follow C in the kernel's signature."""

LOG2E = 1.4426950408889634
SQRT_2_OVER_PI = 0.7978845608028654
GELU_CUBIC = 0.044715
GELU_A = -2.0 * LOG2E * SQRT_2_OVER_PI
"""gelu's exponent ``-2u log2 e = x (GELU_A + GELU_B x^2)``: its linear coefficient."""
GELU_B = GELU_A * GELU_CUBIC
"""... and its cubic one."""


def _activation(instance, attribute, value):
    if value is not None and value not in ACTIVATIONS:
        raise ValueError(f"epilogue activation {value!r}: expected one of {ACTIVATIONS} or None")


@attrs.frozen
class Fusion:
    """What the epilogue fuses after the GEMM (module docstring: the order and the formulas). The
    default fuses nothing: the plain ``C = cast(A @ B)``."""

    bias: bool = False
    """Add ``bias[n]`` (f32 [N]) to every row."""
    activation: str | None = attrs.field(default=None, validator=_activation)
    """``relu``, ``silu``, ``gelu`` (tanh form) or None."""
    residual: bool = False
    """Add ``residual[m, n]`` (C's shape and dtype) after the activation."""
    row_scale: bool = False
    """Multiply row m by ``row_scale[m]`` (f32 [M]) first."""
    col_scale: bool = False
    """Multiply column n by ``col_scale[n]`` (f32 [N]) first."""

    @property
    def empty(self) -> bool:
        """Nothing fused."""
        return self == Fusion()

    def inputs(self) -> tuple[str, ...]:
        """The names of the inputs it reads, in ``PARAM_ORDER``."""
        return tuple(name for name in PARAM_ORDER if getattr(self, name))

    def params(self, M: Extent, N: int, out_dtype: str, groups: int = 0) -> tuple[Param, ...]:
        """Its kernel parameters (``out_dtype``: C's TIR dtype, the residual's), in ``PARAM_ORDER``;
        ``groups`` > 0 (a grouped GEMM): the per-column inputs per group, ``[groups, N]``."""
        column = (groups, N) if groups else (N,)
        shapes = {"row_scale": ((M,), "float32"), "col_scale": (column, "float32"), "bias": (column, "float32"),
                  "residual": ((M, N), out_dtype)}
        return tuple(Param(name, *shapes[name]) for name in self.inputs())

    def describe(self) -> str:
        """One short line: ``row_scale * col_scale + bias -> silu + residual`` (``none`` when empty)."""
        parts = [" * ".join(n for n in ("row_scale", "col_scale") if getattr(self, n))]
        parts[0] = ("acc * " + parts[0]) if parts[0] else "acc"
        text = parts[0] + (" + bias" if self.bias else "")
        text += f" -> {self.activation}" if self.activation else ""
        text += " + residual" if self.residual else ""
        return "none" if self.empty else text

    def as_dict(self) -> dict:
        return attrs.asdict(self)


def fusion_of(bias: bool = False, activation: str | None = None, residual: bool = False, row_scale: bool = False,
              col_scale: bool = False, fusion: Fusion | None = None) -> Fusion:
    """The ``Fusion`` of the build APIs' keywords (``bias=True, activation="silu", ...``), or ``fusion``
    itself when given (then no keyword may be set)."""
    keywords = Fusion(bool(bias), activation, bool(residual), bool(row_scale), bool(col_scale))
    if fusion is None:
        return keywords
    if not keywords.empty:
        raise ValueError("give the epilogue either as fusion=Fusion(...) or as keywords, not both")
    return fusion


# ------------------------------------------------------------------------------ the one formula


def activation(name: str | None, x, ops):
    """``name`` applied to ``x`` with the operations of ``ops`` (``max``, ``exp2``, ``const``): numpy
    arrays with ``NUMPY``, TIR expressions with the emitters' namespace."""
    c = ops.const
    if name is None:
        return x
    if name == "relu":
        return ops.max(x, c(0.0))
    if name == "silu":
        return x / (c(1.0) + ops.exp2(x * c(-LOG2E)))
    if name == "gelu":
        return x / (c(1.0) + ops.exp2(x * (c(GELU_A) + c(GELU_B) * (x * x))))
    raise ValueError(f"epilogue activation {name!r}: expected one of {ACTIVATIONS} or None")


def apply(fusion: Fusion, v, at: dict, ops):
    """The fused steps on one accumulator value (or array) ``v``: ``at`` maps each input name of
    ``fusion.inputs()`` to its value at this element (an array, a TIR load), already f32 except the
    residual, which ``ops.f32`` converts. The output cast is the caller's."""
    if fusion.row_scale:
        v = v * at["row_scale"]
    if fusion.col_scale:
        v = v * at["col_scale"]
    if fusion.bias:
        v = v + at["bias"]
    v = activation(fusion.activation, v, ops)
    if fusion.residual:
        v = v + ops.f32(at["residual"])
    return v


def _numpy_ops(dtype):
    import numpy as np

    return SimpleNamespace(max=np.maximum, exp2=np.exp2, const=lambda x: dtype(x),
                           f32=lambda x: np.asarray(x).astype(dtype))


def random_inputs(fusion: Fusion, M: int, N: int, rng, residual_dtype=None, groups: int = 0) -> dict:
    """Inputs for a test of ``fusion``: scales in [0.5, 2), bias and residual in [-1, 1) (the residual
    rounded to ``residual_dtype``, a numpy dtype, when given); ``groups`` > 0: the per-column inputs
    per group, ``[groups, N]`` (``Fusion.params``)."""
    import numpy as np

    out, column = {}, (groups, N) if groups else N
    if fusion.row_scale:
        out["row_scale"] = rng.uniform(0.5, 2.0, M).astype(np.float32)
    if fusion.col_scale:
        out["col_scale"] = rng.uniform(0.5, 2.0, column).astype(np.float32)
    if fusion.bias:
        out["bias"] = rng.uniform(-1.0, 1.0, column).astype(np.float32)
    if fusion.residual:
        res = rng.uniform(-1.0, 1.0, (M, N)).astype(np.float32)
        out["residual"] = res.astype(residual_dtype) if residual_dtype is not None else res
    return out


def _per_column(x):
    """A per-column input as a row to broadcast: ``[N]`` -> ``[1, N]``; ``[M, N]`` (a grouped GEMM's
    ``[G, N]`` gathered per row: ``kernels.gemm.grouped.per_row``) as it is."""
    import numpy as np

    x = np.asarray(x, np.float64)
    return x[None, :] if x.ndim == 1 else x


def reference(acc, fusion: Fusion, inputs: dict):
    """The fused epilogue on the whole accumulator ``acc`` [M, N] in float64 (before the output cast):
    what a kernel's result is compared with (the per-column inputs ``[N]``, or ``[M, N]``: ``_per_column``)."""
    import numpy as np

    acc = np.asarray(acc, dtype=np.float64)
    at = {}
    if fusion.row_scale:
        at["row_scale"] = np.asarray(inputs["row_scale"], np.float64)[:, None]
    if fusion.col_scale:
        at["col_scale"] = _per_column(inputs["col_scale"])
    if fusion.bias:
        at["bias"] = _per_column(inputs["bias"])
    if fusion.residual:
        at["residual"] = np.asarray(inputs["residual"]).astype(np.float64)
    with np.errstate(over="ignore"):  # 2^x overflows to inf where an activation saturates (the limit is exact)
        return apply(fusion, acc, at, _numpy_ops(np.float64))


def tolerance(fusion: Fusion, out_dtype: str) -> tuple[float, float]:
    """(relative, absolute) error allowed between a fused kernel and ``reference``, per element, on top
    of the GEMM's own: the output's rounding (half an ulp, relative: 2^-8 bf16, 2^-11 f16, 2^-24 f32)
    plus, with an activation, 2^-18 relative and 2^-20 absolute for the approximate ``2^x`` and the
    f32 evaluation order."""
    short = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32"}.get(out_dtype,
                                                                                                       out_dtype)
    rounding = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8, "f64": 2.0 ** -53, "i32": 0.0}[short]
    if fusion.activation is None:
        return rounding + 2.0 ** -22, 0.0
    return rounding + 2.0 ** -18, 2.0 ** -20


SLOPES = {None: 1.0, "relu": 1.0, "silu": 1.1, "gelu": 1.13}
"""An upper bound of each activation's slope |act'(x)| (silu's largest is 1.0998 at x = 2.40, gelu's
1.1289 at x = 1.52): how far an error of the accumulator moves the fused result."""


def error_bound(acc, fusion: Fusion, inputs: dict, out_dtype: str, acc_error=0.0):
    """The error allowed per element between a fused kernel's output and ``reference(acc, fusion,
    inputs)``: ``tolerance``'s ``rel * |reference| + abs``; plus, for the f32 evaluation of terms that
    cancel (a bias or a residual against the product), 2^-21 (four roundings of 2^-24; 2^-18 with an
    activation) of the terms' magnitude ``|acc * row_scale * col_scale| + |bias| + |residual|``, which
    bounds every intermediate value; plus half the smallest f16 subnormal (2^-25) for f16 outputs, the
    smallest normal f32 (2^-126: fast-math code flushes subnormal results to zero) for the others; plus
    ``acc_error`` (a bound of the accumulator's own error, per element or one number; 0 where the
    product is exact) times the scales and the activation's slope (``SLOPES``)."""
    import numpy as np

    acc = np.asarray(acc, dtype=np.float64)
    scale = np.ones((1, 1))
    if fusion.row_scale:
        scale = scale * np.abs(np.asarray(inputs["row_scale"], np.float64))[:, None]
    if fusion.col_scale:
        scale = scale * np.abs(_per_column(inputs["col_scale"]))
    magnitude = np.abs(acc) * scale
    if fusion.bias:
        magnitude = magnitude + np.abs(_per_column(inputs["bias"]))
    if fusion.residual:
        magnitude = magnitude + np.abs(np.asarray(inputs["residual"]).astype(np.float64))
    rel, absolute = tolerance(fusion, out_dtype)
    evaluation = 2.0 ** (-18 if fusion.activation else -21)
    floor = 2.0 ** -25 if out_dtype in ("f16", "float16") else 2.0 ** -126
    return (rel * np.abs(reference(acc, fusion, inputs)) + absolute + floor + evaluation * magnitude
            + SLOPES[fusion.activation] * scale * acc_error)


def check(out, acc, fusion: Fusion, inputs: dict, out_dtype: str, acc_error=0.0) -> tuple[float, bool]:
    """(the largest ratio of ``|out - reference|`` to ``error_bound``, whether it is at most 1): how a
    fused kernel's output ``out`` is validated against the accumulator ``acc`` it fused (inf when ``out``
    holds a non-finite element)."""
    import numpy as np

    out = np.asarray(out).astype(np.float64)
    if not np.isfinite(out).all():
        return float("inf"), False
    err = np.abs(out - reference(acc, fusion, inputs))
    bound = error_bound(acc, fusion, inputs, out_dtype, acc_error)
    ratio = np.divide(err, bound, out=np.where(err > 0, np.inf, 0.0), where=bound > 0)
    worst = float(ratio.max()) if ratio.size else 0.0
    return worst, worst <= 1.0


__all__ = ["ACTIVATIONS", "GELU_A", "GELU_B", "GELU_CUBIC", "LOG2E", "PARAM_ORDER", "SLOPES", "SQRT_2_OVER_PI", "Fusion", "Param",
           "activation", "apply", "check", "error_bound", "fusion_of", "random_inputs", "reference", "tolerance"]
