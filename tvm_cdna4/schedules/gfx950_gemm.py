"""gfx950 GEMM from the CDNA4 patterns and plain TIRx: ``C = op(A) @ op(B)``, per dtype.

Layout strings name how A and B are stored: ``n`` = as used (A ``M x K``, B ``K x N``, row-major),
``t`` = transposed (A stored ``K x M``, B stored ``N x K``). The operand whose K is contiguous in
memory keeps K contiguous in LDS and is read with wide LDS loads; the other keeps M/N contiguous
and reaches the MFMA layout through ``ds_read_tr`` (8/16-bit types; 32/64-bit types have no
transposing load and use per-element LDS reads).

fp8/bf8 (all four A/B combinations) run on the scaled ``f8f6f4`` MFMAs (16x16x128, 32x32x64: twice
the rate of the dense fp8 MFMAs on gfx950) with unit E8M0 scales (127 = 2^0) in a constant
register; the format codes ``cbsz`` (A) and ``blgp`` (B) select fp8 (E4M3, 0) or bf8 (E5M2, 1) per
operand. Their fragments are ``uint8`` element tiles like every other dtype's (``patterns.mfma``):
32 consecutive K bytes per lane, two 16-byte LDS reads or four ``ds_read_tr8``.

Structure: 256-thread workgroups (4 waves in a 2 x 2 grid over the ``block_m x block_n`` tile);
a software pipeline over ``block_k`` tiles (``pipeline.fragment_pipeline``) with two LDS stages and
two MFMA fragment register sets: period ``p`` stores the staged registers of tile ``p + 1`` into
its LDS stage, buffer-loads tile ``p + 1 + load_ahead``, reads tile ``p``'s fragments into one set
and runs tile ``p - 1``'s MFMAs from the other, then one ``s_waitcnt`` and one barrier: the only
waits of the main loop (``sched.group.barrier`` groups interleave the memory instructions with the
MFMAs). LDS rows are padded (``lds_pad`` bytes) so that the 16 lanes of a wide or transposing read
hit different banks. Edges: global loads outside the matrices read
zeros (buffer range check, or clamped element loads); the epilogue stores only inside C.
docs/gfx950_gemm.md explains the choices.

Plan -> emission: ``plan_gfx950_gemm`` is a pure function of the problem and the config returning a
frozen ``Gfx950GemmPlan`` (tile, MFMA, repeats, per-operand ``OperandPlan``: storage, LDS stage,
global chunks, ds_read_tr or not, LDS reads; the interleave program); ``emit_gfx950_gemm`` builds
the PrimFunc from it, passing the pipeline's LDS stages, staging and fragment register sets and
per-thread state as named records (``Stage``, ``Staging``, ``Fragments``, ``WaveState``).
"""

from __future__ import annotations

import attrs
import numpy as np
from tvm_tirx.script import tirx as T

