"""Where an eager call's host time goes, on the GPU: cProfile of ``--calls`` eager calls of each small op of
``benchmarks/dispatch.py`` (after its warm-up), the top functions by own time. Diagnostic: the numbers of
record are ``dispatch.py``'s.

    python3 benchmarks/dispatch_profile.py [--calls 300] [--rows attention,paged]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rows", default="attention,paged", help="substrings of dispatch.gpu_rows' names")
    args = ap.parse_args(argv)
    import torch

    import dispatch

    for name, ours, _ in dispatch.gpu_rows():
        if not any(s in name for s in args.rows.split(",")):
            continue
        for _ in range(20):
            ours()
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            ours()
        prof.disable()
        torch.cuda.synchronize()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(18)
        print(f"=== {name}: {args.calls} calls", out.getvalue().split("Ordered by")[1][:3000], sep="\n")


if __name__ == "__main__":
    main()
