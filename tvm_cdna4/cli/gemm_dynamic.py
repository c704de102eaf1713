"""``python -m tvm_cdna4 gemm --dynamic-m``: the dynamic-M GEMM (``kernels.gemm.dynamic_m``) from the CLI.

The kernel is compiled for a symbolic M with N and K static; ``-M`` is the run-time value, which
picks the bucket (its plan, its kernel) and the rows of the validated or timed problem:

    python -m tvm_cdna4 gemm --target sm80 --dynamic-m -M 100 -N 4096 -K 4096 --emit config
    python -m tvm_cdna4 gemm --target gfx950 --dynamic-m -M 300 -N 72 -K 128 --validate   # CPU emulator

The planner chooses each bucket's tile (no tile options); layouts nn and nt. gfx950 runs through
``cli_gfx950`` (``choose`` plans the bucket); sm80 here.
"""

from __future__ import annotations

import json
import sys

TILE_OPTIONS = ("block", "warps", "stages", "group_m", "ctas", "mfma", "lds_dma", "reduction", "tune")


def refusal(args) -> str | None:
    """Why the options cannot run with ``--dynamic-m`` (None when they can)."""
    given = [f"--{name.replace('_', '-')}" for name in TILE_OPTIONS if getattr(args, name, None) not in (None, False)]
    if given:
        return f"--dynamic-m plans every M bucket with the cost model: {', '.join(given)} cannot be given"
    if args.target == "gfx950" and getattr(args, "report", False):
        return "--report estimates a static problem; drop --dynamic-m (or use --emit config: the bucket's plan)"
    return None


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def run_sm80(args, run_on_gpu) -> int:
    """``--target sm80 --dynamic-m``: build (the default action), ``--emit``; ``--validate`` and ``--bench``
    through ``run_on_gpu(args, cfg, load, title)`` (``cli.gemm._run_sm80``) with the bucket's kernel."""
    from ..kernels.sm80.gemm import build_dynamic, cuda_source, plan_json

    def dynamic(arch):
        return build_dynamic(args.N, args.K, args.dtype, args.layout, args.out_dtype, arch, cache=not args.no_cache,
                             fusion=args.fusion)

    try:
        dyn = dynamic("sm_80")
        bucket = dyn.bucket(args.M)
    except (ValueError, TypeError) as err:
        return _usage(str(err))
    if args.emit == "config":
        print(json.dumps({**json.loads(plan_json(dyn.plan(args.M))), "buckets": [b.describe() for b in dyn.buckets]}))
    elif args.emit == "tir":
        print(dyn.primfunc(args.M).script())
    elif args.emit == "cuda":
        print(cuda_source(dyn.kernel_for(args.M)))
    elif not (args.validate or args.bench):
        dyn.kernel_for(args.M)
        print(f"built dynamic-M {args.layout} {args.dtype}->{args.out_dtype} N={args.N} K={args.K} for sm_80: "
              f"bucket M {bucket.describe()} (M = {args.M}), {dyn.plan(args.M).config.as_dict()}")
    if not (args.validate or args.bench):
        return 0

    def load():
        from ..runtime import cuda as runner

        return runner.DynamicKernel(dynamic(runner.device_arch())).kernel(args.M)

    title = f"dynamic-M {args.layout} {args.dtype}->{args.out_dtype} {args.M}x{args.N}x{args.K} (bucket {bucket.describe()})"
    return run_on_gpu(args, None, load, title)
