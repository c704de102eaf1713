"""Paged decode attention on sm80-class GPUs (issue 37): the plan. Pure Python (attrs), no TIRx.

The problem, its reference and the clamps of lying device data are ``kernels.attention.paged``'s;
this module decides how the CUDA kernels (``paged_decode_emit``) compute them.

**Split-KV ("flash-decoding"), two kernels.** ``main``: grid ``batch x kv_heads x splits`` CTAs of
``warps`` warps. A CTA takes one kv head of one sequence and a contiguous range of its kv tiles (of
``TILE_KEYS`` = 16 keys, inside one page: ``page_size >= 16``); its warps take the range's tiles round
robin, each warp an independent online-softmax state over **all** ``rows = group x queries`` query rows
of the kv head (row ``r``: query ``r // group``, head ``kv_head * group + r % group``), so that one load
of a K / V tile serves the whole GQA group and every speculative query. Each warp writes its partial
state (unnormalized O, row max in base-2 units, row sum) to the workspace slot ``((b Hkv + g) splits +
s) warps + w`` (``WO``, ``WM``, ``WL``). ``merge``: one thread per (slot group, row, 2 dims) combines
the ``splits x warps`` partials by their maxima (``O = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s``,
``LSE = (M + log2 l) ln 2``; a row no partial saw: ``O = 0``, ``LSE = -inf``) and writes O and LSE.

**Per warp, per tile** (``mma.sync.aligned.m16n8k16``, f32 accumulate, the query dtype's MMA):
* the tile's K and V rows (16 keys x D of one kv head, rows of one page: ``Hkv D`` elements apart in
  the cache) stream into the warp's own ``stages``-deep ring in shared memory by ``cp.async`` 16-byte
  chunks (``.cg``; the warp's 32 lanes copy, ``cp.async.wait_group`` + ``__syncwarp`` hand them over:
  no CTA barrier in the loop), the 16-byte chunk ``c`` of row ``k`` stored at ``c ^ (k % swizzle)``;
* ``S = Q K^T``: A = Q's fragments (registers for the whole kernel, read once from shared memory), B =
  K words read from shared memory; fp8 K: the word ``K[key][4t .. 4t + 3]`` feeds both halves of a
  k16 step (Q's dims permuted the same way: the sum is unchanged), each fp8 pair widened to the MMA's
  16-bit type in registers (``e4m3 -> f16`` by moving bits: ``(b & 0x7f) << 7 | (b & 0x80) << 8`` is
  ``x / 256`` exactly, subnormals included; bf16 Q: through f32), the ``256`` and the per-head scales
  folded into f32 factors (``K_SCALE 256`` into the score scale, ``V_SCALE 256`` into O at the end);
* the mask (every tile: key ``j`` of row ``r`` counts iff ``j <= L - q + r // group`` and its page
  index is inside the cache), the online softmax in base 2 (a row with no key yet keeps max ``-inf``
  and adds nothing), ``O += P V`` with P packed from the score accumulators and V by word loads.

**Lying device data** (``kernels.attention.paged``): ``L`` is clamped to ``0 .. capacity`` in the
kernel; the CTA reads ``BLOCK_TABLE[b, p]`` only for ``p < ceil(L / page_size)``; a page index outside
``0 .. num_pages - 1`` copies nothing (``src-size`` 0 from page 0: zeros) and its keys are masked.

**The split count** (``choose_splits``): the host does not know the contexts (they are on the device;
reading them would synchronize), so the planner takes ``context`` (a caller's hint of the longest, or
``capacity``) and picks the fewest splits that give ``CTAS_PER_SM`` CTAs per SM of ``sms`` (the present
GPU's, ``kernels.devices``) while leaving every warp at least ``MIN_TILES_PER_WARP`` tiles.
"""

from __future__ import annotations

import attrs

