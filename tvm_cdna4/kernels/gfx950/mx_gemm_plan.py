"""The MX GEMM's config and plan, without TIRx: what ``plan_mx_gemm`` decides (``MxGemmConfig`` ->
``MxGemmPlan``, per-operand ``MxOperand``: global memory -> LDS -> MFMA fragments, the E8M0 scale words)
for ``kernels.gfx950.mx_gemm``, which emits the kernel. The grid and the epilogue are the dense GEMM's
(``kernels.gfx950.gemm_common``); ``kernels.gfx950.gemm_plan`` re-exports these names."""

from __future__ import annotations

import math

import attrs

from ..common import PlanRecord

from ...isa import CATALOG, DS_READ_TR_OPS, DsReadTrOp
from ...isa.formats import fmt as format_of
from ...isa.hardware import GFX950_LDS_BYTES
from ...isa.mfma_table import SCALE_VECTOR_WORDS
from ..gemm.epilogue import Fusion, Param
from .gemm_common import Epilogue, Extent, Grid, convert_epilogue, fuse_epilogue
from .gemm_config import FORMAT_CODES, LAYOUTS
from .gemm_interleave import prefetch_program


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


def check_mx_config(cfg: MxGemmConfig) -> None:
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
    check_mx_config(cfg)
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
