"""``python -m tvm_cdna4 gemm --groups M1,M2,...``: the grouped GEMM (``kernels.gemm.grouped``) from the CLI.

G GEMMs sharing N and K in one launch (mixture of experts): group ``g`` has ``Mg`` rows (0 allowed),
A is ``[T, K]`` with ``T = M1 + M2 + ...`` (``-M`` is not read), B ``[G, N, K]`` (layout ``nt``) or
``[G, K, N]`` (``nn``), C ``[T, N]``; the offsets ``[0, M1, M1 + M2, ..., T]`` are an int32 array the
kernel reads on the device. The kernel is the grouped GEMM's for the bucket of ``ceil(T / G)`` rows
per group (the planner's choice there: no tile options):

    python -m tvm_cdna4 gemm --target sm80 --groups 300,0,1,77 -N 4096 -K 4096 --dtype bf16 --emit config
    python -m tvm_cdna4 gemm --target gfx950 --groups 37,0,1,90 -N 72 -K 128 --validate      # CPU emulator
    python -m tvm_cdna4 gemm --target gfx950 --groups 1024,1024,1024,1024 -N 4096 -K 4096 --report
    python -m tvm_cdna4 gemm --target sm80 --groups 1000,24,0,3 -N 4096 -K 4096 --validate --bench   # GPU

``--validate``: gfx950 in the emulator, sm80 on an NVIDIA GPU, against numpy (float64, per group);
``--bench`` (sm80): the median time, TFLOP/s and TB/s (A, the weights of the groups that have rows,
C); ``--report`` (gfx950): the whole-GPU estimate of the compiled kernel for these rows
(``kernels.gfx950.gemm_cost.grouped_work``).
"""

from __future__ import annotations

import json

from .args import parse_row_counts
from .gemm_dynamic import TILE_OPTIONS, _usage


def parse_groups(text: str) -> list[int]:
    """The row counts of ``--groups`` (comma-separated ints >= 0, at least one, no empty item:
    ``cli.args.parse_row_counts``)."""
    return parse_row_counts(text)


def refusal(args) -> str | None:
    """Why the options cannot run with ``--groups`` (None when they can)."""
    given = [f"--{name.replace('_', '-')}" for name in TILE_OPTIONS if getattr(args, name, None) not in (None, False)]
    if given:
        return f"--groups plans every rows-per-group bucket with the cost model: {', '.join(given)} cannot be given"
    if getattr(args, "dynamic_m", False):
        return "--groups is dynamic in T already (A's rows, the offsets read on the device): drop --dynamic-m"
    if args.layout not in ("nt", "nn"):
        return f"--groups: layout {args.layout}; the grouped GEMM stores A [T, K] and B [G, N, K] (nt) or [G, K, N] (nn)"
    if args.target == "gfx950" and args.bench:
        return "--bench needs a gfx950 GPU; use --report for the static estimate or --validate for the emulator"
    if args.target != "gfx950" and (args.report or args.emit in ("asm", "llvm")):
        return "--report and --emit asm/llvm are gfx950 options; sm80 emits cuda, tir or config"
    if args.target == "gfx950" and args.emit == "cuda":
        return "--emit cuda is for --target sm80; gfx950 emits asm, llvm, tir or config"
    return None


def run(args) -> int:
    """``gemm --groups``: exit status 0, 1 (validation failed) or 2 (usage, no GPU)."""
    try:
        sizes = parse_groups(args.groups)
    except ValueError as err:
        return _usage(str(err))
    why = refusal(args)
    if why:
        return _usage(why)
    if args.target == "gfx950":
        return _run_gfx950(args, sizes)
    return _run_sm80(args, sizes)


def _title(args, grp, sizes, out: str) -> str:
    T = sum(sizes)
    return (f"grouped {args.layout} {args.dtype}->{out} G={len(sizes)} T={T} N={args.N} K={args.K} (rows per group "
            f"{grp.bucket(T).describe()})" + ("" if args.fusion.empty else f" epilogue {args.fusion.describe()}"))


