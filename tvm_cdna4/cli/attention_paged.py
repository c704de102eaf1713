"""``python -m tvm_cdna4 attention --kv-cache paged``: paged decode attention (``kernels.attention.paged``).

    python -m tvm_cdna4 attention --target sm80 --kv-cache paged --page-size 16 --context 1,77,300 --seq 4 \\
        --heads 8 --kv-heads 2 --kv-dtype fp8 --validate     # the CUDA emulator without a GPU
    python -m tvm_cdna4 attention --target sm80 --kv-cache paged --context 4096,8192 --seq 1 --heads 32 \\
        --kv-heads 8 --emit config                            # the plan: split_kv, ctas, workspace
    python -m tvm_cdna4 attention --target gfx950 --kv-cache paged --context 1,77,300 --seq 4 --heads 8 \
        --kv-heads 2 --kv-dtype fp8 --validate                # the CPU wavefront emulator
    python -m tvm_cdna4 attention --target gfx950 --kv-cache paged --context 4096,4096,4096,4096,4096,4096,4096,4096 \
        --seq 1 --heads 32 --kv-heads 8 --report             # the static whole-GPU estimate against 8 TB/s

``--seq`` is the queries per sequence (1..8); ``--context`` the batch's context lengths (the cache holds
exactly their pages); ``--dtype`` Q's (bf16, f16), ``--kv-dtype`` the cache's (default: ``--dtype``).
Actions: ``--validate``, ``--emit tir|cuda|config``, ``--bench`` (an NVIDIA GPU); gfx950: ``--validate`` (the
CPU wavefront emulator), ``--emit asm|tir|config``, ``--report`` (``report.paged_report``)."""

from __future__ import annotations

import json
import sys


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def contexts_of(text) -> list[int]:
    """``--context``: comma-separated non-negative ints (ValueError naming the option)."""
    if not text:
        raise ValueError("--kv-cache paged needs --context L1,L2,... (the context length of each sequence)")
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--context: expected comma-separated integers, found {text!r}") from None
    if min(values) < 1:
        raise ValueError(f"--context: every context length is at least 1, found {min(values)}")
    return values


def problem_of(args, contexts):
    from ..kernels.attention.paged import PagedDecodeProblem
    from ..kernels.gemm.dynamic_m import ceil_div

    if args.dtype == "fp8":
        raise ValueError("--dtype is Q's (bf16 or f16) with --kv-cache paged; fp8 is --kv-dtype fp8")
    pages = [ceil_div(L, args.page_size) for L in contexts]
    return PagedDecodeProblem(len(contexts), args.heads, args.heads if args.kv_heads is None else args.kv_heads,
                              args.head_dim, args.seq, args.page_size, max(pages), sum(pages),
                              args.kv_dtype or args.dtype, args.dtype, args.scale)


def _refusal(args) -> str | None:
    if not (args.validate or args.emit or args.bench or args.report):
        return "attention --kv-cache paged needs an action: --validate, --emit tir|cuda|config, --bench (gfx950: --report, --emit asm)"
    if args.target == "gfx950":
        if args.bench:
            return "--bench needs a gfx950 GPU; use --report for the static estimate or --validate for the emulator"
        if args.emit == "cuda":
            return "--emit cuda is sm80's; paged decode on gfx950 takes --emit asm|tir|config"
    elif args.report or args.emit == "asm":
        return "--report and --emit asm are gfx950's; paged decode on sm80 takes --validate, --emit tir|cuda|config, --bench"
    dense = [flag for flag, given in (("--causal", args.causal), ("--layout", args.layout != "bhsd"),
                                      ("--seq-kv", args.seq_kv), ("--block-q", args.block_q),
                                      ("--block-kv", args.block_kv), ("--epilogue", args.epilogue),
                                      ("--persistent" if args.persistent else "--no-persistent",
                                       args.persistent is not None)) if given]
    if dense:
        return f"{', '.join(dense)}: dense attention's options; paged decode reads --context"
    if args.stages is not None:
        return (f"--stages {args.stages}: the dense attention's ring depth; paged decode's (sm80 "
                "PagedDecodeConfig.stages) is its planner's, not set from the command line")
    return None


