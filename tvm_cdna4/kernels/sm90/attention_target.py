"""The attention family's verbs on Hopper (``kernels.attention.TARGETS["sm90"]``): ``plan``, ``choose``,
``emit``, ``build``, ``execute``, ``summary``, from an ``AttentionProblem``.

The kernel: the warp-specialized TMA + wgmma forward of ``attention_plan`` / ``attention_emit`` (bf16 and
f16, and fp8 e4m3 with per-tensor scales at D 128, bf16 O). ``config`` None: the cost model's choice
(``attention_cost.choose``). ``build`` compiles for ``sm_90a`` (wgmma and ``setmaxnreg`` need the
architecture-specific target) through the build cache. ``execute`` runs through a GPU runner (``run(problem,
arrays) -> (O, LSE)``: ``tvm_cdna4.torch.run_attention``) or, for at most ``EMULATED_PAIRS`` scored pairs
(sm80's bound), the CUDA emulator (TMA, wgmma, mbarriers: ``emulate(..., target="sm90")``; fp8 with Hopper's 14-bit wgmma
accumulation, ``fp8_accumulation``, as ``score_accumulation`` charges it)."""

from __future__ import annotations

from ...cuda.build import cached_build, check_compiler, compile_blobs
from ...isa.wgmma_table import FP8_ACCUMULATION_BITS, KIND
from ..attention.problem import SCALED, Accumulation, AttentionProblem
from ..common import cache_key
from ..flags import FlagSet
from ..sm80.attention_target import EMULATED_PAIRS, execute_cuda
from .attention_plan import Sm90AttentionConfig, plan_sm90_attention
from .gemm_target import CONFIG_FLAGS

ARCH = "sm_90a"
SOURCES = ("attention_plan.py", "attention_emit.py", "attention_epilogue.py", "gemm_plan.py", "gemm_boxes.py",
           "gemm_emit.py", "gemm_epilogue.py", "gemm_cluster.py", "gemm_chunkres.py", "gemm_residual.py", "gemm_store.py", "gemm_shift.py")
"""The modules the kernel comes from: their digest keys the build cache."""
PLAN_FLAGS = (("sm90.attention_cost", "WEIGH_CONSUMERS"), ("sm90.attention_cost", "WEIGH_ITEM_OVERLAP"),
              ("sm90.attention_cost", "WEIGH_WALKS"), *CONFIG_FLAGS)
"""The sm90 attention's switches (``kernels.flags``; ``tvm_cdna4.torch.attention_kernel``'s cache keys
``plan_flags()``): the cost model's and those of the GEMM modules its plan imports (``gemm_target.CONFIG_FLAGS``)."""
plan_flags = FlagSet(PLAN_FLAGS)


def plan(problem: AttentionProblem, config: Sm90AttentionConfig | None = None, sms: int | None = None,
         smem_bytes: int | None = None):
    """The frozen ``Sm90AttentionPlan`` of ``problem`` with ``config`` (None: ``attention_cost.choose`` for ``sms``
    SMs of ``smem_bytes`` shared memory, the H200's by default)."""
    from .attention_cost import choose as choose_config

    config = choose_config(problem, sms, smem_bytes) if config is None else config
    return plan_sm90_attention(problem, config, smem_bytes, sms)


def choose(problem: AttentionProblem, **options) -> Sm90AttentionConfig:
    return plan(problem, None, **options).config


