"""``python -m tvm_cdna4 gemm --target gfx950 ...``: build, emit, report, and validate through the emulator.

Tile options map onto the schedule configs (``Gfx950GemmConfig``, ``MxGemmConfig``): ``--block MxNxK``
and ``--mfma`` replace the dtype's defaults; ``--lds-dma`` starts from the direct-to-LDS variant
(``dma_config``; dense dtypes only); ``--warps`` and ``--stages`` name what the gfx950 schedules fix
(2x2 waves, two pipeline stages, three with ``--lds-dma``) and refuse anything else; the sm80-only
``--group-m`` and ``--ctas`` are refused. ``--report`` adds the whole-GPU estimate
(``kernels.gfx950.gemm_cost``); ``--report --json`` prints the report as one JSON object. Without a tile option (``--block``,
``--mfma``, ``--lds-dma``) a dense GEMM runs the planner's choice (``kernels.gfx950.gemm_plan.plan_for``: tile,
waves and K split by the cost model; C zeroed / the split-K workspace allocated zeroed for
``--validate``); ``--emit config`` prints the plan as one JSON object (``plan_json``: the config's
fields, ``split_k``, the reduction, the launch, the planner's estimate). Refusals are usage errors (exit 2, the reason first).
The fused-epilogue flags (``args.fusion``: ``--bias --activation --residual --row-scale --col-scale``)
go into the plan (``Epilogue.fusion``); ``--validate`` compares with ``kernels.gemm.epilogue.reference``
within ``kernels.gemm.epilogue.error_bound``, ``--emit config`` and ``--report --json`` name the fusion.
"""

from __future__ import annotations

import sys
import time

import attrs
import numpy as np

from ..errors import ContractError
from ..kernels.gemm.epilogue import Fusion, error_bound, random_inputs, reference, tolerance

# the plans only: resolving options and reading the build cache import no TIRx (warm builds)
from ..kernels.gfx950.gemm import schedule_digest  # noqa: F401 (the key's source digest)
from ..kernels.gfx950.gemm_plan import DTYPES, MX_FORMATS, default_config, default_mx_config, dma_config

GFX950_DTYPES = (*DTYPES, *MX_FORMATS)
OUT_NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "f64": np.float64}
TOL = {"f32": 1e-5, "f16": 1e-3, "bf16": 8e-3, "i32": 0.0, "f64": 1e-12}


WAVES, STAGES, DMA_STAGES = "2x2", 2, 3  # what the gfx950 schedules run: 2 x 2 waves, a two-stage K pipeline
# (three stages with direct-to-LDS loads)


