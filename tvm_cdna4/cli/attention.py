"""``python -m tvm_cdna4 attention``: plan, emit, validate, report or time the attention forward.

    python -m tvm_cdna4 attention --heads 4 --kv-heads 2 --seq 130 --head-dim 64 --causal --validate
    python -m tvm_cdna4 attention --dtype fp8 --seq 257 --head-dim 128 --validate          # CPU emulator
    python -m tvm_cdna4 attention --batch 16 --heads 64 --kv-heads 8 --seq 8192 --emit config
    python -m tvm_cdna4 attention --seq 8192 --heads 64 --kv-heads 8 --report             # gfx950 static report
    python -m tvm_cdna4 attention --target sm80 --seq 4096 --heads 32 --validate --bench  # NVIDIA GPU
    python -m tvm_cdna4 attention --target sm90 --seq 130 --heads 2 --kv-heads 1 --causal --validate  # emulator
    python -m tvm_cdna4 attention --target sm80 --kv-cache paged --page-size 16 --context 1,77,300 --seq 4 \
        --heads 8 --kv-heads 2 --kv-dtype fp8 --validate                              # paged decode (cli.attention_paged)

The API behind it: ``tvm_cdna4.kernels.attention`` (``plan``, ``emit``, ``build``, ``validate``) and
``tvm_cdna4.report.attention_report`` (--report). Actions: --validate (gfx950: the CPU wavefront emulator; sm80, sm90: the NVIDIA
GPU, without one the CUDA emulator up to ``attention.SM80_EMULATED_PAIRS`` scored pairs),
--emit asm|tir|cuda|config (asm gfx950, cuda sm80 / sm90, config: the plan as one JSON object),
--report (gfx950: the static report), --bench (sm80, sm90: time on the NVIDIA GPU). Exit codes: 0 success,
1 validation failed, 2 usage error / unavailable target / no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

import attrs

from ..kernels.attention.problem import ATTENTION_DTYPES as DTYPES
from ..kernels.attention.problem import LAYOUTS
from .args import (FLAGS_OFF, Default, DefaultsFormatter, check_attention, cuda_arch, nonnegative_int, positive_float,
                   positive_int)

TARGETS = ("gfx950", "sm80", "sm90")  # attention.TARGETS' keys (that module imports the planners: not at parse time)
ACTIONS = "--validate, --emit asm|tir|cuda|config, --report (gfx950), --bench (sm80 / sm90 GPU)"
CUDA_TARGETS = ("sm80", "sm90")


def add_attention_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``attention`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("attention", help="attention forward (FlashAttention-2): --validate, --emit, --report, "
                              "--bench", description=f"{__doc__}{FLAGS_OFF}\n", formatter_class=DefaultsFormatter)
    p.add_argument("--target", default="gfx950", choices=TARGETS, help="gfx950 (CDNA4), sm80 (CUDA) or sm90 (Hopper: TMA + wgmma)")
    p.add_argument("--dtype", default="bf16", choices=DTYPES,
                   help="Q, K, V dtype; fp8: OCP e4m3 with per-tensor f32 scales, bf16 O (gfx950)")
    p.add_argument("--batch", type=positive_int, default=Default(1), help="batch size B")
    p.add_argument("--heads", type=positive_int, default=1, help="query heads H")
    p.add_argument("--kv-heads", type=positive_int, help="K/V heads (GQA: divides H; default: H)")
    p.add_argument("--seq", type=positive_int, required=True, help="query sequence length (required)")
    p.add_argument("--seq-kv", type=positive_int, help="key/value sequence length (default: --seq)")
    p.add_argument("--head-dim", type=positive_int, default=128, help="64 or 128")
    p.add_argument("--causal", action="store_true", help="row i sees keys j <= i (top-left diagonal)")
    p.add_argument("--scale", type=positive_float, help="softmax scale (default: 1 / sqrt(head dim))")
    p.add_argument("--layout", default="bhsd", choices=LAYOUTS,
                   help="how Q, K, V and O are stored (AttentionProblem.layout): bhsd [B, H, S, D], or bshd [B, S, H, D] "
                        "(sm80 and sm90; gfx950 refuses it)")
    p.add_argument("--block-q", type=positive_int, help="query rows per workgroup / CTA (default: the target's)")
    p.add_argument("--block-kv", type=positive_int, help="keys per K/V tile (default: the target's)")
    p.add_argument("--stages", type=nonnegative_int,
                   help="(K, V) tiles in flight: the ring depth (sm90: Sm90AttentionConfig.stages, kept as given with "
                        "--epilogue; sm80: Sm80AttentionConfig.stages; gfx950 has no such field: its LDS stages follow "
                        "lds_dma) (default: the cost model's)")
    p.add_argument("--epilogue", metavar="HOW",
                   help="sm90: how O leaves (Sm90AttentionConfig.epilogue, EPILOGUES): registers, tma (through the Q "
                        "tile) or tma_buffer (a buffer of its own; the ring no deeper than fits beside it) (default: the "
                        "cost model's)")
    p.add_argument("--persistent", action=argparse.BooleanOptionalAction,
                   help="sm90: one CTA per SM walking the work items (Sm90AttentionConfig.persistent; with an epilogue "
                        "other than tma each warpgroup releases Q at its last S: early_q_release) or one CTA per item "
                        "(default: the cost model's)")
    p.add_argument("--item-overlap", action=argparse.BooleanOptionalAction,
                   help="sm90, ping-pong: an item's first S and last P V outside the warpgroups' turns, so that "
                        "one starts its next item under the others' last P V and epilogue "
                        "(Sm90AttentionConfig.item_overlap) (default: the cost model's)")
    p.add_argument("--walk", metavar="ORDER",
                   help="sm90, --persistent: the order the CTAs take the work items in (Sm90AttentionConfig.walk, "
                        "WALKS): round_robin, zigzag or fold (a long and a short query block in turn) (default: the "
                        "cost model's)")
    p.add_argument("--consumers", type=positive_int,
                   help="sm90: consumer warpgroups of 64 query rows (Sm90AttentionConfig.consumers: 2, or 3 at head dim "
                        "64, the tile no wider than their registers fit unless --block-kv) (default: the cost model's)")
    p.add_argument("--validate", action="store_true",
                   help="gfx950: the CPU emulator; sm80: the NVIDIA GPU (without one: the CUDA emulator, small "
                        "shapes); against the float64 reference within attention.problem.error_bound")
    p.add_argument("--seed", type=nonnegative_int, default=Default(0), help="random input seed, with --validate")
    p.add_argument("--emit", choices=("asm", "tir", "cuda", "config"),
                   help="print the generated code (asm: gfx950, cuda: sm80, tir) or the plan as JSON (config) "
                        "(default: none)")
    p.add_argument("--report", action="store_true", help="gfx950: the static performance report")
    p.add_argument("--bench", action="store_true", help="sm80: time on the NVIDIA GPU and print TFLOP/s")
    p.add_argument("--kv-cache", choices=("dense", "paged"), default="dense",
                   help="paged: decode attention over a paged KV cache (--seq is the queries per sequence, 1..8)")
    p.add_argument("--page-size", type=positive_int, default=Default(16), help="paged: keys per page (16..128, a power of two)")
    p.add_argument("--context", help="paged: the sequences' context lengths, comma-separated (the batch); required with --kv-cache paged, no default")
    p.add_argument("--kv-dtype", choices=("bf16", "f16", "fp8"), help="paged: the KV cache's dtype (default: --dtype)")
    p.add_argument("--no-cache", action="store_true", help="build with TIRx even when the build cache has it")
    p.add_argument("--arch", type=cuda_arch,
                   help="sm80: the CUDA arch to plan and build for, sm_80 or newer, e.g. sm_90 (default: the NVIDIA "
                        "GPU's when one is present, else sm_80); the default config depends on it (causal on sm_90: "
                        "mbarriers)")
    p.set_defaults(func=run_attention, check=check_attention)
    return p


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def problem_of(args):
    """The ``AttentionProblem`` of the options (ValueError naming the field it refuses)."""
    from ..kernels.gfx950.attention_plan import AttentionProblem

    kv_heads = args.heads if args.kv_heads is None else args.kv_heads  # an explicit 0 is refused, not defaulted
    seq_kv = args.seq if args.seq_kv is None else args.seq_kv
    return AttentionProblem(args.batch, args.heads, kv_heads, args.seq, seq_kv, args.head_dim, causal=args.causal,
                            dtype=args.dtype, scale=args.scale, layout=args.layout)


CONFIG_FIELDS = ("block_q", "block_kv", "stages", "epilogue", "persistent", "consumers", "item_overlap", "walk")
"""The config fields the options set by name (``--block-q`` ...; ``--persistent`` / ``--no-persistent``)."""


def config_of(args, problem, options=None):
    """The target's config: its default (the planner's, ``plan(problem, target, **options).config``) with
    ``CONFIG_FIELDS`` applied (the target's ``replace_fields`` where it has one: sm90 re-plans the ring for
    ``--epilogue``); None without any. A field the target's config lacks, or a value the config or the plan
    refuses, is a ValueError of one line, the option as typed first (``--block-kv 7: ...``: the option of the
    refused operand where the rule names one given, else every option given)."""
    from ..kernels import attention
    from ..kernels.common import option, refused_options

    updates = {name: getattr(args, name) for name in CONFIG_FIELDS if getattr(args, name) is not None}
    if not updates:
        return None
    options = options or {}
    default = attention.plan(problem, args.target, **options).config
    fields = attrs.fields_dict(type(default))
    given = {name: option(name, value) for name, value in updates.items()}
    for name in updates:
        if name not in fields:
            hint = " (its query rows follow --consumers)" if name == "block_q" and "consumers" in fields else ""
            raise ValueError(f"{given[name]}: the {args.target} config has no {name}{hint}; its fields: "
                             f"{', '.join(fields)}")
    try:
        try:
            replace = attention.TARGETS[args.target].verb("replace_fields")
        except NotImplementedError:
            config = attrs.evolve(default, **updates)
        else:
            config = replace(problem, default, **updates)
        attention.plan(problem, args.target, config, **options)
    except ValueError as err:  # a ContractError names its operand
        raise refused_options([given[n] for n in (getattr(err, "operand", None),) if n in given] or given.values(),
                              err) from err
    return config


def _refusal(args) -> str | None:
    """The options' usage error, if any (first the option, then the rule)."""
    if not (args.validate or args.emit or args.report or args.bench):
        return f"attention needs an action: {ACTIONS}"
    if args.target == "gfx950" and args.emit == "cuda":
        return "--emit cuda is for --target sm80 / sm90; gfx950 emits asm, tir or config"
    if args.target in CUDA_TARGETS and args.emit == "asm":
        return f"--emit asm is for --target gfx950; {args.target} emits cuda, tir or config"
    if args.target in CUDA_TARGETS and args.report:
        return f"--report is the gfx950 static report; on {args.target} use --bench on an NVIDIA GPU"
    if args.target == "gfx950" and args.bench:
        return "--bench needs a gfx950 GPU; use --report for the static estimate or --validate for the emulator"
    if args.target == "gfx950" and args.arch:
        return "--arch is for --target sm80 (a CUDA arch); gfx950 is one arch"
    if args.target == "sm90" and args.arch not in (None, "sm_90", "sm_90a"):
        return f"--arch {args.arch}: --target sm90 builds for sm_90a (wgmma, setmaxnreg)"
    return None


