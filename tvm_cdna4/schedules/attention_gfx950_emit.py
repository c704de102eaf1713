"""The gfx950 attention forward's emission: ``emit_gfx950_attention(plan)`` spells an
``AttentionPlan`` (``attention_plan``: the orientation, the register maps and why) in TIRx from the
shared emitter pieces (``gfx950_emit``: ``kernel_function``, ``decode``, ``fragment_reader``,
``mfma_step``, ``epilogue_value``, ``fused_ops``) and the wave reduction ``T.rocm.wave_reduce``.

Per workgroup (one (batch x head, query block)), per wave (32 query rows, one per lane modulo 32):

1. the wave's Q rows -> registers (the B operand of ``S^T = K Q^T``, every head-dim step), once;
2. for each kv tile the block sees (``kv_tiles_for``: causal skips the tiles above the diagonal):
   barrier; every thread's 16-byte chunks of the K and V tiles -> LDS (K rows as they are, V rows
   at ``v_lds_row``; keys past the sequence load zeros); barrier; ``S^T`` on the MFMAs (K fragments
   by wide LDS reads); the scores scaled into base 2 and masked (``-inf`` past the sequence and,
   causal, above the diagonal); the online softmax (the lane's registers, then
   ``T.rocm.wave_reduce("max", ..., axis="col")``); ``P^T`` into 16-bit B operands; the O
   accumulators scaled by ``alpha``; ``O^T += V^T P^T`` (V fragments by ``ds_read_tr``);
3. the row sums reduced across the lane pair, ``O / l`` converted and stored inside O, and
   ``LSE = (m + log2 l) ln 2`` (``v_log_f32``) by the lanes of the first wave half.

fp8 (``plan.scaled``): the same steps on the scaled f8f6f4 MFMA with unit scales (``_mfma``), the
per-tensor scales in the score factor and on O (``_scales``), P packed four e4m3 to a register by
two ``v_cvt_pk_fp8_f32`` (``_p_writer``) as ``2^(s2 - m + p_shift)``, V through ``ds_read_tr8``.

This first kernel loads and computes one tile after the other (two barriers per tile, no
software pipelining, every tile masked element by element): the foundation the faster schedules
(double-buffered K/V, direct-to-LDS loads, masking only the tail and diagonal tiles) are built on.
"""

from __future__ import annotations

import math

from tvm_tirx.script import tirx as T

from ..isa import CATALOG, lanes
from ..isa.llvm_helpers import CVT_PK_FP8, LOG2
from ..patterns.layouts import mfma_fragment
from ..patterns.wave import BUFFER_OOB
from ..tirx_private import transpile_once
from .attention_plan import WAVE_ROWS, AttentionPlan, kv_tiles_for, v_lds_row
from .gfx950_emit import (decode, epilogue_value, fragment_reader, fused_ops, kernel_function, mfma_step,
                          unit_scaled_step)
from .gfx950_plan import DTYPES, FORMAT_CODES, convert_epilogue
from .pipeline import lds_stage

CHUNK = 16  # bytes per global load and LDS store


def _esize(plan: AttentionPlan) -> int:
    """Bytes per Q, K, V element."""
    return CATALOG[plan.tr].element_bits // 8


def _mfma(plan: AttentionPlan, rm: int):
    """Macro ``mfma(D, A, B)`` of ``rm`` A tiles and one B tile: the plain MFMA, or (fp8) the scaled
    one with unit scales (the per-tensor scales act on the scores and on O, ``_scales``)."""
    if not plan.scaled:
        return mfma_step(plan.mfma)
    return unit_scaled_step(plan.mfma, rm, 1, tuple(FORMAT_CODES[f] for f in DTYPES[plan.problem.dtype].formats))


def _scales(plan: AttentionPlan):
    """``(score, out)``: functions of the kernel's ``args`` giving the factor from a raw ``q8 . k8``
    to base-2 units (``scale_log2``, fp8 times ``sq sk``) and O's factor (fp8: ``sv``, else none)."""
    p = plan.problem
    if not plan.scaled:
        return (lambda args: T.float32(p.scale_log2)), (lambda args, x: x)
    return ((lambda args: T.float32(p.scale_log2) * args.SCALES[0] * args.SCALES[1]),
            (lambda args, x: x * args.SCALES[2]))


