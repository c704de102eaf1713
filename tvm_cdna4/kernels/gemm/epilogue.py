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

The tanh form (an ``ops`` namespace with ``tanh``: the sm90 kernel's ``activation_form="tanh"``) evaluates
silu and gelu as ``h + h tanh(w)``, ``h = x / 2``, with ``w = h`` (silu: ``sigmoid(x) = (1 + tanh(x/2)) / 2``)
or ``w = u`` (gelu): one hardware ``tanh.approx.f32`` (PTX ISA 9.7.3.22: relative error at most
``TANH_APPROX_ERROR``) instead of an exponential and a reciprocal, two of the SM's slow multi-function
operations. Its error is absolute, ``|h| TANH_APPROX_ERROR`` (where ``tanh(w)`` nears -1 the sum cancels),
below half an ulp of ``|x|`` in bf16 (2^-9) and f16 (2^-11): ``error_bound`` admits it for 16-bit outputs
(``TANH_OUTPUTS``), never for f32 ones.

Each input is declared once, a row of ``INPUTS`` (``Input``: its name, how it broadcasts against C
(row, column or element), its dtype (f32 or C's), its step (multiply or add), before or after the
activation): ``Fusion``'s fields, ``PARAM_ORDER``, ``Fusion.params``, ``random_inputs``, ``reference``,
``error_bound``, the emitters' loads (``Input.at``), the runtime's arguments and the CLI's flags read
it. The kernel's parameters follow C in ``PARAM_ORDER`` (only those asked for), before a split-K
workspace: ``A, B, C, row_scale, col_scale, bias, residual[, W, S]``.
"""

from __future__ import annotations

from types import SimpleNamespace
import attrs

from ..common import Extent, Param  # noqa: F401 (re-exported: the shared vocabulary)

ACTIVATIONS = ("relu", "silu", "gelu")
"""The activations a fused epilogue applies (``gelu`` is the tanh form)."""

BROADCASTS = ("row", "column", "element")
"""How an input meets C: one value per row (``[M]``), per column (``[N]``; per group ``[G, N]`` in a
grouped GEMM, whose rows belong to the groups) or per element (C's shape ``[M, N]``)."""

STEPS = ("mul", "add")
"""What an input does to the value: ``v = v * x`` or ``v = v + x``."""


def _one_of(choices):
    def check(instance, attribute, value):
        if value not in choices:
            raise ValueError(f"epilogue input {attribute.name}: expected one of {choices}, found {value!r}")
    return check


@attrs.frozen
class Input:
    """One input of the fused epilogue, declared once (``INPUTS``): the ``Fusion`` field, the kernel
    parameter, the test values, the reference, the emitters' loads, the runtime's arguments and the
    CLI's flag all come from it."""

    name: str
    """The ``Fusion`` field, the kernel parameter, the keyword, the CLI flag (``--`` + ``-`` for ``_``)."""
    broadcast: str = attrs.field(validator=_one_of(BROADCASTS))
    """``row`` ``[M]``, ``column`` ``[N]`` (per group ``[G, N]``) or ``element`` ``[M, N]`` (``BROADCASTS``)."""
    dtype: str = attrs.field(validator=_one_of(("f32", "out")))
    """``f32``, or ``out``: C's dtype (converted to f32 where it is applied)."""
    step: str = attrs.field(validator=_one_of(STEPS))
    """``mul`` or ``add`` (``STEPS``)."""
    values: tuple[float, float]
    """The test inputs' range ``[low, high)`` (``random_inputs``)."""
    help: str
    """One line: what it does (the CLI flag's help)."""
    after_activation: bool = False
    """Applied after the activation (else before it)."""

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def per_group(self) -> bool:
        """A grouped GEMM takes one per group (``[G, N]``): the per-column inputs."""
        return self.broadcast == "column"

    def shape(self, M: Extent, N: int, groups: int = 0) -> tuple:
        """The parameter's shape (``groups`` > 0: a grouped GEMM's, M its rows T)."""
        if self.broadcast == "row":
            return (M,)
        if self.broadcast == "column":
            return (groups, N) if groups else (N,)
        return (M, N)

    def tir_dtype(self, out_dtype: str) -> str:
        """The parameter's TIR dtype (``out_dtype``: C's)."""
        return "float32" if self.dtype == "f32" else out_dtype

    def at(self, tensor, row, col, group=None):
        """``tensor`` (the kernel's parameter, or an array) at output element (``row``, ``col``): what the
        emitters load (a grouped GEMM's per-column input at the tile's ``group``)."""
        if self.broadcast == "row":
            return tensor[row]
        if self.broadcast == "column":
            return tensor[col] if group is None else tensor[group, col]
        return tensor[row, col]

    def spread(self, x):
        """An input array as float64 that broadcasts against C ``[M, N]``: a row's ``[M]`` as ``[M, 1]``, a
        column's ``[N]`` as ``[1, N]`` (``[M, N]``: a grouped GEMM's gathered per row,
        ``kernels.gemm.grouped.per_row``), an element's as it is."""
        import numpy as np

        x = np.asarray(x).astype(np.float64)
        if self.broadcast == "row":
            return x[:, None]
        if self.broadcast == "column" and x.ndim == 1:
            return x[None, :]
        return x


INPUTS = (
    Input("row_scale", "row", "f32", "mul", (0.5, 2.0), "multiply row m by an f32 scale [M] (per token)"),
    Input("col_scale", "column", "f32", "mul", (0.5, 2.0), "multiply column n by an f32 scale [N] (per channel)"),
    Input("bias", "column", "f32", "add", (-1.0, 1.0), "add a per-column f32 bias [N]"),
    Input("residual", "element", "out", "add", (-1.0, 1.0), "add a residual input of C's shape and dtype",
          after_activation=True),
)
"""The epilogue's inputs, in the order they are applied (the activation between the last one before it
and the first ``after_activation``) and follow C in the kernel's signature (``PARAM_ORDER``). A new
input is one row here (and its keyword in ``tvm_cdna4.torch``): the plans, emitters, runtime and CLI
read the table (docs/architecture.md, "Where a change goes")."""

INPUT = {i.name: i for i in INPUTS}
"""``INPUTS`` by name."""

PARAM_ORDER = tuple(i.name for i in INPUTS)
"""The epilogue's inputs, in the order they follow C in the kernel's signature."""

LOG2E = 1.4426950408889634
SQRT_2_OVER_PI = 0.7978845608028654
GELU_CUBIC = 0.044715
GELU_A = -2.0 * LOG2E * SQRT_2_OVER_PI
"""gelu's exponent ``-2u log2 e = x (GELU_A + GELU_B x^2)``: its linear coefficient."""
GELU_B = GELU_A * GELU_CUBIC
"""... and its cubic one."""
TANH_OUTPUTS = ("f16", "bf16", "float16", "bfloat16")
"""The output dtypes whose error bound admits the tanh form (its error is below half their ulp of ``|x|``)."""


def _activation(instance, attribute, value):
    if value is not None and value not in ACTIVATIONS:
        raise ValueError(f"epilogue activation {value!r}: expected one of {ACTIVATIONS} or None")


def _fields() -> dict:
    """``Fusion``'s fields: one bool per input of ``INPUTS`` (in its order), then ``activation``."""
    return {**{i.name: attrs.field(default=False) for i in INPUTS},
            "activation": attrs.field(default=None, validator=_activation)}


@attrs.frozen(these=_fields())
class Fusion:
    """What the epilogue fuses after the GEMM (module docstring: the order and the formulas): a bool
    per input of ``INPUTS`` (``Fusion(bias=True)``: add ``bias[n]``; ``INPUTS``' help says what each
    does) and ``activation`` (``relu``, ``silu``, ``gelu`` (tanh form) or None). The default fuses
    nothing: the plain ``C = cast(A @ B)``."""

    @property
    def empty(self) -> bool:
        """Nothing fused."""
        return self == Fusion()

    def steps(self) -> tuple[Input, ...]:
        """The inputs it reads (``INPUTS`` records), in ``PARAM_ORDER``."""
        return tuple(i for i in INPUTS if getattr(self, i.name))

    def inputs(self) -> tuple[str, ...]:
        """The names of the inputs it reads, in ``PARAM_ORDER``."""
        return tuple(i.name for i in self.steps())

    def params(self, M: Extent, N: int, out_dtype: str, groups: int = 0) -> tuple[Param, ...]:
        """Its kernel parameters (``out_dtype``: C's TIR dtype, the residual's), in ``PARAM_ORDER``;
        ``groups`` > 0 (a grouped GEMM): the per-column inputs per group, ``[groups, N]``."""
        return tuple(Param(i.name, i.shape(M, N, groups), i.tir_dtype(out_dtype)) for i in self.steps())

    def describe(self) -> str:
        """One short line: ``acc * row_scale * col_scale + bias -> silu + residual`` (``none`` when empty)."""
        if self.empty:
            return "none"
        text = "acc"
        for when in (False, True):
            if when and self.activation:
                text += f" -> {self.activation}"
            for i in self.steps():
                if i.after_activation == when:
                    text += f" {'*' if i.step == 'mul' else '+'} {i.name}"
        return text

    def as_dict(self) -> dict:
        return attrs.asdict(self)


def fusion_of(bias: bool = False, activation: str | None = None, residual: bool = False, row_scale: bool = False,
              col_scale: bool = False, fusion: Fusion | None = None) -> Fusion:
    """The ``Fusion`` of the build APIs' keywords (``bias=True, activation="silu", ...``: sugar for these
    five; any input of ``INPUTS`` through ``fusion=Fusion(...)``), or ``fusion`` itself when given (then
    no keyword may be set)."""
    keywords = Fusion(bias=bool(bias), activation=activation, residual=bool(residual), row_scale=bool(row_scale),
                      col_scale=bool(col_scale))
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
    if getattr(ops, "tanh", None) is not None and name in ("silu", "gelu"):  # the tanh form (module docstring)
        h = x * c(0.5)
        w = h if name == "silu" else x * (c(SQRT_2_OVER_PI) + c(SQRT_2_OVER_PI * GELU_CUBIC) * (x * x))
        return h + h * ops.tanh(w)
    if name == "silu":
        return x / (c(1.0) + ops.exp2(x * c(-LOG2E)))
    if name == "gelu":
        return x / (c(1.0) + ops.exp2(x * (c(GELU_A) + c(GELU_B) * (x * x))))
    raise ValueError(f"epilogue activation {name!r}: expected one of {ACTIVATIONS} or None")


def apply(fusion: Fusion, v, at: dict, ops):
    """The fused steps on one accumulator value (or array) ``v``: ``at`` maps each input name of
    ``fusion.inputs()`` to its value at this element (an array, a TIR load), already f32 except those
    of C's dtype (``Input.dtype`` ``out``: the residual), which ``ops.f32`` converts. The output cast
    is the caller's."""
    for when in (False, True):
        if when:
            v = activation(fusion.activation, v, ops)
        for i in fusion.steps():
            if i.after_activation == when:
                x = ops.f32(at[i.name]) if i.dtype == "out" else at[i.name]
                v = v * x if i.step == "mul" else v + x
    return v


def _numpy_ops(dtype):
    import numpy as np

    return SimpleNamespace(max=np.maximum, exp2=np.exp2, const=lambda x: dtype(x),
                           f32=lambda x: np.asarray(x).astype(dtype))


def random_inputs(fusion: Fusion, M: int, N: int, rng, out_dtype=None, groups: int = 0) -> dict:
    """Inputs for a test of ``fusion``, each drawn uniformly from its ``Input.values`` (scales in [0.5, 2),
    bias and residual in [-1, 1)) as f32, those of C's dtype rounded to ``out_dtype`` (a numpy dtype)
    when given; ``groups`` > 0: the per-column inputs per group, ``[groups, N]`` (``Fusion.params``)."""
    import numpy as np

    out = {}
    for i in fusion.steps():
        shape = i.shape(M, N, groups)
        x = rng.uniform(*i.values, shape[0] if len(shape) == 1 else shape).astype(np.float32)
        out[i.name] = x.astype(out_dtype) if i.dtype == "out" and out_dtype is not None else x
    return out


def reference(acc, fusion: Fusion, inputs: dict):
    """The fused epilogue on the whole accumulator ``acc`` [M, N] in float64 (before the output cast):
    what a kernel's result is compared with (each input broadcast by ``Input.spread``: the per-column
    ones ``[N]``, or ``[M, N]`` gathered per row for a grouped GEMM)."""
    import numpy as np

    acc = np.asarray(acc, dtype=np.float64)
    at = {i.name: i.spread(inputs[i.name]) for i in fusion.steps()}
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


def error_bound(acc, fusion: Fusion, inputs: dict, out_dtype: str, acc_error=0.0, approx_tanh: bool = False):
    """The error allowed per element between a fused kernel's output and ``reference(acc, fusion,
    inputs)``: ``tolerance``'s ``rel * |reference| + abs``; plus, for the f32 evaluation of terms that
    cancel (an added input against the product), 2^-21 (four roundings of 2^-24; 2^-18 with an
    activation) of the terms' magnitude (``|acc * row_scale * col_scale| + |bias| + |residual|``: each
    added input times the scales applied after it), which bounds every intermediate value; plus half
    the smallest f16 subnormal (2^-25) for f16 outputs, the smallest normal f32 (2^-126: fast-math code
    flushes subnormal results to zero) for the others; plus ``acc_error`` (a bound of the
    accumulator's own error, per element or one number; 0 where the product is exact) times the scales
    and the activation's slope (``SLOPES``). A kernel that evaluates silu or gelu in the tanh form
    (``approx_tanh``: a plan's ``approx_tanh``; 16-bit outputs only, ``TANH_OUTPUTS``) is allowed that form's
    error too (the module docstring): ``TANH_APPROX_ERROR / 2`` of the terms' magnitude (which bounds ``|x|``),
    an absolute error (near the activation's zeros it is large relative to the output); every other kernel
    keeps the tight bound."""
    import numpy as np

    acc = np.asarray(acc, dtype=np.float64)
    scale, added = np.ones((1, 1)), []
    for i in fusion.steps():
        x = np.abs(i.spread(inputs[i.name]))
        if i.step == "mul":
            scale, added = scale * x, [a * x for a in added]
        else:
            added.append(x)
    magnitude = np.abs(acc) * scale
    for a in added:
        magnitude = magnitude + a
    rel, absolute = tolerance(fusion, out_dtype)
    evaluation = 2.0 ** (-18 if fusion.activation else -21)
    if approx_tanh and fusion.activation in ("silu", "gelu") and out_dtype in TANH_OUTPUTS:  # |x| / 2 of its error
        from ...isa.ptx_math import TANH_APPROX_ERROR

        evaluation += TANH_APPROX_ERROR / 2
    floor = 2.0 ** -25 if out_dtype in ("f16", "float16") else 2.0 ** -126
    return (rel * np.abs(reference(acc, fusion, inputs)) + absolute + floor + evaluation * magnitude
            + SLOPES[fusion.activation] * scale * acc_error)


def check(out, acc, fusion: Fusion, inputs: dict, out_dtype: str, acc_error=0.0,
          approx_tanh: bool = False) -> tuple[float, bool]:
    """(the largest ratio of ``|out - reference|`` to ``error_bound``, whether it is at most 1): how a
    fused kernel's output ``out`` is validated against the accumulator ``acc`` it fused (inf when ``out``
    holds a non-finite element)."""
    import numpy as np

    out = np.asarray(out).astype(np.float64)
    if not np.isfinite(out).all():
        return float("inf"), False
    err = np.abs(out - reference(acc, fusion, inputs))
    bound = error_bound(acc, fusion, inputs, out_dtype, acc_error, approx_tanh)
    ratio = np.divide(err, bound, out=np.where(err > 0, np.inf, 0.0), where=bound > 0)
    worst = float(ratio.max()) if ratio.size else 0.0
    return worst, worst <= 1.0


__all__ = ["ACTIVATIONS", "BROADCASTS", "GELU_A", "GELU_B", "GELU_CUBIC", "INPUT", "INPUTS", "LOG2E", "PARAM_ORDER",
           "SLOPES", "SQRT_2_OVER_PI", "STEPS", "TANH_OUTPUTS", "Fusion", "Input", "Param", "activation", "apply", "check", "error_bound",
           "fusion_of", "random_inputs", "reference", "tolerance"]


def __getattr__(name: str):
    """``TANH_APPROX_ERROR`` (``isa.ptx_math``'s, re-exported), read on first use: importing ``tvm_cdna4.isa``
    loads the catalog (numpy, ml_dtypes), which the CLI's warm path must not (tests/test_cache.py)."""
    if name == "TANH_APPROX_ERROR":
        from ...isa.ptx_math import TANH_APPROX_ERROR

        return TANH_APPROX_ERROR
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
