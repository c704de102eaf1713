"""The paged decode attention's verbs on gfx950 (``kernels.attention.PAGED_TARGETS["gfx950"]``): ``plan``,
``choose``, ``emit``, ``build``, ``execute``, ``summary``, from a ``PagedDecodeProblem``
(``kernels.attention.paged``). One kernel (``paged_decode_plan``: split-KV, the merge by the last
workgroup of each unit); ``execute`` runs it in the CPU wavefront emulator, ``estimate`` is the static
whole-GPU estimate (``paged_decode_cost``)."""

from __future__ import annotations

import math

from ..attention.paged import PagedDecodeProblem, output_arrays
from ..common import cache_key as key_of
from .paged_decode_plan import PagedDecodeConfig, PagedDecodePlan, plan_gfx950_paged_decode


def plan(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, context: int | None = None,
         **options) -> PagedDecodePlan:
    """The frozen plan (``context``: the longest context's hint for the split count, default the
    capacity). ``options`` other targets' planners take (``sms``) are refused by name."""
    if options:
        raise ValueError(f"gfx950 paged decode plan: unknown option(s) {sorted(options)}; expected context")
    if context is not None and (isinstance(context, bool) or not isinstance(context, int) or context < 1):
        raise ValueError(f"gfx950 paged decode context: the longest context's hint is a positive int, found {context!r}")
    return plan_gfx950_paged_decode(problem, config, context)


def choose(problem: PagedDecodeProblem, **options) -> PagedDecodeConfig:
    """The config ``plan`` takes without one (its ``splits`` filled in)."""
    return plan(problem, None, **options).config


def emit(p: PagedDecodePlan):
    """The gfx950 PrimFunc (``paged_decode_emit``; the ROCm build registered first)."""
    from ...rocm.build import register
    from .paged_decode_emit import emit_gfx950_paged_decode

    register()
    return emit_gfx950_paged_decode(p)


def schedule_digest() -> str:
    """SHA-256 of everything the kernel's code comes from (``cache.source_digest``)."""
    from ...cache import source_digest

    return source_digest("kernels/attention/*.py", "kernels/gfx950/*.py", "kernels/gemm/*.py", "kernels/common.py",
                         "patterns/*.py", "rocm/*.py", "isa/*.py", "tirx_private.py")


def build(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, cache: bool = True, **options):
    """``tvm_cdna4.build`` of the kernel through the build cache: the LLVM IR, assembly and code object."""
    from ...rocm.build import cached_build

    p = plan(problem, config, **options)
    return cached_build("gfx950-paged", key_of("gfx950", p, schedule_digest()), lambda: emit(p), enabled=cache)


def workspace(p: PagedDecodePlan) -> dict:
    """``WORK_O``, ``WORK_LSE`` (NaN: every slot read is written first) and ``TICKETS`` (zeros: the
    kernel leaves them zero)."""
    import numpy as np

    shapes = {q.name: q.shape for q in p.params}
    return {"WORK_O": np.full(shapes["WORK_O"], np.nan, np.float32),
            "WORK_LSE": np.full(shapes["WORK_LSE"], np.nan, np.float32),
            "TICKETS": np.zeros(shapes["TICKETS"], np.uint32)}


def execute(p: PagedDecodePlan, arrays: dict, run=None):
    """((O, LSE), where): the kernel on ``arrays`` (``paged.random_inputs``) in the CPU wavefront emulator."""
    if run is not None:
        raise ValueError(f"paged decode validate run=: a GPU runner is sm80's; gfx950 validates in the CPU wavefront "
                         f"emulator (expected run=None, found {run!r})")
    from ...emulator import emulate

    out = {**arrays, **output_arrays(p.problem), **workspace(p)}
    emulate(emit(p), *(out[q.name] for q in p.params), target="gfx950")
    if out["TICKETS"].any():
        raise AssertionError("gfx950 paged decode: the kernel left a ticket counter non-zero")
    return (out["O"], out["LSE"]), "the CPU wavefront emulator"


def estimate(p: PagedDecodePlan, contexts, tile_cycles: float | None = None):
    """The static whole-GPU estimate on ``contexts`` (``paged_decode_cost.paged_estimate``)."""
    from .paged_decode_cost import paged_estimate

    return paged_estimate(p, contexts, tile_cycles)


def summary(p: PagedDecodePlan) -> dict:
    """``--emit config``: the plan as one JSON object (``split_kv``, the launch, the workspace)."""
    import attrs

    return {"target": "gfx950", "kernel": "paged decode", "problem": attrs.asdict(p.problem),
            "config": attrs.asdict(p.config), "split_kv": p.splits, "mfma": p.mfma, "tr": p.tr,
            "row_tiles": p.row_tiles, "row_blocks": p.row_blocks, "workgroups": p.groups, "threads": 64,
            "lds_bytes": p.lds_bytes, "bytes_in_flight_per_wave": p.tile_bytes() if p.config.prefetch else p.tile_bytes() // 2,
            "workspace_bytes": 4 * sum(math.prod(q.shape) for q in p.params if q.name.startswith("WORK"))}


__all__ = ["build", "choose", "emit", "estimate", "execute", "plan", "schedule_digest", "summary", "workspace"]
