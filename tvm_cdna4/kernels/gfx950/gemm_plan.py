"""The gfx950 GEMMs' configs and plans, without TIRx: what ``plan_gfx950_gemm`` decides for the dense
GEMM (``Gfx950GemmConfig`` -> ``Gfx950GemmPlan``, per-dtype ``DTYPES``) and ``plan_mx_gemm`` for the
MX GEMM (``MxGemmConfig`` -> ``MxGemmPlan``, per-operand ``MxOperand``), with the stages both share:
the launch grid (``Grid``, decoded once per kernel), the epilogue (``Epilogue``: what happens to the
accumulator tile before the store) and the kernel's parameters (``Param``). ``gfx950_emit`` holds the
emitter pieces; ``gfx950_gemm_emit`` and ``gfx950_mx_gemm`` emit the kernels from the plans. The CLI
resolves options and keys the build cache (``kernels.gfx950.gemm.build``) with this module alone, so a warm
build does not import TIRx (like ``cuda_plan`` for sm80).

Extents that depend on the problem (``M`` and what is derived from it: the grid's tile rows, C's
shape) are typed ``Extent``: Python ints today, room for a symbolic ``M`` (a TIR variable) later, so
the emission never calls ``int()`` on them; the validation compares them only where they are ints."""

from __future__ import annotations

import math
import operator

import attrs

from ..common import PlanRecord

from typing import Union

from ...isa import CATALOG, DS_READ_TR_OPS, SCALE_FORMAT_CODES, WAVE_SIZE, DsReadTrOp
from ...isa.formats import fmt as format_of
from ...isa.mfma_table import SCALE_VECTOR_WORDS
from ...patterns.dma import LdsTile
from ...isa.hardware import GFX950_LDS_BYTES
from ...isa.llvm_helpers import SCHED_DS_READ, SCHED_DS_WRITE, SCHED_MFMA, SCHED_VMEM_READ
from ..gemm.dynamic_m import MBucket, ceil_div, check_layout, m_limit, resolve_m
from ..gemm.epilogue import Fusion, Param
from ..gemm.grouped import OFFSETS, Groups
from .gemm_cost import MI355X_CUS, gpu_estimate, planned_loop_fraction, work_of

Extent = Union[int, "PrimExpr"]  # noqa: F821 (a TIR expression: the symbolic M to come)

# ------------------------------------------------------------------- the stages both GEMMs share


@attrs.frozen
class Grid:
    """The launch grid, one workgroup per output tile: ``tiles`` = (tile rows, tile columns) per
    batch, ``batch`` workgroups along a batch axis (None: the kernel has no batch axis), ``k_splits``
    workgroups along K per tile (split-K: each a range of K tiles, ``tile_origin``). ``decode`` turns ``blockIdx.x``
    into the tile's indices once per kernel (tile column fastest, then row, then K split, then batch).
    ``grouping``: a grouped GEMM (``kernels.gemm.grouped``): ``tiles[0]`` is ``grouping.row_tiles(M)`` and a
    decoded row is a row-tile index, turned into the workgroup's group and rows by a search of the
    offsets (``Groups``)."""

    tiles: tuple[Extent, int]
    batch: int | None = None
    k_splits: int = 1
    grouping: Groups | None = None

    @property
    def groups(self) -> Extent:
        """Workgroups of the launch."""
        return self.tiles[0] * self.tiles[1] * (self.batch or 1) * self.k_splits

    def decode(self, bid, div=operator.floordiv, mod=operator.mod) -> GridIndex:
        """The tile indices of workgroup ``bid`` (an int or a TIR expression). ``div``, ``mod``: Python's
        (floor) operators; the emission passes truncating ones where the tile rows are a symbolic extent
        (``symbolic``: TIRx lowers a floor division whose dividend it cannot prove non-negative with an
        offset that leaves int32 once the divisor is not a power of two, e.g. 224 tile columns)."""
        per = self.tiles[0] * self.tiles[1]
        if self.batch is None and self.k_splits == 1:
            return GridIndex(0, 0, div(bid, self.tiles[1]), mod(bid, self.tiles[1]))
        split = 0 if self.k_splits == 1 else mod(div(bid, per), self.k_splits)
        return GridIndex(div(bid, per * self.k_splits), split, div(mod(bid, per), self.tiles[1]), mod(bid, self.tiles[1]))

    @property
    def symbolic(self) -> bool:
        """Whether the tile rows are a TIR expression (dynamic M, grouped), not an int."""
        return not isinstance(self.tiles[0], int)


@attrs.frozen
class GridIndex:
    """A workgroup's indices (``Grid.decode``): batch, K split, tile row, tile column."""

    batch: object
    k_split: object
    row: object
    col: object


