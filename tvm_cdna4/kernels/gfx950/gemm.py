"""gfx950 GEMM from the CDNA4 patterns and plain TIRx: ``C = op(A) @ op(B)``, per dtype.

Layout strings name how A and B are stored: ``n`` = as used (A ``M x K``, B ``K x N``, row-major),
``t`` = transposed (A stored ``K x M``, B stored ``N x K``). The operand whose K is contiguous in
memory keeps K contiguous in LDS and is read with wide LDS loads; the other keeps M/N contiguous
and reaches the MFMA layout through ``ds_read_tr`` (8/16-bit types; 32/64-bit types have no
transposing load and use per-element LDS reads).

fp8/bf8 (all four A/B combinations) run on the scaled ``f8f6f4`` MFMAs (16x16x128, 32x32x64: twice
the rate of the dense fp8 MFMAs on gfx950) with unit E8M0 scales (127 = 2^0) in a constant
register; the format codes ``cbsz`` (A) and ``blgp`` (B) select fp8 (E4M3, 0) or bf8 (E5M2, 1) per
operand. Their fragments are ``uint8`` element tiles like every other dtype's (``patterns.mfma``):
32 consecutive K bytes per lane, two 16-byte LDS reads or four ``ds_read_tr8``.

Structure: 256-thread workgroups (4 waves in a 2 x 2 grid over the ``block_m x block_n`` tile);
a software pipeline over ``block_k`` tiles (``kernels.gfx950.pipeline.fragment_pipeline``) with two LDS stages and
two MFMA fragment register sets: period ``p`` stores the staged registers of tile ``p + 1`` into
its LDS stage, buffer-loads tile ``p + 1 + load_ahead``, reads tile ``p``'s fragments into one set
and runs tile ``p - 1``'s MFMAs from the other, then one ``s_waitcnt`` and one barrier: the only
waits of the main loop (``sched.group.barrier`` groups interleave the memory instructions with the
MFMAs). LDS rows are padded (``lds_pad`` bytes) so that the 16 lanes of a wide or transposing read
hit different banks. Edges: global loads outside the matrices read
zeros (buffer range check, or clamped element loads); the epilogue stores only inside C.
docs/gfx950_gemm.md explains the choices.

Plan -> emission: ``plan_gfx950_gemm`` (``gfx950_plan``, no TIRx) is a pure function of the problem and the config returning a
frozen ``Gfx950GemmPlan`` (tile, MFMA, repeats, per-operand ``OperandPlan``: storage, LDS stage,
global chunks, ds_read_tr or not, LDS reads; the interleave program; the ``Grid``, the ``Epilogue``
and the kernel's parameters); ``emit_gfx950_gemm`` (``gfx950_gemm_emit``) builds the PrimFunc from
it with the emitter shared with the MX GEMM (``gfx950_emit``: fragment readers, MFMA step, tile
origin, epilogue store, the pipeline's records ``Stage``, ``Staging``, ``Fragments``,
``WaveState``).

The fused epilogue (``kernels.gemm.epilogue``: row and column scales, bias, activation, residual) is
part of the plan (``Epilogue.fusion``), asked for with the keywords of ``gfx950_gemm`` and ``build``
(``bias=True, activation="gelu", ...``) or ``fusion=Fusion(...)``; docs/gfx950_gemm.md, "Fused epilogue".

This module is the public entry of both gfx950 GEMMs and imports no TIRx: ``gfx950_gemm`` (the
PrimFunc), ``build`` (compiled and cached, dense and MX dtypes, keyed by the plan) and the
planner's names.
"""

from __future__ import annotations

from ..gemm.dynamic_m import DynamicGemm, MBucket, buckets, m_limit
from ..gemm.epilogue import Fusion, fusion_of
from ..gemm.grouped import GroupedGemm
from .gemm_plan import (DTYPES, FORMAT_CODES, LAYOUTS, MX_FORMATS, UNIT_SCALES, Epilogue, Gfx950GemmConfig,
                          Gfx950GemmPlan, Grid, MxGemmConfig, MxGemmPlan, OperandPlan, Param, default_config,
                          default_mx_config, dma_config, plan_gfx950_gemm, plan_mx_gemm)


def gfx950_gemm(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None,
                config: Gfx950GemmConfig | None = None, batch: int = 0, k_splits: int = 1, *, bias: bool = False,
                activation: str | None = None, residual: bool = False, row_scale: bool = False,
                col_scale: bool = False, fusion: Fusion | None = None):
    """PrimFunc ``(A, B, C, *fused inputs, *workspace)`` (with ``batch``: a leading batch axis on A, B, C) for gfx950.

    A is ``(M, K)`` for layout ``n?`` and ``(K, M)`` for ``t?``; B is ``(K, N)`` for ``?n`` and
    ``(N, K)`` for ``?t``; C is ``(M, N)`` in ``out_dtype`` (bf16 outputs and inputs are int16 bit
    patterns in the signature; numpy bfloat16 arrays pass as they are). ``k_splits`` > 1: split-K,
    the partial products added into C with f32 atomics (f32 output; C must hold zeros on entry), or
    reduced through the workspace ``W``, ``S`` (zeroed once). The fused epilogue (``bias``,
    ``activation``, ``residual``, ``row_scale``, ``col_scale``, or ``fusion=Fusion(...)``;
    ``kernels.gemm.epilogue``) adds its inputs after C in ``PARAM_ORDER``.
    """
    from ...rocm.build import register

    register()
    fused = fusion_of(bias, activation, residual, row_scale, col_scale, fusion)
    return emit_gfx950_gemm(plan_gfx950_gemm(M, N, K, dtype, layout, out_dtype, config, batch, k_splits, fused))


