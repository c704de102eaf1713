"""Attention forward (FlashAttention-2, issue 26): the gfx950 plan, over the target-neutral problem
(``attention_problem``: ``AttentionProblem``, ``reference``, ``error_bound``, ``kv_tiles_for``, re-exported
here) and its module docstring (the problem, online softmax in base 2, the tiling).

**The gfx950 plan** (``plan_gfx950_attention`` -> ``AttentionPlan``): one workgroup per (batch x
head, query block), 32 query rows per wave on ``mfma_f32_32x32x16_bf16`` (f16: ``..._f16``). The
scores are computed transposed, ``S^T = K Q^T`` (A = the K tile from LDS, wide reads; B = the
wave's Q rows, in registers for the whole kernel), so each lane holds one query (``lane % 32``)
and 16 of the tile's keys per 32-key block in its accumulator registers: a row max is the lane's
registers, then one exchange with lane ``l ^ 32`` (``T.rocm.wave_reduce(..., axis="col")``); the
row sum stays per lane until the end. ``O^T = V^T P^T``: B = ``P^T`` straight from the score
registers (converted to 16 bits: the accumulator's keys ``16 t + 8 (e // 4) + 4 h + e % 4`` for
register ``8 t + e`` of lane half ``h``), A = ``V^T`` read from the V tile in LDS by
``ds_read_tr16_b64`` (the operand form). The MFMA's K order must be the same on both sides, so the V
tile is stored with the key rows permuted (``v_lds_row``: bits 2 and 3 of the key swapped), and the
transposing read of natural LDS rows then yields the register keys. ``alpha`` and ``1 / l`` are
per lane (per query): the O accumulators ``D / 32`` tiles of 16 registers) are scaled in place.

**fp8** (e4m3 Q, K, V with per-tensor f32 scales ``SCALES = [sq, sk, sv]``, bf16 O): both products on
``mfma_scale_f32_32x32x64_f8f6f4`` with unit E8M0 scales (64 head-dim elements, or 64 keys, per
step); ``sq sk`` join the score factor, ``sv`` multiplies O at the end. P is rounded to e4m3 for
``P V`` as ``2^(s2 - m + 8)`` (``P_SHIFT``: the factor 256 is free, folded into the subtracted max, and
keeps small probabilities out of e4m3's flush range); ``l`` sums the same shifted values, so O
needs no correction and ``lse`` subtracts the 8. V is read by ``ds_read_tr8_b64`` with its own key
row order (``v_lds_row(key, 8)``). ``error_bound(..., "fp8")`` charges P's e4m3 rounding (``2^-4``
of each term) and underflow. P's conversion is the plan's (``p_convert``: bf16
``bf16_rna``, f16 the cast, fp8 none: the emitter packs four e4m3 per register by ``v_cvt_pk_fp8_f32``,
round to nearest even; ``p_group``). Every schedule choice (staged or direct-to-LDS loads,
``defer_pv``, masks on edge tiles) works for fp8: the LDS tiles are counted in bytes.
"""

from __future__ import annotations

import attrs

from ..common import PlanRecord, check_config

from ...isa import CATALOG
from ...isa.hardware import GFX950_LDS_BYTES
from ...patterns.dma import LdsTile
from ..attention.problem import (ATTENTION_DTYPES, F32_TERMS, HEAD_DIMS, LSE_F32, OUT_DTYPES, P_ROUNDOFF, P_SHIFT,
                                P_UNDERFLOW, SCALED, UNIT_ROUNDOFF, AttentionProblem, check_indexing, check_layout,
                                dequantize, error_bound, kv_full_tiles_for, kv_tiles_for, output_arrays, random_inputs, reference)
from ..gemm.dynamic_m import ceil_div
from ..gemm.epilogue import Param
from .gemm_common import OUT_STORAGE, Epilogue, Grid, convert_epilogue
from .gemm_config import DTYPES

WAVE_ROWS = 32  # query rows per wave: the 32x32 MFMA's N


# ------------------------------------------------------------------------------------ the gfx950 plan

