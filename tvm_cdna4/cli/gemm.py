"""``python -m tvm_cdna4 gemm``: build, validate, benchmark or print the GEMM schedule.

    python -m tvm_cdna4 gemm --target sm80 --dtype f16 --layout nt -M 4096 -N 4096 -K 4096 --emit cuda
    python -m tvm_cdna4 gemm --target sm80 --dtype bf16 --layout tn -M 1000 -N 1000 -K 1000 --validate --bench
    python -m tvm_cdna4 gemm --target gfx950 --dtype f16 -M 256 -N 256 -K 256 --validate   # CPU emulator
    python -m tvm_cdna4 gemm --target sm80 --dynamic-m -M 100 -N 4096 -K 4096 --emit config   # M symbolic (-M: its value)
    python -m tvm_cdna4 gemm --target gfx950 --groups 37,0,1,90 -N 72 -K 128 --validate   # grouped GEMM (MoE)
    python -m tvm_cdna4 gemm --target gfx950 --dtype mxfp4 --layout nt -M 4096 -N 4096 -K 4096 --report
    python -m tvm_cdna4 gemm --target gfx950 --dtype fp8 --block 128x128x128 --mfma 32x32 --report
    python -m tvm_cdna4 gemm --target sm90 --dtype bf16 --out-dtype bf16 -M 768 -N 14336 -K 4096 --emit config

--target is required (no default: gfx950 and sm80 validate, time and emit differently). Actions:
--validate, --bench, --report, --emit. Without one, --target sm80 builds for sm_80 (sm90: sm_90a) and says so;
--target gfx950 is a usage error naming its actions (--validate, --report, --emit).
Exit codes: 0 success, 1 validation failed, 2 usage error / unavailable target / no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

import attrs

from ..errors import ContractError
from ..kernels import gemm
from ..kernels.common import option
from ..kernels.gemm.epilogue import ACTIVATIONS, INPUTS, Fusion
from ..kernels.sm90.gemm_fields import FIELD_OPTIONS
from .args import (FLAGS_OFF, Default, DefaultsFormatter, check_gemm, given, nonnegative_int, parse_row_counts,
                   positive_int, row_counts, tile)

TILE_OPTIONS = ("block", "warps", "stages", "mfma", "lds_dma", "group_m", "ctas", "swap_ab")
"""The tile flags, given by name to the target's ``config_from_options`` (``kernels.gemm.config_from_options``)."""
CONFIG_FIELDS = FIELD_OPTIONS
"""The config fields the CLI sets by name (``--cluster-m`` ...: the sm90 GEMM's, ``kernels.sm90.gemm_fields``, a leaf
module; ``--split-k`` sm80's too), given to ``config_from_options`` only when given (a target whose config has no such
field refuses it there)."""
PLANNED = ("block", "warps", "stages", "group_m", "ctas", "mfma", "lds_dma", "swap_ab", "reduction", "tune")
"""The options a dynamic-M or grouped GEMM refuses: the cost model plans each of its buckets."""


def targets() -> dict[str, str]:
    """``--target``'s spellings: every row of ``kernels.gemm.TARGETS`` and its aliases, to the row's name."""
    return {spelling: row.name for row in gemm.TARGETS.values() for spelling in (row.name, *row.aliases)}


