"""The plan of the CUDA GEMM (``tvm_cdna4.kernels.sm80.gemm``): pure Python, no TIRx.

``plan(M, N, K, dtype, layout, out_dtype, config)`` decides everything about the kernel that does
not need TIR: the tile and warp grid, how each operand is copied into shared memory and read with
``ldmatrix`` (one :class:`Swizzle`, one :meth:`LaneAddress.offset`), the k-loop (rolled, unrolled by
the stage count, or persistent), which copies go out in which k-step, the launch grid and its tile
decoding (:class:`GridPlan`), the epilogue (:class:`Epilogue`: operations on the accumulator tile,
then the store) and the kernel's parameters (:class:`Param`). It returns a frozen :class:`GemmPlan`
of named records; the emission (``tvm_cdna4.kernels.sm80.gemm_emit``) turns that plan into TIRx and
decides nothing itself. Tests inspect the plan directly (``tests/kernels/sm80/test_cuda_plan.py``);
:func:`plan_record` is the plan as JSON data (the build-cache key).

Without a ``config`` the tiling is the planner's choice for every M (:func:`choose_config`): the
candidate tilings (:func:`candidates`: the default, and below ``SMALL_M`` 16/32/64/128-row tiles with
K split over 1..16 CTAs) ranked by the cost model (:func:`estimate` on a :class:`Device`, by default
the H200's 132 SMs): tiles x waves over SMs, padded MMA rows, roofline max(FLOPs / peak, bytes /
bandwidth) with the bandwidth the resident CTAs can draw, and the split-K workspace traffic
(docs/cuda_gemm.md, "Plans for every M"). :func:`plan_summary` is the chosen plan with its estimate
(``--emit config``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import asdict, dataclass, is_dataclass, replace

import attrs

from ..common import PlanRecord

from ..gemm.dynamic_m import MBucket, ceil_div, check_layout, divides, extent_record, is_static, m_limit, resolve_m
from ..gemm.epilogue import Fusion, Param
from ..gemm.grouped import OFFSETS, SEARCHES, Groups, expected_row_tiles, tail_rows

DTYPES = {"f16": "float16", "bf16": "bfloat16"}
OUT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
LAYOUTS = ("nn", "nt", "tn", "tt")

LDMATRIX = "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
LDMATRIX_TRANS = "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
MMA = "mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32"  # every sm80 kernel's MMA; t: f16 or bf16 (DTYPES' keys)


@dataclass(frozen=True)
class GemmConfig:
    """Tiling of the CUDA GEMM. Warp tile = (block_m / warps_m) x (block_n / warps_n)."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    warps_m: int = 2
    warps_n: int = 4
    stages: int = 4
    group_m: int = 8  # block rasterization: this many block rows share a sweep over N
    mma_order: str = "serpentine"  # "row": mi-major; "serpentine": reverse ni on odd mi (B reuse)
    sync_after_mma: bool = True  # barrier after the k-step's mma issue instead of before it
    split_loads: bool = True  # spread a stage's cp.async over the k-steps (A, then B)
    precompute: bool = True  # per-thread swizzled addresses hoisted out of the k-loop (see docs)
    unroll_stages: bool = True  # k-loop unrolled by `stages` (constant stage offsets) when K is long
    # persistent kernel: this many CTAs (use the GPU's SM count) each loop over output tiles, and
    # the cp.async pipeline runs on across tile boundaries, so the next tile's first stages load
    # while the current tile's epilogue stores; 0 = one CTA per tile. Takes effect when the k-loop
    # is unrolled and K has a whole number of `stages` k-tiles (see `persistent_for`).
    ctas: int = 0
    # split-K: this many CTAs share one output tile, each taking a contiguous range of its k-tiles;
    # the epilogue reduces their f32 partials (``reduction``) and the tile's last CTA stores C
    split_k: int = 1
    # "atomic": red.global.add.f32 into an f32 workspace; "ordered": each slice stores its partial
    # tile and the last CTA sums the slices in index order (deterministic, bit-reproducible)
    reduction: str = "atomic"
    # elements per workspace store and load of the split-K reduction: 1, or 2 (``reduction =
    # "ordered"``: ``st.global.v2.f32`` partials and ``ld.global.cg.v2.f32`` gathers of column pairs,
    # where N is even; half the instructions of the element-wise ones)
    reduce_vector: int = 1
    # grouped GEMM only: a row tile with fewer than block_m rows (a group's last) runs a second copy
    # of the k-loop in which each warp issues its ldmatrix and mma only for the 16-row mma tiles
    # that hold rows (a warp without rows: only the copies and barriers); full tiles run the
    # unchanged loop (``Groups.live_rows``, docs/grouped_gemm.md "Short tiles")
    live_rows: bool = False
    # grouped GEMM only: how a CTA finds its group (``kernels.gemm.grouped.Groups.search``): "binary" (ceil(log2 G)
    # dependent loads of the offsets) or "cta" (each thread tests its own groups at once: ceil(G /
    # threads) independent loads and a barrier)
    group_search: str = "binary"
    # the fused residual through shared memory (``Epilogue.residual_rows``): copied by cp.async into the
    # stages freed in the last k-tiles instead of loaded from global memory in the epilogue; opt-in (at
    # 4096^3 it took the residual alone from +4.2 % to +2.6 % over the plain GEMM but all five steps from
    # +6.1 % to +8.6 %: benchmarks/RESULTS.md, "Issue 25's last two gaps")
    residual_stage: bool = False

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def warp_m(self) -> int:
        return self.block_m // self.warps_m

    @property
    def warp_n(self) -> int:
        return self.block_n // self.warps_n

    def smem_bytes(self, elem_bytes: int = 2) -> int:
        return self.stages * (self.block_m + self.block_n) * self.block_k * elem_bytes

    def check(self) -> None:
        if self.warp_m % 16 or self.warp_n % 16:
            raise ValueError(f"warp tile {self.warp_m}x{self.warp_n} must be a multiple of 16x16")
        if self.block_k % 32:
            raise ValueError("block_k must be a multiple of 32 (two mma k-steps per stage)")
        if self.stages < 2:
            raise ValueError("stages must be at least 2")
        if self.mma_order not in ("row", "serpentine"):
            raise ValueError("mma_order must be 'row' or 'serpentine'")
        if self.ctas < 0:
            raise ValueError("ctas must be 0 (one CTA per tile) or the number of persistent CTAs")
        if self.split_k < 1:
            raise ValueError("split_k must be at least 1")
        if self.split_k > 1 and self.ctas:
            raise ValueError("split_k and persistent CTAs (ctas > 0) do not combine")
        if self.reduction not in ("atomic", "ordered"):
            raise ValueError("reduction must be 'atomic' or 'ordered'")
        if self.reduce_vector not in (1, 2) or (self.reduce_vector == 2 and self.reduction != "ordered"):
            raise ValueError("reduce_vector must be 1, or 2 with reduction='ordered' (sm_80 has no vector f32 red)")
        if self.group_search not in SEARCHES:
            raise ValueError(f"group_search must be one of {SEARCHES}")
        if self.live_rows and self.block_m <= 16:
            raise ValueError("live_rows needs more than one 16-row mma tile per CTA (block_m > 16)")
        if self.smem_bytes() > 227 * 1024:
            raise ValueError(f"{self.smem_bytes()} B of shared memory exceeds 227 KiB")
        for n in (self.block_m, self.block_n, self.block_k):
            if n & (n - 1):
                raise ValueError("block sizes must be powers of two")

    def as_dict(self) -> dict:
        return asdict(self)

    def unrolled_for(self, K: int, layout: str = "nt") -> bool:
        """Whether the k-loop is unrolled by the stage count: K has at least two stage groups.
        Every layout: with B stored [K, N] the ldmatrix offsets are view offsets
        (``LdmatrixPlan.offset_in_view``), which keeps the unrolled loop within 255 registers
        without spills under NVRTC 13.0, the compiler TIRx builds with."""
        del layout  # every layout unrolls (kept for callers that pass it)
        kt = self.slice_k_tiles(K)
        return self.unroll_stages and kt >= 2 * self.stages

    def slice_k_tiles(self, K: int) -> int:
        """k-tiles per K slice: the k-tiles of K shared out over ``split_k`` slices (the last slice's
        k-tiles past K are zero-filled)."""
        return math.ceil(math.ceil(K / self.block_k) / self.split_k)

    def persistent_for(self, K: int, layout: str = "nt") -> bool:
        """Whether the kernel is persistent: ``ctas`` > 0, the unrolled k-loop, and K a whole
        number of stage groups (every tile starts at stage 0)."""
        kt = math.ceil(K / self.block_k)
        return self.ctas > 0 and self.unrolled_for(K, layout) and kt % self.stages == 0


# Defaults per input dtype (mma.sync f16 and bf16 run at the same rate, so they match).
DEFAULT_CONFIGS = {
    "f16": GemmConfig(),
    "bf16": GemmConfig(),
}


def default_config(dtype: str = "f16", M: int | None = None, N: int | None = None) -> GemmConfig:
    """The default tiling; small problems get a 128x128 tile so they launch more blocks."""
    cfg = DEFAULT_CONFIGS[_short_dtype(dtype)]
    if M is not None and N is not None:
        blocks = math.ceil(M / cfg.block_m) * math.ceil(N / cfg.block_n)
        if blocks < 132 * 2:
            cfg = replace(cfg, block_n=128, block_k=32, warps_n=2)
    return cfg


def _short_name(dtype: str, table: dict, what: str) -> str:
    """``table``'s short name for ``dtype`` given as a short name or a TIR dtype."""
    if dtype in table:
        return dtype
    for short, tir in table.items():
        if tir == dtype:
            return short
    raise ValueError(f"unsupported {what} dtype {dtype!r}; use one of {sorted(table)}")


def _short_dtype(dtype: str) -> str:
    return _short_name(dtype, DTYPES, "input")


def _short_out(dtype: str) -> str:
    return _short_name(dtype, OUT_DTYPES, "output")