@attrs.frozen
class AttentionConfig:
    """The gfx950 kernel's choices: ``block_q`` query rows per workgroup (32 per wave, so 1-4
    waves), ``block_kv`` keys per K/V tile (a multiple of 32), whether causal skips fully masked
    tiles, the LDS row padding in bytes, and ``defer_pv``: tile ``j``'s ``O^T += V^T P^T`` MFMAs
    issued after tile ``j + 1``'s ``S^T`` MFMAs, so that tile ``j + 1``'s softmax (VALU) runs while
    they do (the V tile double-buffered in LDS: ``AttentionPlan.v_stages``); off, each tile's
    MFMAs and softmax one after the other. ``lds_dma``: K and V tiles loaded straight into LDS
    (``T.rocm.buffer_load_lds``; one more LDS stage each, ``k_stages`` / ``v_stages``: tile ``j + 1``
    lands while tile ``j`` is read), else through staging registers and LDS stores."""

    block_q: int = 128
    block_kv: int = 64
    skip_masked: bool = True
    lds_pad: int = 16
    defer_pv: bool = True
    lds_dma: bool = True

    def __attrs_post_init__(self):
        if self.block_q % WAVE_ROWS or not WAVE_ROWS <= self.block_q <= 4 * WAVE_ROWS:
            raise ValueError(f"attention block_q: {WAVE_ROWS} query rows per wave, 1 to 4 waves; expected 32, 64, 96 "
                             f"or 128, found {self.block_q}")
        if self.block_kv % 32 or not 32 <= self.block_kv <= 128:
            raise ValueError(f"attention block_kv: whole 32-key MFMA blocks; expected 32, 64, 96 or 128, found "
                             f"{self.block_kv}")
        if self.lds_pad % 16 or self.lds_pad < 0:
            raise ValueError(f"attention lds_pad: whole 16-byte chunks; found {self.lds_pad}")


