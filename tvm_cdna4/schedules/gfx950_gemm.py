"""gfx950 GEMM from the CDNA4 patterns and plain TIRx: C = A @ B, f32 accumulation.

Structure (v0, the correct baseline the emulator validates):

- one workgroup = 4 waves (256 threads) computes a ``bm x bn`` tile; wave ``w`` owns the
  ``(w // 2, w % 2)`` quarter, built from ``16 x 16 x 32`` MFMAs;
- per ``bk = 32`` step the workgroup stages A (``bm x 32``, row-major, K contiguous) and B
  (``32 x bn``, row-major, N contiguous) in LDS, zero-filling outside the matrices;
- A fragments are plain 16-byte LDS reads (K is contiguous); B fragments come from LDS through the
  ``ds_read_tr16_b64`` operand form (K is not contiguous: the transposing load does the work);
- one MFMA pattern application per step accumulates all ``(m, n)`` repeats into D;
- the epilogue stores D through the accumulator owner map, masked at the matrix edges.
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import tirx as T

from ..isa import CATALOG
from ..patterns import register
from ..patterns.layouts import mfma_fragment

DTYPES = {"f16": ("float16", "f32_16x16x32_f16", "ds_read_tr16_b64_v4f16")}


@attrs.frozen
class Gfx950GemmConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32

    def __attrs_post_init__(self):
        if self.block_m % 32 or self.block_n % 32 or self.block_k != 32:
            raise ValueError(f"gfx950 GEMM v0 needs block_m, block_n multiples of 32 and block_k 32; got {self}")


def gfx950_gemm(M: int, N: int, K: int, dtype: str = "f16", config: Gfx950GemmConfig | None = None):
    """PrimFunc ``(A: (M, K), B: (K, N), C: (M, N) float32)`` for gfx950 (row-major A, B, C)."""
    register()
    if dtype not in DTYPES:
        raise ValueError(f"gfx950 GEMM: dtype {dtype!r} is not supported yet; expected one of {sorted(DTYPES)}")
    cfg = config or Gfx950GemmConfig()
    elem, mfma_name, tr_name = DTYPES[dtype]
    op = CATALOG[mfma_name]
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    WM, WN = BM // 2, BN // 2  # per-wave tile
    RM, RN = WM // 16, WN // 16  # MFMA repeats per wave
    la, na = mfma_fragment(op, "A", (RM, 1))
    lb, nb = mfma_fragment(op, "B", (RN, 1))
    lb1, _ = mfma_fragment(op, "B")
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    grid_m, grid_n = -(-M // BM), -(-N // BN)
    a_per_thread = BM * BK // 256
    b_per_thread = BK * BN // 256
    a_row_threads = BK // a_per_thread
    b_row_threads = BN // b_per_thread
    k_steps = -(-K // BK)

    @T.function
    def gemm(A: T.Tensor((M, K), elem), B: T.Tensor((K, N), elem), C: T.Tensor((M, N), "float32")):
        with T.device_entry():
            bid = T.launch_thread("blockIdx.x", grid_m * grid_n)
            tx = T.launch_thread("threadIdx.x", 256)
            SA = T.alloc_tensor(ty_args=[T.Tensor((BM, BK), elem, scope="shared", align=16, layout=T.TileLayout(T.S[(BM, BK) : (BK, 1)]))])
            SB = T.alloc_tensor(ty_args=[T.Tensor((BK, BN), elem, scope="shared", align=16, layout=T.TileLayout(T.S[(BK, BN) : (BN, 1)]))])
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((RM, 1, 16, 32), elem, scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((RN, 1, 16, 32), elem, scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, 16, 16), "float32", scope="local", layout=ld)])
            m0 = bid // grid_n * BM
            n0 = bid % grid_n * BN
            wm = tx // 64 // 2 * WM
            wn = tx // 64 % 2 * WN
            lane = tx % 64
            for r in T.unroll(nd):
                rd[r] = T.float32(0)
            for ko in T.serial(k_steps):
                # stage A (bm x 32) and B (32 x bn) in LDS, zero outside the matrices
                for e in T.unroll(a_per_thread):
                    SA[tx // a_row_threads, tx % a_row_threads * a_per_thread + e] = T.if_then_else(
                        m0 + tx // a_row_threads < M and ko * BK + tx % a_row_threads * a_per_thread + e < K,
                        A[T.min(m0 + tx // a_row_threads, M - 1), T.min(ko * BK + tx % a_row_threads * a_per_thread + e, K - 1)],
                        T.cast(0, elem))
                for e in T.unroll(b_per_thread):
                    SB[tx // b_row_threads, tx % b_row_threads * b_per_thread + e] = T.if_then_else(
                        ko * BK + tx // b_row_threads < K and n0 + tx % b_row_threads * b_per_thread + e < N,
                        B[T.min(ko * BK + tx // b_row_threads, K - 1), T.min(n0 + tx % b_row_threads * b_per_thread + e, N - 1)],
                        T.cast(0, elem))
                T.rocm.workgroup_barrier()
                # A fragments: lane L reads row L % 16, K positions 8 * (L // 16) .. + 7 (contiguous)
                for mi in T.unroll(RM):
                    ra[T.ramp(mi * 8, 1, 8)] = SA[wm + mi * 16 + lane % 16, T.ramp(lane // 16 * 8, 1, 8)]
                # B fragments: transposing LDS loads (the operand form checks K coverage and owners)
                for ni in T.unroll(RN):
                    Bv = T.decl_tensor(rb.ptr_to([ni * 8]), ty_args=[T.Tensor((16, 32), elem, scope="local", layout=lb1)])
                    T.rocm.tile.apply(T.amdgcn[tr_name], Bv, SB[0:BK, wn + ni * 16 : wn + ni * 16 + 16],
                                      scope="wave", mfma=mfma_name, operand="B")
                T.rocm.tile.apply(T.amdgcn[mfma_name], Df, Af, Bf, Df, scope="wave")
                T.rocm.workgroup_barrier()
            # epilogue: accumulator element (row 4 * (L // 16) + r, col L % 16) of each 16x16 tile
            for mi in T.unroll(RM):
                for ni in T.unroll(RN):
                    for r in T.unroll(4):
                        if m0 + wm + mi * 16 + lane // 16 * 4 + r < M and n0 + wn + ni * 16 + lane % 16 < N:
                            C[m0 + wm + mi * 16 + lane // 16 * 4 + r, n0 + wn + ni * 16 + lane % 16] = rd[(mi * RN + ni) * 4 + r]

    return gemm
