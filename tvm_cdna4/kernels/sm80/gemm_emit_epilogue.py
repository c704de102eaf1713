"""The CUDA GEMM's epilogue in TIRx: the plan's ``Epilogue.ops`` on the thread's accumulator tile (the
fused epilogue, ``fuse``; the conversion), then the store (``epilogue``, ``store``); the residual's L2
prefetch; and the split-K reduction through the workspace and the tile's ticket (``split_epilogue``,
the ``"reduce"`` op), after which the tile's last CTA runs the epilogue. ``TIR_OPS`` and
``fused_inputs`` serve the decode and attention kernels too.
Part of the CUDA GEMM's emission (``kernels.sm80.gemm_emit``, whose docstring tells the whole)."""

from __future__ import annotations

from types import SimpleNamespace

import tvm_ffi
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ..gemm import epilogue as fused
from .gemm_emit_common import acc_thread, int64_index, out_thread, out_words, pack_thread, rows_end, wide_at
from .gemm_plan import GemmPlan


# ---- epilogue -------------------------------------------------------------------------------


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


def fused_inputs(fusion, args, row, col, group=None, residual=None, wide=()) -> dict:
    """The fusion's inputs of output element (``row``, ``col``), by name (the caller keeps both inside
    C): the residual in C's dtype (or ``residual``, the caller's value of it: one half of a pair read as
    a word), the row scale at ``row``, the per-column inputs at ``col`` (a grouped tile's ``[G, N]`` ones
    at its ``group``'s row); each indexed by its broadcast (``kernels.gemm.epilogue.Input.at``), an
    element-wise input's row in ``int64`` when its name is in ``wide`` (the plan's ``offsets64``)."""
    at = {}
    for i in fusion.steps():
        if i.name == "residual" and residual is not None:
            at[i.name] = residual
        else:
            r = int64_index(row) if i.broadcast == "element" and i.name in wide else row
            at[i.name] = i.at(args[i.name], r, col, group)
    return at


