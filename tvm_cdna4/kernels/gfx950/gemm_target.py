"""The GEMM family's verbs on gfx950 (``kernels.gemm.TARGETS["gfx950"]``): ``plan``, ``choose``,
``emit``, ``build``, ``execute``, ``summary``, from a ``GemmProblem``.

Without a config, a dense problem takes the cost model's plan (``gemm_plan.plan_for``: the tile, the
wave layout and the K split by the whole-GPU estimate of ``gemm_cost``); an MX problem its format's
default config (the MX GEMM has one tile per format and layout); dynamic M and grouped problems the
cost model's plan of each bucket. Options: ``k_splits`` (with a config: the K split),
``reduction`` ("atomic" / "ordered": how a split is reduced), ``cus`` (the CUs the cost model plans
for; default ``devices.DEVICES["MI355X"]``), ``cache`` (build: the on-disk build cache).
"""

from __future__ import annotations

import attrs

from ..gemm.problem import GemmProblem
from . import gemm as g
from .gemm_plan import DTYPES, MX_FORMATS, Gfx950GemmConfig, MxGemmConfig, MxGemmPlan, plan_for


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
    if config is not None and not isinstance(config, Gfx950GemmConfig | MxGemmConfig):
        raise TypeError(f"gfx950 GEMM config: expected a Gfx950GemmConfig or MxGemmConfig, found "
                        f"{type(config).__name__}")
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
    emulate(emit(p), *data.arguments(p.params, c))
    return c, "the CPU wavefront emulator"


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


__all__ = ["MX_FORMATS", "build", "choose", "emit", "execute", "plan", "summary"]