EPILOGUE_OPS = ("reduce", "fuse", "cast", "bf16_rne", "bf16_rna", "atomic_add")  # what an epilogue may apply, in order
REDUCTIONS = ("atomic", "ordered")  # how split-K partial tiles are reduced through the workspace


@attrs.frozen
class Epilogue:
    """The operations applied to the accumulator tile before the store to C, in order: ``fuse``
    (``fusion``'s steps on the f32 accumulator: scales, bias, activation, residual; ``kernels.gemm.epilogue``),
    ``cast`` (to ``out``), ``bf16_rne`` (round to nearest even, the bf16 bit pattern as int16), ``bf16_rna``
    (round to nearest, ties away from zero: one integer add for finite values, where the tie rule does
    not matter, e.g. attention's P; the same error bound), ``atomic_add``
    (the split-K reduction into an f32 C: the f32 values are added to C with
    ``T.rocm.global_atomic_add_f32`` instead of stored, so C must hold zeros on entry); none: the
    accumulators are stored as they are. ``reduce`` (first; split-K into any output): the
    workgroup's partial tile goes to the f32 workspace ``W`` (``reduction`` "atomic": added with
    f32 atomics into one slice; "ordered": stored into the workgroup's K slice), then a ticket from
    the tile's counter in ``S``; the workgroup that draws the last ticket reads the tile's sum
    (atomic: and zeroes ``W``; ordered: the slices added in index order, bit-reproducible), resets
    the counter and applies the other operations to it (``kernels.gfx950.emit.split_store``). Each
    operation brings its parameters (``params``: the fused inputs in ``kernels.gemm.epilogue.PARAM_ORDER``, then
    the split-K workspace)."""

    acc: str  # TIR dtype of the accumulators
    out_dtype: str  # OUT_STORAGE key of C
    out: str  # TIR dtype of C
    ops: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()  # the epilogue's inputs besides C (the fused inputs; split-K: the workspace W, the tickets S)
    reduction: str | None = None  # REDUCTIONS entry with ``reduce``; None without
    slices: int = 0  # f32 workspace slices of M x N: k_splits (ordered), 1 (atomic), 0 without ``reduce``
    fusion: Fusion = Fusion()  # the fused steps of ``fuse`` (empty without)

    def __attrs_post_init__(self):
        unknown = [op for op in self.ops if op not in EPILOGUE_OPS]
        if unknown:
            raise ValueError(f"epilogue: unknown operations {unknown}; expected some of {EPILOGUE_OPS}")
        if ("reduce" in self.ops) != (self.reduction in REDUCTIONS):
            raise ValueError(f"epilogue: 'reduce' needs a reduction in {REDUCTIONS} and only it has one; got ops "
                             f"{self.ops}, reduction {self.reduction!r}")
        if ("fuse" in self.ops) == self.fusion.empty:
            raise ValueError(f"epilogue: 'fuse' needs a fusion and only it has one; got ops {self.ops}, fusion "
                             f"{self.fusion.describe()}")
        if "fuse" in self.ops and "atomic_add" in self.ops:
            raise ValueError("epilogue: a fused epilogue cannot add partial products into C ('atomic_add'): the fused "
                             "steps apply to the whole sum (reduce through the workspace)")


