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

**fp8** (e4m3 Q, K, V with per-tensor f32 scales ``SCALES = [sq, sk, sv]``, bf16 O): both products on
``mfma_scale_f32_32x32x64_f8f6f4`` with unit E8M0 scales (64 head-dim elements, or 64 keys, per
step); ``sq sk`` join the score factor, ``sv`` multiplies O at the end. P is rounded to e4m3 for
``P V`` as ``2^(s2 - m + 8)`` (``P_SHIFT``: the factor 256 is free, folded into the subtracted max, and
keeps small probabilities out of e4m3's flush range); ``l`` sums the same shifted values, so O
needs no correction and ``lse`` subtracts the 8. V is read by ``ds_read_tr8_b64`` with its own key
row order (``v_lds_row(key, 8)``). ``error_bound(..., "fp8")`` charges P's e4m3 rounding (``2^-4``
of each term) and underflow.
"""

from __future__ import annotations

import math

import attrs

from ..isa import CATALOG
from .dynamic_m import ceil_div
from .epilogue import LOG2E, Param
from .gfx950_plan import DTYPES, OUT_STORAGE, Epilogue, Grid, convert_epilogue

ATTENTION_DTYPES = ("bf16", "f16", "fp8")
"""Input dtypes. O has the input's dtype, except fp8 (OCP e4m3 Q, K, V with per-tensor f32 scales,
the kernel's ``SCALES`` input): bf16 O."""
OUT_DTYPES = {"bf16": "bf16", "f16": "f16", "fp8": "bf16"}
SCALED = ("fp8",)  # dtypes whose Q, K, V carry per-tensor scales (SCALES = [sq, sk, sv], f32)
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
            raise ValueError(f"attention dtype: expected one of {ATTENTION_DTYPES}, found {self.dtype!r}")
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
        shapes = {"Q": (B, H, Sq, D), "K": (B, Hkv, Skv, D), "V": (B, Hkv, Skv, D), "O": (B, H, Sq, D),
                  "LSE": (B, H, Sq)}
        return {**shapes, "SCALES": (3,)} if self.dtype in SCALED else shapes

    @property
    def out_dtype(self) -> str:
        """O's dtype (``OUT_DTYPES``)."""
        return OUT_DTYPES[self.dtype]


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


UNIT_ROUNDOFF = {"bf16": 2.0**-8, "f16": 2.0**-11}  # half an ulp, relative: the 16-bit roundings of O
P_ROUNDOFF = {"bf16": 2.0**-8, "f16": 2.0**-11, "fp8": 2.0**-4}  # P's rounding for P V (fp8: e4m3, 3 mantissa bits)
P_SHIFT = {"bf16": 0, "f16": 0, "fp8": 8}
"""log2 of the factor P is computed with before its rounding (``2^(s2 - m + shift)``, free: folded into
the subtracted max): fp8 P in ``[0, 256]`` (e4m3 reaches 448) keeps e4m3's subnormals (below ``2^-6``)
for the probabilities under ``2^-14``."""
P_UNDERFLOW = {"bf16": 0.0, "f16": 2.0**-25, "fp8": 2.0**-18}
"""The absolute rounding error of a tiny normalized probability: half the smallest subnormal step of
P's format over ``2^P_SHIFT`` (f16 ``2^-25``, e4m3 ``2^-10 / 2^8``; bf16 has f32's exponent range)."""
F32_TERMS = 2.0**-16  # the f32 scores, exponentials, sums and accumulation, relative to the terms
LSE_F32 = 2.0**-20  # the f32 log-sum-exp (max, sum, v_log_f32), relative to 1 + |lse|


def error_bound(q, k, v, causal: bool = False, scale: float | None = None, dtype: str = "bf16"):
    """Per-element bounds ``(o_bound, lse_bound)`` of a kernel's ``O`` and ``LSE`` against
    ``reference`` of the same (dequantized, ``dequantize``) inputs::

        o_bound = u_O |o| + (u_P + 2^-16) sum_j p_j |v_j| + e_P sum_j |v_j|      (j: the visible keys)

    ``u_O`` the unit roundoff of O's dtype (``O`` is rounded once), ``u_P`` that of P's (each
    ``p_j`` is rounded for the P V product, an error relative to its term ``p_j |v_j|``, not to
    their sum; ``P_ROUNDOFF``: fp8 P is e4m3, ``2^-4``), ``e_P`` P's underflow (``P_UNDERFLOW``),
    ``2^-16`` the f32 scores, exponentials and accumulation; ``2^-20 (1 + |lse|)`` for the f32
    log-sum-exp. The emulated bf16 kernel reaches at most 0.6 of the O bound and 0.15 of the LSE
    bound on random normal data, fp8 at most 0.75 of its O bound and 0.3 of LSE's (docs/attention.md)."""
    import numpy as np

    o, lse = reference(q, k, v, causal, scale)
    abs_v = np.abs(np.asarray(v, np.float64))
    terms, _ = reference(q, k, abs_v, causal, scale)
    bound = UNIT_ROUNDOFF[OUT_DTYPES[dtype]] * np.abs(o) + (P_ROUNDOFF[dtype] + F32_TERMS) * terms
    if P_UNDERFLOW[dtype]:  # sum_j |v_j|: the mean over the visible keys (equal scores) times their count
        mean, _ = reference(np.zeros_like(np.asarray(q, np.float64)), k, abs_v, causal, scale)
        seen = np.minimum(np.arange(1, o.shape[2] + 1), abs_v.shape[2]) if causal else np.full(o.shape[2], abs_v.shape[2])
        bound = bound + P_UNDERFLOW[dtype] * mean * seen[:, None]
    return bound, LSE_F32 * (1 + np.abs(lse))


