"""Paged decode attention (issue 37): the problem every target's kernel shares, its float64 reference
(which gathers the pages through the block table), its error bound and its random inputs. Pure Python
(attrs; numpy only in the functions that take arrays), beside ``problem.AttentionProblem``.

**The problem** (``PagedDecodeProblem``). A batch of ``B`` sequences, each with ``q = queries`` new
query tokens (1: decode; 2..8: speculative decoding) against a KV cache of pages. Arrays (names are
the kernels' argument names, ``PagedDecodeProblem.shapes``):

* ``Q [B, q, H, D]`` (``q_dtype`` bf16 or f16); ``O [B, q, H, D]`` in ``q_dtype``; ``LSE [B, q, H]``
  f32, the **natural** log-sum-exp of the scaled scores (FlashInfer's and FlashAttention's base e;
  the kernels work in base 2 and multiply by ``problem.LN2``).
* ``K_CACHE``, ``V_CACHE [num_pages, page_size, Hkv, D]`` (``kv_dtype``: bf16, f16 or fp8 = OCP
  e4m3); fp8 also ``K_SCALE``, ``V_SCALE [Hkv]`` f32: the key of kv head ``g`` is ``K_SCALE[g] *
  K_CACHE[.., g, :]`` (likewise V).
* ``BLOCK_TABLE [B, max_pages]`` int32: key ``j`` of sequence ``b`` is row ``j % page_size`` of page
  ``BLOCK_TABLE[b, j // page_size]``; ``CONTEXT_LENS [B]`` int32: the keys of sequence ``b``, its
  ``q`` new tokens included (they are the last ``q`` keys). Both live on the device: a kernel learns
  the contexts only there.

GQA: query head ``h`` reads kv head ``h // (H / Hkv)``. Query ``i`` (0-based) of a sequence of
context ``L`` sees the keys ``j <= L - q + i`` (the last query sees all ``L``; speculative queries
are causal among themselves)::

    s_j = scale * q_i . k_j   (scale: 1 / sqrt(D) unless given),   lse_i = log(sum_j exp(s_j)),
    o_i = sum_j exp(s_j - lse_i) v_j                                 (j: the keys row i sees)

A row that sees no key (``L - q + i < 0``) has ``O = 0`` and ``LSE = -inf``.

**Lying device data.** The tables are the caller's, on the device, unchecked by any host code; a
kernel must never read or write outside its buffers whatever they hold, and computes exactly this
(the reference does the same):

* a context length is clamped to ``0 .. max_pages * page_size`` (``clamped_contexts``): a negative
  length is 0 (every row empty: ``O = 0``, ``LSE = -inf``), a length past the table's capacity is
  the capacity;
* a page index outside ``0 .. num_pages - 1`` contributes nothing: its ``page_size`` keys are
  masked out of the softmax as if absent (their rows are never read; a kernel loads zeros or
  nothing in their place), so a row whose visible keys all sit on such pages is empty as above;
* the block table entries past ``ceil(L / page_size)`` (``L`` clamped) are never read.

``page_size`` is a power of two, 16..128 (``PAGE_SIZES``): the kernels split a key index into page
and row with a shift and a mask. ``head_dim`` is 64 or 128, ``queries`` 1..8.

**Error bound** (``error_bound``, ``problem.error_bound``'s terms): ``o_bound = u_O |o| + (u_P +
2^-16) sum_j p_j |v_j| + e_P sum_j |v_j|`` with ``u_O`` the unit roundoff of O (``q_dtype``), ``u_P``
that of P's rounding for ``P V`` (default the query dtype: a kernel that dequantizes fp8 K and V
exactly into ``q_dtype`` and folds the scales into f32 factors; ``p_dtype="fp8"`` for one that rounds P
to e4m3), ``e_P`` P's underflow; ``2^-20 (1 + |lse|) + 2^-16 max_j scale sum_i |q_i k_ji|`` for the LSE (the
f32 log-sum-exp, and the scores' f32 accumulation: the LSE moves as far as its largest score may; without the
second term a correct fp8-KV kernel on the H100 was measured at 1.21x the bound, head dim 64, a 5000-key
sequence). An empty row must be exactly
``O = 0``, ``LSE = -inf`` (``compare``).
"""

