"""Emission of the CUDA GEMM: a :class:`~tvm_cdna4.kernels.sm80.gemm_plan.GemmPlan` to a TIRx PrimFunc.

Every decision is in the plan (``kernels.sm80.gemm_plan.plan``); the macros here only spell it in TIRx. ``emit``
writes ``main``'s signature from ``p.params`` (``signature_source``) around the body macro
``kernel``. Each macro takes the plan ``p`` and, for the kernel's runtime values, small records
built in ``kernel``: :class:`Thread` (the buffers, register tiles and the warp's shared-memory
bases, fixed for the whole kernel) and :class:`TileOrigin` / :class:`NextTile` (the output tile
being computed, decoded by ``GridPlan.decode``, and, in the persistent kernel, the next one the
pipeline runs on into). ``epilogue`` is the one epilogue stage: the plan's ``Epilogue.ops`` on the
accumulator tile, then ``store``; with a K split, ``split_epilogue`` first reduces the slices' partial
tiles through the workspace and a ticket (the ``"reduce"`` op), and the tile's last CTA runs it.

Variable names bound in the macros (``tid``, ``grow``, ``lof``, ...) name the CUDA variables;
``tests/kernels/sm80/test_cuda_gemm_golden.py`` pins the generated source.
"""

from __future__ import annotations

from types import SimpleNamespace

import attrs
import tvm_ffi
from tvm_tirx.backend.cuda.axis import laneid
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse
from tvm_tirx.tirx.layout import S, TileLayout

from ...tirx_private import transpile_once
from ..gemm import epilogue as fused
from .gemm_plan import GemmPlan, OperandPlan
from ..gemm.grouped import OFFSETS
from ..gemm.grouped_emit import find_group


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


# ---- layouts (plain Python over the plan) -------------------------------------------------------


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


# ---- address helpers (plain Python, called while the macros are parsed) --------------------------


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


# ---- global -> shared ---------------------------------------------------------------------------


def pick(values: tuple[int, ...], r):
    """``values[r]`` for an int ``r``; for a loop variable, a ``Select`` chain that folds to the
    same constant once the loop unrolls."""
    if isinstance(r, int):
        return values[r]
    out = values[-1]
    for i in range(len(values) - 2, -1, -1):
        out = T.Select(r == i, values[i], out)
    return out


@T.macro
def cp_one(op, sv, gv, r, grow, gcol):
    ok = T.and_(grow + pick(op.copy.row_deltas, r) < op.tile.grows, gcol + pick(op.copy.col_deltas, r) < op.tile.gcols)
    T.cuda.tile.apply(
        T.ptx[op.copy.instr], sv[r : r + 1, :], gv[r : r + 1, :], scope="thread",
        chunk_bytes=op.copy.chunk_bytes,
        src_size=T.if_then_else(ok, T.uint32(op.copy.chunk_bytes), T.uint32(0)),
    )


@T.macro
def cp_clamped(p, op, G, sv, r, grow, gcol):
    # one chunk from its row clamped to the last (CopyPlan.rows_clamped): no predicate
    gr = T.decl_tensor(
        G.ptr_to([T.min(grow + pick(op.copy.row_deltas, r), op.tile.grows - 1), gcol + pick(op.copy.col_deltas, r)]),
        ty_args=[T.Tensor((1, op.tile.vec), p.dtype, align=op.copy.chunk_bytes)],
    )
    T.cuda.tile.apply(T.ptx[op.copy.instr], sv[r : r + 1, :], gr, scope="thread", chunk_bytes=op.copy.chunk_bytes)


def thread_shared(p: GemmPlan, op: OperandPlan, stage, r0, c0):
    """(element offset, tensor type) of a thread's chunks in a stage's shared tile (its first chunk's
    swizzled offset; the repeats at immediate offsets)."""
    return (stage * p.stage_elems + op.smem_offset + op.swizzle(r0 * op.tile.cols + c0),
            T.Tensor((op.tile.reps, op.tile.vec), p.dtype, scope="shared.dyn",
                     layout=TileLayout(S[op.copy.thread_shape : op.copy.thread_shared_strides]), align=op.copy.chunk_bytes))


@T.macro
def load_operand_thread(p, op, G, SMH, stage, kt, origin):
    # per-thread views: this thread's chunks only (scope="thread"); rep offsets are immediates
    tid = T.cuda.thread_idx("x")
    org = copy_origin(p, op, kt, origin, tid)
    grow = org[0]
    gcol = org[1]
    r0 = org[2]
    c0 = org[3]
    dst = thread_shared(p, op, stage, r0, c0)
    if I.constexpr(op.copy.rows_clamped):
        sv = T.decl_tensor(SMH.ptr_to([dst[0]]), ty_args=[dst[1]])
        for r in T.unroll(op.tile.reps):
            cp_clamped(p, op, G, sv, r, grow, gcol)
    else:
        gv = T.decl_tensor(
            G.ptr_to([grow, gcol]),
            ty_args=[T.Tensor((op.tile.reps, op.tile.vec), p.dtype,
                              layout=TileLayout(S[op.copy.thread_shape : op.copy.thread_global_strides]),
                              align=op.copy.chunk_bytes)],
        )
        sv = T.decl_tensor(SMH.ptr_to([dst[0]]), ty_args=[dst[1]])
        if I.constexpr(op.copy.masked):
            for r in T.unroll(op.tile.reps):
                cp_one(op, sv, gv, r, grow, gcol)
        else:
            T.cuda.tile.apply(T.ptx[op.copy.instr], sv, gv, scope="thread", chunk_bytes=op.copy.chunk_bytes)


