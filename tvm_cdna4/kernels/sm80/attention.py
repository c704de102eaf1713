"""The sm80 attention forward's public entry (issue 26 part 2): ``sm80_attention`` (the PrimFunc) and
``build_sm80_attention`` (compiled through the build cache, as ``kernels.sm80.gemm.build``). The plan is
``attention_sm80_plan`` (its docstring: the kernel), the emission ``attention_sm80_emit``."""

from __future__ import annotations

from ..attention.problem import AttentionProblem
from .attention_plan import Sm80AttentionConfig, Sm80AttentionPlan, arch_number, plan_sm80_attention


def sm80_attention(problem: AttentionProblem, config: Sm80AttentionConfig | None = None):
    """The TIRx PrimFunc ``main(Q, K, V, O, LSE)`` of ``problem`` (``config``: the cost model's default)."""
    from .attention_emit import emit_sm80_attention

    return emit_sm80_attention(plan_sm80_attention(problem, config))


def build_key(p: Sm80AttentionPlan, arch: str = "sm_80", compiler: str | None = None) -> dict:
    """The build-cache key: every plan field, the arch, the device compiler and the attention
    schedule's source digest (with the GEMM's: the compile path and fragment helpers are shared)."""
    from ...cache import source_digest
    from ..common import cache_key
    from .gemm import schedule_digest

    return cache_key("sm80", p, schedule_digest(), arch=arch, compiler=compiler,
                     attention=source_digest("kernels/attention/*.py", "kernels/sm80/attention*.py"))


def check_arch(p: Sm80AttentionPlan, arch: str) -> None:
    """ValueError for ``sync="mbarrier"`` below sm_90: TIRx's ``T.cuda.mbarrier_wait`` is a
    ``mbarrier.try_wait.parity`` loop (PTX ISA: sm_90)."""
    if p.config.mbarrier and arch_number(arch) < 90:
        raise ValueError(f"attention sync='mbarrier' needs sm_90 or later (mbarrier.try_wait); found arch {arch!r}")


def build_sm80_attention(problem: AttentionProblem, config: Sm80AttentionConfig | None = None, arch: str = "sm_80",
                         compiler: str | None = None, cache: bool = True):
    """Compile the kernel of ``problem`` (``config`` None: ``kernels.sm80.attention_plan.default_config`` for ``arch``) for
    ``arch`` with ``compiler`` (None: TIRx's NVRTC; ``"nvcc"`` / ``"nvrtc"``): a ``kernels.sm80.gemm.CudaBuild``
    (``source``, ``library``, ``config``, ``device_config``), through the build cache (``cache``)."""
    from .attention_emit import emit_sm80_attention
    from .gemm import _check_compiler, cached_build

    _check_compiler(compiler)
    p = plan_sm80_attention(problem, config, arch=arch)
    check_arch(p, arch)
    return cached_build("cuda-attention", build_key(p, arch, compiler), p, arch, compiler, emit_sm80_attention, cache)


__all__ = ["build_key", "build_sm80_attention", "check_arch", "sm80_attention"]
