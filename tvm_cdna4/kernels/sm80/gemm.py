"""Ampere-class tiled GEMM for CUDA (sm_80, also runs on sm_90) written in TVM TIRx.

``C[M, N] = op(A) @ op(B)`` with f16 or bf16 inputs, f32 accumulation and f32/f16/bf16 output.

Layout letters follow BLAS on row-major storage: ``n`` means the operand is stored as it appears in
``A @ B`` (A as ``[M, K]``, B as ``[K, N]``), ``t`` means it is stored transposed (A as ``[K, M]``,
B as ``[N, K]``). So ``nt`` has both operands K-contiguous; the operand whose K is not contiguous
(A in ``t*``, B in ``*n``) is read from shared memory with ``ldmatrix ... .trans``.

Every hardware instruction of the main loop is issued through ``T.cuda.tile.apply``:

* global -> shared: ``cp.async.cg.shared.global`` 16 B chunks (``cp.async.ca`` 8/4 B when the
  leading dimension is not a multiple of 8 elements), zero-filled with ``src_size`` at the edges;
  a multistage pipeline (``commit_group`` / ``wait_group``) of ``config.stages`` tiles, the k-loop
  unrolled by the stage count so that every shared-memory stage offset is an immediate;
* shared -> registers: ``ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16`` from XOR-swizzled
  shared tiles (``ComposeLayout``), so every ldmatrix phase and every cp.async store is
  bank-conflict free; fragments are double-buffered in registers;
* ``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`` on the register tiles;
* epilogue: the fused epilogue when asked for (``kernels.gemm.epilogue``: row / column scales, bias,
  relu / silu / gelu, residual, applied to the f32 accumulators; the keywords ``bias``,
  ``activation``, ``residual``, ``row_scale``, ``col_scale`` of ``build`` and ``cuda_gemm``), then
  ``st.global.v2.f32`` or ``cvt.rn.{f16,bf16}x2.f32`` + ``st.global.b32``.

Blocks are rasterized in groups of ``config.group_m`` block rows so that consecutive blocks share
their A panel and B panels in L2. With ``config.ctas`` > 0 the kernel is persistent: that many CTAs
loop over the rasterized tiles and the cp.async pipeline runs on from one tile into the next.

The schedule is plan -> emission: ``kernels.sm80.gemm_plan.plan`` decides the kernel as a frozen ``GemmPlan``
of named records (tiles, warp grid, the launch grid, per-operand copy and ldmatrix plans, the
k-loop, the epilogue, the kernel's parameters), and ``kernels.sm80.gemm_emit.emit`` spells that plan in TIRx.
This module is the public entry: ``cuda_gemm`` (the PrimFunc), ``build`` (compiled and cached,
keyed by the plan: ``build_key``), the planner's names, and tuning: ``tune_config`` times the cost
model's first candidates and stores the winner under ``tune_key`` (arch, dtypes, layout, N, K, M
bucket), where ``build`` without a ``config`` reads it (``tuned_config``).

Without a ``config`` the tiling is the cost model's choice for the problem and the GPU's SM count
(``choose_config``): small-M tiles (16/32/64 rows) and split-K below M = 256, where a split-K kernel
takes two more parameters, the f32 workspace ``W`` and the ticket counters ``S``, zeroed once and
left zero by every launch (``runtime.cuda.Kernel`` passes them). For M <= ``decode_plan.decode_limit()`` and
layout ``nt`` the planner also weighs the weight-streaming decode kernel (``cuda_decode_plan``: ``DecodeConfig`` ->
``DecodePlan``, emitted by ``cuda_decode_emit``): ``plan``, ``choose_config``, ``build``, ``config_json``
and ``tune_config`` here take either kind (``plan_any``, ``choose_kernel``, ``ranked_configs``).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ...cuda.build import CudaBuild, cached_build as cuda_cached_build, check_compiler, compile_blobs
from ..common import cache_key, check_config
from ..gemm.dynamic_m import DynamicGemm, MBucket, buckets
from ..gemm.grouped import GroupedGemm
from .gemm_plan import (
    DEFAULT_CONFIGS,
    DTYPES,
    H200_SMS,
    LAYOUTS,
    OUT_DTYPES,
    Device,
    GemmConfig,
    GemmPlan,
    OperandTile,
    Swizzle,
    _short_dtype,
    _short_out,
    candidates,
    check_dynamic,
    default_config,
    estimate,
    make_operands,
    operand_shapes,
    plan_record,
    plan_summary,
    swizzle_elem,
    swizzle_shift,
)
from .decode_plan import PLAN_FLAGS as DECODE_FLAGS
from .decode_plan import (
    DecodeConfig,
    DecodePlan,
    choose_kernel,
    config_from_dict,
    decode_summary,
    plan_any,
    ranked_configs,
)
from ..gemm.epilogue import Fusion, fusion_of
from ..flags import FlagSet

PLAN_FLAGS = DECODE_FLAGS
"""The sm80-class GEMM's switches (dense, grouped, the decode kernel: ``kernels.flags``; ``tvm_cdna4.torch``'s
kernel caches key ``plan_flags()``): those of the modules ``build_dynamic`` / ``build_grouped`` import, the decode
kernel's (``decode_plan.PLAN_FLAGS``); the tile GEMM's planner has none."""
plan_flags = FlagSet(PLAN_FLAGS)

plan = plan_any
"""The plan of either kernel (``kernels.sm80.decode_plan.plan_any``): a ``GemmConfig`` plans the tile GEMM
(``kernels.sm80.gemm_plan.plan``), a ``DecodeConfig`` the decode kernel; None: the planner's choice."""

