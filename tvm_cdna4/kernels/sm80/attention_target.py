"""The attention family's verbs on sm80-class CUDA (``kernels.attention.TARGETS["sm80"]``): ``plan``,
``choose``, ``emit``, ``build``, ``execute``, ``summary``, from an ``AttentionProblem``.

``config`` None: the cost model's default for the planned GPU (``attention_plan.default_config``; options
``sms``, ``arch``: causal on sm_90 takes the mbarrier pipeline). ``execute`` runs through a GPU runner
(``run(problem, arrays) -> (O, LSE)``, the runtime layer's ``tvm_cdna4.torch.attention``) or, for at most
``EMULATED_PAIRS`` scored pairs, the CUDA emulator."""

from __future__ import annotations

from ..attention.problem import AttentionProblem, output_arrays
from .attention import build_sm80_attention
from .attention_plan import Sm80AttentionConfig, plan_sm80_attention
from ..flags import FlagSet

PLAN_FLAGS = ()
"""The sm80 attention's switches (``kernels.flags``): none; its planner imports no module that has one."""
plan_flags = FlagSet(PLAN_FLAGS)

EMULATED_PAIRS = 1 << 16
"""The most (query, key) pairs (``AttentionProblem.visible_pairs``) ``execute`` runs in the CUDA
emulator when no GPU runner is passed (4,970 pairs took 0.7 s on one core of the 2-core CPU machine,
2026-12-02)."""


def plan(problem: AttentionProblem, config: Sm80AttentionConfig | None = None, **options):
    """The frozen ``Sm80AttentionPlan`` of ``problem`` (``options``: ``sms``, ``arch``)."""
    return plan_sm80_attention(problem, config, **options)


def choose(problem: AttentionProblem, **options) -> Sm80AttentionConfig:
    return plan(problem, None, **options).config


def emit(p):
    from .attention_emit import emit_sm80_attention

    return emit_sm80_attention(p)


def build(problem: AttentionProblem, config: Sm80AttentionConfig | None = None, **options):
    """The compiled kernel (``arch``, ``compiler``, ``cache``): ``attention.build_sm80_attention``."""
    return build_sm80_attention(problem, config, **options)


def score_accumulation(problem: AttentionProblem) -> None:
    """None: ``mma.sync`` accumulates ``S = Q K^T`` in f32 (bf16 and f16; fp8 is refused by the planner), what
    ``error_bound``'s ``F32_TERMS`` charges (sm90's fp8 wgmma does not: ``kernels.sm90.attention_target``)."""
    return None


def execute(p, arrays: dict, run=None):
    """((O, LSE), where): through ``run`` on the GPU, else the CUDA emulator for small problems."""
    return execute_cuda(p, arrays, run, "sm80", emit, "an NVIDIA GPU")


def execute_cuda(p, arrays: dict, run, target: str, emit_fn, gpu: str, fp8_accumulation: int | None = None):
    """A CUDA attention row's ``execute``: ``run(problem, arrays)`` on the GPU where given, else ``emit_fn(p)``
    in the CUDA emulator (``target``; ``fp8_accumulation``: ``emulate``'s, what the GPU's tensor cores keep) up to
    ``EMULATED_PAIRS`` scored pairs (beyond: a ValueError asking for ``gpu``). ((O, LSE), where)."""
    problem = p.problem
    if run is not None:
        return run(problem, arrays), "the NVIDIA GPU"
    if problem.visible_pairs() > EMULATED_PAIRS:
        raise ValueError(f"{target} attention validation of {problem.visible_pairs()} scored pairs needs {gpu} (the "
                         f"CUDA emulator takes at most {EMULATED_PAIRS}); run it where one is present")
    from ...emulator import emulate

    out = {**arrays, **output_arrays(problem)}
    emulate(emit_fn(p), *(out[param.name] for param in p.params), target=target, fp8_accumulation=fp8_accumulation)
    return (out["O"], out["LSE"]), "the CUDA emulator (no GPU runner)"


def summary(p) -> dict:
    """``--emit config``: the plan record as one JSON object, with the target and the problem's flops."""
    import attrs

    return {"target": "sm80", **attrs.asdict(p), "flops": p.problem.flops()}


__all__ = ["EMULATED_PAIRS", "PLAN_FLAGS", "plan_flags", "build", "choose", "emit", "execute", "plan", "score_accumulation", "summary"]
