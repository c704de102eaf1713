"""``python -m tvm_cdna4 gemm --dynamic-m``: the dynamic-M GEMM (``schedules.dynamic_m``) from the CLI.

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
    if not args.fusion.empty:
        return f"--dynamic-m with a fused epilogue ({args.fusion.describe()}) is not in this build yet"
    if args.target == "gfx950" and getattr(args, "report", False):
        return "--report estimates a static problem; drop --dynamic-m (or use --emit config: the bucket's plan)"
    return None


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def gpu_arch(args) -> tuple[str, str | None]:
    """(the arch to build for, why not or None): sm_80, or with ``--validate`` / ``--bench`` the GPU's
    (none: the reason, a usage error)."""
    if not (args.validate or args.bench):
        return "sm_80", None
    from .runtime import cuda as runner

    ok, why = runner.have_cuda_gpu()
    if not ok:
        return "", f"--validate/--bench need an NVIDIA GPU, and none is available here ({why})"
    return runner.device_arch(), None


def run_sm80(args) -> int:
    """``--target sm80 --dynamic-m``: build (the default action), ``--emit``, ``--validate``, ``--bench``."""
    from .schedules.cuda_gemm import build_dynamic, cuda_source, plan_json

    arch, why = gpu_arch(args)
    if why:
        return _usage(why)
    try:
        dyn = build_dynamic(args.N, args.K, args.dtype, args.layout, args.out_dtype, arch, cache=not args.no_cache)
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
        print(f"built dynamic-M {args.layout} {args.dtype}->{args.out_dtype} N={args.N} K={args.K} for {arch}: "
              f"bucket M {bucket.describe()} (M = {args.M}), {dyn.plan(args.M).config.as_dict()}")
    if not (args.validate or args.bench):
        return 0
    return _run_on_gpu(args, dyn)


def _run_on_gpu(args, dyn) -> int:
    import numpy as np

    from .runtime import cuda as runner

    M, N, K = args.M, args.N, args.K
    title = f"dynamic-M {args.layout} {args.dtype}->{args.out_dtype} {M}x{N}x{K} (bucket {dyn.bucket(M).describe()})"
    fn = runner.DynamicKernel(dyn).kernel(M)
    status = 0
    if args.validate:
        a, b = runner.random_inputs(M, N, K, args.dtype, args.layout, np.random.default_rng(args.seed))
        out = runner.run_numpy(fn, a, b, M, N, args.out_dtype)
        err, good = runner.check_output(out, runner.reference(a, b, args.layout), args.out_dtype)
        print(f"validate {title}: rel_err={err:.2e} tol={runner.tolerance(args.out_dtype):.0e} {'OK' if good else 'FAIL'}")
        status = 0 if good else 1
    if args.bench:
        ms = runner.bench_ms(runner.random_launcher(fn, M, N, K, args.dtype, args.layout, args.out_dtype))
        print(f"bench {title}: {ms:.3f} ms, {runner.tflops(M, N, K, ms):.1f} TFLOP/s")
    return status