def inputs(sizes, N: int, K: int, layout: str, a_dtype, b_dtype, fusion, out_np, rng):
    """A ``[T, K]`` and B (``[G, N, K]`` / ``[G, K, N]``) of the numpy dtypes on the grid of 1/8 in
    [-1/2, 1/2] (every product exact in f32: ``runtime.cuda.grid_inputs``), the int32 offsets, the
    float64 product and the fused epilogue's inputs (``kernels.gemm.epilogue.random_inputs``, the
    per-column ones per group)."""
    import numpy as np

    from ..kernels.gemm.epilogue import random_inputs
    from ..kernels.gemm.grouped import offsets_of, reference

    G, T = len(sizes), sum(sizes)
    off = np.asarray(offsets_of(sizes), np.int32)
    step = 1 if np.issubdtype(np.dtype(a_dtype), np.integer) else 1 / 8  # i8: the integers themselves
    a = (rng.integers(-4, 5, (T, K)) * step).astype(a_dtype)
    b = (rng.integers(-4, 5, (G, N, K) if layout == "nt" else (G, K, N)) * step).astype(b_dtype)
    acc = reference(a.astype(np.float64), b.astype(np.float64), off, layout)
    return a, b, off, acc, random_inputs(fusion, T, N, rng, out_np, groups=G)


def check(title: str, c, acc, fusion, fused: dict, off, out: str) -> int:
    """Print C against the epilogue's reference of the exact product (``kernels.gemm.epilogue.check``: every
    element within its bound; the per-group inputs gathered per row; i32 and f64 outputs: equal); 0 or 1."""
    import numpy as np

    from ..kernels.gemm.epilogue import check as check_fused
    from ..kernels.gemm.grouped import per_row

    if out in ("i32", "f64"):
        worst = float(np.max(np.abs(np.asarray(c, np.float64) - acc), initial=0.0))
        good = worst == 0.0
        print(f"validate {title}: largest error = {worst:.3g} (exact products) {'OK' if good else 'FAIL'}")
    else:
        worst, good = check_fused(c, acc, fusion, per_row(fused, off), out)
        print(f"validate {title}: largest error / bound = {worst:.3f} {'OK' if good else 'FAIL'}")
    return 0 if good else 1


# ------------------------------------------------------------------------------------------ sm80


def _run_sm80(args, sizes) -> int:
    from ..kernels.sm80.gemm import build_grouped, cuda_source, plan_json

    args.out_dtype = args.out_dtype or "f32"
    if args.dtype not in ("f16", "bf16") or args.out_dtype not in ("f32", "f16", "bf16"):
        return _usage("--target sm80 supports --dtype f16/bf16 and --out-dtype f32/f16/bf16")
    T = sum(sizes)

    def grouped(arch):
        return build_grouped(len(sizes), args.N, args.K, args.dtype, args.layout, args.out_dtype, arch,
                             cache=not args.no_cache, fusion=args.fusion)

    try:
        grp = grouped("sm_80")
        grp.bucket(T)
    except (ValueError, TypeError) as err:
        return _usage(str(err))
    if args.emit == "config":
        print(json.dumps({**json.loads(plan_json(grp.plan(T))), "T": T, "group_rows": sizes,
                          "buckets": [b.describe() for b in grp.buckets]}))
    elif args.emit == "tir":
        print(grp.primfunc(T).script())
    elif args.emit == "cuda":
        print(cuda_source(grp.kernel_for(T)))
    elif not (args.validate or args.bench):
        grp.kernel_for(T)
        print(f"built {_title(args, grp, sizes, args.out_dtype)} for sm_80: {grp.plan(T).config.as_dict()}")
    if not (args.validate or args.bench):
        return 0
    return _sm80_on_gpu(args, grouped, sizes)


def _sm80_on_gpu(args, grouped, sizes) -> int:
    """``--validate`` / ``--bench`` on the NVIDIA GPU (the kernel built for its arch)."""
    import numpy as np
    import torch
    import tvm_ffi

    from ..runtime import cuda as runner
    from ..kernels.gemm.grouped import moved_bytes

    ok, why = runner.have_cuda_gpu()
    if not ok:
        return _usage(f"--validate/--bench need an NVIDIA GPU, and none is available here ({why})")
    N, K, T = args.N, args.K, sum(sizes)
    grp = grouped(runner.device_arch())
    title, fn = _title(args, grp, sizes, args.out_dtype), runner.DynamicKernel(grp).kernel(T)
    dt = runner.np_dtype(args.dtype)
    a, b, off, acc, fused = inputs(sizes, N, K, args.layout, dt, dt, args.fusion, runner.np_dtype(args.out_dtype),
                                   np.random.default_rng(args.seed))
    c = torch.full((T, N), float("nan"), dtype=runner.torch_dtype(args.out_dtype), device="cuda")
    tensors = [runner.to_torch(a), runner.to_torch(b), c, runner.to_torch(off),
               *(runner.to_torch(fused[name]) for name in args.fusion.inputs())]
    packed = [tvm_ffi.from_dlpack(t) for t in tensors]
    status = 0
    if args.validate:
        fn(*packed)
        torch.cuda.synchronize()
        status = check(title, c.float().cpu().numpy(), acc, args.fusion, fused, off, args.out_dtype)
    if args.bench:
        ms = runner.bench_ms(lambda: fn(*packed))
        nbytes = moved_bytes(sizes, N, K, 2, 4 if args.out_dtype == "f32" else 2)
        print(f"bench {title}: {ms:.3f} ms, {runner.tflops(T, N, K, ms):.1f} TFLOP/s, {nbytes / ms / 1e9:.2f} TB/s")
    return status


