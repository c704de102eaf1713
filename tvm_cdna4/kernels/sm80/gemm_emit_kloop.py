"""The CUDA GEMM's k-loop in TIRx: the mma of a k-step (one apply, serpentine, or a short tile's live
rows), the k-step (next fragments, copies ahead, the residual's copy into freed stages, barrier, mma:
``kstep``), whole k-tiles (``k_tiles``) and the pipeline's prologue.
Part of the CUDA GEMM's emission (``kernels.sm80.gemm_emit``, whose docstring tells the whole)."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.tirx.layout import S, TileLayout

from .gemm_emit_common import a_fragment_mma, acc_mma, b_fragment_mma, wide_at
from .gemm_emit_copy import ahead_load, load_frags, load_part
from .gemm_plan import GemmPlan


# ---- mma and the k-loop ---------------------------------------------------------------------


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
        gv = T.decl_tensor(th.R.ptr_to(wide_at(p, "residual", tile.m0 + part * p.epilogue.residual_rows + row, tile.n0 + col)),
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
    # the next k-step's fragments, where there is one (KStep.fragments; a short tile's warp: only with
    # rows, Thread.live)
    if I.constexpr(step.fragments and th.live is None):
        next_frags(p, th, rs, step)
    elif I.constexpr(step.fragments):
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
