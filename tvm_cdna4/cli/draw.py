"""``python -m tvm_cdna4 draw``: lane-map figures (``tvm_cdna4.figures``; needs matplotlib).

    python -m tvm_cdna4 draw mfma_f32_16x16x32_f16                 # mfma_f32_16x16x32_f16.svg
    python -m tvm_cdna4 draw ds_read_tr16_b64_v4f16 -o tr16.png
    python -m tvm_cdna4 draw --all -o docs/figures                  # every opcode's figure and the seed figures

Exit codes: 0 written, 2 unknown opcode / no matplotlib / not .svg or .png.
"""

from __future__ import annotations

import argparse
import sys

from .args import FLAGS_OFF, DefaultsFormatter


def add_draw_parser(subparsers) -> argparse.ArgumentParser:
    """Register the ``draw`` subcommand on an argparse subparsers object."""
    p = subparsers.add_parser("draw", help="draw an opcode's lane maps (needs matplotlib: the 'docs' extra)",
                              description=f"{__doc__}{FLAGS_OFF}\n", formatter_class=DefaultsFormatter)
    p.add_argument("name", nargs="?", help="catalog name (MFMA: A, B and accumulator owners; ds_read_tr: provider "
                                           "map and K split)")
    p.add_argument("-o", "--output", help="FILE.svg or FILE.png (default: NAME.svg; with --all: the current directory); with --all a directory")
    p.add_argument("--all", action="store_true", help="every opcode and the seed figures, as SVG")
    p.set_defaults(func=run_draw)
    return p


def run_draw(args: argparse.Namespace) -> int:
    """Write the figure(s), printing each path; a usage error is one ``error:`` line (exit status 2)."""
    from pathlib import Path

    from .. import figures

    if args.all == bool(args.name):
        print("error: draw takes one opcode NAME or --all", file=sys.stderr)
        return 2
    try:
        if args.all:
            for name in figures.all_figures():
                print(figures.render(name, Path(args.output or ".") / f"{name}.svg"))
        else:
            print(figures.render(args.name, args.output or f"{args.name}.svg"))
    except (KeyError, RuntimeError, ValueError) as err:  # unknown opcode, no matplotlib, bad suffix
        print(f"error: {err.args[0]}", file=sys.stderr)
        return 2
    return 0
