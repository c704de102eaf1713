"""What every part of the CUDA GEMM's emission shares: the records of the kernel's runtime values
(:class:`Thread`: buffers, register tiles and the warp's shared-memory bases; :class:`TileOrigin` /
:class:`NextTile`: the output tile being computed and, in the persistent kernel, the next one), the
layouts of fragments, accumulators and C tiles, and the address helpers (plain Python over the plan,
called while the macros are parsed).
Part of the CUDA GEMM's emission (``kernels.sm80.gemm_emit``, whose docstring tells the whole)."""

from __future__ import annotations

import attrs
from tvm_tirx.backend.cuda.axis import laneid
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.layout import S, TileLayout

from .gemm_plan import GemmPlan
from .gemm_plan_operands import OperandPlan


# ---- records of the kernel's runtime values -------------------------------------------------


@attrs.frozen
class Thread:
    """A thread's kernel-wide values: global tensors, shared memory, register tiles, warp bases."""

    A: object
    """Global A."""
    B: object
    """Global B."""
    SMH: object
    """Dynamic shared memory as halves (the cp.async destination)."""
    SMW: object
    """The same memory as b32 words (the ldmatrix source)."""
    acc: object
    """f32 accumulators of the warp tile (``mma_m * mma_n * 4`` per thread)."""
    af: object
    """A fragments, two k-step buffers."""
    bf: object
    """B fragments, two k-step buffers."""
    a_base: object
    """Elements from a stage's A tile to this warp's slice."""
    b_base: object
    """Elements from a stage's B tile to this warp's slice."""
    k0: object = None
    """Split-K: the first k-tile of this CTA's K slice (None without a split)."""
    R: object = None
    """Global residual, when the plan copies it into freed stages (``Epilogue.residual_rows``); else None."""
    live: object = None
    """A grouped short tile (``Groups.live_rows``): the tile's rows from this warp's first row on; the
    warp loads fragments only when it is positive and issues the mma of its 16-row tiles below it
    (``kstep``, ``mma_live``). None: every row (the k-loop of every other tile)."""


@attrs.frozen
class TileOrigin:
    """Origin of the output tile in C."""

    m0: object
    n0: object
    m_end: object = None
    """The end of the rows the tile may write (a grouped tile's: its group's end, ``Groups.origin``);
    None: M (``rows_end``)."""
    group: object = None
    """A grouped tile's group (its per-column fused inputs are that group's row); None: one GEMM."""


def rows_end(p: GemmPlan, tile: TileOrigin):
    """The rows of C below which ``tile`` stores: M, or its group's end."""
    return p.M if tile.m_end is None else tile.m_end


@attrs.frozen
class NextTile:
    """Persistent kernel: the CTA's next output tile, whose first k-tiles load past the current
    tile's end."""

    m0: object
    n0: object
    exists: object
    """Whether there is a next tile."""


# ---- layouts (plain Python over the plan) ---------------------------------------------------


def _tile(iters):
    return TileLayout(S[tuple(e for e, _ in iters) : tuple(s for _, s in iters)])


def ldmatrix_source(op: OperandPlan):
    """The generic ldmatrix source: the warp slice's view through the swizzle on b32 words."""
    return op.swizzle.words().layout(_tile(op.ldmatrix.view))


def fragment_ldmatrix(reps: int):
    """Register image of ``reps`` x4 ldmatrix results."""
    return TileLayout(S[(reps, 4, 8, 4) : (4, 1, 4 @ laneid, 1 @ laneid)])


def a_fragment_mma(mi: int):
    return TileLayout(S[(mi, 2, 8, 2, 4) : (4, 1, 4 @ laneid, 2, 1 @ laneid)])


def b_fragment_mma(ni: int):
    return TileLayout(S[(ni, 8, 2, 4) : (2, 4 @ laneid, 1, 1 @ laneid)])


def acc_mma(mi: int, ni: int):
    return TileLayout(S[(mi, ni, 2, 8, 4, 2) : (ni * 4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])


def acc_thread(mi: int, ni: int):
    return TileLayout(S[(mi, ni, 2, 2) : (ni * 4, 4, 2, 1)])


def out_thread(p: GemmPlan):
    mi, ni = p.tiling.mma_m, p.tiling.mma_n
    return TileLayout(S[(mi, ni, 2, 2) : (16 * p.N, 8, 8 * p.N, 1)])


def pack_thread(mi: int, ni: int):
    return TileLayout(S[(mi, ni, 2, 1) : (ni * 2, 2, 1, 1)])


def out_words(p: GemmPlan):
    mi, ni, N = p.tiling.mma_m, p.tiling.mma_n, p.N
    return TileLayout(S[(mi, ni, 2, 1) : (8 * N, 4, 4 * N, 1)])


# ---- address helpers (plain Python, called while the macros are parsed) ---------------------


def wide_index(p, name: str, index):
    """``index``, a leading index of parameter ``name`` (a row: what is multiplied by the leading
    dimension), in ``int64`` where the plan indexes ``name`` with 64-bit offsets (``p.offsets64``,
    ``kernels.gemm.offsets``), so its element offset is computed in 64 bits; else ``index`` itself, and
    the index arithmetic stays 32-bit (the code of every smaller problem)."""
    return int64_index(index) if name in getattr(p, "offsets64", ()) else index


def int64_index(index):
    """``index`` (an int or a TIR expression) as an ``int64`` index."""
    return T.int64(index) if isinstance(index, int) else T.Cast("int64", index)


def wide_at(p, name: str, *indices) -> list:
    """The indices of an element of parameter ``name``, every one but the last through ``wide_index``."""
    return [wide_index(p, name, i) for i in indices[:-1]] + [indices[-1]]


def known_stage(p: GemmPlan, stage) -> bool:
    """Whether a stage index is a constant once the k-loop unrolls: an int (the prologue), or, in the
    unrolled and persistent k-loops, an expression of the stage loop's variable (TIRx unrolls that
    loop after lowering). The rolled k-loop's ``kt % stages`` is a runtime value."""
    return isinstance(stage, int) or p.kloop.form != "rolled"


def view_offset(p: GemmPlan, op: OperandPlan, stage: int, g) -> int:
    """Words from the lane's ``lof ^ xor`` pointer to ldmatrix group ``g`` of a static ``stage``
    (``LdmatrixPlan.offset_in_view``): stage, tile and k-step offsets."""
    return (stage * p.stage_elems + op.smem_offset) // 2 + g.add


def warp_coord(p: GemmPlan, op: OperandPlan):
    """The warp's index along op's tile dimension."""
    return T.cuda.warp_id() % p.tiling.warps_m if op.name == "A" else T.cuda.warp_id() // p.tiling.warps_m


def copy_origin(p: GemmPlan, op: OperandPlan, kt, origin, tid):
    """This thread's first chunk of k-tile ``kt`` of the tile at ``origin`` along M (A) or N (B):
    (global row, global column, tile row, tile column)."""
    r0, c0 = op.tile.chunk_coord(tid, 0)
    trans, bk = op.tile.trans, p.tiling.block_k
    return ((kt * bk if trans else origin) + r0, (origin if trans else kt * bk) + c0, r0, c0)


def tile_origin(p: GemmPlan, t):
    """(m0, n0) of output tile t >= 0, decoded by the plan's grid (``GridPlan.decode``: ``group_m``
    block rows sweep N together, L2 reuse of A and B panels); bind the results to variables before
    use (a runtime divisor lowers to a let-expression)."""
    tile = p.grid.decode(t, T.truncdiv, T.truncmod, T.min)
    return tile.m * p.tiling.block_m, tile.n * p.tiling.block_n
