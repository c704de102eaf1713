"""``python -m tvm_cdna4 gemm``: build, validate, benchmark or print the GEMM schedule.

    python -m tvm_cdna4 gemm --target sm80 --dtype f16 --layout nt -M 4096 -N 4096 -K 4096 --emit cuda
    python -m tvm_cdna4 gemm --target sm80 --dtype bf16 --layout tn -M 1000 -N 1000 -K 1000 --validate --bench
    python -m tvm_cdna4 gemm --target gfx950 --dtype f16 -M 256 -N 256 -K 256 --validate   # CPU emulator
    python -m tvm_cdna4 gemm --target sm80 --dynamic-m -M 100 -N 4096 -K 4096 --emit config   # M symbolic (-M: its value)
    python -m tvm_cdna4 gemm --target gfx950 --groups 37,0,1,90 -N 72 -K 128 --validate   # grouped GEMM (MoE)
    python -m tvm_cdna4 gemm --target gfx950 --dtype mxfp4 --layout nt -M 4096 -N 4096 -K 4096 --report
    python -m tvm_cdna4 gemm --target gfx950 --dtype fp8 --block 128x128x128 --mfma 32x32 --report

--target is required (no default: gfx950 and sm80 validate, time and emit differently). Actions:
--validate, --bench, --report, --emit. Without one, --target sm80 builds for sm_80 and says so;
--target gfx950 is a usage error naming its actions (--validate, --report, --emit).
Exit codes: 0 success, 1 validation failed, 2 usage error / unavailable target / no GPU.
"""

from __future__ import annotations

import argparse
import sys

from ..kernels.gemm.epilogue import ACTIVATIONS, Fusion
from .args import (FLAGS_OFF, Default, DefaultsFormatter, check_gemm, nonnegative_int, positive_int, row_counts,
                   tile)

TARGETS = ("sm80", "sm_80", "gfx950")
CUDA_DTYPES = ("f16", "bf16")
GFX950_DTYPES = ("f16", "bf16", "fp8", "bf8", "fp8_bf8", "bf8_fp8", "i8", "f32", "f64",
                 "mxfp8", "mxbf8", "mxfp6", "mxbf6", "mxfp4")


