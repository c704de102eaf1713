"""Shared by the gfx950 GEMM tests (test_gfx950_gemm.py, test_gfx950_gemm_dma.py,
test_gfx950_hardware.py): random operands per dtype and one emulated GEMM checked against numpy."""

import ml_dtypes
import numpy as np

from tvm_cdna4.emulator import compare, emulate
from tvm_cdna4.kernels.gfx950.gemm import DTYPES, gfx950_gemm

OUT_NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i32": np.int32, "f64": np.float64}
TOL = {"f32": 1e-5, "f16": 1e-3, "bf16": 8e-3, "i32": 0.0, "f64": 1e-12}


def gemm_inputs(rng, dtype, M, N, K):
    """(a [M, K], b [K, N]) in the dtype's numpy element types (i8: the full int8 range)."""
    ta, tb = DTYPES[dtype].numpy if isinstance(DTYPES[dtype].numpy, tuple) else (DTYPES[dtype].numpy,) * 2
    if dtype == "i8":
        return rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(-128, 128, (K, N)).astype(np.int8)
    return rng.normal(size=(M, K)).astype(ta), rng.normal(size=(K, N)).astype(tb)


def run_gemm(rng, dtype, layout, shape, out=None, config=None, batch=0):
    """Emulate ``gfx950_gemm(M, N, K, dtype, layout, out, config, batch)`` on random operands and
    compare C with the float64 product (tolerance ``TOL[out]``, scaled by sqrt(K))."""
    M, N, K = shape
    out = out or DTYPES[dtype].outs[0]
    pairs = [gemm_inputs(rng, dtype, M, N, K) for _ in range(max(batch, 1))]
    a = np.stack([p[0] for p in pairs]) if batch else pairs[0][0]
    b = np.stack([p[1] for p in pairs]) if batch else pairs[0][1]
    A = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if layout[0] == "t" else a
    B = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if layout[1] == "t" else b
    C = np.zeros(((batch,) if batch else ()) + (M, N), OUT_NP[out])
    emulate(gfx950_gemm(M, N, K, dtype, layout, out, config, batch), A, B, C)
    want = a.astype(np.float64) @ b.astype(np.float64)
    compare("C", C, want, rtol=TOL[out], atol=TOL[out] * np.sqrt(K))
