"""Paged decode attention (issue 37) on gfx950: the plan, over the target-neutral problem
(``kernels.attention.paged``: ``PagedDecodeProblem``, its reference, bound and clamping rules).

**The launch.** One wave (64 lanes) per workgroup; the grid is ``batch x kv_heads x row_blocks x
splits`` (split fastest). A workgroup takes one kv head of one sequence, the rows ``r`` of its GQA
group (``r = query * group + head_in_group``: the group's heads of a query are adjacent in ``Q
[B, q, H, D]``) in blocks of ``16 x row_tiles`` (the MFMA's 16 rows, padded), and one of ``splits``
contiguous ranges of the sequence's kv tiles: the sequence's context ``L`` is read on the device
(clamped to ``0 .. capacity``), its ``ceil(L / block_kv)`` tiles cut into ``splits`` ranges there,
so every split of a sequence has the same work whatever ``L`` is. Every key the kernel loads is
loaded once for all the group's heads and queries (the MFMA's N rows).

**The MFMAs** (``mfma_f32_16x16x32_bf16``; f16 queries ``..._f16``): ``S^T = K Q^T`` with A = 16 keys
x 32 head-dim elements straight from the cache into registers (a lane's 8 elements of a key are 16
contiguous bytes: the k order of a step is permuted, ``head_dim_of``, so that an fp8 lane's 16-byte
load covers two steps), B = the rows' Q (registers, loaded once); each lane then holds one row
(``lane % 16``) and 4 keys of each 16-key block, the row max one exchange over the lanes
``lane ^ 16, lane ^ 32`` (``T.rocm.wave_reduce(..., axis="col")``). ``O^T += V^T P^T``: B = P^T from the
score registers (16 bits, to nearest; 8 per 32-key step), A = V^T by ``ds_read_tr16_b64`` from the V
tile in LDS, whose key rows are permuted (``v_lds_row``) so that the transposing read of natural rows
gives each lane the keys of its score registers.

**fp8 KV** (OCP e4m3 with per-kv-head f32 ``K_SCALE``, ``V_SCALE``): dequantized in registers,
two elements per ``v_cvt_scalef32_pk_bf16_fp8`` with the scale 1 (bf16 queries only: f16 queries
with fp8 KV are refused): e4m3 is exact in bf16, so the conversion adds no error, and the per-head scales are f32
factors on the scores (``K_SCALE``) and on O (``V_SCALE``). The bf16 MFMA rather than the fp8
``mfma_f32_16x16x128_f8f6f4``: Q stays in 16 bits (an fp8 Q would add its e4m3 rounding to every
score), P too (the bound's ``u_P`` is the query dtype's), and decode is bound by the bytes of the
cache, not by the MFMA rate (one MFMA per 32 keys x 32 head-dim elements).

**Lying device data** (the problem's clamps): ``L`` clamped to ``0 .. capacity``; a block-table entry
is read only for a page below ``ceil(L / page_size)`` (a buffer load whose offset is past the table
otherwise); a page index outside ``0 .. num_pages - 1`` makes its keys absent (score ``-inf``) and
their loads' offsets past the cache, which the buffer range check answers with zeros: nothing is read
or written outside the buffers.

**The merge** (split-KV): each workgroup writes its rows' partial ``O / l`` (f32, times ``V_SCALE``) and
base-2 LSE into the workspace ``WORK_O`` / ``WORK_LSE`` (its split's slice), then, as the split-K GEMM,
``fence_release``, a barrier and one ticket (``TICKETS``, an atomic counter per (sequence, kv head,
row block)); the workgroup that draws the last ticket merges the splits in index order (the weights
``2^(lse_s - max)``; the same bits every run) into O and the natural LSE, and resets the counter.
``TICKETS`` is zero after every launch (allocate it zeroed once). A row that sees no key gets ``O = 0``
and ``LSE = -inf`` exactly.
"""

from __future__ import annotations

import attrs

from ...isa import CATALOG
from ...isa.hardware import GFX950_LDS_BYTES
from ..attention.paged import PagedDecodeProblem
from ..common import PlanRecord, check_config
from ..gemm.dynamic_m import ceil_div
from ..gemm.epilogue import Param
from .gemm_common import OUT_STORAGE, Epilogue, convert_epilogue
from .gemm_config import DTYPES

MFMA_ROWS = 16  # the MFMA's N: rows (heads x queries) per row tile
MAX_ROW_TILES = 4  # row tiles per workgroup (more rows: more row blocks)
THREADS = 64  # one wave per workgroup
BLOCK_KVS = (32, 64, 128)


