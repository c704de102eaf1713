"""Static performance report of a compiled gfx950 kernel: a *static estimate*, not a measurement.

From the real assembly: the main loop (the basic block with the most MFMAs that branches back to
itself), its instruction mix, and ``llvm-mca -mcpu=gfx950`` cycles per iteration next to the
MFMA-bound cycles from the catalog's cycle counts; plus registers, LDS, scratch and occupancy from
the code-object metadata. The analysis reads assembly text only, so any compiler's gfx950 code
goes through the same path (``kernel_report``; ``benchmarks/gfx950_vs_triton.py`` feeds it
Triton's).

**Estimate of the dtype's peak** (``KernelReport.est_fraction``), per main-loop iteration of one
wave on one SIMD::

    est = mfma_ops / (mfma_cycles + idle_cycles) / peak_ops_per_cycle

* ``mfma_ops``: the catalog's ``ops`` (``2 m n k blocks``) summed over the loop's MFMAs;
* ``mfma_cycles``: the catalog's cycle counts summed over the loop's MFMAs (the scaled
  ``f8f6f4`` shapes by the formats their ``cbsz``/``blgp`` codes select, the slower operand's
  figure; the unscaled ``v_mfma_f32_*_f8f6f4`` LLVM emits for unit scales is charged as the
  scaled instruction);
* ``idle_cycles``: llvm-mca's cycles per iteration minus the cycles it keeps its MFMA pipe busy,
  i.e. the part of an iteration in which llvm-mca's model issues no MFMA work. llvm-mca-22's
  gfx950 model charges 4 cycles to every MFMA whatever its shape, so its MFMA time is replaced by
  the catalog's and only its idle remainder is kept (assumed to stay idle when the MFMAs take
  their real time);
* ``peak_ops_per_cycle``: the best ``ops / cycles`` among the catalog's MFMAs that take the
  problem's operand formats (fp8: the scaled 16x16x128 f8f6f4 at 2048; f16: 1024).

The model sees one wave in isolation: not the latency hiding of the other waves of a SIMD, LDS
bank conflicts, memory bandwidth and caches, clocks and power, or issue across SIMDs.

**Attention** (``attention_report``, ``attention_kernel_report``; docs/attention.md): the kv loop's
work per pipe (``loop_work``: VALU and transcendental instructions, LDS bytes) and its cycles by an
in-order issue of the loop by one wave (``wave_cycles``: the MFMA pipe beside the VALU, so the
interleaving of softmax and MFMAs counts, which llvm-mca-22's 4-cycle MFMAs cannot show), then
``kernels.gfx950.attention_cost.attention_estimate`` over the GPU.
"""

from __future__ import annotations

import re
import subprocess
import tempfile

import attrs

from .isa import CATALOG, SCALE_FORMAT_CODES, MfmaOp
from .rocm.build import BuildResult, KernelInfo, llvm_tool, parse_metadata

MFMA_BY_MNEMONIC: dict[str, MfmaOp] = {op.mnemonic: op for op in CATALOG.values() if op.kind in ("mfma", "mfma_scale")}


@attrs.frozen
class MfmaUse:
    """One MFMA line of an assembly listing, priced by the catalog."""

    mnemonic: str
    op: MfmaOp
    formats: tuple[str, str]  # A and B element formats
    cycles: int  # the catalog's cycle count for these formats

    @property
    def label(self) -> str:
        """Short name: the mnemonic without ``v_mfma_`` and the accumulator type
        (``16x16x32_f16``, ``scale_16x16x128_f8f6f4(fp4,fp4)``); f8f6f4 shapes add the formats."""
        name = re.sub(r"^v_mfma_(scale_)?[fi](32|64)_", r"\1", self.mnemonic)
        return f"{name}({self.formats[0]},{self.formats[1]})" if self.op.kind == "mfma_scale" else name


def mfma_use(line: str) -> MfmaUse:
    """Catalog record, operand formats and cycles of an MFMA instruction line. The scaled
    ``f8f6f4`` shapes read their formats from the ``cbsz`` (A) and ``blgp`` (B) codes (0 when
    absent) and cost the slower operand's cycles; the unscaled ``v_mfma_f32_*_f8f6f4`` (LLVM's
    encoding of the unit-scale case) is priced as the scaled instruction of its shape."""
    mnemonic = line.split()[0]
    op = MFMA_BY_MNEMONIC.get(mnemonic)
    if op is None and mnemonic.endswith("_f8f6f4"):
        op = MFMA_BY_MNEMONIC.get(mnemonic.replace("v_mfma_", "v_mfma_scale_", 1))
    if op is None:
        raise ValueError(f"MFMA {mnemonic!r} is not in the catalog (line: {line.strip()!r})")
    if op.kind != "mfma_scale":
        return MfmaUse(mnemonic, op, (op.a_format, op.b_format), op.cycles)
    codes = tuple(int(m.group(1)) if (m := re.search(rf"\b{key}:(\d+)", line)) else 0 for key in ("cbsz", "blgp"))
    formats = (SCALE_FORMAT_CODES[codes[0]], SCALE_FORMAT_CODES[codes[1]])
    by_format = dict(op.cycles_by_format)
    return MfmaUse(mnemonic, op, formats, max(by_format[f] for f in formats))