def emit_gfx950_gemm(plan: Gfx950GemmPlan):
    """The PrimFunc of a plan (``gfx950_gemm_emit``)."""
    from .gemm_emit import emit_gfx950_gemm as emit

    return emit(plan)


def plan(M, N, K, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None, config=None,
         batch: int = 0, k_splits: int = 1, fusion: Fusion | None = None) -> Gfx950GemmPlan | MxGemmPlan:
    """The plan of either gfx950 GEMM: ``plan_mx_gemm`` for the MX dtypes (``out_dtype`` None or
    f32, no batch, no K split), else ``plan_gfx950_gemm``; ``fusion``: the fused epilogue."""
    if dtype not in MX_FORMATS:
        return plan_gfx950_gemm(M, N, K, dtype, layout, out_dtype, config, batch, k_splits, fusion)
    if isinstance(M, MBucket):
        raise ValueError(f"MX GEMM: dynamic M is for the dense dtypes ({', '.join(DTYPES)}); got {dtype}")
    if out_dtype not in (None, "f32") or batch or k_splits != 1:
        raise ValueError(f"MX GEMM: f32 output without a batch axis or K split only; got out_dtype={out_dtype!r}, "
                         f"batch={batch}, k_splits={k_splits}")
    return plan_mx_gemm(M, N, K, dtype, layout, config, fusion)


def emit(plan: Gfx950GemmPlan | MxGemmPlan):
    """The PrimFunc of either plan."""
    from ...rocm.build import register

    register()
    if isinstance(plan, MxGemmPlan):
        from .mx_gemm import emit_mx_gemm

        return emit_mx_gemm(plan)
    return emit_gfx950_gemm(plan)


def schedule_digest() -> str:
    """SHA-256 of everything a gfx950 GEMM's code comes from: the schedules, the tile patterns, the
    LLVM IR helpers, the kernel rules and the build (``cache.source_digest``)."""
    from ...cache import source_digest

    return source_digest("kernels/gfx950/*.py", "kernels/gemm/*.py", "kernels/common.py", "patterns/*.py", "rocm/*.py",
                         "isa/*.py", "tirx_private.py")


def cache_key(plan: Gfx950GemmPlan | MxGemmPlan) -> dict:
    """The build-cache key of a plan (``kernels.common.cache_key``): the whole plan record (every
    field, so a new plan field can never serve a stale kernel) and the schedule's source digest."""
    from ..common import cache_key as key

    return key("gfx950", plan, schedule_digest())


def build(M, N, K, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None, config=None, batch: int = 0,
          cache: bool = True, k_splits: int | None = None, *, bias: bool = False, activation: str | None = None,
          residual: bool = False, row_scale: bool = False, col_scale: bool = False, fusion: Fusion | None = None):
    """``tvm_cdna4.build`` of the gfx950 GEMM (dense or MX ``dtype``; ``config`` a
    ``Gfx950GemmConfig`` or ``MxGemmConfig``; None: for a dense dtype the cost model's plan
    (``gemm_plan.plan_for``: tile, waves and, unless ``k_splits`` is given, the K split), as the CLI
    and ``kernels.gemm.build`` run; for an MX dtype its default config) through the on-disk build cache
    (``tvm_cdna4.cache``, keyed by ``cache_key(plan)``): the LLVM IR, assembly and code object are
    cached, so a warm build runs the planner only (no TIRx); ``executable`` is None on a hit.
    ``cache=False`` neither reads nor writes the cache. The fused epilogue: ``bias``, ``activation``
    ("relu", "silu", "gelu"), ``residual``, ``row_scale``, ``col_scale`` (``kernels.gemm.epilogue.fusion_of``),
    or ``fusion=Fusion(...)``; it is part of the plan, hence of the key. ``M=None``: dynamic M,
    ``build_dynamic`` (a ``DynamicGemm``; no config, batch or K split: the planner chooses per bucket)."""
    fused = fusion_of(bias, activation, residual, row_scale, col_scale, fusion)
    if M is None:
        if config is not None or batch or k_splits not in (None, 1):
            raise ValueError("dynamic M (M=None) plans every M bucket with the cost model: no config, batch or k_splits")
        return build_dynamic(N, K, dtype, layout, out_dtype, cache, fusion=fused)
    if config is None and k_splits is None and dtype not in MX_FORMATS:
        from .gemm_plan import plan_for

        return build_plan(plan_for(M, N, K, dtype, layout, out_dtype, batch, fusion=fused), cache)
    return build_plan(plan(M, N, K, dtype, layout, out_dtype, config, batch, k_splits or 1, fused), cache)