from ..isa import CATALOG, SCALE_FORMAT_CODES, WAVE_SIZE, lanes
from ..patterns import register
from ..patterns.layouts import mfma_fragment
from ..patterns.dma import LdsTile
from .pipeline import (chunk_loader, dma_loader, dma_pipeline, fragment_pipeline, lds_stage, prefetch_program,
                       schedule_hint)


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
    program = prefetch_program((RM, RN, RK), a.reads_per_fragment, b.reads_per_fragment, writes,
                               loads) if cfg.interleave else None
    codes = tuple(FORMAT_CODES[f] for f in spec.scaled) if spec.scaled else None
    return Gfx950GemmPlan(M, N, K, batch, dtype, layout, out_dtype, cfg, op.name, spec.storage, spec.acc,
                          OUT_STORAGE[out_dtype], (BM, BN, BK), (WM, WN), (RM, RN, RK), (-(-M // BM), -(-N // BN)),
                          -(-K // BK), max(1, 16 // _elem_bytes(spec.storage)), a, b, codes, program)


# -------------------------------------------------------------------------------------- the emission

@attrs.frozen(eq=False)
class Stage:
    """One LDS stage of the K-tile pipeline (``pipeline.fragment_pipeline``): the tiles of A and B."""

    lds_a: object  # shared (1, *plan.a.lds_shape)
    lds_b: object  # shared (1, *plan.b.lds_shape)


@attrs.frozen(eq=False)
class Staging:
    """One register set staging a K tile's global loads on their way to LDS."""

    regs_a: object  # local (a.chunks * vec,): the thread's 16-byte chunks of the A tile
    regs_b: object  # local (b.chunks * vec,)


@attrs.frozen(eq=False)
class Fragments:
    """One register set of MFMA operand fragments: every K step of one K tile."""

    regs_a: object  # local registers of the A fragments (RM x RK MFMA operands)
    regs_b: object  # local registers of the B fragments (RN x RK)
    Af: object  # regs_a as the MFMA pattern's (RM, RK, m, k) tile
    Bf: object  # regs_b as (RN, RK, n, k)


@attrs.frozen(eq=False)
class WaveState:
    """What every pipeline period of a thread works on besides its stage and fragment set."""

    A: object  # the A parameter
    B: object  # the B parameter
    Df: object  # the accumulators as (RM, RN, m, n)
    bz: object  # batch index
    m0: object  # the workgroup's first row of C
    n0: object  # the workgroup's first column of C
    wm: object  # the wave's first row within the tile
    wn: object  # the wave's first column within the tile
    tx: object  # thread index in the workgroup


def gfx950_gemm(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None,
                config: Gfx950GemmConfig | None = None, batch: int = 0):
    """PrimFunc ``(A, B, C)`` (with ``batch``: a leading batch axis on each) for gfx950.

    A is ``(M, K)`` for layout ``n?`` and ``(K, M)`` for ``t?``; B is ``(K, N)`` for ``?n`` and
    ``(N, K)`` for ``?t``; C is ``(M, N)`` in ``out_dtype`` (bf16 outputs and inputs are int16 bit
    patterns in the signature; numpy bfloat16 arrays pass as they are).
    """
    register()
    return emit_gfx950_gemm(plan_gfx950_gemm(M, N, K, dtype, layout, out_dtype, config, batch))


def emit_gfx950_gemm(plan: Gfx950GemmPlan):
    """The PrimFunc of a plan (``gfx950_gemm``)."""
    op = CATALOG[plan.mfma]
    M, N, K, batch = plan.M, plan.N, plan.K, plan.batch
    elem, acc, out = plan.elem, plan.acc, plan.out
    BM, BN, BK = plan.block
    RM, RN, RK = plan.repeats
    pa, pb, vec = plan.a, plan.b, plan.vec
    E = op.a_elems
    scaled = plan.format_codes is not None
    la, na = mfma_fragment(op, "A", (RM, RK), byte_tiles=scaled)
    lb, nb = mfma_fragment(op, "B", (RN, RK), byte_tiles=scaled)
    la1, _ = mfma_fragment(op, "A", byte_tiles=scaled)
    lb1, _ = mfma_fragment(op, "B", byte_tiles=scaled)
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    a_shape = (K, M) if pa.mn_contiguous else (M, K)
    b_shape = (N, K) if not pb.mn_contiguous else (K, N)
    if batch:
        a_shape, b_shape, c_shape = (batch, *a_shape), (batch, *b_shape), (batch, M, N)
    else:
        c_shape = (M, N)
    grid_m, grid_n = plan.grid
    _interleave = schedule_hint(plan.interleave)
    a_row, a_k, b_col, b_k, acc_row, acc_col = lane_maps(op)

    def _convert(value):
        if plan.out_dtype == "bf16":  # round to nearest even, keep the bit pattern in int16
            bits = T.reinterpret(value, ty="uint32")
            rounded = (bits + T.uint32(0x7FFF) + ((bits >> T.uint32(16)) & T.uint32(1))) >> T.uint32(16)
            return T.reinterpret(T.cast(rounded, "uint16"), ty="int16")
        return T.cast(value, out) if out != acc else value

    def _frag_loader(operand: OperandPlan, mn_of, k_of, atom_layout):
        """Macro ``frag(regs, lds, buf, i, kk, w0, lane)``: MFMA fragment ``i`` of K step ``kk`` of
        ``operand`` from an LDS stage (the wave's tile starts at ``w0`` along M or N) into
        ``regs``: ds_read_tr where its M/N is contiguous in LDS and a transposing load exists,
        per-element reads where not, one wide read where K is contiguous."""
        ext = op.m if operand.name == "A" else op.n
        tr = operand.transpose_read
        if tr:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                V = T.decl_tensor(regs.ptr_to([(i * RK + kk) * E]), ty_args=[T.Tensor((1, ext, op.k), elem, scope="local", layout=atom_layout)])
                T.rocm.tile.apply(T.amdgcn[tr], V, lds[buf : buf + 1, kk * op.k : kk * op.k + op.k, w0 + i * ext : w0 + i * ext + ext],
                                  scope="wave", mfma=plan.mfma, operand=operand.name)
        elif operand.mn_contiguous:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                for e in T.unroll(E):
                    regs[(i * RK + kk) * E + e] = lds[buf, kk * op.k + k_of(lane) + e, w0 + i * ext + mn_of(lane)]
        elif E == 1:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                regs[(i * RK + kk) * E] = lds[buf, w0 + i * ext + mn_of(lane), kk * op.k + k_of(lane)]
        else:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                regs[T.ramp((i * RK + kk) * E, 1, E)] = lds[buf, w0 + i * ext + mn_of(lane), T.ramp(kk * op.k + k_of(lane), 1, E)]
        return frag

    _frag_a = _frag_loader(pa, a_row, a_k, la1)
    _frag_b = _frag_loader(pb, b_col, b_k, lb1)

    @T.macro
    def _store_c(dst, bz, row, col, value):
        if row < M and col < N:
            dst[bz * (M * N) + row * N + col] = _convert(value)

    _chunk_a = chunk_loader(elem, vec, pa.storage, pa.chunks_per_row, pa.mn_contiguous, M * K, max(batch, 1) * M * K)
    _chunk_b = chunk_loader(elem, vec, pb.storage, pb.chunks_per_row, pb.mn_contiguous, K * N, max(batch, 1) * K * N)

    if scaled:
        code_a, code_b = plan.format_codes
        kb = op.k // 32  # scale registers per lane and MFMA: one per 32 K (unit scales here)
        ls, _ = mfma_fragment(op, "scale_a", (RM, 1))
        lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))

        @T.macro
        def _mfma(Df_, Af_, Bf_):
            """The scaled MFMAs with unit scales (a constant LLVM keeps in one VGPR)."""
            rs = T.alloc_tensor(ty_args=[T.Tensor((RM + RN,), "uint32", scope="local")])
            for r in T.unroll(RM + RN):
                rs[r] = T.uint32(UNIT_SCALES)
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, kb), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([RM]), ty_args=[T.Tensor((RN, 1, op.n, kb), "uint32", scope="local", layout=lsb)])
            T.rocm.tile.apply(T.amdgcn[plan.mfma], Df_, Af_, Bf_, Df_, Sa, Sb, scope="wave",
                              cbsz=code_a, blgp=code_b, op_sel_a=0, op_sel_b=0)
    else:
        @T.macro
        def _mfma(Df_, Af_, Bf_):
            T.rocm.tile.apply(T.amdgcn[plan.mfma], Df_, Af_, Bf_, Df_, scope="wave")

    @T.macro
    def _load(g, s, ko):
        """Every thread's share of K tile ``ko`` of A and B, global -> staging registers (zeros outside)."""
        Ag_ = T.decl_tensor(s.A.data, ty_args=[T.Tensor((max(batch, 1) * M * K,), elem)])
        Bg_ = T.decl_tensor(s.B.data, ty_args=[T.Tensor((max(batch, 1) * K * N,), elem)])
        for q in T.unroll(pa.chunks):
            _chunk_a(g.regs_a, s.A, Ag_, s.bz, s.m0, s.tx, q, ko * BK)
        for q in T.unroll(pb.chunks):
            _chunk_b(g.regs_b, s.B, Bg_, s.bz, s.n0, s.tx, q, ko * BK)

    @T.macro
    def _store(stage, g, s):
        """The staging registers -> the stage's LDS tiles."""
        for q in T.unroll(pa.chunks):
            stage.lds_a[0, (q * 256 + s.tx) // pa.chunks_per_row, T.ramp((q * 256 + s.tx) % pa.chunks_per_row * vec, 1, vec)] = g.regs_a[T.ramp(q * vec, 1, vec)]
        for q in T.unroll(pb.chunks):
            stage.lds_b[0, (q * 256 + s.tx) // pb.chunks_per_row, T.ramp((q * 256 + s.tx) % pb.chunks_per_row * vec, 1, vec)] = g.regs_b[T.ramp(q * vec, 1, vec)]

    @T.macro
    def _read(stage, f, s):
        """Every K step's operand fragments of the stage's tile -> the register set."""
        for kk in T.unroll(RK):
            for mi in T.unroll(RM):
                _frag_a(f.regs_a, stage.lds_a, 0, mi, kk, s.wm, s.tx % 64)
            for ni in T.unroll(RN):
                _frag_b(f.regs_b, stage.lds_b, 0, ni, kk, s.wn, s.tx % 64)

    @T.macro
    def _mma(f, s):
        """The MFMAs of a register set's tile, with the period's memory instructions between them."""
        for kk in T.unroll(RK):
            _mfma(s.Df, f.Af[:, kk : kk + 1], f.Bf[:, kk : kk + 1])
        _interleave()

    def _staging_sets(first: Staging, second: Staging) -> tuple[Staging, Staging]:
        """The staging register sets of even and odd tiles: one set when loads are one tile ahead."""
        return (first, second) if plan.config.load_ahead == 2 else (first, first)

    if plan.config.lds_dma:
        _load_lds = _dma_tile_loads(plan)
        _dma_run = dma_pipeline(plan.k_steps, _load_lds, _read, _mma, pa.dma_loads + pb.dma_loads)

        @T.macro
        def _run(stages, staging, frags, s):
            _dma_run(stages, frags, s)
    else:
        _run = fragment_pipeline(plan.k_steps, _load, _store, _read, _mma, plan.config.load_ahead,
                                 pa.chunks + pb.chunks)

    @T.macro
    def _tile(A, B, C, bid, tx, stages, staging):
        """The thread's fragment sets, accumulators and tile coordinates; the K pipeline over the LDS
        ``stages`` (and ``staging`` register sets); the accumulators -> C (inside C only)."""
        ra0 = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
        rb0 = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
        ra1 = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
        rb1 = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
        rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), acc, scope="local")])
        Af0 = T.decl_tensor(ra0.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
        Bf0 = T.decl_tensor(rb0.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
        Af1 = T.decl_tensor(ra1.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
        Bf1 = T.decl_tensor(rb1.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
        Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), acc, scope="local", layout=ld)])
        Cg = T.decl_tensor(C.data, ty_args=[T.Tensor((max(batch, 1) * M * N,), out)])
        bz = bid // (grid_m * grid_n)
        m0 = bid % (grid_m * grid_n) // grid_n * BM
        n0 = bid % grid_n * BN
        wm = tx // 128 % 2 * plan.warp_tile[0]  # "% 2" lets the pattern prove the region is in bounds
        wn = tx // 64 % 2 * plan.warp_tile[1]
        lane = tx % 64
        for r in T.unroll(nd):
            rd[r] = T.cast(0, acc)
        _run(stages, staging, (Fragments(ra0, rb0, Af0, Bf0), Fragments(ra1, rb1, Af1, Bf1)),
             WaveState(A, B, Df, bz, m0, n0, wm, wn, tx))
        for mi in T.unroll(RM):
            for ni in T.unroll(RN):
                for r in T.unroll(op.acc_elems):
                    _store_c(Cg, bz, m0 + wm + mi * op.m + acc_row(lane, r), n0 + wn + ni * op.n + acc_col(lane, r),
                             rd[(mi * RN + ni) * op.acc_elems + r])

    if plan.config.lds_dma:
        @T.function
        def gemm(A: T.Tensor(a_shape, elem), B: T.Tensor(b_shape, elem), C: T.Tensor(c_shape, out)):
            with T.device_entry():
                bid = T.launch_thread("blockIdx.x", plan.groups)
                tx = T.launch_thread("threadIdx.x", 256)
                SA0 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
                SA1 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
                SA2 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
                SB0 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
                SB1 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
                SB2 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
                _tile(A, B, C, bid, tx, (Stage(SA0, SB0), Stage(SA1, SB1), Stage(SA2, SB2)), None)
    else:
        @T.function
        def gemm(A: T.Tensor(a_shape, elem), B: T.Tensor(b_shape, elem), C: T.Tensor(c_shape, out)):
            with T.device_entry():
                bid = T.launch_thread("blockIdx.x", plan.groups)
                tx = T.launch_thread("threadIdx.x", 256)
                SA0 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
                SA1 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
                SB0 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
                SB1 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
                ga0 = T.alloc_tensor(ty_args=[T.Tensor((pa.chunks * vec,), elem, scope="local")])
                gb0 = T.alloc_tensor(ty_args=[T.Tensor((pb.chunks * vec,), elem, scope="local")])
                ga1 = T.alloc_tensor(ty_args=[T.Tensor((pa.chunks * vec,), elem, scope="local")])
                gb1 = T.alloc_tensor(ty_args=[T.Tensor((pb.chunks * vec,), elem, scope="local")])
                _tile(A, B, C, bid, tx, (Stage(SA0, SB0), Stage(SA1, SB1)),
                      _staging_sets(Staging(ga0, gb0), Staging(ga1, gb1)))

    return gemm