def peak_ops_per_cycle(a_format: str, b_format: str) -> tuple[float, str]:
    """The best ops per cycle per SIMD among the catalog's MFMAs that take A in ``a_format`` and B
    in ``b_format`` (the scaled f8f6f4 shapes at those formats' cycle counts), and that MFMA."""
    rates = []
    for op in MFMA_BY_MNEMONIC.values():
        if op.kind == "mfma_scale":
            by_format = dict(op.cycles_by_format)
            if a_format in by_format and b_format in by_format:
                rates.append((op.ops / max(by_format[a_format], by_format[b_format]), op.name))
        elif (op.a_format, op.b_format) == (a_format, b_format):
            rates.append((op.ops / op.cycles, op.name))
    if not rates:
        raise ValueError(f"no MFMA in the catalog takes A {a_format!r} and B {b_format!r}")
    return max(rates, key=lambda rate: (rate[0], -CATALOG[rate[1]].ops))  # ties: the smaller shape


def classify(mnemonic: str) -> str:
    if mnemonic.startswith("v_mfma"):
        return "mfma"
    if mnemonic.startswith("ds_read") and "_tr_" in mnemonic:
        return "lds_read_tr"
    if mnemonic.startswith("ds_read"):
        return "lds_read"
    if mnemonic.startswith("ds_"):
        return "lds_write"
    if mnemonic.startswith(("global_", "buffer_", "flat_")):
        return "global"
    if mnemonic.startswith("scratch_"):
        return "scratch"
    if mnemonic == "s_waitcnt":
        return "waitcnt"
    if mnemonic == "s_barrier":
        return "barrier"
    if mnemonic.startswith("v_"):
        return "valu"
    if mnemonic.startswith("s_"):
        return "salu"
    return "other"


def main_loop(asm: str) -> list[str]:
    """Instruction lines of the loop block with the most MFMAs (label ... branch back to label; a
    span that ends the program, ``s_endpgm``, is a block laid out after the exit that branches
    back, not a loop)."""
    return _loop(asm, first=True)


def _loop(asm: str, first: bool) -> list[str]:
    """The instruction lines from the loop label with the most MFMAs to its ``first`` (else last) branch
    back: ``main_loop`` and ``whole_loop``; a span reaching ``s_endpgm`` is not a loop."""
    lines = asm.splitlines()
    back: dict[str, list[int]] = {}  # label -> the lines branching to it
    for j, line in enumerate(lines):
        m = re.match(r"^\s+s_c?branch\w*\s+(\.LBB\d+_\d+)\s*$", line)
        if m:
            back.setdefault(m.group(1), []).append(j)
    best: list[str] = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\.LBB\d+_\d+):", line)
        ends = [j for j in back.get(m.group(1), ()) if j > i] if m else []
        if not ends:
            continue
        body = [ln for ln in lines[i + 1 : ends[0 if first else -1] + 1] if re.match(r"^\s+[a-z]", ln)]
        if any(ln.split()[0] == "s_endpgm" for ln in body):
            continue
        if _mfmas(body) > _mfmas(best):
            best = body
    return best


def _mfmas(lines: list[str]) -> int:
    return sum(ln.split()[0].startswith("v_mfma") for ln in lines)


def instruction_kind(line: str) -> str:
    """``classify`` of the line's mnemonic; a global load straight into LDS (gfx950's
    ``buffer_load_* ... lds``, address in M0) is ``global_lds``."""
    kind = classify(line.split()[0])
    if kind == "global" and re.search(r"\slds\s*(;.*)?$", line):
        return "global_lds"
    return kind


@attrs.frozen
class LoopReport:
    instructions: int
    mix: dict[str, int]
    mfma_bound_cycles: int  # sum of the catalog's MFMA cycle counts (one wave per SIMD)
    mca_cycles: float | None  # llvm-mca cycles per iteration
    mca_mfma_cycles: float | None  # llvm-mca MFMA-pipe busy cycles per iteration
    mfmas: dict[str, int] = attrs.field(factory=dict)  # MfmaUse.label -> count
    mfma_ops: int = 0  # the catalog's ops summed over the loop's MFMAs
    formats: tuple[tuple[str, str], ...] = ()  # operand format pairs of the loop's MFMAs
    mca_error: str | None = None  # why llvm-mca gave no figures (missing, failed, timed out)

    @property
    def mfma_share(self) -> float | None:
        """llvm-mca's MFMA-pipe share of the main-loop cycles."""
        if not self.mca_cycles or self.mca_mfma_cycles is None:
            return None
        return self.mca_mfma_cycles / self.mca_cycles

    @property
    def idle_cycles(self) -> float | None:
        """llvm-mca cycles per iteration in which its MFMA pipe is not busy."""
        if self.mca_cycles is None or self.mca_mfma_cycles is None:
            return None
        return max(0.0, self.mca_cycles - self.mca_mfma_cycles)

    @property
    def estimate_cycles(self) -> float | None:
        """Cycles per iteration of the estimate: catalog MFMA cycles + llvm-mca's idle cycles."""
        idle = self.idle_cycles
        return None if idle is None or not self.mfma_bound_cycles else self.mfma_bound_cycles + idle


