"""Our gfx950 GEMMs next to Triton's own gfx950 code: one static analysis for both (no GPU, no ROCm).

Run: python benchmarks/gfx950_vs_triton.py [--size 4096] [--dtypes f16,fp8,mxfp8] [--layouts nt,nn]
     [--quick] [--json benchmarks/runs/gfx950_vs_triton.json] [--results benchmarks/journal/YYYY-MM.md] [--ours-only]
     [--lds-dma]

``--ours-only`` rebuilds and analyses only our kernels of ``--dtypes``/``--layouts``; Triton's
rows, and every row of the other problems, are read back from the ``--json`` file of an earlier
full run (which must have the same size) and written again with ours replaced. Triton's 336
configurations take long to compile on a small machine and do not change with our schedules.
``--lds-dma`` adds, after our default row of each dense problem, the direct-to-LDS variant
(``dma_config``) as a second "ours" row (printed and in the JSON; the results section keeps the
default's).

Triton (the ``bench`` extra: ``pip install 'tvm-cdna4[bench]'``) compiles its tutorial matmul
(``triton_tutorial_matmul.py``) offline for ``GPUTarget("hip", "gfx950", 64)`` over AMD's
recommended configuration space (``TRITON_SPACE``), with what its JIT would infer from real
tensors of the problem: pointers 16-byte aligned and within 2 GiB (``tt.divisibility 16``,
``tt.pointer_range 32``: buffer loads), sizes and strides divisible by 16, unit strides constexpr.
MX formats go through ``tl.dot_scaled`` (``mx_matmul_kernel``). Ours is the default config of
``gfx950_gemm`` / ``gfx950_mx_gemm`` for the same problem. Both assembly listings go through
``tvm_cdna4.report.kernel_report`` (main loop, instruction mix, resources, llvm-mca-22,
estimated fraction of the dtype's peak: see that module's docstring). Layouts: A is ``M x K``
row-major; B is ``N x K`` (K-contiguous) for ``nt`` and ``K x N`` (N-contiguous) for ``nn``;
C is ``M x N`` f32 (i32 for i8). Ours also runs ``tn``/``tt`` (A ``K x M``); Triton's rows are
compiled for ``nt`` and ``nn`` (MX: ``nt``) only (``triton_layout``). Configurations compile one after another.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import warnings

import attrs

import tvm_cdna4
from tvm_cdna4.rocm.build import KernelInfo, llvm_tool, parse_metadata
from tvm_cdna4.kernels.gfx950.gemm import DTYPES, default_config, dma_config, gfx950_gemm
from tvm_cdna4.kernels.gfx950.mx_gemm import MX_FORMATS, default_mx_config, gfx950_mx_gemm
from tvm_cdna4.report import KernelReport, LoopReport, kernel_report

GEMM_DTYPES = ("f16", "bf16", "fp8", "bf8", "fp8_bf8", "bf8_fp8", "i8")
LAYOUTS = ("nt", "nn")
# Triton element types of A, B and C per dtype
TRITON_TYPES = {"f16": ("fp16", "fp16", "fp32"), "bf16": ("bf16", "bf16", "fp32"),
                "fp8": ("fp8e4nv", "fp8e4nv", "fp32"), "bf8": ("fp8e5", "fp8e5", "fp32"),
                "fp8_bf8": ("fp8e4nv", "fp8e5", "fp32"), "bf8_fp8": ("fp8e5", "fp8e4nv", "fp32"),
                "i8": ("i8", "i8", "i32")}
TRITON_MX_FORMATS = {"mxfp8": "e4m3", "mxbf8": "e5m2", "mxfp6": "e2m3", "mxbf6": "e3m2", "mxfp4": "e2m1"}
RESULTS_HEADING = "## gfx950 against Triton: static comparison"


@attrs.frozen
class TritonConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    nonkdim: int  # matrix_instr_nonkdim: 16 or 32 (MFMA M/N)
    num_stages: int = 2

    @property
    def label(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages} "
                f"mfma{self.nonkdim}")


def triton_space(dtype: str, quick: bool = False) -> tuple[TritonConfig, ...]:
    """AMD's recommended gfx950 GEMM space: 128x128 / 256x256 tiles, 4 / 8 warps, 2 stages,
    16 / 32 MFMAs, BLOCK_K 64 / 128 (16-bit types also 32; MX 128 / 256: one scaled MFMA K step
    and two). ``quick``: the first configuration only."""
    if dtype in MX_FORMATS:
        ks = (128, 256)
    else:
        ks = (32, 64, 128) if dtype in ("f16", "bf16") else (64, 128)
    space = tuple(TritonConfig(b, b, k, w, nk) for b in (256, 128) for k in ks for w in (8, 4) for nk in (16, 32))
    return space[:1] if quick else space


def problem_formats(dtype: str) -> tuple[str, str]:
    """A and B element formats of a dtype."""
    if dtype in MX_FORMATS:
        return (MX_FORMATS[dtype],) * 2
    return DTYPES[dtype].formats


@attrs.frozen
class Row:
    """One kernel of the table: ours or a Triton config, its report, or why there is none."""

    kernel: str  # "ours" or "Triton"
    dtype: str
    layout: str
    config: str
    report: KernelReport | None
    error: str | None = None

    @property
    def est(self) -> float | None:
        return self.report.est_fraction if self.report else None

    def as_dict(self) -> dict:
        out = {"kernel": self.kernel, "dtype": self.dtype, "layout": self.layout, "config": self.config,
               "error": self.error}
        if self.report:
            r, loop = self.report, self.report.loop
            out |= {"vgprs": r.info.vgprs, "agprs": r.info.agprs, "sgprs": r.info.sgprs, "lds_bytes": r.info.lds_bytes,
                    "scratch_bytes": r.info.scratch_bytes, "waves_per_simd": r.waves_per_simd,
                    "loop_instructions": loop.instructions, "mix": loop.mix, "mfmas": loop.mfmas,
                    "mfma_ops": loop.mfma_ops, "mfma_cycles": loop.mfma_bound_cycles, "mca_cycles": loop.mca_cycles,
                    "mca_mfma_cycles": loop.mca_mfma_cycles, "mca_error": loop.mca_error,
                    "mfma_pipe_share": loop.mfma_share, "idle_cycles": loop.idle_cycles,
                    "formats": list(r.formats), "peak_ops_per_cycle": r.peak_ops_per_cycle, "peak_mfma": r.peak_mfma,
                    "est_fraction_of_peak": r.est_fraction}
        return out


# --------------------------------------------------------------------------------------------- ours

def ours_row(dtype: str, layout: str, size: int, lds_dma: bool = False) -> Row:
    """Our default kernel for the problem (``lds_dma``: the direct-to-LDS variant), built and analysed."""
    if lds_dma:
        cfg = dma_config(dtype)
        func = gfx950_gemm(size, size, size, dtype, layout, config=cfg)
        label = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} w4 mfma{cfg.mfma.split('x')[0]} (lds_dma option)"
    elif dtype in MX_FORMATS:
        cfg = default_mx_config(dtype, layout)
        func = gfx950_mx_gemm(size, size, size, dtype, layout, config=cfg)
        label = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} (default)"
    else:
        cfg = default_config(dtype)
        func = gfx950_gemm(size, size, size, dtype, layout, config=cfg)
        label = f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k} w4 mfma{cfg.mfma.split('x')[0]} (default)"
    result = tvm_cdna4.build(func)
    return Row("ours", dtype, layout, label, kernel_report(result.asm, result.kernel(), problem_formats(dtype)))


# ------------------------------------------------------------------------------------------- Triton

def import_triton():
    """``triton`` and the tutorial kernels, or a SystemExit that says how to install Triton."""
    try:
        import triton  # noqa: F401
    except ImportError:
        raise SystemExit("gfx950_vs_triton: Triton is not installed; install the bench extra "
                         "(pip install 'tvm-cdna4[bench]', or pip install triton)") from None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        import triton_tutorial_matmul
    finally:
        sys.path.pop(0)
    return triton, triton_tutorial_matmul


def specialise(fn, pointers: dict[str, str], ints: dict[str, int], constexprs: dict):
    """(signature, constexprs, attrs) for ``ASTSource`` as Triton's JIT infers them from real
    arguments: pointers 16-byte aligned within 2 GiB, integers equal to 1 constexpr, integers
    divisible by 16 marked so."""
    signature, consts, attrs_ = {}, dict(constexprs), {}
    for i, name in enumerate(fn.arg_names):
        if name in pointers:
            signature[name] = "*" + pointers[name]
            attrs_[(i,)] = [["tt.divisibility", 16], ["tt.pointer_range", 32]]
        elif name in ints and ints[name] == 1:
            signature[name], consts[name] = "constexpr", 1
        elif name in ints:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs_[(i,)] = [["tt.divisibility", 16]]
        else:
            signature[name] = "constexpr"
    return signature, consts, attrs_


def triton_layout(dtype: str, layout: str) -> bool:
    """Whether ``triton_problem`` states the layout: A ``M x K``; B ``N x K`` or ``K x N`` (MX: the
    tutorial's ``mx_matmul_kernel`` takes K-packed operands, i.e. ``nt`` only)."""
    return layout == "nt" or (layout == "nn" and dtype not in MX_FORMATS)


def triton_problem(tl, kernels, dtype: str, layout: str, size: int, cfg: TritonConfig):
    """(kernel function, signature, constexprs, attrs) of one problem and config."""
    M = N = K = size
    if dtype in MX_FORMATS:
        fmt = TRITON_MX_FORMATS[dtype]
        per_byte = 2 if fmt == "e2m1" else 1
        kb = K // per_byte  # bytes per row; B is N x K (nt: the only MX layout ours has)
        ints = {"M": M, "N": N, "K": K, "stride_am": kb, "stride_ak": 1, "stride_bk": 1, "stride_bn": kb,
                "stride_asm": K // 32, "stride_bsn": K // 32, "stride_cm": N, "stride_cn": 1}
        pointers = {"a_ptr": "u8", "b_ptr": "u8", "a_scale_ptr": "u8", "b_scale_ptr": "u8", "c_ptr": "fp32"}
        consts = {"FORMAT": fmt, "PER_BYTE": per_byte}
        fn = kernels.mx_matmul_kernel
    else:
        ta, tb, tc = TRITON_TYPES[dtype]
        b_strides = {"stride_bk": 1, "stride_bn": K} if layout == "nt" else {"stride_bk": N, "stride_bn": 1}
        ints = {"M": M, "N": N, "K": K, "stride_am": K, "stride_ak": 1, **b_strides, "stride_cm": N, "stride_cn": 1}
        pointers = {"a_ptr": ta, "b_ptr": tb, "c_ptr": tc}
        consts = {"ACC_TYPE": tl.int32 if tc == "i32" else tl.float32}
        fn = kernels.matmul_kernel
    consts |= {"BLOCK_SIZE_M": cfg.block_m, "BLOCK_SIZE_N": cfg.block_n, "BLOCK_SIZE_K": cfg.block_k, "GROUP_SIZE_M": 8}
    return (fn, *specialise(fn, pointers, ints, consts))


def compile_triton(dtype: str, layout: str, size: int, cfg: TritonConfig) -> tuple[str, int]:
    """Triton's gfx950 assembly for one problem and config, and its (dynamic) LDS bytes."""
    triton, kernels = import_triton()
    from triton.backends.compiler import GPUTarget

    fn, signature, consts, attrs_ = triton_problem(triton.language, kernels, dtype, layout, size, cfg)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
        compiled = triton.compile(triton.compiler.ASTSource(fn, signature, consts, attrs_),
                                  target=GPUTarget("hip", "gfx950", 64),
                                  options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages,
                                           "matrix_instr_nonkdim": cfg.nonkdim})
    return compiled.asm["amdgcn"], compiled.metadata.shared


def triton_row(dtype: str, layout: str, size: int, cfg: TritonConfig) -> Row:
    """One Triton config compiled and analysed; a compile failure is a row with its first line."""
    try:
        asm, shared = compile_triton(dtype, layout, size, cfg)
    except SystemExit:
        raise
    except Exception as err:  # Triton refuses a config: record why, keep going
        # Triton's CompilationError quotes the kernel source first and ends with the reason
        last = next((ln for ln in reversed(str(err).splitlines()) if ln.strip()), "")
        return Row("Triton", dtype, layout, cfg.label, None, f"{type(err).__name__}: {last.strip()[:200]}")
    (info,) = parse_metadata(asm)
    info = attrs.evolve(info, lds_bytes=max(info.lds_bytes, shared))  # Triton's LDS is dynamic
    return Row("Triton", dtype, layout, cfg.label, kernel_report(asm, info, problem_formats(dtype)))


def best(rows: list[Row], min_waves: int = 1) -> Row | None:
    """The row with the highest estimate among those with at least ``min_waves`` waves per SIMD
    (1: launchable, LDS and registers fit); None if there is none."""
    scored = [r for r in rows if r.est is not None and r.report.waves_per_simd >= min_waves]
    return max(scored, key=lambda r: r.est) if scored else None


def row_from_dict(d: dict) -> Row:
    """A row of the JSON file (``Row.as_dict``) back as a Row with its report."""
    if d.get("vgprs") is None:
        return Row(d["kernel"], d["dtype"], d["layout"], d["config"], None, d["error"])
    info = KernelInfo(d["kernel"], d["vgprs"], d["agprs"], d["sgprs"], d["lds_bytes"], d["scratch_bytes"], 256, 0, 0)
    formats = tuple(d["formats"])
    loop = LoopReport(d["loop_instructions"], d["mix"], d["mfma_cycles"], d["mca_cycles"], d["mca_mfma_cycles"],
                      mfmas=d["mfmas"], mfma_ops=d["mfma_ops"], formats=(formats,), mca_error=d["mca_error"])
    report = KernelReport(info, loop, d["waves_per_simd"], formats, d["peak_ops_per_cycle"], d["peak_mfma"])
    return Row(d["kernel"], d["dtype"], d["layout"], d["config"], report, d["error"])


def read_json(path: str, size: int) -> tuple[dict, list[Row]]:
    """(date and versions, rows) of an earlier run's JSON file."""
    data = json.load(open(path))
    if data["size"] != size:
        raise SystemExit(f"gfx950_vs_triton: {path} holds a {data['size']}³ run, not {size}³")
    return data, [row_from_dict(d) for d in data["rows"]]


# ------------------------------------------------------------------------------------------ output

def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f} %"


