"""The ``gemm`` subcommand's target-specific actions: what the family's verbs do not cover.

``cli.gemm`` builds the problem, the config and the plan and emits through ``kernels.gemm`` alone; a
target's row here adds what runs beyond them (``Actions``):

* gfx950: ``--report``, the static report of the compiled kernel and the whole-GPU estimate
  (``report``, ``kernels.gfx950.gemm_cost``); ``--validate`` runs in the CPU wavefront emulator (no
  runner); without an action, a usage error naming the actions;
* sm80: the NVIDIA GPU: ``--validate``'s runner (``runtime.cuda.run_gemm``), ``--bench``
  (``runtime.cuda.bench_gemm``), ``--tune`` (``runtime.cuda.tune_problems``); without a GPU ``--validate``
  runs in the CUDA emulator (``emulates``, small problems), the other two are usage errors; without an action, the kernel is built for sm_80;
* sm90: the same GPU runner and ``--bench`` (``runtime.cuda`` builds each target's plans); without a GPU,
  ``--validate`` runs in the CUDA emulator (``emulates``); no ``--tune`` yet; without an action, the kernel
  is built for sm_90a.

A target without a row validates through its ``execute`` without a runner and has no ``--report``,
``--bench`` or ``--tune``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import attrs


@attrs.frozen
class Actions:
    """What ``gemm`` does on one target beyond the family's verbs."""

    default: str | None = None
    """Without an action: build the kernel and say so, for this (``sm_80``); None: a usage error naming ``needs``."""
    needs: str = "--validate, --emit tir/config"
    """The actions, for that usage error."""
    report: Callable | None = None
    """``--report``: ``report(run)`` (``run``: the ``cli.gemm.Run``)."""
    bench: Callable | None = None
    """``--bench``: ``bench(run)``."""
    gpu: Callable | None = None
    """``() -> (present, why not)``: the GPU ``--validate``, ``--bench`` and ``--tune`` run on; None: none needed."""
    run: Callable | None = None
    """``--validate``'s runner on the GPU, ``run(plan, arguments, cache=)`` (``kernels.gemm.validate(run=)``)."""
    tune: Callable | None = None
    """``--tune``: ``tune(problem) -> config``, timed on the GPU."""
    refused: dict = attrs.field(factory=dict)
    """Why an action is missing, by name (``report``, ``bench``)."""
    emulates: bool = False
    """Without the GPU, ``--validate`` runs the target's ``execute`` without a runner (the CUDA emulator)."""

    def gpu_refusal(self, args) -> str | None:
        """``--validate`` / ``--bench`` / ``--tune`` where they need a GPU that is not here."""
        wanted = [flag for flag, on in (("--validate", args.validate and not self.emulates), ("--bench", args.bench),
                                        ("--tune", args.tune)) if on]
        if self.gpu is None or not wanted:
            return None
        present, why = self.gpu()
        return None if present else f"{' and '.join(wanted)} needs an NVIDIA GPU, and none is available here ({why})"

    def runner(self, args):
        """The ``run`` of ``kernels.gemm.validate`` (None: the target's own, the emulator)."""
        if self.run is None or (self.emulates and not self.gpu()[0]):
            return None
        return lambda plan, arguments: self.run(plan, arguments, cache=not args.no_cache)


# ---------------------------------------------------------------------------------------- gfx950


def gfx950_report(run) -> None:
    """``--report``: the static report of the compiled kernel and the whole-GPU estimate of its work
    (a grouped kernel's at these rows); ``--json``: both as one JSON object, with the fusion."""
    from ..kernels.gfx950.gemm_cost import grouped_work, work_of
    from ..report import format_gpu_estimate, format_report, gpu_report, kernel_report, report_json

    work = grouped_work(run.plan, run.rows) if run.problem.grouped else work_of(run.plan)
    fusion = run.plan.epilogue.fusion
    if run.args.json:
        print(json.dumps({**report_json(run.built, run.title, work),
                          "fusion": {**fusion.as_dict(), "steps": fusion.describe()}}))
        return
    print(format_report(run.built, run.title))
    print(format_gpu_estimate(gpu_report(kernel_report(run.built.asm, run.built.kernel()), work)))


# ------------------------------------------------------------------------------------------ sm80


def cuda_gpu() -> tuple[bool, str]:
    from ..runtime import cuda

    return cuda.have_cuda_gpu()


def run_gemm(plan, arguments, cache: bool = True) -> None:
    from ..runtime import cuda

    cuda.run_gemm(plan, arguments, cache=cache)


def cuda_bench(run) -> None:
    """``--bench``: the median time of the plan's kernel on the GPU (``runtime.cuda.bench_gemm``), TFLOP/s
    (a grouped GEMM's also TB/s: A, the weights of the groups with rows, C)."""
    from ..kernels.gemm.grouped import moved_bytes
    from ..runtime import cuda

    p = run.problem
    ms = cuda.bench_gemm(run.plan, run.rows, run.group_rows)
    line = f"bench {run.title}: {ms:.3f} ms, {cuda.tflops(run.rows, p.N, p.K, ms):.1f} TFLOP/s"
    if p.grouped:
        line += f", {moved_bytes(run.group_rows, p.N, p.K, 2, 4 if p.out == 'f32' else 2) / ms / 1e9:.2f} TB/s"
    print(line)


def sm80_tune(problem):
    """``--tune``: the candidates timed on the GPU, the fastest stored for later builds (``runtime.cuda.tune_problems``)."""
    from ..runtime import cuda

    key = (problem.M, problem.N, problem.K, problem.dtype, problem.layout, problem.out)
    return cuda.tune_problems([key], cuda.device_arch())[key]["config"]


ACTIONS = {
    "gfx950": Actions(needs="--validate (CPU emulator), --report (static performance report), --emit asm/llvm/tir/config",
                      report=gfx950_report,
                      refused={"bench": "--bench needs a gfx950 GPU; use --report for the static estimate or --validate "
                                        "for the emulator"}),
    "sm80": Actions(default="sm_80", bench=cuda_bench, gpu=cuda_gpu, run=run_gemm, tune=sm80_tune, emulates=True,
                    refused={"report": "--report is the gfx950 static report; on sm80 use --bench on an NVIDIA GPU"}),
    "sm90": Actions(default="sm_90a", bench=cuda_bench, gpu=cuda_gpu, run=run_gemm, emulates=True,
                    refused={"report": "--report is the gfx950 static report; on sm90 use --bench on an NVIDIA GPU"}),
}


def actions_of(target: str) -> Actions:
    """The target's row (a target without one: ``Actions()``)."""
    return ACTIONS.get(target, Actions())
