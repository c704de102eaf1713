"""The sm90 GEMM's plan: a ``Sm90Config`` (the tiling a user or the cost model picks) checked against the
problem and the GPU, then frozen into a ``Sm90Plan`` (the launch, the shared-memory ring, the parameters).

The kernel (``gemm_emit``): one producer warpgroup (its first thread issues the TMA loads, 128-byte
swizzle, into a ring of ``stages`` shared-memory stages with "full" / "empty" mbarriers) and
``consumers`` consumer warpgroups, each owning ``block_m / consumers`` rows of the ``block_m x block_n``
output tile (``wgmma.mma_async`` m64nNk16 from shared memory, N = ``block_n``); persistent over the
tiles in a grouped order (``group_m`` tile rows share their B panels in L2). The K tile is 64
elements (128 bytes of bf16/f16: one 128-byte swizzle atom per row, PTX ISA 9.7.9.28.1.2 / CUDA driver
API ``CU_TENSOR_MAP_SWIZZLE_128B``).

Scope of this target: layout ``nt`` (A ``[M, K]``, B ``[N, K]``, both K-major: what
wgmma reads without a transpose), f16/bf16 inputs or fp8 (e4m3: K tiles of 128 elements, the same 128 bytes a
row, ``wgmma`` m64nNk32; the ring addressed in 2-byte words for every input, ``SMEM_WORD``), f32/f16/bf16 C, the fused epilogue
(``kernels.gemm.epilogue``: its inputs are parameters after C, in ``PARAM_ORDER``), a K split (``split_k``: sm80's
design and workspace protocol, ``kernels.sm80.gemm_plan_epilogue``; below). ``K % 8 != 0`` (fp8: ``K % 16 != 0``)
is refused (a ``ContractError``): TMA needs every global stride but the innermost to be a multiple of 16 bytes
(CUDA driver API, ``cuTensorMapEncodeTiled``); so is a C of ``2^31`` elements or more (the epilogue's offsets
are 32-bit). Dynamic M (``M`` an ``MBucket``, ``kernels.gemm.dynamic_m``): ``M`` is the TIR variable bound at
launch, the host part encodes A's (and a TMA epilogue's C) tensor map with it, and the persistent grid is
``min(tiles, SMs)`` of the run-time tiles (``Sm90Plan.ctas`` an expression); C's ``2^31`` rule holds at the
bucket's largest M.

Split-K (``Sm90Config.split_k`` = S > 1): the persistent work units are the (K slice, tile) pairs, unit
``u`` taking slice ``u // tiles`` of tile ``u % tiles`` (``Sm90Plan.unit_of``), ``slice_tiles`` k-tiles each
(the last slice's past K are TMA boxes out of bounds: zero-filled). A consumer warpgroup's partial f32 sums
go to the workspace ``W`` (``[S, M, N]`` with ``reduction="ordered"``: one slice per K slice, summed in slice
order, deterministic; ``[1, M, N]`` with ``"atomic"``: ``red.global.add.f32``), then the warpgroup draws a
ticket ``S[tile * parts + part]`` (``atom.global.add.u32``); the last of the tile's S draws gathers the sum,
leaves ``W`` (atomic) and its ticket zero for the next launch, and runs the fused epilogue and C's store
once. ``W`` and ``S`` are sized at the largest M (a dynamic M's bucket's) and allocated zeroed by the runtime
(``runtime.cuda.WORKSPACE``), as sm80's are.

Hybrid (``Sm90Config.decomposition="hybrid"``, CUTLASS's and Triton's data-parallel + stream-K at tile
granularity): with ``tiles`` past a full wave of ``grid_cap`` CTAs (``config.ctas`` or the SMs), the first
``waves * grid_cap`` tiles (``Sm90Plan.dp_tiles``) run whole, one per CTA per wave, and each tile of the last,
partial wave runs in ``split_k`` K slices (``split_unit``: a tile's slices on neighbouring CTAs) reduced
through the same workspace and tickets (sized for every tile) as split-K's. Each CTA walks its ``waves`` whole
tiles, then its split units ``pid, pid + ctas, ...``; the ring positions count their k-tiles (``k_tiles``
each, then ``slice_tiles`` each) in both roles. With fewer tiles than a wave every tile is split (split-K);
with whole waves only, none is. Cooperative schedule only.

Clusters (``Sm90Config.cluster_m`` = 2; ``gemm_cluster``'s docstring, docs/sm90_gemm.md "Clusters"): the grid runs in
clusters of two CTAs on adjacent tile rows of one tile column (``Sm90Plan.tile_of``: unit ``2 q + rank``, the tile rows
rounded up to pairs, ``units`` and ``ctas`` even), each CTA loading its own A box and its share of the B box
(``b_shares``: half, or whole swizzle atoms as near half as they come, 88 + 80 of 168) multicast to both;
data-parallel only. Swapped (``swap_ab``) the pair is two tile columns (token tiles) of one tile row and the kernel's
A role (the weights) is multicast, half of its ``block_m`` rows a rank (``Sm90Config.multicast``).

Swap AB (``Sm90Config.swap_ab``; the cost model's choice at some static M, ``gemm_cost``): the kernel computes ``C^T = B A^T`` (CUTLASS's and TensorRT-LLM's
small-M GEMMs) so that a small M is wgmma's N. wgmma's M is 64 rows an instruction and its N any multiple of 8 up
to 256 (PTX ISA 9.7.17.2, the wgmma shapes): a small M padded to 64-row tiles wastes tensor work (M = 200 in
128-row tiles: 28 %), as N it wastes at most 7 columns. The kernel is the unswapped one over the problem ``(N, M,
K)``, its A role the weights ``B [N, K]`` and its B role the activations ``A [M, K]`` (both K-major: layout
``nt``); ``block_m`` x ``block_n`` tile C^T and ``tiles_m`` counts N's tiles; the accumulator holds ``C^T`` (rows
n, columns m) and the epilogue stores each element at ``C[m, n]`` with the fused steps read there: the register
epilogue (``gemm_store.store_transposed``: one ``shfl.xor`` pairs the lanes of C^T's rows n and n + 1, so that
each lane stores a column pair of one row of C, a warp's store 8 rows x 16 bytes as the unswapped kernel's; an odd N
one element a store). Dynamic M (an ``MBucket``): M's
tiles (``tiles_n = ceil(M / block_n)``) are counted at launch, A's tensor map (the kernel's B role) is encoded over
the run-time rows (TMA zero-fills the boxes' rows past M) and C^T's stores are masked at M. A K split works in the
kernel's coordinates: the workspace is ``W [slices, N, M]`` (M: the bucket's largest with a dynamic M), the tickets
count C^T's tiles, and the tile's last slice stores the sum transposed, as the unsplit kernel does.
"""

from __future__ import annotations

import attrs

from ...errors import ContractError
from ...isa.hopper_layout import TMA_SWIZZLE
from ..common import Param, PlanRecord, ceil_div, check_config
from ..gemm.dynamic_m import MBucket, resolve_m
from ..gemm.epilogue import TANH_OUTPUTS, Fusion
from . import gemm_shift as SHIFT
from .gemm_boxes import ATOM_ROWS, ROW_BYTES, b_shares, cluster_units, loaded_box, trim_boxes