def table_row(row: Row) -> str:
    if row.report is None:
        return f"| {row.kernel} {row.dtype} {row.layout} | {row.config} | {row.error} |" + " |" * 8
    r, loop = row.report, row.report.loop
    mfma = loop.mix.get("mfma", 0)
    which = ", ".join(f"{n} × {name}" for name, n in loop.mfmas.items())
    waits = loop.mix.get("waitcnt", 0)
    glob = loop.mix.get("global", 0) + loop.mix.get("global_lds", 0)
    return (f"| {row.kernel} {row.dtype} {row.layout} | {row.config} | {r.info.vgprs} ({r.info.agprs}) | {r.waves_per_simd} | "
            f"{which or 0} | {waits} ({waits / mfma:.2f}) | {glob} ({loop.mix.get('global_lds', 0)}) | "
            f"{r.info.lds_bytes} | {r.info.scratch_bytes} | {_pct(loop.mfma_share)} | **{_pct(r.est_fraction)}** |"
            if mfma else f"| {row.kernel} {row.dtype} {row.layout} | {row.config} | no main loop |" + " |" * 8)


TABLE_HEAD = ("| kernel | config | VGPR (AGPR) | waves/SIMD | MFMA per loop | waitcnt per loop (per MFMA) | "
              "global loads (→LDS) | LDS B | scratch B | llvm-mca MFMA-pipe share | est. % of dtype peak |\n"
              "|" + "---|" * 11)