def operand_shapes(M: int, N: int, K: int, layout: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """Storage shapes of A and B for a layout string."""
    layout = layout.lower()
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    a = (M, K) if layout[0] == "n" else (K, M)
    b = (K, N) if layout[1] == "n" else (N, K)
    return a, b


# ----------------------------------------------------------------------------------------------
# Shared-memory swizzle
# ----------------------------------------------------------------------------------------------


def swizzle_shift(row_elems: int) -> int:
    """CUTLASS ``Swizzle<3, 3, S>`` shift for a shared tile whose rows hold ``row_elems`` halves.

    The XOR takes the 16-byte chunk index (element bits 3..5) and flips it with three row bits.
    For rows of >= 64 halves those are the three lowest row bits; for 32-half rows two rows share a
    128-byte line, so the row bits 1..3 are used. Either way the eight 16-byte rows that one ldmatrix
    phase reads (and the 16-byte chunks that eight consecutive cp.async threads write) land in eight
    different bank groups.
    """
    return max(3, int(math.log2(row_elems)) - 3)


@attrs.frozen
class Swizzle:
    """CUTLASS ``Swizzle<bits, base, shift>``: offset bits ``[base + shift, base + shift + bits)`` XORed
    into bits ``[base, base + bits)``. The one swizzle of the shared tiles, for every use: ``swz(x)``
    on a Python int (the planner's checks) or on a TIR expression (the emission's per-lane and
    per-thread addresses), and ``layout(tile)``, the same map as TIRx's ``ComposeLayout`` (the
    shared views; ``tests/kernels/sm80/test_cuda_gemm.py`` checks they agree)."""

    base: int
    """Offset bits left alone below the XORed field (3 on element offsets: a 16-byte chunk)."""
    bits: int
    """Width of the XORed field (3: eight 16-byte chunks)."""
    shift: int
    """Distance from the XORed field up to the bits XORed into it (``swizzle_shift``)."""

    @classmethod
    def for_row(cls, row_elems: int) -> Swizzle:
        """The element-offset swizzle of a shared tile whose rows hold ``row_elems`` halves."""
        return cls(3, 3, swizzle_shift(row_elems))

    def words(self) -> Swizzle:
        """The same swizzle on b32-word offsets (two halves a word)."""
        return Swizzle(self.base - 1, self.bits, self.shift)

    def __call__(self, x):
        return x ^ (((x >> (self.base + self.shift)) & ((1 << self.bits) - 1)) << self.base)

    def layout(self, tile):
        """TIRx's ``ComposeLayout`` of this swizzle over ``tile`` (a ``TileLayout``)."""
        from tvm_tirx.tirx.layout import ComposeLayout

        return ComposeLayout(self.base, self.bits, self.shift, tile)


def swizzle_elem(offset: int, row_elems: int) -> int:
    """The swizzled element offset (``Swizzle.for_row(row_elems)``)."""
    return Swizzle.for_row(row_elems)(offset)


def swizzle_word(word: int, row_elems: int) -> int:
    """The swizzled offset in b32 words (two halves) of a word offset."""
    return Swizzle.for_row(row_elems).words()(word)


# ----------------------------------------------------------------------------------------------
# Operand tiles
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperandTile:
    """One input operand's tile in shared memory and how the CTA's threads split its copy."""

    name: str
    """``"A"`` or ``"B"``."""
    rows: int
    """Tile rows (the dimension that is not contiguous in memory)."""
    cols: int
    """Tile columns (contiguous in global and shared memory)."""
    grows: int
    """Global extent along the rows."""
    gcols: int
    """Global extent along the columns (the leading dimension)."""
    trans: bool
    """Read with ``ldmatrix .trans``: K is the row dimension (A in ``t*``, B in ``*n``)."""
    vec: int
    """Elements per cp.async chunk (8, 4, 2), or 1 for plain element copies."""
    threads: int
    """Threads of the CTA sharing the copy."""

    @property
    def chunks_per_row(self) -> int:
        return self.cols // self.vec

    @property
    def reps(self) -> int:
        return self.rows * self.chunks_per_row // self.threads

    @property
    def elems(self) -> int:
        return self.rows * self.cols

    def chunk_coord(self, tid, rep):
        """(row, col) in the tile of the chunk copied by thread ``tid`` in repeat ``rep``."""
        cpr, nt = self.chunks_per_row, self.threads
        if cpr <= nt:
            return rep * (nt // cpr) + tid // cpr, (tid % cpr) * self.vec
        per = cpr // nt
        return rep // per, ((rep % per) * nt + tid) * self.vec

    def copy_iters(self, row_stride: int):
        """Shard factors (extent, stride) of the (warp, lane, rep, elem) chunk view."""
        cpr, nt, v = self.chunks_per_row, self.threads, self.vec
        if cpr <= nt:
            return [(nt // cpr, row_stride), (cpr, v), (self.reps, (nt // cpr) * row_stride), (v, 1)]
        per = cpr // nt
        return [(nt, v), (self.reps // per, row_stride), (per, nt * v), (v, 1)]


def _vec_for(ld: int) -> int:
    for v in (8, 4, 2):
        if ld % v == 0:
            return v
    return 1


def make_operands(M, N, K, layout, cfg: GemmConfig) -> tuple[OperandTile, OperandTile]:
    """The shared tiles of A and B for a problem, layout and tiling."""
    layout = layout.lower()
    nt = cfg.threads
    if layout[0] == "n":  # A [M, K]
        a = OperandTile("A", cfg.block_m, cfg.block_k, M, K, False, _vec_for(K), nt)
    else:  # A [K, M]
        a = OperandTile("A", cfg.block_k, cfg.block_m, K, M, True, _vec_for(M), nt)
    if layout[1] == "t":  # B [N, K]
        b = OperandTile("B", cfg.block_n, cfg.block_k, N, K, False, _vec_for(K), nt)
    else:  # B [K, N]
        b = OperandTile("B", cfg.block_k, cfg.block_n, K, N, True, _vec_for(N), nt)
    for op in (a, b):
        total = op.rows * op.chunks_per_row
        if total % nt:
            raise ValueError(f"{op.name} tile {op.rows}x{op.cols} does not split over {nt} threads")
        cpr = op.chunks_per_row
        if not (cpr <= nt and nt % cpr == 0) and not (cpr > nt and cpr % nt == 0):
            raise ValueError(f"{op.name}: {cpr} chunks per row vs {nt} threads")
    return a, b


def _check_warp_offsets_neutral(op: OperandTile, cfg: GemmConfig) -> None:
    """The per-warp base offset must commute with the swizzle (it is added to the pointer)."""
    off = cfg.warp_m if op.name == "A" else cfg.warp_n
    if op.trans:
        span = [(r, c) for r in range(op.rows) for c in range(off)]
        offsets = [w * off for w in range(op.cols // off)]
    else:
        span = [(r, c) for r in range(off) for c in range(op.cols)]
        offsets = [w * off * op.cols for w in range(op.rows // off)]
    swz = Swizzle.for_row(op.cols)
    for base in offsets:
        for r, c in span[:: max(1, len(span) // 4096)]:
            x = r * op.cols + c
            if swz(base + x) != base + swz(x):
                raise ValueError(
                    f"{op.name}: warp tile offset {base} does not commute with the shared swizzle; "
                    "use a warp tile of at least 64 along the contiguous dimension"
                )


# ----------------------------------------------------------------------------------------------
# Plan records
# ----------------------------------------------------------------------------------------------


@attrs.frozen
class Tiling:
    """The CTA tile and its warp grid (the ``config`` resolved for a problem)."""

    block_m: int
    """CTA tile rows of C."""
    block_n: int
    """CTA tile columns of C."""
    block_k: int
    """K extent of one k-tile (one pipeline stage)."""
    warps_m: int
    """Warps along M."""
    warps_n: int
    """Warps along N; warp ``w`` sits at (``w % warps_m``, ``w // warps_m``)."""
    threads: int
    """Threads per CTA (32 per warp)."""
    warp_m: int
    """Warp tile rows."""
    warp_n: int
    """Warp tile columns."""
    mma_m: int
    """m16 mma tiles per warp tile (``warp_m / 16``)."""
    mma_n: int
    """n8 mma tiles per warp tile (``warp_n / 8``)."""
    k_steps: int
    """k16 mma steps per k-tile (``block_k / 16``)."""
    k_tiles: int
    """k-tiles along K (the last one zero-filled past K)."""


@attrs.frozen
class CopyPlan:
    """How one operand's tile goes from global to shared memory each k-tile.

    ``kind`` selects the form: ``"thread"``, every thread copies its own chunks through a
    per-thread view whose repeat offsets are immediates (the swizzle leaves them unchanged, checked
    for every thread); ``"cta"``, one CTA-wide copy through the swizzled ``ComposeLayout`` view;
    ``"element"``, plain element copies (leading dimension odd: no aligned cp.async exists)."""

    kind: str
    """``"thread"``, ``"cta"`` or ``"element"``."""
    instr: str | None
    """``cp.async.cg.shared.global`` (16 B chunks) or ``cp.async.ca.shared.global`` (8/4 B);
    None for element copies."""
    chunk_bytes: int
    """Bytes per cp.async chunk."""
    masked: bool
    """The tile can run past the global extent: every chunk is zero-filled past it (``src_size``)."""
    rows_clamped: bool = False
    """``"thread"`` copies of a symbolic row extent (a dynamic M, a grouped GEMM's T) whose columns stay
    inside: each chunk's row is clamped to the last row instead (``min(row, rows - 1)``; the tile's rows
    past the end load a copy of the last row, whose products are never stored), so no copy carries a
    predicate in the k-loop and ``masked`` is False (``clamp_rows``)."""
    thread_shape: tuple[int, ...] = ()
    """``"thread"``: the per-thread view's shape, repeat factors then the chunk."""
    thread_global_strides: tuple[int, ...] = ()
    """``"thread"``: element strides of that view in global memory."""
    thread_shared_strides: tuple[int, ...] = ()
    """``"thread"``: element strides of that view in the shared tile (after the thread's swizzle)."""
    row_deltas: tuple[int, ...] = ()
    """``"thread"``: tile rows of each repeat's chunk after the thread's first chunk."""
    col_deltas: tuple[int, ...] = ()
    """``"thread"``: tile columns of each repeat's chunk after the thread's first chunk."""
    global_iters: tuple[tuple[int, int], ...] = ()
    """``"cta"``: (extent, stride) of the (warp, lane, repeat, element) view of global memory."""
    shared_iters: tuple[tuple[int, int], ...] = ()
    """``"cta"``: the same view of the (unswizzled) shared tile."""


@attrs.frozen
class LaneAddress:
    """A lane's word offset inside its warp's slice of a stage, before the swizzle:
    ``warp * warp_stride + (lane // 16) * matrix_hi + (lane // 8 % 2) * matrix_lo + (lane % 8) * row``.
    Lanes 8j..8j+7 give the row addresses of matrix j of an ``.x4`` ldmatrix."""

    warp_stride: int
    """Words between the slices of consecutive warps along the operand's tile dimension."""
    matrix_hi: int
    """Words to matrices 2 and 3 (lanes 16..31)."""
    matrix_lo: int
    """Words to matrices 1 and 3 (lanes 8..15, 24..31)."""
    row: int
    """Words between the eight rows of one matrix."""

    def offset(self, warp, lane):
        """The word offset of ``lane`` in warp ``warp``: Python ints (the planner's checks) or TIR
        expressions (the emission's ``lof``)."""
        return warp * self.warp_stride + (lane // 16) * self.matrix_hi + ((lane // 8) % 2) * self.matrix_lo + (lane % 8) * self.row


@attrs.frozen
class LdmatrixGroup:
    """One ``ldmatrix`` apply of a k-step with a precomputed lane address: it reads repeats
    ``first .. first + count - 1`` at ``(swizzled lane address ^ xor) + add + i * stride`` words."""

    first: int
    """First repeat (x4 matrix quad) of the group."""
    count: int
    """Repeats issued by the apply."""
    xor: int
    """Word offset XORed into the lane's swizzled address (chunk-index bits only)."""
    add: int
    """Word offset added after the XOR (bits the swizzle never reads)."""
    stride: int
    """Words between consecutive repeats of the group (0 for a single repeat)."""


@attrs.frozen
class LdmatrixPlan:
    """How a warp reads one operand's fragments from shared memory."""

    instr: str
    """``ldmatrix...x4.shared.b16``, with ``.trans`` for the operand whose K is not contiguous."""
    trans: bool
    """Whether ``instr`` transposes (the operand is stored [K][M or N])."""
    repeats: int
    """x4 ldmatrix per k-step and warp (``mma_m`` for A, ``mma_n / 2`` for B)."""
    view: tuple[tuple[int, int], ...]
    """(extent, stride) in words of the (k-step, repeat, matrix hi, matrix lo, row, word) view of
    a warp's slice (the generic path's ``ComposeLayout`` source)."""
    warp_words: int
    """Words between the slices of consecutive warps (the generic path adds it to the pointer)."""
    lane: LaneAddress | None
    """The precomputed lane address; None on the generic path (``precompute=False``, or a swizzle
    that does not split into XOR and add parts for this operand)."""
    steps: tuple[tuple[LdmatrixGroup, ...], ...] = ()
    """Per k-step, the applies issued from the precomputed lane address (empty on the generic path)."""
    offset_in_view: bool = False
    """Each group's constant part (stage, tile and k-step offsets; the stage a constant or a
    loop variable that unrolls after lowering) is the
    view's offset from a pointer holding only ``lof ^ xor``, so the device compiler sees the
    pointer plus an immediate; otherwise it is folded into the pointer's int index. B stored
    [K, N] (layouts ``*n``) takes the first form: its four groups per k-step, each with its own
    XOR, make 4 x k-steps x stages distinct int sums in the unrolled k-loop, and NVRTC 13.0 keeps
    them in registers (255 + ~500 B of spills on sm_90) where the pointer-plus-immediate form
    needs one register per XOR (255, no spills; tests/kernels/sm80/test_cuda_gemm.py)."""

    def per_repeat(self, kk: int) -> bool:
        """Whether k-step ``kk`` issues one apply per repeat (``repeat_group``), not one group."""
        return len(self.steps[kk]) > 1

    def repeat_group(self, kk: int, rep) -> LdmatrixGroup:
        """The apply of repeat ``rep`` in a per-repeat k-step ``kk``; ``rep`` may be a loop
        variable, the fields then TIR expressions that fold once the loop unrolls."""
        (_, skk), (_, srep), *_ = self.view
        xor, add = split_offset(kk * skk + rep * srep)
        return LdmatrixGroup(rep, 1, xor, add, 0)

    def group(self, kk: int, i) -> LdmatrixGroup:
        """Apply ``i`` of k-step ``kk`` (``i`` a loop variable over ``len(steps[kk])``): the step's one
        group, or its per-repeat group ``i``."""
        return self.repeat_group(kk, i) if self.per_repeat(kk) else self.steps[kk][0]


@attrs.frozen
class OperandPlan:
    """Everything about one input operand: storage, shared tile, copy and ldmatrix."""

    name: str
    """``"A"`` or ``"B"``."""
    shape: tuple[int, int]
    """Global storage shape (``operand_shapes``)."""
    tile: OperandTile
    """The shared tile and its split over the CTA's threads."""
    smem_offset: int
    """Elements from the start of a stage to this tile (A first, then B)."""
    swizzle: Swizzle
    """The shared tile's element-offset swizzle (``Swizzle.for_row(tile.cols)``)."""
    warp_offset: int
    """Elements between the slices of consecutive warps in the shared tile."""
    copy: CopyPlan
    """Global -> shared copy."""
    ldmatrix: LdmatrixPlan
    """Shared -> registers."""


@attrs.frozen
class KStep:
    """What one mma k-step (of ``k_steps`` per k-tile) issues besides its mma, in order: the
    fragments of the next k-step, the cp.async of a k-tile ``stages - 1`` ahead, the barrier."""

    kk: int
    """Index of the k-step within the k-tile."""
    next_stage: int
    """Stage of the next k-step's fragments relative to this one (1 after the last k-step)."""
    next_kk: int
    """k-step of the next fragments within their stage."""
    load: str | None
    """Operands copied ahead in this k-step: ``"A"``, ``"B"``, ``"AB"`` or None."""
    barrier: str | None
    """``"before_mma"`` or ``"after_mma"``: commit, wait for the stage ``stages - 2`` groups back and
    barrier in this k-step; None otherwise."""


@attrs.frozen
class KLoop:
    """The k-loop and the pipeline."""

    form: str
    """``"rolled"`` (runtime stage index), ``"unrolled"`` (by ``stages``: every shared-memory
    stage offset an immediate, then a static tail) or ``"persistent"`` (unrolled, looping over
    output tiles with the pipeline running on into the next tile)."""
    stages: int
    """cp.async pipeline depth (k-tiles in shared memory)."""
    k_tiles: int
    """k-tiles per output tile."""
    groups: int
    """Whole stage groups (``k_tiles // stages``), the unrolled loop's trip count."""
    tail: int
    """k-tiles after the last whole group (unrolled statically)."""
    steps: tuple[KStep, ...]
    """The k-steps of one k-tile."""
    mma_order: tuple[tuple[int, int], ...] | None
    """(mi, ni) issue order of a k-step's mma; None: one apply over the warp tile (``row``)."""

    def loads_ahead(self, kt) -> bool:
        """Whether k-tile ``kt`` issues the copies ``stages - 1`` ahead: False for the static tail
        k-tiles, whose copies would all be past K (a runtime ``kt`` decides at runtime)."""
        return not isinstance(kt, int) or kt + self.stages - 1 < self.k_tiles


Extent = int
"""An extent that depends on M: an int, or a TIR expression of the symbolic M of a dynamic-M plan
(``GemmPlan.dynamic_m``); the emission uses the fields typed ``Extent`` as values and never calls
``int`` on them."""


@attrs.frozen
class TileIndex:
    """The output tile of one tile index (``GridPlan.decode``)."""

    m: object
    """Tile row (CTA tiles along M)."""
    n: object
    """Tile column."""
    k_split: object
    """Slice of K (0 without a K split)."""
    batch: object
    """Batch / group (0 for one problem)."""


@attrs.frozen
class GridPlan:
    """The launch grid and how a CTA's linear tile index decodes to its output tile (``decode``, one
    formula for Python ints and TIR expressions)."""

    grid_m: Extent
    """CTA tiles along M."""
    grid_n: int
    """CTA tiles along N."""
    group_m: int
    """Block rows that sweep N together in the rasterized order (L2 reuse)."""
    k_splits: int
    """Slices of K, each its own tile index (1: no split; room for a split-K reduction)."""
    batches: int
    """Batch / group extent (1: one problem; room for a batched or grouped GEMM)."""
    tiles: Extent
    """Tile indices, ``batches * k_splits * grid_m * grid_n``."""
    ctas: Extent
    """CTAs launched along ``blockIdx.x``: ``tiles``, or the persistent CTAs, CTA ``c`` taking the
    tiles ``c, c + ctas, ...``."""
    persistent: bool
    """Whether CTAs loop over tiles (``KLoop.form == "persistent"``)."""
    grouping: Groups | None = None
    """A grouped GEMM (``kernels.gemm.grouped``): ``grid_m`` is ``grouping.row_tiles(M)`` and the decoded
    tile row ``r`` is a row-tile index that the CTA turns into its group and rows
    (``Groups.locate``: a binary search over the offsets); None: one GEMM."""

    def decode(self, t, div=operator.floordiv, mod=operator.mod, minimum=min) -> TileIndex:
        """The tile of index ``0 <= t < tiles``: batch, then K slice, then ``group_m`` block rows
        sweeping N together. ``div``, ``mod``, ``minimum``: Python's for ints; the emission passes
        ``T.truncdiv``, ``T.truncmod``, ``T.min`` (a batch or K slice adds terms only when there is
        more than one)."""
        batch = k_split = 0
        per_split = self.grid_m * self.grid_n
        if self.batches > 1:
            batch, t = div(t, self.k_splits * per_split), mod(t, self.k_splits * per_split)
        if self.k_splits > 1:
            k_split, t = div(t, per_split), mod(t, per_split)
        width = self.group_m * self.grid_n
        first_m = div(t, width) * self.group_m
        size = minimum(self.grid_m - first_m, self.group_m)
        return TileIndex(first_m + mod(mod(t, width), size), div(mod(t, width), size), k_split, batch)


@attrs.frozen
class EpilogueOp:
    """One operation on the thread's f32 accumulator tile before the store."""

    kind: str
    """``"reduce"``: the split-K reduction (first: the slice's partial tile goes to the f32
    workspace ``W``; the tile's last CTA, by the ticket counter ``S``, gathers the sum into its
    accumulators and clears ``W`` and ``S`` for the next launch); ``"fuse"``: the fused epilogue
    (``GemmPlan.fusion``, ``kernels.gemm.epilogue.apply`` on every accumulator element, its inputs read
    at the element's row and column); ``"convert"``: rounding to the output dtype."""
    instr: str
    """Its PTX: ``red.global.add.f32`` (atomic reduction) or ``st.global.f32`` (ordered: one
    workspace slice per K slice) for ``reduce``; for ``fuse`` its activation's instruction
    (``ex2.approx.ftz.f32`` for silu and gelu, ``max.f32`` for relu) or, without one, ``fma.rn.f32``
    (scales, bias and residual); ``cvt.rn.{f16,bf16}x2.f32`` (a pair into one b32) or
    ``cvt.rn.{f16,bf16}.f32`` (one element, odd N) for ``convert``."""
    dtype: str
    """TIR dtype of the registers it produces (``uint32`` pairs, ``uint16`` elements)."""
    vector: int = 1
    """Elements per instruction of ``reduce``: 1, or 2 (``st.global.v2.f32`` column pairs)."""
    gather: str = ""
    """``reduce``: the last CTA's workspace load (``ld.global.cg.f32``, ``ld.global.cg.v2.f32``)."""
    branch_free: bool = False
    """``reduce``: no branch at C's edge: each workspace store carries its edge test as its PTX
    predicate, each gather load reads at its row and column clamped into C (a sum outside C is never
    stored; the atomic slice's clearing store is predicated). A symbolic M sets it (``plan_epilogue``):
    its edge tests never fold away, and a branch around each pair made the tile's last CTA wait for
    one pair's loads before issuing the next's (an L2 round trip per pair). A static M keeps the
    branches its kernels were pinned with."""


@attrs.frozen
class Epilogue:
    """How the accumulators reach C: ``ops`` in order on the accumulator tile, then one store."""

    out_dtype: str
    """TIR dtype of C."""
    ops: tuple[EpilogueOp, ...]
    """Applied in order to the f32 accumulators (for odd N per element, just before its store)."""
    vector: int
    """Elements per store: 2 (N even) or 1 (odd N: rows not 4/8-byte aligned)."""
    store_instr: str
    """``st.global.v2.f32`` / ``st.global.b32`` (an f32 pair / a converted 16-bit pair), or for odd N
    ``st.global.f32`` / ``st.global.b16`` (one element)."""
    masked: bool
    """A tile can cross the edge of C: each store is predicated (per row half for pairs, per element
    for odd N, where it is always set)."""
    align: int
    """Byte alignment of a store."""
    prefetch: str = ""
    """The L2 prefetch of the tile's residual rows (``prefetch.global.L2``: one per 128-byte line a
    warp's row covers), issued at the start of k-tile ``prefetch_at`` (the persistent kernel: of each
    of its tiles), so that the epilogue's residual loads hit the L2 instead of waiting on DRAM after
    the k-loop, when nothing else runs on the SM; "" for none (no residual) (``plan_prefetch``)."""
    prefetch_at: int = 0
    """The k-tile at whose start the prefetch goes out (the unrolled loop: the start of its group)."""
    residual_rows: int = 0
    """The residual through shared memory (``plan_residual_stage``): rows of the residual tile that one
    freed stage takes; the tile's ``block_m / residual_rows`` parts are copied by ``cp.async`` (16-byte
    chunks, coalesced) at k-tiles ``residual_first``, ``residual_first + 1``, ..., each into the stage
    that k-tile's copies ahead would fill were there k-tiles left, and the fused epilogue reads its
    residual pairs from there (conflict-free: rows ``residual_pitch`` elements apart). 0: the epilogue
    loads the residual from global memory."""
    residual_first: int = 0
    """The k-tile that copies the residual's first part (``k_tiles - stages + 1``: the first without
    copies ahead)."""
    residual_pitch: int = 0
    """Elements from one residual row to the next in shared memory (``block_n + 8``: 16 bytes of padding
    put a warp's eight rows of one pair load in different banks)."""

    @property
    def convert(self) -> EpilogueOp | None:
        """The conversion to ``out_dtype`` (None for f32 C)."""
        return next((op for op in self.ops if op.kind == "convert"), None)

    @property
    def reduce(self) -> EpilogueOp | None:
        """The split-K reduction (None without a K split)."""
        return next((op for op in self.ops if op.kind == "reduce"), None)

    @property
    def fuse(self) -> EpilogueOp | None:
        """The fused epilogue (None when the plan fuses nothing)."""
        return next((op for op in self.ops if op.kind == "fuse"), None)


def fuse_op(fusion: Fusion) -> EpilogueOp | None:
    """The ``"fuse"`` op of a fusion (None for ``Fusion()``): f32 in, f32 out."""
    if fusion.empty:
        return None
    instrs = {"silu": "ex2.approx.ftz.f32", "gelu": "ex2.approx.ftz.f32", "relu": "max.f32"}
    instr = instrs.get(fusion.activation, "fma.rn.f32")
    return EpilogueOp("fuse", instr, "float32")


def plan_epilogue(M: Extent, N: int, ot: str, cfg: GemmConfig, fusion: Fusion = Fusion()) -> Epilogue:
    """Pairs of columns (N even: ``st.global.v2.f32``, or ``cvt.rn.*x2.f32`` + ``st.global.b32``),
    else one element per store (``st.global.f32``, or ``cvt.rn.*.f32`` + ``st.global.b16``); with
    ``split_k`` > 1 the reduction comes first, then the fused epilogue (``fuse_op``), then the
    conversion."""
    ep = _store_epilogue(M, N, ot, cfg)
    fuse = fuse_op(fusion)
    if fuse is not None:
        ep = attrs.evolve(ep, ops=(fuse, *ep.ops))
    if cfg.split_k == 1:
        return ep
    vector = cfg.reduce_vector if N % 2 == 0 else 1  # pairs need even rows of W (8-byte aligned)
    if cfg.reduction == "atomic":
        op = EpilogueOp("reduce", "red.global.add.f32", "float32", 1, "ld.global.cg.f32")
    elif vector == 2:
        op = EpilogueOp("reduce", "st.global.v2.f32", "float32", 2, "ld.global.cg.v2.f32")
    else:
        op = EpilogueOp("reduce", "st.global.f32", "float32", 1, "ld.global.cg.f32")
    return attrs.evolve(ep, ops=(attrs.evolve(op, branch_free=not is_static(M)), *ep.ops))


PREFETCH_AHEAD = 8
"""How many k-tiles before the end of the k-loop the residual's L2 prefetch goes out: late enough
that the tile's A and B streaming does not evict the lines first (a wave of 128 x 256 tiles at
4096^3 streams about 40 MB through the L2 in its 64 k-tiles), early enough that DRAM returns them
(8 k-tiles of 64 are about 8 µs on the H200; the lines of one wave of residual tiles, 8 MB, take
about 2 µs)."""


def plan_prefetch(ep: Epilogue, fusion: Fusion, kloop: KLoop) -> Epilogue:
    """``ep`` with the residual's L2 prefetch (``Epilogue.prefetch``) when the plan fuses a residual,
    ``PREFETCH_AHEAD`` k-tiles before the end of each tile's k-loop (at the first k-tile of a short
    loop); plans without a residual are unchanged (so is their code)."""
    if not fusion.residual:
        return ep
    return attrs.evolve(ep, prefetch="prefetch.global.L2", prefetch_at=max(0, kloop.k_tiles - PREFETCH_AHEAD))


RESIDUAL_PAD = 8
"""Elements of padding per row of the residual in shared memory (``Epilogue.residual_pitch``): 16 bytes,
so a row stays 16-byte aligned for ``cp.async`` and the eight rows of a warp's pair load fall in eight
different groups of four banks."""


def plan_residual_stage(ep: Epilogue, fusion: Fusion, cfg: GemmConfig, kloop: KLoop, out_bytes: int) -> Epilogue:
    """``ep`` with the residual through shared memory (``Epilogue.residual_rows``) when the config asks
    for it (``GemmConfig.residual_stage``) and it applies: a fused residual read by pairs (16-bit C, N
    even), tiles that never cross C's edge, one tile per CTA and no K split (the stages freed in the last
    k-tiles hold it; the persistent kernel fills them with its next tile), and ``block_m`` cut into at most
    ``stages - 1`` parts of whole warp rows, each fitting one stage. It replaces the epilogue's global loads
    of the residual (4-byte pairs, half of every 32-byte sector, after the k-loop) by 16-byte copies
    overlapped with the last k-tiles, at the price of a CTA barrier before the epilogue (no warp starts
    its epilogue before the slowest finishes its mma); otherwise ``ep`` is unchanged (so is the code)."""
    if not (cfg.residual_stage and fusion.residual and ep.vector == 2 and ep.convert is not None and not ep.masked
            and kloop.form == "unrolled" and cfg.split_k == 1):
        return ep
    pitch = cfg.block_n + RESIDUAL_PAD
    stage_bytes = (cfg.block_m + cfg.block_n) * cfg.block_k * 2
    for parts in range(1, cfg.stages):
        rows = cfg.block_m // parts
        if cfg.block_m % parts == 0 and rows % cfg.warp_m == 0 and rows * pitch * out_bytes <= stage_bytes:
            return attrs.evolve(ep, residual_rows=rows, residual_first=kloop.k_tiles - cfg.stages + 1,
                                residual_pitch=pitch)
    return ep


def _store_epilogue(M: Extent, N: int, ot: str, cfg: GemmConfig) -> Epilogue:
    masked = not divides(M, cfg.block_m) or not divides(N, cfg.block_n)
    short = _short_out(ot)
    if N % 2 == 0:
        if ot == "float32":
            return Epilogue(ot, (), 2, "st.global.v2.f32", masked, 8)
        return Epilogue(ot, (EpilogueOp("convert", f"cvt.rn.{short}x2.f32", "uint32"),), 2, "st.global.b32", masked, 4)
    if ot == "float32":
        return Epilogue(ot, (), 1, "st.global.f32", True, 4)
    return Epilogue(ot, (EpilogueOp("convert", f"cvt.rn.{short}.f32", "uint16"),), 1, "st.global.b16", True, 2)


@attrs.frozen
class GemmPlan(PlanRecord, family="gemm"):
    """The whole kernel for one static problem: what ``kernels.sm80.gemm_emit.emit`` turns into TIRx."""

    M: Extent
    N: int
    K: int
    dtype: str
    """TIR dtype of A and B."""
    layout: str
    """Storage layout (``nn``, ``nt``, ``tn``, ``tt``)."""
    config: GemmConfig
    """The tiling asked for."""
    tiling: Tiling
    grid: GridPlan
    a: OperandPlan
    b: OperandPlan
    mma_instr: str
    """``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32``."""
    stage_elems: int
    """Elements of one pipeline stage (A tile then B tile)."""
    smem_elems: int
    """Elements of dynamic shared memory (``stages * stage_elems``)."""
    kloop: KLoop
    epilogue: Epilogue
    params: tuple[Param, ...]
    """The kernel's parameters in signature order: A, B, C, then with a K split the f32 workspace
    ``W`` (``[split_k, M, N]`` ordered, ``[1, M, N]`` atomic) and the ticket counters ``S`` (one
    ``uint32`` per output tile), both zero before the first launch and left zero by every launch
    (the fused epilogue's inputs come after C, before ``W``: ``Fusion.params``, in
    ``kernels.gemm.epilogue.PARAM_ORDER``)."""
    fusion: Fusion = Fusion()
    """What the epilogue fuses after the GEMM (``kernels.gemm.epilogue``: scales, bias, activation,
    residual; ``Epilogue.fuse`` applies it); ``Fusion()`` fuses nothing."""
    dynamic_m: MBucket | None = None
    """Dynamic M: the bucket of M values the kernel serves (``M`` is then the TIR variable ``M``, bound at
    launch from A's and C's shapes, every load and store along M is masked, and ``W`` and ``S`` are
    sized for the bucket's largest M); None: M is static."""


def plan_record(p) -> dict:
    """A plan as plain JSON data: every record a dict of its fields, tuples as lists. Two plans give
    the same record exactly when every field is equal (the build-cache key, ``kernels.sm80.gemm.build``)."""
    if attrs.has(type(p)):
        return {f.name: plan_record(getattr(p, f.name)) for f in attrs.fields(type(p))}
    if is_dataclass(p):
        return {k: plan_record(v) for k, v in asdict(p).items()}
    if isinstance(p, tuple | list):
        return [plan_record(v) for v in p]
    return extent_record(p)


# ----------------------------------------------------------------------------------------------
# The cost model (docs/cuda_gemm.md, "Plans for every M")
# ----------------------------------------------------------------------------------------------

H200_SMS = 132


@attrs.frozen
class Device:
    """What the cost model knows of a GPU (defaults: the H200, mma.sync dense 16-bit). The rates
    below ``sms`` were fitted to H200 measurements at M = 64 and 128: the sweep of 400 tilings, then
    ``pairs_s`` on the second run, then refitted pooled with the sweep of 2026-12-02; the ``decode_*``
    fields to that sweep's decode configs at M = 1 and 16 (``benchmarks/cost_model_fit.py``,
    docs/cuda_gemm.md "Plans for every M" and "The decode kernel"); ``sms`` scales everything that is
    per SM."""

    sms: int = H200_SMS
    peak_flops: float = 590e12
    """mma.sync f16/bf16 FLOP/s of the whole GPU under the board's power cap (the register-only
    loop with changing operands: 589 TFLOP/s)."""
    hbm_bytes_s: float = 4.0e12
    """HBM bandwidth a GEMM gets right after the L2 flush of the timing method (the flush leaves
    the L2 full of dirty lines to write back): 4.0 TB/s fitted, of 4.8 on the datasheet."""
    l2_bytes_s: float = 12e12
    """L2 -> SM bandwidth of the whole GPU: every CTA's tile loads (A and B panels, re-reads
    included) pass it."""
    sm_bytes_s: float = 80e9
    """What one SM's loads can stream from L2 at most (bytes/s), however many are in flight."""
    latency_s: float = 1.5e-6
    """Loaded memory latency: an SM with ``c`` resident CTAs keeps ``c * (stages - 1)`` stages in
    flight, so it streams at most that many bytes per ``latency_s`` (Little's law): few, shallow
    CTAs cannot use the SM's share of the bandwidth."""
    smem_bytes_clk: float = 128.0
    """Shared-memory bytes per SM per clock: ldmatrix reads of the warp tiles and cp.async writes
    of the stages share it with the mma issue (narrow warp tiles read more per FLOP)."""
    issue_warps: int = 1
    """Warps an SM needs resident to issue its mma and ldmatrix at full rate (each warp's chain
    waits on its own results); with fewer the SM's issue time grows by ``issue_warps / warps``
    (refitted to 1 on 2026-12-02: the pooled measurements rank best with no such stretch)."""
    clock_hz: float = 1.7e9
    """SM clock under load (the power cap holds it at 1650-1695 MHz)."""
    wave_s: float = 1.0e-6
    """Fixed cost of one wave of CTAs on an SM (pipeline fill, epilogue)."""
    launch_s: float = 3.0e-6
    """Fixed cost of a launch (the kernel's start and drain)."""
    split_s: float = 5.0e-6
    """Extra fixed cost of the split-K epilogue (fence, ticket, the last CTA's gather)."""
    atomic_s: float = 7e10
    """Workspace elements per second of the element-wise reductions (``red.global.add.f32``, or
    the ordered ``st.global.f32``, and the last CTA's gather): each slice adds its whole tile, one
    element a thread-instruction."""
    roof_flops: float = 660e12
    roof_bytes_s: float = 4.8e12
    """The roofline's rates (issue 24's definition, ``benchmarks/llm_linear.py``): ``roofline_s`` =
    max(FLOPs / roof_flops, A + B + C bytes / roof_bytes_s)."""
    pairs_s: float = 1.5e11
    """Workspace elements per second of the ordered reduction by column pairs
    (``reduce_vector = 2``: plain ``st.global.v2.f32`` / ``ld.global.cg.v2.f32``, no read-modify-write
    in L2), fitted on the second H200 run (its split-K reductions set and tuned candidates)."""
    overlap: float = 0.3
    """Fraction of the shorter of an SM's load and mma-issue time that does not hide under the
    longer."""
    # the decode kernel's model (kernels.sm80.decode_plan.decode_estimate), fitted to the H200 sweep of 2026-12-02
    # (benchmarks/cost_model_fit.py --fit-decode: 16 shapes at M = 1 and 16, flush timing)
    decode_bytes_s: float = 4.5e12
    """HBM rate of the decode kernel's weight stream (fitted)."""
    decode_sm_bytes_s: float = 50e9
    """What one SM's decode CTAs stream at most (W and x rows through their cp.async pipelines)."""
    decode_latency_s: float = 0.75e-6
    """Little's law for the decode pipelines: an SM streams at most its CTAs' bytes in flight per this."""
    stream_ramp_s: float = 1e-6
    """The decode kernel's fixed cost beyond ``launch_s``: the first bytes' latency and the last CTAs' drain."""
    dirty_bytes: float = 30e6
    """HBM write-back that the timing's L2 flush (``runtime.cuda.bench_ms`` "flush": 256 MB zeroed, up to
    the 60 MB L2 left dirty) hands the timed kernel: a kernel reading fewer bytes evicts fewer (fitted)."""
    half_line: float = 1.15
    """Time factor of a decode plan whose warp instructions copy half lines (``line_copy`` off, or unroll 1:
    8 rows x 64 bytes; fitted: the same config with and without ``line_copy`` measured 1.10x on average
    over 176 pairs, unroll 1 slower still)."""
    search_s: float = 0.26e-6
    """One dependent load of a grouped CTA's search for its group (an L2 hit of the offsets): a CTA waits
    ``ceil(log2 G)`` of them (``Groups.search`` "binary") or ``ceil(G / threads)`` ("cta") before its
    first copy. Fitted to the H200 call of 2026-12-02 (h-gaps25): the CTA-wide search took 115 µs off the
    DeepSeek-V3-like prefill (7362 -> 7247 µs), 63 CTAs per SM each waiting 7 loads fewer."""
    regs: int = 65536
    smem: int = 227 * 1024


@attrs.frozen
class Estimate:
    """The cost model's figures for one tiling of one problem."""

    ctas: int
    """CTAs launched (output tiles times ``split_k``)."""
    per_sm: int
    """CTAs resident per SM (shared memory, registers, threads)."""
    waves: int
    """``ceil(ctas / (sms * per_sm))``."""
    tile_efficiency: float
    """Useful fraction of the issued MMA work (padded rows and columns, padded k-tiles)."""
    bytes: int
    """HBM traffic: A, B and C once, plus the split-K workspace traffic."""
    time_s: float
    """``max(compute, memory) + overlap * min(compute, memory) + waves * wave_s (+ split_s)``."""
    roofline_s: float
    """``max(flops / peak, (A + B + C) / bandwidth)``: the problem's roofline time."""

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_s / self.time_s


def _resident(cfg: GemmConfig, dev: Device) -> int:
    """CTAs resident per SM: shared memory, registers (64 + accumulators + fragments per thread, at
    most 255) and 2048 threads."""
    acc_regs = cfg.warp_m * cfg.warp_n // 32
    regs = min(255, 64 + acc_regs + (cfg.warp_m + cfg.warp_n) // 8)
    return max(1, min(dev.smem // cfg.smem_bytes(), dev.regs // (regs * cfg.threads), 2048 // cfg.threads, 32))


def _sm_time(cfg: GemmConfig, K: int, n_max: int, per_sm: int, dev: Device, rows: float | None = None) -> float:
    """The busiest SM's time: its ``n_max`` CTAs in waves of ``per_sm``; per wave the larger of its
    loads (the SM's bandwidth, or what its stages in flight allow, Little's law) and its mma issue
    (the SM's share of the peak, or its shared-memory traffic: ldmatrix reads plus cp.async writes),
    plus the fixed cost of a wave. ``rows``: CTAs that issue the mma for only that many rows (a short
    tile, ``GemmConfig.live_rows``): their loads are whole, their mma and the ldmatrix of their warps
    with rows (``ceil(rows / warp_m)`` warp rows) shrink."""
    c = min(per_sm, n_max)
    waves = ceil_div(n_max, per_sm)
    kt = cfg.slice_k_tiles(K)
    stage_bytes = (cfg.block_m + cfg.block_n) * cfg.block_k * 2
    bw = min(dev.sm_bytes_s, c * (cfg.stages - 1) * stage_bytes / dev.latency_s)
    load = c * kt * stage_bytes / bw
    live = cfg.block_m if rows is None else rows
    warps_live = cfg.warps_m if rows is None else min(cfg.warps_m, math.ceil(rows / cfg.warp_m))
    flops = c * 2 * live * cfg.block_n * kt * cfg.block_k
    # every warp reads its warp_m rows of A and warp_n columns of B per k: the CTA's ldmatrix bytes
    ldmatrix = 2 * kt * cfg.block_k * (cfg.warp_m * warps_live * cfg.warps_n + cfg.block_n * warps_live)
    smem = c * (ldmatrix + kt * stage_bytes) / (dev.smem_bytes_clk * dev.clock_hz)
    warps = c * cfg.warps_m * cfg.warps_n
    issue = max(flops / (dev.peak_flops / dev.sms), smem) * max(1.0, dev.issue_warps / warps)
    return waves * (max(load, issue) + dev.overlap * min(load, issue) + dev.wave_s)


def estimate(M: int, N: int, K: int, cfg: GemmConfig, out_bytes: int = 2, dev: Device = Device(),
             groups: int = 0) -> Estimate:
    """The cost model (docs/cuda_gemm.md, "Plans for every M"): the busiest SM's CTAs (``_sm_time``),
    bounded below by HBM traffic (A, B, C once) and the L2 -> SM traffic of every CTA's panels,
    plus the split-K reduction (the workspace traffic at ``atomic_s`` or ``pairs_s``) and fixed costs.
    ``groups`` > 0: a grouped GEMM of that many groups of ``M`` rows each, each with its own weights
    (``kernels.gemm.grouped``: ``expected_row_tiles`` row tiles per group)."""
    n = max(groups, 1)
    gm = math.ceil(groups * expected_row_tiles(M, cfg.block_m)) if groups else ceil_div(M, cfg.block_m)
    gn = ceil_div(N, cfg.block_n)
    ctas = gm * gn * cfg.split_k
    per_sm = _resident(cfg, dev)
    waves = ceil_div(ctas, dev.sms * per_sm)
    k_issued = cfg.slice_k_tiles(K) * cfg.block_k * cfg.split_k
    issued = 2 * gm * cfg.block_m * gn * cfg.block_n * k_issued
    short = groups and cfg.live_rows
    if short:  # each group's last row tile short (kernels.gemm.grouped.tail_rows), the others full
        issued = 2 * groups * gn * k_issued * cfg.block_n * (
            (expected_row_tiles(M, cfg.block_m) - 1) * cfg.block_m + tail_rows(M, cfg.block_m))
    flops = 2 * n * M * N * K
    base_bytes = n * (2 * (M * K + N * K) + out_bytes * M * N)
    # the workspace is written by every slice and read once by the last CTA
    work = 4 * n * M * N * (cfg.split_k + 1) if cfg.split_k > 1 else 0
    stage_bytes = (cfg.block_m + cfg.block_n) * cfg.block_k * 2
    loads = ctas * cfg.slice_k_tiles(K) * stage_bytes
    if short:
        full = ctas - groups * gn
        sm = (_sm_time(cfg, K, ceil_div(full, dev.sms), per_sm, dev) if full > 0 else 0.0) + _sm_time(
            cfg, K, ceil_div(groups * gn, dev.sms), per_sm, dev, tail_rows(M, cfg.block_m))
    else:
        sm = _sm_time(cfg, K, ceil_div(ctas, dev.sms), per_sm, dev)
    memory = max((base_bytes + work) / dev.hbm_bytes_s, loads / dev.l2_bytes_s)
    split = 0.0
    if cfg.split_k > 1:  # every slice adds its tile, the last CTA reads and clears it
        rate = dev.pairs_s if cfg.reduce_vector == 2 and cfg.reduction == "ordered" else dev.atomic_s
        split = dev.split_s + (cfg.split_k + 2) * gm * cfg.block_m * gn * cfg.block_n / rate
    sm += _search_s(M, N, cfg, groups, per_sm, dev) if groups else 0.0
    time = max(sm, memory) + split + dev.launch_s
    roof = max(flops / dev.roof_flops, base_bytes / dev.roof_bytes_s)
    return Estimate(ctas, per_sm, waves, flops / issued, base_bytes + work, time, roof)


def _search_s(M: int, N: int, cfg: GemmConfig, groups: int, per_sm: int, dev: Device) -> float:
    """A grouped GEMM's searches on the busiest SM: every launched CTA (``Groups.row_tiles`` of ``groups``
    x ``M`` rows, those without rows included) waits its search's dependent loads (``Device.search_s``
    each: ``ceil(log2 G)`` for the binary search, ``ceil(G / threads)`` for the CTA-wide one) before its
    first copy, hidden only by the SM's other resident CTAs (``per_sm``)."""
    grouping = Groups(groups, cfg.block_m, MBucket(1, 1), cfg.group_search)
    launched = grouping.row_tiles(groups * M) * ceil_div(N, cfg.block_n)
    loads = max(1, grouping.search_loads(cfg.threads))  # G = 1: the group's offsets, one load
    return ceil_div(launched, dev.sms) * loads * dev.search_s / per_sm


SMALL_M = 256
"""Below this M (fewer than two 128-row tiles) the planner weighs the small-M tilings and split-K;
from it on it keeps ``default_config`` (the tuned big-M kernels, pinned by the golden digests)."""


PIPELINES = ((64, 4), (128, 3), (128, 4))
"""(block_k, stages) of the small-M candidates: the default 4 x 64, a deeper k-tile of 3 stages
(twice the bytes per stage and half the barriers: Triton's 32x64x128 / 3 stages, the fastest tiling
of the first H200 sweep on 6 of its 16 shapes) and of 4 stages (16x64x128, 32x128x128 and 64x128x128
with 4 stages led the 2026-12-02 sweep at M = 16-128); those whose shared memory does not fit are
dropped."""


def candidates(M: int, N: int, K: int, dtype: str = "f16") -> list[GemmConfig]:
    """The tilings the planner weighs: ``default_config`` and, below ``SMALL_M``, 16/32/64/128-row
    tiles (one 16-row mma per warp at 16 rows) over 64/128/256 columns and the ``PIPELINES``, each
    with K split in 1..16 slices of at least two k-tiles."""
    base = default_config(dtype, M, N)
    if M >= SMALL_M:
        return [base]
    out = [base]
    for bm, wm in ((16, 1), (32, 1), (64, 2), (128, 2)):
        if bm > 2 * max(16, M):
            continue
        for bn in (64, 128, 256):
            for bk, stages in PIPELINES:
                cfg = replace(base, block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=4, stages=stages)
                if cfg.smem_bytes() > 227 * 1024:
                    continue
                kt = math.ceil(K / cfg.block_k)
                for split in (1, 2, 3, 4, 6, 8, 12, 16):
                    if split > 1 and kt < 2 * split:
                        break
                    out.append(replace(cfg, split_k=split))
                    if split > 1 and N % 2 == 0:  # the ordered reduction by column pairs
                        out.append(replace(cfg, split_k=split, reduction="ordered", reduce_vector=2))
    return out


def grouped_candidates(M: int, N: int, K: int, dtype: str, groups: int) -> list[GemmConfig]:
    """The tilings a grouped GEMM of ``groups`` groups of ``M`` rows weighs: ``default_config`` of the
    whole problem, then the small-M tilings of ``candidates`` (below ``SMALL_M`` rows per group),
    without a K split (a group's rows are known only on the device); then all of them with the CTA-wide
    group search (``GemmConfig.group_search``), ranked by the same ``estimate``. Short tiles
    (``GemmConfig.live_rows``) are not offered: measured slower on the H200 (docs/grouped_gemm.md,
    "Short tiles"), though ``estimate`` ranks them ahead."""
    small = candidates(min(M, SMALL_M - 1), N, K, dtype)
    pool = [default_config(dtype, groups * M, N)] + [cfg for cfg in small if cfg.split_k == 1]
    return pool + [replace(cfg, group_search="cta") for cfg in pool]


def choose_config(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
                  sms: int = H200_SMS, groups: int = 0) -> GemmConfig:
    """The planner's choice: the candidate (``candidates``) of least estimated time
    (``estimate`` on a GPU of ``sms`` SMs) that plans for this problem; ties keep the earlier
    candidate (the default first). ``groups`` > 0: a grouped GEMM of that many groups of ``M``
    rows each (``grouped_candidates``, ``estimate`` with ``groups``)."""
    dev = Device(sms=sms)
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    pool = grouped_candidates(M, N, K, dtype, groups) if groups else candidates(M, N, K, dtype)
    scored = sorted(enumerate(pool), key=lambda ic: (estimate(M, N, K, ic[1], ob, dev, groups).time_s, ic[0]))
    for _, cfg in scored:
        try:
            cfg.check()
            make_operands(M, N, K, layout, cfg)
        except ValueError:
            continue
        return cfg
    return default_config(dtype, M, N)


def plan_summary(p: GemmPlan, sms: int = H200_SMS) -> dict:
    """The chosen plan as one JSON object (``--emit config``): the tiling, ``split_k``, the grid, the
    fused epilogue (``fusion``: the ``Fusion`` fields; ``epilogue``: its one-line description) and the
    cost model's estimate (a grouped plan's at its rows per group: ``Groups.summary``)."""
    cfg = p.config
    ob = 4 if p.epilogue.out_dtype == "float32" else 2
    g = p.grid.grouping
    if g is None:
        est, where = estimate(planned_m(p.dynamic_m or p.M), p.N, p.K, cfg, ob, Device(sms=sms)), bucket_summary(p.dynamic_m)
    else:
        est, where = estimate(g.rows.representative, p.N, p.K, cfg, ob, Device(sms=sms), g.count), g.summary()
    return dict(M=extent_record(p.M), **where, N=p.N, K=p.K, dtype=p.dtype, layout=p.layout, out_dtype=p.epilogue.out_dtype,
                block_m=cfg.block_m, block_n=cfg.block_n, block_k=cfg.block_k, warps_m=cfg.warps_m,
                warps_n=cfg.warps_n, stages=cfg.stages, split_k=cfg.split_k, reduction=cfg.reduction,
                reduce_vector=cfg.reduce_vector, fusion=p.fusion.as_dict(), epilogue=p.fusion.describe(),
                launched_ctas=p.grid.ctas, k_tiles_per_slice=p.kloop.k_tiles, kloop=p.kloop.form, sms=sms,
                waves=est.waves, tile_efficiency=round(est.tile_efficiency, 4),
                estimated_us=round(est.time_s * 1e6, 3), roofline_us=round(est.roofline_s * 1e6, 3),
                roofline_fraction=round(est.roofline_fraction, 4))


# ----------------------------------------------------------------------------------------------
# The planner
# ----------------------------------------------------------------------------------------------


def ldmatrix_view(op: OperandTile, k_steps: int, repeats: int) -> tuple[tuple[int, int], ...]:
    """(extent, stride) in b32 words of the (k-step, repeat, matrix hi, matrix lo, row, word)
    ldmatrix source view of one warp's slice. Matrix j = 2 * hi + lo covers, for A, (k half hi,
    m half lo); for B, (n half hi, k half lo) -- the mma fragment order."""
    rw = op.cols // 2
    if op.name == "A" and not op.trans:  # rows m, cols k
        it = [(k_steps, 8), (repeats, 16 * rw), (2, 4), (2, 8 * rw), (8, rw), (4, 1)]
    elif op.name == "A":  # rows k, cols m
        it = [(k_steps, 16 * rw), (repeats, 8), (2, 8 * rw), (2, 4), (8, rw), (4, 1)]
    elif not op.trans:  # B rows n, cols k
        it = [(k_steps, 8), (repeats, 16 * rw), (2, 8 * rw), (2, 4), (8, rw), (4, 1)]
    else:  # B rows k, cols n
        it = [(k_steps, 16 * rw), (repeats, 8), (2, 4), (2, 8 * rw), (8, rw), (4, 1)]
    return tuple(it)


def split_offset(d):
    """A word offset from the lane's swizzled address as (XOR part, add part): the chunk-index
    bits the swizzle reads (0x1C) and the rest. ``d`` is an int (the planner) or a TIR expression
    of loop variables (the emission of a per-repeat k-step as one loop)."""
    dx = d & 0x1C
    return dx, d - dx


def _ldmatrix_steps(op: OperandTile, view, lane: LaneAddress, warps: int):
    """The precomputed-address applies per k-step, or None when the swizzle does not split.

    For every ldmatrix a lane issues, the address is swz(x_lane + d), d a compile-time offset
    (k-step, repeat). When d splits into bits the XOR never reads (added) and bits of the chunk
    index the lane part never sets (XORed), swz(x + d) == (swz(x) ^ dx) + da: the lane computes
    swz(x) once, outside the k-loop, and each ldmatrix is one XOR/add (or a register+immediate
    address). The split is verified here for every warp and lane."""
    (k_steps, skk), (repeats, srep), *_ = view
    lanes = [lane.offset(w, ln) for w in range(warps) for ln in range(32)]
    swz = Swizzle.for_row(op.cols).words()
    steps = []
    for kk in range(k_steps):
        parts = []
        for rep in range(repeats):
            d = kk * skk + rep * srep
            dx, da = split_offset(d)
            if any((swz(x) ^ dx) + da != swz(x + d) for x in lanes):
                return None
            parts.append((dx, da))
        dxs = {dx for dx, _ in parts}
        strides = {parts[i + 1][1] - parts[i][1] for i in range(repeats - 1)}
        if len(dxs) == 1 and len(strides) <= 1:
            steps.append((LdmatrixGroup(0, repeats, parts[0][0], parts[0][1], strides.pop() if strides else 0),))
        else:
            steps.append(tuple(LdmatrixGroup(rep, 1, dx, da, 0) for rep, (dx, da) in enumerate(parts)))
    return tuple(steps)


def plan_ldmatrix(op: OperandTile, cfg: GemmConfig) -> LdmatrixPlan:
    """The ldmatrix plan of one operand (precomputed lane addresses when ``cfg.precompute``)."""
    k_steps = cfg.block_k // 16
    repeats = cfg.warp_m // 16 if op.name == "A" else cfg.warp_n // 16
    view = ldmatrix_view(op, k_steps, repeats)
    warp_elems = cfg.warp_m if op.name == "A" else cfg.warp_n
    warp_words = warp_elems // 2 if op.trans else warp_elems * op.cols // 2
    instr = LDMATRIX_TRANS if op.trans else LDMATRIX
    if cfg.precompute:
        _, _, (_, sjh), (_, sjl), (_, srow), _ = view
        lane = LaneAddress(warp_words, sjh, sjl, srow)
        steps = _ldmatrix_steps(op, view, lane, cfg.warps_m if op.name == "A" else cfg.warps_n)
        if steps is not None:
            return LdmatrixPlan(instr, op.trans, repeats, view, warp_words, lane, steps,
                                offset_in_view=op.name == "B" and op.trans)
    _check_warp_offsets_neutral(op, cfg)  # generic path: the warp offset goes into the view's base
    return LdmatrixPlan(instr, op.trans, repeats, view, warp_words, None)


def _thread_copy(op: OperandTile, masked: bool, instr: str) -> CopyPlan | None:
    """The per-thread copy view, or None when a repeat's swizzled offset is not the thread's first
    chunk's swizzled offset plus a constant (then the CTA-wide view is used)."""
    nt, cpr, v = op.threads, op.chunks_per_row, op.vec
    if cpr <= nt:
        reps_f = [(op.reps, nt // cpr, 0)]
    else:
        per = cpr // nt
        reps_f = [(op.reps // per, 1, 0), (per, 0, nt * v)]
    r0, c0 = op.chunk_coord(0, 0)
    deltas = [(r1 - r0, c1 - c0) for r1, c1 in (op.chunk_coord(0, rep) for rep in range(op.reps))]
    swz = Swizzle.for_row(op.cols)
    for tid in range(nt):
        r0, c0 = op.chunk_coord(tid, 0)
        base = swz(r0 * op.cols + c0)
        for rep, (dr, dc) in enumerate(deltas):
            r1, c1 = op.chunk_coord(tid, rep)
            if (r1 - r0, c1 - c0) != (dr, dc):
                return None
            if swz(r1 * op.cols + c1) != base + dr * op.cols + dc:
                return None
    return CopyPlan(
        "thread", instr, 2 * v, masked,
        thread_shape=tuple(e for e, _, _ in reps_f) + (v,),
        thread_global_strides=tuple(dr * op.gcols + dc for _, dr, dc in reps_f) + (1,),
        thread_shared_strides=tuple(dr * op.cols + dc for _, dr, dc in reps_f) + (1,),
        row_deltas=tuple(d[0] for d in deltas),
        col_deltas=tuple(d[1] for d in deltas),
    )


def clamp_rows(op: OperandTile) -> bool:
    """Whether an operand's copies clamp their rows (``CopyPlan.rows_clamped``) instead of masking them:
    its rows are a symbolic extent (a static M keeps the masked copy its kernels were pinned with,
    tests/kernels/sm80/test_cuda_gemm_golden.py) and its columns divide into tiles. The masked copy's predicates
    (row and column per chunk) were recomputed in the k-loop; clamped rows cost one register per
    chunk, bound before the loop."""
    return not is_static(op.grows) and divides(op.gcols, op.cols)


def plan_copy(op: OperandTile, cfg: GemmConfig) -> CopyPlan:
    """The global -> shared copy plan of one operand."""
    masked = not divides(op.grows, op.rows) or not divides(op.gcols, op.cols)
    if op.vec == 1:
        return CopyPlan("element", None, 2, masked)
    instr = "cp.async.cg.shared.global" if op.vec == 8 else "cp.async.ca.shared.global"
    fast = _thread_copy(op, masked, instr) if cfg.precompute else None
    if fast is not None and clamp_rows(op):
        fast = attrs.evolve(fast, masked=False, rows_clamped=True)
    return fast or CopyPlan("cta", instr, 2 * op.vec, masked,
                            global_iters=tuple(op.copy_iters(op.gcols)), shared_iters=tuple(op.copy_iters(op.cols)))


def plan_k_steps(cfg: GemmConfig, k_steps: int) -> tuple[KStep, ...]:
    """Per k-step: next fragments, copies ahead (A and B in different k-steps when there are at
    least three, so B still goes out before the commit at k-step ``k_steps - 2``), barrier."""
    split = cfg.split_loads and k_steps >= 3
    barrier = "after_mma" if cfg.sync_after_mma else "before_mma"
    steps = []
    for kk in range(k_steps):
        load = ("A" if split else "AB") if kk == 0 else ("B" if split and kk == 1 else None)
        last = kk == k_steps - 1
        steps.append(KStep(kk, 1 if last else 0, 0 if last else kk + 1, load,
                           barrier if kk == k_steps - 2 else None))
    return tuple(steps)


def mma_order(cfg: GemmConfig, mma_m: int, mma_n: int) -> tuple[tuple[int, int], ...] | None:
    """Issue order of a k-step's mma: serpentine reverses ni on odd mi, so one B fragment stays
    live across the turn; None for ``row`` (one apply over the whole warp tile)."""
    if cfg.mma_order == "row":
        return None
    return tuple((mi, ni) for mi in range(mma_m) for ni in (range(mma_n) if mi % 2 == 0 else reversed(range(mma_n))))


def plan(M: int | MBucket, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
         config: GemmConfig | None = None, sms: int = H200_SMS, fusion: Fusion = Fusion(), groups: int = 0) -> GemmPlan:
    """The plan of the GEMM ``C[M, N] = epilogue(op(A) @ op(B))`` for one static problem size, or for a
    bucket of M (``M`` an ``MBucket``: dynamic M, ``check_dynamic``; ``fusion``: the fused epilogue,
    ``kernels.gemm.epilogue``); without a ``config``, the cost model's choice for a GPU of ``sms`` SMs
    (``choose_config``, which does not weigh the fusion; a bucket's at its representative M).
    ``groups`` > 0: a grouped GEMM (``kernels.gemm.grouped``) of that many groups, ``M`` the bucket of rows
    per group the tiling is chosen for; the plan's M is then the run-time total T (``check_grouped``)."""
    dt = DTYPES[_short_dtype(dtype)]
    ot = OUT_DTYPES[_short_out(out_dtype)]
    layout = layout.lower()
    M, bucket, m_max = resolve_m(M, "kernels.sm80.gemm_plan.plan")
    rows = None
    if groups:
        rows, bucket, m_max = check_grouped(bucket, groups, N, K, layout)
    if min(m_max, N, K) < 1:
        raise ValueError("M, N, K must be positive")
    cfg = config or choose_config(planned_m(rows or bucket or M), N, K, dtype, layout, out_dtype, sms, groups)
    cfg.check()
    cfg = fit_stages(cfg, K)
    check_dynamic(bucket, layout, cfg)
    grouping = grouped_tiles(groups, rows, cfg)
    opa, opb = make_operands(M, N, K, layout, cfg)
    a_shape, b_shape = operand_shapes(M, N, K, layout)
    kt = cfg.slice_k_tiles(K)
    tiling = Tiling(cfg.block_m, cfg.block_n, cfg.block_k, cfg.warps_m, cfg.warps_n, cfg.threads, cfg.warp_m,
                    cfg.warp_n, cfg.warp_m // 16, cfg.warp_n // 8, cfg.block_k // 16, kt)
    k_padded = kt * cfg.split_k * cfg.block_k > ceil_div(K, cfg.block_k) * cfg.block_k  # slices past K

    def operand(op, shape, smem_offset):
        warp = cfg.warp_m if op.name == "A" else cfg.warp_n
        copy = plan_copy(op, cfg)
        if k_padded and not copy.masked:  # the last slices' k-tiles run past K: zero-filled
            copy = attrs.evolve(copy, masked=True, rows_clamped=False)
        return OperandPlan(op.name, shape, op, smem_offset, Swizzle.for_row(op.cols),
                           warp if op.trans else warp * op.cols, copy, plan_ldmatrix(op, cfg))

    a = operand(opa, a_shape, 0)
    b = operand(opb, b_shape, opa.elems)
    stage_elems = opa.elems + opb.elems

    persistent = cfg.persistent_for(K, layout)
    form = "persistent" if persistent else ("unrolled" if cfg.unrolled_for(K, layout) else "rolled")
    kloop = KLoop(form, cfg.stages, kt, kt // cfg.stages, kt % cfg.stages, plan_k_steps(cfg, tiling.k_steps),
                  mma_order(cfg, tiling.mma_m, tiling.mma_n))
    gm = grouping.row_tiles(M) if grouping else ceil_div(M, cfg.block_m)
    gn = ceil_div(N, cfg.block_n)
    tiles = gm * gn * cfg.split_k
    grid = GridPlan(gm, gn, max(1, min(cfg.group_m, gm)) if is_static(gm) else cfg.group_m, cfg.split_k, 1, tiles,
                    min(cfg.ctas, tiles) if persistent else tiles, persistent, grouping)

    ab = "f16" if dt == "float16" else "bf16"
    epilogue = plan_prefetch(plan_epilogue(M, N, ot, cfg, check_fusion(fusion)), fusion, kloop)
    epilogue = plan_residual_stage(epilogue, fusion, cfg, kloop, 2 if ot != "float32" else 4)
    params = (Param("A", a_shape, dt), Param("B", (groups, *b_shape) if groups else b_shape, dt), Param("C", (M, N), ot),
              *((Param(OFFSETS, (groups + 1,), "int32"),) if groups else ()), *fusion.params(M, N, ot, groups))
    if cfg.split_k > 1:
        slices = cfg.split_k if cfg.reduction == "ordered" else 1
        params += (Param("W", (slices, m_max, N), "float32"), Param("S", (ceil_div(m_max, cfg.block_m) * gn,), "uint32"))
    return GemmPlan(M, N, K, dt, layout, cfg, tiling, grid, a, b, MMA.format(t=ab),
                    stage_elems, cfg.stages * stage_elems, kloop, epilogue, params, fusion, bucket)


def fit_stages(cfg: GemmConfig, K: int) -> GemmConfig:
    """``cfg`` with its stage count capped at its k-tiles per K slice (and at least 2, the pipeline's
    least): a stage beyond the k-tiles is never loaded, only shared memory the last k-step's fragment
    prefetch reads unwritten. A checked ``cfg`` stays checked (fewer stages, less shared memory)."""
    return replace(cfg, stages=min(cfg.stages, max(2, cfg.slice_k_tiles(K))))


def replan_stages(cfg: GemmConfig, M: int, N: int, K: int, out_dtype: str = "f32", sms: int = H200_SMS) -> GemmConfig:
    """``cfg`` (a tiling given by hand) with the stage count the planner's rule gives it: of 2 to the
    deepest of ``PIPELINES``, each capped at the k-tiles (``fit_stages``), those whose shared memory
    fits, the least ``estimate`` (ties: deeper); ``cfg`` itself when none fits (``check`` says why)."""
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    fits = [fit_stages(replace(cfg, stages=s), K) for s in range(max(s for _, s in PIPELINES), 1, -1)]
    fits = [c for c in fits if c.smem_bytes() <= 227 * 1024]
    if not fits:
        return cfg
    return min(fits, key=lambda c: estimate(M, N, K, c, ob, Device(sms=sms)).time_s)


def check_grouped(rows, groups: int, N: int, K: int, layout: str) -> tuple[MBucket, MBucket, int]:
    """What a grouped plan needs (``kernels.gemm.grouped``): ``rows`` an ``MBucket`` (the rows per group
    the tiling is chosen for), a layout of ``kernels.gemm.grouped.LAYOUTS``, one group's weights within int32
    element offsets. Returns ``(rows, the bucket of T: 1 .. the largest T, the largest T)``: T, the
    run-time total, is the plan's dynamic M (``m_limit(K, N)``: int32 offsets of A and C)."""
    from ..gemm.grouped import check_layout as check_grouped_layout

    if not isinstance(rows, MBucket):
        raise TypeError(f"grouped CUDA GEMM: M must be the MBucket of rows per group the tiling is chosen for; got {rows!r}")
    check_grouped_layout(layout, "grouped CUDA GEMM")
    if N * K >= 2**31:
        raise ValueError(f"grouped CUDA GEMM: one group's weights ({N} x {K}) must have fewer than 2^31 elements "
                         "(the kernel indexes a group's weights with int32)")
    t_limit = m_limit(K, N)
    return rows, MBucket(1, t_limit), t_limit


def grouped_tiles(groups: int, rows: MBucket | None, cfg: GemmConfig) -> Groups | None:
    """The grid's ``Groups`` record of a grouped plan (None for one GEMM): no K split and no persistent
    CTAs (a CTA's rows are known only after its search)."""
    if not groups:
        if getattr(cfg, "live_rows", False) or getattr(cfg, "group_search", "binary") != "binary":
            raise ValueError("live_rows (short row tiles) and group_search are grouped GEMM options (a group's "
                             "last row tile, finding a CTA's group)")
        return None
    if cfg.split_k != 1 or cfg.ctas:
        raise ValueError(f"grouped CUDA GEMM: one CTA per output tile (split_k=1, ctas=0); got split_k={cfg.split_k}, "
                         f"ctas={cfg.ctas}")
    return Groups(groups, cfg.block_m, rows, cfg.group_search, cfg.live_rows)


def planned_m(M: int | MBucket) -> int:
    """The M a plan is chosen at: ``M``, or a bucket's representative M (``MBucket.representative``)."""
    return M.representative if isinstance(M, MBucket) else M


def bucket_summary(bucket: MBucket | None) -> dict:
    """``{"m_bucket": [lo, hi], "planned_at_m": ...}`` for a dynamic-M plan's summary (``--emit config``),
    ``{}`` for a static one."""
    return {} if bucket is None else {"m_bucket": [bucket.lo, bucket.hi], "planned_at_m": bucket.representative}


def check_dynamic(bucket: MBucket | None, layout: str, cfg) -> None:
    """What dynamic M (a ``bucket``) needs of a plan: A stored [M, K] (``kernels.gemm.dynamic_m.check_layout``) and
    no persistent CTAs (their tile loop is sized by a static tile count)."""
    if bucket is None:
        return
    check_layout(layout, "CUDA GEMM")
    if getattr(cfg, "ctas", 0):
        raise ValueError(f"dynamic M: persistent CTAs (ctas={cfg.ctas}) loop over a static tile count; use ctas=0")


def check_fusion(fusion) -> Fusion:
    """``fusion`` itself when it is a ``kernels.gemm.epilogue.Fusion``; a clear error otherwise."""
    if not isinstance(fusion, Fusion):
        raise TypeError(f"fusion must be a kernels.gemm.epilogue.Fusion (or use the build keywords bias=, activation=, "
                        f"residual=, row_scale=, col_scale=), not {type(fusion).__name__}")
    return fusion
