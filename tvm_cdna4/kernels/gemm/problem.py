"""The GEMM family's problem: ``GemmProblem``, its inputs, its float64 reference and its error bound.

Target-neutral and pure Python (attrs; numpy only in the inputs and the reference): every target's
plan, build and validation start from the same frozen record, so a new target reads nothing else.

``C = epilogue(op(A) @ op(B))``: ``M x N`` outputs over ``K``; ``layout`` says how A and B are stored
(``n``: as used, A ``[M, K]`` and B ``[K, N]``; ``t``: transposed, A ``[K, M]`` and B ``[N, K]``;
``nt`` has both K-contiguous); ``dtype`` the inputs' element format (``DTYPES``), ``out_dtype`` C's
(None: the dtype's first output, ``default_out``); ``fusion`` the fused epilogue
(``kernels.gemm.epilogue``). ``M=None``: dynamic M (the rows known at run time; one kernel per bucket
of M, ``kernels.gemm.dynamic_m``). ``groups=G``: a grouped GEMM (mixture of experts,
``kernels.gemm.grouped``): G GEMMs sharing N and K, A ``[T, K]`` with T and the group offsets known at
run time (M is None). ``batch``: a leading batch axis on A, B and C (gfx950 only).

Validation (``random_inputs`` -> ``GemmData``): inputs on the grid of 1/8 in [-1/2, 1/2] (i8: the
integers -4..4), where every product is a multiple of 2^-6 and every partial sum of K < 2^20 of them
is exact in f32, so any summation order gives the exact product and the kernel's C is checked
element by element against ``epilogue.reference`` within ``epilogue.error_bound`` (the output's
rounding and the epilogue's f32 evaluation; nothing of the GEMM's own rounding). The MX formats draw
their elements from the format's values and their E8M0 scales from 2^-5 .. 2^5; their products are
not exact in f32, so their bound adds ``MX_ACC_TOL * |A| @ |B|``.
"""

from __future__ import annotations

import attrs

from .epilogue import Fusion

LAYOUTS = ("nn", "nt", "tn", "tt")
DENSE_DTYPES = ("f16", "bf16", "fp8", "bf8", "fp8_bf8", "bf8_fp8", "i8", "f32", "f64")
"""Input formats of the dense GEMMs (fp8_bf8: A fp8, B bf8, and so on)."""
MX_FORMATS = {"mxfp8": "fp8", "mxbf8": "bf8", "mxfp6": "fp6", "mxbf6": "bf6", "mxfp4": "fp4"}
"""The OCP MX block-scaled formats: the element format of each (32 elements share an E8M0 scale)."""
DTYPES = (*DENSE_DTYPES, *MX_FORMATS)
OUT_DTYPES = ("f32", "f16", "bf16", "i32", "f64")
MX_BLOCK = 32
MX_ACC_TOL = 1e-5
"""The f32 accumulation error allowed an MX GEMM, relative to ``|A| @ |B|``."""


def default_out(dtype: str) -> str:
    """The output a dtype's accumulator gives without a cast: i32 for i8, f64 for f64, else f32."""
    return {"i8": "i32", "f64": "f64"}.get(dtype, "f32")


def _size(instance, attribute, value):
    if value is None and attribute.name == "M":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"GemmProblem {attribute.name}: expected a positive int"
                         + (" (or None: dynamic M)" if attribute.name == "M" else "") + f", found {value!r}")


def _count(instance, attribute, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"GemmProblem {attribute.name}: expected an int >= 0, found {value!r}")


def _one_of(choices, none_ok=False):
    def check(instance, attribute, value):
        if value is None and none_ok:
            return
        if value not in choices:
            raise ValueError(f"GemmProblem {attribute.name}: expected one of {choices}"
                             + (" or None" if none_ok else "") + f", found {value!r}")
    return check


def _fusion(instance, attribute, value):
    if not isinstance(value, Fusion):
        raise ValueError(f"GemmProblem fusion: expected a kernels.gemm.epilogue.Fusion, found {value!r}")


