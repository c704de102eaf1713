"""Triton's tutorial matmul and a block-scaled (MX) variant, the peer of benchmarks/gfx950_vs_triton.py.

``matmul_kernel`` follows ``matmul_kernel`` of Triton's ``python/tutorials/03-matrix-multiplication.py``
(grouped program ordering, K loop with masked K tail, ``tl.dot`` into an accumulator, masked
store). Two changes so that it computes our problems: the accumulator type is a constexpr
(``int32`` for i8) and C is stored in C's element type (f32 / i32 like our default output)
instead of fp16; the leaky-ReLU epilogue is left out. ``mx_matmul_kernel`` is the same loop on
``tl.dot_scaled`` with one E8M0 scale per 32 K per row of A and column of B (OCP MX), operands
packed along K (two fp4 per byte); it has no K mask (K a multiple of BLOCK_K).

Triton is distributed under the MIT licence; its notice, for the adapted tutorial code:

    Copyright 2018-2020 Philippe Tillet
    Copyright 2020-2022 OpenAI

    Permission is hereby granted, free of charge, to any person obtaining a copy of this software
    and associated documentation files (the "Software"), to deal in the Software without
    restriction, including without limitation the rights to use, copy, modify, merge, publish,
    distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
    Software is furnished to do so, subject to the following conditions:

    The above copyright notice and this permission notice shall be included in all copies or
    substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING
    BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
    NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
    DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
    OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.

The rest of this repository is Apache-2.0. This module imports Triton; import it only where
Triton is installed (the ``bench`` extra).
"""

import triton
import triton.language as tl


@triton.jit
def _tile_ids(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """The tutorial's grouped ordering: GROUP_SIZE_M rows of tiles share the B tiles they read."""
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _store_c(c_ptr, acc, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACC_TYPE: tl.constexpr):
    """C (M x N) = A (M x K) @ B (K x N); B's strides choose its layout (stride_bk 1: K-contiguous)."""
    pid_m, pid_n = _tile_ids(M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=ACC_TYPE)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    _store_c(c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_SIZE_M, BLOCK_SIZE_N)


@triton.jit
def mx_matmul_kernel(a_ptr, b_ptr, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                     stride_bn, stride_asm, stride_bsn, stride_cm, stride_cn, BLOCK_SIZE_M: tl.constexpr,
                     BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                     FORMAT: tl.constexpr, PER_BYTE: tl.constexpr):
    """C = (A * 2^SA) @ (B * 2^SB) for MX operands of ``FORMAT`` (``e4m3``, ``e5m2``, ``e2m1``, ...),
    PER_BYTE elements per byte along K; scales (M x K/32) and (N x K/32), K-contiguous."""
    pid_m, pid_n = _tile_ids(M, N, BLOCK_SIZE_M, BLOCK_SIZE_N, GROUP_SIZE_M)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K // PER_BYTE)
    offs_s = tl.arange(0, BLOCK_SIZE_K // 32)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    a_scale_ptrs = a_scale_ptr + offs_am[:, None] * stride_asm + offs_s[None, :]
    b_scale_ptrs = b_scale_ptr + offs_bn[:, None] * stride_bsn + offs_s[None, :]
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for _ in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        accumulator = tl.dot_scaled(tl.load(a_ptrs), tl.load(a_scale_ptrs), FORMAT, tl.load(b_ptrs),
                                    tl.load(b_scale_ptrs), FORMAT, accumulator)
        a_ptrs += (BLOCK_SIZE_K // PER_BYTE) * stride_ak
        b_ptrs += (BLOCK_SIZE_K // PER_BYTE) * stride_bk
        a_scale_ptrs += BLOCK_SIZE_K // 32
        b_scale_ptrs += BLOCK_SIZE_K // 32
    _store_c(c_ptr, accumulator, pid_m, pid_n, M, N, stride_cm, stride_cn, BLOCK_SIZE_M, BLOCK_SIZE_N)
