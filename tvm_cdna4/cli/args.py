"""The CLI's argument checking, in one place: the parser class, the value types and the checks of
the parsed options that no single option can make.

Every bad input is one line on stderr and exit status 2:

* the parser's own (``UsageParser``): a value its type or choices refuse, a missing required
  argument, an unknown option, ``python -m tvm_cdna4 gemm: error: argument -M: expected a positive
  integer, found '0'`` (argparse's form, without the usage block);
* the checks (``check``, registered per subcommand with ``set_defaults(check=...)`` and run by
  ``cli.main`` before the command): an option the target or the mode would ignore, or one that
  needs another, ``error: --json needs --report ...`` (the form of the commands' own refusals).

Defaults the checks must tell apart from a value given (``-M`` with ``--groups``, ``--seed``
without ``--validate``) are ``Default`` ints: equal to the value, marked as not given.
"""

from __future__ import annotations

import argparse
import math
import re

REQUIRED = "the following arguments are required: "
FLAGS_OFF = "Flags (options without a value) are off unless given."


class UsageParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, ``PROG: error: MESSAGE`` (exit status 2), not
    the usage block and the message; a missing argument with choices lists them. Subparsers take
    the class of their parent (``add_subparsers``' default ``parser_class``)."""

    commands = None  # the subparsers action (``add_subparsers``): ``commands.choices[name]``, a command's parser

    def add_subparsers(self, **kwargs):
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def error(self, message: str):
        if message.startswith(REQUIRED):
            message = "; ".join(self._required(name) for name in message[len(REQUIRED):].split(", "))
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")

    def _required(self, name: str) -> str:
        """``argument NAME: required`` and, for an argument with choices, ``; expected one of ...``."""
        action = next((a for a in self._actions if name in ("/".join(a.option_strings), a.metavar, a.dest)), None)
        choices = f"; expected one of {', '.join(map(str, action.choices))}" if action and action.choices else ""
        return f"argument {name}: required{choices}"


class DefaultsFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` with each option's default: ``(default: X)`` after the help of an option that takes a
    value and has one, unless its help already names its default (then in words: "default: the
    planner's"). Descriptions keep their line breaks."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (not action.option_strings or action.nargs == 0 or action.default in (None, argparse.SUPPRESS)
                or "default" in text):
            return text
        return f"{text} (default: %(default)s)"


class Default(int):
    """An int default that says it was not given (``given``); otherwise the int itself."""


def given(args: argparse.Namespace, name: str) -> bool:
    """Whether the option ``name`` was given (a ``Default`` value was not; ``None`` / ``False`` neither; 0 was)."""
    value = getattr(args, name, None)
    return value is not None and value is not False and not isinstance(value, Default)


def _int(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise argparse.ArgumentTypeError(f"expected {what}, found {text!r}")
    return value


def positive_int(text: str) -> int:
    """A size: an integer >= 1."""
    return _int(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """A seed or a count where 0 means something (``--ctas 0``): an integer >= 0."""
    return _int(text, 0, "a non-negative integer")


def positive_float(text: str) -> float:
    """A scale: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, found {text!r}")
    return value


def tile(spelling: str, example: str):
    """The type of ``--block MxNxK`` / ``--warps WMxWN``: ``len(spelling.split("x"))`` positive integers
    joined by ``x``; the value is the text, lower case (the commands parse it)."""
    count = len(spelling.split("x"))

    def parse(text: str) -> str:
        parts = text.lower().split("x")
        if len(parts) != count or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"expected {spelling}, {count} positive integers such as {example}; "
                                             f"found {text!r}")
        return "x".join(str(int(p)) for p in parts)

    parse.__name__ = spelling
    return parse


def parse_row_counts(text: str) -> list[int]:
    """The row counts of ``--groups``: comma-separated integers >= 0, at least one, no empty item
    (ValueError naming the option)."""
    parts = text.split(",")
    if not all(p.strip().isdigit() for p in parts):  # '' and '3,,4' included: no silent dropping
        raise ValueError(f"--groups: expected comma-separated row counts, each >= 0, such as 300,0,1,77; found {text!r}")
    return [int(p) for p in parts]


def row_counts(text: str) -> str:
    """The type of ``--groups``: ``parse_row_counts``' check; the value is the text, without blanks."""
    try:
        return ",".join(str(n) for n in parse_row_counts(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--groups: ")) from None


CUDA_ARCH = re.compile(r"sm_(\d+)[a-z]?")


def cuda_arch(text: str) -> str:
    """The type of attention's ``--arch``: ``sm_XY`` (an optional letter: ``sm_90a``), XY >= 80 (the
    kernels need cp.async, ldmatrix and mma.sync m16n8k16)."""
    match = CUDA_ARCH.fullmatch(text)
    if not match or int(match.group(1)) < 80:
        raise argparse.ArgumentTypeError(f"expected a CUDA arch sm_80 or newer, such as sm_80 or sm_90a; found {text!r}")
    return text


# ---------------------------------------------------------------------------------- the checks


def check_opcodes(args) -> str | None:
    """``opcodes``: ``--no-lanes`` shapes the JSON only."""
    if args.no_lanes and not args.json:
        return "--no-lanes needs --json (it leaves the lane tables out of the JSON); add --json or drop --no-lanes"
    return None


def _seed(args) -> str | None:
    if given(args, "seed") and not args.validate:
        return (f"--seed seeds --validate's inputs; found --seed {args.seed} without --validate: add --validate or "
                "drop --seed")
    return None


SM80_TILE_OPTIONS = ("block", "warps", "stages", "group_m", "ctas", "split_k")


def check_gemm(args) -> str | None:
    """``gemm``: the options one target or mode would ignore, and those that need another. The
    refusals of the commands themselves (dtypes, emitters, tile options with ``--dynamic-m`` /
    ``--groups``, ...) stay where the options are read."""
    if args.json and not args.report:
        return "--json needs --report (it prints the report as one JSON object); add --report or drop --json"
    if args.json and args.groups is not None:
        return "--json: the grouped GEMM's --report is text only; drop --json"
    if given(args, "M") and args.groups is not None:
        rows = sum(parse_row_counts(args.groups))
        return f"-M is not read with --groups (A's rows are the groups' rows summed, T = {rows}); drop -M"
    target = _target_name(args.target)
    if args.tune and _actions_of(target).tune is None:
        return (f"--tune is an {_tuned_targets()} option (it times candidate tilings on an NVIDIA GPU); {target} runs its planner's "
                "choice by the cost model (--emit config shows it)")
    from ..kernels.common import option

    tiles = [option(name) for name in SM80_TILE_OPTIONS if given(args, name)]
    if args.tune and tiles and args.groups is None and not args.dynamic_m:
        return f"--tune chooses the tile by timing candidates: {', '.join(tiles)} cannot be given with it"
    return _seed(args)


def check_attention(args) -> str | None:
    """``attention``: ``--seed`` without ``--validate``; ``--page-size`` without ``--kv-cache paged``, and
    ``--batch`` with it (the batch is the count of ``--context``)."""
    paged = getattr(args, "kv_cache", "dense") == "paged"
    if not paged and given(args, "page_size"):
        return "--page-size is for --kv-cache paged"
    if paged and given(args, "batch"):
        return "--batch with --kv-cache paged: the batch is the count of --context lengths"
    return _seed(args)


def _target_name(spelling: str) -> str:
    """The GEMM table's row name of a ``--target`` spelling (``sm_90a`` -> ``sm90``)."""
    from ..kernels import gemm

    return next((row.name for row in gemm.TARGETS.values() if spelling in (row.name, *row.aliases)), spelling)


def _tuned_targets() -> str:
    """The targets whose CLI row has ``--tune``, ``" / "``-joined (``sm80``)."""
    from .gemm_actions import ACTIONS

    return " / ".join(name for name, row in ACTIONS.items() if row.tune is not None)


def _actions_of(target: str):
    from .gemm_actions import actions_of

    return actions_of(target)