def present_arch() -> str | None:
    """The present NVIDIA GPU's arch (``runtime.cuda.device_arch``: what ``--validate`` and ``--bench`` run
    on), None without one."""
    from ..runtime import cuda as runner

    return runner.device_arch() if runner.have_cuda_gpu()[0] else None


def _gpu_refusal(args, device: str | None) -> str | None:
    """``--validate`` / ``--bench`` on the GPU run the kernel of the config (``tvm_cdna4.torch.run_attention`` /
    ``attention_kernel`` with ``config=``) for the GPU's arch: another ``--arch`` would be ignored there, so it is
    refused."""
    if device is None or not (args.validate or args.bench):
        return None
    if args.arch and args.arch.removesuffix("a") != device.removesuffix("a"):  # sm_90a runs on an sm_90 GPU
        return f"--arch {args.arch} with --validate / --bench: the GPU here is {device}"
    return None


def plan_json(target: str, plan) -> dict:
    """``--emit config``: the plan record as one JSON object, with the target and the problem's flops."""
    return plan.summary()


def run_attention(args) -> int:
    """The ``attention`` subcommand: exit status 0, 1 (validation failed) or 2 (usage, no target/GPU)."""
    from ..errors import ContractError
    from ..kernels import attention

    if args.kv_cache == "paged":
        from .attention_paged import run_paged

        return run_paged(args, present_arch)
    paged_only = [flag for flag, value in (("--context", args.context), ("--kv-dtype", args.kv_dtype)) if value]
    if paged_only:
        return _usage(f"{', '.join(paged_only)} is for --kv-cache paged")
    why = _refusal(args)
    if why:
        return _usage(why)
    device = present_arch() if args.target in CUDA_TARGETS else None
    if args.target == "sm90" and device is not None and not device.startswith("sm_90"):
        device = None  # the sm90 kernel runs on sm_90 only: elsewhere --validate takes the CUDA emulator
    why = _gpu_refusal(args, device)
    if why:
        return _usage(why)
    try:
        problem = problem_of(args)
        options = {"arch": args.arch or device or "sm_80"} if args.target == "sm80" else {}
        config = config_of(args, problem, options)
        plan = attention.plan(problem, args.target, config, **options)
        if args.emit == "config":
            print(json.dumps(plan_json(args.target, plan), default=str))
        elif args.emit == "tir":
            print(attention.emit(plan).script())
        elif args.emit == "asm":
            print(attention.build(problem, "gfx950", config, cache=not args.no_cache).asm)
        elif args.emit == "cuda":
            print(attention.build(problem, args.target, config, cache=not args.no_cache, **options).source)
        if args.report:
            print(gfx950_report(problem, config, cache=not args.no_cache))
        status = _validate(args, problem, config, device is not None, options) if args.validate else 0
        if args.bench:
            _bench(problem, args.target, config)
    except ContractError:
        raise
    except ValueError as err:
        return _usage(str(err))
    return status


