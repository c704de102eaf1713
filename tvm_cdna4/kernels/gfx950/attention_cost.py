"""The static cost model of a gfx950 attention forward: a *static estimate*, not a measurement.

Two levels, pure Python (``report.attention_report`` feeds them a compiled kernel, ours or
Triton's; ``benchmarks/attention_gfx950_vs_triton.py`` both):

**One kv-loop iteration of one wave** (``LoopWork``, counted from the compiled loop by
``report.loop_work``). The loop's work per pipe of its SIMD, in cycles:

* ``mfma``: the catalog's cycle counts of its MFMAs (``report.LoopReport.mfma_bound_cycles``);
* ``valu``: ``VALU_CYCLES`` per VALU instruction (a wave64 instruction on a 16-lane SIMD: MI355X's
  157.3 TFLOP/s FP32 vector peak is 256 CUs x 4 SIMDs x 2.4 GHz x one 64-lane packed FMA per 4
  cycles), ``TRANS_CYCLES`` per transcendental one (``v_exp_f32``, ``v_log_f32``, ``v_rcp_f32``
  ...: quarter rate, the CDNA3 ISA's figure, kept for gfx950);
* ``lds``: the bytes the wave moves through LDS over its share of the CU's LDS bandwidth
  (``LDS_READ_BYTES_PER_CLK`` 256, the doubled CDNA4 read bandwidth AMD announced;
  ``LDS_WRITE_BYTES_PER_CLK`` 128), i.e. ``4 x bytes / bandwidth`` per SIMD;
* ``chain``: the wave alone, its instructions issued in order (``report.wave_cycles``): each a
  cycle after the one before at the earliest, when its pipe is free (the costs above), its source
  registers are ready and its ``s_waitcnt`` counters allow (LDS results ``LDS_LATENCY_CYCLES``
  after their bytes moved, global loads ``VMEM_LATENCY_CYCLES``). The MFMA pipe runs beside
  the VALU, so VALU work that does not wait for the MFMAs in flight overlaps them: the interleaving
  of softmax and MFMAs shows here, and only here. (llvm-mca-22's own figures stay in the kernel
  report; its gfx950 model charges 4 cycles to every MFMA and 1 to every VALU instruction.)

The estimate takes the wave alone: a SIMD spends ``chain`` cycles per wave iteration
(``LoopWork.cycles``), and the loop reaches ``mfma_ops / chain / peak`` of the dtype's MFMA peak
(``LoopWork.fraction``): the wave's own MFMAs overlap its independent VALU work, but the waves
resident on a SIMD do not hide each other. That is conservative, and it is what measurements
support: Triton's fused-attention tutorial gets 38 % of the bf16 peak by it (965 TFLOP/s at
16 x 64/8 x 8192 x 128), and measured 906-994 TFLOP/s on MI355X in HipKittens' tables, where the
overlapped bound below gives it 1930. ``LoopWork.overlapped`` is that upper bound, printed beside:
``W`` waves resident per SIMD (the occupancy from VGPRs and LDS) sharing its pipes and hiding each
other's chains perfectly, ``max(mfma, valu, lds, chain / W)``.

**The whole GPU** (``attention_estimate``): the workgroups, one per (batch x head, query block),
in dispatch order (query block fastest), each running ``kv_tiles_for`` kv tiles (causal: up to
its diagonal), i.e. ``tiles x waves_per_workgroup / 4`` SIMD iterations (wave iterations per SIMD);
each goes to the least loaded of the ``cus`` CUs (4 SIMDs each), so the causal triangle's
imbalance shows. Compute time = the most loaded CU's iterations at ``LoopWork.cycles`` and
2.4 GHz; memory = Q, K, V, O and LSE once at 8 TB/s (re-reads of K and V hit the L2); time =
``max`` of the two plus one HBM latency. ``tflops`` = ``AttentionProblem.flops()`` (useful work, causal its triangle) / time.
Every tile runs at the main loop's cycles (the masked diagonal and tail tiles too).

Not seen: LDS bank conflicts, caches, clocks under load and power, the prologue and epilogue,
barrier skew between the waves of a workgroup.
"""

from __future__ import annotations

import heapq
import math

import attrs

from .attention_plan import AttentionProblem
from ..attention.problem import workgroup_tiles
from .gemm_config import DTYPES
from .gemm_cost import CLOCK_HZ, HBM_BYTES_PER_S, HBM_LATENCY_S, MI355X_CUS, SIMDS_PER_CU

VALU_CYCLES = 4  # one wave64 VALU instruction on a 16-lane SIMD
TRANS_CYCLES = 16  # a transcendental VALU instruction: quarter rate
LDS_READ_BYTES_PER_CLK = 256  # per CU (CDNA4: doubled over CDNA3's 128)
LDS_WRITE_BYTES_PER_CLK = 128  # per CU
LDS_LATENCY_CYCLES = 64  # an LDS access after its bytes moved (assumed; llvm-mca-22's model says 5)
VMEM_LATENCY_CYCLES = 80  # a global load's round trip: llvm-mca-22's figure, kept (caches and other waves hide HBM's)


def lds_cycles(read_bytes: float, written_bytes: float) -> float:
    """SIMD cycles a wave's LDS bytes take: its share (one SIMD of the CU's ``SIMDS_PER_CU``) of the
    CU's LDS read and write bandwidth (``LoopWork.lds_cycles``, ``report.issue_costs``)."""
    return SIMDS_PER_CU * (read_bytes / LDS_READ_BYTES_PER_CLK + written_bytes / LDS_WRITE_BYTES_PER_CLK)


