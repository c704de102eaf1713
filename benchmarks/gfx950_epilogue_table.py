"""The fused epilogue on gfx950, validated in the CPU wavefront emulator for every epilogue op set x
dtype x layout: a numpy-checked table (no GPU).

Run: python benchmarks/gfx950_epilogue_table.py [--dtypes f16,bf16,...] [--layouts nn,nt,tn,tt]
     [--sets bias,relu,...] [--results benchmarks/journal/YYYY-MM.md]

Each case builds ``gfx950_gemm`` / ``gfx950_mx_gemm`` with one ``kernels.gemm.epilogue.Fusion`` on a
small odd problem (M=33, N=40, K=72; MX K=96, a multiple of 32), the smallest tile that plans
(``SMALL_TILES``), emulates it (``tvm_cdna4.emulator.emulate``) and compares C with
``kernels.gemm.epilogue.reference`` of the float64 product within ``kernels.gemm.epilogue.error_bound``. The operands are
small integers (A in [-3, 3], B in [-3, 3] / 8; MX: integers with E8M0 scales 2^-2 .. 2^2), exact in
every input format, so the f32 accumulator is the exact product and the comparison measures the
epilogue alone (``gemm_rtol`` 0). The fused inputs are ``kernels.gemm.epilogue.random_inputs`` (scales in
[0.5, 2), bias and residual in [-1, 1)). The output dtype rotates with the layout over the dtype's
outputs (``out_for``), so every output of every dtype meets every op set. A cell is the largest
``|C - reference| / bound`` of the case (``FAIL`` above 1).

``--results`` appends the dated section (``RESULTS_HEADING`` and the day: the table, the versions) to
that file, a month of ``benchmarks/journal/``, or replaces that day's section; the row of
benchmarks/RESULTS.md (today's figures) is updated by hand.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import platform
import sys
import time

import attrs
import ml_dtypes
import numpy as np

from tvm_cdna4.emulator import emulate
from tvm_cdna4.kernels.gemm.epilogue import Fusion, error_bound, random_inputs, reference
from tvm_cdna4.kernels.gfx950.gemm import DTYPES, LAYOUTS, default_config, gfx950_gemm, plan
from tvm_cdna4.kernels.gfx950.mx_gemm import MX_FORMATS, default_mx_config, gfx950_mx_gemm, pack_operands

RESULTS_HEADING = "## Fused epilogue on gfx950: emulator table"
FLOAT_DTYPES = ("f16", "bf16", "fp8", "bf8", "fp8_bf8", "bf8_fp8", "f32")  # the dense dtypes with f32 accumulators
ALL = dict(bias=True, residual=True, row_scale=True, col_scale=True)
OP_SETS = {
    "bias": Fusion(bias=True), "row_scale": Fusion(row_scale=True), "col_scale": Fusion(col_scale=True),
    "residual": Fusion(residual=True), "relu": Fusion(activation="relu"), "silu": Fusion(activation="silu"),
    "gelu": Fusion(activation="gelu"), "all+relu": Fusion(activation="relu", **ALL),
    "all+silu": Fusion(activation="silu", **ALL), "all+gelu": Fusion(activation="gelu", **ALL),
}
SHAPE, MX_SHAPE = (33, 40, 72), (33, 40, 96)
SMALL_TILES = ((32, 64), (64, 64))  # (block_m, block_n) tried before the dtype's default
OUT_NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


@attrs.frozen
class Case:
    """One emulated case: the worst ``|C - reference| / error_bound`` and ``|C - reference|``."""

    dtype: str
    layout: str
    out: str
    fusion: Fusion
    ratio: float
    max_error: float
    seconds: float

    @property
    def passed(self) -> bool:
        return self.ratio <= 1.0


def out_for(dtype: str, layout: str) -> str:
    """The output dtype of a table row: the dtype's outputs in turn over the layouts (MX: f32)."""
    outs = ("f32",) if dtype in MX_FORMATS else DTYPES[dtype].outs
    return outs[LAYOUTS.index(layout) % len(outs)]


