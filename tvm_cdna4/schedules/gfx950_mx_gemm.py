"""gfx950 MX block-scaled GEMM through the scaled MFMA: ``C = (A * 2^(sa-127)) @ (B * 2^(sb-127))``.

Formats (OCP MX): ``mxfp8`` (E4M3), ``mxbf8`` (E5M2), ``mxfp6`` (E2M3), ``mxbf6`` (E3M2),
``mxfp4`` (E2M1), one E8M0 scale per 32 consecutive K elements of a row of A / column of B.

Storage (K contiguous for both operands, i.e. layout ``nt``): A is ``(M, K*bits/32)`` uint32
words holding each row's K elements packed little-endian (element ``k`` at bits
``[k*bits, (k+1)*bits)`` of the row); B is ``(N, K*bits/32)`` the same way per column of B;
scales are ``(M, K/32)`` and ``(N, K/32)`` uint8 E8M0 codes. K must be a multiple of 32.

Structure: 256 threads, 2 x 2 waves, ``16x16x128`` scaled MFMAs; per K step the workgroup stages
the packed A and B words in LDS; each lane reads its 32 K positions (4/6/8 words) with one wide
LDS read and its scale byte from global memory; edges are zero-filled, the epilogue masked.
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import tirx as T

from ..isa import CATALOG
from ..isa.mfma_table import SCALE_FORMAT_CODES, SCALE_VECTOR_WORDS
from ..patterns import register
from ..patterns.layouts import mfma_fragment
from .gfx950_gemm import lane_maps

MX_FORMATS = {"mxfp8": "fp8", "mxbf8": "bf8", "mxfp6": "fp6", "mxbf6": "bf6", "mxfp4": "fp4"}
_CODE = {fmt: code for code, fmt in SCALE_FORMAT_CODES.items()}
_BITS = {"fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4}


@attrs.frozen
class MxGemmConfig:
    block_m: int = 128
    block_n: int = 128
    block_k: int = 128


def words_per_row(K: int, fmt: str) -> int:
    return K * _BITS[fmt] // 32


def gfx950_mx_gemm(M: int, N: int, K: int, dtype: str = "mxfp8", layout: str = "nt", config: MxGemmConfig | None = None):
    """PrimFunc ``(A words, B words, SA, SB, C float32)``; see the module docstring."""
    register()
    if dtype not in MX_FORMATS:
        raise ValueError(f"MX GEMM: dtype {dtype!r}; expected one of {sorted(MX_FORMATS)}")
    if layout != "nt":
        raise ValueError(f"MX GEMM: layout {layout!r} is not supported: sub-byte elements are packed along K, "
                         "so A and B must both be K-contiguous (layout 'nt')")
    if K % 32 or min(M, N, K) < 1:
        raise ValueError(f"MX GEMM: K must be a positive multiple of 32 (one E8M0 scale per 32 K); got M={M}, N={N}, K={K}")
    fmt = MX_FORMATS[dtype]
    cfg = config or MxGemmConfig()
    op = CATALOG["scale_f32_16x16x128_f8f6f4"]
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    WM, WN = BM // 2, BN // 2
    RM, RN = WM // op.m, WN // op.n
    W = SCALE_VECTOR_WORDS[fmt]  # words per lane per MFMA (32 K positions)
    code = _CODE[fmt]
    kw = words_per_row(K, fmt)  # words per matrix row
    bkw = BK * _BITS[fmt] // 32  # words per tile row per K step
    la, na = mfma_fragment(op, "A", (RM, 1), fmt, fmt)
    lb, nb = mfma_fragment(op, "B", (RN, 1), fmt, fmt)
    ls, _ = mfma_fragment(op, "scale_a", (RM, 1))
    lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    grid_m, grid_n = -(-M // BM), -(-N // BN)
    k_steps = -(-K // BK)
    kb_total = K // 32
    a_words = BM * bkw
    b_words = BN * bkw
    a_per, b_per = -(-a_words // 256), -(-b_words // 256)

    a_row, a_k, b_col, _, acc_row, acc_col = lane_maps(op)

    @T.function
    def mx_gemm(A: T.Tensor((M, kw), "uint32"), B: T.Tensor((N, kw), "uint32"), SA: T.Tensor((M, kb_total), "uint8"),
                SB: T.Tensor((N, kb_total), "uint8"), C: T.Tensor((M, N), "float32")):
        with T.device_entry():
            bid = T.launch_thread("blockIdx.x", grid_m * grid_n)
            tx = T.launch_thread("threadIdx.x", 256)
            LA = T.alloc_tensor(ty_args=[T.Tensor((BM, bkw), "uint32", scope="shared", align=16,
                                                  layout=T.TileLayout(T.S[(BM, bkw) : (bkw, 1)]))])
            LB = T.alloc_tensor(ty_args=[T.Tensor((BN, bkw), "uint32", scope="shared", align=16,
                                                  layout=T.TileLayout(T.S[(BN, bkw) : (bkw, 1)]))])
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint32", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local")])
            rs = T.alloc_tensor(ty_args=[T.Tensor((RM + RN,), "uint32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, 4, W), "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((RN, 1, op.n, 4, W), "uint32", scope="local", layout=lb)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, 4), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([RM]), ty_args=[T.Tensor((RN, 1, op.n, 4), "uint32", scope="local", layout=lsb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), "float32", scope="local", layout=ld)])
            m0 = bid // grid_n * BM
            n0 = bid % grid_n * BN
            wm = tx // 128 % 2 * WM
            wn = tx // 64 % 2 * WN
            lane = tx % 64
            for r in T.unroll(nd):
                rd[r] = T.float32(0)
            for ko in T.serial(k_steps):
                for q in T.unroll(a_per):
                    if q * 256 + tx < a_words:
                        LA[(q * 256 + tx) // bkw, (q * 256 + tx) % bkw] = T.if_then_else(
                            T.And(m0 + (q * 256 + tx) // bkw < M, ko * bkw + (q * 256 + tx) % bkw < kw),
                            A[T.min(m0 + (q * 256 + tx) // bkw, M - 1), T.min(ko * bkw + (q * 256 + tx) % bkw, kw - 1)],
                            T.uint32(0))
                for q in T.unroll(b_per):
                    if q * 256 + tx < b_words:
                        LB[(q * 256 + tx) // bkw, (q * 256 + tx) % bkw] = T.if_then_else(
                            T.And(n0 + (q * 256 + tx) // bkw < N, ko * bkw + (q * 256 + tx) % bkw < kw),
                            B[T.min(n0 + (q * 256 + tx) // bkw, N - 1), T.min(ko * bkw + (q * 256 + tx) % bkw, kw - 1)],
                            T.uint32(0))
                T.rocm.workgroup_barrier()
                for kk in T.serial(BK // op.k):
                    for mi in T.unroll(RM):
                        ra[T.ramp(mi * W, 1, W)] = LA[wm + mi * op.m + a_row(lane), T.ramp((kk * op.k + a_k(lane)) * W // 32, 1, W)]
                        rs[mi] = T.cast(T.if_then_else(
                            T.And(m0 + wm + mi * op.m + a_row(lane) < M, ko * (BK // 32) + (kk * op.k + a_k(lane)) // 32 < kb_total),
                            SA[T.min(m0 + wm + mi * op.m + a_row(lane), M - 1),
                               T.min(ko * (BK // 32) + (kk * op.k + a_k(lane)) // 32, kb_total - 1)], T.uint8(127)), "uint32")
                    for ni in T.unroll(RN):
                        rb[T.ramp(ni * W, 1, W)] = LB[wn + ni * op.n + b_col(lane), T.ramp((kk * op.k + a_k(lane)) * W // 32, 1, W)]
                        rs[RM + ni] = T.cast(T.if_then_else(
                            T.And(n0 + wn + ni * op.n + b_col(lane) < N, ko * (BK // 32) + (kk * op.k + a_k(lane)) // 32 < kb_total),
                            SB[T.min(n0 + wn + ni * op.n + b_col(lane), N - 1),
                               T.min(ko * (BK // 32) + (kk * op.k + a_k(lane)) // 32, kb_total - 1)], T.uint8(127)), "uint32")
                    T.rocm.tile.apply(T.amdgcn["scale_f32_16x16x128_f8f6f4"], Df, Af, Bf, Df, Sa, Sb, scope="wave",
                                      cbsz=code, blgp=code, op_sel_a=0, op_sel_b=0)
                T.rocm.workgroup_barrier()
            for mi in T.unroll(RM):
                for ni in T.unroll(RN):
                    for r in T.unroll(op.acc_elems):
                        if T.And(m0 + wm + mi * op.m + acc_row(lane, r) < M, n0 + wn + ni * op.n + acc_col(lane, r) < N):
                            C[m0 + wm + mi * op.m + acc_row(lane, r), n0 + wn + ni * op.n + acc_col(lane, r)] = rd[(mi * RN + ni) * op.acc_elems + r]

    return mx_gemm


def pack_rows(values, fmt: str):
    """(rows, K) values in the format's dtype -> (rows, K*bits/32) uint32 words (the storage above)."""
    from ..isa.formats import to_words

    return to_words(fmt, values)