def run_paged(args, present_arch) -> int:
    """``attention --kv-cache paged``: 0, 1 (validation failed) or 2 (usage, no GPU); ``present_arch``: the
    caller's (``cli.attention.present_arch``: the NVIDIA GPU's arch, None without one)."""
    from ..kernels import attention

    why = _refusal(args)
    if why:
        return _usage(why)
    try:
        contexts = contexts_of(args.context)
        problem = problem_of(args, contexts)
        device = present_arch()
        options = {"context": max(contexts)}
        if args.target == "gfx950":
            return _gfx950(args, problem, contexts, options)
        target = args.target
        p = attention.paged_verb(target, "plan")(problem, None, **options)
        if args.emit == "config":
            print(json.dumps(p.summary(), default=str))
        elif args.emit == "tir":
            for func in attention.paged_verb(target, "emit")(p):
                if func is not None:
                    print(func.script())
        elif args.emit == "cuda":
            arch = args.arch or device or ("sm_90a" if target == "sm90" else "sm_80")
            for exe in attention.paged_verb(target, "build")(problem, arch=arch, cache=not args.no_cache, **options):
                if exe is not None:
                    print(exe.source)
        status = _validate(args, problem, contexts, device, options, target) if args.validate else 0
        if args.bench:
            _bench(problem, contexts, device, target)
    except ValueError as err:  # ContractError too: one line
        return _usage(str(err).splitlines()[0])
    return status


def _gfx950(args, problem, contexts, options) -> int:
    """``--target gfx950``: ``--emit asm|tir|config``, ``--report`` (``report.paged_report``: the static
    whole-GPU estimate against the 8 TB/s HBM), ``--validate`` (the CPU wavefront emulator)."""
    from ..kernels import attention

    p = attention.paged_verb("gfx950", "plan")(problem, None, **options)
    if args.emit == "config":
        print(json.dumps(p.summary(), default=str))
    elif args.emit == "tir":
        print(attention.paged_verb("gfx950", "emit")(p).script())
    elif args.emit == "asm":
        print(attention.paged_verb("gfx950", "build")(problem, cache=not args.no_cache, **options).asm)
    if args.report:
        from .. import report

        print(report.format_paged_report(report.paged_report(problem, contexts, cache=not args.no_cache)))
    return _validate(args, problem, contexts, None, options, "gfx950") if args.validate else 0


def _describe(problem, contexts) -> str:
    p = problem
    return (f"paged decode B={p.batch} H={p.heads} Hkv={p.kv_heads} D={p.head_dim} queries={p.queries} "
            f"page={p.page_size} kv={p.kv_dtype} q={p.q_dtype} contexts={','.join(map(str, contexts))}")


def _validate(args, problem, contexts, device, options, target: str = "sm80") -> int:
    from ..kernels import attention

    run = None
    if device is not None and target in ("sm80", "sm90"):  # that row's kernels, launched as the torch op does
        if target == "sm90" and device != "sm_90":
            raise ValueError(f"--target sm90 --validate: the sm90 kernel runs on an sm_90 GPU (H100, H200); the GPU "
                             f"here is {device}")
        from functools import partial

        from ..torch import run_paged_attention

        run = partial(run_paged_attention, target=target)
    result = attention.validate_paged(problem, target, None, args.seed, contexts, run=run, **options)
    print(f"validated {target} {_describe(problem, contexts)} on {result.where} in {result.seconds:.2f} s: largest error "
          f"/ bound: O {result.o_ratio:.3f}, LSE {result.lse_ratio:.3f} (kernels.attention.paged.error_bound)")
    print("PASS" if result.ok else "FAIL")
    return 0 if result.ok else 1


def _bench(problem, contexts, device, target: str = "sm80") -> None:
    """``--bench``: ``target``'s kernels, launched as ``tvm_cdna4.torch.paged_attention`` launches them
    (``torch_paged.paged_launch``), timed on the GPU (``runtime.cuda.bench_ms``)."""
    if device is None:
        from ..runtime import cuda as runner

        raise ValueError(f"--bench needs an NVIDIA GPU, and none is available here ({runner.have_cuda_gpu()[1]})")
    import torch

    from ..kernels.attention.paged import random_inputs
    from ..runtime import cuda as runner
    from ..torch_paged import paged_launch

    arrays = random_inputs(problem, 0, contexts)
    dtype = torch.bfloat16 if problem.q_dtype == "bf16" else torch.float16
    q = torch.from_numpy(arrays["Q"].astype("float32")).to("cuda", dtype)
    kv = {n: torch.randn(arrays[n].shape, device="cuda").to(torch.float8_e4m3fn if problem.scaled else dtype)
          for n in ("K_CACHE", "V_CACHE")}
    scales = {n.lower(): torch.ones(problem.kv_heads, device="cuda") for n in ("K_SCALE", "V_SCALE")} \
        if problem.scaled else {}
    table, lens = (torch.from_numpy(arrays[n]).cuda() for n in ("BLOCK_TABLE", "CONTEXT_LENS"))
    launch = paged_launch(problem, q, target)
    ms = runner.bench_ms(lambda: launch(q, kv["K_CACHE"], kv["V_CACHE"], table, lens, scales.get("k_scale"),
                                        scales.get("v_scale")))
    moved = problem.bytes_moved(contexts)
    print(f"bench {target} {_describe(problem, contexts)}: {ms * 1e3:.1f} us, {moved / ms / 1e9:.0f} GB/s")
