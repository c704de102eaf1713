"""The GEMM family's verbs on gfx950 (``kernels.gemm.TARGETS["gfx950"]``): ``plan``, ``choose``,
``emit``, ``build``, ``execute``, ``summary``, from a ``GemmProblem``.

Without a config, a dense problem takes the cost model's plan (``gemm_plan.plan_for``: the tile, the
wave layout and the K split by the whole-GPU estimate of ``gemm_cost``); an MX problem its format's
default config (the MX GEMM has one tile per format and layout); dynamic M and grouped problems the
cost model's plan of each bucket. Options: ``k_splits`` (with a config: the K split),
``reduction`` ("atomic" / "ordered": how a split is reduced), ``cus`` (the CUs the cost model plans
for; default ``devices.DEVICES["MI355X"]``), ``cache`` (build: the on-disk build cache).

``config_from_options(problem, **options)``: the config the CLI's tile options ask for (``--block``,
``--mfma``, ``--lds-dma``; ``--warps`` and ``--stages`` name what the schedules fix), None without any;
``CODE``: what ``--emit`` prints of a build besides ``tir`` and ``config``.
"""

from __future__ import annotations

import attrs

from ..common import check_config, option, refused_options
from ..gemm.problem import GemmProblem
from . import gemm as g
from .gemm_plan import (DTYPES, MX_FORMATS, Gfx950GemmConfig, MxGemmConfig, MxGemmPlan, check_mx_config,
                        default_config, default_mx_config, dma_config, plan_for)

CODE = {"asm": "asm", "llvm": "llvm_ir"}
"""The code ``--emit`` prints of a build (``rocm.build.BuildResult``), by kind: the attribute that holds it."""

WAVES, STAGES, DMA_STAGES = "2x2", 2, 3
"""What the gfx950 schedules run: 2 x 2 waves, a two-stage K pipeline (three with direct-to-LDS loads)."""


def _out(problem: GemmProblem) -> str:
    """C's dtype, one the dtype produces on gfx950 (a ValueError naming both otherwise)."""
    outs = ("f32",) if problem.mx else DTYPES[problem.dtype].outs
    if problem.out not in outs:
        raise ValueError(f"gfx950 GEMM out_dtype: {problem.dtype} produces {' or '.join(outs)}; found {problem.out}")
    return problem.out


def _no_config(problem: GemmProblem, config, what: str) -> None:
    if config is not None:
        raise ValueError(f"gfx950 {what} GEMM: every bucket is planned by the cost model; expected config=None, "
                         f"found {config!r}")


def _dynamic(problem: GemmProblem, cache: bool = True):
    """The lazily built kernels per bucket: ``DynamicGemm`` (dynamic M) or ``GroupedGemm`` (grouped)."""
    if problem.grouped:
        return g.build_grouped(problem.groups, problem.N, problem.K, problem.dtype, problem.layout, _out(problem),
                               cache, fusion=problem.fusion)
    return g.build_dynamic(problem.N, problem.K, problem.dtype, problem.layout, _out(problem), cache,
                           fusion=problem.fusion)


def plan(problem: GemmProblem, config=None, *, m: int | None = None, k_splits: int | None = None,
         reduction: str | None = None, cus: int | None = None):
    """The plan of ``problem`` (the module docstring: what ``config=None`` means)."""
    if problem.dynamic or problem.grouped:
        _no_config(problem, config, "grouped" if problem.grouped else "dynamic-M")
        return _dynamic(problem).plan(problem.rows(m) if problem.dynamic else m)
    check_config(config, (MxGemmConfig,) if problem.mx else (Gfx950GemmConfig,), "gfx950 GEMM config")
    out = _out(problem)
    if config is None and not problem.mx and k_splits is None:
        from .. import devices

        return plan_for(problem.M, problem.N, problem.K, problem.dtype, problem.layout, out, problem.batch,
                        cus or devices.planned("gfx950").units, reduction or "atomic", problem.fusion)
    if reduction is not None and config is not None and not problem.mx:
        config = attrs.evolve(config, reduction=reduction)
    return g.plan(problem.M, problem.N, problem.K, problem.dtype, problem.layout, out, config, problem.batch,
                  k_splits or 1, problem.fusion)


