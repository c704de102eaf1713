"""The GEMM family's verbs on Hopper (``kernels.gemm.TARGETS["sm90"]``): ``plan``, ``choose``, ``emit``,
``build``, ``execute``, ``summary``, from a ``GemmProblem``; ``build_plan`` (a plan through the CUDA
build cache), ``config_from_options`` and ``CODE``.

The kernel: the warp-specialized TMA + wgmma GEMM of ``gemm_plan`` / ``gemm_emit`` (static or dynamic M, layout
``nt``, f16/bf16 or fp8 (e4m3; never the decode kernel: ``decode_keeps``), the fused epilogue; the other problems are refused with a ``ContractError`` naming the
operand). Without a config, the cost model's choice (``gemm_cost.choose_config``) for the planned GPU
(``devices.planned("sm80")``: the present NVIDIA GPU, else the H200); for M <= ``decode_plan.decode_limit()``
(``DECODE_WEIGHED_M``; ``DECODE_MAX_M`` where ``decode_plan.WEIGH_WIDE_DECODE``) the weight-streaming
decode kernel keeps the problem (``kernels.sm80.decode_plan``: a ``DecodePlan``, built here for
``sm_90a``; measured at 1.0x torch.matmul on the H200 and 1.04x on the H100 at M = 1 and 8, where the sm90 tile
kernel was not timed: ``DECODE_KEEPS``). A ``Sm90Config`` plans the sm90 kernel at any M, a ``DecodeConfig`` the
decode kernel. Options: ``sms`` (the SMs the
plan fills), ``arch`` (build: default ``sm_90a``, the arch wgmma and ``setmaxnreg`` need),
``compiler`` (``"nvcc"`` / ``"nvrtc"``, None: TIRx's), ``cache``.

Dynamic M (``GemmProblem(None, N, K, ...)``): ``build`` returns the ``DynamicGemm`` of ``gemm_dynamic`` (one
kernel per bucket of M, each the cost model's plan over the bucket's range of M, the bucket 1..16 the
decode kernel's while ``DECODE_KEEPS``, and 17..32 too where ``WEIGH_WIDE_DECODE``); ``plan(problem, m=...)`` / ``choose`` give the plan of ``m``'s
bucket; a config is refused (every bucket is the cost model's).

Grouped (``GemmProblem(None, N, K, ..., groups=G)``): ``build`` returns the ``GroupedGemm`` of ``_grouped``
(``grouped_plan.plan_bucket`` per bucket of rows per group: the sm80 grouped kernel's plan up to
``grouped_plan.DECODE_ROWS`` rows per group, the sm90 grouped kernel's above; an ``Sm90Config``: that tiling for
every bucket); ``plan(problem, m=T)`` the plan of T's bucket.

``execute`` runs a plan through a GPU runner (``runtime.cuda.run_gemm``), else in the CUDA emulator
(``emulate(..., target="sm90")``: TMA, wgmma, mbarriers, the warp-specialized branches as tasks; at most
sm80's ``EMULATED_MACS`` multiply-adds), so ``gemm.validate(problem, "sm90")`` runs without a GPU.
"""

from __future__ import annotations


from ...cuda.build import CudaBuild, cached_build, check_compiler, compile_blobs
from ..common import cache_key, check_config, option, refused_options
from ..gemm.problem import GemmProblem
from ..flags import FlagSet
from ..sm80.decode_plan import PLAN_FLAGS as DECODE_FLAGS
from ..sm80.gemm_target import EMULATED_MACS
from . import gemm_cost, gemm_shift
from .gemm_dynamic import out_bytes as _out_bytes
from .gemm_fields import FIELD_OPTIONS
from .gemm_plan import (EPILOGUES, OUT_DTYPES, Sm90Config, Sm90Plan, block_k, check_problem, epilogue_choices,
                        plan as make_plan)

