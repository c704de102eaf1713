"""Attention forward (FlashAttention-2, issue 26): the problem both targets share, its float64
reference, its error bound and its kv tiling. Pure Python (attrs; numpy only in the reference): no
TIRx and no target module, so the CLI, the build cache and both planners (``attention_plan`` for
gfx950, ``attention_sm80_plan``) read it as they are.

**The problem** (``AttentionProblem``, target-neutral). ``Q [B, H, Sq, D]``, ``K, V [B, Hkv, Skv, D]``
(GQA: query head ``h`` reads kv head ``h // (H / Hkv)``), ``O [B, H, Sq, D]`` in the input dtype (fp8: bf16, ``OUT_DTYPES``) and
``LSE [B, H, Sq]`` f32 (``layout`` ``"bshd"``: Q, K, V and O stored ``[B, S, H, D]``, ``LAYOUTS``), for each query
row ``i`` of head ``h``::

    s_j   = scale * q_i . k_j                   (scale: 1 / sqrt(D) unless given)
    p_j   = exp(s_j - lse_i),  lse_i = log(sum_j exp(s_j))    over the keys j row i sees
    o_i   = sum_j p_j v_j

``causal``: row ``i`` sees keys ``j <= i`` (PyTorch's ``is_causal``, the top-left diagonal; with
``Sq == Skv`` also FlashAttention's), so every row sees key 0 and none is empty. ``LSE`` is the
natural log-sum-exp of the scaled scores (what a backward pass reads).

**Online softmax in base 2.** The kernels keep ``m`` (the running row max) and the scores in
units of ``log2``: ``s2 = s * log2(e)``, with ``scale * LOG2E`` (``kernels.gemm.epilogue.LOG2E``)
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

**fp8** (``SCALED``): e4m3 Q, K, V with per-tensor f32 scales (the kernel's input ``SCALES = [sq, sk,
sv]``; ``random_inputs`` quantizes, ``dequantize`` is exact), bf16 O. P is rounded to e4m3 for ``P V``
as ``2^(s2 - m + P_SHIFT)`` (the factor 256 keeps small probabilities out of e4m3's flush range; ``l``
sums the same values, so O needs no correction and ``lse`` subtracts the shift); ``error_bound``
charges P's rounding (``P_ROUNDOFF``) and underflow (``P_UNDERFLOW``). Which targets run it is the
planners' business (gfx950 does; sm80 refuses it).
"""

from __future__ import annotations

import math
import operator

import attrs

from ..gemm.dynamic_m import ceil_div
from ..gemm.epilogue import LOG2E

ATTENTION_DTYPES = ("bf16", "f16", "fp8")
"""Input dtypes. O has the input's dtype, except fp8 (OCP e4m3 Q, K, V with per-tensor f32 scales,
the kernel's ``SCALES`` input): bf16 O."""
OUT_DTYPES = {"bf16": "bf16", "f16": "f16", "fp8": "bf16"}
SCALED = ("fp8",)  # dtypes whose Q, K, V carry per-tensor scales (SCALES = [sq, sk, sv], f32)
HEAD_DIMS = (64, 128)
LAYOUTS = ("bhsd", "bshd")
"""How Q, K, V and O are stored (``AttentionProblem.layout``): ``"bhsd"`` contiguous ``[B, H, S, D]``; ``"bshd"``
``[B, S, H, D]``, the storage a model's ``proj(x).view(B, S, H, D)`` holds (its ``.transpose(1, 2)`` is the
``[B, H, S, D]`` view attention reads). O is stored as Q; LSE is ``[B, H, Sq]`` in both."""
READS_BSHD = ("sm80", "sm90")
"""The targets whose kernels read and write ``"bshd"`` storage (``check_layout``; ``tvm_cdna4.torch.attention``
hands them q, k, v passed as ``transpose(1, 2)`` views); gfx950's reads ``"bhsd"`` only."""
LN2 = math.log(2)  # base-2 units back to natural: both kernels' ``lse = (m + log2 l) LN2`` (module docstring)


