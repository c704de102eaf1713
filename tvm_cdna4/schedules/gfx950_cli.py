"""``python -m tvm_cdna4 gemm --target gfx950 ...``: build, emit, and validate through the emulator."""

from __future__ import annotations

import sys
import time

import numpy as np

from .gfx950_gemm import DTYPES, gfx950_gemm

NP_INPUT = {"f16": np.float16}


def run(args) -> int:
    if args.dtype not in DTYPES:
        print(f"gemm --target gfx950: dtype {args.dtype} is not available yet; available: {sorted(DTYPES)}", file=sys.stderr)
        return 2
    if getattr(args, "layout", "nn") not in ("nn", None):
        print(f"gemm --target gfx950: layout {args.layout} is not available yet; available: nn", file=sys.stderr)
        return 2
    func = gfx950_gemm(args.M, args.N, args.K, args.dtype)
    if args.emit:
        from .. import build

        result = build(func)
        print(result.asm if args.emit == "asm" else result.llvm_ir)
    if not args.validate:
        if not args.emit:
            from .. import build

            info = build(func).kernel()
            print(f"gfx950 {args.dtype} {args.M}x{args.N}x{args.K}: VGPRs {info.vgprs}, AGPRs {info.agprs}, "
                  f"LDS {info.lds_bytes} B, scratch {info.scratch_bytes} B, waves/SIMD {info.waves_per_simd()}")
        return 0
    from ..emulator import EmulationError, compare, emulate

    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((args.M, args.K)).astype(NP_INPUT[args.dtype])
    b = rng.standard_normal((args.K, args.N)).astype(NP_INPUT[args.dtype])
    c = np.full((args.M, args.N), np.nan, np.float32)  # poisoned: every element must be written
    start = time.perf_counter()
    try:
        emulate(func, a, b, c)
    except EmulationError as err:
        print(f"emulation found a kernel bug:\n{err}")
        print("FAIL")
        return 1
    seconds = time.perf_counter() - start
    want = a.astype(np.float64) @ b.astype(np.float64)
    rel = float(np.linalg.norm(np.nan_to_num(c, nan=1e30) - want) / max(np.linalg.norm(want), 1e-30))
    print(f"emulated gfx950 {args.dtype} GEMM {args.M}x{args.N}x{args.K} in {seconds:.2f} s; "
          f"relative error {rel:.3e} (||C - A@B|| / ||A@B||, float64 reference)")
    try:
        print(compare("C", c, want, rtol=1e-3, atol=1e-3 * np.sqrt(args.K)))
    except AssertionError as err:
        print(err)
        print("FAIL")
        return 1
    print("PASS")
    return 0
