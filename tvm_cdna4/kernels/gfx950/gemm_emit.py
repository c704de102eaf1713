"""The dense gfx950 GEMM's emission: ``emit_gfx950_gemm(plan)`` spells a ``Gfx950GemmPlan`` in TIRx
from the emitter's pieces (``gfx950_emit``) and the K-tile pipeline (``pipeline``); the structure is
``gfx950_gemm``'s docstring."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ...isa import CATALOG
from ...patterns.layouts import mfma_fragment
from ...tirx_private import transpile_once
from .emit import (THREADS, Fragments, Stage, Staging, TileOrigin, WaveState, decode, epilogue_store, fragment_reader,
                          k_offset, kernel_function, mfma_step, split_store, staging_sets, tile_origin, unit_scaled_step)
from .gemm_plan import Gfx950GemmPlan, OperandPlan
from ..gemm.grouped_emit import find_group
from .pipeline import chunk_loader, dma_loader, dma_pipeline, fragment_pipeline, lds_stage, schedule_hint


def _reader(plan: Gfx950GemmPlan, operand: OperandPlan):
    """The operand's ``fragment_reader``: ds_read_tr where its M/N is contiguous in LDS and a
    transposing load exists, per-element reads where not, one wide read where K is contiguous."""
    op = CATALOG[plan.mfma]
    E, RK = op.a_elems, plan.repeats[2]
    if operand.transpose_read:
        return fragment_reader(op, operand.name, "tr", plan.elem, E, RK, tr=operand.transpose_read,
                               byte_tiles=plan.format_codes is not None)
    return fragment_reader(op, operand.name, "elements" if operand.mn_contiguous else "wide", plan.elem, E, RK, n=E)


def _mfma(plan: Gfx950GemmPlan):
    """Macro ``mfma(Df, Af, Bf)``: one K step's MFMAs; the scaled ones with unit scales and the
    format codes (``kernels.gfx950.emit.unit_scaled_step``)."""
    if plan.format_codes is None:
        return mfma_step(plan.mfma)
    RM, RN, _ = plan.repeats
    return unit_scaled_step(plan.mfma, RM, RN, plan.format_codes)


def _periods(plan: Gfx950GemmPlan):
    """The pipeline's macros: ``load`` (global -> staging registers), ``store`` (-> LDS), ``read``
    (LDS -> fragments), ``mma``; and the pipeline ``run(stages, staging, frags, state)``."""
    M, N, K, batch = plan.M, plan.N, plan.K, plan.batch
    elem, BK = plan.elem, plan.block[2]
    RM, RN, RK = plan.repeats
    pa, pb, vec = plan.a, plan.b, plan.vec
    chunk_a = chunk_loader(elem, vec, pa.storage, pa.chunks_per_row, pa.mn_contiguous, M * K, max(batch, 1) * M * K,
                           max(batch, 1) * plan.m_max * K)
    chunk_b = chunk_loader(elem, vec, pb.storage, pb.chunks_per_row, pb.mn_contiguous, K * N, max(batch, 1) * K * N)
    frag_a, frag_b, mfma, interleave = _reader(plan, pa), _reader(plan, pb), _mfma(plan), schedule_hint(plan.interleave)
    k0 = k_offset(plan.grid.k_splits > 1, BK)

    @T.macro
    def load(g, s, ko):
        """Every thread's share of K tile ``ko`` of A and B, global -> staging registers (zeros outside)."""
        Ag_ = T.decl_tensor(s.args.A.data, ty_args=[T.Tensor((max(batch, 1) * M * K,), elem)])
        Bg_ = T.decl_tensor(s.args.B.data, ty_args=[T.Tensor((max(batch, 1) * K * N,), elem)])
        for q in T.unroll(pa.chunks):
            chunk_a(g.regs_a, s.args.A, Ag_, s.origin.bz, s.origin.m0, s.tx, q, k0(s, ko))
        for q in T.unroll(pb.chunks):
            chunk_b(g.regs_b, s.args.B, Bg_, s.origin.bz, s.origin.n0, s.tx, q, k0(s, ko))

    @T.macro
    def store(stage, g, s):
        """The staging registers -> the stage's LDS tiles."""
        for q in T.unroll(pa.chunks):
            stage.lds_a[0, (q * 256 + s.tx) // pa.chunks_per_row, T.ramp((q * 256 + s.tx) % pa.chunks_per_row * vec, 1, vec)] = g.regs_a[T.ramp(q * vec, 1, vec)]
        for q in T.unroll(pb.chunks):
            stage.lds_b[0, (q * 256 + s.tx) // pb.chunks_per_row, T.ramp((q * 256 + s.tx) % pb.chunks_per_row * vec, 1, vec)] = g.regs_b[T.ramp(q * vec, 1, vec)]

    @T.macro
    def read(stage, f, s):
        """Every K step's operand fragments of the stage's tile -> the register set."""
        for kk in T.unroll(RK):
            for mi in T.unroll(RM):
                frag_a(f.regs_a, stage.lds_a, mi, kk, s.wm, s.tx % 64)
            for ni in T.unroll(RN):
                frag_b(f.regs_b, stage.lds_b, ni, kk, s.wn, s.tx % 64)

    @T.macro
    def mma(f, s):
        """The MFMAs of a register set's tile, with the period's memory instructions between them."""
        for kk in T.unroll(RK):
            mfma(s.Df, f.Af[:, kk : kk + 1], f.Bf[:, kk : kk + 1])
        interleave()

    if not plan.config.lds_dma:
        return fragment_pipeline(plan.k_steps, load, store, read, mma, plan.config.load_ahead, pa.chunks + pb.chunks)
    dma_run = dma_pipeline(plan.k_steps, _dma_tile_loads(plan), read, mma, pa.dma_loads + pb.dma_loads)

    @T.macro
    def run(stages, staging, frags, s):
        dma_run(stages, frags, s)
    return run


def _dma_tile_loads(plan: Gfx950GemmPlan):
    """Macro ``load(stage, state, ko)`` of ``kernels.gfx950.pipeline.dma_pipeline``: the wave's direct-to-LDS loads
    of K tile ``ko`` of A and B (``kernels.gfx950.pipeline.dma_loader``; the wave issues loads ``4 j + wave``)."""
    M, N, K, batch = plan.M, plan.N, plan.K, plan.batch
    pa, pb, BK = plan.a, plan.b, plan.block[2]
    k0 = k_offset(plan.grid.k_splits > 1, BK)
    _dma_a = dma_loader(pa.dma, plan.vec, pa.storage, pa.mn_contiguous, M * K, max(batch, 1) * M * K)
    _dma_b = dma_loader(pb.dma, plan.vec, pb.storage, pb.mn_contiguous, K * N, max(batch, 1) * K * N)

    @T.macro
    def load(stage, s, ko):
        for j in T.unroll(pa.dma_loads):
            _dma_a(stage.lds_a, s.args.A, s.origin.bz, s.origin.m0, j * 4 + s.tx // 64, s.tx % 64, k0(s, ko))
        for j in T.unroll(pb.dma_loads):
            _dma_b(stage.lds_b, s.args.B, s.origin.bz, s.origin.n0, j * 4 + s.tx // 64, s.tx % 64, k0(s, ko))
    return load


def _tile(plan: Gfx950GemmPlan):
    """Macro ``tile(args, bid, tx, stages, staging)``: the thread's fragment sets, accumulators and
    tile coordinates; the K pipeline over the LDS ``stages`` (and ``staging`` register sets); the
    accumulators -> C through the epilogue (inside C only)."""
    op = CATALOG[plan.mfma]
    M, N, batch = plan.M, plan.N, plan.batch
    elem, acc, out = plan.elem, plan.epilogue.acc, plan.epilogue.out
    RM, RN, RK = plan.repeats
    scaled = plan.format_codes is not None
    la, na = mfma_fragment(op, "A", (RM, RK), byte_tiles=scaled)
    lb, nb = mfma_fragment(op, "B", (RN, RK), byte_tiles=scaled)
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    run = _periods(plan)
    if "reduce" in plan.epilogue.ops:
        store_c = split_store(op, plan.epilogue, plan.grid, plan.block, plan.k_steps, (M, N), (RM, RN))
    else:
        store_c = epilogue_store(op, plan.epilogue, (M, N), (RM, RN), flat=True)

    @T.macro
    def tile(args, bid, tx, stages, staging):
        ra0 = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
        rb0 = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
        ra1 = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
        rb1 = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
        rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), acc, scope="local")])
        Af0 = T.decl_tensor(ra0.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
        Bf0 = T.decl_tensor(rb0.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
        Af1 = T.decl_tensor(ra1.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
        Bf1 = T.decl_tensor(rb1.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
        Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), acc, scope="local", layout=ld)])
        Cg = T.decl_tensor(args.C.data, ty_args=[T.Tensor((max(batch, 1) * M * N,), out)])
        sets = (Fragments(ra0, rb0, Af=Af0, Bf=Bf0), Fragments(ra1, rb1, Af=Af1, Bf=Bf1))
        if I.constexpr(plan.grid.grouping is None):
            origin = tile_origin(plan.grid, plan.block, bid, plan.k_steps)
            bz = origin.bz
            m0 = origin.m0
            n0 = origin.n0
            compute(args, TileOrigin(bz, m0, n0, origin.kt), tx, stages, staging, sets, rd, Df, Cg)
        else:
            grouped(args, bid, tx, stages, staging, sets, rd, Df, Cg)

    @T.macro
    def compute(args, origin, tx, stages, staging, sets, rd, Df, Cg):
        wm, wn = _wave_origin(plan, tx)
        lane = tx % 64
        for r in T.unroll(nd):
            rd[r] = T.cast(0, acc)
        s = WaveState(args, Df, origin, wm, wn, tx)
        run(stages, staging, sets, s)
        store_c(Cg, rd, s, lane)

    @T.macro
    def grouped(args, bid, tx, stages, staging, sets, rd, Df, Cg):
        # the workgroup's row tile -> its group and rows (find_group, Groups.origin); no rows: no work
        idx = decode(plan.grid, bid)
        found = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local")])
        find_group(plan.grid.grouping, args.offsets, idx.row, found)
        g = found[0]
        span = plan.grid.grouping.origin(g, args.offsets[g], args.offsets[g + 1], idx.row, M, T.min)
        m0 = span[0]
        m_end = span[1]
        if T.And(0 <= m0, m0 < m_end):
            Bg = T.decl_tensor(args.B.ptr_to([T.cast(g, "int64"), 0, 0]), ty_args=[T.Tensor(plan.b.storage, elem)])
            compute(args._replace(B=Bg), TileOrigin(0, m0, idx.col * plan.block[1], 0, m_end, g), tx, stages, staging, sets,
                    rd, Df, Cg)
    return tile