def choose(problem: GemmProblem, *, m: int | None = None, **options):
    """The config of the cost model's plan (its K split: ``plan(...).grid.k_splits``)."""
    return plan(problem, None, m=m, **options).config


def emit(p):
    """The PrimFunc of a gfx950 GEMM plan (dense or MX)."""
    return g.emit(p)


def build(problem: GemmProblem, config=None, *, cache: bool = True, **options):
    """The code object (``rocm.build.BuildResult``) of ``plan(problem, config)`` through the build
    cache; dynamic M / grouped: the ``DynamicGemm`` / ``GroupedGemm`` that builds each bucket's plan on
    first use."""
    if problem.dynamic or problem.grouped:
        _no_config(problem, config, "grouped" if problem.grouped else "dynamic-M")
        return _dynamic(problem, cache)
    return g.build_plan(plan(problem, config, **options), cache)


def execute(p, data, run=None):
    """Run plan ``p`` on ``data`` (``GemmData``) in the CPU wavefront emulator: (C, where)."""
    if run is not None:
        raise ValueError(f"gfx950 GEMM run=: gfx950 validates in the CPU wavefront emulator (a GPU runner is "
                         f"sm80's); expected run=None, found {run!r}")
    from ...emulator import emulate

    arrays = data.arrays
    if isinstance(p, MxGemmPlan):
        from .mx_gemm import pack_operands

        A, B = pack_operands(arrays["A"], arrays["B"], p.fmt, p.layout)
        data = attrs.evolve(data, arrays={**arrays, "A": A, "B": B})
    c = data.output()
    if "atomic_add" in p.epilogue.ops:  # a K split adds its partial products into C: zeros on entry
        c[...] = 0
    emulate(emit(p), *data.arguments(p.params, c))
    return c, "the CPU wavefront emulator"


def _fixed(problem: GemmProblem, warps, stages, lds_dma: bool, group_m, ctas) -> None:
    """The options that name what the schedules fix, or what they do not have: a ValueError, the option first."""
    if warps and warps.lower() != WAVES:
        raise ValueError(f"--warps {warps}: the gfx950 GEMMs run {WAVES} waves (256 threads) per workgroup")
    if lds_dma and problem.mx:
        raise ValueError(f"--lds-dma: the MX GEMM stages its loads in registers; direct-to-LDS loads are for the dense "
                         f"dtypes ({', '.join(DTYPES)})")
    want = DMA_STAGES if lds_dma else STAGES
    if stages is not None and stages != want:
        raise ValueError(f"--stages {stages}: the gfx950 GEMMs run a {want}-stage K pipeline "
                         + ("(direct-to-LDS loads)" if lds_dma else "(LDS + registers)"))
    for flag, value in (("--group-m", group_m), ("--ctas", ctas)):
        if value is not None:
            raise ValueError(f"{flag} is an sm80 option: gfx950 launches one workgroup per output tile")


