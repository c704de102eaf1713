"""Attention forward (issue 26): one API over both targets.

``TARGETS`` holds one ``AttentionTarget`` per target: where its plan, emit and build functions live
(``"module:function"`` in this package, imported on first use, so planning for one target never
imports the other's emitter, and the gfx950 plan imports no TIRx):

- ``gfx950``: ``kernels.gfx950.attention_plan.plan_gfx950_attention`` -> ``AttentionPlan``,
  ``kernels.gfx950.attention_emit.emit_gfx950_attention`` (the PrimFunc), ``build_gfx950`` here (the code
  object through ``rocm.build`` and the on-disk build cache, like ``kernels.gfx950.gemm.build``);
- ``sm80``: ``kernels.sm80.attention_plan.plan_sm80_attention``, ``kernels.sm80.attention_emit.emit_sm80_attention``
  and ``kernels.sm80.attention.build_sm80_attention`` (cp.async, ldmatrix, mma.sync; bf16 and f16, fp8 refused
  by its planner).

``plan(problem, target, config)``, ``emit(plan)`` (the target read off the plan's type), ``build(problem,
target, config, ...)`` and ``validate(problem, target, config, seed)``: the kernel on random inputs
(``kernels.gfx950.attention_plan.random_inputs``) against the float64 ``reference`` within ``error_bound`` (gfx950:
the CPU wavefront emulator; sm80: the NVIDIA GPU, through a runner the caller passes: the CLI's runs
``tvm_cdna4.torch.attention``; without one, the CUDA emulator for problems of at most
``SM80_EMULATED_PAIRS`` scored pairs). The gfx950 static report is ``report.attention_report`` (the runtime
layer, above this one; the CLI's ``--report``).
"""

from __future__ import annotations

import importlib
import time

import attrs

from .problem import AttentionProblem, dequantize, error_bound, output_arrays, random_inputs, reference


def __getattr__(name: str):
    if name == "AttentionConfig":  # the gfx950 config (imports the catalog): on first use
        from ..gfx950.attention_plan import AttentionConfig

        return AttentionConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@attrs.frozen
class AttentionTarget:
    """Where a target's attention functions live: ``"module:function"``, relative to ``tvm_cdna4.kernels``."""

    name: str
    plan: str  # (problem, config=None) -> plan
    emit: str  # (plan) -> PrimFunc
    build: str  # (problem, config=None, **options) -> the built kernel


TARGETS = {
    "gfx950": AttentionTarget("gfx950", "gfx950.attention_plan:plan_gfx950_attention", "attention:emit_gfx950",
                              "attention:build_gfx950"),
    "sm80": AttentionTarget("sm80", "sm80.attention_plan:plan_sm80_attention", "sm80.attention_emit:emit_sm80_attention",
                            "sm80.attention:build_sm80_attention"),
}


SM80_EMULATED_PAIRS = 1 << 16
"""The most (query, key) pairs (``AttentionProblem.visible_pairs``) ``validate`` runs in the CUDA
emulator when no GPU runner is passed (4,970 pairs took 0.7 s on one core of the 2-core CPU machine,
2026-12-02)."""


def _function(target: str, role: str):
    """The ``role`` function (``plan``, ``emit``, ``build``) of ``target``; a clear ValueError for an
    unknown target."""
    if target not in TARGETS:
        raise ValueError(f"attention target: expected one of {tuple(TARGETS)}, found {target!r}")
    module, name = getattr(TARGETS[target], role).split(":")
    return getattr(importlib.import_module(f"tvm_cdna4.kernels.{module}"), name)


def plan(problem: AttentionProblem, target: str = "gfx950", config=None, **options):
    """The frozen plan of ``problem`` on ``target`` (``config``: the target's config record, None for
    its default; ``options``: the target planner's, sm80 ``arch``, on which its default depends)."""
    return _function(target, "plan")(problem, config, **options)


def target_of(plan_) -> str:
    """The target whose planner made ``plan_`` (the module of its record type; a plan holds its
    ``problem``)."""
    module = type(plan_).__module__
    for name, entry in TARGETS.items():
        if module == "tvm_cdna4.kernels." + entry.plan.split(":")[0] and isinstance(getattr(plan_, "problem", None), AttentionProblem):
            return name
    raise ValueError(f"attention emit: expected a plan of {tuple(TARGETS)}, found a {type(plan_).__name__}")


def emit(plan_):
    """The PrimFunc of a plan of either target."""
    return _function(target_of(plan_), "emit")(plan_)


def emit_gfx950(plan_):
    """The gfx950 PrimFunc (``attention_gfx950_emit``; the ROCm build registered first)."""
    from ...rocm.build import register
    from ..gfx950.attention_emit import emit_gfx950_attention

    register()
    return emit_gfx950_attention(plan_)


