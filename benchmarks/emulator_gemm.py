"""How long the CPU wavefront emulator takes to run the gfx950 f16 GEMM, and how the cost grows.

Run: python benchmarks/emulator_gemm.py [--sizes 256,256,256 ...] [--repeat 3]
Prints one line per size: the best of ``--repeat`` wall times for ``emulate`` (kernel lowering
included; the first run per size also warms caches), and the check against numpy.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from tvm_cdna4.emulator import compare, emulate
from tvm_cdna4.kernels.gfx950.gemm import default_config, gfx950_gemm

DEFAULT = ["128,128,128", "256,256,256", "512,256,256", "256,512,256", "256,256,512", "512,512,512"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", default=DEFAULT, help="M,N,K triples")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"numpy {np.__version__}")
    print(f"{'M':>5} {'N':>5} {'K':>5} {'seconds':>8} {'workgroups':>10} {'MFMAs':>8}  check")
    rng = np.random.default_rng(0)
    for size in args.sizes:
        M, N, K = (int(x) for x in size.split(","))
        func = gfx950_gemm(M, N, K)
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        best = float("inf")
        for _ in range(args.repeat):
            c = np.full((M, N), np.nan, np.float32)
            start = time.perf_counter()
            emulate(func, a, b, c)
            best = min(best, time.perf_counter() - start)
        check = compare("C", c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
        cfg = default_config("f16")
        groups = -(-M // cfg.block_m) * -(-N // cfg.block_n)
        mfmas = -(-M // 16) * -(-N // 16) * -(-K // 32)
        print(f"{M:>5} {N:>5} {K:>5} {best:>8.2f} {groups:>10} {mfmas:>8}  {check}", flush=True)


if __name__ == "__main__":
    main()