def fused_value(fusion, args, v, row, col, group=None, residual=None, wide=()):
    """``kernels.gemm.epilogue.apply`` on the f32 value ``v`` of output element (``row``, ``col``), its
    inputs read there (``fused_inputs``; ``wide``: the plan's ``offsets64``)."""
    return fused.apply(fusion, v, fused_inputs(fusion, args, row, col, group, residual, wide), TIR_OPS)


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
                T.ptx[p.epilogue.prefetch](args["residual"].ptr_to(wide_at(
                    p, "residual", inside(p, row_t + mi * 16 + rh * 8, p.M),
                    inside(p, col_t + line * (p.tiling.warp_n // residual_lines(p)), p.N))))


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
                            inside(p, row_t + mi * 16 + rh * 8, p.M), inside(p, col_t + ni * 8 + c2, p.N), group,
                            wide=p.offsets64)


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
    rw = T.decl_tensor(args["residual"].ptr_to(wide_at(p, "residual", inside(p, row, p.M), inside(p, col, p.N - 1))),
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
        cview = T.decl_tensor(args["C"].ptr_to(wide_at(p, "C", row_t, col_t)), ty_args=[c_tile(p, False)])
    if I.constexpr(p.epilogue.convert is None):
        store(p, cview, accv, accv, row_t, col_t, rows_end(p, tile))
    elif I.constexpr(p.epilogue.vector == 2):
        packed = T.alloc_tensor(ty_args=[T.Tensor((p.tiling.mma_m * p.tiling.mma_n * 2,), p.epilogue.convert.dtype, scope="local", layout="default")])
        pv = T.decl_tensor(packed.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 2, 1), p.epilogue.convert.dtype, scope="local", layout=pack_thread(p.tiling.mma_m, p.tiling.mma_n))])
        # cvt.rn.{f16,bf16}x2.f32 d, hi, lo: column c2=1 goes to the high half
        T.cuda.tile.apply(T.ptx[p.epilogue.convert.instr], pv, accv[:, :, :, 1:2], accv[:, :, :, 0:1], scope="thread")
        cw = T.decl_tensor(args["C"].ptr_to(wide_at(p, "C", row_t, col_t)), ty_args=[c_tile(p, True)])
        store(p, cw, pv, accv, row_t, col_t, rows_end(p, tile))
    else:
        # odd N: cvt.rn.{f16,bf16}.f32 into 16-bit registers, each just before its st.global.b16
        bits = T.alloc_tensor(ty_args=[T.Tensor((p.tiling.mma_m * p.tiling.mma_n * 4,), p.epilogue.convert.dtype, scope="local", layout="default")])
        bv = T.decl_tensor(bits.ptr_to([0]), ty_args=[T.Tensor((p.tiling.mma_m, p.tiling.mma_n, 2, 2), p.epilogue.convert.dtype, scope="local", layout=acc_thread(p.tiling.mma_m, p.tiling.mma_n))])
        ch = T.decl_tensor(args["C"].ptr_to(wide_at(p, "C", row_t, col_t)), ty_args=[c_tile(p, True)])
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


# ---- the split-K reduction (EpilogueOp "reduce") --------------------------------------------


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
        reduce_branch_free(p, args["W"], acc, row_t, col_t, workspace_slice(p, k_slice), False, rows_end(p, tile))
    elif I.constexpr(p.epilogue.reduce.vector == 2):
        partials_pairs(p, args["W"], acc, row_t, col_t, workspace_slice(p, k_slice), rows_end(p, tile))
    else:
        for mi in T.unroll(p.tiling.mma_m):
            for ni in T.unroll(p.tiling.mma_n):
                for rh in T.unroll(2):
                    for c2 in T.unroll(2):
                        if T.and_(row_t + mi * 16 + rh * 8 < rows_end(p, tile), col_t + ni * 8 + c2 < p.N):
                            T.ptx[p.epilogue.reduce.instr](
                                args["W"].ptr_to(wide_at(p, "W", workspace_slice(p, k_slice), row_t + mi * 16 + rh * 8,
                                                         col_t + ni * 8 + c2)),
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
            reduce_branch_free(p, args["W"], acc, row_t, col_t, 0, True, rows_end(p, tile))
        elif I.constexpr(p.epilogue.reduce.vector == 2):
            gather_pairs(p, args["W"], acc, row_t, col_t, rows_end(p, tile))
        else:
            gather(p, args["W"], acc, row_t, col_t, rows_end(p, tile))
        if tid == 0:
            args["S"][T.truncmod(pid, per_split)] = T.uint32(0)
        epilogue(p, args, acc, tile, wm, wn, lane)


@T.macro
def gather(p, W, acc, row_t, col_t, m_end):
    # the tile's sum into the accumulators: atomic, W's one slice (then cleared for the next launch);
    # ordered, the slices added in index order (deterministic); rows below m_end (rows_end)
    part = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local", layout="default")])
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                for c2 in T.unroll(2):
                    if T.and_(row_t + mi * 16 + rh * 8 < m_end, col_t + ni * 8 + c2 < p.N):
                        T.ptx["ld.global.cg.f32"](acc[acc_element(p, mi, ni, rh, c2)],
                                                  W.ptr_to(wide_at(p, "W", 0, row_t + mi * 16 + rh * 8, col_t + ni * 8 + c2)))
                        if I.constexpr(is_atomic(p)):
                            T.ptx["st.global.f32"](W.ptr_to(wide_at(p, "W", 0, row_t + mi * 16 + rh * 8, col_t + ni * 8 + c2)),
                                                   T.float32(0))
                        else:
                            for s in T.unroll(1, p.grid.k_splits):
                                T.ptx["ld.global.cg.f32"](part[0], W.ptr_to(wide_at(p, "W", s, row_t + mi * 16 + rh * 8,
                                                                                    col_t + ni * 8 + c2)))
                                acc[acc_element(p, mi, ni, rh, c2)] = acc[acc_element(p, mi, ni, rh, c2)] + part[0]


@T.macro
def partials_pairs(p, W, acc, row_t, col_t, k_slice, m_end):
    # the ordered reduction by column pairs: the slice's partial tile into its own workspace slice,
    # one st.global.v2.f32 per pair (N even: a pair is inside C or outside it whole)
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                if T.and_(row_t + mi * 16 + rh * 8 < m_end, col_t + ni * 8 < p.N):
                    T.ptx[p.epilogue.reduce.instr](
                        W.ptr_to(wide_at(p, "W", k_slice, row_t + mi * 16 + rh * 8, col_t + ni * 8)),
                        acc[acc_element(p, mi, ni, rh, 0)], acc[acc_element(p, mi, ni, rh, 1)])


@T.macro
def partial_group(p, W, acc, k_slice, row, col, e, m_end):
    # one pair (vector 2: accumulators e, e + 1) or element of the branch-free partial store
    ok = T.and_(row < m_end, col + p.epilogue.reduce.vector - 1 < p.N)
    if I.constexpr(p.epilogue.reduce.vector == 2):
        T.ptx[p.epilogue.reduce.instr](W.ptr_to(wide_at(p, "W", k_slice, row, col)), acc[e], acc[e + 1], pred=ok)
    else:
        T.ptx[p.epilogue.reduce.instr](W.ptr_to(wide_at(p, "W", k_slice, row, col)), acc[e], pred=ok)


@T.macro
def reduce_branch_free(p, W, acc, row_t, col_t, k_slice, gathering, m_end):
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
                                     acc_element(p, mi, ni, rh, c * p.epilogue.reduce.vector), m_end)
                    else:
                        partial_group(p, W, acc, k_slice, row_t + mi * 16 + rh * 8,
                                      col_t + ni * 8 + c * p.epilogue.reduce.vector,
                                      acc_element(p, mi, ni, rh, c * p.epilogue.reduce.vector), m_end)


@T.macro
def gather_group(p, W, acc, part, row, col, e, m_end):
    # one element (vector 1) or column pair (vector 2) of the branch-free gather, accumulator index e
    r = T.min(row, p.M - 1)
    c = T.min(col, p.N - p.epilogue.reduce.vector)
    if I.constexpr(p.epilogue.reduce.vector == 2):
        T.ptx[p.epilogue.reduce.gather](acc[e], acc[e + 1], W.ptr_to(wide_at(p, "W", 0, r, c)))
        for s in T.unroll(1, p.grid.k_splits):
            T.ptx[p.epilogue.reduce.gather](part[0], part[1], W.ptr_to(wide_at(p, "W", s, r, c)))
            acc[e] = acc[e] + part[0]
            acc[e + 1] = acc[e + 1] + part[1]
    else:
        T.ptx[p.epilogue.reduce.gather](acc[e], W.ptr_to(wide_at(p, "W", 0, r, c)))
        if I.constexpr(is_atomic(p)):
            T.ptx["st.global.f32"](W.ptr_to(wide_at(p, "W", 0, r, c)), T.float32(0), pred=T.and_(row < m_end, col < p.N))
        else:
            for s in T.unroll(1, p.grid.k_splits):
                T.ptx[p.epilogue.reduce.gather](part[0], W.ptr_to(wide_at(p, "W", s, r, c)))
                acc[e] = acc[e] + part[0]


@T.macro
def gather_pairs(p, W, acc, row_t, col_t, m_end):
    # the ordered gather by column pairs: slices 0, 1, ... added in index order (deterministic)
    part = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local", layout="default")])
    for mi in T.unroll(p.tiling.mma_m):
        for ni in T.unroll(p.tiling.mma_n):
            for rh in T.unroll(2):
                if T.and_(row_t + mi * 16 + rh * 8 < m_end, col_t + ni * 8 < p.N):
                    T.ptx[p.epilogue.reduce.gather](
                        acc[acc_element(p, mi, ni, rh, 0)], acc[acc_element(p, mi, ni, rh, 1)],
                        W.ptr_to(wide_at(p, "W", 0, row_t + mi * 16 + rh * 8, col_t + ni * 8)))
                    for s in T.unroll(1, p.grid.k_splits):
                        T.ptx[p.epilogue.reduce.gather](part[0], part[1],
                                                        W.ptr_to(wide_at(p, "W", s, row_t + mi * 16 + rh * 8, col_t + ni * 8)))
                        acc[acc_element(p, mi, ni, rh, 0)] = acc[acc_element(p, mi, ni, rh, 0)] + part[0]
                        acc[acc_element(p, mi, ni, rh, 1)] = acc[acc_element(p, mi, ni, rh, 1)] + part[1]