@T.macro
def load_operand_cta(p, op, G, SMH, stage, row0, col0):
    # Copy one (rows x cols) tile of G into stage `stage` of shared memory.
    tid = T.cuda.thread_idx("x")
    if I.constexpr(op.copy.kind == "cta"):
        gv = T.decl_tensor(
            G.ptr_to([row0, col0]),
            ty_args=[T.Tensor((p.tiling.threads // 32, 32, op.tile.reps, op.tile.vec), p.dtype,
                              layout=_tile(op.copy.global_iters), align=op.copy.chunk_bytes)],
        )
        sv = T.decl_tensor(
            SMH.ptr_to([stage * p.stage_elems + op.smem_offset]),
            ty_args=[T.Tensor((p.tiling.threads // 32, 32, op.tile.reps, op.tile.vec), p.dtype, scope="shared.dyn",
                              layout=op.swizzle.layout(_tile(op.copy.shared_iters)), align=128)],
        )
        if I.constexpr(op.copy.masked):
            for r in T.unroll(op.tile.reps):
                rr, cc = op.tile.chunk_coord(tid, r)
                ok = T.and_(row0 + rr < op.tile.grows, col0 + cc < op.tile.gcols)
                T.cuda.tile.apply(
                    T.ptx[op.copy.instr], sv[:, :, r : r + 1, :], gv[:, :, r : r + 1, :], scope="cta",
                    chunk_bytes=op.copy.chunk_bytes,
                    src_size=T.if_then_else(ok, T.uint32(op.copy.chunk_bytes), T.uint32(0)),
                )
        else:
            T.cuda.tile.apply(T.ptx[op.copy.instr], sv, gv, scope="cta", chunk_bytes=op.copy.chunk_bytes)
    else:
        # Leading dimension not a multiple of 2 elements: no aligned cp.async exists.
        # Plain (synchronous) element copies into the same swizzled tile.
        sv1 = T.decl_tensor(
            SMH.ptr_to([stage * p.stage_elems + op.smem_offset]),
            ty_args=[T.Tensor((op.tile.rows, op.tile.cols), p.dtype, scope="shared.dyn",
                              layout=op.swizzle.layout(TileLayout(S[(op.tile.rows, op.tile.cols)])), align=128)],
        )
        for r in T.unroll(op.tile.reps):
            e = r * p.tiling.threads + tid
            rr = e // op.tile.cols
            cc = e % op.tile.cols
            ok = T.and_(row0 + rr < op.tile.grows, col0 + cc < op.tile.gcols)
            sv1[rr, cc] = T.if_then_else(ok, G[T.min(row0 + rr, op.tile.grows - 1), T.min(col0 + cc, op.tile.gcols - 1)], T.cast(0, p.dtype))


@T.macro
def load_operand(p, op, G, SMH, stage, kt, origin):
    # origin: the tile's offset along M (A) or N (B)
    if I.constexpr(op.copy.kind == "thread"):
        load_operand_thread(p, op, G, SMH, stage, kt, origin)
    elif I.constexpr(op.tile.trans):
        load_operand_cta(p, op, G, SMH, stage, kt * p.tiling.block_k, origin)
    else:
        load_operand_cta(p, op, G, SMH, stage, origin, kt * p.tiling.block_k)


def slice_k_tile(th: Thread, kt):
    """The k-tile of K that the slice's k-tile ``kt`` copies (``kt`` itself without a split)."""
    return kt if th.k0 is None else th.k0 + kt


@T.macro
def load_part(p, th, stage, kt, m0, n0, part):
    # part: "A", "B" or "AB"
    if I.constexpr(part != "B"):
        load_operand(p, p.a, th.A, th.SMH, stage, slice_k_tile(th, kt), m0)
    if I.constexpr(part != "A"):
        load_operand(p, p.b, th.B, th.SMH, stage, slice_k_tile(th, kt), n0)


@T.macro
def ahead_load(p, th, tile, nxt, rs, kt, part):
    # k-tile kt+stages-1 of this tile, or (persistent kernel) past the end of the tile the first
    # k-tiles of the CTA's next tile
    if I.constexpr(nxt is None):
        if kt + p.kloop.stages - 1 < p.kloop.k_tiles:
            load_part(p, th, (rs + p.kloop.stages - 1) % p.kloop.stages, kt + p.kloop.stages - 1, tile.m0, tile.n0, part)
    else:
        # one copy of the load code with selected coordinates (two would double the body)
        if T.or_(kt + p.kloop.stages - 1 < p.kloop.k_tiles, nxt.exists):
            over = kt + p.kloop.stages - 1 >= p.kloop.k_tiles
            lkt = T.Select(over, kt + p.kloop.stages - 1 - p.kloop.k_tiles, kt + p.kloop.stages - 1)
            lm0 = T.Select(over, nxt.m0, tile.m0)
            ln0 = T.Select(over, nxt.n0, tile.n0)
            load_part(p, th, (rs + p.kloop.stages - 1) % p.kloop.stages, lkt, lm0, ln0, part)


# ---- shared -> registers ------------------------------------------------------------------------


@T.macro
def ldm_group(p, op, SMW, dst, stage, g):
    # one ldmatrix group from the lane's precomputed swizzled address
    lane = T.cuda.lane_id()
    w = warp_coord(p, op)
    la = op.ldmatrix.lane
    lof = op.swizzle.words()(la.offset(w, lane))
    src = T.decl_tensor(
        SMW.ptr_to([(stage * p.stage_elems + op.smem_offset) // 2 + (lof ^ g.xor) + g.add]),
        ty_args=[T.Tensor((1, g.count, 4, 8, 4), "uint32", scope="shared.dyn", layout=TileLayout(S[(g.count, 4, 8, 4) : (g.stride, 0, 0, 1)]), align=16)],
    )
    T.cuda.tile.apply(T.ptx[op.ldmatrix.instr], dst[:, g.first : g.first + g.count, :, :, :], src, scope="warp")


@T.macro
def ldm_group_at(p, op, SMW, dst, stage, g, lof):
    # the lane's pointer holds only (lof ^ xor); the group's constant is the view's offset
    src = T.decl_tensor(
        SMW.ptr_to([lof ^ g.xor]),
        ty_args=[T.Tensor((2, g.count, 4, 8, 4), "uint32", scope="shared.dyn", layout=TileLayout(S[(2, g.count, 4, 8, 4) : (view_offset(p, op, stage, g), g.stride, 0, 0, 1)]), align=16)],
    )
    T.cuda.tile.apply(T.ptx[op.ldmatrix.instr], dst[:, g.first : g.first + g.count, :, :, :], src[1:2, :, :, :, :], scope="warp")


@T.macro
def ldm_step(p, op, SMW, dst, stage, kk):
    # the k-step's ldmatrix groups of one operand
    if I.constexpr(op.ldmatrix.offset_in_view and known_stage(p, stage)):
        lane = T.cuda.lane_id()
        w = warp_coord(p, op)
        la = op.ldmatrix.lane
        lof = op.swizzle.words()(la.offset(w, lane))
        # one apply in a loop over the step's groups, lowered once; the loop unrolls after lowering
        for i in T.unroll(len(op.ldmatrix.steps[kk])):
            ldm_group_at(p, op, SMW, dst, stage, op.ldmatrix.group(kk, i), lof)
    else:
        for i in T.unroll(len(op.ldmatrix.steps[kk])):
            ldm_group(p, op, SMW, dst, stage, op.ldmatrix.group(kk, i))


@T.macro
def load_frags(p, th, buf, stage, kk):
    asrc = T.decl_tensor(
        th.SMW.ptr_to([(stage * p.stage_elems + th.a_base) // 2]),
        ty_args=[T.Tensor((p.tiling.k_steps, p.tiling.mma_m, 4, 8, 4), "uint32", scope="shared.dyn", layout=ldmatrix_source(p.a), align=16)],
    )
    bsrc = T.decl_tensor(
        th.SMW.ptr_to([(stage * p.stage_elems + p.b.smem_offset + th.b_base) // 2]),
        ty_args=[T.Tensor((p.tiling.k_steps, p.tiling.mma_n // 2, 4, 8, 4), "uint32", scope="shared.dyn", layout=ldmatrix_source(p.b), align=16)],
    )
    adst = T.decl_tensor(
        th.af.ptr_to([buf * p.tiling.mma_m * 4]),
        ty_args=[T.Tensor((1, p.tiling.mma_m, 4, 8, 4), "uint32", scope="local", layout=fragment_ldmatrix(p.tiling.mma_m))],
    )
    bdst = T.decl_tensor(
        th.bf.ptr_to([buf * p.tiling.mma_n * 2]),
        ty_args=[T.Tensor((1, p.tiling.mma_n // 2, 4, 8, 4), "uint32", scope="local", layout=fragment_ldmatrix(p.tiling.mma_n // 2))],
    )
    if I.constexpr(p.a.ldmatrix.lane is not None):
        ldm_step(p, p.a, th.SMW, adst, stage, kk)
    else:
        T.cuda.tile.apply(T.ptx[p.a.ldmatrix.instr], adst, asrc[kk : kk + 1, :, :, :, :], scope="warp")
    if I.constexpr(p.b.ldmatrix.lane is not None):
        ldm_step(p, p.b, th.SMW, bdst, stage, kk)
    else:
        T.cuda.tile.apply(T.ptx[p.b.ldmatrix.instr], bdst, bsrc[kk : kk + 1, :, :, :, :], scope="warp")


# ---- mma and the k-loop -------------------------------------------------------------------------


@T.macro
def mma_step(p, th, buf):
    d = T.decl_tensor(th.acc.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 16, 8), "float32", scope="local", layout=acc_mma(p.tiling.mma_m, p.tiling.mma_n))])
    a = T.decl_tensor(th.af.ptr_to([buf * p.tiling.mma_m * 4]), ty_args=[T.Tensor((p.tiling.mma_m, 1, 16, 8), "uint32", scope="local", layout=a_fragment_mma(p.tiling.mma_m))])
    b = T.decl_tensor(th.bf.ptr_to([buf * p.tiling.mma_n * 2]), ty_args=[T.Tensor((p.tiling.mma_n, 1, 8, 8), "uint32", scope="local", layout=b_fragment_mma(p.tiling.mma_n))])
    if I.constexpr(p.kloop.mma_order is None):
        T.cuda.tile.apply(T.ptx[p.mma_instr], d, a, b, d, scope="warp")
    else:
        mma_serpentine(p, d, a, b)


@T.macro
def mma_live(p, th, buf):
    # a short tile's mma (Thread.live): row mi of the warp tile only when it holds rows, in the plan's
    # order along ni (the rows of a warp without rows: none)
    d = T.decl_tensor(th.acc.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 16, 8), "float32", scope="local", layout=acc_mma(p.tiling.mma_m, p.tiling.mma_n))])
    a = T.decl_tensor(th.af.ptr_to([buf * p.tiling.mma_m * 4]), ty_args=[T.Tensor((p.tiling.mma_m, 1, 16, 8), "uint32", scope="local", layout=a_fragment_mma(p.tiling.mma_m))])
    b = T.decl_tensor(th.bf.ptr_to([buf * p.tiling.mma_n * 2]), ty_args=[T.Tensor((p.tiling.mma_n, 1, 8, 8), "uint32", scope="local", layout=b_fragment_mma(p.tiling.mma_n))])
    for mi in T.unroll(p.tiling.mma_m):
        if mi * 16 < th.live:
            mma_row(p, d, a, b, mi, live_ni)


def live_ni(p: GemmPlan, mi, j):
    """The j-th ni of warp-tile row mi in a short tile's mma: the serpentine order, or ``j`` (row order)."""
    return serpentine(p, mi, j) if p.kloop.mma_order is not None else j


def serpentine(p: GemmPlan, mi, j):
    """The j-th ni of warp-tile row mi: forwards on even rows, backwards on odd ones, so the B
    fragment of a row's last mma is the next row's first (an expression of the loop variables, not
    a bound variable, so nothing of it is left once the loops unroll)."""
    return T.Select(mi % 2 == 0, j, p.tiling.mma_n - 1 - j)


@T.macro
def mma_serpentine(p, d, a, b):
    # one apply inside loops over the warp tile: TIRx lowers it once, the loops unroll after lowering
    for mi in T.unroll(p.tiling.mma_m):
        mma_row(p, d, a, b, mi, serpentine)


@T.macro
def mma_row(p, d, a, b, mi, ni):
    # row mi of the warp tile: its mma_n mmas, the j-th at ni(p, mi, j) (serpentine or live_ni)
    for j in T.unroll(p.tiling.mma_n):
        T.cuda.tile.apply(
            T.ptx[p.mma_instr],
            d[mi : mi + 1, ni(p, mi, j) : ni(p, mi, j) + 1, :, :],
            a[mi : mi + 1, :, :, :],
            b[ni(p, mi, j) : ni(p, mi, j) + 1, :, :, :],
            d[mi : mi + 1, ni(p, mi, j) : ni(p, mi, j) + 1, :, :],
            scope="warp",
        )


@T.macro
def residual_copy(p, th, tile, rs, kt):
    # Epilogue.residual_rows: k-tile residual_first + part copies the residual's part `part` into the
    # stage its copies ahead would fill (free: read before the previous barrier, never refilled)
    first = p.epilogue.residual_first
    if I.constexpr(isinstance(kt, int)):
        if I.constexpr(0 <= kt - first < residual_parts(p)):
            residual_part(p, th, tile, (rs + p.kloop.stages - 1) % p.kloop.stages, kt - first)
    else:
        for part in T.unroll(residual_parts(p)):
            if kt == first + part:
                residual_part(p, th, tile, (rs + p.kloop.stages - 1) % p.kloop.stages, part)


def residual_parts(p: GemmPlan) -> int:
    """The parts of the residual tile, one stage each (``Epilogue.residual_rows``)."""
    return p.tiling.block_m // p.epilogue.residual_rows


@T.macro
def residual_part(p, th, tile, stage, part):
    # residual_rows rows of the tile's residual into `stage`, 16-byte chunks, consecutive threads along
    # a row (coalesced); rows residual_pitch elements apart
    tid = T.cuda.thread_idx("x")
    per_row = p.tiling.block_n // 8
    for i in T.unroll(p.epilogue.residual_rows * per_row // p.tiling.threads):
        row = (i * p.tiling.threads + tid) // per_row
        col = (i * p.tiling.threads + tid) % per_row * 8
        sv = T.decl_tensor(th.SMH.ptr_to([stage * p.stage_elems + row * p.epilogue.residual_pitch + col]),
                           ty_args=[T.Tensor((1, 8), p.dtype, scope="shared.dyn", layout=TileLayout(S[(1, 8)]), align=16)])
        gv = T.decl_tensor(th.R.ptr_to([tile.m0 + part * p.epilogue.residual_rows + row, tile.n0 + col]),
                           ty_args=[T.Tensor((1, 8), p.dtype, align=16)])
        T.cuda.tile.apply(T.ptx["cp.async.cg.shared.global"], sv, gv, scope="thread", chunk_bytes=16)


@T.macro
def commit_and_wait(p):
    T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](p.kloop.stages - 2)
    T.cuda.cta_sync()


@T.macro
def next_frags(p, th, rs, step):
    # fragments of the next k-step (of the next stage after the last k-step)
    if I.constexpr(step.next_stage):
        load_frags(p, th, (step.kk + 1) % 2, (rs + 1) % p.kloop.stages, step.next_kk)
    else:
        load_frags(p, th, (step.kk + 1) % 2, rs, step.next_kk)


@T.macro
def kstep(p, th, tile, nxt, kt, rs, step):
    # the next k-step's fragments (a short tile's warp: only with rows, Thread.live)
    if I.constexpr(th.live is None):
        next_frags(p, th, rs, step)
    else:
        if th.live > 0:
            next_frags(p, th, rs, step)
    # cp.async of tile kt+stages-1 into the stage every warp finished reading before the previous
    # barrier
    if I.constexpr(step.load is not None and p.kloop.loads_ahead(kt)):
        ahead_load(p, th, tile, nxt, rs, kt, step.load)
    if I.constexpr(th.R is not None and step.load is not None and step.load != "B"):
        residual_copy(p, th, tile, rs, kt)
    if I.constexpr(step.barrier == "before_mma"):
        commit_and_wait(p)
    if I.constexpr(th.live is None):
        mma_step(p, th, step.kk % 2)
    else:
        mma_live(p, th, step.kk % 2)
    if I.constexpr(step.barrier == "after_mma"):
        # the barrier only orders shared memory: this k-step's mma (registers only) is issued first
        # so the tensor pipe has queued work while the warp waits
        commit_and_wait(p)


@T.macro
def kstep_scoped(p, th, tile, nxt, kt, rs, step):
    # a one-trip loop closes the scope of the k-step's variables, so TIRx's layout and flatten
    # passes do not carry every earlier k-step's bindings (3x faster on the unrolled loop); it
    # disappears in lowering and the CUDA is unchanged (tests/kernels/sm80/test_cuda_gemm_golden.py)
    for _scope in T.unroll(1):
        kstep(p, th, tile, nxt, kt, rs, step)


@T.macro
def k_tiles(p, th, tile, nxt, kt0, count):
    # k-tiles kt0 .. kt0+count-1 with static stages 0 .. count-1 (kt0 a multiple of stages)
    for s in T.unroll(count):
        _ = [kstep_scoped(p, th, tile, nxt, kt0 + s, s, step) for step in p.kloop.steps]


@T.macro
def prologue(p, th, tile):
    # stages-1 k-tiles in flight, then the first k-step's fragments
    for s in T.unroll(p.kloop.stages - 1):
        if s < p.kloop.k_tiles:
            load_part(p, th, s, s, tile.m0, tile.n0, "AB")
        T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](p.kloop.stages - 2)
    T.cuda.cta_sync()
    load_frags(p, th, 0, 0, 0)


@T.macro
def zero(p, acc):
    for i in T.unroll(p.tiling.mma_m * p.tiling.mma_n * 4):
        acc[i] = T.float32(0)


# ---- epilogue -----------------------------------------------------------------------------------


def c_tile(p: GemmPlan, converted: bool):
    """The thread's view of C: (mma_m, mma_n, row half, 2 columns) of the output dtype, or as the
    converted registers are stored (``converted``: ``uint32`` pairs, one word per row half;
    ``uint16`` elements)."""
    mi, ni, ep = p.tiling.mma_m, p.tiling.mma_n, p.epilogue
    if converted and ep.vector == 2:
        return T.Tensor((mi, ni, 2, 1), ep.convert.dtype, layout=out_words(p), align=ep.align)
    return T.Tensor((mi, ni, 2, 2), ep.convert.dtype if converted else ep.out_dtype, layout=out_thread(p), align=ep.align)


TIR_OPS = SimpleNamespace(max=T.max, exp2=T.exp2, const=T.float32, f32=lambda x: T.Cast("float32", x))
"""The operations ``kernels.gemm.epilogue.activation`` / ``apply`` take, on TIR expressions. TIRx lowers
``T.exp2`` on f32 to CUDA's ``exp2f``, which NVRTC compiles (TIRx passes ``--use_fast_math``) to one
``ex2.approx.ftz.f32`` (PTX ISA 9.7.3.21: the hardware's approximate ``2^x``), and the formula's
divisions to ``div.approx.ftz.f32``."""


def fused_inputs(fusion, args, row, col, group=None, residual=None) -> dict:
    """The fusion's inputs of output element (``row``, ``col``), by name (the caller keeps both inside
    C): the residual in C's dtype (or ``residual``, the caller's value of it: one half of a pair read as
    a word), the row scale at ``row``, the per-column inputs at ``col`` (a grouped tile's ``[G, N]`` ones
    at its ``group``'s row)."""
    at = {}
    for name in fusion.inputs():
        tensor = args[name]
        if name == "residual":
            at[name] = tensor[row, col] if residual is None else residual
        elif name == "row_scale":
            at[name] = tensor[row]
        else:
            at[name] = tensor[col] if group is None else tensor[group, col]
    return at


def fused_value(fusion, args, v, row, col, group=None, residual=None):
    """``kernels.gemm.epilogue.apply`` on the f32 value ``v`` of output element (``row``, ``col``), its
    inputs read there (``fused_inputs``)."""
    return fused.apply(fusion, v, fused_inputs(fusion, args, row, col, group, residual), TIR_OPS)


def inside(p: GemmPlan, index, extent):
    """A row or column ``index`` of the thread's accumulator tile where a fused input is read: clamped
    into ``[0, extent)`` when the tile can cross C's edge (``Epilogue.masked``; the value computed there
    is never stored), so the kernel never reads an input out of range."""
    return T.min(index, extent - 1) if p.epilogue.masked else index


def residual_lines(p: GemmPlan) -> int:
    """The 128-byte lines of a row of a warp's residual columns (at least one)."""
    return max(1, p.tiling.warp_n * tvm_ffi.dtype(p.epilogue.out_dtype).bits // 8 // 128)


@T.macro
def prefetch_residual(p, args, tile, wm, wn, lane):
    # Epilogue.prefetch: the lines of the thread's residual rows (clamped into C), one per 128 bytes of
    # the warp's columns; a warp instruction covers its eight rows of lane // 4
    row_t = tile.m0 + wm * p.tiling.warp_m + lane // 4
    col_t = tile.n0 + wn * p.tiling.warp_n + (lane % 4) * 2
    for mi in T.unroll(p.tiling.mma_m):
        for rh in T.unroll(2):
            for line in T.unroll(residual_lines(p)):
                T.ptx[p.epilogue.prefetch](args["residual"].ptr_to([
                    inside(p, row_t + mi * 16 + rh * 8, p.M),
                    inside(p, col_t + line * (p.tiling.warp_n // residual_lines(p)), p.N)]))


def residual_pairs(p: GemmPlan) -> bool:
    """Whether the fused epilogue reads the residual by column pairs, one b32 word per pair: 16-bit C
    stored as pairs (N even: a pair's word is 4-byte aligned), as C itself is written."""
    return p.fusion.residual and p.epilogue.vector == 2 and p.epilogue.convert is not None


def half_of(p: GemmPlan, word, c2: int):
    """Column ``c2`` (0: the low half) of a residual pair's b32 ``word``, in C's 16-bit dtype (a bf16-only
    form, the f32 bits as a shift or a mask of the word, gave NVRTC 13.0 more moves and a spill at 4096^3)."""
    return T.reinterpret(T.Cast("uint16", word >> T.Cast("uint32", 16 * c2)), ty=p.epilogue.out_dtype)


@T.macro
def fuse(p, args, acc, row_t, col_t, group):
    # the fused epilogue (Epilogue.fuse) on every accumulator element, in place, before any conversion
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                if I.constexpr(residual_pairs(p)):
                    fuse_pair(p, args, acc, row_t + mi * 16 + rh * 8, col_t + ni * 8, group, acc_element(p, mi, ni, rh, 0))
                else:
                    for c2 in T.unroll(2):
                        acc[acc_element(p, mi, ni, rh, c2)] = fused_value(
                            p.fusion, args, acc[acc_element(p, mi, ni, rh, c2)],
                            inside(p, row_t + mi * 16 + rh * 8, p.M), inside(p, col_t + ni * 8 + c2, p.N), group)


def residual_word(p: GemmPlan, wm, wn, lane):
    """The shared-memory word of the thread's first residual pair (``Epilogue.residual_rows``): the part
    of its warp's rows (whole warp rows per part), in the stage that part's k-tile filled, at the
    thread's row and column inside the part."""
    ep, rows = p.epilogue, p.epilogue.residual_rows
    part = T.truncdiv(wm * p.tiling.warp_m, rows)
    stage = T.truncmod(ep.residual_first + part + p.kloop.stages - 1, p.kloop.stages)
    row = T.truncmod(wm * p.tiling.warp_m, rows) + lane // 4
    return (stage * p.stage_elems + row * ep.residual_pitch + wn * p.tiling.warp_n + (lane % 4) * 2) // 2


@T.macro
def fuse_staged(p, args, acc, row_t, col_t, smw, word0):
    # the fused epilogue with the residual in shared memory: pair (mi, ni, rh) is the word at word0 plus
    # (mi * 16 + rh * 8) rows and ni * 8 columns (the tile never crosses C's edge: no clamping)
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                word = smw[word0 + ((mi * 16 + rh * 8) * p.epilogue.residual_pitch + ni * 8) // 2]
                for c2 in T.unroll(2):
                    acc[acc_element(p, mi, ni, rh, c2)] = fused_value(
                        p.fusion, args, acc[acc_element(p, mi, ni, rh, c2)], row_t + mi * 16 + rh * 8,
                        col_t + ni * 8 + c2, None, half_of(p, word, c2))


@T.macro
def fuse_pair(p, args, acc, row, col, group, e):
    # a column pair (accumulators e, e + 1) whose residual is one b32 load (``residual_pairs``); the
    # pair's column clamped to C's last pair where the tile can cross C's edge
    rw = T.decl_tensor(args["residual"].ptr_to([inside(p, row, p.M), inside(p, col, p.N - 1)]),
                       ty_args=[T.Tensor((1,), "uint32", align=4)])
    word = rw[0]
    for c2 in T.unroll(2):
        acc[e + c2] = fused_value(p.fusion, args, acc[e + c2], inside(p, row, p.M), inside(p, col + c2, p.N), group,
                                  half_of(p, word, c2))


@T.macro
def epilogue(p, args, acc, tile, wm, wn, lane, smw=None):
    # the epilogue stage: the plan's operations on the thread's accumulator tile, then one store; smw:
    # the shared memory as words, holding the residual (Epilogue.residual_rows)
    row_t = tile.m0 + wm * p.tiling.warp_m + lane // 4
    col_t = tile.n0 + wn * p.tiling.warp_n + (lane % 4) * 2
    if I.constexpr(p.epilogue.fuse is not None and smw is not None):
        fuse_staged(p, args, acc, row_t, col_t, smw, residual_word(p, wm, wn, lane))
    elif I.constexpr(p.epilogue.fuse is not None):
        fuse(p, args, acc, row_t, col_t, tile.group)
    accv = T.decl_tensor(acc.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 2, 2), "float32", scope="local", layout=acc_thread(p.tiling.mma_m, p.tiling.mma_n))])
    if I.constexpr(p.epilogue.convert is None or p.epilogue.vector == 2):
        # C in its dtype; pairs declare it even when converted (stored through ``cw`` then): the
        # generated CUDA keeps that pointer (tests/kernels/sm80/test_cuda_gemm_golden.py)
        cview = T.decl_tensor(args["C"].ptr_to([row_t, col_t]), ty_args=[c_tile(p, False)])
    if I.constexpr(p.epilogue.convert is None):
        store(p, cview, accv, accv, row_t, col_t, rows_end(p, tile))
    elif I.constexpr(p.epilogue.vector == 2):
        packed = T.alloc_tensor(ty_args=[T.Tensor((p.tiling.mma_m * p.tiling.mma_n * 2,), p.epilogue.convert.dtype, scope="local", layout="default")])
        pv = T.decl_tensor(packed.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 2, 1), p.epilogue.convert.dtype, scope="local", layout=pack_thread(p.tiling.mma_m, p.tiling.mma_n))])
        # cvt.rn.{f16,bf16}x2.f32 d, hi, lo: column c2=1 goes to the high half
        T.cuda.tile.apply(T.ptx[p.epilogue.convert.instr], pv, accv[:, :, :, 1:2], accv[:, :, :, 0:1], scope="thread")
        cw = T.decl_tensor(args["C"].ptr_to([row_t, col_t]), ty_args=[c_tile(p, True)])
        store(p, cw, pv, accv, row_t, col_t, rows_end(p, tile))
    else:
        # odd N: cvt.rn.{f16,bf16}.f32 into 16-bit registers, each just before its st.global.b16
        bits = T.alloc_tensor(ty_args=[T.Tensor((p.tiling.mma_m * p.tiling.mma_n * 4,), p.epilogue.convert.dtype, scope="local", layout="default")])
        bv = T.decl_tensor(bits.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 2, 2), p.epilogue.convert.dtype, scope="local", layout=acc_thread(p.tiling.mma_m, p.tiling.mma_n))])
        ch = T.decl_tensor(args["C"].ptr_to([row_t, col_t]), ty_args=[c_tile(p, True)])
        store(p, ch, bv, accv, row_t, col_t, rows_end(p, tile))


@T.macro
def store(p, dst, src, acc, row_t, col_t, m_end):
    # the store of the epilogue: pairs per row half, or (odd N) one element at a time; rows below m_end
    if I.constexpr(p.epilogue.vector == 2):
        store_tiles(p, dst, src, row_t, col_t, m_end)
    else:
        store_elements(p, dst, src, acc, row_t, col_t, m_end)


@T.macro
def store_tiles(p, dst, src, row_t, col_t, m_end):
    # the (mma_m, mma_n, 2 row halves, *) register tiles, each row half predicated on being inside C
    # when the tile can cross its edge
    if I.constexpr(p.epilogue.masked):
        for mi in T.unroll(p.tiling.mma_m):
            for ni in T.unroll(p.tiling.mma_n):
                for rh in T.unroll(2):
                    T.cuda.tile.apply(
                        T.ptx[p.epilogue.store_instr],
                        dst[mi : mi + 1, ni : ni + 1, rh : rh + 1, :],
                        src[mi : mi + 1, ni : ni + 1, rh : rh + 1, :],
                        scope="thread",
                        pred=T.and_(row_t + mi * 16 + rh * 8 < m_end, col_t + ni * 8 < p.N),
                    )
    else:
        T.cuda.tile.apply(T.ptx[p.epilogue.store_instr], dst, src, scope="thread")


@T.macro
def store_elements(p, dst, src, acc, row_t, col_t, m_end):
    # one apply (the conversion first for 16-bit C) in loops over the thread's accumulator elements,
    # each store predicated on its element being inside C; the loops unroll after lowering
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                for c2 in T.unroll(2):
                    if I.constexpr(p.epilogue.convert is not None):
                        T.cuda.tile.apply(T.ptx[p.epilogue.convert.instr], src[mi : mi + 1, ni : ni + 1, rh : rh + 1, c2 : c2 + 1],
                                          acc[mi : mi + 1, ni : ni + 1, rh : rh + 1, c2 : c2 + 1], scope="thread")
                    T.cuda.tile.apply(
                        T.ptx[p.epilogue.store_instr],
                        dst[mi : mi + 1, ni : ni + 1, rh : rh + 1, c2 : c2 + 1],
                        src[mi : mi + 1, ni : ni + 1, rh : rh + 1, c2 : c2 + 1],
                        scope="thread",
                        pred=T.and_(row_t + mi * 16 + rh * 8 < m_end, col_t + ni * 8 + c2 < p.N),
                    )


# ---- the split-K reduction (EpilogueOp "reduce") -------------------------------------------------


def acc_element(p: GemmPlan, mi, ni, rh, c2):
    """Index of element (mi, ni, row half, column) in the thread's accumulators (``acc_thread``)."""
    return mi * p.tiling.mma_n * 4 + ni * 4 + rh * 2 + c2


def workspace_slice(p: GemmPlan, k_slice):
    """The workspace slice a K slice writes: its own (ordered) or the one shared slice (atomic)."""
    return k_slice if p.config.reduction == "ordered" else 0


def is_atomic(p: GemmPlan) -> bool:
    return p.config.reduction == "atomic"


@T.macro
def split_epilogue(p, args, acc, tile, wm, wn, lane, pid):
    # the slice's partial tile into the workspace W, a fence, then the tile's ticket S; the last of
    # the tile's k_splits CTAs to draw one gathers the sum into its accumulators and runs the epilogue
    tid = T.cuda.thread_idx("x")
    row_t = tile.m0 + wm * p.tiling.warp_m + lane // 4
    col_t = tile.n0 + wn * p.tiling.warp_n + (lane % 4) * 2
    per_split = p.grid.grid_m * p.grid.grid_n
    k_slice = T.truncdiv(pid, per_split)
    if I.constexpr(p.epilogue.reduce.branch_free):
        reduce_branch_free(p, args["W"], acc, row_t, col_t, workspace_slice(p, k_slice), False)
    elif I.constexpr(p.epilogue.reduce.vector == 2):
        partials_pairs(p, args["W"], acc, row_t, col_t, workspace_slice(p, k_slice))
    else:
        for mi in T.unroll(p.tiling.mma_m):
            for ni in T.unroll(p.tiling.mma_n):
                for rh in T.unroll(2):
                    for c2 in T.unroll(2):
                        if T.and_(row_t + mi * 16 + rh * 8 < p.M, col_t + ni * 8 + c2 < p.N):
                            T.ptx[p.epilogue.reduce.instr](
                                args["W"].ptr_to([workspace_slice(p, k_slice), row_t + mi * 16 + rh * 8, col_t + ni * 8 + c2]),
                                acc[acc_element(p, mi, ni, rh, c2)])
    T.ptx["fence.acq_rel.gpu"]()
    T.cuda.cta_sync()
    ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared", layout="default")])
    drawn = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    if tid == 0:
        T.ptx["atom.global.add.u32"](drawn[0], args["S"].ptr_to([T.truncmod(pid, per_split)]), T.uint32(1))
        ticket[0] = drawn[0]
    T.cuda.cta_sync()
    if ticket[0] == T.uint32(p.grid.k_splits - 1):
        T.ptx["fence.acq_rel.gpu"]()
        if I.constexpr(p.epilogue.reduce.branch_free):
            reduce_branch_free(p, args["W"], acc, row_t, col_t, 0, True)
        elif I.constexpr(p.epilogue.reduce.vector == 2):
            gather_pairs(p, args["W"], acc, row_t, col_t)
        else:
            gather(p, args["W"], acc, row_t, col_t)
        if tid == 0:
            args["S"][T.truncmod(pid, per_split)] = T.uint32(0)
        epilogue(p, args, acc, tile, wm, wn, lane)


@T.macro
def gather(p, W, acc, row_t, col_t):
    # the tile's sum into the accumulators: atomic, W's one slice (then cleared for the next launch);
    # ordered, the slices added in index order (deterministic)
    part = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local", layout="default")])
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                for c2 in T.unroll(2):
                    if T.and_(row_t + mi * 16 + rh * 8 < p.M, col_t + ni * 8 + c2 < p.N):
                        T.ptx["ld.global.cg.f32"](acc[acc_element(p, mi, ni, rh, c2)], W.ptr_to([0, row_t + mi * 16 + rh * 8, col_t + ni * 8 + c2]))
                        if I.constexpr(is_atomic(p)):
                            T.ptx["st.global.f32"](W.ptr_to([0, row_t + mi * 16 + rh * 8, col_t + ni * 8 + c2]), T.float32(0))
                        else:
                            for s in T.unroll(1, p.grid.k_splits):
                                T.ptx["ld.global.cg.f32"](part[0], W.ptr_to([s, row_t + mi * 16 + rh * 8, col_t + ni * 8 + c2]))
                                acc[acc_element(p, mi, ni, rh, c2)] = acc[acc_element(p, mi, ni, rh, c2)] + part[0]


@T.macro
def partials_pairs(p, W, acc, row_t, col_t, k_slice):
    # the ordered reduction by column pairs: the slice's partial tile into its own workspace slice,
    # one st.global.v2.f32 per pair (N even: a pair is inside C or outside it whole)
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                if T.and_(row_t + mi * 16 + rh * 8 < p.M, col_t + ni * 8 < p.N):
                    T.ptx[p.epilogue.reduce.instr](
                        W.ptr_to([k_slice, row_t + mi * 16 + rh * 8, col_t + ni * 8]),
                        acc[acc_element(p, mi, ni, rh, 0)], acc[acc_element(p, mi, ni, rh, 1)])


@T.macro
def partial_group(p, W, acc, k_slice, row, col, e):
    # one pair (vector 2: accumulators e, e + 1) or element of the branch-free partial store
    ok = T.and_(row < p.M, col + p.epilogue.reduce.vector - 1 < p.N)
    if I.constexpr(p.epilogue.reduce.vector == 2):
        T.ptx[p.epilogue.reduce.instr](W.ptr_to([k_slice, row, col]), acc[e], acc[e + 1], pred=ok)
    else:
        T.ptx[p.epilogue.reduce.instr](W.ptr_to([k_slice, row, col]), acc[e], pred=ok)


@T.macro
def reduce_branch_free(p, W, acc, row_t, col_t, k_slice, gathering):
    # EpilogueOp.branch_free, over the thread's column pairs (or elements): the slice's partial tile
    # into the workspace, each store predicated on being inside C (``gathering`` False), or the last
    # CTA's gather, every load at its row and column clamped into C (a sum outside C is never stored),
    # so the loads of all pairs go out together; the atomic slice's clearing store is predicated
    part = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local", layout="default")])
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                for c in T.unroll(2 // p.epilogue.reduce.vector):
                    if I.constexpr(gathering):
                        gather_group(p, W, acc, part, row_t + mi * 16 + rh * 8, col_t + ni * 8 + c * p.epilogue.reduce.vector,
                                     acc_element(p, mi, ni, rh, c * p.epilogue.reduce.vector))
                    else:
                        partial_group(p, W, acc, k_slice, row_t + mi * 16 + rh * 8,
                                      col_t + ni * 8 + c * p.epilogue.reduce.vector,
                                      acc_element(p, mi, ni, rh, c * p.epilogue.reduce.vector))


@T.macro
def gather_group(p, W, acc, part, row, col, e):
    # one element (vector 1) or column pair (vector 2) of the branch-free gather, accumulator index e
    r = T.min(row, p.M - 1)
    c = T.min(col, p.N - p.epilogue.reduce.vector)
    if I.constexpr(p.epilogue.reduce.vector == 2):
        T.ptx[p.epilogue.reduce.gather](acc[e], acc[e + 1], W.ptr_to([0, r, c]))
        for s in T.unroll(1, p.grid.k_splits):
            T.ptx[p.epilogue.reduce.gather](part[0], part[1], W.ptr_to([s, r, c]))
            acc[e] = acc[e] + part[0]
            acc[e + 1] = acc[e + 1] + part[1]
    else:
        T.ptx[p.epilogue.reduce.gather](acc[e], W.ptr_to([0, r, c]))
        if I.constexpr(is_atomic(p)):
            T.ptx["st.global.f32"](W.ptr_to([0, r, c]), T.float32(0), pred=T.and_(row < p.M, col < p.N))
        else:
            for s in T.unroll(1, p.grid.k_splits):
                T.ptx[p.epilogue.reduce.gather](part[0], W.ptr_to([s, r, c]))
                acc[e] = acc[e] + part[0]


@T.macro
def gather_pairs(p, W, acc, row_t, col_t):
    # the ordered gather by column pairs: slices 0, 1, ... added in index order (deterministic)
    part = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local", layout="default")])
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                if T.and_(row_t + mi * 16 + rh * 8 < p.M, col_t + ni * 8 < p.N):
                    T.ptx[p.epilogue.reduce.gather](
                        acc[acc_element(p, mi, ni, rh, 0)], acc[acc_element(p, mi, ni, rh, 1)],
                        W.ptr_to([0, row_t + mi * 16 + rh * 8, col_t + ni * 8]))
                    for s in T.unroll(1, p.grid.k_splits):
                        T.ptx[p.epilogue.reduce.gather](part[0], part[1],
                                                        W.ptr_to([s, row_t + mi * 16 + rh * 8, col_t + ni * 8]))
                        acc[acc_element(p, mi, ni, rh, 0)] = acc[acc_element(p, mi, ni, rh, 0)] + part[0]
                        acc[acc_element(p, mi, ni, rh, 1)] = acc[acc_element(p, mi, ni, rh, 1)] + part[1]


# ---- the kernel ---------------------------------------------------------------------------------

EPILOGUE_OPS = ("reduce", "fuse", "convert")
"""The ``EpilogueOp`` kinds this emission spells."""


@T.macro
def kernel(p, args):
    # the kernel body; args: the plan's parameters by name (``p.params``)
    T.device_entry(
        launch=T.cuda.LaunchConfig(grid=p.grid.ctas, block=p.tiling.threads, dynamic_smem_bytes=p.smem_elems * 2)
    )
    pid = T.cuda.block_idx("x")
    warp = T.cuda.warp_id()
    lane = T.cuda.lane_id()
    wm = warp % p.tiling.warps_m
    wn = warp // p.tiling.warps_m

    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_elems,), p.dtype, scope="shared.dyn", layout="default", align=1024)])
    SMW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_elems // 2,), "uint32", scope="shared.dyn", layout="default", align=1024)])
    acc = T.alloc_tensor(ty_args=[T.Tensor((p.tiling.mma_m * p.tiling.mma_n * 4,), "float32", scope="local", layout="default")])
    af = T.alloc_tensor(ty_args=[T.Tensor((2 * p.tiling.mma_m * 4,), "uint32", scope="local", layout="default")])
    bf = T.alloc_tensor(ty_args=[T.Tensor((2 * p.tiling.mma_n * 2,), "uint32", scope="local", layout="default")])
    zero(p, acc)
    a_base = wm * p.a.warp_offset
    b_base = wn * p.b.warp_offset
    if I.constexpr(p.grid.k_splits > 1):
        k_slice = T.truncdiv(pid, p.grid.grid_m * p.grid.grid_n)
        th = Thread(args["A"], args["B"], SMH, SMW, acc, af, bf, a_base, b_base, k_slice * p.kloop.k_tiles)
    elif I.constexpr(p.epilogue.residual_rows > 0):
        th = Thread(args["A"], args["B"], SMH, SMW, acc, af, bf, a_base, b_base, R=args["residual"])
    else:
        th = Thread(args["A"], args["B"], SMH, SMW, acc, af, bf, a_base, b_base)

    if I.constexpr(p.grid.persistent):
        persistent_tiles(p, th, args, pid, wm, wn, lane)
    elif I.constexpr(p.grid.grouping is not None):
        grouped_tile(p, th, args, pid, wm, wn, lane)
    else:
        org = tile_origin(p, pid)
        m0 = org[0]
        n0 = org[1]
        one_tile(p, th, args, TileOrigin(m0, n0), pid, wm, wn, lane)


@T.macro
def one_tile(p, th, args, tile, pid, wm, wn, lane):
    # one output tile: the pipeline over its k-tiles, then the epilogue
    prologue(p, th, tile)
    if I.constexpr(p.kloop.form == "unrolled"):
        # unrolled by the stage count: every shared-memory stage offset is a constant
        for ko in range(p.kloop.groups):
            if I.constexpr(p.epilogue.prefetch != ""):
                if ko == p.epilogue.prefetch_at // p.kloop.stages:
                    prefetch_residual(p, args, tile, wm, wn, lane)
            k_tiles(p, th, tile, None, ko * p.kloop.stages, p.kloop.stages)
        if I.constexpr(p.kloop.tail > 0):
            k_tiles(p, th, tile, None, p.kloop.k_tiles - p.kloop.tail, p.kloop.tail)
    else:
        for kt in range(p.kloop.k_tiles):
            if I.constexpr(p.epilogue.prefetch != ""):
                if kt == p.epilogue.prefetch_at:
                    prefetch_residual(p, args, tile, wm, wn, lane)
            _ = [kstep(p, th, tile, None, kt, kt % p.kloop.stages, step) for step in p.kloop.steps]
    T.ptx["cp.async.wait_group"](0)
    if I.constexpr(th.R is not None):
        # every thread's residual copies landed before any thread reads the stages
        T.cuda.cta_sync()
    if I.constexpr(p.epilogue.reduce is not None):
        split_epilogue(p, args, th.acc, tile, wm, wn, lane, pid)
    elif I.constexpr(th.R is not None):
        epilogue(p, args, th.acc, tile, wm, wn, lane, th.SMW)
    else:
        epilogue(p, args, th.acc, tile, wm, wn, lane)


# ---- the grouped GEMM (GridPlan.grouping) -------------------------------------------------------


def grouped_index(p: GemmPlan, t):
    """(row-tile index, n0) of tile ``t`` of a grouped plan (``GridPlan.decode``; the row-tile index is
    turned into a group and rows by ``find_group`` and ``Groups.origin``)."""
    tile = p.grid.decode(t, T.truncdiv, T.truncmod, T.min)
    return tile.m, tile.n * p.tiling.block_n


def group_thread(th: Thread, B) -> Thread:
    """The thread's record with B the group's weights (a view of ``B[g]``)."""
    return attrs.evolve(th, B=B)


@T.macro
def grouped_tile(p, th, args, pid, wm, wn, lane):
    # row tile r -> (group g, rows m0 .. m_end) by a search of the offsets; a tile without rows exits
    idx = grouped_index(p, pid)
    r = idx[0]
    n0 = idx[1]
    if I.constexpr(p.grid.grouping.search == "cta"):
        hit = T.alloc_tensor(ty_args=[T.Tensor((3,), "int32", scope="shared", layout="default")])
        find_group_cta(p, args[OFFSETS], r, hit)
        g = hit[0]
        span = p.grid.grouping.origin(g, hit[1], hit[2], r, p.M, T.min)
        m0 = span[0]
        m_end = span[1]
        grouped_rows(p, th, args, pid, wm, wn, lane, g, n0, m0, m_end)
    else:
        found = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
        find_group(p.grid.grouping, args[OFFSETS], r, found)
        g = found[0]
        span = p.grid.grouping.origin(g, args[OFFSETS][g], args[OFFSETS][g + 1], r, p.M, T.min)
        m0 = span[0]
        m_end = span[1]
        grouped_rows(p, th, args, pid, wm, wn, lane, g, n0, m0, m_end)


@T.macro
def find_group_cta(p, offsets, r, hit):
    # Groups.search "cta": thread t tests groups t, t + threads, ... at once (Groups.owns); the owner of
    # row tile r writes (g, offsets[g], offsets[g + 1]) into hit; (0, 0, 0) first, which gives no rows,
    # so offsets that no group matches (bad ones) leave the CTA without rows
    tid = T.cuda.thread_idx("x")
    if tid == 0:
        hit[0] = 0
        hit[1] = 0
        hit[2] = 0
    T.cuda.cta_sync()
    for c in T.unroll(p.grid.grouping.search_loads(p.tiling.threads)):
        if c * p.tiling.threads + tid < p.grid.grouping.count:
            gc = c * p.tiling.threads + tid
            lo = offsets[gc]
            hi = offsets[gc + 1]
            if p.grid.grouping.owns(gc, lo, hi, r, T.And):
                hit[0] = gc
                hit[1] = lo
                hit[2] = hi
    T.cuda.cta_sync()


@T.macro
def grouped_rows(p, th, args, pid, wm, wn, lane, g, n0, m0, m_end):
    # the tile of group g at rows m0 .. m_end (none: the CTA exits)
    if T.and_(0 <= m0, m0 < m_end):
        Bg = T.decl_tensor(args["B"].ptr_to([T.cast(g, "int64"), 0, 0]), ty_args=[T.Tensor(p.b.shape, p.dtype)])
        if I.constexpr(p.grid.grouping.live_rows):
            # Groups.live_rows: a full tile runs the k-loop of every tile, a short one the copy whose
            # warps issue the mma of their rows only
            if m_end - m0 >= p.tiling.block_m:
                one_tile(p, group_thread(th, Bg), args, TileOrigin(m0, n0, m_end, g), pid, wm, wn, lane)
            else:
                one_tile(p, attrs.evolve(group_thread(th, Bg), live=m_end - m0 - wm * p.tiling.warp_m), args,
                         TileOrigin(m0, n0, m_end, g), pid, wm, wn, lane)
        else:
            one_tile(p, group_thread(th, Bg), args, TileOrigin(m0, n0, m_end, g), pid, wm, wn, lane)


@T.macro
def persistent_tiles(p, th, args, pid, wm, wn, lane):
    # tiles pid, pid + ctas, ...; the pipeline runs on from one tile into the next
    org0 = tile_origin(p, pid)
    first_m0 = org0[0]
    first_n0 = org0[1]
    prologue(p, th, TileOrigin(first_m0, first_n0))
    for it in range(T.truncdiv(p.grid.tiles - 1 - pid, p.grid.ctas) + 1):
        t = pid + it * p.grid.ctas
        org = tile_origin(p, t)
        m0 = org[0]
        n0 = org[1]
        nxt = tile_origin(p, T.min(t + p.grid.ctas, p.grid.tiles - 1))
        next_m0 = nxt[0]
        next_n0 = nxt[1]
        has_next = t + p.grid.ctas < p.grid.tiles
        for ko in range(p.kloop.groups):
            if I.constexpr(p.epilogue.prefetch != ""):
                if ko == p.epilogue.prefetch_at // p.kloop.stages:
                    prefetch_residual(p, args, TileOrigin(m0, n0), wm, wn, lane)
            k_tiles(p, th, TileOrigin(m0, n0), NextTile(next_m0, next_n0, has_next), ko * p.kloop.stages, p.kloop.stages)
        epilogue(p, args, th.acc, TileOrigin(m0, n0), wm, wn, lane)
        zero(p, th.acc)
    T.ptx["cp.async.wait_group"](0)


def signature_source(p, body: str = "kernel") -> str:
    """The TVMScript of ``main``: one parameter per ``p.params`` (any plan with ``params``), the body
    the macro named ``body`` called as ``body(p, {name: parameter})``."""
    names = [q.name for q in p.params]
    params = ", ".join(f"{name}: types[{i}]" for i, name in enumerate(names))
    args = ", ".join(f"{name!r}: {name}" for name in names)
    return f"@T.function\ndef main({params}):\n    {body}(p, {{{args}}})\n"


@transpile_once
def emit(p: GemmPlan):
    """The TIRx PrimFunc ``main(A, B, C)`` of a plan (its parameters: ``p.params``)."""
    unknown = [op.kind for op in p.epilogue.ops if op.kind not in EPILOGUE_OPS]
    if unknown:
        raise ValueError(f"epilogue operations {unknown} are planned but not emitted (emitted: {EPILOGUE_OPS})")
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p), {"T": T, "kernel": kernel, "p": p, "types": types})