def random_inputs(problem: AttentionProblem, seed: int = 0) -> dict:
    """The kernel's inputs by name (``Q``, ``K``, ``V``; fp8 also ``SCALES``), random normal in the
    storage's numpy dtype (``isa.formats``: ``ml_dtypes`` bf16 / e4m3); fp8 values are quantized with
    per-tensor scales ``max |x| / 448`` (e4m3's largest finite), so they span its whole range."""
    import ml_dtypes
    import numpy as np

    from ..isa.formats import fmt

    rng = np.random.default_rng(seed)
    shapes = problem.shapes()
    dtype = fmt(problem.dtype).dtype
    raw = {name: rng.standard_normal(shapes[name]) for name in ("Q", "K", "V")}
    if problem.dtype not in SCALED:
        return {name: x.astype(dtype) for name, x in raw.items()}
    largest = float(ml_dtypes.finfo(dtype).max)
    scales = np.array([np.abs(x).max() / largest for x in raw.values()], np.float32)
    quantized = {name: (x / s).astype(dtype) for (name, x), s in zip(raw.items(), scales.astype(np.float64))}
    return {**quantized, "SCALES": scales}


def dequantize(problem: AttentionProblem, arrays: dict):
    """``(q, k, v)`` float64 from the kernel's inputs: exact (fp8 times its f32 scale: a 4-bit times a
    24-bit significand is exact in float64)."""
    import numpy as np

    q, k, v = (np.asarray(arrays[name], np.float64) for name in ("Q", "K", "V"))
    if problem.dtype not in SCALED:
        return q, k, v
    sq, sk, sv = (float(x) for x in np.asarray(arrays["SCALES"], np.float32))
    return q * sq, k * sk, v * sv


def output_arrays(problem: AttentionProblem) -> dict:
    """``O`` (the output dtype, ``ml_dtypes`` for bf16) and ``LSE`` (f32), NaN-filled: what a kernel
    must overwrite."""
    import numpy as np

    from ..isa.formats import fmt

    shapes = problem.shapes()
    return {"O": np.full(shapes["O"], np.nan, fmt(problem.out_dtype).dtype),
            "LSE": np.full(shapes["LSE"], np.nan, np.float32)}


def kv_tiles_for(problem: AttentionProblem, block_q: int, block_kv: int, q0, skip_masked: bool = True,
                 minimum=min):
    """The kv tiles the query block starting at row ``q0`` runs (an int or a TIR expression with
    ``minimum`` = ``T.min``): all of them, or causal with ``skip_masked``, those not wholly above
    its diagonal (the block's last row, ``min(Sq, q0 + block_q) - 1``, sees that many keys)."""
    keys = problem.seq_kv
    if problem.causal and skip_masked:
        return (minimum(keys, minimum(problem.seq_q, q0 + block_q)) + block_kv - 1) // block_kv
    return ceil_div(keys, block_kv)


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
    def pv_steps(self) -> int:
        """MFMA K steps of O^T = V^T P^T per kv tile (16 keys each, fp8 64)."""
        return self.config.block_kv // CATALOG[self.mfma].k

    @property
    def k_steps(self) -> int:
        """MFMA K steps of S^T = K Q^T (16 head-dim elements each, fp8 64)."""
        return self.problem.head_dim // CATALOG[self.mfma].k

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
    bits 3-5 (tests/test_attention_plan.py checks both against ``isa.lanes``)."""
    if bits == 8:
        return key - (key & 60) + ((key & 4) << 3) + ((key & 56) >> 1)
    return key - (key & 12) + ((key & 4) << 1) + ((key & 8) >> 1)


def plan_gfx950_attention(problem: AttentionProblem, config: AttentionConfig | None = None) -> AttentionPlan:
    """The gfx950 plan of ``problem`` (module docstring); ValueError where ``config`` does not tile it."""
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
    return AttentionPlan(
        problem, config, spec.mfma32, spec.tr, spec.storage, config.block_q // WAVE_ROWS,
        Grid((q_blocks, 1), problem.batch * problem.heads), ceil_div(problem.seq_kv, BKV), problem.seq_kv % BKV,
        problem.seq_q % config.block_q, D + config.lds_pad // esize, BKV * D * esize // 16 // threads,
        convert_epilogue("float32", problem.out_dtype), params, P_SHIFT[problem.dtype])


__all__ = ["ATTENTION_DTYPES", "OUT_DTYPES", "P_ROUNDOFF", "P_SHIFT", "P_UNDERFLOW", "SCALED", "AttentionConfig",
           "AttentionPlan", "AttentionProblem", "HEAD_DIMS", "dequantize", "error_bound", "kv_tiles_for", "output_arrays",
           "plan_gfx950_attention", "random_inputs", "reference", "v_lds_row"]
