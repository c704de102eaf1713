"""The dense gfx950 GEMM's dtypes and tile configuration, without TIRx: per input dtype its storage,
MFMAs, transposing LDS read and outputs (``DtypeSpec``, ``DTYPES``), the layouts, the scaled MFMAs'
format codes, and the tile (``Gfx950GemmConfig``, ``default_config``, ``dma_config``). Part of the plan
(``kernels.gfx950.gemm_plan``)."""

from __future__ import annotations

import attrs

from ...isa import CATALOG, SCALE_FORMAT_CODES
from ...isa.formats import fmt as format_of
from .gemm_common import REDUCTIONS


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