def config_from_options(problem: GemmProblem, *, block: str | None = None, mfma: str | None = None,
                        lds_dma: bool = False, warps: str | None = None, stages: int | None = None,
                        group_m: int | None = None, ctas: int | None = None, swap_ab: bool = False):
    """The config the CLI's tile options ask for: the dtype's default (``lds_dma``: the direct-to-LDS
    variant, ``dma_config``; MX: its format's) with ``block`` (``MxNxK``) and ``mfma`` applied, run as
    given (no K split); None without ``block``, ``mfma`` or ``lds_dma`` (the cost model's plan).
    ``warps`` and ``stages`` name what the schedules fix (2x2 waves; two pipeline stages, three with
    ``lds_dma``); the sm80 options ``group_m`` and ``ctas`` are refused. A ValueError, the option first;
    an output dtype the dtype does not produce is refused, never replaced. The config's own rules (its
    ``check``) are checked here, their refusal one line with every tile option given first (``--block 80x128x64:
    block 80x128x64 does not tile ...``); the problem's rules at that config (``lds_dma``'s whole 16-byte rows)
    where it is planned."""
    outs = ("f32",) if problem.mx else DTYPES[problem.dtype].outs
    if problem.out not in outs:
        raise ValueError(f"--out-dtype {problem.out} is not an output of --dtype {problem.dtype} on gfx950; "
                         f"expected {' or '.join(outs)}")
    _fixed(problem, warps, stages, lds_dma, group_m, ctas)
    if swap_ab:
        raise ValueError("--swap-ab is an sm90 option (Sm90Config.swap_ab): gfx950 plans C = A B as given")
    if not (block or mfma or lds_dma):
        return None
    if problem.M is None:
        raise ValueError("tile options: a dynamic-M or grouped problem plans every bucket with the cost model")
    updates = dict(zip(("block_m", "block_n", "block_k"), (int(x) for x in block.lower().split("x")))) if block else {}
    given = [option(name, value) for name, value in (("block", block), ("mfma", mfma), ("lds_dma", lds_dma)) if value]
    if problem.mx:
        if mfma and mfma != "16x16":
            raise ValueError(f"--mfma {mfma}: the MX GEMM runs the scaled 16x16x128 MFMA only")
        cfg = attrs.evolve(default_mx_config(problem.dtype, problem.layout), **updates)
    else:
        if mfma:
            updates["mfma"] = mfma
        cfg = attrs.evolve(dma_config(problem.dtype) if lds_dma else default_config(problem.dtype), **updates)
    try:  # the config's own rules name no option: every one given, then the rule
        check_mx_config(cfg) if problem.mx else cfg.check(DTYPES[problem.dtype])
    except ValueError as err:
        raise refused_options(given, err) from err
    return cfg


def summary(p) -> dict:
    """A gfx950 plan as ``--emit config``'s JSON object: its config's fields, ``split_k``, the split
    reduction, the epilogue's operations and fusion, the launch and (dense plans) the cost model's
    estimate (``planned_estimate``; a dynamic-M plan's at its bucket's representative M, a grouped
    plan's at its rows per group)."""
    from .gemm_plan import plan_gfx950_gemm, planned_estimate

    fusion = p.epilogue.fusion
    out = {**attrs.asdict(p.config), "split_k": p.grid.k_splits, "split_reduction": p.epilogue.reduction,
           "epilogue": list(p.epilogue.ops), "fusion": {**fusion.as_dict(), "steps": fusion.describe()},
           "workgroups": p.grid.groups, "tiles": list(p.grid.tiles)}
    if isinstance(p, MxGemmPlan):
        return out
    grouping, estimated, groups = p.grid.grouping, p, 0
    if grouping is not None:
        out.update(grouping.summary())
        estimated = plan_gfx950_gemm(grouping.rows.representative, p.N, p.K, p.dtype, p.layout, p.epilogue.out_dtype,
                                     p.config, fusion=fusion)
        groups = grouping.count
    elif p.dynamic_m is not None:
        rep = p.dynamic_m.representative
        out.update(m_bucket=[p.dynamic_m.lo, p.dynamic_m.hi], planned_at_m=rep)
        estimated = plan_gfx950_gemm(rep, p.N, p.K, p.dtype, p.layout, p.epilogue.out_dtype, p.config, 0,
                                     p.grid.k_splits, fusion)
    if grouping is not None or p.dynamic_m is not None:
        out.update(workgroups=str(p.grid.groups), tiles=[str(p.grid.tiles[0]), p.grid.tiles[1]])
    est = planned_estimate(estimated, groups=groups)
    out["planned_estimate"] = {"time_us": 1e6 * est.time_s, "roofline_fraction": est.roofline_fraction,
                               "tile_efficiency": est.tile_efficiency, "bound": est.bound}
    return out


__all__ = ["CODE", "MX_FORMATS", "build", "choose", "config_from_options", "emit", "execute", "plan", "summary"]