def _block(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--block {text!r}: expected MxNxK, e.g. 128x128x64") from None
    return m, n, k


def config(args):
    """The schedule config the options ask for: the dtype's default with ``--block`` / ``--mfma``
    applied. Raises ValueError (first the option, then the rule) for an option the gfx950
    schedules cannot apply; the config itself is checked where the kernel is built."""
    if getattr(args, "warps", None) and args.warps.lower() != WAVES:
        raise ValueError(f"--warps {args.warps}: the gfx950 GEMMs run {WAVES} waves (256 threads) per workgroup")
    dma = getattr(args, "lds_dma", False)
    if dma and args.dtype in MX_FORMATS:
        raise ValueError(f"--lds-dma: the MX GEMM stages its loads in registers; direct-to-LDS loads are for the dense "
                         f"dtypes ({', '.join(DTYPES)})")
    stages = DMA_STAGES if dma else STAGES
    if getattr(args, "stages", None) is not None and args.stages != stages:
        raise ValueError(f"--stages {args.stages}: the gfx950 GEMMs run a {stages}-stage K pipeline "
                         + ("(direct-to-LDS loads)" if dma else "(LDS + registers)"))
    for option, name in (("--group-m", "group_m"), ("--ctas", "ctas")):
        if getattr(args, name, None) is not None:
            raise ValueError(f"{option} is an sm80 option: gfx950 launches one workgroup per output tile")
    block, mfma = getattr(args, "block", None), getattr(args, "mfma", None)
    if args.dtype in MX_FORMATS:
        cfg, updates = default_mx_config(args.dtype, args.layout), {}
        if block:
            updates.update(zip(("block_m", "block_n", "block_k"), _block(block)))
        if mfma and mfma != "16x16":
            raise ValueError(f"--mfma {mfma}: the MX GEMM runs the scaled 16x16x128 MFMA only")
        return attrs.evolve(cfg, **updates)
    updates = dict(zip(("block_m", "block_n", "block_k"), _block(block))) if block else {}
    if mfma:
        updates["mfma"] = mfma
    if getattr(args, "reduction", None):
        updates["reduction"] = args.reduction
    return attrs.evolve(dma_config(args.dtype) if dma else default_config(args.dtype), **updates)


def _out_dtype(args) -> str:
    """The output dtype: ``--out-dtype`` if given and the dtype has it, else the dtype's default (the
    first of its outputs); one it does not have is refused, never replaced."""
    outs = ("f32",) if args.dtype in MX_FORMATS else DTYPES[args.dtype].outs
    wanted = getattr(args, "out_dtype", None)
    if wanted is None:
        return outs[0]
    if wanted not in outs:
        raise ValueError(f"--out-dtype {wanted} is not an output of --dtype {args.dtype} on gfx950; "
                         f"expected {' or '.join(outs)}")
    return wanted


def _tile_options(args) -> bool:
    """Whether the options name a tile (``--block``, ``--mfma``, ``--lds-dma``): then that config runs as given."""
    return bool(getattr(args, "block", None) or getattr(args, "mfma", None) or getattr(args, "lds_dma", False))


def _fusion(args) -> Fusion:
    """The fused epilogue of the options (``args.fusion``, ``cli_gemm``); none without."""
    return getattr(args, "fusion", None) or Fusion()


def choose(args, cfg=None):
    """The plan the CLI runs: ``cfg`` or the tile options' config (no K split) as given; without
    either, for the dense dtypes, the planner's choice (``kernels.gfx950.gemm_plan.plan_for``: tile, wave layout
    and K split by the whole-GPU cost model); MX dtypes their default config. Either with the
    options' fused epilogue."""
    from ..kernels.gfx950.gemm import plan

    if getattr(args, "dynamic_m", False):  # the bucket of -M (its M symbolic): the planner's choice there
        from ..kernels.gfx950.gemm import build_dynamic

        dynamic = build_dynamic(args.N, args.K, args.dtype, args.layout, _out_dtype(args), fusion=_fusion(args))
        return dynamic.plan(args.M)
    if cfg is None and not _tile_options(args) and args.dtype not in MX_FORMATS:
        from ..kernels.gfx950.gemm_plan import plan_for

        return plan_for(args.M, args.N, args.K, args.dtype, args.layout, _out_dtype(args),
                        reduction=getattr(args, "reduction", None) or "atomic", fusion=_fusion(args))
    cfg = config(args) if cfg is None else cfg
    return plan(args.M, args.N, args.K, args.dtype, args.layout, _out_dtype(args), cfg, fusion=_fusion(args))


def _kernel(p):
    from ..kernels.gfx950.gemm import emit

    return emit(p)


def build_cached(args, cfg=None, cache: bool = True, chosen=None):
    """``tvm_cdna4.build`` of the CLI's kernel (``chosen``, else ``choose(args, cfg)``) through the
    build cache (``kernels.gfx950.gemm.build``: keyed by the kernel's plan record, so a warm build runs the
    planner only and imports no TIRx): the LLVM IR, assembly and code object are cached;
    ``executable`` is None on a hit. The emulator route (``--validate``) needs the lowered TIR,
    which is not cached."""
    from ..kernels.gfx950.gemm import build, build_plan

    p = chosen or choose(args, cfg)
    if getattr(p, "dynamic_m", None) is not None:
        return build_plan(p, cache)
    return build(args.M, args.N, args.K, args.dtype, args.layout, _out_dtype(args), p.config, cache=cache,
                 k_splits=p.grid.k_splits, fusion=p.fusion)


def fusion_json(fusion: Fusion) -> dict:
    """The fused epilogue as JSON: its fields and ``steps`` (``Fusion.describe``)."""
    return {**fusion.as_dict(), "steps": fusion.describe()}


def plan_json(p) -> dict:
    """``--emit config``: the plan's JSON object (``plan.summary()``: ``kernels.gfx950.gemm_target.summary``)."""
    return p.summary()


def _inputs(args, rng):
    """(kernel arrays, float64 reference, |A| @ |B| (the scale of rounding errors), output array,
    output dtype name)."""
    M, N, K = args.M, args.N, args.K
    if args.dtype in MX_FORMATS:
        from ..isa import formats

        fmt = MX_FORMATS[args.dtype]
        a = rng.standard_normal((M, K)).astype(formats.fmt(fmt).dtype)
        b = rng.standard_normal((K, N)).astype(formats.fmt(fmt).dtype)
        sa = rng.integers(122, 133, (M, K // 32)).astype(np.uint8)
        sb = rng.integers(122, 133, (N, K // 32)).astype(np.uint8)
        c = np.full((M, N), np.nan, np.float32)
        sa64 = a.astype(np.float64) * np.exp2(np.repeat(sa - 127.0, 32, axis=1))
        sb64 = b.astype(np.float64) * np.exp2(np.repeat(sb - 127.0, 32, axis=1)).T
        from ..kernels.gfx950.mx_gemm import pack_operands

        return (*pack_operands(a, b, fmt, args.layout), sa, sb, c), sa64 @ sb64, np.abs(sa64) @ np.abs(sb64), c, "f32"
    import ml_dtypes

    spec = DTYPES[args.dtype]
    out = _out_dtype(args)
    ta, tb = spec.numpy if isinstance(spec.numpy, tuple) else (spec.numpy, spec.numpy)
    if args.dtype == "i8":
        a, b = rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(-128, 128, (K, N)).astype(np.int8)
    else:
        a, b = rng.standard_normal((M, K)).astype(ta), rng.standard_normal((K, N)).astype(tb)
    A = np.ascontiguousarray(a.T) if args.layout[0] == "t" else a
    B = np.ascontiguousarray(b.T) if args.layout[1] == "t" else b
    c = np.zeros((M, N), ml_dtypes.bfloat16 if out == "bf16" else OUT_NP[out])
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (A, B, c), a64 @ b64, np.abs(a64) @ np.abs(b64), c, out


def work(p):
    """The ``GemmWork`` of the CLI's plan (``kernels.gfx950.gemm_cost``: the whole-GPU estimate)."""
    from ..kernels.gfx950.gemm_cost import work_of

    return work_of(p)


def _print_report(args, p, result, title: str) -> None:
    """``--report``: the static report and the whole-GPU estimate; ``--json``: both as one JSON object."""
    from ..report import format_gpu_estimate, format_report, gpu_report, kernel_report, report_json

    if getattr(args, "json", False):
        import json

        print(json.dumps({**report_json(result, title, work(p)), "fusion": fusion_json(p.fusion)}))
        return
    print(format_report(result, title))
    print(format_gpu_estimate(gpu_report(kernel_report(result.asm, result.kernel()), work(p))))


def run(args) -> int:
    if args.dtype not in GFX950_DTYPES:
        print(f"gemm --target gfx950: dtype {args.dtype!r}; available: {', '.join(GFX950_DTYPES)}", file=sys.stderr)
        return 2
    title = f"gfx950 {args.dtype} {args.layout} {args.M}x{args.N}x{args.K}"
    if not _fusion(args).empty:
        title += f", epilogue {_fusion(args).describe()}"
    func = None
    try:  # a ContractError goes on to the CLI's report; other ValueErrors are the options' usage errors
        config(args)  # the options' refusals first
        _out_dtype(args)
        chosen = choose(args)
        built = args.emit in ("asm", "llvm") or getattr(args, "report", False)
        if built:
            result = build_cached(args, cache=not getattr(args, "no_cache", False), chosen=chosen)
        if args.validate or (not built and args.emit != "config"):  # the emulator, --emit tir
            func = _kernel(chosen)
    except ContractError:
        raise
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.emit == "config":
        import json

        print(json.dumps(plan_json(chosen)))
    if built:
        if args.emit == "asm":
            print(result.asm)
        elif args.emit == "llvm":
            print(result.llvm_ir)
        if getattr(args, "report", False):
            _print_report(args, chosen, result, title)
    elif args.emit == "tir":
        print(func.script())
    return validate(args, chosen, func, title) if args.validate else 0


def validate(args, chosen, func, title: str) -> int:
    """``--validate``: emulate the kernel on random operands (and fused inputs) and compare C with
    the float64 reference: ``A @ B`` within ``TOL`` (accumulation rounding scales with ``|A| @ |B|``,
    not with the possibly cancelled result), or with a fused epilogue ``kernels.gemm.epilogue.reference`` within
    ``kernels.gemm.epilogue.error_bound`` (the accumulator's f32 error ``TOL["f32"] |A| @ |B|`` carried through
    it). 0: PASS, 1: FAIL."""
    from ..emulator import EmulationError, compare, emulate

    rng = np.random.default_rng(getattr(args, "seed", 0))
    arrays, want, magnitude, c, out = _inputs(args, rng)
    fusion = chosen.fusion
    fused = random_inputs(fusion, args.M, args.N, rng, c.dtype)
    workspace = [np.zeros(p.shape, p.dtype) for p in chosen.epilogue.params if p.name not in fused]  # split-K: W, S zeroed
    start = time.perf_counter()
    try:
        emulate(func, *arrays, *(fused[name] for name in fusion.inputs()), *workspace)
    except EmulationError as err:
        print(f"emulation found a kernel bug:\n{err}\nFAIL")
        return 1
    seconds = time.perf_counter() - start
    if fusion.empty:
        what, rtol, atol = "||C - A@B|| / ||A@B||", TOL[out], TOL[out] * magnitude
    else:
        acc = want
        with np.errstate(over="ignore"):  # 2^x of the activations overflows to inf where it saturates
            want = reference(acc, fusion, fused)
        r, a = tolerance(fusion, out)
        what, rtol = (f"||C - E(A@B)|| / ||E(A@B)||, E: {fusion.describe()}; tolerance {r:.3g} |E| + {a:.3g} + the f32 "
                      f"evaluation and accumulator errors through E, kernels.gemm.epilogue.error_bound"), 0.0
        atol = error_bound(acc, fusion, fused, out, acc_error=TOL["f32"] * magnitude)
    got = c.astype(np.float64)
    rel = float(np.linalg.norm(np.nan_to_num(got, nan=1e30) - want) / max(np.linalg.norm(want), 1e-30))
    print(f"emulated {title} in {seconds:.2f} s (CPU wavefront emulator); relative error {rel:.3e} "
          f"({what}, float64 reference)")
    try:
        print(compare("C", c, want, rtol=rtol, atol=atol))
    except AssertionError as err:
        print(f"{err}\nFAIL")
        return 1
    print("PASS")
    return 0