from ..attention.paged import PagedDecodeProblem
from ..common import PlanRecord
from ..devices import planned
from ..gemm.dynamic_m import ceil_div
from ..gemm.epilogue import Param
from ...errors import ContractError
from .gemm_config import DTYPES, MMA

TILE_KEYS = 16  # keys per tile: one k16 step of P V, two n8 tiles of S
CHUNK_BYTES = 16  # cp.async
MAX_ROWS = 64  # group x queries: 4 m16 tiles of accumulators per warp
CTAS_PER_SM = 2  # resident CTAs the split count aims for (2 x 4 warps x 3 stages of 8 KiB fit 227 KiB)
MIN_TILES_PER_WARP = 4  # 64 keys: the pipeline fills and the partial's write is amortized
PACK = "cvt.rn.{t}x2.f32"
COPY = "cp.async.cg.shared.global"
STORAGE = {**DTYPES, "fp8": "uint8"}  # the kernel's parameter dtypes (fp8 caches as their bytes)


@attrs.frozen
class PagedDecodeConfig:
    """The kernel's tuning: ``warps`` per CTA, ``stages`` of each warp's cp.async ring, ``splits`` CTAs
    per (sequence, kv head) (None: ``choose_splits``)."""

    warps: int = 4
    stages: int = 3
    splits: int | None = None

    def __attrs_post_init__(self):
        for name, low, high in (("warps", 1, 8), ("stages", 2, 8)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ContractError(f"paged decode config {name}: out of range", operand=name, check="parameters",
                                    expected=f"an int in {low}..{high}", found=repr(value))
        if self.splits is not None and (isinstance(self.splits, bool) or not isinstance(self.splits, int)
                                        or self.splits < 1):
            raise ContractError("paged decode config splits: a positive int or None", operand="splits",
                                check="parameters", expected=">= 1", found=repr(self.splits))


@attrs.frozen
class PagedDecodePlan(PlanRecord, family="paged"):
    """Everything ``paged_decode_emit`` reads (module docstring)."""

    problem: PagedDecodeProblem
    config: PagedDecodeConfig
    split_kv: int
    context: int  # the longest context the split was chosen for
    sms: int
    mma_instr: str
    pack_instr: str
    params: tuple[Param, ...]  # main's
    merge_params: tuple[Param, ...]

    @property
    def rows(self) -> int:
        return self.problem.group * self.problem.queries

    @property
    def m_tiles(self) -> int:
        return ceil_div(self.rows, 16)

    @property
    def elem_bytes(self) -> int:
        return 1 if self.problem.kv_dtype == "fp8" else 2

    @property
    def row_words(self) -> int:
        """32-bit words of one K / V row in shared memory."""
        return self.problem.head_dim * self.elem_bytes // 4

    @property
    def chunks(self) -> int:
        """16-byte chunks of one K / V row."""
        return self.problem.head_dim * self.elem_bytes // CHUNK_BYTES

    @property
    def swizzle(self) -> int:
        """The chunk XOR's period (rows): 8 bank groups, or the row's chunks where fewer."""
        return min(8, self.chunks)

    @property
    def tile_words(self) -> int:
        return TILE_KEYS * self.row_words

    @property
    def q_words(self) -> int:
        """Q's rows in shared memory (16-bit, ``16 m_tiles x D``), before the warps' rings."""
        return 16 * self.m_tiles * self.problem.head_dim // 2

    def ring_word(self, warp, stage, which: int):
        """First word of warp ``warp``'s K (``which`` 0) or V (1) tile of ``stage``."""
        return self.q_words + ((warp * self.config.stages + stage) * 2 + which) * self.tile_words

    @property
    def smem_bytes(self) -> int:
        return 4 * (self.q_words + self.config.warps * self.config.stages * 2 * self.tile_words)

    @property
    def slots(self) -> int:
        """Workspace partials: one per (sequence, kv head, split, warp)."""
        return self.problem.batch * self.problem.kv_heads * self.split_kv * self.config.warps

    @property
    def ctas(self) -> int:
        return self.problem.batch * self.problem.kv_heads * self.split_kv

    @property
    def threads(self) -> int:
        return 32 * self.config.warps

    @property
    def merge_threads(self) -> int:
        return 128

    @property
    def merge_ctas(self) -> int:
        items = self.problem.batch * self.problem.kv_heads * self.rows * (self.problem.head_dim // 2)
        return ceil_div(items, self.merge_threads)

    def workspace_bytes(self) -> int:
        return 4 * self.slots * self.rows * (self.problem.head_dim + 2)


def choose_splits(problem: PagedDecodeProblem, context: int, sms: int, warps: int) -> int:
    """The split count (module docstring): enough CTAs for ``CTAS_PER_SM`` per SM, no more than leaves
    each warp ``MIN_TILES_PER_WARP`` tiles of a ``context``-key sequence, at least 1."""
    heads = problem.batch * problem.kv_heads
    wanted = ceil_div(CTAS_PER_SM * sms, heads)
    affordable = max(1, ceil_div(max(context, 1), TILE_KEYS) // (warps * MIN_TILES_PER_WARP))
    return max(1, min(wanted, affordable))


def check_context(problem: PagedDecodeProblem, context) -> int:
    if context is None:
        return problem.capacity
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ContractError("paged decode context: the longest context's hint is a positive int", operand="context",
                            check="parameters", expected=">= 1", found=repr(context))
    return min(context, problem.capacity)


def plan_paged_decode(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, context: int | None = None,
                      sms: int | None = None) -> PagedDecodePlan:
    """The plan of ``problem`` (``config`` None: the default, its splits by ``choose_splits`` for
    ``context``, default the capacity, on ``sms`` SMs, default ``kernels.devices.planned("sm80")``)."""
    config = config or PagedDecodeConfig()
    if problem.group * problem.queries > MAX_ROWS:
        raise ContractError("sm80 paged decode: heads / kv_heads x queries query rows per kv head", operand="queries",
                            check="shape", expected=f"at most {MAX_ROWS}", found=problem.group * problem.queries)
    context = check_context(problem, context)
    sms = sms or planned("sm80").units
    splits = config.splits or choose_splits(problem, context, sms, config.warps)
    shapes, dtypes = problem.shapes(), problem.dtypes()
    storage = {name: STORAGE.get(d, {"i32": "int32", "f32": "float32"}.get(d)) for name, d in dtypes.items()}
    names = ("Q", "K_CACHE", "V_CACHE", "BLOCK_TABLE", "CONTEXT_LENS") + (("K_SCALE", "V_SCALE") if problem.scaled
                                                                           else ())
    rows = problem.group * problem.queries
    slots = problem.batch * problem.kv_heads * splits * config.warps
    work = (Param("WO", (slots, rows, problem.head_dim), "float32"), Param("WM", (slots, rows), "float32"),
            Param("WL", (slots, rows), "float32"))
    params = tuple(Param(n, shapes[n], storage[n]) for n in names) + work
    merge = work + (Param("O", shapes["O"], storage["O"]), Param("LSE", shapes["LSE"], "float32"))
    plan = PagedDecodePlan(problem, config, splits, context, sms, MMA.format(t=problem.q_dtype),
                           PACK.format(t=problem.q_dtype), params, merge)
    if plan.smem_bytes > planned("sm80").smem_per_unit:
        raise ContractError("sm80 paged decode: the warps' rings exceed the shared memory", operand="stages",
                            check="shape", expected=f"at most {planned('sm80').smem_per_unit} bytes",
                            found=plan.smem_bytes)
    return plan


__all__ = ["CTAS_PER_SM", "MAX_ROWS", "MIN_TILES_PER_WARP", "TILE_KEYS", "PagedDecodeConfig", "PagedDecodePlan",
           "choose_splits", "plan_paged_decode"]