def verdict(ours: Row, triton_best: Row | None) -> str:
    """Which target ours misses: 90 % of the dtype's peak (85 % for MX), Triton's best."""
    target = 0.85 if ours.dtype in MX_FORMATS else 0.90
    misses = []
    if ours.est is None or ours.est < target:
        misses.append(f"below {100 * target:.0f} %")
    if triton_best is not None and (ours.est or 0) < triton_best.est:
        misses.append(f"below Triton's best ({_pct(triton_best.est)})")
    return "; ".join(misses) or "meets both"


def versions() -> dict[str, str]:
    mca = llvm_tool("llvm-mca")
    mca_version = subprocess.run([mca, "--version"], capture_output=True, text=True).stdout if mca else ""
    try:
        triton_version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton_version = "not installed"
    return {"triton": triton_version, "apache-tvm-tirx": importlib.metadata.version("apache-tvm-tirx"),
            "llvm-mca": (re.search(r"LLVM version (\S+)", mca_version) or [None, "not installed"])[1]}


def results_section(rows: list[Row], size: int, date: str, info: dict[str, str], command: str, reused: str = "") -> str:
    """The dated journal section (``--results``): method, versions, metric definitions, the summary table, failures.
    ``reused``: a sentence saying which rows come from an earlier run (``--ours-only``)."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for row in rows:
        groups.setdefault((row.dtype, row.layout), []).append(row)
    lines = [f"{RESULTS_HEADING} ({date[:10]})", "",
             f"Method: `{command}` on this 2-core CPU machine, {date} (no AMD GPU, no ROCm); Triton "
             f"{info['triton']}, apache-tvm-tirx {info['apache-tvm-tirx']}, Debian llvm-mca {info['llvm-mca']} "
             "(`-mtriple=amdgcn-amd-amdhsa -mcpu=gfx950 -iterations=200`). Problem "
             f"{size}³; row-major A `M x K` (`n?`) or `K x M` (`t?`), B `K x N` (`?n`) or `N x K` (`?t`), C f32 (i8: i32); "
             "Triton's rows: `nt` and `nn` (MX: `nt`, what its `mx_matmul_kernel` takes). Triton: its tutorial "
             "matmul (`benchmarks/triton_tutorial_matmul.py`, MX formats through `tl.dot_scaled`) compiled offline for "
             "`GPUTarget(\"hip\", \"gfx950\", 64)` with the JIT's specialisations (pointers `tt.divisibility 16` and "
             "`tt.pointer_range 32`, sizes/strides divisible by 16, unit strides constexpr) over AMD's recommended space "
             "(128x128 / 256x256 tiles, 4 / 8 warps, 2 stages, `matrix_instr_nonkdim` 16 / 32, BLOCK_K 64 / 128, "
             "16-bit types also 32, MX 128 / 256); the row shows Triton's best config by the estimate (all configs in "
             "`benchmarks/runs/gfx950_vs_triton.json`). Ours: the default config. Both listings go through one analysis, "
             "`tvm_cdna4.report.kernel_report`." + (" " + reused if reused else ""), "",
             "Metrics, per main-loop iteration (the basic block with the most MFMAs that branches back to itself; ours "
             "holds two K tiles, Triton's one): VGPR = unified count of the metadata (AGPRs included), waves/SIMD from "
             "registers and LDS (Triton's LDS is its dynamic `shared` size), MFMA instructions and which, `s_waitcnt` "
             "count, global loads and how many go straight to LDS (`buffer_load_* ... lds`), llvm-mca's MFMA-pipe share "
             "(cycles its model keeps the MFMA pipe busy over its cycles per iteration). **est. % of dtype peak** = "
             "MFMA ops of the loop / (MFMA cycles from the catalog's cycle counts + llvm-mca's cycles in which its MFMA "
             "pipe is idle) / the dtype's peak ops per cycle per SIMD (the best catalog MFMA for the operand formats: "
             "f16/bf16 1024, fp8/bf8 2048 with `mfma_scale_f32_16x16x128_f8f6f4`, i8 2048, mxfp6/mxfp4 4096). "
             "llvm-mca-22's gfx950 model charges 4 cycles to every MFMA, hence the catalog's cycle counts for MFMA time.", "",
             "**This is a single-wave static model, not a measurement.** It cannot see latency hiding across the waves of "
             "a SIMD, LDS bank conflicts, memory bandwidth and caches, clocks and power, instruction issue across SIMDs "
             "and waves, or the prologue/epilogue; it assumes the cycles llvm-mca finds the MFMA pipe idle stay idle when "
             "the MFMAs take their real time.", "", TABLE_HEAD]
    summary = []
    for (dtype, layout), group in groups.items():
        ours = next((r for r in group if r.kernel == "ours"), None)
        theirs = [r for r in group if r.kernel == "Triton"]
        top = best(theirs)
        if ours:
            lines.append(table_row(ours))
        if top:
            lines.append(table_row(top))
        elif theirs:
            lines.append(table_row(theirs[0]))
        if ours:
            top2 = best(theirs, min_waves=2)
            summary.append(f"{dtype} {layout}: ours {_pct(ours.est)}, Triton's best {_pct(top.est if top else None)} "
                           f"of {len(theirs)} configs (with ≥ 2 waves/SIMD: {_pct(top2.est if top2 else None)}"
                           f"{', ' + top2.config if top2 else ''}): {verdict(ours, top)}")
    lines += ["", "Against the targets (≥ 90 % of the dtype's peak, MX ≥ 85 %, and ≥ Triton's best):", ""]
    lines += [f"- {s}" for s in summary]
    unfit: dict[str, list[Row]] = {}
    for r in rows:
        if r.report and r.report.waves_per_simd == 0:
            unfit.setdefault(r.config, []).append(r)
    if unfit:
        lines += ["", "Triton configurations that compile but cannot launch (0 waves per SIMD: LDS over 160 KiB or "
                  "registers over 512), left out of the best: " + "; ".join(
                      f"{config} ({', '.join(sorted({r.dtype for r in group}))}; "
                      f"{min(r.report.info.lds_bytes for r in group)}-{max(r.report.info.lds_bytes for r in group)} B LDS)"
                      for config, group in unfit.items()) + "."]
    failures = sorted({(r.dtype, r.error) for r in rows if r.error})
    if failures:
        lines += ["", "Triton configurations that did not compile (the error's last line):", ""]
        lines += [f"- {dtype}: {error}" for dtype, error in failures]
    return "\n".join(lines) + "\n"


def write_results(section: str, path: str) -> None:
    """Replace the section with the same heading line in ``path`` (up to the next heading of any
    level, so hand-written ``###`` notes after it stay), or append it."""
    text = open(path).read() if os.path.exists(path) else ""
    heading = section.splitlines()[0]
    start = text.find(heading + "\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n#", start + len(heading))
        text = text[:start] + section + (text[nxt:] if nxt >= 0 else "")
    with open(path, "w") as f:
        f.write(text)


def write_json(path: str, date: str, size: int, info: dict[str, str], rows: list[Row], triton_date: str) -> None:
    """Every row, one JSON object per line (readable diffs); ``triton_date``: when Triton's rows were
    compiled (``--ours-only`` keeps them)."""
    head = json.dumps({"date": date, "triton_date": triton_date, "size": size, "versions": info})[:-1]
    body = ",\n".join(json.dumps(r.as_dict()) for r in rows)
    with open(path, "w") as f:
        f.write(f'{head}, "rows": [\n{body}\n]}}\n')


# ---------------------------------------------------------- LLM linear layers: the whole-GPU estimate

LLM_SHAPES = {"8b.qkv": (6144, 4096), "8b.o": (4096, 4096), "8b.gate_up": (28672, 4096), "8b.down": (4096, 14336),
              "70b.qkv": (10240, 8192), "70b.o": (8192, 8192), "70b.gate_up": (57344, 8192),
              "70b.down": (8192, 28672)}
LLM_MS = (1, 16, 64, 128, 1024, 4096)
# Triton's candidates for the skinny shapes (its tutorial kernel has no K split): 16- to 128-row tiles
TRITON_LLM_SPACE = tuple(TritonConfig(bm, bn, bk, 4, 16) for bm in (16, 32, 64, 128) for bn in (64, 128)
                         for bk in (64, 128))
REP_K = 4096  # the representative K at which each config is compiled once (its main loop is K's)


def _ours_loop(p, cache: dict):
    """The KernelReport of our kernel for plan ``p``'s config and epilogue, compiled once at a
    representative size (the main loop does not depend on N or K)."""
    from tvm_cdna4.kernels.gfx950.gemm import plan_gfx950_gemm, emit

    key = (p.config, p.grid.k_splits > 1, p.epilogue.out_dtype)
    if key not in cache:
        ks = 2 if p.grid.k_splits > 1 else 1
        rep = plan_gfx950_gemm(min(p.M, p.block[0]), 2 * p.block[1], REP_K, p.dtype, p.layout, p.epilogue.out_dtype,
                               p.config, k_splits=ks)
        result = tvm_cdna4.build(emit(rep))
        cache[key] = kernel_report(result.asm, result.kernel(), problem_formats(p.dtype))
    return cache[key]


def _triton_loop(cfg: TritonConfig, cache: dict):
    if cfg not in cache:
        try:
            asm, shared = compile_triton("bf16", "nt", REP_K, cfg)
        except Exception:  # Triton refuses a config: left out
            cache[cfg] = None
        else:
            (info,) = parse_metadata(asm)
            cache[cfg] = kernel_report(asm, attrs.evolve(info, lds_bytes=max(info.lds_bytes, shared)),
                                       problem_formats("bf16"))
    return cache[cfg]


def llm_rows(out_dtype: str = "bf16", with_triton: bool = True) -> list[dict]:
    """The whole-GPU estimate (``report.gpu_report``) of ours (``plan_for``) and of Triton's best
    config (by the same estimate) for every LLM shape and M: bf16 in, layout nt, C ``out_dtype``
    (Triton's kernel stores f32; its C is counted at ``out_dtype``'s bytes)."""
    from tvm_cdna4.report import gpu_report
    from tvm_cdna4.kernels.gfx950.gemm_cost import GemmWork, work_of
    from tvm_cdna4.kernels.gfx950.gemm_plan import plan_for

    ours_cache, triton_cache, rows = {}, {}, []
    for name, (N, K) in LLM_SHAPES.items():
        for M in LLM_MS:
            p = plan_for(M, N, K, "bf16", "nt", out_dtype)
            est = gpu_report(_ours_loop(p, ours_cache), work_of(p))
            row = {"shape": name, "M": M, "N": N, "K": K, "ours_plan": f"{p.block[0]}x{p.block[1]}x{p.block[2]} "
                   f"split {p.grid.k_splits}", "ours": est.as_dict()}
            if with_triton:
                best = None
                for cfg in TRITON_LLM_SPACE:
                    rep = _triton_loop(cfg, triton_cache)
                    if rep is None or rep.est_fraction is None:
                        continue
                    t = gpu_report(rep, GemmWork(M, N, K, (cfg.block_m, cfg.block_n, cfg.block_k), 2, 2,
                                                 4 if out_dtype == "f32" else 2))
                    if best is None or t.time_s < best[1].time_s:
                        best = (cfg, t)
                if best:
                    row.update(triton_plan=best[0].label, triton=best[1].as_dict())
            rows.append(row)
    return rows


def llm_section(rows: list[dict], date: str, info: dict[str, str], command: str) -> str:
    """The journal section of ``llm_rows``."""
    lines = [LLM_HEADING, "", f"Date: {date}. Versions: {', '.join(f'{k} {v}' for k, v in info.items())}. Command: `{command}`.",
             "", "A static estimate, not a measurement (no AMD GPU is reachable): `tvm_cdna4.report.gpu_report`, the "
             "whole-GPU model of `kernels/gfx950/gemm_cost.py` (docs/gfx950_gemm.md) over 256 CUs at 2.4 GHz and 8 TB/s, "
             "applied to the compiled main loop of each config (compiled once at K = 4096). bf16 in, layout nt. "
             "Ours: `plan_for` (the planner's choice). Triton: its tutorial kernel, the best of "
             f"{len(TRITON_LLM_SPACE)} configs (16-128-row tiles, no K split) by the same model. "
             "% = roofline time (max(flops / 2.5 PF, A+B+C bytes / 8 TB/s)) over the estimated time.", "",
             "| shape | M | ours plan | ours µs | ours % roofline | bound | Triton config | Triton µs | Triton % |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o, t = r["ours"], r.get("triton")
        tri = (f"{r['triton_plan']} | {1e6 * t['time_s']:.1f} | {100 * t['roofline_fraction']:.0f}%" if t else "- | - | -")
        lines.append(f"| {r['shape']} | {r['M']} | {r['ours_plan']} | {1e6 * o['time_s']:.1f} | "
                     f"{100 * o['roofline_fraction']:.0f}% | {o['bound']} | {tri} |")
    return "\n".join(lines) + "\n"


LLM_HEADING = "## LLM linear layers on gfx950: whole-GPU estimate"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--dtypes", default=",".join((*GEMM_DTYPES, *MX_FORMATS)))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--quick", action="store_true", help="one Triton config per problem")
    parser.add_argument("--json", help="write every row here")
    parser.add_argument("--results", help="write the dated section into this journal file (benchmarks/journal/YYYY-MM.md): "
                        "replaces the same day's section, else appends")
    parser.add_argument("--ours-only", action="store_true",
                        help="build only our kernels; every other row comes from the --json file of an earlier run")
    parser.add_argument("--lds-dma", action="store_true",
                        help="also build the direct-to-LDS variant of each dense problem (one more 'ours' row)")
    parser.add_argument("--llm", choices=("f32", "bf16"),
                        help="the LLM-layer whole-GPU estimate table (C in this dtype) instead; with --results, "
                             "appended to that file")
    args = parser.parse_args(argv)
    if args.llm:
        section = llm_section(llm_rows(args.llm), datetime.date.today().isoformat(), versions(),
                              "python benchmarks/gfx950_vs_triton.py " + " ".join(argv if argv is not None else sys.argv[1:]))
        print(section)
        if args.results:
            with open(args.results, "a") as f:
                f.write("\n" + section)
        return 0
    if args.ours_only and not args.json:
        parser.error("--ours-only reads Triton's rows from --json")
    earlier, previous = read_json(args.json, args.size) if args.ours_only else ({}, [])
    if not args.ours_only:
        import_triton()
    wanted = [(d, lay) for d in args.dtypes.split(",") for lay in args.layouts.split(",")]
    problems = list(dict.fromkeys([(r.dtype, r.layout) for r in previous] + wanted))
    rows: list[Row] = []
    for dtype, layout in problems:
        if (dtype, layout) not in wanted:
            rows += [r for r in previous if (r.dtype, r.layout) == (dtype, layout)]
            continue
        rows.append(ours_row(dtype, layout, args.size))
        print(table_row(rows[-1]), flush=True)
        if args.lds_dma and dtype in DTYPES:
            rows.append(ours_row(dtype, layout, args.size, lds_dma=True))
            print(table_row(rows[-1]), flush=True)
        if args.ours_only:
            rows += [r for r in previous if (r.dtype, r.layout) == (dtype, layout) and r.kernel == "Triton"]
            continue
        for cfg in triton_space(dtype, args.quick) if triton_layout(dtype, layout) else ():
            rows.append(triton_row(dtype, layout, args.size, cfg))
            print(table_row(rows[-1]), flush=True)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info = versions()
    reused, triton_date = "", earlier.get("triton_date", earlier.get("date", date))
    if args.ours_only:
        info["triton"] = earlier["versions"]["triton"]
        others = sorted({d for d, lay in problems if (d, lay) not in wanted})
        reused = (f"Ours rebuilt for {', '.join(sorted({d for d, _ in wanted}))} ({', '.join(args.layouts.split(','))}); "
                  f"Triton's rows{' and every row of ' + ', '.join(others) if others else ''} are those of the full run "
                  f"of {triton_date} (`--ours-only`: read back from the JSON file, analysed by the same code).")
    command = "python benchmarks/gfx950_vs_triton.py " + " ".join(argv if argv is not None else sys.argv[1:])
    section = results_section(rows, args.size, date, info, command.strip(), reused)
    print(section)
    if args.json:
        write_json(args.json, date, args.size, info, rows, triton_date)
    if args.results:
        write_results(section, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