choose_config = choose_kernel
"""The planner's choice over both kernels (``kernels.sm80.decode_plan.choose_kernel``; the tile GEMM's own
choice is ``kernels.sm80.gemm_plan.choose_config``)."""

__all__ = [  # the planner's public names are re-exported here, the CUDA GEMM's entry module
    "PLAN_FLAGS", "plan_flags",
    "DEFAULT_CONFIGS", "DTYPES", "H200_SMS", "LAYOUTS", "OUT_DTYPES", "CudaBuild", "DecodeConfig", "DecodePlan", "Device",
    "DynamicGemm", "Fusion", "GemmConfig", "GemmPlan", "GroupedGemm", "MBucket", "build_dynamic", "build_grouped",
    "build_plan",
    "OperandTile", "Swizzle", "build", "build_key", "candidates", "choose_config", "config_json", "cuda_gemm",
    "cuda_source", "default_config", "estimate", "m_bucket", "make_operands", "operand_shapes", "plan",
    "plan_record", "plan_summary", "ranked_configs", "schedule_digest", "swizzle_elem", "swizzle_shift", "TUNE_TOP",
    "tune_candidates", "tune_config", "tune_key", "choose_kernel", "config_from_dict", "decode_summary", "emit_any",
    "plan_any",
    "plan_json", "tuned_config",
]


def cuda_gemm(
    M: int,
    N: int,
    K: int,
    dtype: str = "f16",
    layout: str = "nt",
    out_dtype: str = "f32",
    config: GemmConfig | DecodeConfig | None = None,
    *,
    bias: bool = False,
    activation: str | None = None,
    residual: bool = False,
    row_scale: bool = False,
    col_scale: bool = False,
    fusion: Fusion | None = None,
):
    """Build the TIRx PrimFunc ``main(A, B, C[, row_scale, col_scale, bias, residual][, W, S])`` for one
    static problem size; the keywords (or ``fusion``) ask for the fused epilogue (``kernels.gemm.epilogue``)."""
    fusion = fusion_of(bias, activation, residual, row_scale, col_scale, fusion)
    return emit_any(plan(M, N, K, dtype, layout, out_dtype, config, fusion=fusion))


def emit_any(p):
    """The PrimFunc of a plan of either kernel (``kernels.sm80.gemm_emit.emit`` / ``kernels.sm80.decode_emit.emit_decode``)."""
    if isinstance(p, DecodePlan):
        from .decode_emit import emit_decode

        return emit_decode(p)
    from .gemm_emit import emit

    return emit(p)