def replace_fields(problem: AttentionProblem, config: Sm90AttentionConfig, smem_bytes: int | None = None,
                   **fields) -> Sm90AttentionConfig:
    """``config`` with ``fields`` replaced (the CLI's ``--stages``, ``--epilogue``, ``--persistent``,
    ``--consumers``); new ``consumers`` keep the tile no wider than their registers fit (``attention_plan.widest_tile``
    of ``REGS``' cap: 128 keys for three at D 64) unless ``block_kv`` is among the fields; a new ``epilogue`` or
    ``consumers`` keeps the ring no deeper than fits beside O's buffer and Q (``attention_plan.deepest`` in
    ``smem_bytes``, the H200's by default: ``"tma_buffer"`` at D 128 runs 2 stages, not 3) unless ``stages`` is among
    the fields: then it stays as given. ``check`` refuses a value where the config is planned."""
    import attrs

    from ..devices import DEVICES
    from .attention_plan import EPILOGUES, REGS, deepest, widest_tile

    new = attrs.evolve(config, **fields)
    if "consumers" in fields and "block_kv" not in fields and new.consumers in REGS:
        new = attrs.evolve(new, block_kv=min(new.block_kv, widest_tile(problem, REGS[new.consumers][1])) or 16)
    if {"epilogue", "consumers"} & set(fields) and "stages" not in fields and new.epilogue in EPILOGUES \
            and new.consumers in REGS:
        room = deepest(problem, new.block_kv, smem_bytes or DEVICES["H200"].smem_per_unit, new.epilogue, new.consumers)
        new = attrs.evolve(new, stages=max(1, min(new.stages, room)))
    return new


def emit(p):
    from .attention_emit import emit_sm90_attention

    return emit_sm90_attention(p)


def schedule_digest() -> str:
    from .gemm_target import digest_of

    return digest_of(SOURCES)


def build(problem: AttentionProblem, config: Sm90AttentionConfig | None = None, arch: str = ARCH,
          compiler: str | None = None, cache: bool = True, **options):
    """The compiled kernel (``cuda.build.CudaBuild``) of ``plan(problem, config)`` for ``sm_90a`` (``sm_90``,
    what ``runtime.cuda.device_arch`` reads off an H100 / H200, builds for it too; another arch is refused)."""
    check_compiler(compiler)
    arch = ARCH if arch == "sm_90" else arch
    if arch != ARCH:
        raise ValueError(f"sm90 attention arch: wgmma and setmaxnreg need {ARCH!r} (or 'sm_90'), found {arch!r}")
    p = plan(problem, config, **options)
    key = cache_key("sm90", p, schedule_digest(), arch=arch, compiler=compiler)
    return cached_build("cuda-attention-sm90", key, lambda: compile_blobs(emit(p), arch, compiler), p.config, cache)


def score_accumulation(problem: AttentionProblem) -> Accumulation | None:
    """How ``S = Q K^T`` accumulates (``error_bound``'s ``accumulation``): fp8, Hopper's e4m3 wgmma keeps
    ``FP8_ACCUMULATION_BITS`` of each addend of a k32 step (``isa.wgmma_table``; docs/sm90_attention.md, "fp8
    accumulation"); bf16 and f16 in f32 (None)."""
    return Accumulation(FP8_ACCUMULATION_BITS, KIND["e4m3"].k) if problem.dtype in SCALED else None


def execute(p, arrays: dict, run=None):
    """((O, LSE), where): through ``run`` on the GPU, else the CUDA emulator for small problems, fp8 with the
    tensor cores' accumulation (``emulate(..., fp8_accumulation=)`` of ``score_accumulation``'s bits): the
    emulator computes what the GPU does, so that ``validate`` tests the bound that charges it."""
    accumulation = score_accumulation(p.problem)
    return execute_cuda(p, arrays, run, "sm90", emit, "an NVIDIA Hopper GPU",
                        None if accumulation is None else accumulation.bits)


def summary(p) -> dict:
    """``--emit config``: the plan record as one JSON object, with the target, the launch, when each consumer
    warpgroup releases Q (``early_q_release``, ``tiles_before_q``), O's buffer (element offset, ``"tma_buffer"``
    only) and the problem's flops."""
    import attrs

    return {"target": "sm90", "kernel": "tma-wgmma-warp-specialized", **attrs.asdict(p), "block_q": p.block_q,
            "threads": p.threads, "grid": p.ctas, "early_q_release": p.early_q_release,
            "tiles_before_q": p.tiles_before_q, "o_buffer": p.o_buffer if p.config.epilogue == "tma_buffer" else None,
            "flops": p.problem.flops()}


__all__ = ["ARCH", "EMULATED_PAIRS", "PLAN_FLAGS", "plan_flags", "build", "choose", "emit", "execute", "plan", "schedule_digest", "score_accumulation",
           "summary"]
