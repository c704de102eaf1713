"""The gfx950 GEMMs' configs and plans, without TIRx: what ``plan_gfx950_gemm`` decides for the dense
GEMM (``Gfx950GemmConfig`` -> ``Gfx950GemmPlan``, per-dtype ``DTYPES``) and ``plan_mx_gemm`` for the
MX GEMM (``MxGemmConfig`` -> ``MxGemmPlan``, per-operand ``MxOperand``), with the stages both share:
the launch grid (``Grid``, decoded once per kernel), the epilogue (``Epilogue``: what happens to the
accumulator tile before the store) and the kernel's parameters (``Param``). ``kernels.gfx950.emit`` holds
the emitter pieces; ``kernels.gfx950.gemm_emit`` and ``kernels.gfx950.mx_gemm`` emit the kernels from the
plans. The CLI resolves options and keys the build cache (``kernels.gfx950.gemm.build``) with this module
alone, so a warm build does not import TIRx (like ``kernels.sm80.gemm_plan`` for sm80).

The plans' parts have their own modules, and this one re-exports their names (import them from here or
from their homes): ``gemm_common`` (the grid, the epilogue, ``Extent``), ``gemm_config`` (the dense
GEMM's dtypes and tile), ``gemm_interleave`` (the interleave program) and ``mx_gemm_plan`` (the MX
GEMM's config and plan). This module holds the dense GEMM's plan (``plan_gfx950_gemm``) and the planner
for every M (``plan_for``).

Extents that depend on the problem (``M`` and what is derived from it: the grid's tile rows, C's
shape) are typed ``Extent``: Python ints today, room for a symbolic ``M`` (a TIR variable) later, so
the emission never calls ``int()`` on them; the validation compares them only where they are ints."""

from __future__ import annotations

import math

import attrs

from ..common import PlanRecord

from ...isa import CATALOG, WAVE_SIZE
from ...patterns.dma import LdsTile
from ...isa.hardware import GFX950_LDS_BYTES
from ..gemm.dynamic_m import MBucket, ceil_div, check_layout, m_limit, resolve_m
from ..gemm.epilogue import Fusion, Param
from ..gemm.grouped import OFFSETS, Groups
from .gemm_cost import MI355X_CUS, gpu_estimate, planned_loop_fraction, work_of
from .gemm_common import (  # noqa: F401 (re-exported: callers import them from gemm_plan)
    EPILOGUE_OPS, OUT_STORAGE, REDUCTIONS, Epilogue, Extent, Grid, GridIndex, convert_epilogue, fuse_epilogue,
    split_epilogue,
)
from .gemm_config import (  # noqa: F401 (re-exported)
    DTYPES, FORMAT_CODES, LAYOUTS, UNIT_SCALES, DtypeSpec, Gfx950GemmConfig, _fp8, default_config, dma_config,
)
from .gemm_interleave import prefetch_program, prefetch_reads  # noqa: F401 (re-exported)
from .mx_gemm_plan import (  # noqa: F401 (re-exported)
    DS_READ2_B64_REACH, MFMA, MX_FORMATS, SCALE_WORD_FRAGMENTS, THREADS, MxGemmConfig, MxGemmPlan, MxOperand, _check,
    check_mx_config, _scale_words_per_stage, default_mx_config, lds_bytes, operand_plan, plan_mx_gemm,
    transpose_load,
)


# --------------------------------------------------------------------------------------- the plan


