"""The GEMM family's verbs on sm80-class CUDA (``kernels.gemm.TARGETS["sm80"]``): ``plan``, ``choose``,
``emit``, ``build``, ``execute``, ``summary``, from a ``GemmProblem``.

Without a config, the cost model's choice for the planned GPU's SM count (``devices.planned("sm80")``:
the present GPU's, else the H200's): the tile GEMM (``gemm_plan``) or, for M <= ``decode_plan.decode_limit()`` and
layout ``nt``, the weight-streaming decode kernel where its estimate wins (``decode_plan.choose_kernel``); dynamic M
and grouped problems the cost model's plan of each bucket (a grouped problem may take one ``config``
for every bucket). Options: ``sms`` (the SMs the cost model plans for), ``reduction`` (``"atomic"`` /
``"ordered"``: how a K split is reduced, replacing the given or chosen config's), ``arch`` (build: the
CUDA arch, default ``sm_80``), ``compiler`` (``"nvcc"`` / ``"nvrtc"``, None: TIRx's), ``cache``,
``tuned`` (build without a config: a tiling ``gemm.tune_config`` stored for the problem, where one is).

``config_from_options(problem, **options)``: the config the CLI's tile options ask for (``--block``,
``--warps``, ``--stages``, ``--group-m``, ``--ctas``, ``--split-k``), None without any; ``CODE``: what ``--emit`` prints
of a build besides ``tir`` and ``config``.
"""

from __future__ import annotations

from dataclasses import replace

from ..common import check_config, option, refused_options
from ..gemm.problem import GemmProblem
from . import gemm as g
from .decode_plan import CONFIGS
from .gemm_plan import DTYPES, OUT_DTYPES

CODE = {"cuda": "source"}
"""The code ``--emit`` prints of a build (``CudaBuild``), by kind: the attribute that holds it."""

EMULATED_MACS = 1 << 22
"""The most multiply-adds (``M N K``) ``execute`` runs in the CUDA emulator when no GPU runner is given."""


def _checked(problem: GemmProblem) -> str:
    """C's dtype; a ValueError naming what sm80 does not run."""
    if problem.dtype not in DTYPES:
        raise ValueError(f"sm80 GEMM dtype: expected one of {tuple(DTYPES)}, found {problem.dtype} (gfx950 runs it)")
    if problem.out not in OUT_DTYPES:
        raise ValueError(f"sm80 GEMM out_dtype: expected one of {tuple(OUT_DTYPES)}, found {problem.out}")
    if problem.batch:
        raise ValueError(f"sm80 GEMM batch: the sm80 kernels have no batch axis; expected 0, found {problem.batch}")
    return problem.out


def _sms(sms: int | None) -> int:
    from .. import devices

    return sms or devices.planned("sm80").units


def _dynamic(problem: GemmProblem, config=None, sms=None, arch="sm_80", compiler=None, cache=True):
    out = _checked(problem)
    if problem.grouped:
        return g.build_grouped(problem.groups, problem.N, problem.K, problem.dtype, problem.layout, out, arch, compiler,
                               cache, _sms(sms), fusion=problem.fusion, config=config)
    if config is not None:
        raise ValueError(f"sm80 dynamic-M GEMM: every bucket is planned by the cost model; expected config=None, "
                         f"found {config!r}")
    return g.build_dynamic(problem.N, problem.K, problem.dtype, problem.layout, out, arch, compiler, cache, _sms(sms),
                           fusion=problem.fusion)


def plan(problem: GemmProblem, config=None, *, m: int | None = None, sms: int | None = None,
         reduction: str | None = None):
    """The plan of ``problem`` (the module docstring: what ``config=None`` and ``reduction`` mean)."""
    if problem.dynamic or problem.grouped:
        if reduction is not None:
            raise ValueError(f"sm80 {'grouped' if problem.grouped else 'dynamic-M'} GEMM: every bucket is planned by "
                             f"the cost model; expected reduction=None, found {reduction!r}")
        return _dynamic(problem, config, sms).plan(problem.rows(m) if problem.dynamic else m)
    if reduction is not None:
        check_config(config, CONFIGS, "sm80 GEMM config")  # before replace() reads it
        config = replace(config if config is not None else choose(problem, sms=sms), reduction=reduction)
    return g.plan(problem.M, problem.N, problem.K, problem.dtype, problem.layout, _checked(problem), config,
                  _sms(sms), fusion=problem.fusion)


def choose(problem: GemmProblem, *, m: int | None = None, sms: int | None = None):
    """The config of the cost model's plan (a ``GemmConfig`` or the decode kernel's ``DecodeConfig``)."""
    return plan(problem, None, m=m, sms=sms).config


def emit(p):
    """The PrimFunc of an sm80 plan (the tile GEMM's or the decode kernel's)."""
    return g.emit_any(p)