def build(M, N, K, dtype="f16", layout="nt", out_dtype="f32", config=None, arch="sm_80", compiler=None,
          cache=True, tune=False, sms=H200_SMS, timer=None, *, bias=False, activation=None, residual=False,
          row_scale=False, col_scale=False, fusion=None) -> CudaBuild | DynamicGemm:
    """Compile for CUDA. ``M=None``: dynamic M, ``build_dynamic`` (a ``DynamicGemm``; no ``config``,
    no ``tune``).

    ``bias``, ``activation`` (``relu``, ``silu``, ``gelu``), ``residual``, ``row_scale``, ``col_scale`` (or
    ``fusion``, a ``kernels.gemm.epilogue.Fusion``) ask for the fused epilogue: the kernel then takes
    those inputs after C (``kernels.gemm.epilogue.PARAM_ORDER``). The planner's choice of tiling does
    not weigh them; the plan, and so the cache key, carries them.

    Without a ``config``: the tuned tiling stored for this problem's key (``tuned_config``), else
    the planner's choice (``choose_config`` for ``sms`` SMs); ``tune=True`` first times the
    candidates (``tune``, with ``timer``) and stores the winner. ``compiler``: the device compiler
    that turns the generated CUDA C into machine code when the module is loaded: None for TIRx's
    default (NVRTC), or ``"nvcc"`` / ``"nvrtc"`` (TIRx's ``backend_config``; the loading machine
    must have it). ``cache``: read and write the on-disk build cache (``tvm_cdna4.cache``), keyed
    by the plan (``build_key``)."""
    fused = fusion_of(bias, activation, residual, row_scale, col_scale, fusion)
    if M is None:
        if config is not None or tune:
            raise ValueError("dynamic M (M=None) plans every M bucket with the cost model: no config or tune")
        return build_dynamic(N, K, dtype, layout, out_dtype, arch, compiler, cache, sms, fusion=fused)
    _check_compiler(compiler)
    if tune:
        config = tune_config(M, N, K, dtype, layout, out_dtype, arch, sms, timer)
    elif config is None and cache:
        config = tuned_config(M, N, K, dtype, layout, out_dtype, arch, sms)
    return build_plan(plan(M, N, K, dtype, layout, out_dtype, config, sms, fusion=fused), arch, compiler, cache)


_check_compiler = check_compiler  # the CUDA build's (cuda.build.check_compiler)


def build_plan(p: GemmPlan | DecodePlan, arch="sm_80", compiler=None, cache=True) -> CudaBuild:
    """Compile one plan through the build cache (keyed by ``build_key``: the plan record, so a
    dynamic-M plan's key holds its bucket)."""
    return cached_build("cuda-gemm", build_key(p, arch, compiler), p, arch, compiler, cache=cache)


def cached_build(kind: str, key: dict, p, arch, compiler, emit=None, cache: bool = True) -> CudaBuild:
    """``_compile(p, arch, compiler, emit)`` through the build cache (``cuda.build.cached_build``) as a
    ``CudaBuild``: the GEMMs' ``build_plan`` and the attention's ``build_sm80_attention``."""
    return cuda_cached_build(kind, key, lambda: _compile(p, arch, compiler, emit), p.config, cache)


def build_dynamic(N, K, dtype="f16", layout="nt", out_dtype="f32", arch="sm_80", compiler=None, cache=True,
                  sms=H200_SMS, fusion: Fusion | None = None, **fusion_keywords) -> DynamicGemm:
    """A dynamic-M GEMM (``kernels.gemm.dynamic_m``): N and K static, M the TIR variable ``M`` bound at
    launch; per M bucket (``dynamic_buckets``: the 32-bit ones, then one of 64-bit offsets for A and C) the
    planner's choice at the bucket's representative M (``plan``: either kernel, the decode kernel
    for the first bucket where it wins), built on first use through the build cache. Layouts ``nn``
    and ``nt`` (A stored [M, K]). ``fusion`` / the keywords ``bias=, activation=, residual=,
    row_scale=, col_scale=``: the fused epilogue (``kernels.gemm.epilogue.fusion_of``), its inputs after C.
    Tuned tilings are not read: each bucket takes the cost model's choice."""
    _check_compiler(compiler)
    fused = fusion_of(fusion=fusion, **fusion_keywords)
    layout = layout.lower()
    operand_shapes(1, N, K, layout)  # the layout's own check
    check_dynamic(MBucket(1, 1), layout, None)
    if min(N, K) < 1:
        raise ValueError("N, K must be positive")
    dtype, out_dtype = _short_dtype(dtype), _short_out(out_dtype)
    return DynamicGemm("cuda", dynamic_buckets(N, K),
                       lambda b: plan(b, N, K, dtype, layout, out_dtype, None, sms, fusion=fused),
                       lambda p: build_plan(p, arch, compiler, cache), emit_any,
                       describe=f" {layout} {dtype}->{out_dtype} N={N} K={K}" + (
                           "" if fused.empty else f" epilogue {fused.describe()}"))


def dynamic_buckets(N: int, K: int) -> tuple[MBucket, ...]:
    """The M buckets of a dynamic-M GEMM (``kernels.gemm.dynamic_m.buckets``): up to the last M whose A
    and C offsets are 32-bit (``offsets.int32_rows``: every smaller bucket's plan keeps 32-bit code),
    then one bucket whose plans index A and C with 64-bit offsets, up to the M its grid of the default
    tile (128 x 128 or larger, the plan past ``SMALL_M``) and the ``int32`` M still index
    (``offsets.grid_limit``; 0 rows in the 32-bit part when K or N alone nears 2^31)."""
    from ..gemm import offsets

    int32 = offsets.int32_rows(K, N)
    return buckets(max(int32, offsets.grid_limit(N, 128, 128)), int32)