@attrs.frozen
class GemmProblem:
    """One GEMM as every target sees it (the module docstring: what each field means)."""

    M: int | None = attrs.field(validator=_size)
    N: int = attrs.field(validator=_size)
    K: int = attrs.field(validator=_size)
    dtype: str = attrs.field(default="f16", validator=_one_of(DTYPES))
    layout: str = attrs.field(default="nt", validator=_one_of(LAYOUTS))
    out_dtype: str | None = attrs.field(default=None, validator=_one_of(OUT_DTYPES, none_ok=True))
    fusion: Fusion = attrs.field(default=Fusion(), validator=_fusion)
    groups: int = attrs.field(default=0, validator=_count)
    batch: int = attrs.field(default=0, validator=_count)

    def __attrs_post_init__(self):
        if self.groups and self.M is not None:
            raise ValueError(f"GemmProblem M: a grouped GEMM's rows (T) and offsets are known at run time; expected "
                             f"M=None with groups={self.groups}, found M={self.M}")
        if self.batch and (self.M is None or self.groups):
            raise ValueError("GemmProblem batch: a batch axis is for a static M; expected batch=0 with dynamic M or "
                             f"groups, found batch={self.batch}")

    @property
    def out(self) -> str:
        """C's dtype: ``out_dtype``, else ``default_out(dtype)``."""
        return self.out_dtype or default_out(self.dtype)

    @property
    def dynamic(self) -> bool:
        """M is known at run time (one kernel per bucket of M)."""
        return self.M is None and not self.groups

    @property
    def grouped(self) -> bool:
        return self.groups > 0

    @property
    def mx(self) -> bool:
        return self.dtype in MX_FORMATS

    def rows(self, m: int | None = None, group_rows=None) -> int:
        """The concrete rows of C: M, else the run-time ``m`` (dynamic M) or ``sum(group_rows)``
        (grouped); a ValueError naming what is missing."""
        if self.grouped:
            if group_rows is None or len(group_rows) != self.groups:
                raise ValueError(f"grouped GEMM of {self.groups} groups: expected group_rows, {self.groups} row counts "
                                 f"(>= 0), found {group_rows!r}")
            if any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in group_rows) or sum(group_rows) < 1:
                raise ValueError(f"grouped GEMM group_rows: expected ints >= 0 with a positive sum, found {group_rows!r}")
            return sum(group_rows)
        if self.M is not None:
            return self.M
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"dynamic-M GEMM: expected the run-time m, a positive int, found {m!r}")
        return m

    def describe(self) -> str:
        m = "M" if self.dynamic else ("T" if self.grouped else str(self.M))
        text = f"{self.layout} {self.dtype}->{self.out} {m}x{self.N}x{self.K}"
        text += f" G={self.groups}" if self.groups else ""
        text += f" batch {self.batch}" if self.batch else ""
        return text + ("" if self.fusion.empty else f" epilogue {self.fusion.describe()}")

    def to_json(self) -> dict:
        return {**attrs.asdict(self, recurse=False), "fusion": self.fusion.as_dict(), "out_dtype": self.out}


def stored(x, transposed: bool):
    """An operand as it is stored: its transpose (C-contiguous) where the layout says ``t``."""
    import numpy as np

    return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if transposed else x