@attrs.frozen
class PagedDecodeConfig:
    """The kernel's choices: ``block_kv`` keys per tile (32-key P V steps; None: 16 KiB of K and V), ``splits`` kv
    ranges per sequence (None: the cost model's, ``paged_decode_cost.choose_splits``), the LDS row
    padding in bytes, and ``prefetch``: tile ``j + 1``'s loads issued before tile ``j``'s work."""

    block_kv: int | None = None  # None: 32 keys (16-bit KV), 64 (fp8): 16 KiB of K and V per tile either way
    splits: int | None = None
    lds_pad: int = 16
    prefetch: bool = True

    def __attrs_post_init__(self):
        check_config(self, (PagedDecodeConfig,), "gfx950 paged decode config")
        if self.block_kv is not None and self.block_kv not in BLOCK_KVS:
            raise ValueError(f"paged decode block_kv: one of {BLOCK_KVS}, found {self.block_kv}")
        if self.splits is not None and (isinstance(self.splits, bool) or not isinstance(self.splits, int)
                                        or self.splits < 1):
            raise ValueError(f"paged decode splits: a positive int or None, found {self.splits!r}")
        if self.lds_pad % 16 or self.lds_pad < 0:
            raise ValueError(f"paged decode lds_pad: whole 16-byte chunks; found {self.lds_pad}")