def build(problem: GemmProblem, config=None, *, arch: str = "sm_80", compiler: str | None = None, cache: bool = True,
          sms: int | None = None, tuned: bool = False, reduction: str | None = None):
    """The compiled kernel (``gemm.CudaBuild``) of ``plan(problem, config)`` through the build cache;
    dynamic M / grouped: the ``DynamicGemm`` / ``GroupedGemm`` that builds each bucket on first use.
    ``tuned``: without a config, a tiling stored by ``gemm.tune_config`` for this problem first."""
    if problem.dynamic or problem.grouped:
        return _dynamic(problem, config, sms, arch, compiler, cache)
    out = _checked(problem)
    if tuned and config is None:
        config = g.tuned_config(problem.M, problem.N, problem.K, problem.dtype, problem.layout, out, arch, _sms(sms))
    return g.build_plan(plan(problem, config, sms=sms, reduction=reduction), arch, compiler, cache)


build_plan = g.build_plan
"""Build a plan (``GemmPlan`` or ``DecodePlan``) for an arch: the verb a GPU runner calls
(``runtime.cuda.plan_builder``)."""


def execute(p, data, run=None):
    """Run plan ``p`` on ``data`` (``GemmData``): through ``run(plan, arguments)`` (the GPU runner of
    the runtime layer, ``runtime.cuda.run_gemm``, which fills C in place), else in the CUDA emulator
    for at most ``EMULATED_MACS`` multiply-adds. (C, where)."""
    from ..gemm.problem import execute_cuda

    return execute_cuda(p, data, run, emit=emit, target="sm80", gpu="an NVIDIA GPU", limit=EMULATED_MACS)


def _tile(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.lower().split("x"))


def config_from_options(problem: GemmProblem, *, block: str | None = None, warps: str | None = None,
                        stages: int | None = None, group_m: int | None = None, ctas: int | None = None,
                        mfma: str | None = None, lds_dma: bool = False, sms: int | None = None, swap_ab: bool = False,
                        split_k: int | None = None, m: int | None = None):
    """The config the CLI's tile options ask for, None without any (the cost model's choice). ``block``
    (``MxNxK``), ``warps`` (``WMxWN``), ``group_m`` or ``ctas`` ask for the tile GEMM: its planner's
    choice (``gemm_cost.choose_config``) with them applied, the pipeline depth re-planned for a given
    block unless ``stages`` says it; ``stages`` and ``split_k`` (K slices, 1: none) alone apply to the planner's
    choice of either kernel (the decode kernel's pipeline depth and K split too). ``m`` (a grouped problem's rows,
    as sm90's) is not read: a bucketed problem refuses the options. A ValueError, the option first: a dtype sm80 does not
    run, an option of another target (``mfma``, ``lds_dma``); a config its ``check`` or the plan refuses: one line,
    every tile option given first (``--stages 1: stages must be at least 2``)."""
    from .gemm_cost import choose_config as choose_tile, replan_stages

    if problem.dtype not in DTYPES or problem.out not in OUT_DTYPES:
        raise ValueError(f"--target sm80 supports --dtype {'/'.join(DTYPES)} and --out-dtype {'/'.join(OUT_DTYPES)}; "
                         f"found --dtype {problem.dtype} --out-dtype {problem.out} (gfx950 runs the others)")
    for flag, value in (("--mfma", mfma), ("--lds-dma", lds_dma)):
        if value:
            raise ValueError(f"{flag} is a gfx950 option: the sm80 GEMM runs mma.sync with cp.async copies")
    if swap_ab:
        raise ValueError("--swap-ab is an sm90 option (Sm90Config.swap_ab): the sm80 GEMM plans C = A B as given")
    tile = block or warps or group_m or ctas is not None
    if not (tile or stages or split_k):
        return None
    if problem.M is None:
        raise ValueError("tile options: a dynamic-M or grouped problem plans every bucket with the cost model")
    M, N, K, out = problem.M, problem.N, problem.K, _checked(problem)
    cfg = (choose_tile if tile else g.choose_config)(M, N, K, problem.dtype, problem.layout, out, _sms(sms))
    updates = {}
    if block:
        updates.update(zip(("block_m", "block_n", "block_k"), _tile(block)))
    if warps:
        updates.update(zip(("warps_m", "warps_n"), _tile(warps)))
    updates.update({name: value for name, value in (("stages", stages), ("group_m", group_m), ("ctas", ctas),
                                                    ("split_k", split_k)) if value is not None})
    cfg = replace(cfg, **updates)
    given = [option(name, value) for name, value in (("block", block), ("warps", warps), ("stages", stages),
                                                      ("group_m", group_m), ("ctas", ctas), ("split_k", split_k))
             if value is not None]
    try:
        if block and not stages:  # the planner's stages were for its own block: re-plan them
            cfg = replan_stages(cfg, M, N, K, out, _sms(sms))
        cfg.check()
        plan(problem, cfg, sms=sms)
    except ValueError as err:  # the config's rules name no option: every one given, then the rule
        raise refused_options(given, err) from err
    return cfg


def summary(p, sms: int | None = None) -> dict:
    """An sm80 plan as ``--emit config``'s JSON object: the tiling's every field, ``split_k``, the
    grid, the fused epilogue and the cost model's estimate (``plan_summary`` / ``decode_summary``)."""
    return g.summary(p, _sms(sms))


__all__ = ["CODE", "EMULATED_MACS", "build", "choose", "config_from_options", "emit", "execute", "plan", "summary"]