@attrs.frozen
class OperandPlan:
    """How one operand (A or B) of a K tile travels: global -> registers -> LDS -> MFMA fragments."""

    name: str  # "A" or "B"
    mn_contiguous: bool  # M (A) or N (B) is contiguous in memory and LDS: storage rows are K
    storage: tuple[Extent, Extent]  # (rows, columns) of one batch's row-major matrix in memory
    lds_shape: tuple[int, int]  # one LDS stage: (rows, columns + padding) of the tile as stored
    chunks: int  # 16-byte global chunks per thread and K tile
    chunks_per_row: int  # 16-byte chunks per LDS row (the unpadded columns / vec)
    transpose_read: str | None  # the ds_read_tr instruction reading the fragments; None: plain reads
    fragments: int  # MFMA operand fragments per wave and K tile (RM x RK for A, RN x RK for B)
    reads_per_fragment: int  # LDS read instructions per fragment (16-byte reads or ds_read_tr)
    # lds_dma: the stage as direct-to-LDS loads fill it (patterns.dma: the padded rows, 16-byte
    # chunks); lds_shape then has rows for every wave's ``dma_loads`` whole blocks (the last ones
    # masked: they write zeros past the tile). None: register staging
    dma: LdsTile | None = None

    @property
    def dma_loads(self) -> int:
        """Direct-to-LDS loads per wave and K tile (the tile's loads over 4 waves, rounded up)."""
        return -(-self.dma.loads // 4) if self.dma else 0

    @property
    def reads(self) -> int:
        """LDS read instructions per wave and K tile."""
        return self.fragments * self.reads_per_fragment


@attrs.frozen
class Gfx950GemmPlan(PlanRecord, family="gemm"):
    """Everything the emission of one gfx950 GEMM needs, computed by ``plan_gfx950_gemm``: a pure
    function of the problem and the config that tests inspect without building.

    Staging (``config.lds_dma``): global loads through VGPR staging sets and ``ds_write`` into two
    LDS stages (default), or direct-to-LDS loads (``OperandPlan.dma``) into three: a direct-to-LDS
    load of tile ``p + 2`` may only overwrite the stage of tile ``p - 1``, and it gets two periods
    to land, as the staged loads do with ``load_ahead`` 2. Three stages of two workgroups must fit
    a CU's 160 KiB, hence ``dma_config``'s K tiles of 64 bytes (72-73 KiB per workgroup). Measured
    at 4096³ (benchmarks/journal/2026-12.md, "Direct-to-LDS loads in the GEMM: measured"): 128-144 VGPRs
    instead of 218-248, still 2 waves/SIMD (LDS), and below register staging on the same MFMA
    in every dtype and layout; an option, the default for no dtype or layout."""

    M: Extent
    N: int
    K: int
    batch: int  # 0: no batch axis
    dtype: str  # DTYPES key
    layout: str  # LAYOUTS entry
    config: Gfx950GemmConfig
    mfma: str  # catalog name of the MFMA
    elem: str  # TIR dtype of A and B in memory, LDS and registers
    block: tuple[int, int, int]  # (BM, BN, BK): the workgroup's tile
    warp_tile: tuple[int, int]  # (WM, WN): each wave's part of the tile (``config.waves``: 2 x 2 or 1 x 4 waves)
    repeats: tuple[int, int, int]  # (RM, RN, RK): MFMAs per wave along M, N and K per K tile
    # workgroups per (M, N) tile; the batch axis is always decoded (one batch without ``batch``)
    grid: Grid
    k_steps: int  # K tiles of one workgroup (of its K range when ``grid.k_splits`` > 1)
    vec: int  # elements per 16-byte chunk
    a: OperandPlan
    b: OperandPlan
    format_codes: tuple[int, int] | None  # cbsz (A), blgp (B) of the scaled MFMA; None: dense MFMAs
    interleave: tuple[tuple[int, int], ...] | None  # sched.group.barrier program per period; None: off
    epilogue: Epilogue  # accumulators (``acc``) -> C (``out``, ``out_dtype``)
    # dynamic M: the bucket of M values served (M the TIR variable ``M``, bound at launch from A's and
    # C's shapes; the split-K workspace sized for the bucket's end); None: M is static
    dynamic_m: MBucket | None = None

    @property
    def m_max(self) -> int:
        """The largest M the kernel serves: ``M``, or the end of its ``dynamic_m`` bucket."""
        return self.M if self.dynamic_m is None else self.dynamic_m.hi

    @property
    def lds_stages(self) -> int:
        """LDS stages of the pipeline: 3 with direct-to-LDS loads (``dma_config``), else 2."""
        return 3 if self.config.lds_dma else 2

    @property
    def groups(self) -> Extent:
        """Workgroups of the launch (``grid.groups``)."""
        return self.grid.groups

    @property
    def mfmas_per_tile(self) -> int:
        """MFMA instructions per wave and K tile."""
        return self.repeats[0] * self.repeats[1] * self.repeats[2]

    @property
    def fusion(self) -> Fusion:
        """The fused epilogue (``Epilogue.fusion``; empty: the plain conversion)."""
        return self.epilogue.fusion

    @property
    def params(self) -> tuple[Param, ...]:
        """The kernel's parameters: A and B as stored (``OperandPlan.storage``; with ``batch`` a
        leading batch axis; grouped: B with a leading group axis), C ``(M, N)``, the offsets
        (grouped: ``int32 [G + 1]``), then the epilogue's (the fused inputs, the workspace)."""
        lead = (self.batch,) if self.batch else ()
        g = self.grid.grouping
        b_lead = (g.count,) if g else lead
        grouped = (Param(OFFSETS, (g.count + 1,), "int32"),) if g else ()
        return (Param("A", (*lead, *self.a.storage), self.elem), Param("B", (*b_lead, *self.b.storage), self.elem),
                Param("C", (*lead, self.M, self.N), self.epilogue.out), *grouped, *self.epilogue.params)


def _operand_plan(name: str, op, spec: DtypeSpec, cfg: Gfx950GemmConfig, transposed: bool, M: Extent, N: int, K: int,
                  repeats: int, rk: int) -> OperandPlan:
    """A (``name`` "A") or B of the tile: its storage, LDS stage, global chunks and LDS reads."""
    esize = spec.elem_bytes
    vec = max(1, 16 // esize)
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    pad = cfg.lds_pad // esize
    mn, tile_mn = (M, BM) if name == "A" else (N, BN)
    mn_contiguous = transposed if name == "A" else not transposed
    # K-contiguous tiles are stored (rows, BK) in LDS, M/N-contiguous ones (BK, cols); + padding
    storage = (K, mn) if mn_contiguous else (mn, K)
    rows, cols = (BK, tile_mn) if mn_contiguous else (tile_mn, BK)
    chunks = rows * cols // vec // 256
    if chunks * 256 * vec != rows * cols or chunks < 1:
        raise ValueError(f"tile {BM}x{BN}x{BK} is not a whole number of 16-byte chunks per thread")
    tr = spec.tr if cfg.transpose_loads and mn_contiguous else None
    elems = op.a_elems
    # LDS reads per fragment: one ds_read_tr per n elements, or 16-byte reads
    per_fragment = elems // CATALOG[tr].elements if tr else -(-elems * esize // 16)
    lds_shape, dma = (rows, cols + pad), None
    if cfg.lds_dma:
        if storage[1] % vec:
            raise ValueError(f"lds_dma: {name} rows of {storage[1]} elements are not whole 16-byte chunks "
                             f"(direct-to-LDS loads move whole chunks); use the register staging (lds_dma=False)")
        dma = LdsTile(rows, cols // vec, 16, pad=cfg.lds_pad)
        blocks = -(-dma.loads // 4) * 4  # every wave issues the same loads: vmcnt counts are per wave
        lds_shape = (-(-blocks * WAVE_SIZE * dma.size // dma.group_bytes), cols + pad)
    return OperandPlan(name, mn_contiguous, storage, lds_shape, chunks, cols // vec, tr, repeats * rk,
                       per_fragment, dma)


def plan_gfx950_gemm(M: Extent | MBucket, N: int, K: int, dtype: str = "f16", layout: str = "nn",
                     out_dtype: str | None = None, config: Gfx950GemmConfig | None = None, batch: int = 0,
                     k_splits: int = 1, fusion: Fusion | None = None, groups: int = 0) -> Gfx950GemmPlan:
    """The plan of ``gfx950_gemm`` (same arguments); ValueError for a problem or config it cannot
    run. ``k_splits`` > 1: split-K, each workgroup one of ``k_splits`` consecutive ranges of
    ``k_steps`` K tiles, its partial product added into an f32 C (zeroed on entry), or reduced
    through the workspace and the tile's ticket (``split_epilogue``: 16-bit outputs, a fused
    epilogue, or ``config.reduction`` "ordered"). ``fusion``: the fused epilogue
    (``kernels.gemm.epilogue.Fusion``; ``fuse_epilogue``), applied to the f32 accumulators (after the
    reduction) before the conversion. ``M`` an ``MBucket``: dynamic M (``check_dynamic``).
    ``groups`` > 0: a grouped GEMM of that many groups (``kernels.gemm.grouped``), ``M`` the bucket of
    rows per group the tile is chosen for, the plan's M the run-time total T (``check_grouped``)."""
    bucket = M if isinstance(M, MBucket) else None
    rows = None
    if groups:
        rows, bucket = check_grouped(M, groups, N, K, dtype, layout, batch, k_splits)
    if bucket is not None:
        check_dynamic(layout, batch)
        M = resolve_m(bucket, "plan_gfx950_gemm")[0]
    if dtype not in DTYPES:
        raise ValueError(f"gfx950 GEMM: dtype {dtype!r} is not supported; expected one of {sorted(DTYPES)}")
    if layout not in LAYOUTS:
        raise ValueError(f"gfx950 GEMM: layout {layout!r}; expected one of {LAYOUTS}")
    spec = DTYPES[dtype]
    out_dtype = out_dtype or spec.outs[0]
    if out_dtype not in spec.outs:
        raise ValueError(f"gfx950 GEMM: output {out_dtype!r} for {dtype}; expected one of {list(spec.outs)}")
    if any(isinstance(x, int) and x < 1 for x in (M, N, K)):
        raise ValueError(f"gfx950 GEMM: M, N, K must be positive; got {M}, {N}, {K}")
    cfg = config or default_config(dtype)
    cfg.check(spec)
    tiles_k = -(-K // cfg.block_k)
    if not 1 <= k_splits <= tiles_k:
        raise ValueError(f"gfx950 GEMM: k_splits {k_splits} must be in [1, {tiles_k}] (the K tiles)")
    op = CATALOG[spec.mfma16 if cfg.mfma == "16x16" else spec.mfma32]
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    grouping = Groups(groups, BM, rows) if groups else None
    grid = Grid((grouping.row_tiles(M) if groups else ceil_div(M, BM), -(-N // BN)), max(batch, 1), k_splits, grouping)
    fusion = fusion or Fusion()
    m_max = M if bucket is None else bucket.hi  # the workspace serves the bucket's largest M
    epilogue = split_epilogue(spec.acc, out_dtype, k_splits, cfg.reduction, max(batch, 1) * m_max * N,
                              max(batch, 1) * -(-m_max // BM) * grid.tiles[1], fused=not fusion.empty)
    epilogue = fuse_epilogue(epilogue, fusion, M, N, batch, groups)
    WM, WN = BM // cfg.waves[0], BN // cfg.waves[1]
    RM, RN, RK = WM // op.m, WN // op.n, BK // op.k
    a = _operand_plan("A", op, spec, cfg, layout[0] == "t", M, N, K, RM, RK)
    b = _operand_plan("B", op, spec, cfg, layout[1] == "t", M, N, K, RN, RK)
    writes = 0 if cfg.lds_dma else a.chunks + b.chunks  # LDS stores: none with direct-to-LDS loads
    loads = a.dma_loads + b.dma_loads if cfg.lds_dma else a.chunks + b.chunks
    program = prefetch_program((RM, RN, RK), a.reads_per_fragment, b.reads_per_fragment, writes,
                               loads) if cfg.interleave else None
    codes = tuple(FORMAT_CODES[f] for f in spec.scaled) if spec.scaled else None
    plan = Gfx950GemmPlan(M, N, K, batch, dtype, layout, cfg, op.name, spec.storage, (BM, BN, BK), (WM, WN),
                          (RM, RN, RK), grid, -(-tiles_k // k_splits),
                          max(1, 16 // spec.elem_bytes), a, b, codes, program, epilogue, bucket)
    if planned_lds_bytes(plan) > GFX950_LDS_BYTES:
        raise ValueError(f"gfx950 GEMM: {planned_lds_bytes(plan)} bytes of LDS ({plan.lds_stages} stages of A and B) "
                         f"exceed a CU's {GFX950_LDS_BYTES}: block {BM}x{BN}x{BK}; use a smaller block")
    return plan


def check_grouped(rows, groups: int, N: int, K: int, dtype: str, layout: str, batch: int,
                  k_splits: int) -> tuple[MBucket, MBucket]:
    """What a grouped plan needs (``kernels.gemm.grouped``): ``rows`` an ``MBucket`` (the rows per group
    the tile is chosen for), a dense dtype, a layout of ``kernels.gemm.grouped.LAYOUTS``, no batch axis or K split
    (a workgroup's rows are known only after its search), one group's weights within 31-bit buffer
    offsets. Returns ``(rows, the bucket of T)``: T, the run-time total of rows, is the plan's dynamic
    M, up to ``m_limit`` (A's bytes, C's N), as for dynamic M."""
    from ..gemm.grouped import check_layout as check_grouped_layout

    who = "grouped gfx950 GEMM"
    if not isinstance(rows, MBucket):
        raise TypeError(f"{who}: M must be the MBucket of rows per group the tile is chosen for; got {rows!r}")
    if dtype not in DTYPES:
        raise ValueError(f"{who}: dtype {dtype!r}; expected one of the dense dtypes {sorted(DTYPES)}")
    check_grouped_layout(layout, who)
    if batch or k_splits != 1:
        raise ValueError(f"{who}: no batch axis or K split (a workgroup's rows are known only on the device); got "
                         f"batch={batch}, k_splits={k_splits}")
    if N * K * DTYPES[dtype].elem_bytes >= 2**31:
        raise ValueError(f"{who}: one group's weights ({N} x {K} {dtype}) must fit 31-bit buffer offsets (< 2 GiB)")
    return rows, MBucket(1, m_limit(K * DTYPES[dtype].elem_bytes, N))


def check_dynamic(layout: str, batch: int) -> None:
    """What dynamic M needs of a dense gfx950 GEMM: A stored [M, K] (``kernels.gemm.dynamic_m.check_layout``) and no
    batch axis."""
    check_layout(layout, "gfx950 GEMM")
    if batch:
        raise ValueError(f"gfx950 GEMM: dynamic M has no batch axis; got batch={batch}")


# ------------------------------------------------------------------------ the planner for every M


SMALL_M_BLOCKS = (32, 64, 128)  # block_m candidates of 2 x 2 waves (one 16-row MFMA per wave at least)
BLOCK_N_CANDIDATES = (64, 128)
# 16-row tiles: 1 x 4 waves along N (one 16-row MFMA block), block_n 64-256, and K tiles of the
# dtype's default or twice it (a 16-row A tile of 64 bf16 K is half a 16-byte chunk per thread)
DECODE_BLOCK_M = 16
DECODE_BLOCK_N = (64, 128, 256)
# K tiles of 16-row plans, in multiples of the default's block_k: longer K tiles put more bytes in
# flight per workgroup (Little's law) where few tiles cover N (16x64x384 bf16: 254 VGPRs, no scratch)
DECODE_K_MULTIPLES = (1, 2, 4, 6)
K_SPLITS = (1, 2, 4, 8, 16, 32)
PLAN_MARGIN = 0.02  # a candidate must beat the dtype's default plan by 2 % to replace it
MIN_SPLIT_K_TILES = 2  # K tiles per workgroup at least (the pipeline overlaps two)
# MFMAs per wave and K tile at most: two fragment sets of RM x RK + RN x RK fragments (4 VGPRs each)
# beside the accumulators and the staging sets; the default 128x128x64 tile has 32
MAX_PLANNED_MFMAS = 32


def planned_waves_per_simd(plan: Gfx950GemmPlan) -> int:
    """The occupancy the planner assumes before the build: the workgroups whose LDS stages fit a CU
    (one wave per SIMD each), at most 2 (the VGPRs are not known before the build; the 128x128
    kernels take 118-248)."""
    return max(1, min(2, GFX950_LDS_BYTES // planned_lds_bytes(plan)))


def planned_estimate(plan: Gfx950GemmPlan, cus: int = MI355X_CUS, groups: int = 0):
    """``kernels.gfx950.gemm_cost.gpu_estimate`` of a plan before its build: the occupancy of
    ``planned_waves_per_simd``, the loop fraction of ``planned_loop_fraction`` (the plan's MFMA
    cycles per K tile), the rate of the plan's MFMA as the peak; split-K adds its traffic and
    latencies (``kernels.gfx950.gemm_cost.split_traffic``). ``groups`` > 0: the plan's (static) M is the rows of
    each of that many groups of a grouped GEMM (``GemmWork.grouped``)."""
    op = CATALOG[plan.mfma]
    cycles = max(dict(op.cycles_by_format).get(f, op.cycles) for f in DTYPES[plan.dtype].formats) \
        if op.cycles_by_format else op.cycles
    work = work_of(plan)
    if groups:  # the static plan is one group's: G of them (the per-group fused inputs G times too)
        work = attrs.evolve(work, batch=groups, grouped=True, fused_bytes=work.fused_bytes * groups)
    return gpu_estimate(work, planned_waves_per_simd(plan), 4,
                        planned_loop_fraction(plan.mfmas_per_tile * cycles), op.ops / cycles, cus)


def plan_candidates(base: Gfx950GemmConfig) -> tuple[Gfx950GemmConfig, ...]:
    """The tiles ``plan_for`` weighs: the default's with ``block_m`` in ``SMALL_M_BLOCKS`` and
    ``block_n`` in ``BLOCK_N_CANDIDATES`` (2 x 2 waves), and 16-row tiles (1 x 4 waves) with
    ``block_n`` in ``DECODE_BLOCK_N`` and K tiles of ``DECODE_K_MULTIPLES`` times the default's."""
    out = [attrs.evolve(base, block_m=bm, block_n=bn) for bm in SMALL_M_BLOCKS for bn in BLOCK_N_CANDIDATES]
    out += [attrs.evolve(base, block_m=DECODE_BLOCK_M, block_n=bn, block_k=k * base.block_k, waves_m=1)
            for bn in DECODE_BLOCK_N for k in DECODE_K_MULTIPLES]
    return tuple(out)


def planned_lds_bytes(plan: Gfx950GemmPlan) -> int:
    """LDS bytes of a plan's stages (what one workgroup allocates)."""
    elem = DTYPES[plan.dtype].elem_bytes
    return plan.lds_stages * elem * (math.prod(plan.a.lds_shape) + math.prod(plan.b.lds_shape))


def plan_for(M: int, N: int, K: int, dtype: str = "bf16", layout: str = "nt", out_dtype: str | None = None,
             batch: int = 0, cus: int = MI355X_CUS, reduction: str = "atomic", fusion: Fusion | None = None,
             groups: int = 0) -> Gfx950GemmPlan:
    """The plan for any M: the candidate with the least ``planned_estimate`` time over ``cus`` CUs
    among ``plan_candidates`` and, where the accumulators are f32 (the split-K reduction of any
    output: f32 atomics into C for an f32 output, else the workspace and a ticket; ``reduction``
    "ordered": the deterministic workspace), ``k_splits`` in ``K_SPLITS`` with at least
    ``MIN_SPLIT_K_TILES`` K tiles per workgroup. The default plan stays unless a candidate beats it
    by ``PLAN_MARGIN`` (the big shapes keep their plans). ``fusion``: every candidate's fused
    epilogue (its inputs' bytes count in the estimate; a split f32 output reduces through the workspace).
    ``groups`` > 0: the tile of a grouped GEMM of that many groups of ``M`` rows each (no K split; the
    static plan of M rows that carries it)."""
    base = plan_gfx950_gemm(M, N, K, dtype, layout, out_dtype, attrs.evolve(default_config(dtype), reduction=reduction),
                            batch, fusion=fusion)
    best, best_time = base, planned_estimate(base, cus, groups).time_s * (1 - PLAN_MARGIN)
    splits = K_SPLITS if base.epilogue.acc == "float32" and not groups else (1,)
    for cfg in plan_candidates(base.config):
        try:
            cfg.check(DTYPES[dtype])
        except ValueError:
            continue
        for ks in splits:
            if ks > 1 and -(-K // cfg.block_k) < ks * MIN_SPLIT_K_TILES:
                break
            try:
                cand = plan_gfx950_gemm(M, N, K, dtype, layout, out_dtype, cfg, batch, ks, fusion)
            except ValueError:
                continue
            if planned_lds_bytes(cand) > GFX950_LDS_BYTES or cand.mfmas_per_tile > MAX_PLANNED_MFMAS:
                break  # the stages do not fit a CU, or the fragment sets would not fit the registers
            t = planned_estimate(cand, cus, groups).time_s
            if t < best_time:
                best, best_time = cand, t
    return best