def build_dynamic(N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str | None = None,
                  cache: bool = True, fusion: Fusion | None = None, **fusion_keywords) -> DynamicGemm:
    """A dynamic-M dense GEMM (``kernels.gemm.dynamic_m``): N and K static, M the TIR variable ``M``; per
    M bucket (up to ``m_limit``: 31-bit buffer offsets of A, int32 offsets of C) the plan of
    ``kernels.gfx950.gemm_plan.plan_for`` at the bucket's representative M (tile, waves, K split), built on first
    use through the build cache. Layouts ``nn`` and ``nt``. ``fusion`` / the keywords: the fused
    epilogue (``kernels.gemm.epilogue.fusion_of``)."""
    from .gemm_plan import check_dynamic, plan_for

    fused = fusion_of(fusion=fusion, **fusion_keywords)
    if dtype not in DTYPES:
        raise ValueError(f"gfx950 GEMM: dynamic M is for the dense dtypes {sorted(DTYPES)}; got {dtype!r}")
    check_dynamic(layout, 0)
    plan_gfx950_gemm(1, N, K, dtype, layout, out_dtype, fusion=fused)  # the problem's own checks, before any bucket

    def plan_bucket(bucket: MBucket) -> Gfx950GemmPlan:
        chosen = plan_for(bucket.representative, N, K, dtype, layout, out_dtype, fusion=fused)
        return plan_gfx950_gemm(bucket, N, K, dtype, layout, out_dtype, chosen.config, 0, chosen.grid.k_splits, fused)

    limit = m_limit(K * DTYPES[dtype].elem_bytes, N)
    return DynamicGemm("gfx950", buckets(limit), plan_bucket, lambda p: build_plan(p, cache), emit,
                       describe=f" {layout} {dtype} N={N} K={K}" + ("" if fused.empty else f" epilogue {fused.describe()}"))


def build_grouped(G: int, N: int, K: int, dtype: str = "bf16", layout: str = "nt", out_dtype: str | None = None,
                  cache: bool = True, fusion: Fusion | None = None, **fusion_keywords) -> GroupedGemm:
    """A grouped dense GEMM (``kernels.gemm.grouped``: mixture of experts): ``G`` GEMMs sharing N and K in
    one launch, A ``[T, K]`` with T and the group offsets (``int32 [G + 1]``) known only at run time,
    B ``[G, N, K]`` (``nt``) or ``[G, K, N]`` (``nn``), C ``[T, N]``; the kernel's parameters ``A, B,
    C, offsets``. Per bucket of rows per group (``ceil(T / G)``, ``GroupedGemm``) the tile
    ``kernels.gfx950.gemm_plan.plan_for`` chooses for G groups of the bucket's representative rows (no K split),
    built on first use through the build cache. ``fusion`` / the keywords: the fused epilogue, its
    inputs after the offsets, ``bias`` and ``col_scale`` per group (``[G, N]``)."""
    from .gemm_plan import check_grouped, plan_for

    fused = fusion_of(fusion=fusion, **fusion_keywords)
    if isinstance(G, bool) or not isinstance(G, int) or G < 1:
        raise ValueError(f"grouped gfx950 GEMM: G (the groups) must be a positive int; got {G!r}")
    _, t_range = check_grouped(MBucket(1, 1), G, N, K, dtype, layout, 0, 1)
    plan_gfx950_gemm(1, N, K, dtype, layout, out_dtype, fusion=fused)  # the problem's own checks, before any bucket

    def plan_bucket(bucket: MBucket) -> Gfx950GemmPlan:
        chosen = plan_for(bucket.representative, N, K, dtype, layout, out_dtype, fusion=fused, groups=G)
        return plan_gfx950_gemm(bucket, N, K, dtype, layout, out_dtype, chosen.config, fusion=fused, groups=G)

    return GroupedGemm("gfx950", G, t_range.hi, plan_bucket, lambda p: build_plan(p, cache), emit,
                       describe=f" {layout} {dtype} G={G} N={N} K={K}" + (
                           "" if fused.empty else f" epilogue {fused.describe()}"))


def build_plan(p: Gfx950GemmPlan | MxGemmPlan, cache: bool = True):
    """``build`` of one plan (the build cache keyed by ``cache_key(p)``: a dynamic-M plan's record
    holds its bucket)."""
    from ...rocm.build import cached_build

    return cached_build("gfx950-gemm", cache_key(p), lambda: emit(p), enabled=cache)


__all__ = ["DTYPES", "FORMAT_CODES", "LAYOUTS", "UNIT_SCALES", "DynamicGemm", "Epilogue", "Fusion", "Gfx950GemmConfig",
           "Gfx950GemmPlan", "Grid", "MBucket", "MxGemmConfig", "MxGemmPlan", "OperandPlan", "Param", "build",
           "build_dynamic", "build_grouped", "build_plan", "cache_key", "default_config",
           "default_mx_config", "dma_config", "emit", "emit_gfx950_gemm", "gfx950_gemm", "plan", "plan_gfx950_gemm",
           "plan_mx_gemm", "schedule_digest"]