DTYPES = {"f16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}
"""The inputs' TIR dtypes (``fp8``: OCP e4m3, ``wgmma`` ``.e4m3``)."""
ELEMENT_BYTES = {"f16": 2, "bf16": 2, "fp8": 1}
WGMMA_TYPES = {"f16": "f16", "bf16": "bf16", "fp8": "e4m3"}
"""The ``.atype`` / ``.btype`` of ``wgmma.mma_async`` for each input dtype (PTX ISA 9.7.17.5.2)."""
SMEM_WORD = "uint16"
"""The shared ring's unit for an input dtype of one byte: the ring is addressed in 2-byte words (``ROW_WORDS``
to a row) for every input dtype, so its layout in bytes, its offsets and the wgmma descriptors' steps are
those of f16/bf16 (TMA and wgmma see bytes)."""
OUT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}
OUT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
"""The bytes of an element of C (and of a fused residual, C's dtype) for each ``OUT_DTYPES`` entry."""
LAYOUTS = ("nt",)
BLOCK_K = 64
"""The shared ring's 2-byte words per K-tile row (``ROW_BYTES / 2``): the K tile of f16/bf16 in elements;
fp8's K tile is ``block_k("fp8")`` = 128 elements of the same 128 bytes."""
SWIZZLE_COLUMNS = 64
"""The columns of a 16-bit C in one 128-byte swizzle row: the TMA epilogue's staging blocks and store boxes."""
TAIL_SWIZZLE = {width // 2: width for width in TMA_SWIZZLE.values() if 0 < width < 2 * SWIZZLE_COLUMNS}
"""The swizzle (the bytes of its row: ``CU_TENSOR_MAP_SWIZZLE_64B``, ``_32B``) of the TMA epilogue's last, narrower
staging block by its columns (``block_n % SWIZZLE_COLUMNS``, any multiple of 8: ``Sm90Config.tail_columns``; a
16-bit C's row of a TMA swizzle width, ``isa.hopper_layout.TMA_SWIZZLE``, narrower than a whole block): a tail
of 32 columns (tiles of 96, 160, 224) is 64 bytes of a 16-bit C a row, one row of the 64-byte swizzle; of 16 columns
(80, 144, 208) one row of the 32-byte swizzle (a box's inner extent is at most the swizzle's bytes, CUDA driver API
``cuTensorMapEncodeTiled``); of 8, 24, 40, 48 or 56 columns (72, 168, 104, 176, ...) no swizzle has rows of its
bytes: staged unswizzled, rows of ``2 tail`` bytes (a multiple of 16: TMA's inner box rule). The block is stored
(and a TMA-read residual loaded) through a second tensor map of C (and of the residual) whose box is ``rows x
tail``, so that no box reaches past the tile's own columns (docs/sm90_gemm.md "Tile widths")."""
WGMMA_M = 64
"""The rows of one ``wgmma.mma_async`` (PTX ISA 9.7.17.2: m64nNk16 for f16/bf16, m64nNk32 for e4m3)."""
WGMMA_K = 16
"""One wgmma's K in 2-byte words (32 bytes of a row): 16 f16/bf16 elements; ``wgmma_k(dtype)`` in elements."""
WARPGROUP = 128
TMA_BOX_MAX = 256
"""The largest TMA box extent (CUDA driver API, ``cuTensorMapEncodeTiled``: boxDim[i] <= 256)."""
STRIDE_ALIGN_BYTES = 16
"""TMA's global-stride rule (``cuTensorMapEncodeTiled``: globalStrides[i] % 16 == 0)."""
PRODUCER_REGS = 40
CONSUMER_REGS = 232
"""``setmaxnreg`` targets of the producer and consumer warpgroups (PTX ISA 9.7.21.5; CUTLASS's sm90
warp-specialized kernels use the same pair: 128 x 40 + 256 x 232 <= 65536 registers per SM)."""
ACC_REGS_MAX = 128
"""The most f32 accumulators a consumer thread holds (``rows / 64 * block_n / 2``) within its 232."""
EPILOGUES = ("registers", "tma")
"""How the consumers write C: ``registers`` (stores from registers, predicated inside C) or ``tma`` (the
tile through a 128-byte-swizzled shared staging buffer and TMA stores, which clip at C's edges, so the
consumers go on to the next tile while the stores drain; 16-bit C with ``N % 8 == 0`` only). Both validated
on an H100; the cost model takes ``tma`` where it may (``gemm_cost.epilogues``): measured 5-20% faster."""
SCHEDULES = ("cooperative", "pingpong")
"""How the consumer warpgroups share the tiles: ``cooperative`` (each owns ``block_m / consumers`` rows of
every tile; their epilogue stalls the tensor cores) or ``pingpong`` (CUTLASS's name: each owns whole
``block_m x block_n`` tiles, alternate ones, and an ordering barrier lets one run its mainloop while the
other stores its C; two consumers only)."""
INT32_ELEMENTS = 2**31
"""The elements a 32-bit offset reaches: C's ``M N`` must stay below it (64-bit offsets: not yet)."""
REDUCTIONS = ("ordered", "atomic")
"""How a K split's partial sums meet (sm80's ``GemmConfig.reduction``): ``ordered`` (each slice stores its
partial into its own workspace slice; the tile's last warpgroup adds them in slice order: deterministic) or
``atomic`` (``red.global.add.f32`` into one slice: less workspace, the order of the additions unknown)."""
RESIDUAL_READS = ("global", "tma", "sliced", "prefetch", "preread", "early", "chunks")
"""How the consumers read a fused residual (``Sm90Config.residual_read``): ``global`` (each element from
global memory in the accumulator's fragment layout, in the epilogue: scattered 2-byte loads while the tensor
cores wait), ``tma`` (one TMA load of the warpgroup's residual rows into its staging buffer, issued halfway
through the tile's mainloop onto an mbarrier of its own, ``gemm_residual.residual_at``; the epilogue reads each pair
from the very 16-byte chunk it then writes C's pair to), ``sliced`` (``tma``'s loads cut into boxes of one swizzle
period, ``CORE_ROWS`` rows x 64 columns, a few issued per k-tile over the second half of the mainloop,
``gemm_residual.slice_window``: no burst of the whole tile's residual beside the ring's loads) or ``prefetch``
(``global``'s read, the tile's residual brought into L2 by the producer beforehand, one box of rows per k-tile
over the second half of its loads, ``cp.async.bulk.prefetch.tensor``: ``gemm_residual.prefetch_window``) or
``preread`` (``tma``'s load, its words read from the staging buffer into registers between the mainloop's last
wgmma issue and its retirement, under that wgmma, ``gemm_residual.preread``: the epilogue then reads no shared
memory; ``tma``'s epilogue reads each word just before it writes C's there, and the CUDA compiler keeps every read
behind the previous write, 32 dependent shared-memory round trips a tile at 128x256) or ``early`` (``global``'s loads of
a column pair into registers, issued in batches after the wgmma issue of the mainloop's last k-tiles, where the LSU is
idle: ``gemm_residual.load_early``; the epilogue reads registers only) or ``chunks`` (CUTLASS's staged C: the producer
TMA-loads the residual chunk by chunk into the chunked epilogue's two buffers, where D then goes, an mbarrier pair a
buffer: ``gemm_chunkres``; the 4-stage 128x256 ring kept).
``tma``, ``sliced`` and ``preread`` need the whole-tile TMA epilogue (``epilogue="tma"``, ``epilogue_tile=0``), the
cooperative schedule and no K split; ``prefetch`` and ``early`` no K split (and, ``plan``, ``prefetch`` C's rows in whole
16-byte chunks: ``N % 8 == 0``, TMA's stride rule; ``early`` a 16-bit C: ``check_fused``); ``chunks`` the chunked TMA
epilogue (``epilogue_tile``), the cooperative schedule, no K split, cluster or ``shift_last``."""
STAGED_RESIDUAL = ("tma", "sliced", "preread")
"""The ``RESIDUAL_READS`` that load the residual into the staging buffer (the epilogue reads it there)."""
RESIDUAL_CHOICE = "global"
"""The ``residual_read`` the cost model's configs take (``epilogue_choices``; a staged one only where the plan allows
it). ``global`` since stop 52: with its reads a column pair a load (``gemm_residual.residual_pairs``, stop 49) it ran
+7.4 % over the plain GEMM at 4096^3 on the H100 where ``tma`` (the choice before) ran +11.4 % and ``preread`` +11.3 %
in the same call (``benchmarks/sm90_gemm.py --epilogue``, which times every read: benchmarks/runs/
sm90_epilogue_h100_2026-12-07b.md); ``prefetch`` ran +7.3 %, ``global``'s read after an L2 prefetch, more machinery
for the same time. The H200 with this choice (2026-12-07, ``runs/sm90_epilogue_h200_2026-12-07d.md``): ``global`` +7.6 %,
``tma`` +11.1 %, ``early`` +14.8 %."""
WEIGH_CHUNK_RESIDUAL = False
"""Whether the cost model's configs with a chunked TMA epilogue (``epilogue_tile``) read a fused residual ``chunks``
(``epilogue_choices``). Off: not yet timed (GPU step ``stagedc``, ``benchmarks/sm90_power.py --epilogue``)."""
ACTIVATION_FORMS = ("ex2", "tanh")
"""How the epilogue evaluates silu / gelu (``Sm90Config.activation_form``; ``kernels.gemm.epilogue``'s module
docstring): ``ex2`` (``x / (1 + 2^y)``: ``ex2.approx`` and a reciprocal, two multi-function operations an
element) or ``tanh`` (``h + h tanh(w)``: one ``tanh.approx.f32``, PTX ISA 9.7.3.22; 16-bit C only, where the
family's error bound admits its error, ``epilogue.TANH_OUTPUTS``)."""
TILE_WALKS = ("gaps", "prefix", "windows")
"""How a grouped GEMM's persistent CTAs walk its row tiles (``Sm90Config.tile_walk``; ``kernels.sm90.grouped_plan``):
``gaps``, the ``Groups`` indices (``T // block_m + G`` row tiles a column, up to one without rows a group, each unit's
group found by a binary search over the offsets in global memory), or ``prefix``, the row tiles with rows only
(each CTA first sums every group's ``ceil(rows / block_m)`` into shared memory, then finds a unit's group by a
binary search over that prefix), or ``windows``, the prefix walk with each group's units in its own ``group_m``
windows (a window never spans two groups' weights; the unit's group by the search over the prefix times the tile
columns). The dense GEMM has one walk: ``gaps``, its default, names none."""
PREFIX_WORDS = 2
"""The shared int32 words the prefix walk keeps per group, plus one pair: the offsets ``[G + 1]`` and the row tiles
before each group ``[G + 1]`` (``grouped_plan.prefix_tiles``), after the ring and C's staging."""


def prefix_bytes(G: int, walk: str) -> int:
    """The shared bytes of ``G`` groups' prefix (or windows) walk (``PREFIX_WORDS`` int32 per group and one more pair;
    0 for the ``gaps`` walk)."""
    return PREFIX_WORDS * (G + 1) * 4 if walk != "gaps" else 0


DECOMPOSITIONS = ("data-parallel", "split-k", "hybrid")
"""How the work is cut into the persistent CTAs' units (``Sm90Config.decomposition``): ``data-parallel`` (one
unit per tile), ``split-k`` (every tile in ``split_k`` K slices, the partial sums reduced through the workspace)
or ``hybrid`` (CUTLASS's and Triton's data-parallel + stream-K at tile granularity: the full waves of tiles
unsplit, the tiles of the last, partial wave in ``split_k`` K slices each, so that their units fill the SMs; the
module docstring)."""
RASTERS = ("m", "n")
"""Which way the persistent order walks a group of tiles (``Sm90Config.raster``): down the group's tile rows (``m``,
M fastest) or along its tile columns (``n``, N fastest)."""
CLUSTER_MS = (1, 2)
"""``Sm90Config.cluster_m``: CTAs per thread-block cluster along M (PTX ISA 9.4 §5.1.2; CUTLASS's sm90 kernels' 2x1
cluster shape)."""
BARRIER_BYTES = 1024
"""Shared memory kept beside the ring (the mbarriers live in static shared memory; slack for them)."""


def block_k(dtype: str) -> int:
    """The K tile of ``dtype`` in elements: one ``ROW_BYTES`` row (64 f16/bf16, 128 fp8)."""
    return ROW_BYTES // ELEMENT_BYTES[dtype]


def wgmma_k(dtype: str) -> int:
    """One wgmma's K in elements: ``WGMMA_K`` words, 32 bytes (16 f16/bf16, 32 e4m3: PTX ISA 9.7.17.2)."""
    return WGMMA_K * 2 // ELEMENT_BYTES[dtype]


@attrs.frozen
class Sm90Config:
    """A tiling of the sm90 GEMM: ``block_m`` x ``block_n`` output tiles, ``stages`` ring stages of
    ``BLOCK_K``, ``consumers`` consumer warpgroups (1 or 2), ``group_m`` tile rows per group of the tile
    order, ``ctas`` persistent CTAs (0: one per SM, at most one per tile), how C is written
    (``EPILOGUES``), how the consumers share the tiles (``SCHEDULES``), the K slices ``split_k`` and how
    their partial sums meet (``REDUCTIONS``; the module docstring)."""

    block_m: int = 128
    block_n: int = 256
    stages: int = 4
    consumers: int = 2
    group_m: int = 8
    ctas: int = 0
    epilogue: str = "registers"
    schedule: str = "cooperative"
    split_k: int = 1
    reduction: str = "ordered"
    epilogue_tile: int = 0
    """``epilogue="tma"``: the columns C is staged in at a time. 0: the whole tile, one buffer per consumer
    warpgroup (its rows x ``block_n``); a multiple of ``SWIZZLE_COLUMNS`` that divides ``block_n`` and is
    smaller: chunks of that many columns through two buffers per warpgroup (CUTLASS's sm90 epilogue: a chunk
    is written while the previous one's TMA stores drain, ``cp.async.bulk.wait_group.read`` before a buffer
    is reused), so the staging is ``2 epilogue_tile / block_n`` of the tile and the ring gets the rest
    (128x256: 32 KB, not 64 KB, and four stages, not three)."""
    decomposition: str = attrs.field()
    """How the work is cut into units (``DECOMPOSITIONS``): by default ``split-k`` with ``split_k`` > 1, else
    ``data-parallel``; ``hybrid`` (with ``split_k`` > 1) splits only the tiles of the last, partial wave into
    ``split_k`` K slices (``Sm90Plan.waves``)."""

    @decomposition.default
    def _decomposition(self) -> str:
        return "split-k" if self.split_k > 1 else "data-parallel"

    residual_read: str = "global"
    """How a fused residual is read (``RESIDUAL_READS``): from global memory in the epilogue, or through TMA into
    the staging buffer during the mainloop (the cost model's choice where the plan allows it)."""

    activation_form: str = "ex2"
    """How silu / gelu are evaluated (``ACTIVATION_FORMS``): the cost model's configs take ``tanh`` for a 16-bit
    C (half the epilogue's multi-function operations)."""

    swap_ab: bool = False
    """Compute ``C^T = B A^T`` (the module docstring, "Swap AB"): the weights ``B`` are wgmma's A operand and the
    activations ``A`` its B operand, so a small M is wgmma's N (any multiple of 8) instead of padding 64-row
    instructions. ``block_m`` and ``block_n`` then tile ``C^T``: ``block_m`` over N (64 rows per wgmma per
    consumer warpgroup), ``block_n`` over M (``round_up(M, 8)`` up to 256). The cost model weighs it at a static M up
    to 256 (``gemm_cost.WEIGH_SWAP``) and in the dynamic-M buckets up to ``gemm_cost.SWAP_DYNAMIC_MAX_M``
    (``gemm_cost.WEIGH_SWAP_DYNAMIC``)."""

    cluster_m: int = 1
    """CTAs per thread-block cluster along M (``CLUSTER_MS``; docs/sm90_gemm.md "Clusters"): 2 runs the kernel in
    clusters of two CTAs that take two adjacent tiles of M (the token tiles) of one weight panel; each CTA's producer
    loads its own activations' box and its share of the weights' box (``b_shares``: half, or 88 + 80 rows of 168),
    multicast to both (``gemm_cluster``), so each weight byte leaves L2 once per cluster. Unswapped the pair is two tile
    rows of one tile column and the multicast operand the kernel's B role; with ``swap_ab`` two tile columns of one
    tile row and the kernel's A role (``multicast``)."""

    tile_walk: str = "gaps"
    """A grouped GEMM's walk over its row tiles (``TILE_WALKS``): ``prefix`` is the grouped cost model's choice (no
    gap tiles: each CTA's share of the units with rows is even); the dense GEMM runs ``gaps``."""

    raster: str = "m"
    """Which way the persistent order walks a group of tiles (``RASTERS``): ``m`` (groups of ``group_m`` tile rows,
    consecutive tiles down the group's rows, then the next tile column: the order of every kernel before issue 36) or
    ``n`` (groups of ``group_m`` tile columns, consecutive tiles along the group's columns, then the next tile row):
    CUTLASS's ``RasterOrder::AlongM`` / ``AlongN`` with a swizzle of ``group_m``. ``gemm_order`` models the DRAM bytes
    of each; the grouped kernel runs ``m``."""

    trim_loads: bool = False
    """Whether a tile that runs past its operand's rows (A's past M, B's past N: the last tile row or column) loads
    them in one box, the least of ``gemm_emit.trim_boxes`` (``ATOM_ROWS``, twice that, ...; the host part encodes a
    map of each) that holds the rows that exist, instead of the tile's box whose rows past the tensor TMA zero-fills;
    a whole tile loads its box as before.
    The rows not loaded keep the ring's stale data: they feed only C's rows past M (columns past N), never stored.
    Why: the zero-filled rows cost their time (H100, 2026-12-07: one 128x120 plan ran Phi-3-medium's o projection
    at M = 260 in 51.8 us, 124 rows of the last tile past M, and at M = 384 in 31.3; docs/sm90_gemm.md "Trimmed
    loads"). The unclustered dense kernel's (``cluster_m`` 1; not the grouped kernel's)."""

    shift_last: bool = False
    """Whether the last token tile row (unswapped A's rows, ``swap_ab`` the B role's: M's), where it runs past M and M
    is at least a tile, loads its whole box at ``M - block`` instead (no zero fill) and stores only its own rows
    (``gemm_shift``; with TMA stores that tile's from registers, ``gemm_epilogue.store_shifted``: a box store would
    rewrite the previous tile row's rows). Unclustered (a cluster's pair shares the weights' box)."""

    @property
    def pingpong(self) -> bool:
        return self.schedule == "pingpong"

    @property
    def multicast(self) -> str:
        """The kernel's operand role a cluster (``cluster_m`` > 1) multicasts: ``"B"`` (the pair is two tile rows of
        one tile column) or, with ``swap_ab``, ``"A"`` (two tile columns, the token tiles, of one tile row); the
        weights ``B [N, K]`` in both."""
        return "A" if self.swap_ab else "B"

    @property
    def multicast_rows(self) -> int:
        """The rows of the multicast operand's tile (``multicast``): ``block_n`` (B), ``block_m`` (A)."""
        return self.block_m if self.multicast == "A" else self.block_n

    @property
    def shares(self) -> tuple[int, ...]:
        """The rows of the multicast tile each CTA rank loads (``b_shares`` of ``multicast_rows``)."""
        return b_shares(self.multicast_rows, self.cluster_m)

    @property
    def rows(self) -> int:
        """The rows of the tile one consumer warpgroup owns (all of them in the ping-pong schedule)."""
        return self.block_m if self.pingpong else self.block_m // self.consumers

    @property
    def residual_staged(self) -> bool:
        """Whether the residual is loaded into the staging buffer (``STAGED_RESIDUAL``)."""
        return self.residual_read in STAGED_RESIDUAL

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    def stage_bytes(self, bytes_per: int = 2) -> int:
        return (self.block_m + self.block_n) * BLOCK_K * bytes_per

    @property
    def staging_columns(self) -> int:
        """The columns of one staging buffer: the tile's, or ``epilogue_tile``'s."""
        return self.epilogue_tile or self.block_n

    @property
    def staging_buffers(self) -> int:
        """Staging buffers per consumer warpgroup: one for the whole tile, two for chunks (``epilogue_tile``)."""
        return 2 if self.epilogue_tile else 1

    @property
    def tail_columns(self) -> int:
        """The columns of the TMA epilogue's last, narrower staging block (``block_n % SWIZZLE_COLUMNS``: 0 or a
        multiple of 8): staged after the whole blocks (``tail_swizzle``) and stored through C's tail map."""
        return self.block_n % SWIZZLE_COLUMNS if self.epilogue == "tma" else 0

    @property
    def tail_swizzle(self) -> int:
        """The swizzle of the tail block in bytes (``TAIL_SWIZZLE``; 0: unswizzled, or no tail)."""
        return TAIL_SWIZZLE.get(self.tail_columns, 0)

    def staging_bytes(self) -> int:
        """The shared staging buffers of C (``epilogue="tma"``: 16-bit C; per consumer warpgroup, of its rows:
        ``staging_buffers`` of ``staging_columns``), else 0."""
        if self.epilogue != "tma":
            return 0
        return self.consumers * self.staging_buffers * self.rows * self.staging_columns * 2

    def check(self, smem_bytes: int) -> None:
        """A ContractError naming the field that breaks a rule of the kernel or of ``smem_bytes``."""
        def bad(field, rule, expected, found):
            raise ContractError(f"sm90 GEMM config {field}: {rule}", operand=field, check="parameters",
                                expected=expected, found=found)
        if self.consumers not in (1, 2):
            bad("consumers", "one or two consumer warpgroups", "1 or 2", self.consumers)
        if self.schedule not in SCHEDULES or (self.pingpong and self.consumers != 2):
            bad("schedule", "how the consumer warpgroups share the tiles (ping-pong: two)", SCHEDULES, self.schedule)
        per = WGMMA_M * (1 if self.pingpong else self.consumers)
        if self.block_m % per or not 64 <= self.block_m <= 256:
            bad("block_m", "64..256 rows, 64 per wgmma per consumer warpgroup", f"a multiple of {per} in 64..256",
                self.block_m)
        if self.block_n % 8 or not 8 <= self.block_n <= TMA_BOX_MAX:
            bad("block_n", "wgmma N is a multiple of 8 up to 256", "8, 16, ..., 256", self.block_n)
        acc = self.rows // WGMMA_M * self.block_n // 2
        if acc > ACC_REGS_MAX:
            bad("block_m x block_n", "f32 accumulators per consumer thread", f"<= {ACC_REGS_MAX}", acc)
        if self.epilogue not in EPILOGUES:
            bad("epilogue", "how the consumers write C", EPILOGUES, self.epilogue)
        e = self.epilogue_tile
        if e != 0 and (not isinstance(e, int) or e < 0 or self.epilogue != "tma" or e % SWIZZLE_COLUMNS or self.block_n % e or e >= self.block_n):
            bad("epilogue_tile", f"the TMA epilogue's staged columns: 0 (the whole tile) or whole {SWIZZLE_COLUMNS}-column "
                "blocks dividing block_n, fewer than it", f"0, or with epilogue='tma' a multiple of {SWIZZLE_COLUMNS} "
                f"dividing and below block_n = {self.block_n}", (self.epilogue, e))
        room = smem_bytes - BARRIER_BYTES - self.staging_bytes()
        if self.stages < 2 or self.stages * self.stage_bytes() > room:
            bad("stages", "at least two ring stages within the SM's shared memory (beside C's staging buffer)",
                f"2..{room // self.stage_bytes()}", self.stages)
        if self.residual_read not in RESIDUAL_READS or (self.residual_staged and (
                self.epilogue != "tma" or self.epilogue_tile or self.pingpong or self.split_k != 1)) or (
                self.residual_read in ("prefetch", "early") and self.split_k != 1):
            bad("residual_read", f"how a fused residual is read: {STAGED_RESIDUAL} load it into the whole-tile staging "
                "buffer, 'prefetch' into L2, 'early' into registers once per tile", f"one of {RESIDUAL_READS}; "
                f"{STAGED_RESIDUAL} with epilogue='tma', epilogue_tile=0, the cooperative schedule, split_k=1; 'prefetch' "
                "and 'early' with split_k=1",
                self.named("residual_read", "epilogue", "epilogue_tile", "schedule", "split_k"))
        if self.residual_read == "chunks" and (self.epilogue != "tma" or not self.epilogue_tile or self.pingpong or
                                               self.split_k != 1 or self.cluster_m != 1 or self.shift_last):
            bad("residual_read", "'chunks' loads the residual into the chunked TMA epilogue's two buffers a warpgroup",
                "epilogue='tma', epilogue_tile > 0, the cooperative schedule, split_k=1, cluster_m=1, shift_last=False",
                self.named("residual_read", "epilogue", "epilogue_tile", "schedule", "split_k", "cluster_m", "shift_last"))
        if self.activation_form not in ACTIVATION_FORMS:
            bad("activation_form", "how silu and gelu are evaluated", ACTIVATION_FORMS, self.activation_form)
        if self.split_k < 1 or self.reduction not in REDUCTIONS:
            bad("split_k/reduction", "split_k >= 1 K slices, reduced 'ordered' or 'atomic'", f">= 1, {REDUCTIONS}",
                (self.split_k, self.reduction))
        d = self.decomposition
        if d not in DECOMPOSITIONS or (d == "data-parallel") != (self.split_k == 1):
            bad("decomposition", "data-parallel without a K split; split-k or hybrid with split_k >= 2 K slices",
                f"{DECOMPOSITIONS[0]!r} (split_k 1) or {DECOMPOSITIONS[1:]} (split_k >= 2)", (d, self.split_k))
        if d == "hybrid" and self.pingpong:
            bad("decomposition", "the hybrid decomposition runs the cooperative schedule", "schedule 'cooperative'",
                (d, self.schedule))
        if self.swap_ab and (self.epilogue != "registers" or self.residual_read != "global" or d == "hybrid"):
            bad("swap_ab", "the swapped kernel stores C^T from registers, its K split of every tile", "epilogue="
                "'registers', residual_read='global', decomposition not 'hybrid'", (self.epilogue, self.residual_read, d))
        if self.tile_walk not in TILE_WALKS:
            bad("tile_walk", "how a grouped GEMM's CTAs walk its row tiles", TILE_WALKS, repr(self.tile_walk))
        if self.raster not in RASTERS:
            bad("raster", "which way the persistent order walks a group of tiles", RASTERS, repr(self.raster))
        if self.group_m < 1 or self.ctas < 0:
            bad("group_m/ctas", "group_m >= 1 and ctas >= 0", ">= 1, >= 0", (self.group_m, self.ctas))
        self._check_cluster(bad)

    def named(self, *fields: str) -> str:
        """``field=value, ...`` of ``fields`` (a refusal's ``found``)."""
        return ", ".join(f"{f}={getattr(self, f)!r}" for f in fields)

    def _check_cluster(self, bad) -> None:
        if self.cluster_m not in CLUSTER_MS:
            bad("cluster_m", "CTAs per cluster along M", CLUSTER_MS, repr(self.cluster_m))
        if self.trim_loads and self.cluster_m != 1:
            bad("trim_loads", "the trimmed loads are the unclustered kernel's (a cluster's shares are whole boxes)",
                "cluster_m=1", self.named("trim_loads", "cluster_m"))
        if self.shift_last and self.cluster_m != 1:
            bad("shift_last", "the shifted last tile row is the unclustered kernel's (a cluster's pair shares the "
                "weights' box)", "cluster_m=1", self.named("shift_last", "cluster_m"))
        if self.cluster_m == 1:
            return
        if self.split_k != 1:
            bad("cluster_m", "a cluster of CTAs runs the data-parallel kernel (multicast: the kernel's "
                f"{self.multicast} role)", "split_k=1", self.named("split_k", "swap_ab", "multicast"))
        if 0 in self.shares:
            size = "block_m" if self.multicast == "A" else "block_n"
            bad("cluster_m", f"each CTA multicasts a share of the kernel's {self.multicast} tile (multicast="
                f"{self.multicast!r}) of whole 8-row 128-byte swizzle atoms, none empty",
                f"{size} >= {ATOM_ROWS * self.cluster_m}",
                self.named("cluster_m", size, "multicast"))
        if self.ctas % self.cluster_m:
            bad("cluster_m", "the persistent grid is whole clusters", f"ctas % {self.cluster_m} == 0 (0: the SMs')",
                self.named("cluster_m", "ctas"))


@attrs.frozen
class Sm90Plan(PlanRecord, family="gemm"):
    """The frozen plan of one static-M sm90 GEMM: the problem, its config, the launch and the parameters."""

    M: int
    N: int
    K: int
    dtype: str
    out_dtype: str
    config: Sm90Config
    tiles_m: int
    tiles_n: int
    k_tiles: int
    ctas: int
    smem_bytes: int
    params: tuple
    layout: str = "nt"
    fusion: Fusion = Fusion()
    dynamic_m: MBucket | None = None
    """Dynamic M: the bucket of M values the kernel serves (``M`` is then the TIR variable ``M``; ``tiles_m`` and
    ``ctas`` expressions of it); None: M is static."""
    grid_cap: int = 0
    """The most persistent CTAs (``config.ctas`` or the SMs): a wave of tiles, which a hybrid plan runs whole."""
    shallow_shift: bool = False
    """``shift_last`` only where the last token tile is shallow (``gemm_shift.shallow_only`` when planned: TMA stores
    under ``SHIFT_TMA = HALF``, the default; so a config passed with ``shift_last=True`` and TMA stores shifts only a
    shallow last tile too, unless ``SHIFT_TMA`` is ``True``): a field, so the build caches key it and the kernel does
    not read the flag."""

    @property
    def approx_tanh(self) -> bool:
        """Whether the kernel evaluates a fused silu / gelu by ``tanh.approx`` (``activation_form="tanh"``): its
        validation allows that error (``kernels.gemm.epilogue.error_bound``)."""
        return self.config.activation_form == "tanh" and self.fusion.activation in ("silu", "gelu")

    @property
    def tiles(self) -> int:
        return self.tiles_m * self.tiles_n

    @property
    def split(self) -> int:
        return self.config.split_k

    @property
    def hybrid(self) -> bool:
        return self.config.decomposition == "hybrid"

    @property
    def waves(self):
        """The full waves of tiles a hybrid plan runs unsplit (``tiles // grid_cap``); 0 otherwise."""
        return self.tiles // self.grid_cap if self.hybrid else 0

    @property
    def dp_tiles(self):
        """The tiles run unsplit by a hybrid plan (the first ``waves * grid_cap`` of the tile order: with a full
        wave the grid is ``grid_cap`` CTAs, each taking one tile of each wave)."""
        return self.waves * self.grid_cap

    @property
    def units(self):
        """The persistent work units: the tiles, times the K slices with a split (hybrid: of the tiles past
        ``dp_tiles`` only)."""
        if self.hybrid:
            return self.dp_tiles + self.split_units
        if self.config.cluster_m > 1:  # the tile rows (swap_ab: columns) rounded up to whole clusters (tile_of)
            return cluster_units(self.tiles_m, self.tiles_n, self.config.cluster_m, self.config.swap_ab)
        return self.tiles if self.split == 1 else self.tiles * self.split

    @property
    def slice_tiles(self) -> int:
        """The k-tiles of one work unit (all of them without a split)."""
        return ceil_div(self.k_tiles, self.split)

    @property
    def parts(self) -> int:
        """The tickets per tile: one per consumer warpgroup that owns rows of it (ping-pong: whole tiles)."""
        return 1 if self.config.pingpong else self.config.consumers

    def unit_of(self, u, div, mod):
        """(K slice, linear tile) of work unit ``u`` (the module docstring); hybrid: unit ``u < dp_tiles`` is
        tile ``u`` whole, then ``split_unit(u - dp_tiles)``."""
        if self.hybrid:
            return (0, u) if u < self.dp_tiles else self.split_unit(u - self.dp_tiles, div, mod)
        return (0, u) if self.split == 1 else (div(u, self.tiles), mod(u, self.tiles))

    @property
    def split_units(self):
        """A hybrid plan's split units: the ``split_k`` slices of each tile past ``dp_tiles``."""
        return (self.tiles - self.dp_tiles) * self.split

    def split_unit(self, v, div, mod):
        """(K slice, linear tile) of a hybrid plan's ``v``-th split unit: slice ``v % split_k`` of tile
        ``dp_tiles + v // split_k`` (a tile's slices on neighbouring CTAs, at once)."""
        return mod(v, self.split), self.dp_tiles + div(v, self.split)

    @property
    def staging(self) -> int:
        """The staging buffer's first element in the kernel's shared memory (after the ring)."""
        return self.config.stages * (self.config.block_m + self.config.block_n) * BLOCK_K

    @property
    def tir_dtype(self) -> str:
        return DTYPES[self.dtype]

    @property
    def smem_dtype(self) -> str:
        """The shared ring's element type: the inputs' for f16/bf16, 2-byte words for fp8 (``SMEM_WORD``)."""
        return self.tir_dtype if ELEMENT_BYTES[self.dtype] == 2 else SMEM_WORD

    @property
    def block_k(self) -> int:
        """The K tile in elements of the input dtype (``block_k``)."""
        return block_k(self.dtype)

    @property
    def tir_out(self) -> str:
        return OUT_DTYPES[self.out_dtype]

    def tile_of(self, t, div, mod, min_, tiles_m=None):
        """(tile row, tile column) of linear tile ``t`` in the grouped order (``grouped_index``): ``group_m`` tile rows
        at a time, column-major inside the group (``raster="m"``), or ``group_m`` tile columns at a time, row-major
        inside the group (``raster="n"``; ``div``/``mod``/``min_``: Python's or TIR's). With ``cluster_m`` = 2, ``t`` is
        unit ``2 q + rank``: rank ``rank``'s row of pair ``q`` of tile rows in that order over the pairs (``raster="m"``:
        ``group_m`` tile rows a group, in pairs; a pair's second row may lie past M: its loads are zeros, its stores
        clipped; ``tiles_m``: the tile rows, ``self.tiles_m`` by default, a run-time count for a grouped GEMM's prefix
        walk). With ``swap_ab`` the pair is two tile columns of one tile row (``swapped_pair``)."""
        cm = self.config.cluster_m
        tiles_m = self.tiles_m if tiles_m is None else tiles_m
        if cm > 1 and self.config.swap_ab:
            return self.swapped_pair(t, div, mod, min_, tiles_m)
        tiles_m = tiles_m if cm == 1 else ceil_div(tiles_m, cm)
        u = t if cm == 1 else div(t, cm)
        if self.config.raster == "n":
            col, row = grouped_index(u, self.tiles_n, tiles_m, self.config.group_m, div, mod, min_)
        else:
            g = self.config.group_m if cm == 1 else max(1, self.config.group_m // cm)
            row, col = grouped_index(u, tiles_m, self.tiles_n, g, div, mod, min_)
        return (row, col) if cm == 1 else (row * cm + mod(t, cm), col)

    def swapped_pair(self, t, div, mod, min_, tiles_m):
        """``tile_of`` of a swapped cluster: unit ``2 q + rank`` is rank's tile column (token tile) of pair ``q`` of
        tile columns, the pairs (the tile columns rounded up to pairs: a pair's second column may lie past M, its
        loads zeros, its stores masked) in the grouped order over (tile rows, pairs): ``raster="m"`` ``group_m`` tile
        rows a group, ``raster="n"`` ``group_m / 2`` pairs a group."""
        cm, g = self.config.cluster_m, self.config.group_m
        pairs, u = ceil_div(self.tiles_n, cm), div(t, cm)
        if self.config.raster == "n":
            pair, row = grouped_index(u, pairs, tiles_m, max(1, g // cm), div, mod, min_)
        else:
            row, pair = grouped_index(u, tiles_m, pairs, g, div, mod, min_)
        return row, pair * cm + mod(t, cm)


def grouped_index(u, grouped, other, g, div, mod, min_):
    """(index along the grouped dimension, index along the other) of unit ``u`` in the grouped order over a ``grouped``
    x ``other`` grid: groups of ``g`` indices of the grouped dimension (the last group what is left), inside a group the
    grouped index fastest, then the other (``Sm90Plan.tile_of``; ``gemm_order.wave_panels`` counts the same order)."""
    per_group = g * other
    first = div(u, per_group) * g
    rows = min_(grouped - first, g)
    inner = mod(u, per_group)
    return first + mod(inner, rows), div(inner, rows)


def check_problem(M, N, K, dtype, layout, out_dtype) -> None:
    """A ContractError naming the operand sm90 does not run (the module docstring: the scope)."""
    def bad(operand, rule, expected, found, check="parameters"):
        raise ContractError(f"sm90 GEMM {operand}: {rule}", operand=operand, check=check, expected=expected,
                            found=found)
    if dtype not in DTYPES:
        bad("dtype", "the sm90 GEMM runs f16, bf16 and fp8 (e4m3)", tuple(DTYPES), dtype, "dtype")
    if out_dtype not in OUT_DTYPES:
        bad("out_dtype", "C is f32, f16 or bf16", tuple(OUT_DTYPES), out_dtype, "dtype")
    if layout not in LAYOUTS:
        bad("layout", "both operands K-major (A [M, K], B [N, K]); the other layouts are not planned yet",
            LAYOUTS, layout, "layout")
    per = STRIDE_ALIGN_BYTES // ELEMENT_BYTES[dtype]
    if K % per:
        bad("K", f"TMA global strides are multiples of 16 bytes (cuTensorMapEncodeTiled): {dtype} rows of K "
            f"elements need K % {per} == 0", f"K % {per} == 0", K, "alignment")
    m_max = M.hi if isinstance(M, MBucket) else M  # dynamic M: the bucket's largest
    if isinstance(m_max, bool) or not isinstance(m_max, int) or m_max < 1:
        bad("M", "a positive M, or an MBucket of M values (dynamic M)", "M >= 1", M, "shape")
    if m_max * N >= INT32_ELEMENTS:
        bad("C", "the epilogue addresses C (and an element-wise fused input) with 32-bit offsets",
            "M N < 2^31", f"M N = {m_max * N}", "shape")


def plan(M, N, K, dtype, layout, out_dtype, config: Sm90Config, sms: int, smem_bytes: int,
         fusion: Fusion = Fusion()) -> Sm90Plan:
    """Check the problem and ``config`` and freeze the plan (``sms``: the SMs the persistent grid fills;
    ``fusion``: the fused epilogue, whose inputs follow C in ``params``; ``M`` an ``MBucket``: dynamic M)."""
    check_problem(M, N, K, dtype, layout, out_dtype)
    M, bucket, _ = resolve_m(M, "kernels.sm90.gemm_plan.plan")
    check_config(config, (Sm90Config,), "sm90 GEMM config")
    config.check(smem_bytes)
    if config.tile_walk != "gaps":
        raise ContractError("sm90 GEMM config tile_walk: the prefix walk is a grouped GEMM's (its groups' row tiles)",
                            operand="tile_walk", check="parameters", expected="'gaps' (a dense GEMM)",
                            found=repr(config.tile_walk))
    if config.epilogue == "tma" and (out_dtype == "f32" or N % 8):
        raise ContractError("sm90 GEMM config epilogue: TMA stores of a 16-bit C whose rows are whole 16-byte "
                            "chunks", operand="epilogue", check="parameters", expected="f16/bf16 C, N % 8 == 0",
                            found=f"{out_dtype} C, N = {N}")
    check_fused(config, fusion, out_dtype)
    if config.residual_read == "prefetch" and N % 8:
        raise ContractError("sm90 GEMM config residual_read: 'prefetch' reads the residual through a tensor map, whose "
                            "row stride is whole 16-byte chunks", operand="residual_read", check="alignment",
                            expected="N % 8 == 0 or residual_read='global'", found=f"residual_read='prefetch', N = {N}")
    rows, cols = (N, M) if config.swap_ab else (M, N)  # the kernel's product: C^T with swap_ab
    tiles_m, tiles_n = ceil_div(rows, config.block_m), ceil_div(cols, config.block_n)
    k_tiles = ceil_div(K, block_k(dtype))
    check_split(config, k_tiles)
    units = tiles_m * tiles_n * config.split_k
    cap = config.ctas or sms
    if config.cluster_m > 1:  # whole clusters: the tile rows (swap_ab: columns) in pairs, the grid whole clusters
        units = cluster_units(tiles_m, tiles_n, config.cluster_m, config.swap_ab)
        cap = cap // config.cluster_m * config.cluster_m
    if config.decomposition == "hybrid":  # the full waves whole, the last wave's tiles split
        dp = tiles_m * tiles_n // cap * cap
        units = dp + (tiles_m * tiles_n - dp) * config.split_k
    ctas = min(units, cap) if bucket is None else _min(units, cap)
    params = (Param("A", (M, K), DTYPES[dtype]), Param("B", (N, K), DTYPES[dtype]),
              Param("C", (M, N), OUT_DTYPES[out_dtype]), *fusion.params(M, N, OUT_DTYPES[out_dtype]))
    if config.split_k > 1:  # sm80's workspace protocol (runtime.cuda.WORKSPACE), at the largest M
        m_max = M if bucket is None else bucket.hi
        slices = config.split_k if config.reduction == "ordered" else 1
        if slices * m_max * N >= INT32_ELEMENTS:  # the kernel addresses W with 32-bit offsets
            raise ContractError("sm90 GEMM config split_k: the split-K workspace W [slices, M, N] is addressed with "
                                "32-bit offsets", operand="split_k", check="parameters",
                                expected="slices * M * N < 2^31 (fewer slices, or reduction='atomic')",
                                found=f"{slices} * {m_max} * {N} = {slices * m_max * N}")
        parts = 1 if config.pingpong else config.consumers
        rows_max, cols_max = (N, m_max) if config.swap_ab else (m_max, N)  # the kernel's coordinates: C^T's with swap_ab
        params += (Param("W", (slices, rows_max, cols_max), "float32"),
                   Param("S", (ceil_div(rows_max, config.block_m) * ceil_div(cols_max, config.block_n) * parts,), "uint32"))
    return Sm90Plan(M, N, K, dtype, out_dtype, config, tiles_m, tiles_n, k_tiles, ctas,
                    config.stages * config.stage_bytes() + config.staging_bytes(), params, layout, fusion, bucket, cap,
                    SHIFT.shallow_only(config))


def check_fused(config: Sm90Config, fusion: Fusion, out_dtype: str) -> None:
    """A ContractError where ``config``'s epilogue choices do not fit the problem: ``residual_read="tma"``
    without a fused residual, ``"early"`` of an f32 C, ``activation_form="tanh"`` of an f32 C (its error is beyond
    f32's bound)."""
    if config.residual_read != "global" and not fusion.residual:
        raise ContractError(f"sm90 GEMM config residual_read: {config.residual_read!r} loads the fused residual",
                            operand="residual_read", check="parameters",
                            expected="Fusion(residual=True) or residual_read='global'",
                            found=f"residual_read={config.residual_read!r}, fusion {fusion.describe()}")
    if config.residual_read == "early" and out_dtype == "f32":
        raise ContractError("sm90 GEMM config residual_read: 'early' holds a 16-bit C's residual pairs in registers, "
                            "a word a pair", operand="residual_read", check="parameters",
                            expected="f16/bf16 C or residual_read='global'", found=f"residual_read='early', {out_dtype} C")
    if config.activation_form == "tanh" and out_dtype not in TANH_OUTPUTS:
        raise ContractError("sm90 GEMM config activation_form: tanh.approx's error is within a 16-bit C's bound only",
                            operand="activation_form", check="parameters", expected="f16/bf16 C or activation_form='ex2'",
                            found=f"activation_form='tanh', {out_dtype} C")


TRIM_LOADS = False
"""Whether the cost model's configs take ``Sm90Config.trim_loads`` (``planned_loads``). Off: timed through the torch
op (``benchmarks/torch_gemm.py --trim-loads off,on``, twelve projections; H200, 2026-12-07,
``runs/torch_gemm_trim_h200_2026-12-07d.md``) the one-box trim ran on / off 0.84x at M = 96, 0.91x at 200, 1.06x at 260,
0.92x at 300, 0.91x at 333, 0.94x at 600, 0.95x at 1200 and 3000 (geo-means): it wins only where nearly the whole
last tile row lies past M."""


def planned_loads(config: Sm90Config) -> Sm90Config:
    """``config`` with ``trim_loads`` where ``TRIM_LOADS`` and with ``shift_last`` where ``gemm_shift.SHIFT_LAST``, each
    where the config allows it (``cluster_m`` 1; shifted: the register epilogue, TMA stores too where ``SHIFT_TMA``)."""
    config = attrs.evolve(config, trim_loads=True) if TRIM_LOADS and config.cluster_m == 1 else config
    shift = SHIFT.SHIFT_LAST and SHIFT.allows(config.cluster_m, config.epilogue, config.residual_read)
    return attrs.evolve(config, shift_last=True) if shift else config


def epilogue_choices(config: Sm90Config, fusion: Fusion, out_dtype: str) -> Sm90Config:
    """``config`` with the fused epilogue's choices the cost model's configs take where the plan allows them:
    the residual read ``RESIDUAL_CHOICE`` of ``RESIDUAL_READS`` (a staged one only where the staging buffer
    allows it; ``chunks`` for a chunked TMA epilogue where ``WEIGH_CHUNK_RESIDUAL``), silu / gelu in the tanh form for a
    16-bit C (``ACTIVATION_FORMS``); a config that names its own residual read keeps it."""
    if fusion.activation in ("silu", "gelu") and out_dtype in TANH_OUTPUTS:
        config = attrs.evolve(config, activation_form="tanh")
    if not fusion.residual or config.residual_read != "global":
        return config
    if WEIGH_CHUNK_RESIDUAL and config.epilogue_tile and allows(config, "chunks"):
        return attrs.evolve(config, residual_read="chunks")
    # a staged read where allowed (whole-tile TMA stores of a 16-bit C: N % 8 == 0, as 'prefetch' needs)
    return attrs.evolve(config, residual_read=RESIDUAL_CHOICE) if allows(config, "tma") else config


def allows(config: Sm90Config, read: str) -> bool:
    """Whether ``config``'s rules allow ``residual_read=read`` (with its own shared memory: any)."""
    try:
        attrs.evolve(config, residual_read=read).check(10 ** 9)
    except ContractError:
        return False
    return True


def check_split(config: Sm90Config, k_tiles: int) -> None:
    """A ContractError unless every K slice of ``config.split_k`` has k-tiles of its own (the last may be
    shorter): ``(split_k - 1) * ceil(k_tiles / split_k) < k_tiles``."""
    per = ceil_div(k_tiles, config.split_k)
    if config.split_k > 1 and (config.split_k - 1) * per >= k_tiles:
        raise ContractError("sm90 GEMM config split_k: every K slice has k-tiles of its own", operand="split_k",
                            check="parameters", expected=f"split_k with (split_k - 1) * ceil({k_tiles} / split_k) "
                            f"< {k_tiles} k-tiles", found=config.split_k)


def _min(x, cap: int):
    """``min(x, cap)`` of a TIR expression (the run-time tiles of a dynamic M)."""
    from tvm_tirx import tirx

    return tirx.min(x, cap)


__all__ = ["ATOM_ROWS", "BLOCK_K", "trim_boxes", "loaded_box", "CLUSTER_MS", "b_shares", "cluster_units", "DECOMPOSITIONS", "DTYPES", "ELEMENT_BYTES", "ROW_BYTES", "TAIL_SWIZZLE", "WGMMA_TYPES", "block_k", "wgmma_k", "EPILOGUES", "LAYOUTS", "OUT_BYTES", "OUT_DTYPES", "REDUCTIONS", "ACTIVATION_FORMS", "RESIDUAL_READS", "SCHEDULES", "check_fused", "epilogue_choices", "planned_loads", "TRIM_LOADS", "check_split", "Sm90Config", "Sm90Plan", "check_problem", "plan", "RESIDUAL_CHOICE", "STAGED_RESIDUAL", "WEIGH_CHUNK_RESIDUAL", "TILE_WALKS", "RASTERS", "grouped_index", "PREFIX_WORDS", "prefix_bytes"]