def gfx950_report(problem, config, cache: bool = True) -> str:
    """``--report``: the gfx950 static report of the kernel (``report.attention_report``, formatted)."""
    from .. import report

    return report.format_attention_report(report.attention_report(problem, config, cache=cache))


def _title(problem) -> str:
    p = problem
    return (f"{p.dtype} attention B={p.batch} H={p.heads} Hkv={p.kv_heads} Sq={p.seq_q} Skv={p.seq_kv} "
            f"D={p.head_dim}{' causal' if p.causal else ''}{' bshd' if p.layout == 'bshd' else ''}")


def _validate(args, problem, config, gpu: bool, options) -> int:
    """``--validate``: PASS (0) or FAIL (1), with the largest error over the bound of O and LSE (sm80
    without a GPU: the CUDA emulator, small shapes)."""
    from ..kernels import attention

    run = None
    if gpu:  # the GPU runner of the runtime layer (the family's validate does the rest)
        _torch_attention(args.target)  # first: it says why there is no GPU (or no torch)
        from functools import partial

        from ..torch import run_attention
        run = partial(run_attention, target=args.target, config=config)
    result = attention.validate(problem, args.target, config, args.seed, run=run, **options)
    lse = "not returned" if result.lse_ratio is None else f"{result.lse_ratio:.3f}"
    print(f"validated {args.target} {_title(problem)} on {result.where} in {result.seconds:.2f} s: largest error / "
          f"bound: O {result.o_ratio:.3f}, LSE {lse} (float64 reference, kernels.gfx950.attention_plan.error_bound)")
    print("PASS" if result.ok else "FAIL")
    return 0 if result.ok else 1


