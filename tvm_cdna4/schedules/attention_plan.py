"""Attention forward (FlashAttention-2, issue 26): the problem both targets share, its float64
reference, and the gfx950 plan. Pure Python (attrs; numpy only in the reference): no TIRx, so the
CLI, the build cache and the sm80 planner read it as they are.

**The problem** (``AttentionProblem``, target-neutral). ``Q [B, H, Sq, D]``, ``K, V [B, Hkv, Skv, D]``
(GQA: query head ``h`` reads kv head ``h // (H / Hkv)``), ``O [B, H, Sq, D]`` in the input dtype and
``LSE [B, H, Sq]`` f32, for each query row ``i`` of head ``h``::

    s_j   = scale * q_i . k_j                   (scale: 1 / sqrt(D) unless given)
    p_j   = exp(s_j - lse_i),  lse_i = log(sum_j exp(s_j))    over the keys j row i sees
    o_i   = sum_j p_j v_j

``causal``: row ``i`` sees keys ``j <= i`` (PyTorch's ``is_causal``, the top-left diagonal; with
``Sq == Skv`` also FlashAttention's), so every row sees key 0 and none is empty. ``LSE`` is the
natural log-sum-exp of the scaled scores (what a backward pass reads).

**Online softmax in base 2.** The kernels keep ``m`` (the running row max) and the scores in
units of ``log2``: ``s2 = s * log2(e)``, with ``scale * LOG2E`` (``schedules.epilogue.LOG2E``)
folded into one multiply (``AttentionProblem.scale_log2``), so that every exponential is one
``exp2`` (gfx950: ``v_exp_f32``; sm80: ``ex2.approx``). Per kv tile: ``m' = max(m, max_j s2_j)``,
``alpha = 2^(m - m')``, ``p_j = 2^(s2_j - m')``, ``l = alpha l + sum_j p_j``, ``O = alpha O + P V``;
at the end ``O / l`` and ``lse = (m + log2 l) ln 2``.

**Tiling** (target-neutral): a workgroup computes ``block_q`` query rows of one (batch, head) over
kv tiles of ``block_kv`` keys. The last tile of a sequence whose length is no multiple of
``block_kv`` is the *masked tail* (keys ``>= Skv`` score ``-inf``; their K and V rows load as
zeros). Causal: a kv tile wholly above the diagonal of the query block is *fully masked* and
skipped when ``skip_masked`` (``kv_tiles_for``: a query block sees ``ceil(min(Skv, Sq, q0 + block_q) /
block_kv)`` tiles); the tiles that cross the diagonal are masked element by element.

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

import math

import attrs

from ..isa import CATALOG
from ..patterns.dma import LdsTile
from .dynamic_m import ceil_div
from .epilogue import LOG2E, Param
from .gfx950_plan import DTYPES, Epilogue, Grid, convert_epilogue

ATTENTION_DTYPES = ("bf16", "f16")
"""Input dtypes (O has the input's dtype). fp8 (e4m3 with per-tensor scales) is still to come."""
HEAD_DIMS = (64, 128)
WAVE_ROWS = 32  # query rows per wave: the 32x32 MFMA's N


def _positive(instance, attribute, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"attention {attribute.name}: expected a positive int, found {value!r}")


@attrs.frozen
class AttentionProblem:
    """What an attention forward computes (module docstring), whatever the target."""

    batch: int = attrs.field(validator=_positive)
    heads: int = attrs.field(validator=_positive)
    kv_heads: int = attrs.field(validator=_positive)
    seq_q: int = attrs.field(validator=_positive)
    seq_kv: int = attrs.field(validator=_positive)
    head_dim: int = attrs.field(validator=_positive)
    causal: bool = False
    dtype: str = "bf16"
    scale: float | None = None  # softmax scale; None: 1 / sqrt(head_dim)

    def __attrs_post_init__(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"attention kv_heads: GQA shares each kv head among heads / kv_heads query heads, so "
                             f"kv_heads must divide heads; found heads={self.heads}, kv_heads={self.kv_heads}")
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"attention head_dim: expected one of {HEAD_DIMS}, found {self.head_dim}")
        if self.dtype not in ATTENTION_DTYPES:
            raise ValueError(f"attention dtype: expected one of {ATTENTION_DTYPES}, found {self.dtype!r}"
                             + (" (fp8 is not implemented yet)" if self.dtype == "fp8" else ""))
        if self.scale is not None and not (isinstance(self.scale, float | int) and math.isfinite(self.scale)
                                           and self.scale > 0):
            raise ValueError(f"attention scale: expected a positive finite number or None, found {self.scale!r}")

    @property
    def group(self) -> int:
        """Query heads per kv head (GQA; 1 without)."""
        return self.heads // self.kv_heads

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.head_dim) if self.scale is None else float(self.scale)

    @property
    def scale_log2(self) -> float:
        """The factor from a raw score ``q . k`` to base-2 units: ``scale * log2(e)``."""
        return self.softmax_scale * LOG2E

    def kv_head(self, head):
        """The kv head query head ``head`` reads (an int or a TIR expression)."""
        return head // self.group

    def visible_pairs(self) -> int:
        """(query, key) pairs scored, over all batches and heads: ``Sq * Skv``, causal fewer."""
        if not self.causal:
            per = self.seq_q * self.seq_kv
        else:
            n = min(self.seq_q, self.seq_kv)
            per = n * (n + 1) // 2 + max(self.seq_q - self.seq_kv, 0) * self.seq_kv
        return self.batch * self.heads * per

    def flops(self) -> int:
        """Useful flops: two matrix products of ``2 D`` flops per visible pair (the convention of
        FlashAttention's and HipKittens' tables, causal counted as the pairs it needs)."""
        return 4 * self.head_dim * self.visible_pairs()

    def shapes(self) -> dict[str, tuple[int, ...]]:
        B, H, Hkv, Sq, Skv, D = self.batch, self.heads, self.kv_heads, self.seq_q, self.seq_kv, self.head_dim
        return {"Q": (B, H, Sq, D), "K": (B, Hkv, Skv, D), "V": (B, Hkv, Skv, D), "O": (B, H, Sq, D),
                "LSE": (B, H, Sq)}


