"""The attention family's verbs on gfx950 (``kernels.attention.TARGETS["gfx950"]``): ``plan``,
``choose``, ``emit``, ``build``, ``execute``, ``summary``, from an ``AttentionProblem``.

``config`` None: the plan's default (``attention_plan.plan_gfx950_attention``); the kernel runs in the
CPU wavefront emulator (``execute``) and builds through ``rocm.build`` and the on-disk build cache,
keyed by the whole plan record (``common.cache_key``)."""

from __future__ import annotations

from ..attention.problem import AttentionProblem, output_arrays
from ..common import cache_key as key_of
from .attention_plan import AttentionConfig, plan_gfx950_attention


def plan(problem: AttentionProblem, config: AttentionConfig | None = None):
    """The frozen ``AttentionPlan`` of ``problem``."""
    return plan_gfx950_attention(problem, config)


def choose(problem: AttentionProblem) -> AttentionConfig:
    """The config ``plan`` takes without one."""
    return plan(problem).config


def emit(p):
    """The gfx950 PrimFunc (``attention_emit``; the ROCm build registered first)."""
    from ...rocm.build import register
    from .attention_emit import emit_gfx950_attention

    register()
    return emit_gfx950_attention(p)


def schedule_digest() -> str:
    """SHA-256 of everything the gfx950 attention kernel's code comes from (``cache.source_digest``)."""
    from ...cache import source_digest

    return source_digest("kernels/attention/*.py", "kernels/gfx950/*.py", "kernels/gemm/*.py", "kernels/common.py",
                         "patterns/*.py", "rocm/*.py", "isa/*.py", "tirx_private.py")


def cache_key(p) -> dict:
    """The build-cache key of a plan: ``common.cache_key`` of the whole record and the digest."""
    return key_of("gfx950", p, schedule_digest())


def build(problem: AttentionProblem, config: AttentionConfig | None = None, cache: bool = True):
    """``tvm_cdna4.build`` of the kernel through the build cache: the LLVM IR, assembly and code object."""
    from ...rocm.build import cached_build

    p = plan(problem, config)
    return cached_build("gfx950-attention", cache_key(p), lambda: emit(p), enabled=cache)


def score_accumulation(problem: AttentionProblem) -> None:
    """None: the MFMA accumulates ``S = Q K^T`` in its f32 accumulator, fp8 inputs too (the CDNA4 ISA documents
    no reduced accumulation, unlike Hopper's fp8 wgmma: ``kernels.sm90.attention_target``), what ``error_bound``'s
    ``F32_TERMS`` charges."""
    return None


def execute(p, arrays: dict, run=None):
    """Run plan ``p`` on the inputs ``arrays`` (``random_inputs``) in the CPU wavefront emulator:
    ((O, LSE), where)."""
    if run is not None:
        raise ValueError(f"attention validate run=: a GPU runner is sm80's; gfx950 validates in the CPU wavefront "
                         f"emulator (expected run=None, found {run!r})")
    from ...emulator import emulate

    out = {**arrays, **output_arrays(p.problem)}
    emulate(emit(p), *(out[param.name] for param in p.params), target="gfx950")
    return (out["O"], out["LSE"]), "the CPU wavefront emulator"


def summary(p) -> dict:
    """``--emit config``: the plan record as one JSON object, with the target and the problem's flops."""
    import attrs

    return {"target": "gfx950", **attrs.asdict(p), "flops": p.problem.flops()}


__all__ = ["build", "cache_key", "choose", "emit", "execute", "plan", "schedule_digest", "score_accumulation",
           "summary"]