DECODE_KEEPS = True
"""Whether the decode kernel keeps M <= ``decode_plan.decode_limit()`` (nt) without a config (the module docstring: the
sm90 kernel was not timed at such M); f16/bf16 only (``decode_keeps``): the decode kernel has no fp8."""
DECODE_DTYPES = ("f16", "bf16")
CONFIG_FLAGS = (("sm90.gemm_plan", "RESIDUAL_CHOICE"), ("sm90.gemm_plan", "WEIGH_CHUNK_RESIDUAL"),
                ("sm90.gemm_plan", "TRIM_LOADS"), ("sm90.gemm_shift", "SHIFT_LAST"), ("sm90.gemm_shift", "SHIFT_TMA"))
"""The switches of ``gemm_plan`` and ``gemm_shift`` (``kernels.flags``), which the sm90 attention's planner imports
too (``attention_target.PLAN_FLAGS``)."""
PLAN_FLAGS = (*(("sm90.gemm_cost", name) for name in (
    "WEIGH_DEEP_WAVES", "WEIGH_ZERO_FILL", "WEIGH_SPLIT_EPILOGUE", "WEIGH_HYBRID", "SPLIT_IN_ONE_WAVE", "WEIGH_CLUSTER",
    "GROUPED_WALK", "WEIGH_SWAP", "WEIGH_SWAP_DYNAMIC", "SWAP_PANEL_ADJACENT", "WEIGH_SWAP_NARROW")),
    ("sm90.gemm_dynamic", "REFINE_BUCKETS"), ("sm90.gemm_dynamic", "FINE_CUTS"), ("sm90.gemm_order", "WEIGH_ORDER"),
    *CONFIG_FLAGS, ("sm90.gemm_target", "DECODE_KEEPS"), *DECODE_FLAGS)
"""The sm90 GEMM's switches (dense and grouped, their decode buckets: ``kernels.flags``; ``tvm_cdna4.torch``'s
kernel caches key ``plan_flags()``): those of the modules ``build`` imports, the decode kernel's among them."""
plan_flags = FlagSet(PLAN_FLAGS)


def decode_keeps(dtype: str) -> bool:
    """Whether the decode kernel may keep a small-M problem of ``dtype`` inputs (``DECODE_KEEPS``; which M:
    ``decode_plan.decode_weighed``)."""
    return DECODE_KEEPS and dtype in DECODE_DTYPES

CODE = {"cuda": "source"}
"""The code ``--emit`` prints of a build (``CudaBuild``), by kind: the attribute that holds it."""

ARCH = "sm_90a"
SOURCES = ("gemm_plan.py", "gemm_boxes.py", "gemm_emit.py", "gemm_epilogue.py", "gemm_cluster.py", "gemm_chunkres.py", "gemm_residual.py", "gemm_store.py", "gemm_shift.py",
           "grouped_plan.py", "grouped_emit.py")
"""The modules the kernel comes from: their digest keys the build cache."""

SHARED_SOURCES = ("kernels/attention/*.py", "kernels/gemm/*.py", "kernels/common.py", "kernels/sm80/gemm_emit_epilogue.py",
                  "patterns/*.py", "probes_wgmma.py", "isa/*.py", "rocm/*.py", "cuda/*.py", "tirx_private.py")
"""What the sm90 kernels' code comes from outside ``kernels/sm90`` (globs relative to the package: the wgmma
patterns, the layouts, the problems, the TIR registrations): digested with ``SOURCES`` (``digest_of``)."""


def _device(sms: int | None):
    from .. import devices

    spec = devices.planned("sm80")
    return spec if sms is None else replace_units(spec, sms)


def replace_units(spec, sms: int):
    import attrs

    return attrs.evolve(spec, units=sms)


def _static(problem: GemmProblem) -> None:
    if problem.batch:
        from ...errors import ContractError

        raise ContractError("sm90 GEMM M: a batched problem is not planned on sm90 yet (static, dynamic M or grouped)",
                            operand="M", check="shape", expected="batch=0",
                            found=f"M={problem.M}, groups={problem.groups}, batch={problem.batch}")


