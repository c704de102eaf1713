"""The GEMM family: one problem, one table of targets, the same verbs on every target.

    from tvm_cdna4.kernels import gemm

    problem = gemm.GemmProblem(M=200, N=4096, K=4096, dtype="bf16", layout="nt")
    p = gemm.plan(problem, "sm80")          # the cost model's choice (config=None), a frozen plan record
    print(p.to_json())                      # what `python -m tvm_cdna4 gemm --emit config` prints
    kernel = gemm.build(problem, "gfx950")  # the code object (gfx950) / the CUDA library (sm80)
    gemm.validate(problem, "gfx950").ok     # the kernel against the float64 reference (CPU emulator)

``GemmProblem`` (``kernels.gemm.problem``): the target-neutral record: M (None: dynamic M), N, K, dtypes,
layout, the fused epilogue (``kernels.gemm.epilogue.Fusion``), groups (mixture of experts), batch; its
inputs, float64 reference and error bound (``random_inputs`` -> ``GemmData``).

``TARGETS``: one ``common.Target`` row per target, naming the module that implements the verbs there
(``kernels.<target>.gemm_target``). Every target module has:

- ``plan(problem, config=None, *, m=None, **options)``: the frozen plan (``to_json()``); ``config`` None:
  the target's cost model's choice. Dynamic M / grouped: the plan of the bucket of the run-time rows
  ``m`` (M, or the grouped total T);
- ``choose(problem, *, m=None, **options)``: the config the cost model chooses;
- ``emit(plan)``: the TIRx PrimFunc;
- ``build(problem, config=None, **options)``: the compiled kernel (static), or the lazily built
  kernels per bucket (dynamic M: ``DynamicGemm``; grouped: ``GroupedGemm``), through the build cache;
- ``execute(plan, data, run=None)``: run a plan on ``GemmData`` and return (C, where it ran): gfx950
  in the CPU wavefront emulator; sm80 through ``run`` (the runtime layer's GPU runner,
  ``runtime.cuda.run_gemm``) or, for small problems without one, the CUDA emulator;
- ``summary(plan)``: what ``plan.to_json()`` and ``--emit config`` print;
- ``config_from_options(problem, **options)``: the config the CLI's tile options ask for (``block="MxNxK"``,
  ``warps``, ``stages``, ``mfma``, ``lds_dma``, ``group_m``, ``ctas``; an option the target does not
  have is a ValueError naming it), None without any; ``CODE``: the code ``--emit`` prints of a build
  (``{"asm": "asm", ...}``: kind -> the build's attribute).

The family's functions of the same names take the target by name; ``emit`` and ``execute`` read it off
the plan (its record's module lives in the target's folder). ``validate`` is the family's: inputs,
reference and bound from the problem, the run from the target. A new target: a folder
``kernels/<target>/`` with ``gemm_target.py`` and one row here (docs/architecture.md).
"""

from __future__ import annotations

import inspect
import time

from ..common import Target, option, row
from .epilogue import Fusion
from .problem import DTYPES, LAYOUTS, OUT_DTYPES, GemmData, GemmProblem, Validation, random_inputs

TARGETS = {
    "gfx950": Target("gfx950", "tvm_cdna4.kernels.gfx950.gemm_target"),
    "sm80": Target("sm80", "tvm_cdna4.kernels.sm80.gemm_target", aliases=("sm_80",)),
    "sm90": Target("sm90", "tvm_cdna4.kernels.sm90.gemm_target", aliases=("sm_90", "sm_90a")),
}


def _verb(target: str, name: str):
    return row(TARGETS, "GEMM", target).verb(name)


def _check(problem) -> GemmProblem:
    if not isinstance(problem, GemmProblem):
        raise TypeError(f"GEMM problem: expected a kernels.gemm.GemmProblem, found {type(problem).__name__}")
    return problem


def plan(problem: GemmProblem, target: str, config=None, *, m: int | None = None, **options):
    """The frozen plan of ``problem`` on ``target``: ``config`` as given, None for the target's cost
    model's choice (``m``: the run-time rows that pick a dynamic or grouped problem's bucket)."""
    return _verb(target, "plan")(_check(problem), config, m=m, **options)


def choose(problem: GemmProblem, target: str, *, m: int | None = None, **options):
    """The config ``target``'s cost model chooses for ``problem``."""
    return _verb(target, "choose")(_check(problem), m=m, **options)


def target_of(plan_) -> str:
    """The target whose planner made ``plan_``: the target folder its record's module lives in."""
    module = type(plan_).__module__
    for name in TARGETS:
        if module.startswith(f"tvm_cdna4.kernels.{name}."):
            return name
    raise ValueError(f"GEMM plan: expected a plan of one of {tuple(TARGETS)}, found a {type(plan_).__name__}")


def emit(plan_):
    """The TIRx PrimFunc of a plan of any target."""
    return _verb(target_of(plan_), "emit")(plan_)


def build(problem: GemmProblem, target: str, config=None, **options):
    """The compiled kernel of ``problem`` on ``target`` through the build cache; ``config`` None: the
    cost model's plan (the same plan ``plan`` returns and the CLI runs)."""
    return _verb(target, "build")(_check(problem), config, **options)


def config_from_options(problem: GemmProblem, target: str, **options):
    """The config ``target`` makes of the CLI's tile options (``block="128x128x64"``, ``warps``, ``stages``,
    ...; the target's ``config_from_options``), None without any: the cost model's choice. An option the
    target's ``config_from_options`` does not take (``cluster_m`` on sm80) is a ValueError naming its flag and
    the targets that take it."""
    verb = _verb(target, "config_from_options")
    taken = inspect.signature(verb).parameters
    for name in (n for n in options if n not in taken):
        owners = [t for t in TARGETS if t != target and name in inspect.signature(
            _verb(t, "config_from_options")).parameters]
        raise ValueError(f"{option(name)} is an {' / '.join(owners) or 'unknown'} option (its GEMM "
                         f"config's {name}); --target {target} has no such field")
    return verb(_check(problem), **options)


def code(target: str) -> dict:
    """The code ``target``'s builds give ``--emit`` (kind -> the build's attribute: gfx950 ``asm``, ``llvm``;
    sm80 ``cuda``)."""
    return dict(_verb(target, "CODE"))


def validate(problem: GemmProblem, target: str, config=None, seed: int = 0, *, m: int | None = None,
             group_rows=None, run=None, **options) -> Validation:
    """Run the kernel on ``random_inputs(problem, seed, ...)`` and compare C with the float64
    reference, element by element, within the error bound. ``m``: the run-time M of a dynamic-M
    problem; ``group_rows``: the rows of each group of a grouped one. gfx950 runs in the CPU
    wavefront emulator; sm80 and sm90 through ``run`` (``runtime.cuda.run_gemm`` where a GPU is present,
    as the CLI passes) or, without one, in the CUDA emulator for small problems (a ValueError beyond)."""
    _check(problem)
    rows = problem.rows(m, group_rows)
    p = plan(problem, target, config, m=None if problem.M is not None else rows, **options)
    data = random_inputs(problem, seed, m=rows, group_rows=group_rows, approx_tanh=getattr(p, "approx_tanh", False))
    start = time.perf_counter()
    c, where = _verb(target, "execute")(p, data, run=run)
    return Validation(data.ratio(c), where, time.perf_counter() - start, data.relative(c))


__all__ = ["DTYPES", "LAYOUTS", "OUT_DTYPES", "TARGETS", "Fusion", "GemmData", "GemmProblem", "Validation", "build",
           "choose", "code", "config_from_options", "emit", "plan", "random_inputs", "target_of", "validate"]
