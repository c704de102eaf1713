"""The whole-GPU cost model of a gfx950 GEMM on an MI355X: a *static estimate*, not a measurement.

One pure function (``gpu_estimate``) of the kernel's work (``GemmWork``: problem, workgroup tile, K
split, bytes), its occupancy (waves per SIMD, from the VGPR/LDS use) and its per-wave main-loop
estimate (the fraction of the dtype's MFMA peak one SIMD reaches in the loop: ``report``'s
``est_fraction`` for a compiled kernel, ``planned_loop_fraction`` for a plan not yet built). The
planner (``kernels.gfx950.gemm_plan.plan_for``) ranks its candidates with the same function, and
``report.gpu_report`` applies it to a compiled kernel (ours or Triton's). docs/gfx950_gemm.md
lists the assumptions and their anchors; in short:

* **Compute.** A workgroup's issued MFMA work counts its padded rows, columns and K
  (``tile_efficiency`` = useful / issued); its 4 SIMDs run at ``loop_fraction`` of the peak. The
  CUs take the workgroups in turn (``ceil(workgroups / CUs)`` per CU, co-resident ones sharing the
  SIMDs): ``compute_s = ceil(workgroups / CUs) * issued ops per workgroup / (4 * peak * fraction * clock)``.
* **Memory.** HBM moves A, B and C once (re-reads of A and B tiles hit the L2 / Infinity Cache),
  and the fused epilogue's inputs once (``fused_bytes``: scales, bias, residual; re-reads hit the L2),
  plus ``extra_bytes`` (a split-K workspace, its zeroing); at most 8 TB/s, and at most what the
  loads in flight sustain (Little's law: resident workgroups x ``load_ahead`` K tiles of A and B
  over ``HBM_LATENCY_S``).
* **Split-K** (``split_traffic``): every f32 partial value a workgroup adds or stores into C or the
  workspace counts 4 bytes of that traffic, and so does every value the reduction reads back or
  zeroes; the f32 atomics into C add a second launch (C's zeroing), the workspace reduction one
  more latency at the end (``tails``: the last workgroup of a tile waits for its partials, its
  ticket and the read-back, one after another).
* **Time** = ``max(compute_s, memory_s)`` + one HBM latency per kernel (the first loads, the last
  stores) and per tail; ``bound`` names the larger term. **Roofline** = ``max(useful flops / peak, A + B + C
  bytes (+ the fused inputs) / 8 TB/s)``; ``roofline_fraction`` = roofline / time.
"""

from __future__ import annotations

import math

import attrs

from ..devices import DEVICES
from ..gemm.epilogue import Fusion
from ..gemm.grouped import expected_row_tiles

MI355X = DEVICES["MI355X"]  # the device the static estimates are for (kernels.devices: its numbers, once)
MI355X_CUS = MI355X.units
CLOCK_HZ = MI355X.clock_hz  # peak engine clock (the published peaks: 256 CUs x 4 SIMDs x 2.4 GHz x rate)
HBM_BYTES_PER_S = MI355X.hbm_bytes_s  # HBM3E
# a loaded HBM round trip: calibrated so that an unsplit 128x128 bf16 plan at M = 1, 8448x7168 (66
# workgroups, Little's-law bound) takes hipBLASLt's measured 33.1 us on MI355X (docs/gfx950_gemm.md)
HBM_LATENCY_S = 0.6e-6
SIMDS_PER_CU = 4
# idle cycles per K tile of one wave besides its MFMAs (s_waitcnt, barrier, address arithmetic) in a
# plan not yet built; llvm-mca's idle cycles of the compiled 128x128x64 loops: f16 nt 4096^3 about 20,
# bf16 nt at M = 16 about 134 (docs/gfx950_gemm.md)
PLANNED_IDLE_CYCLES = 96