def _grouped(problem: GemmProblem, config=None, sms=None, arch: str = ARCH, compiler=None, cache: bool = True):
    """The ``GroupedGemm`` of a grouped problem (``grouped_plan.plan_bucket`` per bucket of rows per group: the
    sm80 grouped kernel's plan for the decode buckets, this target's above); ``config`` (an ``Sm90Config``): that
    tiling for every bucket."""
    from ..gemm.grouped import GroupedGemm
    from .grouped_plan import check_grouped_problem, plan_bucket

    check_config(config, (Sm90Config,), "sm90 grouped GEMM config (every bucket)")
    check_compiler(compiler)
    G, N, K, f = problem.groups, problem.N, problem.K, problem.fusion
    t_limit = check_grouped_problem(G, N, K, problem.dtype, problem.layout, problem.out)
    device = _device(sms)
    return GroupedGemm("cuda", G, t_limit,
                       lambda b: plan_bucket(b, G, N, K, problem.dtype, problem.out, device, f, config, problem.layout),
                       lambda p: build_plan(p, arch, compiler, cache), emit,
                       describe=f" sm90 {problem.layout} {problem.dtype}->{problem.out} G={G} N={N} K={K}" + (
                           "" if f.empty else f" epilogue {f.describe()}"))


def _dynamic(problem: GemmProblem, config=None, sms=None, arch: str = ARCH, compiler=None, cache: bool = True):
    """The ``DynamicGemm`` of a dynamic-M problem (``gemm_dynamic.build_dynamic``); a config is refused."""
    from .gemm_dynamic import build_dynamic

    if config is not None:
        from ...errors import ContractError

        raise ContractError("sm90 dynamic-M GEMM config: every M bucket is planned by the cost model",
                            operand="config", check="parameters", expected="config=None", found=repr(config))
    check_compiler(compiler)
    return build_dynamic(problem.N, problem.K, problem.dtype, problem.layout, problem.out, _device(sms),
                         lambda p: build_plan(p, arch, compiler, cache), emit, problem.fusion,
                         decode_keeps(problem.dtype))


def choose(problem: GemmProblem, *, m: int | None = None, sms: int | None = None):
    """The config without one: the decode kernel's ``DecodeConfig`` where it keeps the problem
    (``DECODE_KEEPS``, ``decode_weighed``), else the cost model's ``Sm90Config`` (``gemm_cost.choose_config``)."""
    from ..sm80.decode_plan import choose_decode, decode_weighed

    _static(problem)
    if problem.dynamic or problem.grouped:
        return plan(problem, m=m, sms=sms).config
    check_problem(problem.M, problem.N, problem.K, problem.dtype, problem.layout, problem.out)
    device = _device(sms)
    if decode_keeps(problem.dtype) and decode_weighed(problem.M, problem.layout):
        return choose_decode(problem.M, problem.N, problem.K, problem.out, device.units)[0]
    return epilogue_choices(gemm_cost.choose_config(problem.M, problem.N, problem.K, _out_bytes(problem.out), device,
                                                 problem.dtype), problem.fusion, problem.out)  # trimmed loads: ranked's


def plan(problem: GemmProblem, config=None, *, m: int | None = None, sms: int | None = None,
         reduction: str | None = None):
    """The plan of ``problem`` with ``config`` (None: the cost model's choice); ``reduction`` is refused: the
    sm90 K split and its reduction are ``Sm90Config`` fields (``split_k``, ``reduction``) the cost model chooses
    (``config_from_options``' ``split_k``: the CLI's ``--split-k``, sets the first)."""
    if reduction is not None:
        raise ValueError(f"--reduction {reduction}: the sm90 K split and its reduction are Sm90Config fields "
                         "(split_k, reduction), chosen by the cost model (--split-k sets split_k)")
    from ..sm80.decode_plan import DecodeConfig, plan_decode

    check_config(config, (Sm90Config, DecodeConfig), "sm90 GEMM config")
    _static(problem)
    if problem.grouped:
        return _grouped(problem, config, sms).plan(m)
    if problem.dynamic:
        return _dynamic(problem, config, sms).plan(problem.rows(m))
    device = _device(sms)
    config = config if config is not None else choose(problem, sms=sms)
    if isinstance(config, DecodeConfig):
        check_problem(problem.M, problem.N, problem.K, problem.dtype, problem.layout, problem.out)
        return plan_decode(problem.M, problem.N, problem.K, problem.dtype, problem.layout, problem.out, config,
                           problem.fusion)
    return make_plan(problem.M, problem.N, problem.K, problem.dtype, problem.layout, problem.out, config,
                     device.units, device.smem_per_unit, problem.fusion)


