"""The sm90 GEMM's register epilogue values (``out_value``: the fused epilogue at C's element) and the swapped
kernel's store of C^T from registers (``store_transposed``; ``gemm_plan``'s docstring, "Swap AB").

The swapped kernel's accumulator holds C^T in the wgmma D fragment (PTX ISA 9.7.17.5.1.1.1): thread ``t`` of the
warpgroup holds, for each 8-column group ``j``, the rows ``n`` and ``n + 8`` of C^T (``n = 16 (t / 32) + (t % 32) / 4``),
columns ``m + 8 j + e`` (``m = 2 (t % 4)``, ``e`` 0 and 1): in C, two rows (``m + 8 j``, ``+ 1``) of one column ``n``.
Stored as they lie, that is one 2-byte store an element, a warp's store 4 rows of C x 16 bytes; with a run-time M
each behind its own branch (the CUDA compiler recomputed the address and reloaded C's pointer in each: 21-27 SASS
instructions a store against 2-5 in the unswapped and the static swapped kernels; benchmarks/journal/2026-12.md,
stop 48). ``store_transposed`` pairs the lanes ``PAIR_LANES`` apart instead (rows ``n`` and ``n + 1`` of C^T: C's
columns ``n``, ``n + 1``): one ``shfl.xor`` swaps the odd-row lane's ``e = 0`` value for the even-row lane's
``e = 1``, so that each lane holds a column pair of one row of C (the even lane row ``m + 8 j``, the odd lane
``m + 8 j + 1``) and stores it as the unswapped kernel does (``cvt.rn.{bf16,f16}x2.f32`` + ``st.global.b32``, or
``st.global.v2.f32``), predicated inside C (no branch): half the stores, a warp's store 8 rows x 16 bytes. An odd
N (a pair's 4 bytes unaligned) keeps the element stores.
"""

from __future__ import annotations

from types import SimpleNamespace

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ..gemm import epilogue as fused
from ..sm80.gemm_emit_epilogue import TIR_OPS
from . import gemm_shift as shift
from .gemm_plan import WGMMA_M, Sm90Plan

FULL_MASK = 0xFFFFFFFF
"""The ``shfl.sync`` member mask of the whole warp (every lane runs the store)."""
PAIR_LANES = 4
"""The lane distance between rows ``n`` and ``n + 1`` of the wgmma D fragment (row ``(t % 32) / 4``): the
``shfl.xor`` lane mask pairing them (the module docstring)."""


def out_value(p: Sm90Plan, args, v, row, col, group=None, residual=None):
    """The f32 value stored at (``row``, ``col``) of accumulator value ``v``: the plan's fused epilogue
    (``kernels.gemm.epilogue.apply``) with its inputs read there (a grouped GEMM's per-column inputs at
    ``group``'s row, ``Input.at``), the indices clamped into C (a value outside C is computed, never stored,
    and reads no input out of range), the residual ``residual`` where given (its f32 value, read from the
    staging buffer); ``v`` itself without one."""
    if p.fusion.empty:
        return v
    r, c = T.min(row, p.M - 1), T.min(col, p.N - 1)
    at = {i.name: i.at(args[i.name], r, c, group) for i in p.fusion.steps() if residual is None or i.name != "residual"}
    if residual is not None:
        at["residual"] = residual
    return fused.apply(p.fusion, v, at, TANH_OPS if p.config.activation_form == "tanh" else TIR_OPS)


TANH_OPS = SimpleNamespace(**vars(TIR_OPS), tanh=T.tanh)
"""``TIR_OPS`` with ``tanh``: the activations' tanh form (``activation_form="tanh"``; ``kernels.gemm.epilogue``).
TIRx lowers ``T.tanh`` on f32 to CUDA's ``tanhf``, which NVRTC with TIRx's ``--use_fast_math`` compiles to one
``tanh.approx.f32`` (PTX ISA 9.7.3.22; tests/kernels/sm90 check the PTX)."""


@T.macro
def store_transposed(p, acc, args, n, m, first=None):
    # swap_ab: acc[mi * N/2 + j * 4 + h * 2 + e] is C^T[n + 64 mi + 8 h, m + 8 j + e] (``store``'s fragment over the
    # kernel's product C^T), so C[m + 8 j + e, n + 64 mi + 8 h], the fused epilogue read there first (out_value): column
    # pairs of C through a lane exchange (even N), else one element a store (the module docstring); C's rows from
    # ``first`` only (shift_last: the tile's own, gemm_shift.kept)
    if I.constexpr(p.N % 2 == 0):
        store_transposed_pairs(p, acc, args, n, m, first)
    else:
        store_transposed_elements(p, acc, args, n, m, first)


@T.macro
def store_transposed_pairs(p, acc, args, n, m, first=None):
    # the lane of odd fragment row n (n % 2: (t % 32) / 4's parity, the tile's and warp's first rows even) sends its
    # e = 0 value and takes its even partner's e = 1: the even lane stores C[m + 8 j, n .. n + 1], the odd one
    # C[m + 8 j + 1, n - 1 .. n]; every lane runs the shfl, each store predicated inside C
    c = p.config
    C = args["C"]
    odd = n % 2
    v = T.alloc_tensor(ty_args=[T.Tensor((3,), "float32", scope="local", layout="default")])
    word = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    for mi in T.unroll(c.rows // WGMMA_M):
        for j in T.unroll(c.block_n // 8):
            for h in T.unroll(2):
                col = n + mi * WGMMA_M + 8 * h
                e0 = mi * c.block_n // 2 + j * 4 + h * 2
                v[0] = out_value(p, args, acc[e0], m + 8 * j, col)
                v[1] = out_value(p, args, acc[e0 + 1], m + 8 * j + 1, col)
                v[2] = T.cuda.__shfl_xor_sync(T.uint32(FULL_MASK), T.if_then_else(odd == 1, v[0], v[1]), PAIR_LANES, 32)
                lo = T.if_then_else(odd == 1, v[2], v[0])
                hi = T.if_then_else(odd == 1, v[1], v[2])
                ok = T.and_(shift.kept(p, m + 8 * j + odd, first, m + 8 * j + odd < p.M, T.and_), col - odd < p.N)
                if I.constexpr(p.out_dtype == "f32"):
                    T.ptx["st.global.v2.f32"](C.ptr_to([m + 8 * j + odd, col - odd]), lo, hi, pred=ok)
                else:
                    T.ptx[f"cvt.rn.{p.out_dtype}x2.f32"](word[0], hi, lo)
                    T.ptx["st.global.b32"](C.ptr_to([m + 8 * j + odd, col - odd]), word[0], pred=ok)


@T.macro
def store_transposed_elements(p, acc, args, n, m, first=None):
    # odd N: one element a store, each inside C
    c = p.config
    C = args["C"]
    for mi in T.unroll(c.rows // WGMMA_M):
        for j in T.unroll(c.block_n // 8):
            for h in T.unroll(2):
                for e in T.unroll(2):
                    if T.and_(shift.kept(p, m + 8 * j + e, first, m + 8 * j + e < p.M, T.and_), n + mi * WGMMA_M + 8 * h < p.N):
                        C[m + 8 * j + e, n + mi * WGMMA_M + 8 * h] = T.Cast(p.tir_out, out_value(
                            p, args, acc[mi * c.block_n // 2 + j * 4 + h * 2 + e], m + 8 * j + e, n + mi * WGMMA_M + 8 * h))


__all__ = ["FULL_MASK", "PAIR_LANES", "TANH_OPS", "out_value", "store_transposed"]