def _wave_origin(plan: Gfx950GemmPlan, tx):
    """The wave's first row and column within the tile: 2 x 2 waves (wave ``w``: row ``w // 2``,
    column ``w % 2``) or 1 x 4 (column ``w``); the ``% n`` lets the patterns prove the regions are
    in bounds."""
    if plan.config.waves_m == 2:
        return tx // 128 % 2 * plan.warp_tile[0], tx // 64 % 2 * plan.warp_tile[1]
    return 0, tx // 64 % 4 * plan.warp_tile[1]


@transpile_once
def emit_gfx950_gemm(plan: Gfx950GemmPlan):
    """The PrimFunc ``gemm(*plan.params)`` of a plan (``gfx950_gemm``)."""
    pa, pb, vec, elem = plan.a, plan.b, plan.vec, plan.elem
    tile, dma, load_ahead = _tile(plan), plan.config.lds_dma, plan.config.load_ahead

    @T.macro
    def body(args):
        bid = T.launch_thread("blockIdx.x", plan.groups)
        tx = T.launch_thread("threadIdx.x", THREADS)
        SA0 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
        SA1 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
        if I.constexpr(dma):  # a third LDS stage, no staging registers
            SA2 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
        SB0 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
        SB1 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
        if I.constexpr(dma):
            SB2 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
            tile(args, bid, tx, (Stage(SA0, SB0), Stage(SA1, SB1), Stage(SA2, SB2)), None)
        else:
            ga0 = T.alloc_tensor(ty_args=[T.Tensor((pa.chunks * vec,), elem, scope="local")])
            gb0 = T.alloc_tensor(ty_args=[T.Tensor((pb.chunks * vec,), elem, scope="local")])
            ga1 = T.alloc_tensor(ty_args=[T.Tensor((pa.chunks * vec,), elem, scope="local")])
            gb1 = T.alloc_tensor(ty_args=[T.Tensor((pb.chunks * vec,), elem, scope="local")])
            tile(args, bid, tx, (Stage(SA0, SB0), Stage(SA1, SB1)), staging_sets(load_ahead, Staging(ga0, gb0), Staging(ga1, gb1)))

    return kernel_function("gemm", plan.params, body)


__all__ = ["emit_gfx950_gemm"]