def _shifted(plan: AttentionPlan, x):
    """``x - p_shift``: the max P is computed against (``P = 2^(s2 - m + p_shift)``), or ``x``."""
    return x - T.float32(plan.p_shift) if plan.p_shift else x


def _tile_loader(plan: AttentionPlan):
    """Macro ``load(SK, SV, Kh, Vh, j, tx)``: every thread's chunks of kv tile ``j`` of the (batch, kv
    head)'s K and V (``Kh``, ``Vh``: ``[Skv, D]`` views) into the LDS tiles; keys past the sequence
    load zeros (the buffer range check)."""
    p = plan.problem
    D, BKV, threads, esize = p.head_dim, plan.config.block_kv, plan.threads, _esize(plan)
    VEC = CHUNK // esize  # elements per chunk
    cpr = D // VEC  # chunks per key row
    nbytes = p.seq_kv * D * esize
    regs = f"{plan.storage}x{VEC}"
    bits = CATALOG[plan.tr].element_bits

    @T.macro
    def load(SK, SV, Kh, Vh, j, tx):
        for q in T.unroll(plan.chunks):
            row = (q * threads + tx) // cpr
            col = (q * threads + tx) % cpr * VEC
            voff = T.if_then_else(j * BKV + row < p.seq_kv, (row * D + col) * esize, T.int32(BUFFER_OOB))
            SK[0, row, T.ramp(col, 1, VEC)] = T.rocm.buffer_load(Kh.data, nbytes, voff, j * (BKV * D * esize), regs)
            SV[0, v_lds_row(row, bits), T.ramp(col, 1, VEC)] = T.rocm.buffer_load(Vh.data, nbytes, voff,
                                                                                 j * (BKV * D * esize), regs)
    return load


def _p_writer(plan: AttentionPlan):
    """``(G, to_p)``: macro ``to_p(rp, rs, w)`` writes P's group ``w`` of ``G`` scores into the B
    operand registers ``rp``: one 16-bit value (``G`` = 1), or (fp8) four e4m3 bytes, one 32-bit
    word of two ``v_cvt_pk_fp8_f32`` (round to nearest even)."""
    if not plan.scaled:
        to16 = convert_epilogue("float32", plan.problem.dtype)

        @T.macro
        def to_p(rp, rs, w):
            rp[w] = epilogue_value(to16, rs[w])
        return 1, to_p
    words = plan.kv_blocks * CATALOG[plan.mfma].acc_elems // 4

    def pack(a, b, old, high):
        return T.call_llvm_pure_intrin(CVT_PK_FP8, a, b, old, T.bool(high), ty="int32")

    @T.macro
    def to_p(rp, rs, w):
        Pw = T.decl_tensor(rp.ptr_to([0]), ty_args=[T.Tensor((words,), "uint32", scope="local")])
        Pw[w] = T.reinterpret(pack(rs[4 * w + 2], rs[4 * w + 3], pack(rs[4 * w], rs[4 * w + 1], T.int32(0), False), True),
                              ty="uint32")
    return 4, to_p