def add_gemm_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``gemm`` subcommand on an argparse subparsers object (its options' types and checks:
    ``cli.args``)."""
    p = subparsers.add_parser(
        "gemm",
        help="tiled GEMM schedule: build, --validate, --bench, --emit cuda",
        description=f"{__doc__}{FLAGS_OFF}\n",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("--target", required=True, choices=TARGETS,
                   help="sm80 (CUDA, also spelled sm_80: runs on sm_80 and newer, sm_90 included) or gfx950 (CDNA4); "
                        "required, no default: the two validate, time and emit differently")
    p.add_argument("--dtype", default="f16", choices=GFX950_DTYPES,
                   help="input dtype (sm80: f16, bf16; gfx950: all listed)")
    p.add_argument("--out-dtype", default=None, choices=("f32", "f16", "bf16", "i32", "f64"),
                   help="output dtype (default: the input dtype's first output: f32; gfx950 i8: i32, f64: f64). "
                        "One the dtype does not produce is refused")
    p.add_argument(
        "--layout",
        default="nt",
        choices=("nn", "nt", "tn", "tt"),
        help="n: A is [M,K] / B is [K,N]; t: A is [K,M] / B is [N,K] (nt = both K-contiguous)",
    )
    p.add_argument("-M", type=positive_int, default=Default(4096),
                   help="rows of A and C (with --dynamic-m: the run-time M; not with --groups, whose rows are A's)")
    p.add_argument("-N", type=positive_int, default=Default(4096), help="columns of B and C")
    p.add_argument("-K", type=positive_int, default=Default(4096), help="the reduction length")
    p.add_argument("--validate", action="store_true",
                   help="sm80: run on the GPU; gfx950: run in the CPU wavefront emulator; compare with numpy (float64)")
    p.add_argument("--report", action="store_true", help="gfx950: static performance report (instruction mix, llvm-mca)")
    p.add_argument("--json", action="store_true", help="with --report (gfx950): the report as one JSON object (per-wave "
                   "figures and the whole-GPU estimate)")
    p.add_argument("--seed", type=nonnegative_int, default=Default(0),
                   help="random input seed, with --validate")
    p.add_argument("--bench", action="store_true", help="time on the GPU (median, L2 flushed) and print TFLOP/s")
    p.add_argument("--emit", choices=("cuda", "asm", "llvm", "tir", "config"),
                   help="print the generated code: cuda (sm80), asm / llvm (gfx950), tir, config (default: none; "
                        "sm80 without an action builds and says so)")
    p.add_argument("--block", metavar="MxNxK", type=tile("MxNxK", "128x128x64"),
                   help="block tile, e.g. 128x256x32 (default: the planner's, or the dtype's)")
    p.add_argument("--warps", metavar="WMxWN", type=tile("WMxWN", "2x2"),
                   help="warp grid, e.g. 2x4 (default: the planner's; gfx950: 2x2 waves only)")
    p.add_argument("--stages", type=positive_int, help="software pipeline depth (default: the planner's; sm80: cp.async "
                   "stages, at least 2; gfx950: 2 only, 3 with --lds-dma)")
    p.add_argument("--mfma", choices=("16x16", "32x32"), help="gfx950: MFMA shape (default: the planner's, or the dtype's)")
    p.add_argument("--lds-dma", action="store_true",
                   help="gfx950 dense GEMMs: direct-to-LDS global loads, three LDS stages (its own default tile); "
                        "every row of A and B as stored (K for nt) must be whole 16-byte chunks: a multiple of 8 "
                        "elements for f16/bf16, 16 for fp8/bf8/i8, 4 for f32, 2 for f64")
    p.add_argument("--reduction", choices=("atomic", "ordered"),
                   help="split-K reduction: f32 atomics or per-split slices added in index order (deterministic) "
                        "(default: atomic)")
    p.add_argument("--group-m", type=positive_int,
                   help="sm80: block rasterization group, block rows per N sweep (default: the planner's)")
    p.add_argument("--ctas", type=nonnegative_int,
                   help="sm80: persistent kernel with this many CTAs (the GPU's SM count), 0 = one CTA per tile "
                        "(default: the planner's)")
    p.add_argument("--tune", action="store_true",
                   help="sm80: time the planner's candidate tilings on the GPU and cache the winner (kernels.sm80.gemm.build)")
    fused = p.add_argument_group("fused epilogue", "applied to the f32 accumulator before the output cast, in this "
                                 "order: row and column scales, bias, activation, residual (docs: kernels.gemm.epilogue)")
    fused.add_argument("--bias", action="store_true", help="add a per-column f32 bias [N]")
    fused.add_argument("--activation", choices=ACTIVATIONS, help="relu, silu or gelu (tanh form) (default: none)")
    fused.add_argument("--residual", action="store_true", help="add a residual input of C's shape and dtype")
    fused.add_argument("--row-scale", action="store_true", help="multiply row m by an f32 scale [M] (per token)")
    fused.add_argument("--col-scale", action="store_true", help="multiply column n by an f32 scale [N] (per channel)")
    p.add_argument("--dynamic-m", action="store_true",
                   help="compile for a symbolic M (N, K static; layouts nn, nt): the kernel of -M's bucket, the "
                        "planner's choice there; -M gives the run-time M (docs: kernels.gemm.dynamic_m)")
    p.add_argument("--groups", metavar="M1,M2,...", type=row_counts,
                   help="grouped GEMM (mixture of experts): G GEMMs of these row counts (0 allowed) sharing N and K in "
                        "one launch; A [T, K] with T their sum (no -M), B [G, N, K] (nt) or [G, K, N] (nn), the "
                        "group offsets read on the device (docs: kernels.gemm.grouped) (default: one GEMM)")
    p.add_argument("--no-cache", action="store_true",
                   help="build with TIRx even when the build cache (~/.cache/tvm_cdna4, TVM_CDNA4_CACHE_DIR) has it")
    p.set_defaults(func=run_gemm, check=check_gemm)
    return p


def _config(args):
    from dataclasses import replace

    from ..kernels.sm80.gemm import choose_config
    from ..kernels.sm80.gemm_cost import choose_config as choose_tile, replan_stages

    # tile options (--block, --warps, --group-m, --ctas) ask for the tile GEMM; otherwise the planner
    # may pick the decode kernel (M <= 16, nt), whose --stages is its pipeline depth
    tile = args.block or args.warps or args.group_m or args.ctas is not None
    cfg = (choose_tile if tile else choose_config)(args.M, args.N, args.K, args.dtype, args.layout, args.out_dtype)
    updates = {}
    if args.block:
        bm, bn, bk = (int(x) for x in args.block.lower().split("x"))
        updates.update(block_m=bm, block_n=bn, block_k=bk)
    if args.warps:
        wm, wn = (int(x) for x in args.warps.lower().split("x"))
        updates.update(warps_m=wm, warps_n=wn)
    if args.stages:
        updates["stages"] = args.stages
    if args.group_m:
        updates["group_m"] = args.group_m
    if args.ctas is not None:
        updates["ctas"] = args.ctas
    if getattr(args, "reduction", None):
        updates["reduction"] = args.reduction
    cfg = replace(cfg, **updates)
    if args.block and not args.stages:  # the planner's stages were for its own block: re-plan them
        cfg = replan_stages(cfg, args.M, args.N, args.K, args.out_dtype)
    cfg.check()
    return cfg


GFX950_ACTIONS = "--validate (CPU emulator), --report (static performance report), --emit asm/llvm/tir/config"


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def fusion(args) -> Fusion:
    """The fused epilogue the flags ask for (``Fusion()`` without any)."""
    return Fusion(bias=args.bias, activation=args.activation, residual=args.residual, row_scale=args.row_scale,
                  col_scale=args.col_scale)


def run_gemm(args) -> int:
    """The ``gemm`` subcommand: exit status 0, 1 (validation failed) or 2 (usage, no target/GPU)."""
    args.fusion = fusion(args)
    if getattr(args, "groups", None) is not None:
        from .gemm_grouped import run

        return run(args)
    if getattr(args, "dynamic_m", False):
        from .gemm_dynamic import refusal

        why = refusal(args)
        if why:
            return _usage(why)
    if args.target == "gfx950":
        return _run_gfx950(args)
    args.out_dtype = args.out_dtype or "f32"
    if args.dtype not in CUDA_DTYPES or args.out_dtype not in ("f32", "f16", "bf16") or args.emit in ("asm", "llvm") \
            or args.report or args.mfma or args.lds_dma:
        return _usage(f"--target sm80 supports --dtype {'/'.join(CUDA_DTYPES)}, --out-dtype f32/f16/bf16 and "
                      "--emit cuda/tir/config (asm, llvm, --report, --mfma and --lds-dma are gfx950 options)")
    if getattr(args, "dynamic_m", False):
        from .gemm_dynamic import run_sm80

        return run_sm80(args, _run_sm80)
    try:
        cfg = _config(args)
    except ValueError as e:
        return _usage(str(e))
    _emit_sm80(args, cfg)
    if not (args.validate or args.bench or args.tune):
        return 0
    return _run_sm80(args, cfg)


def _run_gfx950(args) -> int:
    if args.bench:
        return _usage("--bench needs a gfx950 GPU; use --report for the static estimate or --validate for the emulator")
    if args.emit == "cuda":
        return _usage("--emit cuda is for --target sm80; gfx950 emits asm, llvm, tir or config")
    if not (args.validate or args.report or args.emit):
        return _usage(f"gemm --target gfx950 needs an action: {GFX950_ACTIONS}")
    from .gemm_gfx950 import run

    return run(args)


def _emit_sm80(args, cfg) -> None:
    """``--emit config/tir/cuda``; without ``--emit``, ``--validate`` or ``--bench``: build for sm_80
    (the default action) and say so."""
    from ..kernels.sm80.gemm import build, cuda_gemm, cuda_source

    shape = (args.M, args.N, args.K, args.dtype, args.layout, args.out_dtype, cfg)
    if args.emit == "config":
        from ..kernels.sm80.gemm import config_json

        print(config_json(*shape, fusion=args.fusion))
    elif args.emit == "tir":
        print(cuda_gemm(*shape, fusion=args.fusion).script())
    elif args.emit == "cuda":
        print(cuda_source(build(*shape, arch="sm_80", cache=not args.no_cache, fusion=args.fusion)))
    elif not (args.validate or args.bench or args.tune):
        build(*shape, arch="sm_80", cache=not args.no_cache, fusion=args.fusion)
        print(f"built {args.layout} {args.dtype}->{args.out_dtype} {args.M}x{args.N}x{args.K} for sm_80: "
              f"{cfg.as_dict()}, epilogue: {args.fusion.describe()}")


def _run_sm80(args, cfg, load=None, title=None) -> int:
    """``--validate`` / ``--bench`` on the NVIDIA GPU: the kernel of ``cfg``, or ``load()``'s (``--dynamic-m``)."""
    from ..runtime import cuda as runner

    ok, why = runner.have_cuda_gpu()
    if not ok:
        what = " and ".join(x for x, on in (("--validate", args.validate), ("--bench", args.bench), ("--tune", args.tune)) if on)
        return _usage(f"{what} needs an NVIDIA GPU, and none is available here ({why})")
    M, N, K = args.M, args.N, args.K
    title = title or f"{args.layout} {args.dtype}->{args.out_dtype} {M}x{N}x{K}"
    if not args.fusion.empty:
        title += f" epilogue {args.fusion.describe()}"
    fn = load() if load else runner.compile_and_load(M, N, K, args.dtype, args.layout, args.out_dtype, cfg,
                                                     cache=not args.no_cache, tune=args.tune, fusion=args.fusion)
    status = 0
    if args.validate:
        status = _validate_sm80(args, fn, runner, title)
    if args.bench:
        ms = runner.bench_ms(_launcher(args, fn, runner))
        print(f"bench {title}: {ms:.3f} ms, {runner.tflops(M, N, K, ms):.1f} TFLOP/s")
    return status


