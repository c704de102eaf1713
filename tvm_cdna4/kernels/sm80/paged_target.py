"""The paged decode attention's verbs on sm80-class CUDA (``kernels.attention.PAGED_TARGETS["sm80"]``):
``plan``, ``choose``, ``emit``, ``build``, ``execute``, ``summary``, from a ``PagedDecodeProblem``
(``kernels.attention.paged``). Two kernels (``paged_decode_plan``): ``main`` (the split-KV partials into
the workspace ``WO``, ``WM``, ``WL``) and ``merge`` (O and LSE); or, with the plan's merge ``"last-cta"``,
``main`` alone (its last CTA per sequence and kv head merges, through the ``TICKETS`` counters: ``merge`` is
None).

``execute`` runs through a GPU runner (``run(problem, arrays) -> (O, LSE)``, the runtime layer's
``tvm_cdna4.torch.paged_attention``) or, up to ``EMULATED_KEYS`` keys over the batch, the CUDA emulator."""

from __future__ import annotations

from ..attention.paged import PagedDecodeProblem, clamped_contexts, output_arrays
from .paged_decode_plan import PagedDecodeConfig, PagedDecodePlan, plan_paged_decode

EMULATED_KEYS = 2048
"""The most keys (clamped contexts summed over the batch) ``execute`` runs in the CUDA emulator without a GPU
runner (378 keys x 2 kv heads, D 128, 4 queries took 2.1 s on one core, 2026-12)."""


def plan(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, **options) -> PagedDecodePlan:
    """The frozen plan (``options``: ``context``, the longest context's hint; ``sms``; ``arch``, the arch it is
    compiled for: ``paged_decode_plan.choose_cvt``)."""
    return plan_paged_decode(problem, config, **options)


def choose(problem: PagedDecodeProblem, **options) -> PagedDecodeConfig:
    import attrs

    p = plan(problem, None, **options)
    return attrs.evolve(p.config, partition=p.partition)


def emit(p: PagedDecodePlan):
    """``(main, merge)``: the two PrimFuncs (merge None with the last-CTA merge)."""
    from .paged_decode_emit import emit_paged_decode, emit_paged_merge

    return emit_paged_decode(p), (emit_paged_merge(p) if p.merge_params else None)


def build_key(p: PagedDecodePlan, which: str, arch: str, compiler: str | None, target: str = "sm80") -> dict:
    from ...cache import source_digest
    from ..common import cache_key
    from .gemm import schedule_digest

    sources = ("kernels/attention/paged.py", "kernels/sm80/paged_decode*.py") + (
        ("kernels/sm90/paged_decode*.py", "kernels/sm90/gemm_emit.py") if target == "sm90" else ())
    return cache_key(target, p, schedule_digest(), arch=arch, compiler=compiler, kernel=which,
                     paged=source_digest(*sources))


def build(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, arch: str = "sm_80",
          compiler: str | None = None, cache: bool = True, **options):
    """``(main, merge)``: the two compiled kernels (``kernels.sm80.gemm.CudaBuild``), through the build cache
    (merge None with the last-CTA merge)."""
    from .paged_decode_emit import emit_paged_decode

    return build_with(plan(problem, config, arch=arch, **options), emit_paged_decode, arch, compiler, cache, "sm80")


def build_with(p: PagedDecodePlan, emit_main, arch: str, compiler: str | None, cache: bool, target: str):
    """``build`` of a plan whose ``main`` is ``emit_main``'s (the merge kernel is this target's)."""
    from .gemm import _check_compiler, cached_build
    from .paged_decode_emit import emit_paged_merge

    _check_compiler(compiler)
    return (cached_build("cuda-paged", build_key(p, "main", arch, compiler, target), p, arch, compiler, emit_main,
                         cache),
            cached_build("cuda-paged-merge", build_key(p, "merge", arch, compiler, target), p, arch, compiler,
                         emit_paged_merge, cache) if p.merge_params else None)


def workspace(p: PagedDecodePlan) -> dict:
    """The workspace arrays (numpy f32, NaN: the kernel writes every slot it reads; the last-CTA merge's
    ``TICKETS``: zeros, as every call leaves them)."""
    import numpy as np

    D = p.problem.head_dim
    tickets = {"TICKETS": np.zeros(p.problem.batch * p.problem.kv_heads, np.uint32)} if p.merge == "last-cta" else {}
    return {"WO": np.full((p.slots, p.rows, D), np.nan, np.float32),
            "WM": np.full((p.slots, p.rows), np.nan, np.float32), "WL": np.full((p.slots, p.rows), np.nan, np.float32),
            **tickets}


def execute(p: PagedDecodePlan, arrays: dict, run=None):
    """((O, LSE), where): through ``run`` on the GPU, else the CUDA emulator (both kernels) for small problems."""
    return execute_with(p, arrays, run, emit(p), "sm80")


def execute_with(p: PagedDecodePlan, arrays: dict, run, kernels, target: str):
    """``execute`` of a plan whose ``kernels`` are ``(main, merge)`` (``emit``'s), emulated as ``target``'s."""
    import numpy as np

    problem = p.problem
    if run is not None:
        return run(problem, arrays), "the NVIDIA GPU"
    keys = sum(clamped_contexts(problem, arrays["CONTEXT_LENS"]))
    if keys > EMULATED_KEYS:
        raise ValueError(f"{target} paged decode validation of {keys} keys needs an NVIDIA GPU (the CUDA emulator takes "
                         f"at most {EMULATED_KEYS}); run it where one is present")
    from ...emulator import emulate

    out = {**arrays, **output_arrays(problem), **workspace(p)}
    raw = {name: a.view(np.uint8) if name.endswith("_CACHE") and a.dtype.itemsize == 1 else a for name, a in out.items()}
    main, merge = kernels
    waits = p.pdl  # PDL: neither kernel reads global memory before its griddepcontrol.wait (paged_decode_pdl)
    emulate(main, *(raw[q.name] for q in p.params), target=target,
            after_wait=tuple(q.name for q in p.params) if waits else ())
    if merge is not None:
        emulate(merge, *(raw[q.name] for q in p.merge_params), target=target,
                after_wait=tuple(q.name for q in p.merge_params) if waits else ())
    return (out["O"], out["LSE"]), "the CUDA emulator (no GPU runner)"


def summary(p: PagedDecodePlan) -> dict:
    """``--emit config``: the plan as one JSON object (``split_kv``, the launch, the workspace)."""
    import attrs

    return {"target": "sm80", "kernel": "paged decode", "problem": attrs.asdict(p.problem),
            "config": attrs.asdict(p.config), "split_kv": p.split_kv, "merge": p.merge, "context": p.context, "sms": p.sms,
            "partition": p.partition, "ctas": p.ctas, "threads": p.threads, "smem_bytes": p.smem_bytes, "merge_ctas": p.merge_ctas,
            "workspace_bytes": p.workspace_bytes()}


__all__ = ["EMULATED_KEYS", "build", "build_with", "choose", "emit", "execute", "execute_with", "plan", "summary",
           "workspace"]