def _softmax(plan: AttentionPlan):
    """Macro ``softmax(rs, rp, ro, m, l, j, q, lane, scale)``: kv tile ``j``'s scores (``rs``, the
    S^T accumulators of query ``q``) times ``scale`` into base 2 and masked, the running max ``m``
    and the lane's partial row sum ``l`` updated, ``rp`` = P^T (``_p_writer``: 16 bits, or fp8 of
    ``2^p_shift P``), the O accumulators ``ro`` scaled."""
    p = plan.problem
    op = CATALOG[plan.mfma]
    BKV, n_s, n_o = plan.config.block_kv, plan.kv_blocks * op.acc_elems, plan.d_tiles * op.acc_elems
    ops = fused_ops("float32")
    G, to_p = _p_writer(plan)

    def key(j, r, lane):
        return j * BKV + r // op.acc_elems * op.m + lanes.acc_owner(op, lane, r % op.acc_elems).row

    def visible(j, r, lane, q):
        inside = key(j, r, lane) < p.seq_kv
        return T.And(inside, key(j, r, lane) <= q) if p.causal else inside

    @T.macro
    def softmax(rs, rp, ro, m, l, j, q, lane, scale):
        mx = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local")])
        mx[0] = T.float32(-math.inf)
        for r in T.unroll(n_s):
            rs[r] = T.if_then_else(visible(j, r, lane, q), rs[r] * scale, T.float32(-math.inf))
            mx[0] = T.max(mx[0], rs[r])
        mx[1] = T.max(m[0], T.rocm.wave_reduce("max", mx[0], lanes=plan.mfma, axis="col"))
        mx[0] = ops.exp2(m[0] - mx[1])  # alpha (0 at the first tile: m = -inf)
        m[0] = mx[1]
        l[0] = l[0] * mx[0]
        for w in T.unroll(n_s // G):
            for e in T.unroll(G):
                rs[w * G + e] = ops.exp2(rs[w * G + e] - _shifted(plan, mx[1]))
                l[0] = l[0] + rs[w * G + e]
            to_p(rp, rs, w)
        for r in T.unroll(n_o):
            ro[r] = ro[r] * mx[0]
    return softmax


def _tile(plan: AttentionPlan):
    """Macro ``tile(args, bid, tx, SK, SV)``: the workgroup's query block (module docstring)."""
    p = plan.problem
    op = CATALOG[plan.mfma]
    D, BQ, BKV, E = p.head_dim, plan.config.block_q, plan.config.block_kv, op.a_elems
    RKV, RD, KS, PS = plan.kv_blocks, plan.d_tiles, plan.k_steps, plan.pv_steps  # PS: P V steps per tile
    st, esize, byte = plan.storage, _esize(plan), plan.scaled
    QV = min(E, CHUNK // esize)  # Q elements per global load
    lq, nq = mfma_fragment(op, "B", (1, KS), byte_tiles=byte)
    lk, nk = mfma_fragment(op, "A", (RKV, KS), byte_tiles=byte)
    lv, nv = mfma_fragment(op, "A", (RD, PS), byte_tiles=byte)
    lp, npr = mfma_fragment(op, "B", (1, PS), byte_tiles=byte)
    ls, ns = mfma_fragment(op, "D", (RKV, 1))
    lo, no = mfma_fragment(op, "D", (RD, 1))
    frag_k = fragment_reader(op, "A", "wide", st, E, KS, n=E)
    frag_v = fragment_reader(op, "A", "tr", st, E, PS, tr=plan.tr, byte_tiles=byte)
    mfma_s, mfma_o = _mfma(plan, RKV), _mfma(plan, RD)
    load, softmax = _tile_loader(plan), _softmax(plan)
    score, out_scale = _scales(plan)

    @T.macro
    def tile(args, bid, tx, SK, SV):
        idx = decode(plan.grid, bid)
        b = idx.batch // p.heads
        h = idx.batch % p.heads
        q0 = idx.row * BQ
        lane = tx % 64
        q = q0 + tx // 64 * WAVE_ROWS + lane % WAVE_ROWS  # the lane's query row
        Qh = T.decl_tensor(args.Q.ptr_to([T.cast(b, "int64"), h, 0, 0]), ty_args=[T.Tensor((p.seq_q, D), st)])
        Kh = T.decl_tensor(args.K.ptr_to([T.cast(b, "int64"), p.kv_head(h), 0, 0]), ty_args=[T.Tensor((p.seq_kv, D), st)])
        Vh = T.decl_tensor(args.V.ptr_to([T.cast(b, "int64"), p.kv_head(h), 0, 0]), ty_args=[T.Tensor((p.seq_kv, D), st)])
        rq = T.alloc_tensor(ty_args=[T.Tensor((nq,), st, scope="local")])
        rk = T.alloc_tensor(ty_args=[T.Tensor((nk,), st, scope="local")])
        rv = T.alloc_tensor(ty_args=[T.Tensor((nv,), st, scope="local")])
        rp = T.alloc_tensor(ty_args=[T.Tensor((npr,), st, scope="local")])
        rs = T.alloc_tensor(ty_args=[T.Tensor((ns,), "float32", scope="local")])
        ro = T.alloc_tensor(ty_args=[T.Tensor((no,), "float32", scope="local")])
        m = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local")])
        l = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local")])
        Qf = T.decl_tensor(rq.ptr_to([0]), ty_args=[T.Tensor((1, KS, op.n, op.k), st, scope="local", layout=lq)])
        Kf = T.decl_tensor(rk.ptr_to([0]), ty_args=[T.Tensor((RKV, KS, op.m, op.k), st, scope="local", layout=lk)])
        Vf = T.decl_tensor(rv.ptr_to([0]), ty_args=[T.Tensor((RD, PS, op.m, op.k), st, scope="local", layout=lv)])
        Pf = T.decl_tensor(rp.ptr_to([0]), ty_args=[T.Tensor((1, PS, op.n, op.k), st, scope="local", layout=lp)])
        Sd = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((RKV, 1, op.m, op.n), "float32", scope="local", layout=ls)])
        Od = T.decl_tensor(ro.ptr_to([0]), ty_args=[T.Tensor((RD, 1, op.m, op.n), "float32", scope="local", layout=lo)])
        for kk in T.unroll(KS):  # the lane's Q row, head-dim elements k kk + E (lane // 32) ..., zeros past Sq
            for c in T.unroll(E // QV):
                rq[T.ramp(kk * E + c * QV, 1, QV)] = T.rocm.buffer_load(
                    Qh.data, p.seq_q * D * esize, T.if_then_else(
                        q < p.seq_q, (q * D + kk * op.k + lane // 32 * E + c * QV) * esize, T.int32(BUFFER_OOB)),
                    0, f"{st}x{QV}")
        m[0] = T.float32(-math.inf)
        l[0] = T.float32(0)
        for r in T.unroll(no):
            ro[r] = T.float32(0)
        for j in T.serial(kv_tiles_for(p, BQ, BKV, q0, plan.config.skip_masked, T.min)):
            T.rocm.workgroup_barrier()
            load(SK, SV, Kh, Vh, j, tx)
            T.rocm.workgroup_barrier()
            for r in T.unroll(ns):
                rs[r] = T.float32(0)
            for kk in T.unroll(KS):
                for mi in T.unroll(RKV):
                    frag_k(rk, SK, mi, kk, 0, lane)
                mfma_s(Sd, Kf[:, kk : kk + 1], Qf[:, kk : kk + 1])
            softmax(rs, rp, ro, m, l, j, q, lane, score(args))
            for kk in T.unroll(PS):
                for di in T.unroll(RD):
                    frag_v(rv, SV, di, kk, 0, lane)
                mfma_o(Od, Vf[:, kk : kk + 1], Pf[:, kk : kk + 1])
        l[0] = T.rocm.wave_reduce("sum", l[0], lanes=plan.mfma, axis="col")
        if q < p.seq_q:
            for di in T.unroll(RD):
                for r in T.unroll(op.acc_elems):
                    args.O[b, h, q, di * op.m + lanes.acc_owner(op, lane, r).row] = epilogue_value(
                        plan.epilogue, out_scale(args, ro[di * op.acc_elems + r] / l[0]))
            if lane < WAVE_ROWS:
                args.LSE[b, h, q] = (_shifted(plan, m[0]) + T.call_llvm_pure_intrin(LOG2, l[0], ty="float32")) * T.float32(
                    math.log(2))
    return tile


@transpile_once
def emit_gfx950_attention(plan: AttentionPlan):
    """The PrimFunc ``attention(Q, K, V, O, LSE)`` of a plan."""
    tile = _tile(plan)
    shape = (plan.config.block_kv, plan.lds_row)

    @T.macro
    def body(args):
        bid = T.launch_thread("blockIdx.x", plan.grid.groups)
        tx = T.launch_thread("threadIdx.x", plan.threads)
        SK = T.alloc_tensor(ty_args=[lds_stage(shape, plan.storage)])
        SV = T.alloc_tensor(ty_args=[lds_stage(shape, plan.storage)])
        tile(args, bid, tx, SK, SV)

    return kernel_function("attention", plan.params, body)


__all__ = ["emit_gfx950_attention"]