# ---------------------------------------------------------------------------------------- gfx950


def gfx950_config(plan, T: int) -> dict:
    """``--emit config`` of a grouped gfx950 plan: the config, the groups, the launch (text where it
    depends on T) and the planner's estimate at its rows per group."""
    import attrs

    from ..kernels.gfx950.gemm_plan import plan_gfx950_gemm, planned_estimate

    g = plan.grid.grouping
    static = plan_gfx950_gemm(g.rows.representative, plan.N, plan.K, plan.dtype, plan.layout, plan.epilogue.out_dtype,
                              plan.config, fusion=plan.epilogue.fusion)
    est = planned_estimate(static, groups=g.count)
    return {**attrs.asdict(plan.config), **g.summary(), "T": T, "epilogue": list(plan.epilogue.ops),
            "fusion": plan.epilogue.fusion.as_dict(),
            "workgroups": str(plan.grid.groups), "tiles": [str(plan.grid.tiles[0]), plan.grid.tiles[1]],
            "planned_estimate": {"time_us": 1e6 * est.time_s, "roofline_fraction": est.roofline_fraction,
                                 "tile_efficiency": est.tile_efficiency, "bound": est.bound}}


def _run_gfx950(args, sizes) -> int:
    from .gemm_gfx950 import _out_dtype
    from ..errors import ContractError
    from ..kernels.gfx950.gemm import build_grouped, build_plan

    T = sum(sizes)
    if not (args.validate or args.report or args.emit):
        return _usage("gemm --target gfx950 --groups needs an action: --validate (CPU emulator), --report, --emit")
    try:
        out = _out_dtype(args)
        grp = build_grouped(len(sizes), args.N, args.K, args.dtype, args.layout, out, cache=not args.no_cache,
                            fusion=args.fusion)
        plan = grp.plan(T)
        result = build_plan(plan, not args.no_cache) if args.emit in ("asm", "llvm") or args.report else None
        func = grp.primfunc(T) if args.validate or args.emit == "tir" else None
    except ContractError:
        raise
    except (ValueError, TypeError) as err:
        return _usage(str(err))
    title = _title(args, grp, sizes, out)
    if args.emit == "config":
        print(json.dumps(gfx950_config(plan, T)))
    elif args.emit in ("asm", "llvm"):
        print(result.asm if args.emit == "asm" else result.llvm_ir)
    elif args.emit == "tir":
        print(func.script())
    if args.report:
        from ..report import format_gpu_estimate, format_report, gpu_report, kernel_report
        from ..kernels.gfx950.gemm_cost import grouped_work

        print(format_report(result, title))
        print(format_gpu_estimate(gpu_report(kernel_report(result.asm, result.kernel()), grouped_work(plan, T))))
    if not args.validate:
        return 0
    return _emulate(args, sizes, func, title, out)


def _emulate(args, sizes, func, title: str, out: str) -> int:
    import time

    import ml_dtypes
    import numpy as np

    from .gemm_gfx950 import OUT_NP
    from ..emulator import EmulationError, emulate
    from ..kernels.gfx950.gemm_plan import DTYPES

    spec = DTYPES[args.dtype]
    ta, tb = spec.numpy if isinstance(spec.numpy, tuple) else (spec.numpy, spec.numpy)
    out_np = ml_dtypes.bfloat16 if out == "bf16" else OUT_NP[out]
    a, b, off, acc, fused = inputs(sizes, args.N, args.K, args.layout, ta, tb, args.fusion, out_np,
                                   np.random.default_rng(args.seed))
    c = np.full((sum(sizes), args.N), np.nan if out != "i32" else 0, out_np)
    start = time.perf_counter()
    try:
        emulate(func, a, b, c, off, *(fused[name] for name in args.fusion.inputs()))
    except EmulationError as err:
        print(f"emulation found a kernel bug:\n{err}\nFAIL")
        return 1
    print(f"emulated {title} in {time.perf_counter() - start:.2f} s (CPU wavefront emulator)")
    status = check(title, c, acc, args.fusion, fused, off, out)
    print("PASS" if status == 0 else "FAIL")
    return status
