"""The CUDA GEMM's operand copies in TIRx: global -> shared (``cp.async`` per thread or CTA-wide, masked,
clamped or element copies: ``load_operand``; the copies ahead of the k-loop: ``ahead_load``) and shared ->
registers (``ldmatrix`` from precomputed lane addresses or the generic view: ``load_frags``).
Part of the CUDA GEMM's emission (``kernels.sm80.gemm_emit``, whose docstring tells the whole)."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.layout import S, TileLayout

from .gemm_emit_common import (Thread, _tile, copy_origin, fragment_ldmatrix, known_stage, ldmatrix_source, view_offset,
                               warp_coord, wide_at, wide_index)
from .gemm_plan import GemmPlan
from .gemm_plan_operands import OperandPlan


# ---- global -> shared -----------------------------------------------------------------------


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
        G.ptr_to(wide_at(p, op.name, T.min(grow + pick(op.copy.row_deltas, r), op.tile.grows - 1),
                         gcol + pick(op.copy.col_deltas, r))),
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
            G.ptr_to(wide_at(p, op.name, grow, gcol)),
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
            G.ptr_to(wide_at(p, op.name, row0, col0)),
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
            sv1[rr, cc] = T.if_then_else(ok, G[wide_index(p, op.name, T.min(row0 + rr, op.tile.grows - 1)),
                                               T.min(col0 + cc, op.tile.gcols - 1)], T.cast(0, p.dtype))


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


# ---- shared -> registers --------------------------------------------------------------------


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