def emit(p):
    """The TIRx PrimFunc of an sm90 plan (or of the decode kernel's ``DecodePlan``)."""
    if not isinstance(p, Sm90Plan):
        from ..sm80.gemm import emit_any

        return emit_any(p)
    from .grouped_plan import Sm90GroupedPlan

    if isinstance(p, Sm90GroupedPlan):
        from .grouped_emit import emit as emit_grouped

        return emit_grouped(p)
    from .gemm_emit import emit as emit_plan

    return emit_plan(p)


def digest_of(sources) -> str:
    """The build cache's digest of an sm90 kernel from ``sources`` (modules of ``kernels/sm90``) and
    ``SHARED_SOURCES`` (``cache.source_digest``), so that an edit to either rebuilds."""
    from ...cache import source_digest

    return source_digest(*(f"kernels/sm90/{name}" for name in sources), *SHARED_SOURCES)[:16]


def schedule_digest() -> str:
    return digest_of(SOURCES)


def build_plan(p, arch: str = ARCH, compiler: str | None = None, cache: bool = True) -> CudaBuild:
    """Compile one plan through the build cache (``common.cache_key``: the plan record, the sources'
    digest, the arch and the compiler); ``sm_90`` (what ``runtime.cuda.device_arch`` reads off an
    H100/H200) builds for ``sm_90a``."""
    check_compiler(compiler)
    arch = ARCH if arch == "sm_90" else arch  # wgmma and setmaxnreg need the arch-specific sm_90a
    if not isinstance(p, Sm90Plan):  # the decode kernel (sm80's planner and build cache)
        from ..sm80.gemm import build_plan as build_sm80

        return build_sm80(p, arch, compiler, cache)
    key = cache_key("sm90", p, schedule_digest(), arch=arch, compiler=compiler)
    return cached_build("cuda-gemm-sm90", key, lambda: compile_blobs(emit(p), arch, compiler), p.config, cache)


def build(problem: GemmProblem, config: Sm90Config | None = None, *, arch: str = ARCH, compiler: str | None = None,
          cache: bool = True, sms: int | None = None):
    """The compiled kernel (``cuda.build.CudaBuild``) of ``plan(problem, config)``; dynamic M: the
    ``DynamicGemm`` that builds each bucket's kernel on first use."""
    _static(problem)
    if problem.grouped:
        return _grouped(problem, config, sms, arch, compiler, cache)
    if problem.dynamic:
        return _dynamic(problem, config, sms, arch, compiler, cache)
    return build_plan(plan(problem, config, sms=sms), arch, compiler, cache)


def execute(p, data, run=None):
    """Run plan ``p`` on ``data`` (``GemmData``): through ``run(plan, arguments)`` (the GPU runner,
    ``runtime.cuda.run_gemm``, which fills C in place), else in the CUDA emulator for at most
    ``EMULATED_MACS`` multiply-adds (sm80's bound; beyond it a ValueError naming it). (C, where). The
    decode kernel's plan runs where sm80's ``execute`` runs it."""
    if not isinstance(p, Sm90Plan):
        from ..sm80.gemm_target import execute as execute_sm80

        return execute_sm80(p, data, run)
    from ..gemm.problem import execute_cuda

    return execute_cuda(p, data, run, emit=emit, target="sm90", gpu="an NVIDIA Hopper GPU", limit=EMULATED_MACS)


def _tile(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.lower().split("x"))


STAGING_FIELDS = {"epilogue", "epilogue_tile"}
"""The fields that change C's staging buffers, so the ring's depth (``gemm_cost.deepest``) unless ``stages`` is given."""