def build(problem: AttentionProblem, target: str = "gfx950", config=None, **options):
    """The compiled kernel: gfx950 a ``rocm.build.BuildResult`` (``build_gfx950``: ``cache``), sm80
    the target's build (``arch``, ``compiler``, ...)."""
    return _function(target, "build")(problem, config, **options)


def schedule_digest() -> str:
    """SHA-256 of everything the gfx950 attention kernel's code comes from (``cache.source_digest``)."""
    from ...cache import source_digest

    return source_digest("kernels/attention/*.py", "kernels/gfx950/*.py", "kernels/gemm/*.py",
                         "patterns/*.py", "rocm/*.py", "isa/*.py", "tirx_private.py")


def cache_key(plan_) -> dict:
    """The build-cache key of a gfx950 attention plan: the whole record and the schedule's digest."""
    return {"target": "gfx950", "plan": type(plan_).__name__, "fields": attrs.asdict(plan_),
            "schedule": schedule_digest()}


def build_gfx950(problem: AttentionProblem, config: AttentionConfig | None = None, cache: bool = True):
    """``tvm_cdna4.build`` of the gfx950 kernel through the build cache (keyed by ``cache_key``): the
    LLVM IR, assembly and code object (``rocm.build.cached_build``)."""
    from ...rocm.build import cached_build

    p = plan(problem, "gfx950", config)
    return cached_build("gfx950-attention", cache_key(p), lambda: emit_gfx950(p), enabled=cache)


@attrs.frozen
class Validation:
    """A kernel against the float64 reference: the largest error over the bound, for O and LSE
    (``ok``: both at most 1), where it ran, and the seconds it took."""

    o_ratio: float
    lse_ratio: float | None  # None where the kernel returned no LSE
    where: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.o_ratio <= 1 and (self.lse_ratio is None or self.lse_ratio <= 1)


def _ratio(got, want, bound) -> float:
    """max |got - want| / bound (NaN in ``got``: infinity)."""
    import numpy as np

    err = np.abs(np.asarray(got, np.float64) - want)
    err = np.where(np.isnan(err), np.inf, err)
    return float(np.max(err / np.maximum(bound, 1e-300))) if err.size else 0.0


def validate(problem: AttentionProblem, target: str = "gfx950", config=None, seed: int = 0, run=None,
             **options) -> Validation:
    """Run the kernel on ``random_inputs(problem, seed)`` and compare ``O`` and ``LSE`` with
    ``reference`` (of the dequantized inputs) within ``error_bound``. gfx950: the CPU emulator (a
    ``run`` is refused, not ignored). sm80: an NVIDIA GPU, which this layer does not reach: ``run(problem,
    arrays) -> (o, lse or None)`` does (the CLI passes ``cli.attention.run_sm80`` where a GPU is
    present); without it, the CUDA emulator up to ``SM80_EMULATED_PAIRS`` pairs, beyond a ValueError
    saying a GPU is needed. ``options``: the planner's (sm80 ``arch``)."""
    p = plan(problem, target, config, **options)  # the target's refusals first (sm80: fp8)
    if run is not None and target != "sm80":
        raise ValueError(f"attention validate run=: a GPU runner is sm80's; {target} validates in the CPU wavefront "
                         f"emulator (expected run=None, found {run!r})")
    if target == "sm80" and run is None and problem.visible_pairs() > SM80_EMULATED_PAIRS:
        raise ValueError(f"sm80 attention validation of {problem.visible_pairs()} scored pairs needs an NVIDIA GPU (the "
                         f"CUDA emulator takes at most {SM80_EMULATED_PAIRS}); run it where one is present")
    arrays = random_inputs(problem, seed)
    q, k, v = dequantize(problem, arrays)
    want_o, want_lse = reference(q, k, v, problem.causal, problem.scale)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal, problem.scale, problem.dtype)
    start = time.perf_counter()
    if target == "sm80" and run is not None:
        o, lse = run(problem, arrays)
        where = "the NVIDIA GPU"
    else:
        from ...emulator import emulate

        out = {**arrays, **output_arrays(problem)}
        emulate(emit(p), *(out[param.name] for param in p.params), target=target)
        o, lse = out["O"], out["LSE"]
        where = "the CPU wavefront emulator" if target == "gfx950" else "the CUDA emulator (no GPU runner)"
    seconds = time.perf_counter() - start
    return Validation(_ratio(o, want_o, bound_o), None if lse is None else _ratio(lse, want_lse, bound_lse), where,
                      seconds)


__all__ = ["SM80_EMULATED_PAIRS", "TARGETS", "AttentionConfig", "AttentionProblem", "AttentionTarget", "Validation", "build", "build_gfx950",
           "cache_key", "emit", "emit_gfx950", "plan", "schedule_digest", "target_of", "validate"]
