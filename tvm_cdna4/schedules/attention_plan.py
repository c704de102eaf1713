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
"""

from __future__ import annotations

import attrs

from ..isa import CATALOG
from .attention_problem import (ATTENTION_DTYPES, F32_TERMS, HEAD_DIMS, LSE_F32, UNIT_ROUNDOFF, AttentionProblem,
                                error_bound, kv_tiles_for, reference)
from .dynamic_m import ceil_div
from .epilogue import Param
from .gfx950_plan import DTYPES, Epilogue, Grid, convert_epilogue

WAVE_ROWS = 32  # query rows per wave: the 32x32 MFMA's N


# ------------------------------------------------------------------------------------ the gfx950 plan

@attrs.frozen
class AttentionConfig:
    """The gfx950 kernel's choices: ``block_q`` query rows per workgroup (32 per wave, so 1-4
    waves), ``block_kv`` keys per K/V tile (a multiple of 32), whether causal skips fully masked
    tiles, the LDS row padding in bytes."""

    block_q: int = 128
    block_kv: int = 64
    skip_masked: bool = True
    lds_pad: int = 16

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
class AttentionPlan:
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

    @property
    def threads(self) -> int:
        return 64 * self.waves

    @property
    def d_tiles(self) -> int:
        """32-wide head-dim blocks: the O^T accumulator tiles of a wave."""
        return self.problem.head_dim // 32

    @property
    def k_steps(self) -> int:
        """MFMA K steps of S^T = K Q^T (16 head-dim elements each)."""
        return self.problem.head_dim // CATALOG[self.mfma].k

    @property
    def kv_blocks(self) -> int:
        """32-key blocks of a kv tile: the S^T accumulator tiles of a wave."""
        return self.config.block_kv // 32


def v_lds_row(key):
    """The LDS row of a V tile that holds key ``key`` of the tile: bits 2 and 3 swapped (an
    involution), so that ``ds_read_tr`` of LDS rows in natural order gives each lane the keys its
    score registers hold (module docstring)."""
    return key - (key & 12) + ((key & 4) << 1) + ((key & 8) >> 1)


def plan_gfx950_attention(problem: AttentionProblem, config: AttentionConfig | None = None) -> AttentionPlan:
    config = config or AttentionConfig()
    spec = DTYPES[problem.dtype]
    D, BKV = problem.head_dim, config.block_kv
    esize = spec.elem_bytes
    q_blocks = ceil_div(problem.seq_q, config.block_q)
    threads = 64 * (config.block_q // WAVE_ROWS)
    if (BKV * D * esize // 16) % threads:
        raise ValueError(f"attention: a {BKV}x{D} kv tile is {BKV * D * esize // 16} 16-byte chunks, not a whole "
                         f"number per thread of {threads}; use a larger block_kv or block_q")
    shapes = problem.shapes()
    params = tuple(Param(name, shapes[name], spec.storage if name != "LSE" else "float32")
                   for name in ("Q", "K", "V", "O", "LSE"))
    out = {"bf16": "bf16", "f16": "f16"}[problem.dtype]
    return AttentionPlan(
        problem, config, spec.mfma32, spec.tr, spec.storage, config.block_q // WAVE_ROWS,
        Grid((q_blocks, 1), problem.batch * problem.heads), ceil_div(problem.seq_kv, BKV), problem.seq_kv % BKV,
        problem.seq_q % config.block_q, D + config.lds_pad // esize, BKV * D * esize // 16 // threads,
        convert_epilogue("float32", out), params)


__all__ = ["ATTENTION_DTYPES", "AttentionConfig", "AttentionPlan", "AttentionProblem", "HEAD_DIMS", "error_bound",
           "kv_tiles_for",
           "plan_gfx950_attention", "reference", "v_lds_row"]