def config_from_options(problem: GemmProblem, *, block: str | None = None, warps: str | None = None,
                        stages: int | None = None, group_m: int | None = None, ctas: int | None = None,
                        mfma: str | None = None, lds_dma: bool = False, sms: int | None = None, swap_ab: bool = False,
                        cluster_m: int | None = None, residual_read: str | None = None, tile_walk: str | None = None,
                        epilogue: str | None = None, epilogue_tile: int | None = None, raster: str | None = None,
                        split_k: int | None = None, m: int | None = None):
    """The config the CLI's tile options ask for, None without any: the sm90 kernel's cost-model choice
    (``gemm_cost.ranked``'s first unswapped config, at any M: the options ask for the tile kernel over C; ``swap_ab``: the best-estimated
    swapped config, ``gemm_cost.swap_ab_ranked``, whose ``block`` tiles C^T: N side x M side) with them applied. ``block``:
    ``MxN`` or ``MxNxK`` (K: the K tile, 64 for f16/bf16, 128 for fp8); ``warps``: ``1`` or ``2`` consumer warpgroups (``WGx1`` is read
    too); ``stages``, ``group_m``, ``ctas``. A given block re-plans the ring depth unless ``stages`` says it.
    ``FIELD_OPTIONS`` (``with_fields``): without a tile option they replace the fields of the cost model's choice
    (``choose``; where that is the decode kernel's or swapped, as with the tile options, the unswapped tile
    kernel's: ``epilogue_choices`` of ``gemm_cost.ranked``'s first); a grouped problem's of the plan of ``m`` rows' bucket.
    A ContractError or ValueError, the option first, otherwise."""
    for flag, value in (("--mfma", mfma), ("--lds-dma", lds_dma)):
        if value:
            raise ValueError(f"{flag} is a gfx950 option: the sm90 GEMM runs wgmma with TMA copies")
    fields = {name: value for name, value in zip(FIELD_OPTIONS, (cluster_m, residual_read, tile_walk, epilogue,
                                                                 epilogue_tile, raster, split_k)) if value is not None}
    tiled = bool(block or warps or stages or group_m or ctas is not None or swap_ab)
    if not (tiled or fields):
        return None
    if problem.M is None:
        return _bucket_fields(problem, fields, m, sms)
    chosen = choose(problem, sms=sms)  # the problem's refusals first
    shape = (problem.M, problem.N, problem.K, _out_bytes(problem.out), _device(sms), problem.dtype)
    if not tiled:  # the cost model's choice, the unswapped tile kernel's (as the tile options ask for)
        unswapped = isinstance(chosen, Sm90Config) and not chosen.swap_ab
        cfg = chosen if unswapped else epilogue_choices(gemm_cost.ranked(*shape, swap=False)[0][1], problem.fusion,
                                                        problem.out)
        return with_fields(problem, cfg, fields, sms=sms)
    # without swap_ab the unswapped choice: the options (block M x N) tile C, not C^T (the model weighs swap AB)
    cfg = gemm_cost.swap_ab_config(*shape) if swap_ab else gemm_cost.ranked(*shape, swap=False)[0][1]
    updates, bk = {}, block_k(problem.dtype)
    if block:
        dims = _tile(block)
        if len(dims) == 3 and dims[2] != bk:
            raise ValueError(f"--block: the sm90 K tile of {problem.dtype} is {bk}; expected MxN or MxNx{bk}, "
                             f"found {block}")
        updates.update(block_m=dims[0], block_n=dims[1])
    if warps:
        updates["consumers"] = _tile(warps)[0]
    updates.update({k: v for k, v in (("stages", stages), ("group_m", group_m), ("ctas", ctas)) if v is not None})
    tiles = _tile_options(block=block, warps=warps, stages=stages, group_m=group_m, ctas=ctas, swap_ab=swap_ab)
    staged = bool(block) or bool(STAGING_FIELDS & set(fields))
    return with_fields(problem, replace_config(cfg, **updates), fields, replan=staged and not stages, sms=sms,
                       tiles=tiles)


TILE_FIELDS = {"block": ("block_m", "block_n"), "warps": ("consumers",), "stages": ("stages",),
               "group_m": ("group_m",), "ctas": ("ctas",), "swap_ab": ("swap_ab",)}
"""The ``Sm90Config`` fields each tile option of ``config_from_options`` sets."""


def _tile_options(**given) -> dict[str, str]:
    """The tile options given, by the ``Sm90Config`` field each sets (``TILE_FIELDS``), as typed (``--block
    128x256x64``): what a refusal of that field names."""
    return {field: option(name, value) for name, value in given.items() if value is not None and value is not False
            for field in TILE_FIELDS[name]}


