"""The gfx950 GEMMs' configs and plans, without TIRx: what ``plan_gfx950_gemm`` decides for the dense
GEMM (``Gfx950GemmConfig`` -> ``Gfx950GemmPlan``, per-dtype ``DTYPES``) and the MX GEMM's config and
operand plans (``MxGemmConfig``, ``default_mx_config``, ``operand_plan``). ``gfx950_gemm`` and
``gfx950_mx_gemm`` emit the kernels from them; the CLI resolves options and reads the build cache
with this module alone, so a warm build does not import TIRx (like ``cuda_plan`` for sm80)."""

from __future__ import annotations

import math

import attrs
import numpy as np

from ..isa import CATALOG, DS_READ_TR_OPS, SCALE_FORMAT_CODES, WAVE_SIZE, DsReadTrOp, lanes
from ..isa.formats import fmt as format_of
from ..isa.mfma_table import SCALE_VECTOR_WORDS
from ..patterns.dma import LdsTile
from ..isa.hardware import GFX950_LDS_BYTES

# ---------------------------------------------------------------------------------- the dense GEMM

def lane_maps(op):
    """The catalog's owner maps of one MFMA as functions of a lane expression: A row and first K,
    B column and first K of the lane's elements; accumulator row and column of register ``r``."""
    return (lambda lane: lanes.a_owner(op, lane, 0)[1], lambda lane: lanes.a_owner(op, lane, 0)[2],
            lambda lane: lanes.b_owner(op, lane, 0)[2], lambda lane: lanes.b_owner(op, lane, 0)[1],
            lambda lane, r: lanes.acc_owner(op, lane, r)[1], lambda lane, r: lanes.acc_owner(op, lane, r)[2])


@attrs.frozen
class DtypeSpec:
    storage: str  # TIR dtype of A/B in memory (bf16 travels as int16 bit patterns)
    numpy: object  # numpy dtype users pass
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


FORMAT_CODES = {fmt: code for code, fmt in SCALE_FORMAT_CODES.items()}  # scaled MFMA cbsz / blgp values
UNIT_SCALES = 0x7F7F7F7F  # E8M0 127 = 2^0 in every byte (whatever op_sel picks)


def _np(name):
    import ml_dtypes

    return {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
            "bf8": ml_dtypes.float8_e5m2, "i8": np.int8, "f32": np.float32, "f64": np.float64}[name]


def _fp8(a, b):
    """fp8/bf8 on the scaled f8f6f4 MFMAs with unit scales (module docstring)."""
    return DtypeSpec("uint8", (_np(a), _np(b)), "mfma_scale_f32_16x16x128_f8f6f4", "mfma_scale_f32_32x32x64_f8f6f4",
                     "ds_read_tr8_b64_v2i32", "float32", ("f32", "f16", "bf16"), (a, b))


