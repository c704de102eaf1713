"""Emission of the sm80 attention forward: a :class:`~tvm_cdna4.schedules.attention_sm80_plan.Sm80AttentionPlan`
to a TIRx PrimFunc ``main(Q, K, V, O, LSE)``.

Every decision is in the plan (its module docstring: work split, fragments, shared memory, masking);
the macros spell it with plain ``T.ptx`` instructions on registers, as the decode GEMM does
(``cuda_decode_emit``): ``cp.async`` 16-byte chunks into the swizzled tiles, ``ldmatrix.x4`` (Q, K)
and ``ldmatrix.x4.trans`` (V) into ``uint32`` fragment words, ``mma.sync.m16n8k16`` on them,
``cvt.rn.*x2.f32`` packing P and O, ``T.exp2`` (NVRTC with TIRx's fast math: ``ex2.approx.ftz.f32``,
``cuda_emit.TIR_OPS``) and ``__shfl_xor_sync`` for the quad reductions. The signature is
``cuda_emit.signature_source``'s.

Register arrays of a thread (``Regs``): ``qf`` Q fragments (``4 k_steps``), ``o`` the O accumulators
(``4 d_tiles``: n-tile ``n`` element ``c`` at ``4 n + c``, c = 0, 1 row g, 2, 3 row g + 8), ``s`` the
scores (``4 n_tiles``, same order), ``pf`` P packed (``4`` per 16-key step: the A fragment), ``kf`` one
ldmatrix's four words, ``row`` the running state (max of rows g, g + 8 at 0, 1; sums at 2, 3; the
tile's row max / scale at 4, 5).
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ..tirx_private import transpile_once
from .attention_problem import kv_tiles_for
from .attention_sm80_plan import WARP_ROWS, Sm80AttentionPlan, swizzle
from .cuda_emit import TIR_OPS, signature_source

FULL = 0xFFFFFFFF


@attrs.frozen
class Regs:
    """A thread's kernel-wide values (module docstring)."""

    SMH: object
    qf: object
    o: object
    s: object
    pf: object
    kf: object
    row: object
    b: object
    """Batch index."""
    h: object
    """Query head."""
    hk: object
    """Kv head (GQA)."""
    q0: object
    """First query row of the CTA."""


def lane_xor(lane, hi_bit: int):
    """The swizzle term of the lane's ldmatrix row: its row within the 8-row matrix (``lane % 8``, the
    stored row's ``% 8``) XOR the chunk half it reads (``(lane >> hi_bit) & 1``)."""
    return (lane % 8) ^ ((lane >> hi_bit) & 1)


def tile_offset(p: Sm80AttentionPlan, row, chunk_even, x):
    """Element offset inside a ``rows x D`` tile of the chunk ``chunk_even + lane part`` of ``row``:
    ``(chunk_even ^ x) * 8`` (``chunk_even`` even, ``x`` the lane's ``lane_xor``: the swizzle of the lane's
    chunk, ``swizzle``, since the lane's row % 8 is ``lane % 8``)."""
    return row * p.problem.head_dim + (chunk_even ^ x) * 8


# ---- global -> shared ----------------------------------------------------------------------------


@T.macro
def copy_tile(p, G, SMH, base, b, head, r0, rows, extent):
    # rows r0 .. r0+rows-1 of G[b, head] into the swizzled tile at `base`; rows past `extent` zero-filled
    tid = T.cuda.thread_idx("x")
    chunk = tid % p.chunks
    for i in T.unroll(p.copy_reps(rows)):
        r = tid // p.chunks + i * (p.threads // p.chunks)
        T.ptx[p.copy_instr](
            SMH.ptr_to([base + r * p.problem.head_dim + swizzle(r, chunk) * 8]),
            G.ptr_to([b, head, T.min(r0 + r, extent - 1), chunk * 8]), 16,
            T.if_then_else(r0 + r < extent, T.uint32(16), T.uint32(0)))


@T.macro
def copy_kv(p, args, rg, j, stage):
    copy_tile(p, args["K"], rg.SMH, p.stage_offset(stage, 0), rg.b, rg.hk, j * p.config.block_kv, p.config.block_kv,
              p.problem.seq_kv)
    copy_tile(p, args["V"], rg.SMH, p.stage_offset(stage, 1), rg.b, rg.hk, j * p.config.block_kv, p.config.block_kv,
              p.problem.seq_kv)


