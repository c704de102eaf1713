"""Attention forward (FlashAttention-2, issue 26): the problem both targets share, its float64
reference, its error bound and its kv tiling. Pure Python (attrs; numpy only in the reference): no
TIRx and no target module, so the CLI, the build cache and both planners (``attention_plan`` for
gfx950, ``attention_sm80_plan``) read it as they are.

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
"""

from __future__ import annotations

import math

import attrs

from .dynamic_m import ceil_div
from .epilogue import LOG2E

ATTENTION_DTYPES = ("bf16", "f16")
"""Input dtypes (O has the input's dtype). fp8 (e4m3 with per-tensor scales) is still to come."""
HEAD_DIMS = (64, 128)


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


__all__ = ["ATTENTION_DTYPES", "AttentionProblem", "F32_TERMS", "HEAD_DIMS", "LSE_F32", "UNIT_ROUNDOFF", "error_bound",
           "kv_full_tiles_for", "kv_tiles_for", "reference"]
