"""Command line: ``python -m tvm_cdna4 <command>``."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys

from ..errors import TRACEBACK_ENV, ContractError, full_tracebacks, report
from .args import FLAGS_OFF, Default, DefaultsFormatter, UsageParser, check_opcodes


def _opcodes(args: argparse.Namespace) -> int:
    from ..isa import CATALOG
    from ..isa.export import to_dict

    ops = list(CATALOG.values())
    if args.kind:
        ops = [op for op in ops if op.kind == args.kind]
    if args.json:
        json.dump([to_dict(op, with_lanes=not args.no_lanes) for op in ops], sys.stdout, indent=None)
        sys.stdout.write("\n")
        return 0
    mfma = [op for op in ops if op.kind != "ds_read_tr"]
    tr = [op for op in ops if op.kind == "ds_read_tr"]
    if mfma:
        head = ("name", "MxNxK", "blk", "A", "B", "acc", "A/lane", "acc regs", "ops", "cycles", "mnemonic")
        rows = [
            (
                op.name,
                f"{op.m}x{op.n}x{op.k}",
                str(op.blocks),
                op.a_format,
                op.b_format,
                op.acc_format,
                op.a_vector,
                str(op.acc_regs),
                str(op.ops),
                _cycles(op),
                op.mnemonic,
            )
            for op in mfma
        ]
        _print_table(head, rows)
    if tr:
        if mfma:
            print()
        head = ("name", "elem bits", "load bits", "elems", "result", "align", "call 1 K", "call 2 K", "mnemonic")
        rows = [
            (
                op.name,
                str(op.element_bits),
                str(op.load_bits),
                str(op.elements),
                op.result_vector,
                f"{op.lds_alignment} B",
                ",".join(f"{lo}-{hi}" for lo, hi in op.k_split[0]),
                ",".join(f"{lo}-{hi}" for lo, hi in op.k_split[1]),
                op.mnemonic,
            )
            for op in tr
        ]
        _print_table(head, rows)
    return 0


def _cycles(op) -> str:
    if not op.cycles_by_format:
        return str(op.cycles)
    by = dict(op.cycles_by_format)
    return f"{by['fp8']} f8, {by['fp4']} f6/f4"


def _print_table(head, rows) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for row in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)).rstrip())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError

    from ..cache import dist_version

    try:
        return dist_version("tvm-cdna4")
    except PackageNotFoundError:  # a source tree that is not installed
        from .. import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {_version()}")
        parser.exit()


@contextlib.contextmanager
def logging_to_stderr(verbosity: int):
    """Within: the ``tvm_cdna4`` logger prints to stderr at INFO (``verbosity`` 0), DEBUG (1, ``-v``)
    or WARNING (-1, ``-q``); afterwards it is as it was (``main`` may run inside another program)."""
    logger = logging.getLogger("tvm_cdna4")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    level = logger.level
    logger.setLevel({-1: logging.WARNING, 0: logging.INFO}.get(verbosity, logging.DEBUG))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def build_parser() -> UsageParser:
    """The parser of every command: ``UsageParser``s (one-line usage errors) with ``DefaultsFormatter``
    help (each option's default); a command's ``check`` (``cli.args``) runs on its parsed options
    before the command (``main``)."""
    parser = UsageParser(prog="python -m tvm_cdna4", description=__doc__, formatter_class=DefaultsFormatter)
    parser.add_argument("--version", action=_VersionAction, help="print the installed version and exit")
    talk = parser.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true",
                      help=f"log at DEBUG (tool paths chosen, ...); on a contract error, print the full traceback "
                           f"(also: {TRACEBACK_ENV}=1)")
    talk.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only (default: INFO too)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("opcodes", help="print the CDNA4 instruction catalog", description=f"The catalog. {FLAGS_OFF}",
                       formatter_class=DefaultsFormatter)
    p.add_argument("--json", action="store_true", help="JSON list, one object per opcode, with lane maps")
    p.add_argument("--no-lanes", action="store_true", help="with --json: leave out the lane tables")
    p.add_argument("--kind", choices=("mfma", "mfma_scale", "ds_read_tr"),
                   help="only this kind: dense MFMA, scaled (MX) MFMA, LDS transpose load (default: every kind)")
    p.set_defaults(func=_opcodes, check=check_opcodes)
    from .gemm import add_gemm_parser; add_gemm_parser(sub)  # noqa: E702
    p = sub.add_parser("selftest", help="compile one kernel per opcode for gfx950 (or per wgmma form for sm90) and "
                       "check its instruction",
                       description="Compile one kernel per opcode for gfx950 and check its instruction; with "
                                   "--target sm90, one kernel per registered wgmma form (its PTX line; ptxas "
                                   "-arch=sm_90a when nvcc is on PATH).",
                       formatter_class=DefaultsFormatter)
    p.add_argument("names", nargs="*", help="catalog names (default: every opcode of the catalog); sm90: form names "
                   "such as bf16_ss (default: every registered form)")
    p.add_argument("--target", choices=("gfx950", "sm90"), default="gfx950", help="the instruction set to check")
    p.set_defaults(func=lambda args: __import__("tvm_cdna4.selftest", fromlist=["main"]).main(args.names, args.target))
    from .draw import add_draw_parser; add_draw_parser(sub)  # noqa: E702
    from .attention import add_attention_parser; add_attention_parser(sub)  # noqa: E702
    from ..rocm.waitcheck import add_parser as add_waitcheck_parser  # the LLVM tool finder, imported when used:
    add_waitcheck_parser(sub, lambda tool: __import__("tvm_cdna4.rocm.build", fromlist=["llvm_tool"]).llvm_tool(tool))
    return parser


def parse(argv: list[str] | None = None) -> argparse.Namespace | int:
    """The options of ``argv`` after their command's check (``cli.args``), the ``Default`` ints made
    plain; or the exit status: 0 after ``--help`` / ``--version``, 2 after a usage error (one line on
    stderr, the command's prog first for the parser's, ``error:`` first for a check's)."""
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # the command's parser names it (argparse would say ``python -m tvm_cdna4``)
            parser.commands.choices[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 2
    check = getattr(args, "check", None)
    why = check(args) if check else None
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    for name, value in vars(args).items():
        if isinstance(value, Default):
            setattr(args, name, int(value))
    return args


def main(argv: list[str] | None = None) -> int:
    """Run a command; its exit status. A usage error is one line on stderr (exit status 2, ``parse``), a
    contract error is printed with its rule as the first line (exit status 2)."""
    args = parse(argv)
    if isinstance(args, int):
        return args
    with logging_to_stderr(-1 if args.quiet else int(args.verbose)), full_tracebacks(args.verbose):
        try:
            return args.func(args)
        except ContractError as err:
            return report(err)


if __name__ == "__main__":
    sys.exit(main())