@attrs.define
class GemmData:
    """A validation's inputs and what the kernel must give. ``arrays``: the kernel's inputs by
    parameter name (A and B as stored per the layout; MX: ``A``/``B`` the logical element arrays
    ``[M, K]`` / ``[K, N]``, which the target packs, and ``SA``/``SB`` their E8M0 scales;
    ``offsets``; the fused epilogue's inputs); ``want``: C's float64 reference; ``bound``: the error
    allowed per element; ``out``: C's dtype; ``shape``: C's shape."""

    arrays: dict
    want: object
    bound: object
    out: str
    shape: tuple

    def output(self):
        """C, poisoned (NaN; i32: a sentinel), for the kernel to fill."""
        import numpy as np

        dtype = out_numpy(self.out)
        if self.out == "i32":
            return np.full(self.shape, -(2**31), dtype)
        return np.full(self.shape, np.nan, dtype)

    def arguments(self, params, c) -> list:
        """The kernel's arguments in signature order (``params``: the plan's ``Param`` records): C is
        ``c``, the inputs come from ``arrays`` by name, anything else (a split-K workspace, its
        ticket counters) zeros of the parameter's shape and dtype."""
        import numpy as np

        def one(param):
            if param.name == "C":
                return c
            if param.name in self.arrays:
                return self.arrays[param.name]
            return np.zeros(tuple(int(x) for x in param.shape), np.dtype(param.dtype))

        return [one(param) for param in params]

    def ratio(self, c) -> float:
        """The largest ``|C - want| / bound`` (inf for a non-finite C or an error where the bound is 0)."""
        import numpy as np

        got = np.asarray(c).astype(np.float64)
        if not np.isfinite(got).all():
            return float("inf")
        err = np.abs(got - self.want)
        ratio = np.divide(err, self.bound, out=np.where(err > 0, np.inf, 0.0), where=self.bound > 0)
        return float(ratio.max()) if ratio.size else 0.0

    def relative(self, c) -> float:
        """``||C - want|| / ||want||`` (Frobenius; inf for a non-finite C): the error in one number."""
        import numpy as np

        got = np.asarray(c).astype(np.float64)
        if not np.isfinite(got).all():
            return float("inf")
        return float(np.linalg.norm(got - self.want) / max(float(np.linalg.norm(self.want)), 1e-30))


def out_numpy(out: str):
    """C's numpy dtype (bf16: ml_dtypes.bfloat16)."""
    import ml_dtypes
    import numpy as np

    return {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32,
            "f64": np.float64}[out]


def element_numpy(dtype: str):
    """(A's, B's) numpy element types of a dense dtype."""
    import ml_dtypes
    import numpy as np

    one = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
           "bf8": ml_dtypes.float8_e5m2, "i8": np.int8, "f32": np.float32, "f64": np.float64}
    if "_" in dtype:
        a, b = dtype.split("_")
        return one[a], one[b]
    return one[dtype], one[dtype]


def random_inputs(problem: GemmProblem, seed: int = 0, m: int | None = None, group_rows=None,
                  approx_tanh: bool = False) -> GemmData:
    """The inputs of one validation of ``problem`` (the module docstring: why these values) at its
    concrete rows (``GemmProblem.rows``), with C's float64 reference and error bound (``approx_tanh``: the
    kernel evaluates silu / gelu in the tanh form, ``epilogue.error_bound``)."""
    import numpy as np

    from . import epilogue, grouped

    rng = np.random.default_rng(seed)
    rows, f = problem.rows(m, group_rows), problem.fusion
    M, N, K, G = rows, problem.N, problem.K, problem.groups
    batch = (problem.batch,) if problem.batch else ()
    if problem.mx:
        return _mx_inputs(problem, rng, rows)
    ta, tb = element_numpy(problem.dtype)
    step = 1 if problem.dtype == "i8" else 1 / 8
    a = (rng.integers(-4, 5, (*batch, M, K)) * step).astype(ta)
    b_shape = ((G, N, K) if problem.layout[1] == "t" else (G, K, N)) if G else (*batch, K, N)
    b = (rng.integers(-4, 5, b_shape) * step).astype(tb)
    arrays = {"A": a}
    if G:
        off = np.asarray(grouped.offsets_of(list(group_rows)), np.int32)
        arrays.update(B=b, offsets=off)
        acc = grouped.reference(a.astype(np.float64), b.astype(np.float64), off, problem.layout)
    else:
        arrays.update(A=stored(a, problem.layout[0] == "t"), B=stored(b, problem.layout[1] == "t"))
        acc = a.astype(np.float64) @ b.astype(np.float64)
    fused = epilogue.random_inputs(f, M, N, rng, out_numpy(problem.out), groups=G)
    arrays.update(fused)
    rowwise = grouped.per_row(fused, arrays["offsets"]) if G else fused
    want = epilogue.reference(acc, f, rowwise)
    bound = epilogue.error_bound(acc, f, rowwise, problem.out, approx_tanh=approx_tanh)
    return GemmData(arrays, want, bound, problem.out, (*batch, M, N))


