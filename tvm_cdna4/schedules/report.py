"""Static performance report of a compiled gfx950 kernel: a *static estimate*, not a measurement.

From the real assembly: the main loop (the basic block with the most MFMAs that branches back to
itself), its instruction mix, and ``llvm-mca -mcpu=gfx950`` cycles per iteration next to the
MFMA-bound cycles from the catalog's cycle counts; plus registers, LDS, scratch and occupancy from
the code-object metadata.
"""

from __future__ import annotations

import re
import subprocess
import tempfile

import attrs

from ..isa import CATALOG
from ..rocm.build import BuildResult, llvm_tool

MNEMONIC_CYCLES = {op.mnemonic: op.cycles for op in CATALOG.values() if op.kind == "mfma"}
MNEMONIC_CYCLES.update({op.mnemonic: op.cycles for op in CATALOG.values() if op.kind == "mfma_scale"})


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
    """Instruction lines of the loop block with the most MFMAs (label ... branch back to label)."""
    lines = asm.splitlines()
    best: list[str] = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\.LBB\d+_\d+):", line)
        if not m:
            continue
        label = m.group(1)
        for j in range(i + 1, len(lines)):
            if re.match(r"^\s+s_cbranch_\w+\s+" + re.escape(label) + r"\s*$", lines[j]) or re.match(
                    r"^\s+s_branch\s+" + re.escape(label) + r"\s*$", lines[j]):
                body = [ln for ln in lines[i + 1 : j + 1] if re.match(r"^\s+[a-z]", ln)]
                if sum(ln.split()[0].startswith("v_mfma") for ln in body) > sum(
                        ln.split()[0].startswith("v_mfma") for ln in best):
                    best = body
                break
    return best


@attrs.frozen
class LoopReport:
    instructions: int
    mix: dict[str, int]
    mfma_bound_cycles: int  # sum of the catalog's MFMA cycle counts (one wave per SIMD)
    mca_cycles: float | None  # llvm-mca cycles per iteration
    mca_mfma_cycles: float | None  # llvm-mca MFMA-pipe busy cycles per iteration

    @property
    def mfma_share(self) -> float | None:
        """llvm-mca's MFMA-pipe share of the main-loop cycles."""
        if not self.mca_cycles or self.mca_mfma_cycles is None:
            return None
        return self.mca_mfma_cycles / self.mca_cycles


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
    body = main_loop(asm)
    mix: dict[str, int] = {}
    bound = 0
    for line in body:
        mnem = line.split()[0]
        kind = classify(mnem)
        mix[kind] = mix.get(kind, 0) + 1
        bound += MNEMONIC_CYCLES.get(mnem, 0)
    try:
        mca = llvm_mca(body)
    except RuntimeError:
        mca = None
    return LoopReport(len(body), mix, bound, *(mca if mca else (None, None)))


def format_report(result: BuildResult, title: str) -> str:
    info = result.kernel()
    loop = loop_report(result.asm)
    order = ("mfma", "lds_read", "lds_read_tr", "lds_write", "global", "valu", "salu", "waitcnt", "barrier", "other")
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
        f"  MFMA-bound cycles per iteration (catalog cycle counts): {loop.mfma_bound_cycles}",
    ]
    if loop.mca_cycles is None:
        lines.append("  llvm-mca: not available (Debian llvm-22 not installed, or it did not finish)")
    else:
        lines.append(f"  llvm-mca -mcpu=gfx950 (its own cycle model): {loop.mca_cycles:.1f} cycles per iteration, MFMA pipe busy "
                     f"{loop.mca_mfma_cycles:.1f}: MFMA-pipe share {100 * loop.mfma_share:.1f}%")
    lds = loop.mix.get("lds_read", 0) + loop.mix.get("lds_read_tr", 0)
    if loop.mix.get("mfma"):
        lines.append(f"  LDS reads per MFMA: {lds / loop.mix['mfma']:.2f} "
                     f"({loop.mix.get('lds_read_tr', 0)} transposing, {loop.mix.get('lds_read', 0)} plain)")
    return "\n".join(lines)