def _validate_sm80(args, fn, runner, title) -> int:
    """The plain GEMM against the float64 product (relative Frobenius error); a fused one on
    ``grid_inputs`` (the product exact) against the epilogue's reference, element by element."""
    import numpy as np

    M, N, K = args.M, args.N, args.K
    rng = np.random.default_rng(args.seed)
    if args.fusion.empty:
        a, b = runner.random_inputs(M, N, K, args.dtype, args.layout, rng)
        out = runner.run_numpy(fn, a, b, M, N, args.out_dtype)
        err, good = runner.check_output(out, runner.reference(a, b, args.layout), args.out_dtype)
        tol = runner.tolerance(args.out_dtype)
        print(f"validate {title}: rel_err={err:.2e} tol={tol:.0e} {'OK' if good else 'FAIL'}")
    else:
        a, b = runner.grid_inputs(M, N, K, args.dtype, args.layout, rng)
        inputs = runner.fused_inputs(args.fusion, M, N, args.out_dtype, rng)
        out = runner.run_numpy(fn, a, b, M, N, args.out_dtype, inputs)
        err, good = runner.check_fused(out, a, b, args.layout, args.fusion, inputs, args.out_dtype)
        print(f"validate {title}: largest error / bound = {err:.3f} {'OK' if good else 'FAIL'}")
    return 0 if good else 1


def _launcher(args, fn, runner):
    import torch

    from ..kernels.sm80.gemm import operand_shapes

    a_shape, b_shape = operand_shapes(args.M, args.N, args.K, args.layout)
    tdt = runner.torch_dtype(args.dtype)
    a = torch.empty(a_shape, dtype=tdt, device="cuda").uniform_(-1, 1)
    b = torch.empty(b_shape, dtype=tdt, device="cuda").uniform_(-1, 1)
    c = torch.empty((args.M, args.N), dtype=runner.torch_dtype(args.out_dtype), device="cuda")
    return runner.Launcher(fn, a, b, c, runner.torch_inputs(args.fusion, args.M, args.N, args.out_dtype))