from __future__ import annotations

import math

import attrs

from ...errors import ContractError
from ..gemm.dynamic_m import ceil_div
from .problem import F32_TERMS, HEAD_DIMS, LN2, LSE_F32, P_ROUNDOFF, P_SHIFT, P_UNDERFLOW, UNIT_ROUNDOFF, softmax_scale

Q_DTYPES = ("bf16", "f16")
KV_DTYPES = ("bf16", "f16", "fp8")
SCALED_KV = ("fp8",)  # KV dtypes with per-kv-head f32 K_SCALE, V_SCALE
PAGE_SIZES = (16, 32, 64, 128)  # powers of two: page and row of a key by a shift and a mask
MAX_QUERIES = 8
INDEX = "int32"  # BLOCK_TABLE and CONTEXT_LENS


def _field_error(field: str, rule: str, expected, found, check: str = "parameters") -> ContractError:
    return ContractError(f"paged decode attention {field}: {rule}", operand=field, check=check, expected=expected,
                         found=found)


def _positive(instance, attribute, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _field_error(attribute.name, "a positive int", "an int >= 1", repr(value))


def _one_of(choices, check="parameters"):
    def validator(instance, attribute, value):
        if value not in choices:
            raise _field_error(attribute.name, f"one of {choices}", choices, repr(value), check)
    return validator


def _scale(instance, attribute, value):
    if value is not None and not (isinstance(value, float | int) and not isinstance(value, bool)
                                  and math.isfinite(value) and value > 0):
        raise _field_error("scale", "the softmax scale is a positive finite number or None", "> 0", repr(value))


def _queries(instance, attribute, value):
    _positive(instance, attribute, value)
    if value > MAX_QUERIES:
        raise _field_error("queries", "queries per sequence (decode 1, speculative up to 8)",
                           f"1..{MAX_QUERIES}", value)


@attrs.frozen
class PagedDecodeProblem:
    """What a paged decode attention computes (module docstring), whatever the target."""

    batch: int = attrs.field(validator=_positive)
    heads: int = attrs.field(validator=_positive)
    kv_heads: int = attrs.field(validator=_positive)
    head_dim: int = attrs.field(validator=_one_of(HEAD_DIMS))
    queries: int = attrs.field(validator=_queries)
    page_size: int = attrs.field(validator=_one_of(PAGE_SIZES))
    max_pages: int = attrs.field(validator=_positive)  # BLOCK_TABLE's columns
    num_pages: int = attrs.field(validator=_positive)  # the cache's pages
    kv_dtype: str = attrs.field(default="bf16", validator=_one_of(KV_DTYPES, "dtype"))
    q_dtype: str = attrs.field(default="bf16", validator=_one_of(Q_DTYPES, "dtype"))
    scale: float | None = attrs.field(default=None, validator=_scale)  # None: 1 / sqrt(head_dim)

    def __attrs_post_init__(self):
        if self.heads % self.kv_heads:
            raise _field_error("kv_heads", "GQA shares each kv head among heads / kv_heads query heads, so "
                               "kv_heads divides heads", f"a divisor of heads={self.heads}", self.kv_heads, "shape")
        cache = self.num_pages * self.page_size * self.kv_heads * self.head_dim
        if cache >= 2**31:
            raise _field_error("num_pages", "the kernels index the KV cache with 32-bit integers",
                               f"at most {2**31 - 1} elements", cache, "shape")

    @property
    def group(self) -> int:
        """Query heads per kv head (GQA; 1 without)."""
        return self.heads // self.kv_heads

    @property
    def capacity(self) -> int:
        """The most keys a sequence can have: ``max_pages * page_size`` (longer contexts are clamped)."""
        return self.max_pages * self.page_size

    @property
    def softmax_scale(self) -> float:
        return softmax_scale(self.head_dim, self.scale)

    @property
    def out_dtype(self) -> str:
        return self.q_dtype

    @property
    def scaled(self) -> bool:
        """fp8 KV: ``K_SCALE`` and ``V_SCALE`` are inputs."""
        return self.kv_dtype in SCALED_KV

    def shapes(self) -> dict[str, tuple[int, ...]]:
        B, q, H, Hkv, D = self.batch, self.queries, self.heads, self.kv_heads, self.head_dim
        cache = (self.num_pages, self.page_size, Hkv, D)
        shapes = {"Q": (B, q, H, D), "K_CACHE": cache, "V_CACHE": cache, "BLOCK_TABLE": (B, self.max_pages),
                  "CONTEXT_LENS": (B,), "O": (B, q, H, D), "LSE": (B, q, H)}
        return {**shapes, "K_SCALE": (Hkv,), "V_SCALE": (Hkv,)} if self.scaled else shapes

    def dtypes(self) -> dict[str, str]:
        """Each array's format name (``isa.formats``)."""
        kv = {"K_CACHE": self.kv_dtype, "V_CACHE": self.kv_dtype}
        scales = {"K_SCALE": "f32", "V_SCALE": "f32"} if self.scaled else {}
        return {"Q": self.q_dtype, **kv, "BLOCK_TABLE": "i32", "CONTEXT_LENS": "i32", "O": self.q_dtype,
                "LSE": "f32", **scales}

    def kv_bytes(self, contexts) -> int:
        """HBM bytes of K and V a kernel must read for these (host) contexts, clamped: whole pages."""
        element = 1 if self.kv_dtype == "fp8" else 2
        pages = sum(ceil_div(L, self.page_size) for L in clamped_contexts(self, contexts))
        return 2 * pages * self.page_size * self.kv_heads * self.head_dim * element

    def bytes_moved(self, contexts) -> int:
        """The least HBM traffic of one call: K and V (``kv_bytes``), Q, O and LSE (a decode kernel's
        roofline; the block table and lengths are noise)."""
        rows = self.batch * self.queries * self.heads
        return self.kv_bytes(contexts) + rows * (2 * 2 * self.head_dim + 4)


def clamped_contexts(problem: PagedDecodeProblem, contexts):
    """The context lengths a kernel uses (module docstring): each clamped to ``0 .. capacity``."""
    return [min(max(int(L), 0), problem.capacity) for L in contexts]


def visible_limit(problem: PagedDecodeProblem, context: int, query: int) -> int:
    """The last key query ``query`` of a sequence of (clamped) ``context`` keys sees: ``L - q + i``
    (negative: none)."""
    return context - problem.queries + query


def random_inputs(problem: PagedDecodeProblem, seed: int = 0, contexts=None) -> dict:
    """The kernel's inputs by name (``shapes``), random: ``contexts`` (B ints, default uneven draws in
    ``1 .. capacity``) written to ``CONTEXT_LENS``; each sequence's pages drawn without repetition from
    the cache while it has enough of them (else with repetition: pages may be shared, as in a prefix
    cache), the unused table entries random valid pages too; Q, K, V standard normal in their storage
    dtype (``ml_dtypes``); fp8 K and V quantized per kv head with scales ``max |x| / 448``."""
    import numpy as np

    from ...isa.formats import fmt

    rng = np.random.default_rng(seed)
    shapes, dtypes = problem.shapes(), problem.dtypes()
    if contexts is None:
        contexts = rng.integers(1, problem.capacity + 1, problem.batch)
    contexts = np.asarray(contexts, np.int64)
    if contexts.shape != (problem.batch,):
        raise _field_error("contexts", "one context length per sequence", (problem.batch,), contexts.shape, "shape")
    table = rng.integers(0, problem.num_pages, shapes["BLOCK_TABLE"])
    needed = [ceil_div(L, problem.page_size) for L in clamped_contexts(problem, contexts)]
    if sum(needed) <= problem.num_pages:
        order, start = rng.permutation(problem.num_pages), 0
        for b, n in enumerate(needed):
            table[b, :n], start = order[start:start + n], start + n
    arrays = {"Q": rng.standard_normal(shapes["Q"]).astype(fmt(problem.q_dtype).dtype),
              "BLOCK_TABLE": table.astype(np.int32), "CONTEXT_LENS": contexts.astype(np.int32)}
    for name, scale_name in (("K_CACHE", "K_SCALE"), ("V_CACHE", "V_SCALE")):
        raw = rng.standard_normal(shapes[name])
        dtype = fmt(dtypes[name]).dtype
        if not problem.scaled:
            arrays[name] = raw.astype(dtype)
            continue
        import ml_dtypes

        scales = (np.abs(raw).max(axis=(0, 1, 3)) / float(ml_dtypes.finfo(dtype).max)).astype(np.float32)
        arrays[name] = (raw / scales.astype(np.float64)[None, None, :, None]).astype(dtype)
        arrays[scale_name] = scales
    return arrays


def dequantize(problem: PagedDecodeProblem, arrays: dict):
    """``(q, k_cache, v_cache)`` float64 from the kernel's inputs: exact (fp8 times its f32 scale)."""
    import numpy as np

    q, k, v = (np.asarray(arrays[name], np.float64) for name in ("Q", "K_CACHE", "V_CACHE"))
    if problem.scaled:
        k = k * np.asarray(arrays["K_SCALE"], np.float64)[None, None, :, None]
        v = v * np.asarray(arrays["V_SCALE"], np.float64)[None, None, :, None]
    return q, k, v


def _gathered(problem: PagedDecodeProblem, arrays: dict, b: int, values):
    """``(k, v, present)`` of sequence ``b``: ``[L, Hkv, D]`` float64 through the block table (clamped
    context ``L``), ``present[j]`` False for the keys of an out-of-range page (their rows zero)."""
    import numpy as np

    _, k_cache, v_cache = values
    L = clamped_contexts(problem, [arrays["CONTEXT_LENS"][b]])[0]
    pages = np.asarray(arrays["BLOCK_TABLE"][b], np.int64)[np.arange(L) // problem.page_size]
    present = (pages >= 0) & (pages < problem.num_pages)
    safe, rows = np.where(present, pages, 0), np.arange(L) % problem.page_size
    k = np.where(present[:, None, None], k_cache[safe, rows], 0.0)
    v = np.where(present[:, None, None], v_cache[safe, rows], 0.0)
    return k, v, present


def _attend(problem: PagedDecodeProblem, arrays: dict, value_map=lambda v: v, zero_q: bool = False):
    """``(o [B, q, H, D], lse [B, q, H], seen [B, q, H], top [B, q, H])`` float64 of the problem with V mapped
    by ``value_map`` (``abs`` for the bound's sums) and Q optionally zero (equal scores); ``top``: each row's
    largest ``scale sum_i |q_i k_ji|`` over its visible keys (0 for an empty row: the bound's score term)."""
    import numpy as np

    values = dequantize(problem, arrays)
    q = np.zeros_like(values[0]) if zero_q else values[0]
    B, nq, H, D = q.shape
    o, lse, seen = np.zeros((B, nq, H, D)), np.full((B, nq, H), -np.inf), np.zeros((B, nq, H))
    top = np.zeros((B, nq, H))
    for b in range(B):
        k, v, present = _gathered(problem, arrays, b, values)
        L = k.shape[0]
        k, v = np.repeat(k, problem.group, axis=1), value_map(np.repeat(v, problem.group, axis=1))  # [L, H, D]
        s = np.einsum("ihd,jhd->ihj", q[b], k) * problem.softmax_scale  # [q, H, L]
        limit = np.array([visible_limit(problem, L, i) for i in range(nq)])
        mask = (np.arange(L)[None, :] <= limit[:, None]) & present[None, :]  # [q, L]
        s = np.where(mask[:, None, :], s, -np.inf)
        m = s.max(-1, keepdims=True) if L else np.full((nq, H, 1), -np.inf)
        empty = ~np.isfinite(m)
        p = np.where(empty, 0.0, np.exp(s - np.where(empty, 0.0, m)))
        total = p.sum(-1, keepdims=True)
        o[b] = np.einsum("ihj,jhd->ihd", p / np.where(empty, 1.0, total), v)
        lse[b] = np.where(empty, -np.inf, m + np.log(np.where(empty, 1.0, total)))[..., 0]
        seen[b] = mask.sum(-1)[:, None]
        magnitude = np.einsum("ihd,jhd->ihj", np.abs(q[b]), np.abs(k)) * problem.softmax_scale
        top[b] = np.where(mask[:, None, :], magnitude, 0.0).max(-1, initial=0.0)
    return o, lse, seen, top


def reference(problem: PagedDecodeProblem, arrays: dict):
    """float64 numpy ``(o [B, q, H, D], lse [B, q, H])`` of the kernel's inputs (module docstring:
    pages gathered through ``BLOCK_TABLE``, the clamps applied, natural LSE, empty rows 0 and -inf)."""
    o, lse, _, _ = _attend(problem, arrays)
    return o, lse


def error_bound(problem: PagedDecodeProblem, arrays: dict, p_dtype: str | None = None):
    """Per-element bounds ``(o_bound, lse_bound)`` against ``reference`` (module docstring; the terms
    of ``problem.error_bound``). ``p_dtype``: the format P is rounded to for ``P V`` (default
    ``q_dtype``; ``"fp8"``: e4m3 with ``problem.P_SHIFT``). An empty row's bounds are 0."""
    import numpy as np

    p_dtype = p_dtype or problem.q_dtype
    o, lse, seen, scores = _attend(problem, arrays)
    terms, _, _, _ = _attend(problem, arrays, np.abs)
    bound = UNIT_ROUNDOFF[problem.q_dtype] * np.abs(o) + (P_ROUNDOFF[p_dtype] + F32_TERMS) * terms
    if P_UNDERFLOW[p_dtype]:  # sum_j |v_j|: the mean over the visible keys (equal scores) times their count
        mean, _, _, _ = _attend(problem, arrays, np.abs, zero_q=True)
        bound = bound + P_UNDERFLOW[p_dtype] * mean * seen[..., None]
    # the f32 log-sum-exp, and the scores' own f32 accumulation (F32_TERMS relative to the largest visible
    # scale sum_i |q_i k_ji|: lse moves at most as far as its largest score does)
    finite = np.isfinite(lse)
    lse_bound = np.where(finite, LSE_F32 * (1 + np.abs(np.where(finite, lse, 0.0)))
                         + F32_TERMS * scores, 0.0)
    return bound, lse_bound


def compare(problem: PagedDecodeProblem, arrays: dict, o, lse, p_dtype: str | None = None) -> tuple[float, float]:
    """``(o_ratio, lse_ratio)``: a kernel's largest error over ``error_bound`` (at most 1 passes). An
    empty row must hold exactly ``O = 0`` and ``LSE = -inf`` (else infinity); NaN anywhere: infinity."""
    import numpy as np

    want_o, want_lse = reference(problem, arrays)
    bound_o, bound_lse = error_bound(problem, arrays, p_dtype)

    def ratio(got, want, bound):
        got = np.asarray(got, np.float64)
        same = (got == want)  # -inf == -inf: an empty row's LSE
        err = np.where(same, 0.0, np.abs(got - np.where(np.isfinite(want), want, 0.0)))
        err = np.where(np.isnan(err) | (~np.isfinite(want) & ~same), np.inf, err)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(err == 0, 0.0, err / bound)
        return float(np.max(r)) if r.size else 0.0

    return ratio(o, want_o, bound_o), ratio(lse, want_lse, bound_lse)


def output_arrays(problem: PagedDecodeProblem) -> dict:
    """``O`` and ``LSE``, NaN-filled: what a kernel must overwrite."""
    import numpy as np

    from ...isa.formats import fmt

    shapes = problem.shapes()
    return {"O": np.full(shapes["O"], np.nan, fmt(problem.q_dtype).dtype),
            "LSE": np.full(shapes["LSE"], np.nan, np.float32)}


__all__ = ["INDEX", "KV_DTYPES", "LN2", "MAX_QUERIES", "PAGE_SIZES", "P_SHIFT", "Q_DTYPES", "SCALED_KV",
           "PagedDecodeProblem", "clamped_contexts", "compare", "dequantize", "error_bound", "output_arrays",
           "random_inputs", "reference", "visible_limit"]