def add_gemm_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``gemm`` subcommand on an argparse subparsers object (its options' types and checks:
    ``cli.args``; ``--target`` from ``kernels.gemm.TARGETS``, the fused-epilogue flags from
    ``kernels.gemm.epilogue.INPUTS`` and ``ACTIVATIONS``)."""
    p = subparsers.add_parser("gemm", help="tiled GEMM schedule: build, --validate, --bench, --emit cuda",
                              description=f"{__doc__}{FLAGS_OFF}\n", formatter_class=DefaultsFormatter)
    p.add_argument("--target", required=True, choices=tuple(targets()),
                   help="sm80 (CUDA, also spelled sm_80: runs on sm_80 and newer, sm_90 included), sm90 (Hopper: TMA "
                        "+ wgmma, also sm_90 / sm_90a; static M, layout nt) or gfx950 (CDNA4); "
                        "required, no default: the two validate, time and emit differently")
    p.add_argument("--dtype", default="f16", choices=gemm.DTYPES, help="input dtype (sm80, sm90: f16, bf16; gfx950: all listed)")
    p.add_argument("--out-dtype", default=None, choices=gemm.OUT_DTYPES,
                   help="output dtype (default: the input dtype's first output: f32; gfx950 i8: i32, f64: f64). "
                        "One the dtype does not produce is refused")
    p.add_argument("--layout", default="nt", choices=gemm.LAYOUTS,
                   help="n: A is [M,K] / B is [K,N]; t: A is [K,M] / B is [N,K] (nt = both K-contiguous)")
    p.add_argument("-M", type=positive_int, default=Default(4096),
                   help="rows of A and C (with --dynamic-m: the run-time M; not with --groups, whose rows are A's)")
    p.add_argument("-N", type=positive_int, default=Default(4096), help="columns of B and C")
    p.add_argument("-K", type=positive_int, default=Default(4096), help="the reduction length")
    p.add_argument("--validate", action="store_true",
                   help="sm80: run on the GPU; gfx950: run in the CPU wavefront emulator; compare with the float64 "
                        "reference within kernels.gemm.epilogue.error_bound (kernels.gemm.validate)")
    p.add_argument("--report", action="store_true", help="gfx950: static performance report (instruction mix, llvm-mca)")
    p.add_argument("--json", action="store_true", help="with --report (gfx950): the report as one JSON object (per-wave "
                   "figures and the whole-GPU estimate)")
    p.add_argument("--seed", type=nonnegative_int, default=Default(0), help="random input seed, with --validate")
    p.add_argument("--bench", action="store_true", help="time on the GPU (median, L2 flushed) and print TFLOP/s")
    p.add_argument("--emit", choices=("cuda", "asm", "llvm", "tir", "config"),
                   help="print the generated code: cuda (sm80, sm90), asm / llvm (gfx950), tir, config (default: none; "
                        "sm80 without an action builds and says so)")
    _tile_options(p)
    order = [*(i.name for i in INPUTS if not i.after_activation), "activation",
             *(i.name for i in INPUTS if i.after_activation)]
    fused = p.add_argument_group("fused epilogue", "applied to the f32 accumulator before the output cast, in this "
                                 f"order: {', '.join(n.replace('_', ' ') for n in order)} (docs: kernels.gemm.epilogue)")
    for i in INPUTS:
        fused.add_argument(i.flag, action="store_true", help=i.help)
    fused.add_argument("--activation", choices=ACTIVATIONS, help="relu, silu or gelu (tanh form) (default: none)")
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


def _tile_options(p) -> None:
    """The tile flags (``TILE_OPTIONS``, read by the target's ``config_from_options``), ``--reduction`` and
    ``--tune``."""
    p.add_argument("--block", metavar="MxNxK", type=tile("MxNxK", "128x128x64"),
                   help="block tile, e.g. 128x256x32 (default: the planner's, or the dtype's)")
    p.add_argument("--warps", metavar="WMxWN", type=tile("WMxWN", "2x2"),
                   help="warp grid, e.g. 2x4 (default: the planner's; gfx950: 2x2 waves only; sm90: 1x1 or 2x1, the "
                        "consumer warpgroups)")
    p.add_argument("--stages", type=positive_int, help="software pipeline depth (default: the planner's; sm80: cp.async "
                   "stages, at least 2; gfx950: 2 only, 3 with --lds-dma)")
    p.add_argument("--mfma", choices=("16x16", "32x32"), help="gfx950: MFMA shape (default: the planner's, or the dtype's)")
    p.add_argument("--lds-dma", action="store_true",
                   help="gfx950 dense GEMMs: direct-to-LDS global loads, three LDS stages (its own default tile); "
                        "every row of A and B as stored (K for nt) must be whole 16-byte chunks: a multiple of 8 "
                        "elements for f16/bf16, 16 for fp8/bf8/i8, 4 for f32, 2 for f64")
    p.add_argument("--swap-ab", action="store_true",
                   help="sm90, static M: compute C^T = B A^T, the weights as wgmma's A and the small M as its N "
                        "(Sm90Config.swap_ab; --block then tiles C^T: N side x M side) (default: off)")
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
    _field_options(p)


def _field_options(p) -> None:
    """The sm90 config fields by name (``CONFIG_FIELDS``): each replaces that field of the config the other
    options give (the cost model's choice); the values are ``kernels.sm90.gemm_plan``'s, checked by
    ``Sm90Config.check`` (docs/sm90_gemm.md)."""
    g = p.add_argument_group("sm90 config fields", "each replaces that field of Sm90Config in the config the cost model "
                             "(or the tile options) would give; --emit config shows it (docs/sm90_gemm.md)")
    g.add_argument("--cluster-m", type=positive_int,
                   help="CTAs per thread-block cluster along M, 1 or 2 (CLUSTER_MS): 2 multicasts each B tile to a pair "
                        "of CTAs (default: the planner's, 1)")
    g.add_argument("--residual-read", metavar="HOW",
                   help="how a fused --residual is read (RESIDUAL_READS): global (in the epilogue), tma or sliced (into "
                        "the staging buffer in the mainloop; --epilogue tma), preread (tma, read into registers before "
                        "the epilogue), prefetch (into L2), early (global's loads, issued in the mainloop into registers), chunks "
                        "(into the --epilogue-tile chunk buffers by the producer, chunk by chunk) (default: the planner's)")
    g.add_argument("--tile-walk", metavar="WALK",
                   help="--groups: how the CTAs walk the row tiles (TILE_WALKS): gaps, prefix or windows (the prefix walk, "
                        "a group's tiles in windows of their own) (default: the planner's)")
    g.add_argument("--epilogue", metavar="HOW",
                   help="how C is written (EPILOGUES): registers (stores from registers) or tma (staged in shared "
                        "memory, TMA stores); the ring re-planned unless --stages (default: the planner's)")
    g.add_argument("--epilogue-tile", type=nonnegative_int, metavar="COLUMNS",
                   help="--epilogue tma: C staged in chunks of this many columns (a multiple of 64 below --block's N) "
                        "through two buffers, 0 the whole tile (default: the planner's)")
    g.add_argument("--split-k", type=positive_int, metavar="S",
                   help="sm90 and sm80: K slices per output tile (Sm90Config.split_k, sm80's GemmConfig.split_k), their "
                        "partial sums reduced through a workspace; 1 = no K split (sm90: decomposition data-parallel, as "
                        "--cluster-m 2 needs) (default: the planner's)")
    g.add_argument("--raster", metavar="WAY",
                   help="which way the persistent order walks a group of --group-m tiles (RASTERS): m (down the group's "
                        "tile rows) or n (along its tile columns) (default: the planner's, m)")


def _usage(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def fusion(args) -> Fusion:
    """The fused epilogue the flags ask for (``Fusion()`` without any): one flag per ``INPUTS`` row."""
    return Fusion(activation=args.activation, **{i.name: getattr(args, i.name) for i in INPUTS})


def group_rows(args) -> list[int] | None:
    """``--groups``' row counts (None without it)."""
    return None if args.groups is None else parse_row_counts(args.groups)


def problem_of(args) -> gemm.GemmProblem:
    """The one ``GemmProblem`` of the options: ``--dynamic-m`` and ``--groups`` make M run-time (None),
    ``--groups`` gives the groups; a ValueError names the field it refuses."""
    rows = group_rows(args)
    M = None if args.dynamic_m or rows is not None else args.M
    return gemm.GemmProblem(M, args.N, args.K, args.dtype, args.layout, args.out_dtype, fusion(args),
                            groups=len(rows) if rows else 0)


def _mode_refusal(args) -> str | None:
    """What ``--dynamic-m`` and ``--groups`` cannot take: tile options (each bucket is the cost model's),
    ``--dynamic-m`` with ``--groups``, a layout the grouped GEMM does not store, ``--report`` of a
    dynamic M."""
    planned = [option(name) for name in PLANNED if given(args, name)]
    if args.groups is not None:
        if planned:
            return f"--groups plans every rows-per-group bucket with the cost model: {', '.join(planned)} cannot be given"
        if args.dynamic_m:
            return "--groups is dynamic in T already (A's rows, the offsets read on the device): drop --dynamic-m"
        if args.layout not in ("nt", "nn"):
            return (f"--groups: layout {args.layout}; the grouped GEMM stores A [T, K] and B [G, N, K] (nt) or [G, K, N] "
                    "(nn)")
    elif args.dynamic_m:
        planned += [option(name) for name in CONFIG_FIELDS if given(args, name)]
        if planned:
            return f"--dynamic-m plans every M bucket with the cost model: {', '.join(planned)} cannot be given"
        if args.report:
            return "--report estimates a static problem; drop --dynamic-m (or use --emit config: the bucket's plan)"
    return None


def _refusal(args, target: str, actions) -> str | None:
    """The options' usage error on ``target`` (``actions``: its ``cli.gemm_actions.Actions``), before anything runs."""
    why = _mode_refusal(args)
    if why:
        return why
    if args.report and actions.report is None:
        return actions.refused.get("report", f"--report is not available for --target {target}")
    if args.bench and actions.bench is None:
        return actions.refused.get("bench", f"--bench is not available for --target {target}")
    code = gemm.code(target)
    if args.emit not in (None, "tir", "config", *code):
        owner = next((t for t in gemm.TARGETS if args.emit in gemm.code(t)), None)
        return (f"--emit {args.emit} is for --target {owner}; {target} emits {', '.join(code)}, tir or config")
    if not (args.validate or args.report or args.bench or args.emit or args.tune) and actions.default is None:
        return f"gemm --target {target} needs an action: {actions.needs}"
    return actions.gpu_refusal(args)


def run_gemm(args) -> int:
    """The ``gemm`` subcommand: one ``GemmProblem``, its config (the tile options through the target's
    ``config_from_options``; none: the cost model's), its plan (``kernels.gemm.plan``), then the actions
    through the family's verbs. Exit status 0, 1 (validation failed) or 2 (usage, no target/GPU)."""
    from ..errors import ContractError
    from .gemm_actions import actions_of

    target = targets()[args.target]
    actions = actions_of(target)
    why = _refusal(args, target, actions)
    if why:
        return _usage(why)
    run = Run(args, target, actions)
    try:
        run.prepare()
    except ContractError:
        raise
    except (ValueError, TypeError) as err:  # the options' refusals, one line naming what is refused
        return _usage(str(err))
    return run.act()


class Run:
    """One ``gemm`` command: the problem, the config and the plan (``prepare``), then the actions (``act``)."""

    def __init__(self, args, target: str, actions):
        self.args, self.target, self.actions = args, target, actions
        self.problem = self.config = self.plan = self.built = None
        self.rows, self.group_rows, self.options = 0, None, {}

    def prepare(self) -> None:
        """The problem, the config, the plan and (for ``--emit asm|llvm|cuda``, ``--report`` and the default
        build) the kernel: a ValueError is a usage error."""
        args = self.args
        self.problem = problem = problem_of(args)
        self.group_rows = group_rows(args)
        self.rows = problem.rows(args.M, self.group_rows)
        fields = {n: getattr(args, n) for n in CONFIG_FIELDS if given(args, n)}
        if fields and problem.M is None:
            fields["m"] = self.rows  # a grouped problem: the fields of the bucket of its rows
        self.config = gemm.config_from_options(problem, self.target, **{n: getattr(args, n) for n in TILE_OPTIONS},
                                               **fields)
        self.options = {"reduction": args.reduction} if args.reduction else {}
        if args.tune:
            self.config = self.actions.tune(problem)
        self.plan = gemm.plan(problem, self.target, self.config, m=None if problem.M is not None else self.rows, **self.options)
        default = not (args.validate or args.report or args.bench or args.emit)
        if args.emit in gemm.code(self.target) or args.report or default:
            built = gemm.build(problem, self.target, self.config, cache=not args.no_cache, **self.options)
            self.built = built if problem.M is not None else built.kernel_for(self.rows)

    @property
    def title(self) -> str:
        text = f"{self.target} {self.problem.describe()}"
        if self.problem.dynamic:
            text += f" at M = {self.rows}"
        if self.problem.grouped:
            text += f" at T = {self.rows} (group rows {','.join(map(str, self.group_rows))})"
        return text

    def act(self) -> int:
        args = self.args
        if args.emit == "config":
            print(json.dumps(self.config_json(), default=str))
        elif args.emit == "tir":
            print(gemm.emit(self.plan).script())
        elif args.emit is not None:
            print(getattr(self.built, gemm.code(self.target)[args.emit]))
        if args.report:
            self.actions.report(self)
        if not (args.validate or args.report or args.bench or args.emit):
            config = self.plan.config
            print(f"built {self.title} for {self.actions.default}: "
                  f"{config.as_dict() if hasattr(config, 'as_dict') else attrs.asdict(config)}")
        status = self.validate() if args.validate else 0
        if args.bench:
            self.actions.bench(self)
        return status

    def config_json(self) -> dict:
        """``--emit config``: ``plan.to_json()``; a dynamic-M or grouped plan's with the run-time rows
        (grouped: ``T`` and ``group_rows``) and every bucket (``buckets``)."""
        out = json.loads(self.plan.to_json())
        if self.problem.grouped:
            out.update(T=self.rows, group_rows=self.group_rows)
        if self.problem.M is None:
            kernels = gemm.build(self.problem, self.target, cache=not self.args.no_cache)
            out["buckets"] = [b.describe() for b in kernels.buckets]
        return out

    def validate(self) -> int:
        """``--validate``: ``kernels.gemm.validate`` (inputs, reference and bound from the problem; the run
        from the target, through the GPU runner where the target has one): the largest error over the
        bound and the relative error, then PASS (0) or FAIL (1)."""
        from ..emulator import EmulationError

        try:
            v = gemm.validate(self.problem, self.target, self.config, self.args.seed, m=self.rows,
                              group_rows=self.group_rows, run=self.actions.runner(self.args), **self.options)
        except EmulationError as err:
            print(f"emulation found a kernel bug:\n{err}\nFAIL")
            return 1
        except ContractError:
            raise
        except ValueError as err:  # beyond the emulator's reach without a GPU: one line, as a usage error
            print(f"error: {str(err).splitlines()[0]}", file=sys.stderr)
            return 2
        print(f"validated {self.title} on {v.where} in {v.seconds:.2f} s: largest error / bound = {v.ratio:.3f}, "
              f"relative error {v.relative:.3e} (float64 reference; bound: kernels.gemm.epilogue.error_bound)")
        print("PASS" if v.ok else "FAIL")
        return 0 if v.ok else 1