def _torch_attention(target: str = "sm80"):
    """``tvm_cdna4.torch.attention`` on a present NVIDIA GPU (ValueError naming what is missing)."""
    from ..runtime import cuda as runner

    ok, why = runner.have_cuda_gpu()
    if not ok:
        raise ValueError(f"{target} attention on the GPU (--validate, --bench) needs an NVIDIA GPU, and none is available "
                         f"here ({why})")
    from .. import torch as tt

    return tt.attention


def _bench(problem, target: str = "sm80", config=None) -> None:
    """``--bench`` (sm80, sm90): the target's kernel of ``config`` (None: the cost model's;
    ``tvm_cdna4.torch.attention_kernel``) timed on the GPU (``runtime.cuda.bench_ms``)."""
    _torch_attention(target)  # first: it says why there is no GPU (or no torch)
    import torch

    from ..runtime import cuda as runner
    from ..torch import attention_dtype, attention_kernel

    shapes = problem.shapes()
    fp8 = problem.dtype == "fp8"  # e4m3 inputs, unit scales, bf16 O (sm90)
    dtype = torch.float8_e4m3fn if fp8 else attention_dtype(problem)
    q, k, v = (torch.randn(shapes[n], device="cuda").to(dtype) for n in ("Q", "K", "V"))
    o = torch.empty(shapes["O"], dtype=torch.bfloat16 if fp8 else dtype, device="cuda")
    lse, extra = torch.empty(shapes["LSE"], dtype=torch.float32, device="cuda"), ()
    if fp8:
        extra = (torch.ones(3, dtype=torch.float32, device="cuda"),)
    kernel = attention_kernel(q, problem, target, config)
    ms = runner.bench_ms(lambda: kernel.launch(q, k, v, o, lse, *extra))
    print(f"bench {target} {_title(problem)}: {ms:.3f} ms, {problem.flops() / ms / 1e9:.1f} TFLOP/s")