def split_epilogue(acc: str, out_dtype: str, k_splits: int, reduction: str = "atomic", outputs: Extent = 0,
                   tiles: Extent = 0, fused: bool = False) -> Epilogue:
    """The epilogue of a GEMM split ``k_splits`` ways along K (f32 accumulators only): the
    conversion (no split); an f32 output with ``reduction`` "atomic" and nothing ``fused``: the f32
    atomic add of the partial products into C (zeroed on entry); otherwise ``reduce`` through the
    workspace ``W`` (``slices`` x ``outputs`` f32, ``outputs`` = batch x M x N) and the tickets ``S``
    (one uint32 per output tile, ``tiles``), then the conversion (``Epilogue``; ``fuse_epilogue``
    adds the fused steps after the reduction)."""
    if k_splits == 1:
        return convert_epilogue(acc, out_dtype)
    if acc != "float32":
        raise ValueError(f"split-K (k_splits={k_splits}) reduces f32 partial products: it needs f32 accumulators; got "
                         f"{acc} -> {out_dtype}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"split-K reduction {reduction!r}; expected one of {REDUCTIONS}")
    if (out_dtype, reduction) == ("f32", "atomic") and not fused:
        return Epilogue(acc, out_dtype, OUT_STORAGE[out_dtype], ("atomic_add",))
    slices = k_splits if reduction == "ordered" else 1
    convert = convert_epilogue(acc, out_dtype)
    return Epilogue(acc, out_dtype, convert.out, ("reduce", *convert.ops),
                    (Param("W", (slices * outputs,), "float32"), Param("S", (tiles,), "uint32")), reduction, slices)


def convert_epilogue(acc: str, out_dtype: str) -> Epilogue:
    """The epilogue that only converts the accumulators to ``out_dtype``."""
    out = OUT_STORAGE[out_dtype]
    ops = ("bf16_rne",) if out_dtype == "bf16" else ("cast",) if out != acc else ()
    return Epilogue(acc, out_dtype, out, ops)


def fuse_epilogue(epilogue: Epilogue, fusion: Fusion, M: Extent, N: int, batch: int = 0, groups: int = 0) -> Epilogue:
    """``epilogue`` with ``fusion``'s steps (``fuse``: after the reduction, before the conversion)
    and its inputs (``Fusion.params``) before the workspace; ``epilogue`` itself when nothing is
    fused. ValueError where the fused epilogue cannot run: accumulators other than f32 (it computes
    in f32), a batch axis (one set of inputs per matrix is not defined). ``groups``: a grouped GEMM's
    count (its per-column inputs per group, ``Fusion.params``)."""
    if fusion.empty:
        return epilogue
    if epilogue.acc != "float32":
        raise ValueError(f"fused epilogue ({fusion.describe()}): it computes on f32 accumulators; this GEMM "
                         f"accumulates in {epilogue.acc} ({epilogue.out_dtype} output)")
    if batch:
        raise ValueError(f"fused epilogue ({fusion.describe()}): not with a batch axis (batch={batch}); the inputs "
                         f"are per matrix (row_scale [M], bias [N], residual [M, N])")
    at = 1 if epilogue.ops[:1] == ("reduce",) else 0
    return attrs.evolve(epilogue, ops=(*epilogue.ops[:at], "fuse", *epilogue.ops[at:]),
                        params=(*fusion.params(M, N, epilogue.out, groups), *epilogue.params), fusion=fusion)


# ---------------------------------------------------------------------------------- the dense GEMM


@attrs.frozen
class DtypeSpec:
    storage: str  # TIR dtype of A/B in memory (bf16 travels as int16 bit patterns)
    mfma16: str  # 16x16 MFMA
    mfma32: str  # 32x32 MFMA
    tr: str | None  # ds_read_tr for the M/N-contiguous operand; None: per-element LDS reads
    acc: str  # accumulator TIR dtype
    outs: tuple[str, ...]  # legal output dtypes (first = default)
    scaled: tuple[str, str] | None = None  # A/B formats of the scaled MFMAs (unit scales); None: dense MFMAs

    @property
    def formats(self) -> tuple[str, str]:
        """A and B element formats."""
        return self.scaled or (CATALOG[self.mfma16].a_format, CATALOG[self.mfma16].b_format)

    @property
    def numpy(self):
        """The numpy dtype users pass (``isa.formats``), or (A's, B's) where they differ or are scaled."""
        a, b = self.formats
        return (format_of(a).dtype, format_of(b).dtype) if self.scaled else format_of(a).dtype

    @property
    def elem_bytes(self) -> int:
        """Bytes of one A/B element (``isa.formats``)."""
        return format_of(self.formats[0]).bits // 8


FORMAT_CODES = {fmt: code for code, fmt in SCALE_FORMAT_CODES.items()}  # scaled MFMA cbsz / blgp values
UNIT_SCALES = 0x7F7F7F7F  # E8M0 127 = 2^0 in every byte (whatever op_sel picks)


def _fp8(a, b):
    """fp8/bf8 on the scaled f8f6f4 MFMAs with unit scales (``gfx950_gemm``'s docstring)."""
    return DtypeSpec("uint8", "mfma_scale_f32_16x16x128_f8f6f4", "mfma_scale_f32_32x32x64_f8f6f4",
                     "ds_read_tr8_b64_v2i32", "float32", ("f32", "f16", "bf16"), (a, b))


DTYPES: dict[str, DtypeSpec] = {
    "f16": DtypeSpec("float16", "mfma_f32_16x16x32_f16", "mfma_f32_32x32x16_f16", "ds_read_tr16_b64_v4f16",
                     "float32", ("f32", "f16", "bf16")),
    "bf16": DtypeSpec("int16", "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16", "ds_read_tr16_b64_v4bf16",
                      "float32", ("f32", "f16", "bf16")),
    "fp8": _fp8("fp8", "fp8"),
    "bf8": _fp8("bf8", "bf8"),
    "fp8_bf8": _fp8("fp8", "bf8"),
    "bf8_fp8": _fp8("bf8", "fp8"),
    "i8": DtypeSpec("int8", "mfma_i32_16x16x64_i8", "mfma_i32_32x32x32_i8", "ds_read_tr8_b64_v2i32", "int32", ("i32",)),
    "f32": DtypeSpec("float32", "mfma_f32_16x16x4f32", "mfma_f32_32x32x2f32", None, "float32", ("f32", "f16", "bf16")),
    "f64": DtypeSpec("float64", "mfma_f64_16x16x4f64", "mfma_f64_16x16x4f64", None, "float64", ("f64",)),
}
OUT_STORAGE = {"f32": "float32", "f16": "float16", "bf16": "int16", "i32": "int32", "f64": "float64"}
LAYOUTS = ("nn", "nt", "tn", "tt")


@attrs.frozen
class Gfx950GemmConfig:
    """Tile configuration. ``mfma``: "16x16" or "32x32" (the wide-K double-rate shapes)."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    mfma: str = "16x16"
    lds_pad: int = 16  # bytes added to every LDS row (keeps 16-byte alignment)
    # Ask LLVM's scheduler (sched.group.barrier) to issue the LDS reads, LDS stores and global loads
    # of each K tile between its MFMAs instead of clustering the MFMAs
    interleave: bool = True
    transpose_loads: bool = True  # ds_read_tr for the M/N-contiguous operand; False: per-element LDS reads
    # K tiles between a tile's global loads and its LDS store (kernels.gfx950.pipeline.fragment_pipeline): 1 (one
    # staging register set) or 2 (the loads have two periods to land; a second staging set)
    load_ahead: int = 2
    # Direct-to-LDS global loads (T.rocm.buffer_load_lds, kernels.gfx950.pipeline.dma_pipeline): no staging
    # registers, no ds_write; three LDS stages, loads two K tiles ahead (load_ahead must be 2).
    # ``dma_config`` gives the tile that fits three stages into 80 KiB (two workgroups per CU)
    lds_dma: bool = False
    # waves along M (2: a 2 x 2 wave grid; 1: 1 x 4, the 16-row tiles of decode shapes)
    waves_m: int = 2
    # split-K (k_splits > 1) through the workspace: "atomic" (f32 atomics into one slice; an f32
    # output adds into C directly) or "ordered" (a slice per K split, added in index order)
    reduction: str = "atomic"

    @property
    def waves(self) -> tuple[int, int]:
        """(waves along M, waves along N) of the 4 waves of a workgroup."""
        return self.waves_m, 4 // max(self.waves_m, 1)

    def check(self, spec: DtypeSpec) -> None:
        op = CATALOG[spec.mfma16 if self.mfma == "16x16" else spec.mfma32]
        if self.mfma not in ("16x16", "32x32"):
            raise ValueError(f"config.mfma must be '16x16' or '32x32'; got {self.mfma!r}")
        if self.waves_m not in (1, 2):
            raise ValueError(f"config.waves_m must be 1 (1 x 4 waves) or 2 (2 x 2 waves); got {self.waves_m}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"config.reduction must be one of {REDUCTIONS}; got {self.reduction!r}")
        wm, wn = self.waves
        if self.block_m % (wm * op.m) or self.block_n % (wn * op.n) or self.block_k % op.k:
            raise ValueError(f"block {self.block_m}x{self.block_n}x{self.block_k} does not tile {wm} x {wn} waves of "
                             f"{op.m}x{op.n}x{op.k} MFMAs ({op.name})")
        if self.lds_pad % 16:
            raise ValueError(f"lds_pad must be a multiple of 16 bytes; got {self.lds_pad}")
        if self.load_ahead not in (1, 2):
            raise ValueError(f"load_ahead must be 1 or 2 K tiles; got {self.load_ahead}")
        if self.lds_dma and self.load_ahead != 2:
            raise ValueError(f"lds_dma loads two K tiles ahead into three LDS stages; got load_ahead={self.load_ahead}")


def default_config(dtype: str) -> Gfx950GemmConfig:
    if dtype in ("f32", "f64"):
        return Gfx950GemmConfig(block_m=64, block_n=64, block_k=16)
    if dtype == "i8":  # K = 64 per MFMA: two K steps per LDS tile like the 16-bit types
        return Gfx950GemmConfig(block_k=128)
    if DTYPES[dtype].scaled:  # K = 128 per 16x16x128 MFMA: one K step per LDS tile
        return Gfx950GemmConfig(block_k=128)
    return Gfx950GemmConfig()


def dma_config(dtype: str) -> Gfx950GemmConfig:
    """The direct-to-LDS variant's tile: three LDS stages must fit 80 KiB so that two workgroups
    (2 waves per SIMD) share a CU's 160 KiB. The default 128x128 tiles with 128-byte K rows take
    36 KiB per stage (108 KiB for three); 64-byte K rows take 24 KiB with the row padding and the
    masked slots of the direct-to-LDS blocks (``OperandPlan.dma``), 72 KiB for three. So K tiles of
    64 bytes: f16/bf16 ``block_k`` 32, i8 64, fp8/bf8 64. On the 32x32 MFMAs (fp8/bf8: the scaled
    16x16x128 one needs K tiles of 128 bytes; f16/bf16/i8: half the MFMAs and LDS reads of the 16x16
    ones per tile, 98.2-99.1 % est. at 4096³ against 96.5-97.6 %). f32/f64 keep their 64x64x16 tiles
    (three stages: 15 KiB)."""
    cfg = default_config(dtype)
    if dtype in ("f32", "f64"):
        return attrs.evolve(cfg, lds_dma=True)
    return attrs.evolve(cfg, block_k=64 // DTYPES[dtype].elem_bytes, mfma="32x32", lds_dma=True)


# ------------------------------------------------------------------------------------------ the plan

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
    at 4096³ (benchmarks/RESULTS.md, "Direct-to-LDS loads in the GEMM: measured"): 128-144 VGPRs
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
    return Gfx950GemmPlan(M, N, K, batch, dtype, layout, cfg, op.name, spec.storage, (BM, BN, BK), (WM, WN),
                          (RM, RN, RK), grid, -(-tiles_k // k_splits),
                          max(1, 16 // spec.elem_bytes), a, b, codes, program, epilogue, bucket)


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


# ------------------------------------------------------------------------- the planner for every M

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


# ------------------------------------------------------------------------- the interleave program

def prefetch_program(repeats: tuple[int, int, int], a_reads: int, b_reads: int, lds_writes: int,
                     global_loads: int) -> tuple[tuple[int, int], ...]:
    """``llvm.amdgcn.sched.group.barrier`` groups for one period of ``fragment_pipeline``.

    The period's MFMAs (``repeats`` = (RM, RN, RK); K step, then M, then N fragment) carry its
    memory instructions: over the first half of them, the LDS stores, each followed by a global
    load (which may reuse its registers); and each fragment of the next tile is read (``a_reads``
    / ``b_reads`` LDS reads per A / B fragment) right after the last MFMA that uses the same
    fragment of the current tile, so that the register allocator can give it the same registers:
    the two fragment sets cost little more than one."""
    rm, rn, rk = repeats
    memory = []
    for i in range(max(lds_writes, global_loads)):
        memory += [SCHED_DS_WRITE] * (i < lds_writes) + [SCHED_VMEM_READ] * (i < global_loads)
    per_mfma = -(-len(memory) // max(1, rm * rn * rk // 2))
    program = []
    for _ in range(rk):
        for mi in range(rm):
            for ni in range(rn):
                program.append((SCHED_MFMA, 1))
                program += [(mask, 1) for mask in memory[:per_mfma]]
                del memory[:per_mfma]
                if ni == rn - 1:  # A fragment mi of this K step is dead
                    program.append((SCHED_DS_READ, a_reads))
                if mi == rm - 1:  # B fragment ni of this K step is dead
                    program.append((SCHED_DS_READ, b_reads))
    return tuple(program)


def prefetch_reads(repeats: tuple[int, int, int]) -> tuple[tuple[str, int, int], ...]:
    """The fragments of one tile, ("A", K step, M fragment) or ("B", K step, N fragment), in the
    order in which ``prefetch_program`` places their LDS reads: emitting the reads in this order
    lets each group take the reads of its own fragment."""
    rm, rn, rk = repeats
    order = []
    for kk in range(rk):
        for mi in range(rm):
            for ni in range(rn):
                if ni == rn - 1:
                    order.append(("A", kk, mi))
                if mi == rm - 1:
                    order.append(("B", kk, ni))
    return tuple(order)



# ------------------------------------------------------------------------------------- the MX GEMM

DS_READ2_B64_REACH = 255 * 8  # bytes between the two addresses of one ds_read2_b64 (8-bit offsets of 8 bytes)
MX_FORMATS = {"mxfp8": "fp8", "mxbf8": "bf8", "mxfp6": "fp6", "mxbf6": "bf6", "mxfp4": "fp4"}
MFMA = "mfma_scale_f32_16x16x128_f8f6f4"
SCALE_WORD_FRAGMENTS = 4
"""MFMA fragments of one wave half whose four E8M0 scales share one LDS word (``kernels.gfx950.mx_gemm._Scales``)."""
THREADS = 256


@attrs.frozen
class MxGemmConfig:
    """Tile configuration. ``block_k``: K tile, 128 or 256 (one or two scaled MFMA K steps)."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 128
    lds_pad: int = 16  # bytes added to every LDS row
    interleave: bool = True  # as Gfx950GemmConfig.interleave
    load_ahead: int = 2  # as Gfx950GemmConfig.load_ahead


def transpose_load(fmt: str) -> DsReadTrOp:
    """The catalog's ``ds_read_tr`` that feeds ``fmt`` (tr8 for fp8/bf8, tr6 for fp6/bf6, tr4 for fp4)."""
    return next(op for op in DS_READ_TR_OPS if fmt in op.feeds and op.element_bits == format_of(fmt).bits)


@attrs.frozen
class MxOperand:
    """How one operand travels from global memory to MFMA fragments (``gfx950_mx_gemm``'s docstring).

    Storage: ``rows`` rows of ``row_words`` packed words; a tile is ``tile_rows`` rows of
    ``tile_words`` words. Each thread copies ``units`` units of ``unit_words`` words per tile (one
    buffer load each: 16 bytes; tr6: one 12-byte chunk, stored in its 16-byte slot) into an LDS stage of ``lds_shape``
    (``lds_dtype``): uint32 K words (K-contiguous), or uint8 rows of K with ``slot_bytes`` per
    ``ds_read_tr`` chunk (M/N-contiguous; ``lds_row`` bytes per K row)."""

    name: str  # "A" or "B"
    k_contiguous: bool
    rows: Extent  # M or N (K-contiguous), K
    row_words: Extent
    tile_rows: int
    tile_words: int
    unit_words: int
    units: int
    lds_shape: tuple[int, ...]
    lds_dtype: str
    lds_row: int  # LDS row pitch in lds_dtype elements
    tr: str | None = None  # the transposing LDS load (M/N-contiguous)
    slot_bytes: int = 0  # LDS bytes per ds_read_tr chunk (M/N-contiguous)
    reads: int = 0  # LDS read instructions per MFMA fragment

    @property
    def chunk_bytes(self) -> int:
        """Data bytes of one ``ds_read_tr`` chunk."""
        return CATALOG[self.tr].load_bits // 8 if self.tr else 0


def operand_plan(name: str, k_contiguous: bool, extent: Extent, K: int, tile: int, block_k: int, fmt: str,
                 lds_pad: int) -> MxOperand:
    """The plan of operand ``name`` (``extent`` = M or N, ``tile`` = block_m or block_n)."""
    op, bits = CATALOG[MFMA], format_of(fmt).bits
    words = SCALE_VECTOR_WORDS[fmt]  # per lane and fragment: 32 K positions
    rk = block_k // op.k
    if k_contiguous:
        tile_words = block_k * bits // 32
        pad = lds_pad // 4
        if words % 4 and 16 * 4 * (tile_words + pad) <= DS_READ2_B64_REACH:
            # a fragment's 6 words are a 16-byte and an 8-byte read; LLVM pairs the 8-byte reads of two
            # fragments into one ds_read2_b64 (and copies the halves) unless 16 rows lie beyond its reach
            pad += 8
        shape = (tile, tile_words + pad)
        return MxOperand(name, True, extent, K * bits // 32, tile, tile_words, 4,
                         tile * tile_words // 4 // THREADS, shape, "uint32", shape[1], reads=-(-words // 4))
    tr = transpose_load(fmt)
    chunk = tr.load_bits // 8
    slot = -(-chunk // tr.lds_alignment) * tr.lds_alignment
    unit = 4 if slot == chunk else chunk // 4  # words per global load: 16 bytes, or one padded tr6 chunk
    tile_words = tile * bits // 32
    row = tile // tr.elements * slot + lds_pad
    if bits == 8:  # the operand form's (k, m/n) element tile
        shape = (block_k, row)
    else:  # the tile form's (K step, call, 16-lane group, provider row, bytes): K row 128 kk + 32 g + 16 j + p
        shape = (rk, 2, 4, 16, row)
    return MxOperand(name, False, K, -(-extent * bits // 32), block_k, tile_words, unit,
                     block_k * tile_words // unit // THREADS, shape, "uint8", row, tr.name, slot,
                     op.a_elems // tr.elements)


def _check(plan: MxOperand, cfg: MxGemmConfig) -> None:
    if plan.units < 1 or plan.units * THREADS * plan.unit_words != plan.tile_rows * plan.tile_words:
        raise ValueError(f"MX GEMM: the {plan.name} tile ({plan.tile_rows} rows of {plan.tile_words} words) is not a "
                         f"whole number of {plan.unit_words}-word units per thread; got {cfg}")


def lds_bytes(dtype: str, layout: str, config: MxGemmConfig) -> int:
    """LDS bytes of the kernel: two stages of the A and B tiles and of the scale words."""
    fmt, cfg = MX_FORMATS[dtype], config
    stage = sum(math.prod(p.lds_shape) * (4 if p.lds_dtype == "uint32" else 1)
                for p in (operand_plan("A", layout[0] == "n", 1, cfg.block_k, cfg.block_m, cfg.block_k, fmt, cfg.lds_pad),
                          operand_plan("B", layout[1] == "t", 1, cfg.block_k, cfg.block_n, cfg.block_k, fmt, cfg.lds_pad)))
    return 2 * (stage + 4 * _scale_words_per_stage(cfg))


def _scale_words_per_stage(cfg: MxGemmConfig) -> int:
    """Scale words of a stage (``kernels.gfx950.mx_gemm._Scales.byte``): per wave half, lane row, K group and K step, one
    word per four fragments of A and of B; and the spare words of the rows past the tile."""
    op = CATALOG[MFMA]
    rk = cfg.block_k // op.k
    words = -(-cfg.block_m // 2 // op.m // 4) + -(-cfg.block_n // 2 // op.n // 4)
    return 2 * op.m * 4 * rk * words + 4 * rk


def default_mx_config(dtype: str, layout: str = "nt") -> MxGemmConfig:
    """The default tile: 128 x 128 with 128-wide K tiles; mxfp4 (whose MFMAs take half the cycles of
    the 8-bit ones) K tiles of 256, two MFMA K steps, wherever two workgroups still fit a CU's LDS
    (layout nt), so that a tile's loads and waits hide behind twice the MFMAs. Global loads run two
    K tiles ahead, except for 8-bit A tiles read through ``ds_read_tr8`` (layouts tn, tt): there the
    second staging register set would take the kernel past 256 VGPRs (one wave per SIMD)."""
    wide = MxGemmConfig(block_k=256)
    if MX_FORMATS[dtype] == "fp4" and 2 * lds_bytes(dtype, layout, wide) <= GFX950_LDS_BYTES:
        return wide
    if format_of(MX_FORMATS[dtype]).bits == 8 and layout[0] == "t":
        return MxGemmConfig(load_ahead=1)
    return MxGemmConfig()


def _check_mx_config(cfg: MxGemmConfig) -> None:
    op = CATALOG[MFMA]
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    if BM % (2 * op.m) or BN % (2 * op.n) or BK not in (op.k, 2 * op.k) or cfg.lds_pad % 16 or cfg.load_ahead not in (1, 2):
        raise ValueError(f"MX GEMM: block {BM}x{BN}x{BK} must tile 2 x 2 waves of {op.m}x{op.n}x{op.k} MFMAs, "
                         f"block_k {op.k} or {2 * op.k}, lds_pad a multiple of 16, load_ahead 1 or 2; got {cfg}")
    if (BM, BN) != (SCALE_WORD_FRAGMENTS * 2 * op.m, SCALE_WORD_FRAGMENTS * 2 * op.n):
        raise ValueError(f"MX GEMM: block {BM}x{BN}: the scale staging packs the E8M0 scales of "
                         f"{SCALE_WORD_FRAGMENTS} fragments of each wave half into one LDS word, so the block must be "
                         f"{SCALE_WORD_FRAGMENTS * 2 * op.m}x{SCALE_WORD_FRAGMENTS * 2 * op.n} (other tiles leave scale "
                         f"bytes unwritten or written by two waves); got {cfg}")


@attrs.frozen
class MxGemmPlan(PlanRecord, family="gemm"):
    """Everything the emission of one MX GEMM needs (``gfx950_mx_gemm``'s docstring), computed by
    ``plan_mx_gemm``: a pure function of the problem and the config that tests inspect without
    building. The scale words of a stage are laid out so that the word a lane reads holds its scales
    of four fragments (``scale_words``: per lane and K step, A's then B's)."""

    M: Extent
    N: int
    K: int
    dtype: str  # MX_FORMATS key
    layout: str  # LAYOUTS entry
    config: MxGemmConfig
    fmt: str  # element format of A and B (isa.formats)
    mfma: str  # catalog name of the scaled MFMA
    block: tuple[int, int, int]  # (BM, BN, BK)
    warp_tile: tuple[int, int]  # (WM, WN): each wave's part of the tile (2 x 2 waves)
    repeats: tuple[int, int, int]  # (RM, RN, RK): MFMAs per wave along M, N and K per K tile
    grid: Grid  # no batch axis
    k_steps: int  # K tiles
    a: MxOperand
    b: MxOperand
    words: int  # packed words per lane and MFMA operand (32 K positions)
    format_code: int  # cbsz = blgp of the format
    byte_tiles: tuple[bool, bool]  # A, B fragments as uint8 element tiles (8-bit formats through ds_read_tr8)
    # registers per fragment slot of A, B: 32 bytes, or ``words``; a tr6 fragment (two ds_read_b96_tr_b6)
    # takes 8, so that each half lands on an even register (gfx950 register tuples are even-aligned)
    slots: tuple[int, int]
    scale_row_bytes: int  # E8M0 scales per row of A / column of B: K / 32
    scale_rows: int  # scale rows (A rows, then B rows) per thread and K tile
    scale_words: tuple[int, int]  # scale words per lane and K step of A, of B: one per four fragments
    word_scales: bool  # a row's four scales of a K step are one aligned 32-bit word (two buffer loads)
    interleave: tuple[tuple[int, int], ...] | None  # sched.group.barrier program per period; None: off
    epilogue: Epilogue  # f32 accumulators stored as they are

    @property
    def fragment_elems(self) -> tuple[int, int]:
        """Elements of one fragment set of A and of B: registers, or bytes for byte tiles."""
        (RM, RN, RK), (sa, sb) = self.repeats, self.slots
        return RM * RK * sa * (4 if self.byte_tiles[0] else 1), RN * RK * sb * (4 if self.byte_tiles[1] else 1)

    @property
    def split_a(self) -> bool:
        """A's fragments are split tr6 slots, copied (and issued) fragment by fragment."""
        return self.a.tr is not None and format_of(self.fmt).bits == 6

    @property
    def scale_loads(self) -> int:
        """Scale-word global loads per thread and K tile (an A and a B word per scale row and K step)."""
        return 2 * self.scale_rows * self.repeats[2]

    @property
    def scale_stores(self) -> int:
        """Scale-byte LDS stores per thread and K tile."""
        return 4 * self.scale_rows * self.repeats[2]

    @property
    def loads_per_tile(self) -> int:
        """Global loads per thread and K tile (A and B units, scale words)."""
        return self.a.units + self.b.units + self.scale_loads

    @property
    def lds_scale_words(self) -> int:
        """Scale words of an LDS stage (``_scale_words_per_stage``)."""
        return _scale_words_per_stage(self.config)

    @property
    def fusion(self) -> Fusion:
        """The fused epilogue (``Epilogue.fusion``; empty: the accumulators stored as they are)."""
        return self.epilogue.fusion

    @property
    def params(self) -> tuple[Param, ...]:
        """The kernel's parameters: the A and B words as stored (``MxOperand.rows`` x ``row_words``),
        the scales ``(M, K/32)`` and ``(N, K/32)``, C ``(M, N)``, then the epilogue's."""
        return (Param("A", (self.a.rows, self.a.row_words), "uint32"), Param("B", (self.b.rows, self.b.row_words), "uint32"),
                Param("SA", (self.M, self.scale_row_bytes), "uint8"), Param("SB", (self.N, self.scale_row_bytes), "uint8"),
                Param("C", (self.M, self.N), self.epilogue.out), *self.epilogue.params)


def plan_mx_gemm(M: Extent, N: int, K: int, dtype: str = "mxfp8", layout: str = "nt",
                 config: MxGemmConfig | None = None, fusion: Fusion | None = None) -> MxGemmPlan:
    """The plan of ``gfx950_mx_gemm`` (same arguments; ``fusion``: the fused epilogue on the f32
    accumulators, ``fuse_epilogue``); ValueError for a problem or config it cannot run."""
    if dtype not in MX_FORMATS:
        raise ValueError(f"MX GEMM: dtype {dtype!r}; expected one of {sorted(MX_FORMATS)}")
    if layout not in LAYOUTS:
        raise ValueError(f"MX GEMM: layout {layout!r}; expected one of {LAYOUTS}")
    if K % 32 or any(isinstance(x, int) and x < 1 for x in (M, N, K)):
        raise ValueError(f"MX GEMM: K must be a positive multiple of 32 (one E8M0 scale per 32 K); got M={M}, N={N}, K={K}")
    fmt, cfg, op = MX_FORMATS[dtype], config or default_mx_config(dtype, layout), CATALOG[MFMA]
    _check_mx_config(cfg)
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    a = operand_plan("A", layout[0] == "n", M, K, BM, BK, fmt, cfg.lds_pad)
    b = operand_plan("B", layout[1] == "t", N, K, BN, BK, fmt, cfg.lds_pad)
    _check(a, cfg)
    _check(b, cfg)
    W, bits = SCALE_VECTOR_WORDS[fmt], format_of(fmt).bits
    RM, RN, RK = BM // 2 // op.m, BN // 2 // op.n, BK // op.k
    byte = (bits == 8 and not a.k_contiguous, bits == 8 and not b.k_contiguous)
    slots = tuple(op.a_elems // 4 if t else 8 if W == 6 and p.tr else W for t, p in zip(byte, (a, b)))
    s_rows = -(-(BM + BN) // THREADS)
    s_loads, s_stores = 2 * s_rows * RK, 4 * s_rows * RK
    program = prefetch_program((RM, RN, RK), a.reads, b.reads, a.units + b.units + s_stores,
                               a.units + b.units + s_loads) if cfg.interleave else None
    return MxGemmPlan(M, N, K, dtype, layout, cfg, fmt, MFMA, (BM, BN, BK), (BM // 2, BN // 2), (RM, RN, RK),
                      Grid((-(-M // BM), -(-N // BN))), -(-K // BK), a, b, W, FORMAT_CODES[fmt], byte, slots, K // 32,
                      s_rows, (-(-RM // 4), -(-RN // 4)), K // 32 % 4 == 0, program,
                      fuse_epilogue(convert_epilogue("float32", "f32"), fusion or Fusion(), M, N))