def _named(operand: str | None, options: dict[str, str]) -> list[str]:
    """The options (field -> as typed) of the fields a refusal's ``operand`` names (``block_m x block_n``,
    ``split_k/reduction``: each of them)."""
    return [options[f] for f in (operand or "").replace(" x ", "/").split("/") if f in options]


def _replanned(problem: GemmProblem, cfg: Sm90Config, smem_bytes: int) -> Sm90Config:
    """``cfg`` with the deepest ring beside its staging buffers (``gemm_cost.deepest``)."""
    return replace_config(cfg, stages=gemm_cost.deepest(cfg.block_m, cfg.block_n, cfg.consumers, smem_bytes,
                                                        -(-problem.K // block_k(problem.dtype)), cfg.epilogue,
                                                        cfg.epilogue_tile))


def with_fields(problem: GemmProblem, cfg: Sm90Config, fields: dict, *, replan: bool | None = None,
                m: int | None = None, sms: int | None = None, tiles: dict[str, str] | None = None) -> Sm90Config:
    """``cfg`` with ``fields`` (``FIELD_OPTIONS``) replaced, its ring re-planned to the deepest that fits where
    ``replan`` (None: where a field changes C's staging, ``STAGING_FIELDS``), checked by
    ``Sm90Config.check`` and the plan (``m``: a grouped problem's rows). A refusal of a field given is a ValueError,
    one line naming its option and value first (``--cluster-m 3: ...``), as is one by another operand's rule that
    ``cfg`` without them passes (``--epilogue tma`` with ``--swap-ab``: the swapped kernel's rule names ``swap_ab``).
    ``tiles``: the tile options already in ``cfg`` (``_tile_options``); a refusal of ``cfg`` without the fields is
    one line naming the tile option of its operand (``--stages 40: ...``), else every tile option given; without
    any, a refusal is raised as it is."""
    from ...errors import ContractError

    base, cfg = cfg, _replaced(cfg, fields)
    smem = _device(sms).smem_per_unit
    if problem.grouped:
        from .gemm_plan import prefix_bytes

        smem -= prefix_bytes(problem.groups, cfg.tile_walk)
    try:
        if replan or (replan is None and STAGING_FIELDS & set(fields)):
            if cfg.epilogue in EPILOGUES and isinstance(cfg.epilogue_tile, int):  # else check names the field
                cfg = _replanned(problem, cfg, smem)
        cfg.check(_device(sms).smem_per_unit)
        plan(problem, cfg, m=m, sms=sms)
    except ContractError as err:
        given = {name: option(name, value) for name, value in fields.items()}
        if _named(err.operand, given):
            raise refused_options(_named(err.operand, given), err) from err
        if fields:
            try:  # the config without the fields: a refusal of its own is raised as it is (or as the tiles')
                with_fields(problem, base, {}, replan=replan, m=m, sms=sms, tiles=tiles)
            except ContractError:
                raise err from None
            raise refused_options(given.values(), err) from err
        if not tiles:
            raise
        raise refused_options(_named(err.operand, tiles) or tiles.values(), err) from err
    return cfg


def _replaced(cfg: Sm90Config, fields: dict) -> Sm90Config:
    """``cfg`` with ``fields`` replaced; a ``split_k`` with the ``decomposition`` that goes with it: ``data-parallel``
    at 1, above it ``cfg``'s own K-split decomposition (``split-k`` or ``hybrid``), else ``split-k``; a ``cluster_m`` above
    1 with ``trim_loads`` off (a cluster loads whole boxes), and a cluster, TMA stores or the residual staged in the
    chunk buffers (``residual_read="chunks"``: the tile's own rows, ``gemm_chunkres``) with ``shift_last`` off (the
    unclustered kernel's; TMA stores keep it where ``gemm_shift.SHIFT_TMA``), unless the fields name it."""
    if "split_k" in fields and "decomposition" not in fields:
        split = cfg.decomposition if cfg.decomposition != "data-parallel" else "split-k"
        fields = {**fields, "decomposition": "data-parallel" if fields["split_k"] == 1 else split}
    if fields.get("cluster_m", 1) != 1:  # a cluster loads whole boxes (Sm90Config.trim_loads)
        fields = {"trim_loads": False, **fields}
    if not gemm_shift.allows(fields.get("cluster_m", 1), fields.get("epilogue", "registers"),  # Sm90Config.shift_last
                             fields.get("residual_read", "global")):
        fields = {"shift_last": False, **fields}
    return replace_config(cfg, **fields)


def _bucket_fields(problem: GemmProblem, fields: dict, m: int | None, sms: int | None) -> Sm90Config:
    """``FIELD_OPTIONS`` of a grouped problem: the plan of ``m`` rows' bucket (``plan``) with them replaced
    (``with_fields``); a dynamic M plans every bucket by the cost model (a ValueError, as a decode bucket's)."""
    flags = ", ".join(map(option, fields))
    if not problem.grouped:
        raise ValueError(f"{flags}: a dynamic-M GEMM plans every M bucket with the cost model")
    base = plan(problem, m=m, sms=sms).config
    if not isinstance(base, Sm90Config):
        from .grouped_plan import DECODE_ROWS

        raise ValueError(f"{option(*next(iter(fields.items())))}: T = {m} rows' bucket of rows per group runs the sm80 "
                         f"grouped decode kernel (at most {DECODE_ROWS} rows per group), whose config has no "
                         f"{', '.join(fields)}")
    return with_fields(problem, base, fields, m=m, sms=sms)


def replace_config(cfg: Sm90Config, **updates) -> Sm90Config:
    import attrs

    return attrs.evolve(cfg, **updates)


def summary(p, sms: int | None = None) -> dict:
    """A plan as ``--emit config``'s JSON object: the problem, the config, the launch, the estimate (the
    decode kernel's plan: sm80's summary of it). A dynamic-M plan's estimate is at the largest M its bucket's
    plan was weighed at (``planned_at_m``; ``planned_over_m``: ``gemm_dynamic.planned_range``)."""
    import attrs

    device = _device(sms)
    if not isinstance(p, Sm90Plan):
        from ..sm80.gemm import summary as summary_sm80

        return summary_sm80(p, device.units)
    from ..common import extent_record
    from ..sm80.gemm_plan import bucket_summary
    from .gemm_dynamic import planned_range

    grouping, bucket = getattr(p, "grouping", None), bucket_summary(p.dynamic_m)
    if grouping is not None:  # a grouped plan: the estimate at its bucket's rows per group
        est = gemm_cost.grouped_estimate(p.config, grouping.rows.representative, grouping.count, p.N, p.K,
                                         _out_bytes(p.out_dtype), device, p.dtype)
    else:
        m = p.M
        if p.dynamic_m is not None:
            lo, m = planned_range(p.dynamic_m)
            bucket = {**bucket, "planned_at_m": m, "planned_over_m": [lo, m]}
        est = gemm_cost.estimate(p.config, m, p.N, p.K, _out_bytes(p.out_dtype), device, p.dtype)
    return {"target": "sm90", "kernel": "tma-wgmma-" + ("grouped" if grouping else "warp-specialized"),
            "M": extent_record(p.M), **bucket, **(grouping.summary() if grouping else {}), "N": p.N, "K": p.K,
            "dtype": p.dtype, "layout": p.layout, "out_dtype": p.out_dtype, "config": attrs.asdict(p.config),
            "tiles": [extent_record(p.tiles_m), p.tiles_n], "k_tiles": p.k_tiles, "grid": extent_record(p.ctas), "threads": p.config.threads,
            "smem_bytes": p.smem_bytes, "split_k": p.config.split_k, "fusion": {**p.fusion.as_dict(), "steps": p.fusion.describe()},
            "b_shares": list(p.config.shares), "multicast": p.config.multicast if p.config.cluster_m > 1 else None,
            "estimate": est.to_json(),
            "device": device.name}


__all__ = ["ARCH", "CODE", "DECODE_KEEPS", "CONFIG_FLAGS", "PLAN_FLAGS", "plan_flags", "EMULATED_MACS", "OUT_DTYPES", "SHARED_SOURCES", "build", "build_plan", "choose",
           "config_from_options", "digest_of", "emit", "execute", "plan", "summary"]