def _dma_tile_loads(plan: Gfx950GemmPlan):
    """Macro ``load(stage, state, ko)`` of ``pipeline.dma_pipeline``: the wave's direct-to-LDS loads
    of K tile ``ko`` of A and B (``pipeline.dma_loader``; the wave issues loads ``4 j + wave``)."""
    M, N, K, batch = plan.M, plan.N, plan.K, plan.batch
    pa, pb, BK = plan.a, plan.b, plan.block[2]
    _dma_a = dma_loader(pa.dma, plan.vec, pa.storage, pa.mn_contiguous, M * K, max(batch, 1) * M * K)
    _dma_b = dma_loader(pb.dma, plan.vec, pb.storage, pb.mn_contiguous, K * N, max(batch, 1) * K * N)

    @T.macro
    def load(stage, s, ko):
        for j in T.unroll(pa.dma_loads):
            _dma_a(stage.lds_a, s.A, s.bz, s.m0, j * 4 + s.tx // 64, s.tx % 64, ko * BK)
        for j in T.unroll(pb.dma_loads):
            _dma_b(stage.lds_b, s.B, s.bz, s.n0, j * 4 + s.tx // 64, s.tx % 64, ko * BK)
    return load


__all__ = ["DTYPES", "FORMAT_CODES", "LAYOUTS", "UNIT_SCALES", "Gfx950GemmConfig", "Gfx950GemmPlan", "OperandPlan",
           "default_config", "dma_config", "emit_gfx950_gemm", "gfx950_gemm", "plan_gfx950_gemm"]