@attrs.frozen
class LoopWork:
    """One wave's kv-loop iteration (module docstring): MFMA cycles and ops, VALU instructions
    (``trans`` of them transcendental), LDS bytes read and written, the in-order issue's cycles."""

    mfma_cycles: int
    mfma_ops: int
    valu: int
    trans: int
    lds_read_bytes: int
    lds_write_bytes: int
    chain_cycles: float  # the wave alone, issued in order (report.wave_cycles)

    @property
    def valu_cycles(self) -> int:
        return VALU_CYCLES * (self.valu - self.trans) + TRANS_CYCLES * self.trans

    @property
    def lds_cycles(self) -> float:
        """The wave's share of the LDS bandwidth its bytes take (``lds_cycles``)."""
        return lds_cycles(self.lds_read_bytes, self.lds_write_bytes)

    @property
    def cycles(self) -> float:
        """SIMD cycles per wave iteration of the estimate: the wave alone (``chain_cycles``)."""
        return self.chain_cycles

    def fraction(self, peak_ops_per_cycle: float, waves_per_simd: int | None = None) -> float:
        """The share of the SIMD's MFMA peak the loop reaches: alone, or with ``waves_per_simd``
        waves overlapping perfectly (``overlapped``, the upper bound)."""
        cycles = self.cycles if waves_per_simd is None else self.overlapped(waves_per_simd)
        return self.mfma_ops / cycles / peak_ops_per_cycle

    def pipes(self, waves_per_simd: int) -> dict[str, float]:
        """SIMD cycles per wave iteration each limit allows, ``waves_per_simd`` waves resident."""
        return {"mfma": self.mfma_cycles, "valu": self.valu_cycles, "lds": self.lds_cycles,
                "chain": self.chain_cycles / max(1, waves_per_simd)}

    def overlapped(self, waves_per_simd: int) -> float:
        """The upper bound: the largest of ``pipes``."""
        return max(self.pipes(waves_per_simd).values())

    def bound(self, waves_per_simd: int) -> str:
        """The pipe that sets ``overlapped``."""
        pipes = self.pipes(waves_per_simd)
        return max(pipes, key=pipes.get)


@attrs.frozen
class AttentionEstimate:
    """The whole-GPU estimate (module docstring); times in seconds."""

    workgroups: int
    waves_per_simd: int
    iteration_cycles: float  # SIMD cycles per wave iteration (LoopWork.cycles: the wave alone)
    overlapped_cycles: float  # the upper bound's (LoopWork.overlapped at waves_per_simd)
    bound: str  # the pipe of the upper bound: mfma, valu, lds or chain
    kv_tiles: int  # kv tiles run, all workgroups together
    busiest_cu_iterations: float  # wave iterations per SIMD of the most loaded CU
    compute_s: float
    hbm_bytes: int
    memory_s: float
    time_s: float
    flops: int  # useful (AttentionProblem.flops)

    @property
    def tflops(self) -> float:
        return self.flops / self.time_s / 1e12

    @property
    def overlapped_tflops(self) -> float:
        """The upper bound's TFLOP/s (compute at ``overlapped_cycles``)."""
        compute = self.compute_s * self.overlapped_cycles / self.iteration_cycles
        return self.flops / (max(compute, self.memory_s) + HBM_LATENCY_S) / 1e12


def hbm_bytes(problem: AttentionProblem) -> int:
    """Q, K, V once in the input dtype, O in the output dtype (fp8: bf16, ``AttentionProblem.out_dtype``),
    LSE in f32."""
    shapes = problem.shapes()
    return DTYPES[problem.dtype].elem_bytes * sum(math.prod(shapes[n]) for n in ("Q", "K", "V")) \
        + DTYPES[problem.out_dtype].elem_bytes * math.prod(shapes["O"]) + 4 * math.prod(shapes["LSE"])


def attention_estimate(problem: AttentionProblem, block_q: int, block_kv: int, waves_per_workgroup: int,
                       work: LoopWork, waves_per_simd: int, skip_masked: bool = True,
                       cus: int = MI355X_CUS) -> AttentionEstimate:
    """The whole-GPU estimate of a kernel whose workgroups run ``block_q`` queries over kv tiles of
    ``block_kv`` keys with ``waves_per_workgroup`` waves, one kv-loop iteration costing ``work``
    (module docstring)."""
    if waves_per_simd < 1:
        raise ValueError(f"attention_estimate: the kernel does not fit a SIMD (waves_per_simd {waves_per_simd})")
    per_head = workgroup_tiles(problem, block_q, block_kv, skip_masked)
    load = [0.0] * cus
    for tiles in per_head * (problem.batch * problem.heads):
        heapq.heapreplace(load, load[0] + tiles * waves_per_workgroup / SIMDS_PER_CU)
    busiest = max(load)
    compute_s = busiest * work.cycles / CLOCK_HZ
    nbytes = hbm_bytes(problem)
    memory_s = nbytes / HBM_BYTES_PER_S
    heads = problem.batch * problem.heads
    return AttentionEstimate(len(per_head) * heads, waves_per_simd, work.cycles, work.overlapped(waves_per_simd),
                             work.bound(waves_per_simd), sum(per_head) * heads, busiest, compute_s, nbytes, memory_s,
                             max(compute_s, memory_s) + HBM_LATENCY_S, problem.flops())


__all__ = ["LDS_LATENCY_CYCLES", "LDS_READ_BYTES_PER_CLK", "LDS_WRITE_BYTES_PER_CLK", "TRANS_CYCLES", "VALU_CYCLES",
           "VMEM_LATENCY_CYCLES", "AttentionEstimate", "LoopWork", "attention_estimate", "hbm_bytes", "lds_cycles",
           "workgroup_tiles"]