# ---- S = Q K^T, the softmax, O += P V --------------------------------------------------------------


@T.macro
def load_q(p, rg):
    # the warp's 16 rows of Q into A fragments (ldmatrix.x4: matrices rows 0-7 / 8-15 x chunks 2kk / 2kk+1)
    lane = T.cuda.lane_id()
    row = T.cuda.warp_id() * WARP_ROWS + lane % 8 + 8 * ((lane >> 3) & 1)
    for kk in T.unroll(p.k_steps):
        T.ptx[p.ldmatrix](rg.qf[4 * kk], rg.qf[4 * kk + 1], rg.qf[4 * kk + 2], rg.qf[4 * kk + 3],
                          rg.SMH.ptr_to([tile_offset(p, row, 2 * kk, lane_xor(lane, 4))]))


@T.macro
def scores(p, rg, kbase):
    # S = Q K^T: per k-step, one ldmatrix.x4 of K per key pair of n-tiles (keys 16 np + 0-7 / 8-15 x
    # chunks 2kk / 2kk+1: b0, b1 of n-tile 2np, then of 2np+1)
    lane = T.cuda.lane_id()
    key = lane % 8 + 8 * (lane >> 4)
    for i in T.unroll(4 * p.n_tiles):
        rg.s[i] = T.float32(0)
    for kk in T.unroll(p.k_steps):
        for np_ in T.unroll(p.n_tiles // 2):
            T.ptx[p.ldmatrix](rg.kf[0], rg.kf[1], rg.kf[2], rg.kf[3],
                              rg.SMH.ptr_to([kbase + tile_offset(p, key + 16 * np_, 2 * kk, lane_xor(lane, 3))]))
            for half in T.unroll(2):
                n = 2 * np_ + half
                T.ptx[p.mma_instr](
                    rg.s[4 * n], rg.s[4 * n + 1], rg.s[4 * n + 2], rg.s[4 * n + 3],
                    rg.qf[4 * kk], rg.qf[4 * kk + 1], rg.qf[4 * kk + 2], rg.qf[4 * kk + 3],
                    rg.kf[2 * half], rg.kf[2 * half + 1],
                    rg.s[4 * n], rg.s[4 * n + 1], rg.s[4 * n + 2], rg.s[4 * n + 3])


@T.macro
def mask(p, rg, j):
    # -inf for keys past the sequence and, causal, above the row's diagonal
    lane = T.cuda.lane_id()
    row = rg.q0 + T.cuda.warp_id() * WARP_ROWS + lane // 4
    for n in T.unroll(p.n_tiles):
        for c in T.unroll(4):
            key = j * p.config.block_kv + 8 * n + 2 * (lane % 4) + c % 2
            if I.constexpr(p.problem.causal):
                rg.s[4 * n + c] = T.if_then_else(T.or_(key >= p.problem.seq_kv, key > row + 8 * (c // 2)),
                                                  T.float32(float("-inf")), rg.s[4 * n + c])
            else:
                rg.s[4 * n + c] = T.if_then_else(key >= p.problem.seq_kv, T.float32(float("-inf")), rg.s[4 * n + c])


@T.macro
def softmax(p, rg):
    # m' = max(m, rowmax s); alpha = 2^((m - m') c); p = 2^(s c - m' c); l = alpha l + sum p; O *= alpha
    c = p.problem.scale_log2
    for h in T.unroll(2):
        rg.row[4 + h] = rg.row[h]
        for n in T.unroll(p.n_tiles):
            rg.row[4 + h] = T.max(rg.row[4 + h], T.max(rg.s[4 * n + 2 * h], rg.s[4 * n + 2 * h + 1]))
        for sh in T.unroll(2):  # the quad: shfl.xor 1, then 2
            rg.row[4 + h] = T.max(rg.row[4 + h], T.cuda.__shfl_xor_sync(T.uint32(FULL), rg.row[4 + h], 1 << sh, 32))
        alpha = TIR_OPS.exp2(rg.row[h] * T.float32(c) - rg.row[4 + h] * T.float32(c))
        rg.row[h] = rg.row[4 + h]
        rg.row[4 + h] = rg.row[h] * T.float32(c)  # m' c, the exponent's offset
        rg.row[2 + h] = rg.row[2 + h] * alpha
        for dn in T.unroll(p.d_tiles):
            for e in T.unroll(2):
                rg.o[4 * dn + 2 * h + e] = rg.o[4 * dn + 2 * h + e] * alpha
        for n in T.unroll(p.n_tiles):
            for e in T.unroll(2):
                rg.s[4 * n + 2 * h + e] = TIR_OPS.exp2(rg.s[4 * n + 2 * h + e] * T.float32(c) - rg.row[4 + h])
                rg.row[2 + h] = rg.row[2 + h] + rg.s[4 * n + 2 * h + e]


@T.macro
def pv(p, rg, vbase):
    # P packed into A fragments (n-tiles 2kk, 2kk+1 = k-step kk), V by ldmatrix.x4.trans (keys 16 kk +
    # 0-7 / 8-15 x chunks 2 dn / 2 dn + 1: b0, b1 of d n-tile 2 dn, then of 2 dn + 1)
    lane = T.cuda.lane_id()
    key = lane % 8 + 8 * ((lane >> 3) & 1)
    for kk in T.unroll(p.n_tiles // 2):
        for q in T.unroll(4):
            # a0: tile 2kk row g, a1: row g+8, a2: tile 2kk+1 row g, a3: row g+8 (hi = odd key)
            T.ptx[p.pack_instr](rg.pf[q], rg.s[4 * (2 * kk + q // 2) + 2 * (q % 2) + 1],
                                rg.s[4 * (2 * kk + q // 2) + 2 * (q % 2)])
        for dn in T.unroll(p.d_tiles // 2):
            T.ptx[p.ldmatrix_trans](rg.kf[0], rg.kf[1], rg.kf[2], rg.kf[3],
                                    rg.SMH.ptr_to([vbase + tile_offset(p, key + 16 * kk, 2 * dn, lane_xor(lane, 4))]))
            for half in T.unroll(2):
                n = 2 * dn + half
                T.ptx[p.mma_instr](
                    rg.o[4 * n], rg.o[4 * n + 1], rg.o[4 * n + 2], rg.o[4 * n + 3],
                    rg.pf[0], rg.pf[1], rg.pf[2], rg.pf[3], rg.kf[2 * half], rg.kf[2 * half + 1],
                    rg.o[4 * n], rg.o[4 * n + 1], rg.o[4 * n + 2], rg.o[4 * n + 3])


@T.macro
def kv_tile(p, args, rg, j, n_kv, masked):
    # tile j: its copies landed (this thread's: the wait; every thread's: the barrier, after which
    # every warp is done with tile j - 1's buffer, which tile j + stages - 1 then overwrites)
    S = p.config.stages
    T.ptx["cp.async.wait_group"](S - 2)
    T.cuda.cta_sync()
    if j + S - 1 < n_kv:
        copy_kv(p, args, rg, j + S - 1, (j + S - 1) % S)
    T.ptx["cp.async.commit_group"]()
    scores(p, rg, p.stage_offset(j % S, 0))
    if I.constexpr(masked):
        mask(p, rg, j)
    softmax(p, rg)
    pv(p, rg, p.stage_offset(j % S, 1))


def unmasked_tiles(p: Sm80AttentionPlan, q0, n_kv):
    """The leading kv tiles no row of the block masks: keys inside the sequence and, causal, at or
    below the block's first row ``q0``."""
    bkv = p.config.block_kv
    full = T.min(n_kv, p.problem.seq_kv // bkv)
    return T.min(full, (q0 + 1) // bkv) if p.problem.causal else full


# ---- the end: O / l, LSE -------------------------------------------------------------------------


@T.macro
def finish(p, args, rg):
    lane = T.cuda.lane_id()
    row = rg.q0 + T.cuda.warp_id() * WARP_ROWS + lane // 4
    packed = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    for h in T.unroll(2):
        rg.row[2 + h] = rg.row[2 + h] + T.cuda.__shfl_xor_sync(T.uint32(FULL), rg.row[2 + h], 1, 32)
        rg.row[2 + h] = rg.row[2 + h] + T.cuda.__shfl_xor_sync(T.uint32(FULL), rg.row[2 + h], 2, 32)
        rg.row[4 + h] = T.float32(1) / rg.row[2 + h]
        if row + 8 * h < p.problem.seq_q:
            for dn in T.unroll(p.d_tiles):
                T.ptx[p.pack_instr](packed[0], rg.o[4 * dn + 2 * h + 1] * rg.row[4 + h],
                                    rg.o[4 * dn + 2 * h] * rg.row[4 + h])
                T.ptx["st.global.b32"](args["O"].ptr_to([rg.b, rg.h, row + 8 * h, 8 * dn + 2 * (lane % 4)]), packed[0])
            if lane % 4 == 0:
                args["LSE"][rg.b, rg.h, row + 8 * h] = (rg.row[h] * T.float32(p.problem.scale_log2)
                                                        + T.log2(rg.row[2 + h])) * T.float32(LN2)


LN2 = 0.6931471805599453


# ---- the kernel ----------------------------------------------------------------------------------


@T.macro
def attention_kernel(p, args):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.ctas, block=p.threads, dynamic_smem_bytes=p.smem_bytes))
    pid = T.cuda.block_idx("x")
    bh = T.truncmod(pid, p.heads_total)
    q0 = (p.q_blocks - 1 - T.truncdiv(pid, p.heads_total)) * p.config.block_q  # longest first
    h = T.truncmod(bh, p.problem.heads)
    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // 2,), p.storage, scope="shared.dyn", layout="default",
                                           align=1024)])
    qf = T.alloc_tensor(ty_args=[T.Tensor((4 * p.k_steps,), "uint32", scope="local", layout="default")])
    o = T.alloc_tensor(ty_args=[T.Tensor((4 * p.d_tiles,), "float32", scope="local", layout="default")])
    s = T.alloc_tensor(ty_args=[T.Tensor((4 * p.n_tiles,), "float32", scope="local", layout="default")])
    pf = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
    kf = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
    row = T.alloc_tensor(ty_args=[T.Tensor((6,), "float32", scope="local", layout="default")])
    rg = Regs(SMH, qf, o, s, pf, kf, row, T.truncdiv(bh, p.problem.heads), h, p.problem.kv_head(h), q0)
    attention_body(p, args, rg)


@T.macro
def attention_body(p, args, rg):
    n_kv = kv_tiles_for(p.problem, p.config.block_q, p.config.block_kv, rg.q0, p.config.skip_masked, T.min)
    n_full = unmasked_tiles(p, rg.q0, n_kv)
    copy_tile(p, args["Q"], rg.SMH, 0, rg.b, rg.h, rg.q0, p.config.block_q, p.problem.seq_q)
    T.ptx["cp.async.commit_group"]()
    for st in T.unroll(p.config.stages - 1):
        if st < n_kv:
            copy_kv(p, args, rg, st, st)
        T.ptx["cp.async.commit_group"]()
    T.ptx["cp.async.wait_group"](p.config.stages - 1)
    T.cuda.cta_sync()
    load_q(p, rg)
    for i in T.unroll(4 * p.d_tiles):
        rg.o[i] = T.float32(0)
    for h in T.unroll(2):
        rg.row[h] = T.float32(float("-inf"))
        rg.row[2 + h] = T.float32(0)
    for j in range(n_full):
        kv_tile(p, args, rg, j, n_kv, False)
    for j in range(n_full, n_kv):
        kv_tile(p, args, rg, j, n_kv, True)
    T.ptx["cp.async.wait_group"](0)
    finish(p, args, rg)


@transpile_once
def emit_sm80_attention(p: Sm80AttentionPlan):
    """The TIRx PrimFunc ``main(Q, K, V, O, LSE)`` of a plan (its parameters: ``p.params``)."""
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p, "attention_kernel"),
                 {"T": T, "attention_kernel": attention_kernel, "p": p, "types": types})


__all__ = ["emit_sm80_attention"]