@attrs.frozen
class PagedDecodePlan(PlanRecord, family="paged"):
    """Everything the gfx950 emission reads (``paged_decode_emit``; module docstring)."""

    problem: PagedDecodeProblem
    config: PagedDecodeConfig  # splits filled in
    mfma: str  # S^T = K Q^T and O^T = V^T P^T
    tr: str  # ds_read_tr of V^T
    storage: str  # TIR dtype of Q, O and the dequantized K, V (bf16: int16 bit patterns)
    kv_storage: str  # TIR dtype of the caches (fp8: uint8)
    rows: int  # group x queries: the rows of a (sequence, kv head)
    row_tiles: int  # 16-row MFMA tiles per workgroup
    row_blocks: int  # workgroups along the rows
    lds_row: int  # elements per padded V tile row in LDS
    epilogue: Epilogue  # f32 O -> the output dtype
    params: tuple[Param, ...]

    @property
    def splits(self) -> int:
        return self.config.splits

    @property
    def block_rows(self) -> int:
        return MFMA_ROWS * self.row_tiles

    @property
    def groups(self) -> int:
        """Workgroups of the launch."""
        p = self.problem
        return p.batch * p.kv_heads * self.row_blocks * self.splits

    @property
    def units(self) -> int:
        """(sequence, kv head, row block) units: ``TICKETS`` entries, ``WORK_*``'s first axis."""
        p = self.problem
        return p.batch * p.kv_heads * self.row_blocks

    @property
    def kv_esize(self) -> int:
        return 1 if self.problem.scaled else 2

    @property
    def scaled(self) -> bool:
        return self.problem.scaled

    @property
    def k_steps(self) -> int:
        """MFMA K steps of S^T (32 head-dim elements each)."""
        return self.problem.head_dim // CATALOG[self.mfma].k

    @property
    def pv_steps(self) -> int:
        """32-key P V steps per tile."""
        return self.config.block_kv // CATALOG[self.mfma].k

    @property
    def kv_blocks(self) -> int:
        """16-key S^T blocks per tile."""
        return self.config.block_kv // MFMA_ROWS

    @property
    def d_tiles(self) -> int:
        """16-wide head-dim tiles of O^T."""
        return self.problem.head_dim // MFMA_ROWS

    @property
    def v_chunks(self) -> int:
        """16-byte chunks of the V tile (in the cache's dtype) per lane."""
        return self.config.block_kv * self.problem.head_dim * self.kv_esize // 16 // THREADS

    @property
    def tile_pages(self) -> int:
        """Block-table entries a tile reads: one, or ``block_kv / page_size`` for smaller pages."""
        return max(1, self.config.block_kv // self.problem.page_size)

    @property
    def lds_bytes(self) -> int:
        return self.config.block_kv * self.lds_row * 2

    def tile_bytes(self) -> int:
        """K and V bytes of one tile: what a wave has in flight per tile."""
        return 2 * self.config.block_kv * self.problem.head_dim * self.kv_esize


def head_dim_of(kk: int, g: int, e: int) -> int:
    """The head-dim element at K position ``8 g + e`` of S^T step ``kk`` (lane group ``g = lane // 16``):
    ``64 (kk // 2) + 16 g + 8 (kk % 2) + e``, so lane group ``g`` of steps ``2 i`` and ``2 i + 1`` reads
    16 contiguous elements (one 16-byte fp8 load; 16-bit: two). Q and K use the same order."""
    return 64 * (kk // 2) + 16 * g + 8 * (kk % 2) + e


def v_lds_row(key):
    """The LDS row of a V tile holding key ``key`` (module docstring): within each 32-key P V step,
    B element ``e`` of lane group ``g`` (K position ``8 g + e``, the row the operand-form
    ``ds_read_tr16`` reads) is score register ``e % 4`` of 16-key block ``e // 4``: key
    ``16 (e // 4) + 4 g + e % 4``. So row = ``8 g + 4 (key bit 4) + key % 4`` with ``g`` = key bits 2-3."""
    return key - (key & 31) + 8 * ((key >> 2) & 3) + 4 * ((key >> 4) & 1) + (key & 3)


def _check(problem: PagedDecodeProblem, config: PagedDecodeConfig):
    if problem.kv_dtype != "fp8" and problem.kv_dtype != problem.q_dtype:
        raise ValueError(f"paged decode gfx950: a 16-bit KV cache in the queries' dtype (one MFMA for both "
                         f"products); expected kv_dtype {problem.q_dtype} or fp8, found {problem.kv_dtype}")
    if problem.scaled and problem.q_dtype != "bf16":
        raise ValueError(f"paged decode gfx950: fp8 KV is dequantized to bf16 (v_cvt_scalef32_pk_bf16_fp8) for the bf16 "
                         f"MFMA; expected q_dtype bf16 with kv_dtype fp8, found {problem.q_dtype}")
    esize = 1 if problem.scaled else 2
    if (config.block_kv * problem.head_dim * esize // 16) % THREADS:
        raise ValueError(f"paged decode block_kv: a {config.block_kv}x{problem.head_dim} V tile is not a whole number "
                         f"of 16-byte chunks per lane of {THREADS}; use a larger block_kv")


def plan_gfx950_paged_decode(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None,
                             context: int | None = None) -> PagedDecodePlan:
    """The gfx950 plan (module docstring); ``config.splits`` None: the cost model's choice for the longest
    context ``context`` (a host-side hint; default ``capacity``)."""
    from .paged_decode_cost import choose_splits

    check_config(config, (PagedDecodeConfig,), "gfx950 paged decode config")
    config = config or PagedDecodeConfig()
    if config.block_kv is None:
        config = attrs.evolve(config, block_kv=64 if problem.scaled else 32)
    _check(problem, config)
    spec = DTYPES[problem.q_dtype]
    rows = problem.group * problem.queries
    row_tiles = min(ceil_div(rows, MFMA_ROWS), MAX_ROW_TILES)
    row_blocks = ceil_div(rows, MFMA_ROWS * row_tiles)
    if config.splits is None:
        config = attrs.evolve(config, splits=choose_splits(problem, config.block_kv, row_blocks, context))
    lds_row = problem.head_dim + config.lds_pad // 2
    kv_storage = "uint8" if problem.scaled else spec.storage
    units = problem.batch * problem.kv_heads * row_blocks
    shapes = problem.shapes()
    storage = {"Q": spec.storage, "K_CACHE": kv_storage, "V_CACHE": kv_storage, "BLOCK_TABLE": "int32",
               "CONTEXT_LENS": "int32", "O": OUT_STORAGE[problem.out_dtype], "LSE": "float32", "K_SCALE": "float32",
               "V_SCALE": "float32"}
    params = tuple(Param(name, shape, storage[name]) for name, shape in shapes.items())
    block_rows = MFMA_ROWS * row_tiles
    params += (Param("WORK_O", (units, config.splits, block_rows, problem.head_dim), "float32"),
               Param("WORK_LSE", (units, config.splits, block_rows), "float32"),
               Param("TICKETS", (units,), "uint32"))
    plan = PagedDecodePlan(problem, config, spec.mfma16, spec.tr, spec.storage, kv_storage, rows, row_tiles, row_blocks,
                           lds_row, convert_epilogue("float32", problem.out_dtype), params)
    if plan.lds_bytes > GFX950_LDS_BYTES:
        raise ValueError(f"paged decode: {plan.lds_bytes} bytes of LDS exceed gfx950's {GFX950_LDS_BYTES}")
    return plan


__all__ = ["BLOCK_KVS", "MAX_ROW_TILES", "MFMA_ROWS", "THREADS", "PagedDecodeConfig", "PagedDecodePlan",
           "head_dim_of", "plan_gfx950_paged_decode", "v_lds_row"]