def small_config(dtype: str, layout: str):
    """The smallest tile of ``SMALL_TILES`` that plans (fast to emulate), else the dtype's default;
    MX dtypes their default (``plan_mx_gemm`` accepts 32x64 and 64x64 tiles whose scale stores race
    in LDS: the emulator stops them, on main too)."""
    if dtype in MX_FORMATS:
        return default_mx_config(dtype, layout)
    base = default_config(dtype)
    for bm, bn in SMALL_TILES:
        cfg = attrs.evolve(base, block_m=bm, block_n=bn)
        try:
            plan(*SHAPE, dtype, layout, config=cfg)
            return cfg
        except ValueError:
            continue
    return base


def operands(rng, dtype: str, layout: str, M: int, N: int, K: int):
    """(kernel arrays A, B (MX: packed words and the E8M0 scales SA, SB), the exact float64 product):
    small integers (B / 8 for the dense dtypes), exact in every input format."""
    a = rng.integers(-3, 4, (M, K)).astype(np.float64)
    b = rng.integers(-3, 4, (K, N)).astype(np.float64)
    if dtype in MX_FORMATS:
        from tvm_cdna4.isa import formats

        np_t = formats.fmt(MX_FORMATS[dtype]).dtype
        sa = rng.integers(125, 130, (M, K // 32)).astype(np.uint8)
        sb = rng.integers(125, 130, (N, K // 32)).astype(np.uint8)
        a64 = a * np.exp2(np.repeat(sa - 127.0, 32, axis=1))
        b64 = b * np.exp2(np.repeat(sb - 127.0, 32, axis=1)).T
        return (*pack_operands(a.astype(np_t), b.astype(np_t), MX_FORMATS[dtype], layout), sa, sb), a64 @ b64
    b = b / 8
    spec = DTYPES[dtype]
    ta, tb = spec.numpy if isinstance(spec.numpy, tuple) else (spec.numpy, spec.numpy)
    A = np.ascontiguousarray(a.T) if layout[0] == "t" else a
    B = np.ascontiguousarray(b.T) if layout[1] == "t" else b
    return (A.astype(ta), B.astype(tb)), a @ b


def run_case(dtype: str, layout: str, out: str, fusion: Fusion, shape: tuple[int, int, int] | None = None,
             config=None, k_splits: int = 1, seed: int = 0) -> Case:
    """Emulate one fused GEMM and compare it with ``kernels.gemm.epilogue.reference`` (module docstring);
    ``shape``, ``config`` default to the table's (``SHAPE`` / ``MX_SHAPE``, ``small_config``)."""
    mx = dtype in MX_FORMATS
    M, N, K = shape or (MX_SHAPE if mx else SHAPE)
    config = config or small_config(dtype, layout)
    rng = np.random.default_rng(seed)
    arrays, acc = operands(rng, dtype, layout, M, N, K)
    c = np.zeros((M, N), OUT_NP[out])
    inputs = random_inputs(fusion, M, N, rng, c.dtype)
    p = plan(M, N, K, dtype, layout, out, config, k_splits=k_splits, fusion=fusion)
    workspace = [np.zeros(q.shape, q.dtype) for q in p.epilogue.params if q.name not in inputs]
    kernel = gfx950_mx_gemm(M, N, K, dtype, layout, config, fusion=fusion) if mx else \
        gfx950_gemm(M, N, K, dtype, layout, out, config, k_splits=k_splits, fusion=fusion)
    start = time.perf_counter()
    emulate(kernel, *arrays, c, *(inputs[name] for name in fusion.inputs()), *workspace)
    seconds = time.perf_counter() - start
    with np.errstate(over="ignore"):  # 2^x overflows to inf where the activation saturates
        want = reference(acc, fusion, inputs)
    err = np.abs(c.astype(np.float64) - want)
    bound = error_bound(acc, fusion, inputs, out)  # exact operands: the accumulator is the product
    ratio = np.where(err == 0, 0.0, err / np.where(bound > 0, bound, 1e-300))  # an exact zero: 0 of a zero bound
    return Case(dtype, layout, out, fusion, float(np.max(ratio)), float(np.max(err)), seconds)


def table(cases: list[Case], sets: list[str]) -> str:
    """Markdown: one row per dtype, layout and output, one column per op set; a cell is the worst
    error over its bound (``FAIL`` above 1)."""
    names = {f: n for n, f in OP_SETS.items()}
    rows: dict[tuple[str, str, str], dict[str, Case]] = {}
    for case in cases:
        rows.setdefault((case.dtype, case.layout, case.out), {})[names[case.fusion]] = case
    lines = ["| dtype | layout | out | " + " | ".join(sets) + " |", "|---|---|---|" + "---|" * len(sets)]
    for (dtype, layout, out), row in rows.items():
        cells = [(f"{row[s].ratio:.3f}" if row[s].passed else f"**FAIL** {row[s].ratio:.2f}") if s in row else ""
                 for s in sets]
        lines.append(f"| {dtype} | {layout} | {out} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def versions() -> str:
    def version(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    return (f"tvm-cdna4 {version('tvm-cdna4')}, apache-tvm-tirx {version('apache-tvm-tirx')}, numpy {np.__version__}, "
            f"Python {platform.python_version()}")


def write_results(path: str, text: str) -> None:
    """Replace the section of ``path`` whose heading line is ``text``'s (the same day's run), or append
    ``text``: earlier days' sections stay (the journal is a diary)."""
    with open(path) as f:
        old = f.read()
    heading = text.splitlines()[0]
    start = old.find(heading + "\n")
    if start < 0:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    else:
        end = old.find("\n## ", start + len(heading))
        new = old[:start] + text + ("\n" + old[end:] if end >= 0 else "\n")
    with open(path, "w") as f:
        f.write(new)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default=",".join((*FLOAT_DTYPES, *MX_FORMATS)))
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--sets", default=",".join(OP_SETS), help=f"op sets, of {', '.join(OP_SETS)}")
    ap.add_argument("--results", help="append the dated table to this journal file (benchmarks/journal/YYYY-MM.md)")
    args = ap.parse_args(argv)
    sets = args.sets.split(",")
    start, cases = time.perf_counter(), []
    for dtype in args.dtypes.split(","):
        for layout in args.layouts.split(","):
            for name in sets:
                cases.append(run_case(dtype, layout, out_for(dtype, layout), OP_SETS[name]))
                print(f"{dtype} {layout} {cases[-1].out} {name}: {cases[-1].ratio:.3f} of the bound "
                      f"(max |error| {cases[-1].max_error:.3g})", file=sys.stderr)
    minutes = (time.perf_counter() - start) / 60
    failed = sum(not c.passed for c in cases)
    body = table(cases, sets)
    now = datetime.datetime.now()
    summary = (f"{len(cases)} cases, {failed} failed; {minutes:.1f} min on the CPU "
               f"({now.strftime('%Y-%m-%d %H:%M')}; {versions()})")
    print(body + "\n\n" + summary)
    if args.results:
        write_results(args.results, f"{RESULTS_HEADING} ({now:%Y-%m-%d})\n\n{METHOD}\n\n{body}\n\n{summary}\n")
    return 1 if failed else 0


METHOD = """Method: `python benchmarks/gfx950_epilogue_table.py --results benchmarks/journal/YYYY-MM.md` builds every
epilogue op set (each step alone, and all of them with each activation) for every dtype with f32
accumulators and every layout with `kernels.gfx950.gemm.gfx950_gemm` / `gfx950_mx_gemm` (a small
tile: 32x64 or 64x64 where it plans; MX: the default 128x128), emulates it in the CPU wavefront emulator on M=33, N=40, K=72
(MX: K=96) and compares C with `kernels.gemm.epilogue.reference` (float64) within
`kernels.gemm.epilogue.error_bound` (docs/gfx950_gemm.md, "Fused epilogue"). Operands are small integers (exact
in every format: the f32 accumulator is the exact product, so the cell measures the epilogue
alone); the output dtype rotates with the layout over the dtype's outputs. A cell is the largest
|C - reference| / bound of the case: below 1 passes. Static: no GPU ran."""


if __name__ == "__main__":
    sys.exit(main())