def build_grouped(G, N, K, dtype="f16", layout="nt", out_dtype="f32", arch="sm_80", compiler=None, cache=True,
                  sms=H200_SMS, fusion: Fusion | None = None, config: GemmConfig | None = None,
                  **fusion_keywords) -> GroupedGemm:
    """A grouped GEMM (``kernels.gemm.grouped``: mixture of experts): ``G`` GEMMs sharing N and K in one
    launch, A ``[T, K]`` with T and the group offsets (``int32 [G + 1]``) known only at run time, B
    ``[G, N, K]`` (layout ``nt``) or ``[G, K, N]`` (``nn``), C ``[T, N]``; the kernel's parameters
    ``A, B, C, offsets``. Per bucket of rows per group (``ceil(T / G)``, ``GroupedGemm``) the tile
    GEMM the cost model chooses for G groups of the bucket's representative rows (``kernels.sm80.gemm_plan.plan``
    with ``groups``: no K split, the small-M tiles for decode counts), built on first use through the
    build cache. ``fusion`` / the keywords: the fused epilogue (``kernels.gemm.epilogue.fusion_of``), its
    inputs after the offsets, ``bias`` and ``col_scale`` per group (``[G, N]``). ``config``: this tiling
    for every bucket instead of the cost model's (no K split, no persistent CTAs; what
    ``benchmarks/grouped_gemm.py --candidates`` times against the model's choice)."""
    from .gemm_plan import check_grouped, plan as tile_plan

    check_config(config, (GemmConfig,), "sm80 GEMM config")  # before the description reads its fields
    _check_compiler(compiler)
    fused = fusion_of(fusion=fusion, **fusion_keywords)
    if isinstance(G, bool) or not isinstance(G, int) or G < 1:
        raise ValueError(f"grouped CUDA GEMM: G (the groups) must be a positive int; got {G!r}")
    if min(N, K) < 1:
        raise ValueError("N, K must be positive")
    layout = layout.lower()
    t_limit = check_grouped(MBucket(1, 1), G, N, K, layout)[2]
    dtype, out_dtype = _short_dtype(dtype), _short_out(out_dtype)
    return GroupedGemm("cuda", G, t_limit,
                       lambda b: tile_plan(b, N, K, dtype, layout, out_dtype, config, sms, fusion=fused, groups=G),
                       lambda p: build_plan(p, arch, compiler, cache), emit_any,
                       describe=f" {layout} {dtype}->{out_dtype} G={G} N={N} K={K}" + (
                           "" if fused.empty else f" epilogue {fused.describe()}") + (
                           "" if config is None else f" tiling {config.block_m}x{config.block_n}x{config.block_k} "
                           f"warps {config.warps_m}x{config.warps_n} stages {config.stages}"))


def m_bucket(M: int) -> int:
    """The M bucket of the tuning cache: M rounded up to a power of two (1, 2, 4, ..., 16, 32, ...)."""
    return 1 << max(0, M - 1).bit_length()


def tune_key(M, N, K, dtype, layout, out_dtype, arch="sm_80", sms=H200_SMS) -> dict:
    """The tuning-cache key: arch, dtypes, layout, N, K, the M bucket (``m_bucket``) and the SM count."""
    return dict(arch=arch, dtype=dtype, out_dtype=out_dtype, layout=layout.lower(), N=N, K=K, m_bucket=m_bucket(M),
                sms=sms)


def tuned_config(M, N, K, dtype="f16", layout="nt", out_dtype="f32", arch="sm_80", sms=H200_SMS) -> GemmConfig | None:
    """The tiling ``tune_config`` stored for this problem's key, or None (none stored, or it does not plan
    for this M: a bucket holds several)."""
    from ...cache import entry_path, load

    blobs = load(entry_path("cuda-tune", tune_key(M, N, K, dtype, layout, out_dtype, arch, sms)), required=("config",))
    if blobs is None:
        return None
    cfg = config_from_dict(json.loads(blobs["config"]))
    try:
        plan(M, N, K, dtype, layout, out_dtype, cfg, sms)
    except ValueError:
        return None
    return cfg


TUNE_TOP = 5
"""How many of the cost model's first candidates ``tune_config`` times (``tune_candidates``)."""


