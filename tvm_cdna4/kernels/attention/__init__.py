"""The attention family (forward, FlashAttention-2; issue 26): one problem, one table of targets, the
same verbs on every target (the GEMM family's shape: ``kernels.gemm``).

``AttentionProblem`` (``kernels.attention.problem``): the target-neutral record, its float64
``reference``, ``error_bound``, ``random_inputs`` and kv tiling.

``TARGETS``: one ``common.Target`` row per target, naming the module that implements the verbs there
(``kernels.<target>.attention_target``: ``plan(problem, config=None, **options)``, ``choose``,
``emit(plan)``, ``build(problem, config=None, **options)``, ``execute(plan, arrays, run=None)``,
``summary(plan)``): gfx950 (``AttentionPlan``: S^T = K Q^T, ds_read_tr, direct-to-LDS K/V; the CPU
wavefront emulator), sm80 (cp.async, ldmatrix, mma.sync; bf16 and f16, fp8 refused by its planner;
the GPU through a runner, or the CUDA emulator for small problems) and sm90 (Hopper: a TMA producer
warpgroup, two wgmma consumer warpgroups; bf16 and f16; the GPU or the CUDA emulator, as sm80).

``plan(problem, target, config)``, ``emit(plan)`` (the target read off the plan's folder), ``build(problem,
target, config, ...)`` and ``validate(problem, target, config, seed)``: the kernel on random inputs
against the float64 ``reference`` within ``error_bound`` (sm80 on a GPU through ``run``, which the CLI
passes where one is present). The gfx950 static report is ``report.attention_report`` (the runtime
layer; the CLI's ``--report``).
"""

from __future__ import annotations

import time

import attrs

from ..common import Target, row
from ..common import target_of as common_target_of

from .problem import AttentionProblem, dequantize, error_bound, random_inputs, reference


def __getattr__(name: str):
    if name == "AttentionConfig":  # the gfx950 config (imports the catalog): on first use
        from ..gfx950.attention_plan import AttentionConfig

        return AttentionConfig
    if name == "SM80_EMULATED_PAIRS":  # the CUDA emulator's limit without a GPU runner
        from ..sm80.attention_target import EMULATED_PAIRS

        return EMULATED_PAIRS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TARGETS = {
    "gfx950": Target("gfx950", "tvm_cdna4.kernels.gfx950.attention_target"),
    "sm80": Target("sm80", "tvm_cdna4.kernels.sm80.attention_target"),
    "sm90": Target("sm90", "tvm_cdna4.kernels.sm90.attention_target"),
}
PAGED_TARGETS = {
    "gfx950": Target("gfx950", "tvm_cdna4.kernels.gfx950.paged_target"),
    "sm80": Target("sm80", "tvm_cdna4.kernels.sm80.paged_target"),
    "sm90": Target("sm90", "tvm_cdna4.kernels.sm90.paged_target"),
}
"""Paged decode attention (``kernels.attention.paged``, issue 37): the targets whose ``paged_target`` module
implements ``plan``, ``choose``, ``emit``, ``build``, ``execute``, ``summary`` of a ``PagedDecodeProblem``."""
AttentionTarget = Target
"""Deprecated (0.2.0): the rows of ``TARGETS`` are ``kernels.common.Target`` records (a module of verbs)."""


def _function(target: str, verb: str):
    return row(TARGETS, "attention", target).verb(verb)


def plan(problem: AttentionProblem, target: str = "gfx950", config=None, **options):
    """The frozen plan of ``problem`` on ``target`` (``config``: the target's config record, None for
    its default; ``options``: the target planner's, sm80 ``arch``, on which its default depends)."""
    return _function(target, "plan")(problem, config, **options)


def choose(problem: AttentionProblem, target: str = "gfx950", **options):
    """The config ``target`` plans ``problem`` with when given none."""
    return _function(target, "choose")(problem, **options)


def target_of(plan_) -> str:
    """The target whose planner made ``plan_`` (the target folder of its record type; a plan holds its
    ``problem``)."""
    try:
        name = common_target_of(plan_)
    except ValueError:
        name = None
    if name not in TARGETS or not isinstance(getattr(plan_, "problem", None), AttentionProblem):
        raise ValueError(f"attention emit: expected a plan of {tuple(TARGETS)}, found a {type(plan_).__name__}")
    return name


def emit(plan_):
    """The PrimFunc of a plan of either target."""
    return _function(target_of(plan_), "emit")(plan_)