@attrs.frozen
class AttentionPlan(PlanRecord, family="attention"):
    """Everything the gfx950 emission reads (``attention_gfx950_emit``; module docstring)."""

    problem: AttentionProblem
    config: AttentionConfig
    mfma: str  # S^T = K Q^T and O^T = V^T P^T
    tr: str  # ds_read_tr reading V^T from the V tile
    storage: str  # TIR dtype of Q, K, V, O in memory (bf16: int16 bit patterns)
    waves: int
    grid: Grid  # tiles (query blocks, 1), batch axis B x H
    kv_tiles: int  # kv tiles of the whole sequence
    kv_tail: int  # keys in the last kv tile when fewer than block_kv (the masked tail); 0: none
    q_tail: int  # rows in the last query block when fewer than block_q (stores guarded); 0: none
    lds_row: int  # elements per padded K / V tile row in LDS
    chunks: int  # 16-byte global chunks per thread and K (and V) tile
    epilogue: Epilogue  # f32 O -> the output dtype
    params: tuple[Param, ...]
    p_convert: Epilogue | None  # f32 P -> the B operand of O^T = V^T P^T (bf16: to nearest, ties away: one add; fp8: None, p_group)
    p_shift: int = 0  # P is computed as 2^(s2 - m + p_shift) before its rounding (P_SHIFT; fp8: 8)

    @property
    def threads(self) -> int:
        return 64 * self.waves

    @property
    def d_tiles(self) -> int:
        """32-wide head-dim blocks: the O^T accumulator tiles of a wave."""
        return self.problem.head_dim // 32

    @property
    def scaled(self) -> bool:
        """Whether the MFMA is the scaled f8f6f4 one (fp8: unit E8M0 scales, the per-tensor f32
        scales applied to the scores and to O)."""
        return CATALOG[self.mfma].kind == "mfma_scale"

    @property
    def p_group(self) -> int:
        """P values written per B-operand register: 1 (``p_convert``), fp8 4 (two ``v_cvt_pk_fp8_f32``)."""
        return 1 if self.p_convert is not None else 4

    @property
    def pv_steps(self) -> int:
        """MFMA K steps of O^T = V^T P^T per kv tile (16 keys each, fp8 64)."""
        return self.config.block_kv // CATALOG[self.mfma].k

    @property
    def k_steps(self) -> int:
        """MFMA K steps of S^T = K Q^T (16 head-dim elements each, fp8 64)."""
        return self.problem.head_dim // CATALOG[self.mfma].k

    @property
    def k_stages(self) -> int:
        """LDS stages of the K tile: 2 with ``lds_dma`` (tile ``j + 1`` lands while tile ``j`` is read)."""
        return 1 + self.config.lds_dma

    @property
    def v_stages(self) -> int:
        """LDS stages of the V tile: one, one more with ``defer_pv`` (tile ``j - 1``'s V read in step
        ``j``), one more with ``lds_dma`` (tile ``j + 1`` landing)."""
        return 1 + self.config.defer_pv + self.config.lds_dma

    @property
    def dma(self) -> LdsTile:
        """The K (and V) tile as direct-to-LDS loads fill it: ``block_kv`` rows of 16-byte chunks,
        the row padding (``patterns.dma.LdsTile``; ``loads`` wave loads per tile)."""
        return LdsTile(self.config.block_kv, self.problem.head_dim * self.esize // 16, 16, pad=self.config.lds_pad)

    @property
    def esize(self) -> int:
        """Bytes per Q, K, V element (2; fp8 1)."""
        return DTYPES[self.problem.dtype].elem_bytes

    @property
    def stage_rows(self) -> int:
        """Rows of one LDS stage: the tile's, and with ``lds_dma`` those the last load's 1 KiB block
        reaches (its lanes past the tile write zeros)."""
        rows = self.config.block_kv
        return max(rows, -(-self.dma.dma_bytes // (self.esize * self.lds_row))) if self.config.lds_dma else rows

    @property
    def lds_bytes(self) -> int:
        """LDS of a workgroup: ``k_stages + v_stages`` stages of ``stage_rows`` padded rows."""
        return (self.k_stages + self.v_stages) * self.stage_rows * self.lds_row * self.esize

    @property
    def masked_tiles(self) -> bool:
        """Whether some kv tiles need element masks (causal, or a masked tail): the kernel runs
        ``kv_full_tiles_for`` tiles unmasked, then the rest masked (without, one unmasked loop)."""
        return self.problem.causal or self.kv_tail > 0

    @property
    def masked_loop(self) -> bool:
        """Whether some query block enters the masked loop: ``masked_tiles``, and for some block kv
        tiles (``kv_tiles_for``) past its unmasked ones (``kv_full_tiles_for``; with ``defer_pv`` past
        tile 0, which runs first). Else the kernel leaves the loop out: a loop no block enters has an
        empty range, under which the bounds proofs of its LDS reads fail."""
        p, bq, bkv, d = self.problem, self.config.block_q, self.config.block_kv, int(self.config.defer_pv)
        return self.masked_tiles and any(
            kv_tiles_for(p, bq, bkv, q0, self.config.skip_masked) > max(kv_full_tiles_for(p, bq, bkv, q0), d)
            for q0 in range(0, p.seq_q, bq))

    @property
    def kv_blocks(self) -> int:
        """32-key blocks of a kv tile: the S^T accumulator tiles of a wave."""
        return self.config.block_kv // 32


def v_lds_row(key, bits: int = 16):
    """The LDS row of a V tile that holds key ``key`` of the tile, so that ``ds_read_tr`` of LDS rows
    in natural order gives each lane the keys its score registers hold (module docstring). 16-bit
    elements (``ds_read_tr16``, 16-key MFMA steps): bits 2 and 3 swapped (an involution). 8-bit
    (``ds_read_tr8``, 64-key steps of the f8f6f4 MFMA, whose lane half ``h`` holds step keys
    ``32 h .. 32 h + 31`` = score registers ``e`` of the step's two 32-key blocks, keys
    ``32 (e // 16) + 8 (e % 16 // 4) + 4 h + e % 4``): row bit 5 = key bit 2, row bits 2-4 = key
    bits 3-5 (tests/kernels/gfx950/test_attention_plan.py checks both against ``isa.lanes``)."""
    if bits == 8:
        return key - (key & 60) + ((key & 4) << 3) + ((key & 56) >> 1)
    return key - (key & 12) + ((key & 4) << 1) + ((key & 8) >> 1)


def v_lds_key(row, bits: int = 16):
    """The key of a V tile that LDS row ``row`` holds: ``v_lds_row``'s inverse (what a direct-to-LDS
    load, which writes LDS rows in order, fetches). 16-bit: ``v_lds_row`` itself (an involution);
    8-bit: key bit 2 = row bit 5, key bits 3-5 = row bits 2-4."""
    if bits == 8:
        return row - (row & 60) + ((row & 32) >> 3) + ((row & 28) << 1)
    return v_lds_row(row)


def plan_gfx950_attention(problem: AttentionProblem, config: AttentionConfig | None = None) -> AttentionPlan:
    """The gfx950 plan of ``problem`` (module docstring); ValueError where ``config`` does not tile it,
    its LDS (``AttentionPlan.lds_bytes``) exceeds the CU's, or a tensor is too large for 32-bit indexing
    (``check_indexing``); a ``ContractError`` naming ``layout`` for ``"bshd"`` storage (``check_layout``: the
    gfx950 kernel reads ``"bhsd"`` only; sm80 and sm90 read both)."""
    check_indexing(problem)
    check_layout(problem, "gfx950")
    check_config(config, (AttentionConfig,), "gfx950 attention config")
    config = config or AttentionConfig()
    spec = DTYPES[problem.dtype]
    D, BKV = problem.head_dim, config.block_kv
    esize = spec.elem_bytes
    step = CATALOG[spec.mfma32].k  # keys per O^T MFMA step
    if BKV % step:
        raise ValueError(f"attention block_kv: a {problem.dtype} P V step takes {step} keys; expected a multiple of "
                         f"{step}, found {BKV}")
    q_blocks = ceil_div(problem.seq_q, config.block_q)
    threads = 64 * (config.block_q // WAVE_ROWS)
    if (BKV * D * esize // 16) % threads:
        raise ValueError(f"attention: a {BKV}x{D} kv tile is {BKV * D * esize // 16} 16-byte chunks, not a whole "
                         f"number per thread of {threads}; use a larger block_kv or block_q")
    shapes = problem.shapes()
    storage = {"Q": spec.storage, "K": spec.storage, "V": spec.storage, "O": OUT_STORAGE[problem.out_dtype],
               "LSE": "float32", "SCALES": "float32"}
    params = tuple(Param(name, shape, storage[name]) for name, shape in shapes.items())
    plan = AttentionPlan(
        problem, config, spec.mfma32, spec.tr, spec.storage, config.block_q // WAVE_ROWS,
        Grid((q_blocks, 1), problem.batch * problem.heads), ceil_div(problem.seq_kv, BKV), problem.seq_kv % BKV,
        problem.seq_q % config.block_q, D + config.lds_pad // esize, BKV * D * esize // 16 // threads,
        convert_epilogue("float32", problem.out_dtype), params, p_convert(problem.dtype), P_SHIFT[problem.dtype])
    if plan.lds_bytes > GFX950_LDS_BYTES:
        raise ValueError(f"attention: {plan.lds_bytes} bytes of LDS (K {plan.k_stages} + V {plan.v_stages} stages of "
                         f"{plan.stage_rows} x {plan.lds_row} elements) exceed gfx950's {GFX950_LDS_BYTES}; use a "
                         f"smaller block_kv or lds_pad, or fewer stages (lds_dma, defer_pv)")
    return plan


def p_convert(dtype: str) -> Epilogue | None:
    """The conversion of the probabilities ``P`` (finite, in [0, 1], fp8 ``[0, 2^P_SHIFT]``) to the
    MFMA's B operand: bf16 rounded to nearest with ties away from zero (``bf16_rna``: one integer add
    per value where ties to even take three instructions; the same half-ulp bound, ``error_bound``),
    f16 the cast; fp8 (``SCALED``) None: no per-value epilogue, four scores packed per register as
    e4m3 by two ``v_cvt_pk_fp8_f32`` (round to nearest even; ``P_ROUNDOFF``), the emitter's ``_p_writer``."""
    if dtype in SCALED:
        return None
    convert = convert_epilogue("float32", dtype)
    return attrs.evolve(convert, ops=("bf16_rna",)) if convert.ops == ("bf16_rne",) else convert


__all__ = ["ATTENTION_DTYPES", "OUT_DTYPES", "P_ROUNDOFF", "P_SHIFT", "P_UNDERFLOW", "SCALED", "AttentionConfig",
           "AttentionPlan", "AttentionProblem", "HEAD_DIMS", "dequantize", "error_bound", "kv_full_tiles_for",
           "kv_tiles_for", "output_arrays", "p_convert", "plan_gfx950_attention", "random_inputs", "reference",
           "v_lds_key", "v_lds_row"]
