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

The plan's parts have their own modules, and this one re-exports their names (import them from here or
from their homes): ``gemm_config`` (the tiling, dtypes, instructions), ``gemm_plan_operands`` (the
swizzle, the operand tiles, their copies and ``ldmatrix`` reads), ``gemm_plan_kloop`` (the k-steps and
the k-loop), ``gemm_plan_epilogue`` (the epilogue's operations and store) and ``gemm_cost`` (the cost
model, the candidates and the choice). This module holds the whole plan's records (:class:`Tiling`,
:class:`GridPlan`, :class:`GemmPlan`) and the planner (``plan``, its checks, ``plan_summary``).
"""

from __future__ import annotations

import operator
from dataclasses import asdict, is_dataclass

import attrs

from ..common import PlanRecord, check_config

from ..gemm.dynamic_m import (  # noqa: F401 (ceil_div, is_static...: re-exported, callers import them from here)
    MBucket, ceil_div, check_layout, divides, extent_record, is_static, m_limit, resolve_m,
)
from ..gemm import offsets
from ..gemm.epilogue import Fusion, Param
from ..gemm.grouped import OFFSETS, SEARCHES, Groups, expected_row_tiles, tail_rows  # noqa: F401 (re-exported)
from .gemm_config import (  # noqa: F401 (re-exported: the plan's names, importable from here)
    DEFAULT_CONFIGS, DTYPES, LAYOUTS, LDMATRIX, LDMATRIX_TRANS, MMA, OUT_DTYPES, Extent, GemmConfig, _short_dtype,
    _short_name, _short_out, default_config, fit_stages, operand_shapes,
)
from .gemm_cost import (  # noqa: F401 (re-exported)
    H200_SMS, PIPELINES, SMALL_M, Device, Estimate, _resident, _search_s, _sm_time, candidates, choose_config,
    estimate, grouped_candidates, replan_stages,
)
from .gemm_plan_epilogue import (  # noqa: F401 (re-exported)
    PREFETCH_AHEAD, RESIDUAL_PAD, Epilogue, EpilogueOp, _store_epilogue, fuse_op, plan_epilogue, plan_prefetch,
    plan_residual_stage,
)
from .gemm_plan_kloop import KLoop, KStep, mma_order, plan_k_steps
from .gemm_plan_operands import (  # noqa: F401 (re-exported)
    CopyPlan, LaneAddress, LdmatrixGroup, LdmatrixPlan, OperandPlan, OperandTile, Swizzle, _check_warp_offsets_neutral,
    _ldmatrix_steps, _thread_copy, _vec_for, clamp_rows, ldmatrix_view, make_operands, plan_copy, plan_ldmatrix,
    split_offset, swizzle_elem, swizzle_shift, swizzle_word,
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
    offsets64: tuple[str, ...] = ()
    """The parameters in which an element offset can reach 2^31 (``kernels.gemm.offsets``: the largest
    offset the kernel computes, at the bucket's largest M; a grouped plan's B: one group's weights): the
    emission indexes them with 64-bit offsets (``gemm_emit_common.wide_index``). () for every smaller
    problem, whose index arithmetic is 32-bit."""


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
# The planner
# ----------------------------------------------------------------------------------------------


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


def plan(M: int | MBucket, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
         config: GemmConfig | None = None, sms: int = H200_SMS, fusion: Fusion = Fusion(), groups: int = 0) -> GemmPlan:
    """The plan of the GEMM ``C[M, N] = epilogue(op(A) @ op(B))`` for one static problem size, or for a
    bucket of M (``M`` an ``MBucket``: dynamic M, ``check_dynamic``; ``fusion``: the fused epilogue,
    ``kernels.gemm.epilogue``); without a ``config``, the cost model's choice for a GPU of ``sms`` SMs
    (``choose_config``, which does not weigh the fusion; a bucket's at its representative M).
    ``groups`` > 0: a grouped GEMM (``kernels.gemm.grouped``) of that many groups, ``M`` the bucket of rows
    per group the tiling is chosen for; the plan's M is then the run-time total T (``check_grouped``)."""
    check_config(config, (GemmConfig,), "sm80 GEMM config")
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
    if groups and cfg.split_k > 1:  # the workspace of the bucket's largest T (GroupedGemm dispatches no more)
        bucket = MBucket(1, min(m_max, rows.hi * groups))
        m_max = bucket.hi
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
    kloop = KLoop(form, cfg.stages, kt, kt // cfg.stages, kt % cfg.stages, plan_k_steps(cfg, tiling.k_steps, kt),
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
        tickets = grouping.row_tiles(m_max) if grouping else ceil_div(m_max, cfg.block_m)
        params += (Param("W", (slices, m_max, N), "float32"), Param("S", (tickets * gn,), "uint32"))
    wide = plan_offsets(params, (a, b), (a_shape, b_shape), m_max, K, cfg, kt, grouping)
    return GemmPlan(M, N, K, dt, layout, cfg, tiling, grid, a, b, MMA.format(t=ab),
                    stage_elems, cfg.stages * stage_elems, kloop, epilogue, params, fusion, bucket, wide)


KERNEL = "sm80 GEMM"
"""The kernel a refusal of ``plan_offsets`` names."""


def plan_offsets(params, ops, shapes, m_max: int, K: int, cfg: GemmConfig, kt: int, grouping) -> tuple[str, ...]:
    """``GemmPlan.offsets64``: the parameters whose largest computed element offset (``offsets.reach``:
    A and B with their tiles' overhang past M, N and the slices' K, C, the residual and the workspace
    with the tile's past M and N; M at the bucket's largest) reaches 2^31. A ``ContractError`` naming the
    operand for what stays 32-bit: an extent or the tile grid of 2^31 or more, a copy view whose rows are
    2^31 bits apart (``offsets.check_extent``, ``check_view``)."""
    over = {"M": cfg.block_m, "N": cfg.block_n, "K": kt * cfg.split_k * cfg.block_k - K}
    tensors = {}
    for op, shape in zip(ops, shapes):  # a grouped B: one group's weights (B[g] is an int64 offset)
        rows, cols = ("K", "M" if op.name == "A" else "N") if op.tile.trans else ("M" if op.name == "A" else "N", "K")
        tensors[op.name] = (concrete(shape, m_max), (over[rows], over[cols]))
        strides = op.copy.thread_global_strides if op.copy.kind == "thread" else [s for _, s in op.copy.global_iters]
        offsets.check_view(KERNEL, op.name, strides, 16)
    for q in params:
        shape = concrete(q.shape, m_max)
        for axis, extent in enumerate(shape):
            offsets.check_extent(KERNEL, q.name, f"dimension {axis}", extent)
        if q.name in ("C", "residual", "W"):
            tensors[q.name] = (shape, (over["M"], over["N"]))
    tiles = (grouping.row_tiles(m_max) if grouping else ceil_div(m_max, cfg.block_m)) * ceil_div(shape_n(params), cfg.block_n)
    offsets.check_extent(KERNEL, "C", "the tile grid (CTAs)", tiles * cfg.split_k)
    return offsets.offsets64(tensors)


def concrete(shape, m_max: int) -> tuple[int, ...]:
    """``shape`` with a dynamic M (a TIR expression) at its largest value ``m_max``."""
    return tuple(d if is_static(d) else m_max for d in shape)


def shape_n(params) -> int:
    """N: C's columns."""
    return next(q.shape[1] for q in params if q.name == "C")


def check_grouped(rows, groups: int, N: int, K: int, layout: str) -> tuple[MBucket, MBucket, int]:
    """What a grouped plan needs (``kernels.gemm.grouped``): ``rows`` an ``MBucket`` (the rows per group
    the tiling is chosen for), a layout of ``kernels.gemm.grouped.LAYOUTS``. Returns ``(rows, the bucket of
    T: 1 .. the largest T, the largest T)``: T, the run-time total, is the plan's dynamic M, up to what A
    and C index with 32-bit offsets (``offsets.int32_rows(K, N)``; a larger T is refused at dispatch,
    ``GroupedGemm.bucket``). One group's weights of 2^31 elements or more take 64-bit offsets
    (``plan_offsets``: B)."""
    from ..gemm.grouped import check_layout as check_grouped_layout

    if not isinstance(rows, MBucket):
        raise TypeError(f"grouped CUDA GEMM: M must be the MBucket of rows per group the tiling is chosen for; got {rows!r}")
    check_grouped_layout(layout, "grouped CUDA GEMM")
    t_limit = offsets.int32_rows(K, N)
    if t_limit < 1:
        raise offsets.refusal(KERNEL, "A", f"A [T, {K}] and C [T, {N}] must index a tile of rows in 32 bits",
                              "max(K, N) < 2^31 / 257", str(max(K, N)), "split N or K")
    return rows, MBucket(1, t_limit), t_limit


def grouped_tiles(groups: int, rows: MBucket | None, cfg: GemmConfig) -> Groups | None:
    """The grid's ``Groups`` record of a grouped plan (None for one GEMM): no persistent CTAs (a CTA's rows
    are known only after its search). A K split (a decode plan, ``gemm_cost.choose_decode``) reduces through
    the workspace at the global rows, every slice's partial and the gather masked at the group's end (a
    tile's rows past it are the next group's), a ticket per (row tile, column tile); its bucket of T ends at
    ``rows.hi * G`` (the workspace's rows: ``plan``)."""
    if not groups:
        if getattr(cfg, "live_rows", False) or getattr(cfg, "group_search", "binary") != "binary":
            raise ValueError("live_rows (short row tiles) and group_search are grouped GEMM options (a group's "
                             "last row tile, finding a CTA's group)")
        return None
    if cfg.ctas:
        raise ValueError(f"grouped CUDA GEMM: one CTA per output tile and K slice (ctas=0); got ctas={cfg.ctas}")
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