def _mx_inputs(problem: GemmProblem, rng, M: int) -> GemmData:
    """MX inputs: elements from the format's values (standard normal, rounded), E8M0 scales 122..132
    per 32 elements of K; the bound adds the f32 accumulation's ``MX_ACC_TOL * |A| @ |B|``."""
    import numpy as np

    from ...isa import formats
    from . import epilogue

    if problem.K % MX_BLOCK:
        raise ValueError(f"MX GEMM K: expected a multiple of {MX_BLOCK} (one E8M0 scale per {MX_BLOCK} elements), "
                         f"found {problem.K}")
    N, K, fmt = problem.N, problem.K, formats.fmt(MX_FORMATS[problem.dtype]).dtype
    a, b = rng.standard_normal((M, K)).astype(fmt), rng.standard_normal((K, N)).astype(fmt)
    sa = rng.integers(122, 133, (M, K // MX_BLOCK)).astype(np.uint8)
    sb = rng.integers(122, 133, (N, K // MX_BLOCK)).astype(np.uint8)
    a64 = a.astype(np.float64) * np.exp2(np.repeat(sa - 127.0, MX_BLOCK, axis=1))
    b64 = b.astype(np.float64) * np.exp2(np.repeat(sb - 127.0, MX_BLOCK, axis=1)).T
    acc = a64 @ b64
    fused = epilogue.random_inputs(problem.fusion, M, N, rng, out_numpy(problem.out))
    want = epilogue.reference(acc, problem.fusion, fused)
    bound = epilogue.error_bound(acc, problem.fusion, fused, problem.out,
                                 acc_error=MX_ACC_TOL * (np.abs(a64) @ np.abs(b64)))
    return GemmData({"A": a, "B": b, "SA": sa, "SB": sb, **fused}, want, bound, problem.out, (M, N))


@attrs.frozen
class Validation:
    """A kernel against the float64 reference: the largest error over the bound (``ok``: at most 1),
    where it ran, the seconds it took and the relative error ``||C - want|| / ||want||``."""

    ratio: float
    where: str
    seconds: float
    relative: float = float("nan")

    @property
    def ok(self) -> bool:
        return self.ratio <= 1



def execute_cuda(p, data: GemmData, run, *, emit, target: str, gpu: str, limit: int):
    """A CUDA target's ``execute``: plan ``p`` on ``data`` through ``run(plan, arguments)`` (the runtime's GPU
    runner, ``runtime.cuda.run_gemm``, which fills C in place), else in the CUDA emulator (``emit(p)`` with
    ``target``) for at most ``limit`` multiply-adds, a ValueError naming ``gpu`` beyond. (C, where)."""
    c = data.output()
    args = data.arguments(p.params, c)
    if run is not None:
        run(p, args)
        return c, "the NVIDIA GPU"
    macs = c.size * p.K
    if macs > limit:
        raise ValueError(f"{target} GEMM validation of {macs} multiply-adds needs {gpu} (the CUDA emulator takes at "
                         f"most EMULATED_MACS = {limit}); run it where one is present")
    from ...emulator import emulate

    emulate(emit(p), *args, target=target)
    return c, "the CUDA emulator (no GPU runner)"

__all__ = ["DENSE_DTYPES", "DTYPES", "LAYOUTS", "MX_ACC_TOL", "MX_BLOCK", "MX_FORMATS", "OUT_DTYPES", "GemmData",
           "GemmProblem", "Validation", "default_out", "element_numpy", "out_numpy", "random_inputs", "stored",
           "execute_cuda"]