def softmax_scale(head_dim: int, scale: float | None) -> float:
    """The softmax scale: ``scale``, or ``1 / sqrt(head_dim)`` when None."""
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


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
    layout: str = "bhsd"  # the storage of Q, K, V and O (``LAYOUTS``)

    def __attrs_post_init__(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"attention kv_heads: GQA shares each kv head among heads / kv_heads query heads, so "
                             f"kv_heads must divide heads; found heads={self.heads}, kv_heads={self.kv_heads}")
        if self.head_dim not in HEAD_DIMS:
            raise ValueError(f"attention head_dim: expected one of {HEAD_DIMS}, found {self.head_dim}")
        if self.dtype not in ATTENTION_DTYPES:
            raise ValueError(f"attention dtype: expected one of {ATTENTION_DTYPES}, found {self.dtype!r}")
        if not isinstance(self.causal, bool):  # a truthy string would plan a causal kernel
            raise ValueError(f"attention causal: expected True or False, found {self.causal!r}")
        if self.scale is not None and not (isinstance(self.scale, float | int) and not isinstance(self.scale, bool)
                                           and math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"attention scale: expected a positive finite number or None, found {self.scale!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"attention layout: expected one of {LAYOUTS}, found {self.layout!r}")

    @property
    def group(self) -> int:
        """Query heads per kv head (GQA; 1 without)."""
        return self.heads // self.kv_heads

    @property
    def softmax_scale(self) -> float:
        return softmax_scale(self.head_dim, self.scale)

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
        """The kernel's tensors' shapes as stored (``layout``: Q, K, V and O ``[B, S, H, D]`` for ``"bshd"``)."""
        B, H, Hkv, Sq, Skv, D = self.batch, self.heads, self.kv_heads, self.seq_q, self.seq_kv, self.head_dim
        q, kv = ((B, Sq, H, D), (B, Skv, Hkv, D)) if self.layout == "bshd" else ((B, H, Sq, D), (B, Hkv, Skv, D))
        shapes = {"Q": q, "K": kv, "V": kv, "O": q, "LSE": (B, H, Sq)}
        return {**shapes, "SCALES": (3,)} if self.dtype in SCALED else shapes

    def heads_major(self, x):
        """A stored Q, K, V or O (numpy) as the ``[B, H, S, D]`` the reference reads: ``"bshd"``'s axes 1 and 2
        swapped (a view), ``"bhsd"``'s as it is."""
        return x.swapaxes(1, 2) if self.layout == "bshd" else x

    @property
    def out_dtype(self) -> str:
        """O's dtype (``OUT_DTYPES``)."""
        return OUT_DTYPES[self.dtype]


def visible(seq_q: int, seq_kv: int):
    """The causal mask ``[Sq, Skv]``: row ``i`` sees keys ``j <= i`` (the module docstring)."""
    import numpy as np

    return np.arange(seq_kv)[None, :] <= np.arange(seq_q)[:, None]


def reference(q, k, v, causal: bool = False, scale: float | None = None):
    """float64 numpy ``(o, lse)`` of the problem (module docstring): ``q [B, H, Sq, D]``, ``k, v
    [B, Hkv, Skv, D]`` (any float dtype, GQA by ``H / Hkv``), ``lse`` natural, ``[B, H, Sq]``."""
    import numpy as np

    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * softmax_scale(q.shape[-1], scale)
    if causal:
        s = np.where(visible(q.shape[2], k.shape[2]), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p / total, v), (m + np.log(total))[..., 0]


UNIT_ROUNDOFF = {"bf16": 2.0**-8, "f16": 2.0**-11}  # half an ulp, relative: the 16-bit roundings of O
P_ROUNDOFF = {**UNIT_ROUNDOFF, "fp8": 2.0**-4}  # P's rounding for P V: P's dtype is Q's (fp8: e4m3, 3 mantissa bits)
P_SHIFT = {"bf16": 0, "f16": 0, "fp8": 8}
"""log2 of the factor P is computed with before its rounding (``2^(s2 - m + shift)``, free: folded into
the subtracted max): fp8 P in ``[0, 256]`` (e4m3 reaches 448) keeps e4m3's subnormals (below ``2^-6``)
for the probabilities under ``2^-14``."""
P_UNDERFLOW = {"bf16": 0.0, "f16": 2.0**-25, "fp8": 2.0**-18}
"""The absolute rounding error of a tiny normalized probability: half the smallest subnormal step of
P's format over ``2^P_SHIFT`` (f16 ``2^-25``, e4m3 ``2^-10 / 2^8``; bf16 has f32's exponent range)."""
F32_TERMS = 2.0**-16  # the f32 scores, exponentials, sums and accumulation, relative to the terms
LSE_F32 = 2.0**-20  # the f32 log-sum-exp (max, sum, v_log_f32), relative to 1 + |lse|


@attrs.frozen
class Accumulation:
    """A target whose tensor cores accumulate short of f32 (``error_bound``'s ``accumulation``): per k-step of
    ``k`` products, the products and the accumulator are aligned to the largest one's exponent and each keeps
    ``bits`` significant bits, the rest truncated, so that each of the ``k + 1`` addends is off by less than
    ``2^(1 - bits)`` times the largest (``step_error``). Both GEMMs: ``S = Q K^T`` (``score_error``, k-steps over
    ``D``) and ``O += P V`` (``output_error``, k-steps over the keys, into the running O). Hopper's fp8 wgmma
    (``k`` 32, ``isa.wgmma_table.FP8_ACCUMULATION_BITS``): the sm90 target's ``score_accumulation``; None (the
    other targets, and 16-bit inputs): f32's, already in ``F32_TERMS``."""

    bits: int = attrs.field(validator=_positive)
    k: int = attrs.field(validator=_positive)

    def step_error(self, products: int | None = None):
        """A k-step's error over its largest addend, at most ``(n + 1) 2^(1 - bits)`` for ``n`` nonzero products
        (``products``; None: ``k``) and the accumulator: the largest is ``f 2^e``, ``f`` in ``[1/2, 1)``, and each
        nonzero addend loses less than ``2^(e - bits)`` (a zero one nothing)."""
        return ((self.k if products is None else products) + 1) * 2.0 ** (1 - self.bits)

    def score_error(self, q, k, causal: bool = False, scale: float | None = None):
        """Per query row ``[B, H, Sq]``, a bound of its scores' error (scaled: natural units) over the keys it
        sees: per k-step, ``step_error`` times the largest addend, which is at most the larger of the
        accumulator (the partial scores, plus the error so far) and the largest product (``|q_d|`` times the
        largest ``|k_d|`` of any key). One partial product per k-step: the cost of one more ``reference``."""
        import numpy as np

        q, k = (np.asarray(x, np.float64) for x in (q, k))
        k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
        seen = visible(q.shape[2], k.shape[2]) if causal else True
        partial, error = 0.0, np.zeros(q.shape[:3])
        for d in range(0, q.shape[-1], self.k):
            qs, ks = q[..., d:d + self.k], k[..., d:d + self.k]
            held = error + (np.where(seen, np.abs(partial), 0.0).max(-1) if d else 0.0)
            product = (np.abs(qs) * np.abs(ks).max(2)[:, :, None, :]).max(-1)
            error = error + self.step_error() * np.maximum(held, product)
            if d + self.k < q.shape[-1]:  # the accumulator of the next k-step
                partial = partial + np.einsum("bhid,bhjd->bhij", qs, ks)
        return error * softmax_scale(q.shape[-1], scale)

    def output_error(self, q, k, v, causal: bool = False, scale: float | None = None, drift=0.0, floor: float = 0.0,
                     elements: int = 2**21):
        """Per element ``[B, H, Sq, D]``, a bound of the truncation of ``O += P V`` (k-steps of ``k`` keys from key
        0, accumulated into the running O), in the normalized frame (O over the final ``l``; the online softmax's
        rescaling multiplies the accumulator and an error made before it alike). Each output element aligns its
        own addends (per element: ``emulator.ptx_wgmma.fp8_accumulate``), so the bound is per ``d``: per k-step,
        ``step_error`` of the step's visible keys (a masked key's P is 0) times the larger of the running O
        (``|sum p_j v_j|`` over the earlier keys, plus how far the kernel's can be from it: ``drift sum p_j |v_j| +
        floor sum |v_j|``, and the error so far) and the step's largest product (``(1 + drift) min(max p_j max
        |v_j|, sum p_j |v_j|) + floor max |v_j|``). ``drift`` (per row ``[B, H, Sq]`` or a number): the kernel's
        ``p'_j`` is within ``drift p_j + floor`` of the exact ``p_j`` (``error_bound``). Every step of the keys is
        charged (one the kernel skips, fully masked, only lowers its error). Rows in chunks of at most ``elements``
        (rows x keys, rows x steps x D) values."""
        import numpy as np

        q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
        B, H, Sq, D = q.shape
        Skv, steps = k.shape[2], ceil_div(k.shape[2], self.k)
        drift = np.broadcast_to(np.asarray(drift, np.float64), (B, H, Sq))
        out = np.empty((B, H, Sq, D))
        chunk = max(1, elements // (steps * max(D, self.k)))
        for b in range(B):
            for h in range(H):
                kh, vh = k[b, h // (H // k.shape[1])], v[b, h // (H // k.shape[1])]
                vs = np.zeros((steps * self.k, D))
                vs[:Skv] = vh
                for r0 in range(0, Sq, chunk):
                    rows = slice(r0, min(Sq, r0 + chunk))
                    s = q[b, h, rows] @ kh.T * softmax_scale(D, scale)
                    seen = visible(Sq, Skv)[rows] if causal else np.ones(s.shape, bool)
                    p = np.exp(np.where(seen, s, -np.inf) - s.max(-1, keepdims=True, where=seen, initial=-np.inf))
                    out[b, h, rows] = self._truncation(p / p.sum(-1, keepdims=True), seen, vs.reshape(steps, self.k, D),
                                                       drift[b, h, rows, None], floor)
        return out

    def _truncation(self, p, seen, vs, drift, floor):
        """``output_error`` of one chunk: ``p`` and ``seen`` ``[rows, Skv]``, ``vs`` ``[steps, k, D]``, ``drift``
        ``[rows, 1]``. The sums per step are batched matrix products ``[steps, rows, k] @ [steps, k, D]``."""
        import numpy as np

        steps, D = vs.shape[0], vs.shape[2]
        ps, seen = (np.pad(x, ((0, 0), (0, steps * self.k - x.shape[1]))).reshape(-1, steps, self.k).transpose(1, 0, 2)
                    for x in (p, seen.astype(np.float64)))  # [steps, rows, k]
        exact, absolute, counted = ps @ vs, ps @ np.abs(vs), seen @ np.abs(vs)  # [steps, rows, D]
        exclusive = lambda x: np.cumsum(x, 0) - x  # noqa: E731 -- the sums over the earlier steps
        held = np.abs(exclusive(exact)) + drift * exclusive(absolute) + floor * exclusive(counted)
        largest = np.abs(vs).max(1)[:, None, :]  # [steps, 1, D]
        product = (1 + drift) * np.minimum(ps.max(-1, keepdims=True) * largest, absolute) + floor * largest
        charge = self.step_error(seen.sum(-1, keepdims=True))  # [steps, rows, 1]
        error = np.zeros((p.shape[0], D))
        for t in range(steps):
            error = error + charge[t] * np.maximum(held[t] + error, product[t])
        return error


def error_bound(q, k, v, causal: bool = False, scale: float | None = None, dtype: str = "bf16",
                accumulation: Accumulation | None = None):
    """Per-element bounds ``(o_bound, lse_bound)`` of a kernel's ``O`` and ``LSE`` against
    ``reference`` of the same (dequantized, ``dequantize``) inputs::

        o_bound = u_O |o| + (u_P + 2^-16) sum_j p_j |v_j| + e_P sum_j |v_j|      (j: the visible keys)

    ``u_O`` the unit roundoff of O's dtype (``O`` is rounded once), ``u_P`` that of P's (each
    ``p_j`` is rounded for the P V product, an error relative to its term ``p_j |v_j|``, not to
    their sum; ``P_ROUNDOFF``: fp8 P is e4m3, ``2^-4``), ``e_P`` P's underflow (``P_UNDERFLOW``),
    ``2^-16`` the f32 scores, exponentials and accumulation; ``2^-20 (1 + |lse|)`` for the f32
    log-sum-exp. ``accumulation`` (the target's ``score_accumulation``: sm90's fp8): the scores are off by at
    most ``delta`` per row (``Accumulation.score_error``), which moves the LSE by at most ``delta`` (1-Lipschitz
    in the scores' max norm) and each ``p_j`` by a factor within ``e^(+-2 delta)`` (the kernel's ``p'_j`` within
    ``e^(2 delta) (1 + u_P + 2^-16) p_j + e_P``): the LSE bound gains ``delta``; the O bound's P terms are charged
    at ``e^(2 delta)`` times, gains ``(e^(2 delta) - 1) sum_j p_j |v_j|`` and the truncation of ``O += P V``'s
    k-steps (``Accumulation.output_error``), and O's own rounding is charged on ``|o|`` plus all that (the
    kernel's O before its rounding is within it of ``o``). On random normal data the emulated kernels' documented
    cases reach at most 0.64 of the O bound (16-bit) and 0.73 (fp8), and 0.3 of LSE's (docs/attention.md); other
    shapes reach more (batch 2 x 2 heads, 40 causal rows, bf16: 0.71; 2 x 4 heads, 20 causal rows, f16 D 128:
    0.77)."""
    import numpy as np

    o, lse = reference(q, k, v, causal, scale)
    abs_v = np.abs(np.asarray(v, np.float64))
    terms, _ = reference(q, k, abs_v, causal, scale)
    rounding = (P_ROUNDOFF[dtype] + F32_TERMS) * terms
    if P_UNDERFLOW[dtype]:  # sum_j |v_j|: the mean over the visible keys (equal scores) times their count
        mean, _ = reference(np.zeros_like(np.asarray(q, np.float64)), k, abs_v, causal, scale)
        seen = np.minimum(np.arange(1, o.shape[2] + 1), abs_v.shape[2]) if causal else np.full(o.shape[2], abs_v.shape[2])
        underflow = P_UNDERFLOW[dtype] * mean * seen[:, None]
    else:
        underflow = 0.0
    lse_bound = LSE_F32 * (1 + np.abs(lse))
    if accumulation is None:
        return UNIT_ROUNDOFF[OUT_DTYPES[dtype]] * np.abs(o) + rounding + underflow, lse_bound
    delta = accumulation.score_error(q, k, causal, scale)
    grow = np.exp(2 * delta)
    drift = grow * (1 + P_ROUNDOFF[dtype] + F32_TERMS) - 1
    before = (grow[..., None] * rounding + underflow + np.expm1(2 * delta)[..., None] * terms
              + accumulation.output_error(q, k, v, causal, scale, drift, P_UNDERFLOW[dtype]))
    return UNIT_ROUNDOFF[OUT_DTYPES[dtype]] * (np.abs(o) + before) + before, lse_bound + delta


def random_inputs(problem: AttentionProblem, seed: int = 0) -> dict:
    """The kernel's inputs by name (``Q``, ``K``, ``V``; fp8 also ``SCALES``), random normal in the
    storage's numpy dtype (``isa.formats``: ``ml_dtypes`` bf16 / e4m3); fp8 values are quantized with
    per-tensor scales ``max |x| / 448`` (e4m3's largest finite), so they span its whole range."""
    import ml_dtypes
    import numpy as np

    from ...isa.formats import fmt

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
    """``(q, k, v)`` float64 ``[B, H, S, D]`` (``heads_major``) from the kernel's inputs: exact (fp8 times its f32 scale: a 4-bit times a
    24-bit significand is exact in float64)."""
    import numpy as np

    q, k, v = (problem.heads_major(np.asarray(arrays[name], np.float64)) for name in ("Q", "K", "V"))
    if problem.dtype not in SCALED:
        return q, k, v
    sq, sk, sv = (float(x) for x in np.asarray(arrays["SCALES"], np.float32))
    return q * sq, k * sk, v * sv


def output_arrays(problem: AttentionProblem) -> dict:
    """``O`` (the output dtype, ``ml_dtypes`` for bf16) and ``LSE`` (f32), NaN-filled: what a kernel
    must overwrite."""
    import numpy as np

    from ...isa.formats import fmt

    shapes = problem.shapes()
    return {"O": np.full(shapes["O"], np.nan, fmt(problem.out_dtype).dtype),
            "LSE": np.full(shapes["LSE"], np.nan, np.float32)}


def check_layout(problem: AttentionProblem, target: str) -> None:
    """A ``ContractError`` naming ``layout`` where ``target``'s kernel does not read ``problem.layout``'s storage:
    the ``READS_BSHD`` targets read every one of ``LAYOUTS``, gfx950 ``"bhsd"`` only (its buffer loads and O
    stores take the bhsd strides)."""
    layouts = LAYOUTS if target in READS_BSHD else ("bhsd",)
    if problem.layout not in layouts:
        from ...errors import ContractError

        raise ContractError(f"{target} attention layout: the kernel reads Q, K, V and writes O as "
                            f"{' or '.join(layouts)} storage", operand="layout", check="parameters",
                            expected=" or ".join(map(repr, layouts)), found=repr(problem.layout))


def check_indexing(problem: AttentionProblem) -> None:
    """Refuse a problem whose largest tensor (Q and O, or K and V) holds ``2^31`` elements or more:
    both targets' kernels index it with 32-bit integers (ValueError naming the count and the limit)."""
    largest = max(problem.batch * problem.heads * problem.seq_q, problem.batch * problem.kv_heads * problem.seq_kv)
    if largest * problem.head_dim >= 2**31:
        raise ValueError(f"attention: {largest * problem.head_dim} elements in one tensor; the kernel indexes with "
                         f"32-bit integers (at most {2**31 - 1}): split the batch")


def kv_tiles_for(problem: AttentionProblem, block_q: int, block_kv: int, q0, skip_masked: bool = True,
                 minimum=min):
    """The kv tiles the query block starting at row ``q0`` runs (an int or a TIR expression with
    ``minimum`` = ``T.min``): all of them, or causal with ``skip_masked``, those not wholly above
    its diagonal (the block's last row, ``min(Sq, q0 + block_q) - 1``, sees that many keys)."""
    keys = problem.seq_kv
    if problem.causal and skip_masked:
        return (minimum(keys, minimum(problem.seq_q, q0 + block_q)) + block_kv - 1) // block_kv
    return ceil_div(keys, block_kv)


def workgroup_tiles(problem: AttentionProblem, block_q: int, block_kv: int, skip_masked: bool = True) -> list[int]:
    """The kv tiles (``kv_tiles_for``) of each query block of one (batch, head), in query-block order:
    what both targets' cost models spread over the GPU."""
    blocks = ceil_div(problem.seq_q, block_q)
    return [kv_tiles_for(problem, block_q, block_kv, qb * block_q, skip_masked) for qb in range(blocks)]


def work_item(u, q_blocks: int, heads_total: int, section: int, ops=(min, operator.floordiv, operator.mod)):
    """(batch x head, query block) of work item ``u`` in the order the CUDA targets launch or walk them (sm80's
    ``head_group``, sm90's ``section_heads``): section ``u // (section x q_blocks)``; in it query blocks longest
    first, each over the section's batch x heads (the last section's are ``heads_total % section`` when that is not
    0), so that the work running at once shares a few heads' K and V in L2. ``ops``: (min, div, mod) of ``u``'s
    kind (TIR: ``T.min``, ``T.truncdiv``, ``T.truncmod``; ``u`` is never negative)."""
    minimum, div, mod = ops
    per = section * q_blocks
    first = div(u, per) * section
    width = section if heads_total % section == 0 else minimum(section, heads_total - first)
    r = mod(u, per)
    return first + mod(r, width), q_blocks - 1 - div(r, width)


def kv_full_tiles_for(problem: AttentionProblem, block_q: int, block_kv: int, q0, minimum=min):
    """The leading kv tiles that every row of the query block starting at row ``q0`` sees whole, so
    that they need no element mask: inside the sequence (``Skv // block_kv``) and, causal, at or
    below the diagonal of the block's first row (``(q0 + 1) // block_kv``). The block's other tiles
    (``kv_tiles_for`` minus these: the diagonal ones and the masked tail) are masked element by
    element. An int, or a TIR expression with ``minimum`` = ``T.min``."""
    full = problem.seq_kv // block_kv
    return minimum(full, (q0 + 1) // block_kv) if problem.causal else full


__all__ = ["ATTENTION_DTYPES", "Accumulation", "F32_TERMS", "HEAD_DIMS", "LAYOUTS", "LN2", "LSE_F32", "OUT_DTYPES", "P_ROUNDOFF", "P_SHIFT",
           "P_UNDERFLOW", "READS_BSHD", "SCALED", "UNIT_ROUNDOFF", "AttentionProblem", "check_indexing", "check_layout",
           "dequantize", "error_bound",
           "kv_full_tiles_for", "kv_tiles_for", "output_arrays", "random_inputs", "reference", "softmax_scale",
           "visible", "work_item", "workgroup_tiles"]