def tune_candidates(M, N, K, dtype="f16", layout="nt", out_dtype="f32", sms=H200_SMS,
                    top: int = TUNE_TOP) -> list[GemmConfig | DecodeConfig]:
    """The ``top`` candidates of both kernels (``ranked_configs``: the tile GEMM's ``candidates`` and,
    where it fits, the decode kernel's) that the cost models rank first on ``sms`` SMs and that plan
    for the problem, fastest estimate first: what tuning times."""
    ranked = []
    for cfg in ranked_configs(M, N, K, dtype, layout, out_dtype, sms):
        try:
            plan(M, N, K, dtype, layout, out_dtype, cfg, sms)
        except ValueError:
            continue
        if cfg not in ranked:
            ranked.append(cfg)
        if len(ranked) == top:
            break
    return ranked


def tune_config(M, N, K, dtype="f16", layout="nt", out_dtype="f32", arch="sm_80", sms=H200_SMS,
         timer: Callable[[GemmConfig | DecodeConfig], float] | None = None,
         top: int = TUNE_TOP) -> GemmConfig | DecodeConfig:
    """Time the ``top`` candidates the cost model ranks first (``tune_candidates``) and store the
    fastest in the build cache under ``tune_key``, where later builds read it.
    ``timer(config)``: seconds of one launch of the kernel built with ``config`` (on a GPU:
    ``runtime.cuda.gpu_timer``, which ``runtime.cuda.compile_and_load(tune=True)`` passes, or the
    measurements of ``runtime.cuda.tune_problems``, which builds the candidates in parallel)."""
    from ...cache import entry_path, store

    if timer is None:  # the GPU timer lives in the runtime layer, above this one
        raise ValueError("tune_config needs a timer(config) -> seconds: on a GPU, runtime.cuda.gpu_timer(M, N, K, "
                         "...), which runtime.cuda.compile_and_load(..., tune=True) passes")
    best = min(tune_candidates(M, N, K, dtype, layout, out_dtype, sms, top), key=timer)
    store(entry_path("cuda-tune", tune_key(M, N, K, dtype, layout, out_dtype, arch, sms)),
          {"config": json.dumps(best.as_dict()).encode()})
    return best


def config_json(M, N, K, dtype="f16", layout="nt", out_dtype="f32", config=None, sms=H200_SMS,
                fusion: Fusion | None = None) -> str:
    """``--emit config``: the plan of ``config`` (None: the planner's choice) as one JSON object,
    the tiling's every field and the plan's summary (``plan_summary``: ``split_k``, ``block_m``,
    CTAs, the fused epilogue, the cost model's estimate)."""
    return plan_json(plan(M, N, K, dtype, layout, out_dtype, config, sms, fusion=fusion or Fusion()), sms)


def plan_json(p: GemmPlan | DecodePlan, sms=H200_SMS) -> str:
    """A plan of either kernel as ``config_json``'s JSON object (a dynamic-M plan's with its bucket; the
    extents that depend on its M, such as the launched CTAs, as text)."""
    return json.dumps(summary(p, sms), default=str)


def summary(p: GemmPlan | DecodePlan, sms=H200_SMS) -> dict:
    """A plan of either kernel as one JSON object: the tiling's every field, ``split_k``, the grid, the
    fused epilogue and the cost model's estimate on ``sms`` SMs (``plan_summary`` / ``decode_summary``)."""
    if isinstance(p, DecodePlan):
        return {**p.config.as_dict(), **decode_summary(p, sms)}
    return {"kind": "tile", **p.config.as_dict(), **plan_summary(p, sms)}


def build_key(p: GemmPlan | DecodePlan, arch: str = "sm_80", compiler: str | None = None) -> dict:
    """The build-cache key of a plan: its every field (``plan_record``), the target arch, the device
    compiler and the schedule's source digest. A plan that differs in any field, a field added
    included, gets its own key."""
    return cache_key("sm80", p, schedule_digest(), arch=arch, compiler=compiler)


def schedule_digest() -> str:
    """SHA-256 of the schedule's code (planner, emission, the fused epilogue's formulas) and of the
    TIRx internals its builds use (``tirx_private``): part of the build-cache key, so an edited
    schedule never gets a kernel cached before the edit under the same version string."""
    from ...cache import source_digest

    return source_digest("kernels/sm80/gemm*.py", "kernels/sm80/decode*.py", "kernels/gemm/*.py", "kernels/common.py",
                         "cuda/*.py", "tirx_private.py")


def _compile(p: GemmPlan, arch, compiler, emit=None) -> dict[str, bytes]:
    """Run TIRx on the plan's PrimFunc (``emit``, default ``emit_any``: the GEMMs; the attention build
    passes its own emitter): ``cuda.build.compile_blobs``."""
    return compile_blobs((emit or emit_any)(p), arch, compiler)


def cuda_source(exe) -> str:
    """The generated CUDA C source of a built kernel."""
    return exe.source
