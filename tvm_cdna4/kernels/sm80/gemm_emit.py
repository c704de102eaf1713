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

The macros live in modules by section, and this one re-exports their names (import them from here or
from their homes): ``gemm_emit_common`` (the records, layouts and address helpers), ``gemm_emit_copy``
(global -> shared and shared -> registers), ``gemm_emit_kloop`` (the mma, the k-steps and the pipeline's
prologue) and ``gemm_emit_epilogue`` (the epilogue, the store and the split-K reduction). This module
holds the kernel (one tile, grouped tiles, persistent tiles) and ``emit``.

Variable names bound in the macros (``tid``, ``grow``, ``lof``, ...) name the CUDA variables;
``tests/kernels/sm80/test_cuda_gemm_golden.py`` pins the generated source.
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...tirx_private import transpile_once
from ..gemm.grouped import OFFSETS
from ..gemm.grouped_emit import find_group
from .gemm_emit_common import (  # noqa: F401 (re-exported: callers import them from gemm_emit)
    NextTile, Thread, TileOrigin, _tile, a_fragment_mma, acc_mma, acc_thread, b_fragment_mma, copy_origin,
    fragment_ldmatrix, known_stage, ldmatrix_source, out_thread, out_words, pack_thread, rows_end, tile_origin,
    view_offset, warp_coord,
)
from .gemm_emit_copy import (  # noqa: F401 (re-exported)
    ahead_load, cp_clamped, cp_one, ldm_group, ldm_group_at, ldm_step, load_frags, load_operand, load_operand_cta,
    load_operand_thread, load_part, pick, slice_k_tile, thread_shared,
)
from .gemm_emit_epilogue import (  # noqa: F401 (re-exported)
    TIR_OPS, acc_element, c_tile, epilogue, fuse, fuse_pair, fuse_staged, fused_inputs, fused_value, gather,
    gather_group, gather_pairs, half_of, inside, is_atomic, partial_group, partials_pairs, prefetch_residual,
    reduce_branch_free, residual_lines, residual_pairs, residual_word, split_epilogue, store, store_elements,
    store_tiles, workspace_slice,
)
from .gemm_emit_kloop import (  # noqa: F401 (re-exported)
    commit_and_wait, k_tiles, kstep, kstep_scoped, live_ni, mma_live, mma_row, mma_serpentine, mma_step, next_frags,
    prologue, residual_copy, residual_part, residual_parts, serpentine, zero,
)
from .gemm_plan import GemmPlan, OperandPlan  # noqa: F401 (re-exported)


# ---- the kernel -----------------------------------------------------------------------------


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


# ---- the grouped GEMM (GridPlan.grouping) ---------------------------------------------------


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


# ---- the PrimFunc ---------------------------------------------------------------------------


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