MCA_TIMEOUT_S = 60


def llvm_mca(body: list[str], iterations: int = 200) -> tuple[float, float] | None:
    """(cycles per iteration, MFMA-pipe cycles per iteration) from llvm-mca, or None without it.
    The MFMA-pipe cycles are the resource cycles llvm-mca charges to the MFMA instructions (its
    gfx950 model puts most MFMAs on HWXDL and the FP64 ones on HWVALU). Raises RuntimeError when
    llvm-mca fails or does not finish."""
    mca = llvm_tool("llvm-mca")
    if mca is None or not body:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".s") as f:
        f.write("\n".join(body) + "\n")
        f.flush()
        try:
            proc = subprocess.run([mca, "-mtriple=amdgcn-amd-amdhsa", "-mcpu=gfx950", f"-iterations={iterations}", f.name],
                                  capture_output=True, text=True, timeout=MCA_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"llvm-mca did not finish within {MCA_TIMEOUT_S} s") from None
    if proc.returncode:
        raise RuntimeError(f"llvm-mca failed: {proc.stderr.strip()[:400]}")
    total = float(re.search(r"Total Cycles:\s+(\d+)", proc.stdout).group(1)) / iterations
    table = proc.stdout.split("Resource pressure by instruction:", 1)[1].splitlines()[2:]
    mfma = 0.0
    for line in table:
        if "v_mfma" in line:
            mfma += sum(float(v) for v in line.split("v_mfma", 1)[0].split() if v != "-")
    return total, mfma


def loop_report(asm: str) -> LoopReport:
    """Instruction mix, catalog MFMA cycles and ops, and llvm-mca cycles of ``asm``'s main loop."""
    body = main_loop(asm)
    mix: dict[str, int] = {}
    mfmas: dict[str, int] = {}
    formats: list[tuple[str, str]] = []
    bound = ops = 0
    for line in body:
        kind = instruction_kind(line)
        mix[kind] = mix.get(kind, 0) + 1
        if kind == "mfma":
            use = mfma_use(line)
            mfmas[use.label] = mfmas.get(use.label, 0) + 1
            bound, ops = bound + use.cycles, ops + use.op.ops
            if use.formats not in formats:
                formats.append(use.formats)
    error = None
    try:
        mca = llvm_mca(body)
        if mca is None:
            error = "llvm-mca not installed" if body else "no main loop"
    except RuntimeError as err:
        mca, error = None, str(err)
    return LoopReport(len(body), mix, bound, *(mca if mca else (None, None)), mfmas=mfmas, mfma_ops=ops,
                      formats=tuple(formats), mca_error=error)