def emit_gfx950(plan_):
    """The gfx950 PrimFunc (``kernels.gfx950.attention_target.emit``)."""
    return _function("gfx950", "emit")(plan_)


def build(problem: AttentionProblem, target: str = "gfx950", config=None, **options):
    """The compiled kernel: gfx950 a ``rocm.build.BuildResult`` (``build_gfx950``: ``cache``), sm80 and
    sm90 the target's ``CudaBuild`` (``arch``, ``compiler``, ...)."""
    return _function(target, "build")(problem, config, **options)


def schedule_digest() -> str:
    """The gfx950 kernel's source digest (``kernels.gfx950.attention_target.schedule_digest``)."""
    from ..gfx950.attention_target import schedule_digest as digest

    return digest()


def cache_key(plan_) -> dict:
    """The build-cache key of a gfx950 plan (``kernels.gfx950.attention_target.cache_key``)."""
    from ..gfx950.attention_target import cache_key as key

    return key(plan_)


def build_gfx950(problem: AttentionProblem, config=None, cache: bool = True):
    """``build(problem, "gfx950", config, cache=cache)``."""
    return build(problem, "gfx950", config, cache=cache)


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
    ``reference`` (of the dequantized inputs) within ``error_bound`` (with the target's ``score_accumulation``:
    sm90's fp8 wgmma keeps 14 bits of the addends of ``S = Q K^T`` and ``O += P V``; emulated, sm90 fp8 runs with
    that accumulation too, ``emulate(..., fp8_accumulation=14)``, so the bound is tested on what the GPU computes,
    not on the emulator's default f32). gfx950: the CPU emulator (a
    ``run`` is refused, not ignored). sm80 and sm90: an NVIDIA GPU, which this layer does not reach: ``run(problem,
    arrays) -> (o, lse or None)`` does (the CLI passes ``tvm_cdna4.torch.run_attention`` where a GPU is
    present); without it, the CUDA emulator up to ``SM80_EMULATED_PAIRS`` pairs, beyond a ValueError
    saying a GPU is needed. ``options``: the planner's (sm80 ``arch``)."""
    p = plan(problem, target, config, **options)  # the target's refusals first (sm80: fp8)
    arrays = random_inputs(problem, seed)
    q, k, v = dequantize(problem, arrays)
    want_o, want_lse = reference(q, k, v, problem.causal, problem.scale)
    accumulation = _function(target, "score_accumulation")(problem)  # sm90 fp8: the tensor cores' 14 bits (execute's too)
    bound_o, bound_lse = error_bound(q, k, v, problem.causal, problem.scale, problem.dtype, accumulation)
    start = time.perf_counter()
    (o, lse), where = _function(target, "execute")(p, arrays, run)
    seconds = time.perf_counter() - start
    return Validation(_ratio(problem.heads_major(o), want_o, bound_o), None if lse is None else _ratio(lse, want_lse, bound_lse), where,
                      seconds)


def paged_verb(target: str, verb: str):
    """The paged decode attention's ``verb`` on ``target`` (``PAGED_TARGETS``)."""
    return row(PAGED_TARGETS, "paged decode attention", target).verb(verb)


def validate_paged(problem, target: str = "sm80", config=None, seed: int = 0, contexts=None, run=None,
                   **options) -> Validation:
    """The paged decode kernel on ``paged.random_inputs(problem, seed, contexts)`` against ``paged.reference``
    within ``paged.error_bound`` (``paged.compare``): on a GPU through ``run``, else the target's emulator
    for small problems. ``options``: the planner's (``context``, ``sms``)."""
    from . import paged

    p = paged_verb(target, "plan")(problem, config, **options)
    arrays = paged.random_inputs(problem, seed, contexts)
    start = time.perf_counter()
    (o, lse), where = paged_verb(target, "execute")(p, arrays, run)
    seconds = time.perf_counter() - start
    o_ratio, lse_ratio = paged.compare(problem, arrays, o, lse)
    return Validation(o_ratio, lse_ratio, where, seconds)


__all__ = ["PAGED_TARGETS", "SM80_EMULATED_PAIRS", "TARGETS", "AttentionConfig", "AttentionProblem", "AttentionTarget", "Validation", "build",
           "build_gfx950", "cache_key", "choose", "emit", "emit_gfx950", "plan", "schedule_digest", "target_of", "paged_verb", "validate", "validate_paged"]