def reference(q, k, v, causal: bool = False, scale: float | None = None):
    """float64 numpy ``(o, lse)`` of the problem (module docstring): ``q [B, H, Sq, D]``, ``k, v
    [B, Hkv, Skv, D]`` (any float dtype, GQA by ``H / Hkv``), ``lse`` natural, ``[B, H, Sq]``."""
    import numpy as np

    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        i, j = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
        s = np.where(j <= i, s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p / total, v), (m + np.log(total))[..., 0]


UNIT_ROUNDOFF = {"bf16": 2.0**-8, "f16": 2.0**-11}  # half an ulp, relative: the 16-bit roundings of P and O
F32_TERMS = 2.0**-16  # the f32 scores, exponentials, sums and accumulation, relative to the terms
LSE_F32 = 2.0**-20  # the f32 log-sum-exp (max, sum, v_log_f32), relative to 1 + |lse|


def error_bound(q, k, v, causal: bool = False, scale: float | None = None, dtype: str = "bf16"):
    """Per-element bounds ``(o_bound, lse_bound)`` of a kernel's ``O`` and ``LSE`` against
    ``reference``: ``u (|o| + sum_j p_j |v_j|) + 2^-16 sum_j p_j |v_j|`` with ``u`` the 16-bit unit
    roundoff (``O`` is rounded once; each ``p_j`` is rounded to 16 bits for the P V product, whose
    error is relative to its terms ``p_j |v_j|``, not to their sum), and ``2^-20 (1 + |lse|)`` for
    the f32 log-sum-exp. The emulated kernel reaches at most 0.6 of the first and 0.15 of the second
    on random normal data (tests/test_attention_gfx950.py, docs/attention.md)."""
    import numpy as np

    o, lse = reference(q, k, v, causal, scale)
    terms, _ = reference(q, k, np.abs(np.asarray(v, np.float64)), causal, scale)
    u = UNIT_ROUNDOFF[dtype]
    return u * (np.abs(o) + terms) + F32_TERMS * terms, LSE_F32 * (1 + np.abs(lse))


def kv_tiles_for(problem: AttentionProblem, block_q: int, block_kv: int, q0, skip_masked: bool = True,
                 minimum=min):
    """The kv tiles the query block starting at row ``q0`` runs (an int or a TIR expression with
    ``minimum`` = ``T.min``): all of them, or causal with ``skip_masked``, those not wholly above
    its diagonal (the block's last row, ``min(Sq, q0 + block_q) - 1``, sees that many keys)."""
    keys = problem.seq_kv
    if problem.causal and skip_masked:
        return (minimum(keys, minimum(problem.seq_q, q0 + block_q)) + block_kv - 1) // block_kv
    return ceil_div(keys, block_kv)


def kv_full_tiles_for(problem: AttentionProblem, block_q: int, block_kv: int, q0, minimum=min):
    """The leading kv tiles that every row of the query block starting at row ``q0`` sees whole, so
    that they need no element mask: inside the sequence (``Skv // block_kv``) and, causal, at or
    below the diagonal of the block's first row (``(q0 + 1) // block_kv``). The block's other tiles
    (``kv_tiles_for`` minus these: the diagonal ones and the masked tail) are masked element by
    element. An int, or a TIR expression with ``minimum`` = ``T.min``."""
    full = problem.seq_kv // block_kv
    return minimum(full, (q0 + 1) // block_kv) if problem.causal else full


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
    p_convert: Epilogue  # f32 P -> the 16-bit B operand of O^T = V^T P^T (bf16: to nearest, ties away: one add)

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
        return LdsTile(self.config.block_kv, self.problem.head_dim * DTYPES[self.problem.dtype].elem_bytes // 16, 16,
                       pad=self.config.lds_pad)

    @property
    def stage_rows(self) -> int:
        """Rows of one LDS stage: the tile's, and with ``lds_dma`` those the last load's 1 KiB block
        reaches (its lanes past the tile write zeros)."""
        rows = self.config.block_kv
        return max(rows, -(-self.dma.dma_bytes // (2 * self.lds_row))) if self.config.lds_dma else rows

    @property
    def masked_tiles(self) -> bool:
        """Whether some kv tiles need element masks (causal, or a masked tail): the kernel runs
        ``kv_full_tiles_for`` tiles unmasked, then the rest masked (without, one unmasked loop)."""
        return self.problem.causal or self.kv_tail > 0

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
        convert_epilogue("float32", out), params, p_convert(problem.dtype))


def p_convert(dtype: str) -> Epilogue:
    """The conversion of the probabilities ``P`` (finite, in [0, 1]) to the MFMA's 16-bit operand:
    bf16 rounded to nearest with ties away from zero (``bf16_rna``: one integer add per value where
    ties to even take three instructions; the same half-ulp bound, ``error_bound``), f16 the cast."""
    convert = convert_epilogue("float32", dtype)
    return attrs.evolve(convert, ops=("bf16_rna",)) if convert.ops == ("bf16_rne",) else convert


__all__ = ["ATTENTION_DTYPES", "AttentionConfig", "AttentionPlan", "AttentionProblem", "HEAD_DIMS", "error_bound",
           "kv_full_tiles_for", "kv_tiles_for",
           "plan_gfx950_attention", "reference", "v_lds_row"]