@attrs.frozen
class KernelReport:
    """Resources, main loop and the estimate of one kernel against its dtype's peak."""

    info: KernelInfo
    loop: LoopReport
    waves_per_simd: int
    formats: tuple[str, str]  # the problem's A and B element formats
    peak_ops_per_cycle: float
    peak_mfma: str  # the catalog MFMA with that rate

    @classmethod
    def of(cls, info: KernelInfo, loop: LoopReport, formats: tuple[str, str]) -> KernelReport:
        """Add the dtype's peak and the occupancy (waves per workgroup from the metadata's
        maximum flat workgroup size) to a kernel's resources and main loop."""
        peak, peak_mfma = peak_ops_per_cycle(*formats)
        return cls(info, loop, info.waves_per_simd(max(1, info.max_flat_workgroup_size // 64)), formats, peak, peak_mfma)

    @property
    def est_fraction(self) -> float | None:
        """Estimated fraction of the dtype's peak (module docstring); None without llvm-mca."""
        cycles = self.loop.estimate_cycles
        return None if cycles is None else self.loop.mfma_ops / cycles / self.peak_ops_per_cycle


def kernel_report(asm: str, info: KernelInfo | None = None, formats: tuple[str, str] | None = None) -> KernelReport:
    """One analysis for any gfx950 assembly listing (ours, Triton's, ...).

    ``info``: the kernel's resources; default the single kernel of ``asm``'s ``.amdgpu_metadata``
    (pass an evolved copy where the metadata does not tell, e.g. Triton's dynamic LDS size).
    ``formats``: the problem's A and B element formats (``("fp8", "bf8")``); default the formats
    of the main loop's MFMAs, which must then be one pair.
    """
    if info is None:
        kernels = parse_metadata(asm)
        if len(kernels) != 1:
            raise ValueError(f"assembly has {len(kernels)} kernels; pass the KernelInfo of the one to report")
        info = kernels[0]
    loop = loop_report(asm)
    if formats is None:
        if len(loop.formats) != 1:
            raise ValueError(f"main loop MFMAs take operand formats {list(loop.formats)}; pass the problem's formats")
        formats = loop.formats[0]
    return KernelReport.of(info, loop, formats)


def format_report(result: BuildResult, title: str) -> str:
    info = result.kernel()
    loop = loop_report(result.asm)
    report = KernelReport.of(info, loop, loop.formats[0]) if len(loop.formats) == 1 else None
    order = ("mfma", "lds_read", "lds_read_tr", "lds_write", "global", "global_lds", "valu", "salu", "waitcnt", "barrier",
             "scratch", "other")
    mix = ", ".join(f"{k} {loop.mix[k]}" for k in order if loop.mix.get(k))
    lines = [
        f"static report (an estimate from the compiled code, not a measurement): {title}",
        f"  resources: VGPRs {info.vgprs} (AGPRs {info.agprs}), SGPRs {info.sgprs}, LDS {info.lds_bytes} B, "
        f"scratch {info.scratch_bytes} B, waves/SIMD {info.waves_per_simd()}",
    ]
    if not loop.instructions:
        lines.append("  main loop: none in the assembly (LLVM unrolled the few K steps); report a larger K")
        return "\n".join(lines)
    lines += [
        f"  main loop: {loop.instructions} instructions: {mix}",
        f"  MFMA-bound cycles per iteration: {loop.mfma_bound_cycles} (the catalog's cycle counts of the loop's "
        "MFMAs, summed: the least one wave's iteration can take)",
    ]
    if loop.mca_cycles is None:
        lines.append("  llvm-mca: not available (Debian llvm-22 not installed, or it did not finish)")
    else:
        lines.append(f"  llvm-mca -mcpu=gfx950 (its own cycle model): {loop.mca_cycles:.1f} cycles per iteration (every "
                     f"instruction of the loop), MFMA pipe busy {loop.mca_mfma_cycles:.1f} (the cycles its model "
                     f"charges the MFMAs; llvm-mca-22: 4 each, whatever the shape): MFMA-pipe share {100 * loop.mfma_share:.1f}%")
    lds = loop.mix.get("lds_read", 0) + loop.mix.get("lds_read_tr", 0)
    if loop.mix.get("mfma"):
        lines.append(f"  LDS reads per MFMA: {lds / loop.mix['mfma']:.2f} "
                     f"({loop.mix.get('lds_read_tr', 0)} transposing, {loop.mix.get('lds_read', 0)} plain)")
    if report and report.est_fraction is not None:
        lines.append(f"  estimate (single wave, static): {100 * report.est_fraction:.0f}% of the "
                     f"{report.formats[0]}x{report.formats[1]} peak ({report.peak_ops_per_cycle:.0f} ops/cycle/SIMD, "
                     f"{report.peak_mfma}): {loop.mfma_ops} MFMA ops in {loop.estimate_cycles:.0f} cycles")
    return "\n".join(lines)


# ------------------------------------------------------------------------- the whole-GPU estimate

def gpu_report(report: KernelReport, work, cus: int | None = None):
    """The whole-GPU estimate (``kernels.gfx950.gemm_cost.gpu_estimate``) of a compiled kernel doing
    ``work`` (a ``GemmWork``): its occupancy and waves per workgroup from the metadata, its main
    loop's single-wave estimate; None without llvm-mca's figures."""
    from .kernels.gfx950.gemm_cost import MI355X_CUS, gpu_estimate

    if report.est_fraction is None:
        return None
    waves = max(1, report.info.max_flat_workgroup_size // 64)
    return gpu_estimate(work, max(1, report.waves_per_simd), waves, min(1.0, report.est_fraction),
                        report.peak_ops_per_cycle, cus or MI355X_CUS)


def format_gpu_estimate(est) -> str:
    """The report lines of a ``GpuEstimate``."""
    if est is None:
        return "  whole-GPU estimate: needs llvm-mca's main-loop figures"
    return "\n".join([
        f"  whole-GPU estimate (MI355X, static): {est.workgroups} workgroups on {est.cus_used} CUs, "
        f"{est.workgroups_per_cu} per CU, {est.waves} dispatch wave(s); tile efficiency {100 * est.tile_efficiency:.1f}%",
        f"  HBM {est.hbm_bytes / 1e6:.1f} MB at {est.hbm_bytes_per_s / 1e12:.2f} TB/s: {1e6 * est.memory_s:.2f} us; "
        f"MFMA work {1e6 * est.compute_s:.2f} us; estimate {1e6 * est.time_s:.2f} us ({est.bound} bound), "
        f"{100 * est.roofline_fraction:.0f}% of the roofline ({1e6 * est.roofline_s:.2f} us)"])


def report_json(result: BuildResult, title: str, work, cus: int | None = None) -> dict:
    """``--report --json``: one object with the per-wave figures and the whole-GPU estimate."""
    info = result.kernel()
    loop = loop_report(result.asm)
    report = KernelReport.of(info, loop, loop.formats[0]) if len(loop.formats) == 1 else None
    est = gpu_report(report, work, cus) if report else None
    return {"title": title, "resources": attrs.asdict(info), "waves_per_simd": info.waves_per_simd(),
            "main_loop": {"instructions": loop.instructions, "mix": loop.mix, "mfma_bound_cycles": loop.mfma_bound_cycles,
                          "mca_cycles": loop.mca_cycles, "mca_mfma_cycles": loop.mca_mfma_cycles,
                          "estimate_cycles": loop.estimate_cycles, "mca_error": loop.mca_error},
            "est_fraction": report.est_fraction if report else None, "gpu": est.as_dict() if est else None}


# ------------------------------------------------------------------------------- attention forward

TRANSCENDENTAL = re.compile(r"^v_(exp|log|rcp|rsq|sqrt|sin|cos)(_legacy|_iflag)?_f(16|32|64)")
LANES = 64


def lds_bytes(line: str) -> tuple[int, int]:
    """(LDS bytes read, written) by one wave64 instruction: ``ds_read*`` / ``ds_write*`` by their
    width (``read2`` / ``write2``: two), other ``ds_*`` (permutes, atomics) 4 bytes each way, a
    global load into LDS (``buffer_load_dword*`` ... ``lds``) its width written; 0 otherwise."""
    mnemonic, kind = line.split()[0], instruction_kind(line)
    if kind == "global_lds":
        m = re.match(r"^buffer_load_(dword(x(\d))?|ubyte|sbyte|ushort|sshort)", mnemonic)
        width = 4 * int(m.group(3) or 1) if m and m.group(1).startswith("dword") else 4 if m is None else (
            1 if "byte" in m.group(1) else 2)
        return 0, LANES * width
    if not mnemonic.startswith("ds_"):
        return 0, 0
    m = re.match(r"^ds_(read|write)(2st64|2)?_[biu](8|16|32|64|96|128)", mnemonic)
    if m is None:
        return LANES * 4, LANES * 4 if not mnemonic.startswith(("ds_bpermute", "ds_permute", "ds_swizzle")) else 0
    nbytes = LANES * int(m.group(3)) // 8 * (2 if m.group(2) else 1)
    return (nbytes, 0) if m.group(1) == "read" else (0, nbytes)


def loop_work(asm: str, loop: LoopReport | None = None):
    """``kernels.gfx950.attention_cost.LoopWork`` of ``asm``'s main loop (``loop``: its ``loop_report``,
    computed if not given): the catalog's MFMA cycles and ops, the VALU and transcendental
    instructions and the LDS bytes of the loop's lines, the in-order issue's cycles
    (``wave_cycles``). Raises ValueError without a main loop."""
    from .kernels.gfx950.attention_cost import LoopWork

    loop = loop or loop_report(asm)
    body = main_loop(asm)
    if not body:
        raise ValueError("attention loop work: the assembly has no main loop")
    valu = [ln.split()[0] for ln in body if instruction_kind(ln) == "valu"]
    moved = [lds_bytes(ln) for ln in body]
    return LoopWork(loop.mfma_bound_cycles, loop.mfma_ops, len(valu), sum(bool(TRANSCENDENTAL.match(v)) for v in valu),
                    sum(r for r, _ in moved), sum(w for _, w in moved), wave_cycles(body))


@attrs.frozen
class AttentionReport:
    """The static report of a compiled attention forward (``attention_report``): its resources and
    main loop (``KernelReport``), the loop's work per pipe (``LoopWork``), the whole-GPU estimate."""

    title: str
    problem: object  # AttentionProblem
    block: tuple[int, int]  # (block_q, block_kv)
    waves_per_workgroup: int
    kernel: KernelReport
    work: object  # kernels.gfx950.attention_cost.LoopWork
    estimate: object  # kernels.gfx950.attention_cost.AttentionEstimate

    @property
    def loop_fraction(self) -> float:
        """The kv loop's share of the MFMA peak, the wave alone (the estimate's)."""
        return self.work.fraction(self.kernel.peak_ops_per_cycle)

    @property
    def overlapped_fraction(self) -> float:
        """The upper bound's share: the resident waves overlapping perfectly."""
        return self.work.fraction(self.kernel.peak_ops_per_cycle, self.estimate.waves_per_simd)


def attention_kernel_report(asm: str, info: KernelInfo, problem, block_q: int, block_kv: int, waves_per_workgroup: int,
                            skip_masked: bool = True, title: str = "", cus: int | None = None) -> AttentionReport:
    """One analysis for any gfx950 attention forward's assembly (ours, Triton's): the kernel
    report, the loop's ``LoopWork`` and ``kernels.gfx950.attention_cost.attention_estimate`` at the occupancy of
    ``info`` (its VGPRs and LDS with ``waves_per_workgroup`` waves per workgroup)."""
    from .kernels.gfx950.attention_cost import attention_estimate
    from .kernels.gfx950.gemm_cost import MI355X_CUS
    from .kernels.gfx950.gemm_plan import DTYPES

    formats = (DTYPES[problem.dtype].formats[0],) * 2
    loop = loop_report(asm)
    kernel = KernelReport.of(info, loop, formats)
    work = loop_work(asm, loop)
    waves = info.waves_per_simd(waves_per_workgroup)
    estimate = attention_estimate(problem, block_q, block_kv, waves_per_workgroup, work, waves, skip_masked,
                                  cus or MI355X_CUS)
    return AttentionReport(title, problem, (block_q, block_kv), waves_per_workgroup, kernel, work, estimate)


def attention_report(problem, config=None, cus: int | None = None, cache: bool = True) -> AttentionReport:
    """Build our gfx950 attention forward for ``problem`` (``kernels.gfx950.attention_plan.plan_gfx950_attention``
    with ``config``; ``attention.build_gfx950``, through the build cache unless ``cache`` is
    False) and report it (``attention_kernel_report``)."""
    from .kernels import attention

    plan = attention.plan(problem, "gfx950", config)
    result = attention.build_gfx950(problem, config, cache=cache)
    c = plan.config
    return attention_kernel_report(result.asm, result.kernel(), problem, c.block_q, c.block_kv, plan.waves,
                                   c.skip_masked, f"ours {c.block_q}x{c.block_kv} w{plan.waves}", cus)


def format_attention_report(r: AttentionReport) -> str:
    """The report's lines: resources, the loop's work per pipe, the whole-GPU estimate."""
    p, w, e, info = r.problem, r.work, r.estimate, r.kernel.info
    pipes = w.pipes(e.waves_per_simd)
    return "\n".join([
        f"static attention report (an estimate from the compiled code, not a measurement): {r.title}",
        f"  problem: B {p.batch}, H {p.heads}/{p.kv_heads}, Sq {p.seq_q}, Skv {p.seq_kv}, D {p.head_dim}, {p.dtype}"
        f"{', causal' if p.causal else ''}; block {r.block[0]}x{r.block[1]}, {r.waves_per_workgroup} waves",
        f"  resources: VGPRs {info.vgprs} (AGPRs {info.agprs}), LDS {info.lds_bytes} B, scratch {info.scratch_bytes} B, "
        f"waves/SIMD {e.waves_per_simd}",
        f"  kv loop per wave: {r.kernel.loop.instructions} instructions, {sum(r.kernel.loop.mfmas.values())} MFMAs "
        f"({w.mfma_cycles} cycles), {w.valu} VALU ({w.trans} transcendental: {w.valu_cycles} cycles), LDS "
        f"{w.lds_read_bytes} B read + {w.lds_write_bytes} B written ({w.lds_cycles:.0f} cycles); issued in order "
        f"{w.chain_cycles:.0f} cycles (llvm-mca-22: {r.kernel.loop.mca_cycles or 0:.0f}, MFMAs at 4)",
        f"  SIMD cycles per wave iteration, the wave alone: {e.iteration_cycles:.0f}: {100 * r.loop_fraction:.0f}% of "
        f"the MFMA peak (upper bound, {e.waves_per_simd} waves/SIMD overlapping: {e.overlapped_cycles:.0f}, {e.bound} "
        "bound; " + ", ".join(f"{k} {v:.0f}" for k, v in pipes.items()) + f"; {100 * r.overlapped_fraction:.0f}%)",
        f"  whole GPU (MI355X, static): {e.workgroups} workgroups, {e.kv_tiles} kv tiles; busiest CU "
        f"{e.busiest_cu_iterations:.0f} wave iterations per SIMD = {1e6 * e.compute_s:.0f} us; HBM {e.hbm_bytes / 1e6:.0f} "
        f"MB = {1e6 * e.memory_s:.0f} us; estimate {1e6 * e.time_s:.0f} us, {e.tflops:.0f} TFLOP/s (upper bound "
        f"{e.overlapped_tflops:.0f})"])


# ----------------------------------------------------------------- in-order issue of one wave's loop

_NO_DEST = ("ds_write", "ds_store", "buffer_store", "global_store", "flat_store", "s_waitcnt", "s_barrier", "s_branch",
            "s_cbranch", "s_cmp", "s_nop", "s_setprio", "s_sleep", "s_endpgm", "s_bitcmp")
_REG = re.compile(r"^([vas])(?:(\d+)|\[(\d+):(\d+)\])$")


def registers(token: str) -> list[str]:
    """The registers an operand names (``v5``, ``v[4:7]``, ``a3``, ``s[2:3]``; ``vcc``, ``exec``, ``m0``)."""
    m = _REG.match(token)
    if m:
        lo = int(m.group(2) if m.group(2) is not None else m.group(3))
        hi = lo if m.group(2) is not None else int(m.group(4))
        return [f"{m.group(1)}{i}" for i in range(lo, hi + 1)]
    return [token] if token in ("vcc", "exec", "m0", "scc", "vcc_lo", "vcc_hi") else []


def issue_costs(line: str, mfma_cycles: int | None = None) -> tuple[str, int, int, str | None]:
    """(pipe, cycles the pipe is busy, cycles until the result, memory counter) of one instruction
    (``wave_cycles``): MFMA its catalog cycles; VALU ``kernels.gfx950.attention_cost.VALU_CYCLES`` (transcendental:
    ``TRANS_CYCLES``); LDS its bytes over a SIMD's share of the CU's LDS bandwidth, the result
    ``LDS_LATENCY_CYCLES`` later (lgkmcnt); global memory 4 issue cycles, ``VMEM_LATENCY_CYCLES``
    (vmcnt); scalar and the rest 1 (the figures: ``kernels.gfx950.attention_cost``)."""
    from .kernels.gfx950.attention_cost import (LDS_LATENCY_CYCLES, TRANS_CYCLES, VALU_CYCLES, VMEM_LATENCY_CYCLES,
                                           lds_cycles)

    mnemonic, kind = line.split()[0], instruction_kind(line)
    if kind == "mfma":
        cycles = mfma_cycles if mfma_cycles is not None else mfma_use(line).cycles
        return "mfma", cycles, cycles, None
    if kind == "valu":
        busy = TRANS_CYCLES if TRANSCENDENTAL.match(mnemonic) else VALU_CYCLES
        return "valu", busy, busy, None
    if kind.startswith("lds"):
        read, written = lds_bytes(line)
        busy = max(1, round(lds_cycles(read, written)))
        return "lds", busy, busy + LDS_LATENCY_CYCLES, "lgkm"
    if kind in ("global", "global_lds", "scratch"):
        return "vmem", 4, VMEM_LATENCY_CYCLES, "vm"
    if mnemonic.startswith(("s_load", "s_buffer_load")):
        return "salu", 1, VMEM_LATENCY_CYCLES, "lgkm"
    if mnemonic == "s_nop":
        return "salu", 1 + int(line.split()[1], 0), 1, None
    return "salu", 1, 1, None


def _operands(line: str) -> tuple[list[str], list[str]]:
    """(destination registers, source registers) of an instruction line."""
    parts = line.split(None, 1)
    tokens = [t.split()[0] for t in parts[1].split(",")] if len(parts) > 1 else []
    regs = [registers(t) for t in tokens]
    if not regs or parts[0].startswith(_NO_DEST) or instruction_kind(line) == "global_lds":
        return [], [r for group in regs for r in group]
    return regs[0], [r for group in regs[1:] for r in group]


def _wait_until(line: str, now: float, pending: dict[str, list[float]]) -> float:
    """The cycle an ``s_waitcnt`` line lets the wave go on: each named counter down to its count
    (a counter's operations complete in the order they were issued)."""
    for counter, n in re.findall(r"(vm|lgkm)cnt\((\d+)\)", line):
        queue = sorted(c for c in pending[counter] if c > now)
        if len(queue) > int(n):
            now = max(now, queue[len(queue) - int(n) - 1])
    return now


def wave_cycles(body: list[str], iterations: int = 8) -> float:
    """Cycles per iteration of ``body`` (a loop's instruction lines) for one wave alone, issued in
    order: an instruction issues a cycle after the one before at the earliest, when its pipe
    (MFMA, VALU, LDS, global memory, scalar) is free and its source registers are ready, and an
    ``s_waitcnt`` when its counters allow (``issue_costs``); the MFMA pipe runs beside the VALU, so
    VALU work independent of the MFMAs in flight overlaps them. The steady state: the mean of the
    second half of ``iterations`` runs of the body back to back (registers, pipes and counters
    carried over)."""
    costs = [issue_costs(ln) for ln in body]
    operands = [_operands(ln) for ln in body]
    ready: dict[str, float] = {}
    free = {"mfma": 0.0, "valu": 0.0, "lds": 0.0, "vmem": 0.0, "salu": 0.0}
    pending: dict[str, list[float]] = {"vm": [], "lgkm": []}
    now, starts = 0.0, []
    for _ in range(iterations):
        starts.append(now)
        for line, (pipe, busy, latency, counter), (dest, srcs) in zip(body, costs, operands):
            t = max([now, free[pipe]] + [ready.get(r, 0.0) for r in srcs])
            if line.split()[0] == "s_waitcnt":
                t = _wait_until(line, t, pending)
            free[pipe] = t + busy
            for r in dest:
                ready[r] = t + latency
            if counter:
                pending[counter] = [c for c in pending[counter] if c > t] + [t + latency]
            now = t + 1
    half = iterations // 2
    return (now - starts[half]) / (iterations - half)


# ------------------------------------------------------------------------- paged decode attention

_LOAD_BYTES = re.compile(r"^(?:buffer|global)_load_(?:dword(?:x(\d))?|(b|ub|sb)(\d+)|(ubyte|sbyte|ushort|sshort)\w*)$")


def load_bytes(line: str) -> int:
    """Bytes a wave's global (or buffer) load line reads: 64 lanes x its width (``dwordxN`` ``4 N``,
    ``ubyte`` 1, ``ushort`` 2); 0 for any other line."""
    m = _LOAD_BYTES.match(line.split()[0])
    if not m:
        return 0
    if m.group(4):
        return LANES * (1 if "byte" in m.group(4) else 2)
    if m.group(3):
        return LANES * int(m.group(3)) // 8
    return LANES * 4 * int(m.group(1) or 1)


def whole_loop(asm: str) -> list[str]:
    """Instruction lines from the loop label with the most MFMAs to the *last* branch back to it:
    ``main_loop``'s block with the blocks LLVM laid out after it that also return to its label (a
    conditional part of the body, such as the paged decode kernel's next-tile loads)."""
    return _loop(asm, first=False)


@attrs.frozen
class PagedReport:
    """The static report of a compiled paged decode kernel (``paged_kernel_report``): its resources,
    the kv loop's instruction mix, the bytes a wave has in flight, the in-order issue cycles of one
    iteration, and the whole-GPU estimate (``kernels.gfx950.paged_decode_cost.decode_estimate``)."""

    title: str
    problem: object  # PagedDecodeProblem
    contexts: tuple[int, ...]
    info: KernelInfo
    loop: LoopReport
    flight_bytes: int
    tile_cycles: float
    estimate: object  # PagedEstimate


def paged_kernel_report(asm: str, info: KernelInfo, problem, contexts, *, block_kv: int, splits: int, units: int,
                        waves: int = 1, keys_per_iteration: int | None = None, work_bytes: int = 0,
                        title: str = "") -> PagedReport:
    """One analysis for any gfx950 paged decode kernel's assembly (ours, Triton's): the kv loop's
    (``whole_loop``) mix, its global-load bytes (what a wave keeps in flight over an iteration) and in-order cycles
    (``wave_cycles``), the occupancy of ``info``, and the estimate for ``contexts``.
    ``keys_per_iteration``: keys one loop iteration takes (default ``block_kv``)."""
    from .kernels.gfx950.paged_decode_cost import decode_estimate

    body = whole_loop(asm)
    if not body:
        raise ValueError("paged decode report: the assembly has no main loop")
    mix: dict[str, int] = {}
    for line in body:
        mix[instruction_kind(line)] = mix.get(instruction_kind(line), 0) + 1
    loop = LoopReport(len(body), mix, sum(mfma_use(ln).cycles for ln in body if instruction_kind(ln) == "mfma"), None,
                      None)
    flight = sum(load_bytes(ln) for ln in body)
    cycles = wave_cycles(body) * block_kv / (keys_per_iteration or block_kv)
    wps = info.waves_per_simd(waves)
    estimate = decode_estimate(problem, contexts, block_kv=block_kv, splits=splits, units=units, waves=waves,
                               waves_per_simd=wps, flight_bytes=flight, tile_cycles=cycles, work_bytes=work_bytes)
    return PagedReport(title, problem, tuple(contexts), info, loop, flight, cycles, estimate)


def paged_report(problem, contexts, config=None, cache: bool = True) -> PagedReport:
    """Build our gfx950 paged decode kernel for ``problem`` (``PAGED_TARGETS["gfx950"]``, the split for the
    longest of ``contexts``) and report it (``paged_kernel_report``)."""
    from .kernels import attention

    plan = attention.paged_verb("gfx950", "plan")(problem, config, context=max(1, max(contexts)))
    result = attention.paged_verb("gfx950", "build")(problem, config, cache=cache, context=max(1, max(contexts)))
    p = problem
    work = 2 * plan.units * plan.splits * min(plan.rows, plan.block_rows) * (p.head_dim + 1) * 4
    return paged_kernel_report(result.asm, result.kernel(), problem, contexts, block_kv=plan.config.block_kv,
                               splits=plan.splits, units=p.kv_heads * plan.row_blocks, work_bytes=work,
                               title=f"ours block_kv {plan.config.block_kv}, split_kv {plan.splits}, "
                                     f"{plan.row_tiles} row tile(s)")


def format_paged_report(r: PagedReport) -> str:
    """The report's lines: the problem, resources, the loop, the whole-GPU estimate against 8 TB/s."""
    from .kernels.gfx950.gemm_cost import HBM_BYTES_PER_S

    p, e, info, loop = r.problem, r.estimate, r.info, r.loop
    mix = ", ".join(f"{k} {v}" for k, v in sorted(loop.mix.items(), key=lambda kv: -kv[1]))
    return "\n".join([
        f"static paged decode report (an estimate from the compiled code, not a measurement): {r.title}",
        f"  problem: B {p.batch}, H {p.heads}/{p.kv_heads}, D {p.head_dim}, queries {p.queries}, page {p.page_size}, "
        f"KV {p.kv_dtype}, Q {p.q_dtype}; contexts {min(r.contexts)}..{max(r.contexts)} (sum {sum(r.contexts)})",
        f"  resources: VGPRs {info.vgprs} (AGPRs {info.agprs}), LDS {info.lds_bytes} B, scratch {info.scratch_bytes} B, "
        f"waves/SIMD {e.waves_per_simd}",
        f"  kv loop per wave: {loop.instructions} instructions ({mix}); {r.flight_bytes} B of global loads in flight; "
        f"issued in order {r.tile_cycles:.0f} cycles per tile",
        f"  whole GPU (MI355X, static): {e.workgroups} workgroups (split_kv {e.splits}), {e.waves_in_flight} waves "
        f"resident drawing {e.drawn_bytes_s / 1e12:.2f} TB/s; HBM {e.hbm_bytes / 1e6:.1f} MB = {1e6 * e.memory_s:.1f} us, "
        f"busiest CU {1e6 * e.compute_s:.1f} us; estimate {1e6 * e.time_s:.1f} us = "
        f"{e.problem_bytes / e.time_s / 1e12:.2f} TB/s, {100 * e.hbm_fraction:.0f}% of "
        f"{HBM_BYTES_PER_S / 1e12:.0f} TB/s"])
