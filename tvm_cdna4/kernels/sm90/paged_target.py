"""The paged decode attention's verbs on Hopper (``kernels.attention.PAGED_TARGETS["sm90"]``): ``plan``,
``choose``, ``emit``, ``build``, ``execute``, ``summary``, from a ``PagedDecodeProblem``
(``kernels.attention.paged``). The sm80 row's kernels, workspace and launch (``kernels.sm80.paged_target``),
``main`` replaced by the TMA producer-warp kernel of ``paged_decode_plan`` / ``paged_decode_emit`` (built for
``sm_90a``); ``execute`` runs through a GPU runner or, up to sm80's ``EMULATED_KEYS`` keys, the CUDA emulator
(``target="sm90"``: TMA, mbarrier transaction counts)."""

from __future__ import annotations

from ..attention.paged import PagedDecodeProblem
from ..sm80 import paged_target as sm80
from ..sm80.paged_decode_plan import PagedDecodeConfig
from .paged_decode_plan import Sm90PagedDecodePlan, plan_paged_decode_sm90

ARCH = "sm_90a"  # TMA's cp.async.bulk.tensor and mbarrier expect-tx need sm_90
workspace = sm80.workspace


def plan(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, **options) -> Sm90PagedDecodePlan:
    """The frozen plan (``options``: ``context``, the longest context's hint; ``sms``)."""
    return plan_paged_decode_sm90(problem, config, **options)


def choose(problem: PagedDecodeProblem, **options) -> PagedDecodeConfig:
    import attrs

    p = plan(problem, None, **options)
    return attrs.evolve(p.config, partition=p.partition)


def emit(p: Sm90PagedDecodePlan):
    """``(main, merge)``: the two PrimFuncs (merge None with the last-CTA merge; the merge is sm80's)."""
    from ..sm80.paged_decode_emit import emit_paged_merge
    from .paged_decode_emit import emit_paged_decode

    return emit_paged_decode(p), (emit_paged_merge(p) if p.merge_params else None)


def build(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, arch: str = ARCH,
          compiler: str | None = None, cache: bool = True, **options):
    """``(main, merge)``: the two compiled kernels through the build cache (merge None with the last-CTA merge);
    ``sm_90`` (what ``runtime.cuda.device_arch`` reads off an H100 / H200) builds for ``sm_90a``, as the GEMM."""
    from .paged_decode_emit import emit_paged_decode

    arch = ARCH if arch == "sm_90" else arch
    return sm80.build_with(plan(problem, config, **options), emit_paged_decode, arch, compiler, cache, "sm90")


def execute(p: Sm90PagedDecodePlan, arrays: dict, run=None):
    """((O, LSE), where): through ``run`` on the GPU, else the CUDA emulator for small problems."""
    return sm80.execute_with(p, arrays, run, emit(p) if run is None else None, "sm90")


def summary(p: Sm90PagedDecodePlan) -> dict:
    """``--emit config``: sm80's summary of the plan, with the producer warp's threads and the TMA boxes."""
    return {**sm80.summary(p), "target": "sm90", "block_threads": p.block_threads, "tma_slices": p.slices,
            "swizzle_bytes": p.swizzle_bytes}


__all__ = ["ARCH", "build", "choose", "emit", "execute", "plan", "summary", "workspace"]