DTYPES: dict[str, DtypeSpec] = {
    "f16": DtypeSpec("float16", _np("f16"), "mfma_f32_16x16x32_f16", "mfma_f32_32x32x16_f16", "ds_read_tr16_b64_v4f16",
                     "float32", ("f32", "f16", "bf16")),
    "bf16": DtypeSpec("int16", _np("bf16"), "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16", "ds_read_tr16_b64_v4bf16",
                      "float32", ("f32", "f16", "bf16")),
    "fp8": _fp8("fp8", "fp8"),
    "bf8": _fp8("bf8", "bf8"),
    "fp8_bf8": _fp8("fp8", "bf8"),
    "bf8_fp8": _fp8("bf8", "fp8"),
    "i8": DtypeSpec("int8", _np("i8"), "mfma_i32_16x16x64_i8", "mfma_i32_32x32x32_i8", "ds_read_tr8_b64_v2i32", "int32", ("i32",)),
    "f32": DtypeSpec("float32", _np("f32"), "mfma_f32_16x16x4f32", "mfma_f32_32x32x2f32", None, "float32", ("f32", "f16", "bf16")),
    "f64": DtypeSpec("float64", _np("f64"), "mfma_f64_16x16x4f64", "mfma_f64_16x16x4f64", None, "float64", ("f64",)),
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
    # K tiles between a tile's global loads and its LDS store (pipeline.fragment_pipeline): 1 (one
    # staging register set) or 2 (the loads have two periods to land; a second staging set)
    load_ahead: int = 2
    # Direct-to-LDS global loads (T.rocm.buffer_load_lds, pipeline.dma_pipeline): no staging
    # registers, no ds_write; three LDS stages, loads two K tiles ahead (load_ahead must be 2).
    # ``dma_config`` gives the tile that fits three stages into 80 KiB (two workgroups per CU)
    lds_dma: bool = False

    def check(self, spec: DtypeSpec) -> None:
        op = CATALOG[spec.mfma16 if self.mfma == "16x16" else spec.mfma32]
        if self.mfma not in ("16x16", "32x32"):
            raise ValueError(f"config.mfma must be '16x16' or '32x32'; got {self.mfma!r}")
        if self.block_m % (2 * op.m) or self.block_n % (2 * op.n) or self.block_k % op.k:
            raise ValueError(f"block {self.block_m}x{self.block_n}x{self.block_k} does not tile 2 x 2 waves of "
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
    return attrs.evolve(cfg, block_k=64 // _elem_bytes(DTYPES[dtype].storage), mfma="32x32", lds_dma=True)


def _elem_bytes(storage: str) -> int:
    return np.dtype({"float16": np.float16, "int16": np.int16, "uint8": np.uint8, "int8": np.int8,
                     "float32": np.float32, "float64": np.float64}[storage]).itemsize


# ------------------------------------------------------------------------------------------ the plan

@attrs.frozen
class OperandPlan:
    """How one operand (A or B) of a K tile travels: global -> registers -> LDS -> MFMA fragments."""

    name: str  # "A" or "B"
    mn_contiguous: bool  # M (A) or N (B) is contiguous in memory and LDS: storage rows are K
    storage: tuple[int, int]  # (rows, columns) of one batch's row-major matrix in memory
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
class Gfx950GemmPlan:
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

    M: int
    N: int
    K: int
    batch: int  # 0: no batch axis
    dtype: str  # DTYPES key
    layout: str  # LAYOUTS entry
    out_dtype: str  # OUT_STORAGE key
    config: Gfx950GemmConfig
    mfma: str  # catalog name of the MFMA
    elem: str  # TIR dtype of A and B in memory, LDS and registers
    acc: str  # TIR dtype of the accumulators
    out: str  # TIR dtype of C
    block: tuple[int, int, int]  # (BM, BN, BK): the workgroup's tile
    warp_tile: tuple[int, int]  # (WM, WN): each wave's part of the tile (2 x 2 waves)
    repeats: tuple[int, int, int]  # (RM, RN, RK): MFMAs per wave along M, N and K per K tile
    grid: tuple[int, int]  # workgroups along M and N (per batch)
    k_steps: int  # K tiles
    vec: int  # elements per 16-byte chunk
    a: OperandPlan
    b: OperandPlan
    format_codes: tuple[int, int] | None  # cbsz (A), blgp (B) of the scaled MFMA; None: dense MFMAs
    interleave: tuple[tuple[int, int], ...] | None  # sched.group.barrier program per period; None: off

    @property
    def lds_stages(self) -> int:
        """LDS stages of the pipeline: 3 with direct-to-LDS loads (``dma_config``), else 2."""
        return 3 if self.config.lds_dma else 2

    @property
    def groups(self) -> int:
        """Workgroups of the launch."""
        return self.grid[0] * self.grid[1] * max(self.batch, 1)

    @property
    def mfmas_per_tile(self) -> int:
        """MFMA instructions per wave and K tile."""
        return self.repeats[0] * self.repeats[1] * self.repeats[2]


def _operand_plan(name: str, op, spec: DtypeSpec, cfg: Gfx950GemmConfig, transposed: bool, M: int, N: int, K: int,
                  repeats: int, rk: int) -> OperandPlan:
    """A (``name`` "A") or B of the tile: its storage, LDS stage, global chunks and LDS reads."""
    esize = _elem_bytes(spec.storage)
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


def plan_gfx950_gemm(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None,
                     config: Gfx950GemmConfig | None = None, batch: int = 0) -> Gfx950GemmPlan:
    """The plan of ``gfx950_gemm`` (same arguments); ValueError for a problem or config it cannot
    run."""
    if dtype not in DTYPES:
        raise ValueError(f"gfx950 GEMM: dtype {dtype!r} is not supported; expected one of {sorted(DTYPES)}")
    if layout not in LAYOUTS:
        raise ValueError(f"gfx950 GEMM: layout {layout!r}; expected one of {LAYOUTS}")
    spec = DTYPES[dtype]
    out_dtype = out_dtype or spec.outs[0]
    if out_dtype not in spec.outs:
        raise ValueError(f"gfx950 GEMM: output {out_dtype!r} for {dtype}; expected one of {list(spec.outs)}")
    if min(M, N, K) < 1:
        raise ValueError(f"gfx950 GEMM: M, N, K must be positive; got {M}, {N}, {K}")
    cfg = config or default_config(dtype)
    cfg.check(spec)
    op = CATALOG[spec.mfma16 if cfg.mfma == "16x16" else spec.mfma32]
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    WM, WN = BM // 2, BN // 2
    RM, RN, RK = WM // op.m, WN // op.n, BK // op.k
    a = _operand_plan("A", op, spec, cfg, layout[0] == "t", M, N, K, RM, RK)
    b = _operand_plan("B", op, spec, cfg, layout[1] == "t", M, N, K, RN, RK)
    writes = 0 if cfg.lds_dma else a.chunks + b.chunks  # LDS stores: none with direct-to-LDS loads
    loads = a.dma_loads + b.dma_loads if cfg.lds_dma else a.chunks + b.chunks
    from .pipeline import prefetch_program  # a pure function beside the pipeline's TIRx macros

    program = prefetch_program((RM, RN, RK), a.reads_per_fragment, b.reads_per_fragment, writes,
                               loads) if cfg.interleave else None
    codes = tuple(FORMAT_CODES[f] for f in spec.scaled) if spec.scaled else None
    return Gfx950GemmPlan(M, N, K, batch, dtype, layout, out_dtype, cfg, op.name, spec.storage, spec.acc,
                          OUT_STORAGE[out_dtype], (BM, BN, BK), (WM, WN), (RM, RN, RK), (-(-M // BM), -(-N // BN)),
                          -(-K // BK), max(1, 16 // _elem_bytes(spec.storage)), a, b, codes, program)


# -------------------------------------------------------------------------------------- the emission


# ------------------------------------------------------------------------------------- the MX GEMM

DS_READ2_B64_REACH = 255 * 8  # bytes between the two addresses of one ds_read2_b64 (8-bit offsets of 8 bytes)
MX_FORMATS = {"mxfp8": "fp8", "mxbf8": "bf8", "mxfp6": "fp6", "mxbf6": "bf6", "mxfp4": "fp4"}
MFMA = "mfma_scale_f32_16x16x128_f8f6f4"
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
    """How one operand travels from global memory to MFMA fragments (module docstring).

    Storage: ``rows`` rows of ``row_words`` packed words; a tile is ``tile_rows`` rows of
    ``tile_words`` words. Each thread copies ``units`` units of ``unit_words`` words per tile (one
    buffer load each: 16 bytes; tr6: one 12-byte chunk, stored in its 16-byte slot) into an LDS stage of ``lds_shape``
    (``lds_dtype``): uint32 K words (K-contiguous), or uint8 rows of K with ``slot_bytes`` per
    ``ds_read_tr`` chunk (M/N-contiguous; ``lds_row`` bytes per K row)."""

    name: str  # "A" or "B"
    k_contiguous: bool
    rows: int
    row_words: int
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


def operand_plan(name: str, k_contiguous: bool, extent: int, K: int, tile: int, block_k: int, fmt: str,
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
    """Scale words of a stage (``_scale_byte``): per wave half, lane row, K group and K step, one
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