@attrs.frozen
class GemmWork:
    """What the estimate needs of a GEMM kernel: the problem (``M``, ``N``, ``K``, ``batch``), the
    workgroup tile ``block`` = (BM, BN, BK) and ``k_splits`` workgroups along K per tile, the bytes
    per element of A, B and C, ``load_ahead`` K tiles of loads in flight per workgroup,
    ``extra_bytes`` of HBM traffic besides A, B and C once, ``fused_bytes`` of the fused epilogue's
    inputs (read once, like A, B and C: the roofline counts them), ``kernels`` launches in all,
    ``tails`` latencies after the main work. ``grouped``: a grouped GEMM (``kernels.gemm.grouped``) of
    ``batch`` groups of ``M`` rows each on average, each group ``expected_row_tiles`` row tiles."""

    M: int
    N: int
    K: int
    block: tuple[int, int, int]
    a_bytes: float
    b_bytes: float
    c_bytes: float
    k_splits: int = 1
    batch: int = 1
    load_ahead: int = 2
    extra_bytes: int = 0
    kernels: int = 1
    tails: int = 0  # dependent round trips after the main work (the split-K ticket), one HBM latency each
    fused_bytes: int = 0  # the fused epilogue's inputs: row/column scales, bias, residual
    grouped: bool = False

    @property
    def workgroups(self) -> int:
        BM, BN, _ = self.block
        if self.grouped:
            return math.ceil(self.batch * expected_row_tiles(self.M, BM)) * -(-self.N // BN) * self.k_splits
        return -(-self.M // BM) * -(-self.N // BN) * self.k_splits * self.batch

    @property
    def k_tiles(self) -> int:
        """K tiles of one workgroup (its K range: ``ceil(K tiles / k_splits)``)."""
        return -(-(-(-self.K // self.block[2])) // self.k_splits)

    @property
    def useful_flops(self) -> float:
        return 2.0 * self.M * self.N * self.K * self.batch

    @property
    def issued_flops(self) -> float:
        """MFMA work issued: every workgroup's whole tile over its whole K range."""
        BM, BN, BK = self.block
        return 2.0 * BM * BN * BK * self.k_tiles * self.workgroups

    @property
    def operand_bytes(self) -> float:
        """A + B + C and the fused inputs once (the roofline's bytes)."""
        return self.batch * (self.M * self.K * self.a_bytes + self.N * self.K * self.b_bytes + self.M * self.N * self.c_bytes) \
            + self.fused_bytes

    @property
    def tile_bytes(self) -> float:
        """Bytes of A and B one workgroup loads per K tile (rows past M or N are masked: no traffic)."""
        BM, BN, BK = self.block
        return min(BK, self.K) * (min(BM, self.M) * self.a_bytes + min(BN, self.N) * self.b_bytes)


@attrs.frozen
class GpuEstimate:
    """The kernel-level estimate (module docstring); times in seconds."""

    workgroups: int
    workgroups_per_cu: int  # co-resident workgroups a CU can hold (occupancy)
    waves: int  # dispatch waves: ceil(workgroups / (CUs x workgroups_per_cu))
    cus_used: int
    tile_efficiency: float  # useful / issued MFMA work
    hbm_bytes: float
    hbm_bytes_per_s: float  # the bandwidth the estimate allows (8 TB/s or the in-flight cap)
    compute_s: float
    memory_s: float
    time_s: float
    roofline_s: float
    bound: str  # "memory" or "compute"

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_s / self.time_s

    def as_dict(self) -> dict:
        return {**attrs.asdict(self), "roofline_fraction": self.roofline_fraction}


def split_traffic(plan) -> tuple[int, int, int]:
    """(extra bytes, kernels, tails) of a plan's K split (module docstring; ``Epilogue.ops``):

    * none: (0, 1, 0);
    * ``atomic_add`` (f32 atomics into C, zeroed by a second launch): the S partials of every
      element minus C once, plus the zeroing: ``S x 4 M N``; 2 kernels;
    * ``reduce`` atomic: S atomic partials, the read-back and the zeroing: ``(S + 2) x 4 M N``; one tail;
    * ``reduce`` ordered: S slices stored and read back: ``2 S x 4 M N``; one tail."""
    ops, splits = plan.epilogue.ops, plan.grid.k_splits
    outputs = 4 * plan.M * plan.N * max(getattr(plan, "batch", 0), 1)
    if "atomic_add" in ops:
        return splits * outputs, 2, 0
    if "reduce" in ops:
        return (splits + 2 if plan.epilogue.reduction == "atomic" else 2 * splits) * outputs, 1, 1
    return 0, 1, 0


def fused_bytes(plan) -> int:
    """Bytes of a plan's fused epilogue inputs, each read once: its ``Epilogue.params`` that
    ``Epilogue.fusion`` names (scales and bias 4 bytes per row or column, the residual C's bytes
    per element)."""
    names = plan.epilogue.fusion.inputs()
    return params_bytes(p for p in plan.epilogue.params if p.name in names)


def params_bytes(params) -> int:
    """Bytes of kernel parameters (``Param`` records of static shapes)."""
    import numpy as np

    return sum(int(np.prod(p.shape)) * np.dtype(p.dtype).itemsize for p in params)


def work_of(plan) -> GemmWork:
    """The ``GemmWork`` of a ``Gfx950GemmPlan`` or ``MxGemmPlan`` (duck-typed: this module sits below
    the planner), its K split's traffic and latencies included (``split_traffic``). MX: packed
    element bytes, the E8M0 scales in ``extra_bytes``; the fused inputs in ``fused_bytes``."""
    import numpy as np

    extra_bytes, kernels, tails = split_traffic(plan)
    fmt = getattr(plan, "fmt", None)
    c_bytes = np.dtype(plan.epilogue.out).itemsize
    if fmt is not None:
        from ...isa.formats import fmt as format_of

        elem = format_of(fmt).bits / 8
        extra_bytes += (plan.M + plan.N) * plan.K // 32
        a_bytes = b_bytes = elem
    else:
        a_bytes = b_bytes = np.dtype("int8" if plan.elem == "uint8" else plan.elem).itemsize
    return GemmWork(plan.M, plan.N, plan.K, plan.block, a_bytes, b_bytes, c_bytes, plan.grid.k_splits,
                    max(getattr(plan, "batch", 0), 1), plan.config.load_ahead, extra_bytes, kernels, tails,
                    fused_bytes(plan))


def grouped_work(plan, T) -> GemmWork:
    """The ``GemmWork`` of a grouped plan (its grid's ``grouping``: G groups) serving ``T`` rows in
    all: G groups of ``T / G`` rows each (``GemmWork.grouped``)."""
    G, fusion = plan.grid.grouping.count, plan.epilogue.fusion
    static = attrs.evolve(plan, M=1, epilogue=attrs.evolve(plan.epilogue, params=(), fusion=Fusion()))
    return attrs.evolve(work_of(static), M=T / G, batch=G, grouped=True,
                        fused_bytes=params_bytes(fusion.params(T, plan.N, plan.epilogue.out, G)))


def planned_loop_fraction(mfma_cycles_per_k_tile: float) -> float:
    """The per-wave loop fraction of a plan not yet built: its MFMA cycles per K tile over those
    plus ``PLANNED_IDLE_CYCLES``."""
    return mfma_cycles_per_k_tile / (mfma_cycles_per_k_tile + PLANNED_IDLE_CYCLES)


def gpu_estimate(work: GemmWork, waves_per_simd: int, waves_per_workgroup: int, loop_fraction: float,
                 peak_ops_per_cycle: float, cus: int = MI355X_CUS) -> GpuEstimate:
    """The whole-GPU estimate of ``work`` (module docstring): ``waves_per_simd`` the kernel's
    occupancy, ``loop_fraction`` of the per-SIMD MFMA peak ``peak_ops_per_cycle`` in its main loop."""
    if not 0 < loop_fraction <= 1 or waves_per_simd < 1:
        raise ValueError(f"gpu_estimate: loop_fraction in (0, 1] and waves_per_simd >= 1; got {loop_fraction}, "
                         f"{waves_per_simd}")
    groups = work.workgroups
    per_cu = max(1, waves_per_simd * SIMDS_PER_CU // waves_per_workgroup)
    turns = -(-groups // cus)
    group_cycles = work.issued_flops / groups / (SIMDS_PER_CU * peak_ops_per_cycle * loop_fraction)
    compute_s = turns * group_cycles / CLOCK_HZ
    resident = min(groups, cus * per_cu)
    in_flight = resident * work.load_ahead * work.tile_bytes
    bandwidth = min(HBM_BYTES_PER_S, in_flight / HBM_LATENCY_S)
    hbm = work.operand_bytes + work.extra_bytes
    memory_s = hbm / bandwidth
    time_s = max(compute_s, memory_s) + (work.kernels + work.tails) * HBM_LATENCY_S
    peak = peak_ops_per_cycle * SIMDS_PER_CU * cus * CLOCK_HZ
    roofline = max(work.useful_flops / peak, work.operand_bytes / HBM_BYTES_PER_S)
    return GpuEstimate(groups, per_cu, -(-groups // (cus * per_cu)), min(groups, cus),
                       work.useful_flops / work.issued_flops, hbm, bandwidth, compute_s, memory_s, time_s, roofline,
                       "memory" if memory_s >= compute_s else "compute")


__all__ = ["CLOCK_HZ", "HBM_BYTES_PER_S", "HBM_LATENCY_S", "MI355X_CUS", "PLANNED_IDLE_CYCLES", "GemmWork",
           "GpuEstimate", "fused_bytes", "gpu_estimate", "grouped_work", "params_bytes", "planned_loop_fraction",
           "split_traffic", "work_of"]
