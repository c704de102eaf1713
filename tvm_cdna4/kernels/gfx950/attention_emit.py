"""The gfx950 attention forward's emission: ``emit_gfx950_attention(plan)`` spells an
``AttentionPlan`` (``attention_plan``: the orientation, the register maps and why) in TIRx from the
shared emitter pieces (``gfx950_emit``: ``kernel_function``, ``decode``, ``fragment_reader``,
``mfma_step``, ``epilogue_value``, ``fused_ops``) and the wave reduction ``T.rocm.wave_reduce``.

Per workgroup (one (batch x head, query block)), per wave (32 query rows, one per lane modulo 32):

1. the wave's Q rows -> registers (the B operand of ``S^T = K Q^T``, every head-dim step), once;
2. the kv tiles the block sees (``kv_tiles_for``: causal skips the tiles above the diagonal), the
   first ``kv_full_tiles_for`` in a loop without element masks, the rest (diagonal, tail) in a
   masked one (``_kv_loop``). Each step (``_kv_step``): tile ``j`` lands in LDS and tile ``j + 1``'s
   loads begin (``_kv_transfer``: direct-to-LDS ``buffer_load ... lds`` into the next K / V
   stages, ``s_waitcnt vmcnt(0)`` and one barrier per tile; or, without ``lds_dma``, staging
   registers stored at the next step); the K (and the previous tile's V^T) fragments read; ``S^T``
   on the MFMAs; the softmax (``_softmax``: scores masked or not, the row max by
   ``T.rocm.wave_reduce("max", ..., axis="col")``, the exponentials, ``P^T`` in 16 bits, the sums,
   the O accumulators scaled by ``alpha``), with ``defer_pv`` the previous tile's ``O^T += V^T P^T``
   MFMAs issued between its exponentials, one 16-key step per 8 exponentials behind a
   ``sched.barrier``, so that the MFMA pipe runs under the VALU work; the last tile's after the loops;
3. the row sums reduced across the lane pair, ``O / l`` converted and stored inside O, and
   ``LSE = (m + log2 l) ln 2`` (``v_log_f32``) by the lanes of the first wave half.

fp8 (``plan.scaled``): the same steps on the scaled f8f6f4 MFMA with unit scales (``_mfma``), the
per-tensor scales in the score factor and on O (``_scales``), P packed four e4m3 to a register by
two ``v_cvt_pk_fp8_f32`` (``_p_writer``) as ``2^(s2 - m + p_shift)``, one 64-key P V step per 32
exponentials, V through ``ds_read_tr8`` (``v_lds_row(key, 8)``); the loaders count in bytes.
"""

from __future__ import annotations

import math

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ...isa import CATALOG, lanes
from ...isa.llvm_helpers import CVT_PK_FP8, LOG2
from ...patterns.layouts import mfma_fragment
from ...patterns.wave import BUFFER_OOB
from ...tirx_private import transpile_once
from ..attention.problem import LN2
from .attention_plan import (WAVE_ROWS, AttentionPlan, kv_full_tiles_for, kv_tiles_for, v_lds_key,
                             v_lds_row)
from .emit import (AttentionRegs, decode, epilogue_value, fragment_reader, fused_ops, kernel_function, mfma_step,
                   unit_scaled_step)
from .gemm_config import DTYPES, FORMAT_CODES
from .pipeline import lds_stage, period_wait

CHUNK = 16  # bytes per global load and LDS store


def _vec(plan: AttentionPlan) -> int:
    """Q, K, V elements per 16-byte chunk (8; fp8 16)."""
    return CHUNK // plan.esize


def _mfma(plan: AttentionPlan, rm: int):
    """Macro ``mfma(D, A, B)`` of ``rm`` A tiles and one B tile: the plain MFMA, or (fp8) the scaled
    one with unit scales (the per-tensor scales act on the scores and on O, ``_scales``)."""
    if not plan.scaled:
        return mfma_step(plan.mfma)
    return unit_scaled_step(plan.mfma, rm, 1, tuple(FORMAT_CODES[f] for f in DTYPES[plan.problem.dtype].formats))


def _scales(plan: AttentionPlan):
    """``(score, out)``: functions of the kernel's ``args`` giving the factor from a raw ``q . k``
    to base-2 units (``scale_log2``, fp8 times ``sq sk``) and O's factor (fp8: ``sv``, else none)."""
    p = plan.problem
    if not plan.scaled:
        return (lambda args: T.float32(p.scale_log2)), (lambda args, x: x)
    return ((lambda args: T.float32(p.scale_log2) * args.SCALES[0] * args.SCALES[1]),
            (lambda args, x: x * args.SCALES[2]))


def _shifted(plan: AttentionPlan, x):
    """``x - p_shift``: the max P is computed against (``P = 2^(s2 - m + p_shift)``), or ``x``."""
    return x - T.float32(plan.p_shift) if plan.p_shift else x


def _p_writer(plan: AttentionPlan):
    """Macro ``to_p(rp, rs, w)``: P's group ``w`` of ``plan.p_group`` scores into the B operand
    registers ``rp``: one value by ``plan.p_convert``, or (fp8) four e4m3 bytes, one 32-bit word of
    two ``v_cvt_pk_fp8_f32`` (round to nearest even)."""
    if plan.p_convert is not None:
        @T.macro
        def to_p(rp, rs, w):
            rp[w] = epilogue_value(plan.p_convert, rs[w])
        return to_p
    words = plan.kv_blocks * CATALOG[plan.mfma].acc_elems // 4

    def pack(a, b, old, high):
        return T.call_llvm_pure_intrin(CVT_PK_FP8, a, b, old, T.bool(high), ty="int32")

    @T.macro
    def to_p(rp, rs, w):
        Pw = T.decl_tensor(rp.ptr_to([0]), ty_args=[T.Tensor((words,), "uint32", scope="local")])
        Pw[w] = T.reinterpret(pack(rs[4 * w + 2], rs[4 * w + 3], pack(rs[4 * w], rs[4 * w + 1], T.int32(0), False), True),
                              ty="uint32")
    return to_p


def _tile_loader(plan: AttentionPlan):
    """Macros ``(fetch, put)``: ``fetch(rkv, Kh, Vh, j, tx)`` loads every thread's chunks of kv tile
    ``j`` of the (batch, kv head)'s K and V (``Kh``, ``Vh``: ``[Skv, D]`` views) into the staging
    registers ``rkv`` (K's chunks, then V's; keys past the sequence load zeros: the buffer range
    check, so a fetch past the last tile is harmless); ``put(SK, SV, rkv, tx, stage)`` stores them
    into the LDS tiles (K rows as they are, V rows at ``v_lds_row``, both of stage ``stage``)."""
    p = plan.problem
    D, BKV, threads, n, esize, VEC = p.head_dim, plan.config.block_kv, plan.threads, plan.chunks, plan.esize, _vec(plan)
    cpr = D // VEC  # chunks per key row
    nbytes = p.seq_kv * D * esize
    regs = f"{plan.storage}x{VEC}"
    bits = 8 * esize

    def at(q, tx):
        return (q * threads + tx) // cpr, (q * threads + tx) % cpr * VEC

    @T.macro
    def fetch(rkv, Kh, Vh, j, tx):
        for q in T.unroll(n):
            row, col = at(q, tx)
            voff = T.if_then_else(j * BKV + row < p.seq_kv, (row * D + col) * esize, T.int32(BUFFER_OOB))
            rkv[T.ramp(q * VEC, 1, VEC)] = T.rocm.buffer_load(Kh.data, nbytes, voff, j * (BKV * D * esize), regs)
            rkv[T.ramp((n + q) * VEC, 1, VEC)] = T.rocm.buffer_load(Vh.data, nbytes, voff, j * (BKV * D * esize), regs)

    @T.macro
    def put(SK, SV, rkv, tx, stage):
        for q in T.unroll(n):
            row, col = at(q, tx)
            SK[stage % plan.k_stages, row, T.ramp(col, 1, VEC)] = rkv[T.ramp(q * VEC, 1, VEC)]
            SV[stage, v_lds_row(row, bits), T.ramp(col, 1, VEC)] = rkv[T.ramp((n + q) * VEC, 1, VEC)]
    return fetch, put


def _dma_loader(plan: AttentionPlan):
    """Macro ``dma(s, j)``: kv tile ``j`` of the (batch, kv head)'s K and V straight into LDS stage
    ``j % k_stages`` / ``j % v_stages`` (``T.rocm.buffer_load_lds``): the ``plan.dma`` tile's wave
    loads, spread over the waves; the lane whose slot is LDS row ``r`` loads key ``r`` of K and key
    ``v_lds_key(r)`` of V (``v_lds_row``'s inverse; padding slots, rows past the tile and keys past
    the sequence: zeros)."""
    p, tile, W = plan.problem, plan.dma, plan.waves
    D, BKV, pitch, esize, VEC = p.head_dim, plan.config.block_kv, plan.lds_row, plan.esize, _vec(plan)
    nbytes, per, bits = p.seq_kv * D * esize, -(-tile.loads // W), 8 * esize
    if tile.pad_every != 1:  # ``ok`` below spells ``tile.in_tile`` for pad_every 1 (T.And, see docs/attention.md)
        raise ValueError(f"attention dma tile: the loader's in-tile test assumes pad_every 1, found {tile.pad_every}")

    def voff(j, key, ok, col):
        return T.if_then_else(T.And(ok, j * BKV + key < p.seq_kv), (key * D + col) * esize, T.int32(BUFFER_OOB))

    @T.macro
    def dma(s, j):
        for k in T.unroll(per):
            if s.tx // 64 + k * W < tile.loads:
                start = tile.load_base(s.tx // 64 + k * W)
                slot = start + s.lane * tile.size
                row = tile.row_at(slot)
                col = tile.col_at(slot) * VEC
                ok = T.And(slot % tile.group_bytes < tile.row_bytes, row < tile.rows)  # tile.in_tile, pad_every 1
                T.rocm.buffer_load_lds(s.Kh.data, nbytes, voff(j, row, ok, col), j * (BKV * D * esize),
                                       s.SK[j % plan.k_stages, start // esize // pitch, start // esize % pitch], tile.size)
                T.rocm.buffer_load_lds(s.Vh.data, nbytes, voff(j, v_lds_key(row, bits), ok, col), j * (BKV * D * esize),
                                       s.SV[j % plan.v_stages, start // esize // pitch, start // esize % pitch], tile.size)
    return dma


def _kv_transfer(plan: AttentionPlan):
    """Macros ``(begin, land)`` moving kv tiles into LDS: ``begin(s, j)`` starts tile ``j``'s loads,
    ``land(s, j)`` makes tile ``j`` visible to every wave (and, by its barrier, retires the reads
    of the step before). ``lds_dma``: ``_dma_loader``, then ``s_waitcnt vmcnt(0)`` and a barrier;
    else ``fetch`` into the staging registers, then barrier, ``put``, barrier (``_tile_loader``)."""
    fetch, put = _tile_loader(plan)
    dma = _dma_loader(plan)

    @T.macro
    def begin(s, j):
        if plan.config.lds_dma:
            dma(s, j)
        else:
            fetch(s.rkv, s.Kh, s.Vh, j, s.tx)

    @T.macro
    def land(s, j):
        if plan.config.lds_dma:
            period_wait(0)
            T.rocm.workgroup_barrier()
        else:
            T.rocm.workgroup_barrier()
            put(s.SK, s.SV, s.rkv, s.tx, j % plan.v_stages)
            T.rocm.workgroup_barrier()
    return begin, land


def _softmax(plan: AttentionPlan, masked: bool, deferred: bool):
    """Macro ``softmax(s, j)``: kv tile ``j``'s scores (``s.rs``, the S^T accumulators of the lane's
    query ``s.q``), ``masked``: masked (keys past the sequence and, causal, above the diagonal score
    ``-inf``), the running max ``s.m`` (base 2) and the lane's two partial row sums ``s.l`` (packed
    adds) updated, ``s.rp`` = P^T (``_p_writer``: 16 bits, or fp8 of ``2^p_shift P``), the O
    accumulators ``s.ro`` scaled. The scale into base 2 (``s.scale``: ``scale_log2``, fp8 times
    ``sq sk``) is folded into the exponent's argument, ``2^(s * scale - m')`` (one fused
    multiply-add per score; the raw scores' max times the positive scale is the scaled scores'
    max). ``deferred``: the previous tile's ``O^T += V^T P^T`` MFMAs (its V fragments already in
    ``s.rv``, its P^T in ``s.rp``) issued between the exponentials, one P V step per ``per`` of them
    (16 keys per 8; fp8 64 keys per 32),
    so that they run while the VALU works; ``s.rp`` is overwritten after them."""
    p = plan.problem
    op = CATALOG[plan.mfma]
    BKV, n_s, n_o, PS = plan.config.block_kv, plan.kv_blocks * op.acc_elems, plan.d_tiles * op.acc_elems, plan.pv_steps
    per, G = n_s // PS, plan.p_group  # exponentials per deferred P V step (16 keys; fp8 64), P values per register
    ops = fused_ops("float32")
    mfma, to_p = _mfma(plan, plan.d_tiles), _p_writer(plan)

    def key(j, r, lane):
        return j * BKV + r // op.acc_elems * op.m + lanes.acc_owner(op, lane, r % op.acc_elems).row

    def visible(j, r, lane, q):
        inside = key(j, r, lane) < p.seq_kv
        return T.And(inside, key(j, r, lane) <= q) if p.causal else inside

    def score(rs, j, r, lane, q):
        return T.if_then_else(visible(j, r, lane, q), rs[r], T.float32(-math.inf)) if masked else rs[r]

    @T.macro
    def softmax(s, j):
        mx = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local")])
        mx[0] = T.float32(-math.inf)
        for r in T.unroll(n_s):
            s.rs[r] = score(s.rs, j, r, s.lane, s.q)
            mx[0] = T.max(mx[0], s.rs[r])
        mx[1] = T.max(s.m[0], T.rocm.wave_reduce("max", mx[0], lanes=plan.mfma, axis="col") * s.scale)
        mx[0] = ops.exp2(s.m[0] - mx[1])  # alpha (0 at the first tile: m = -inf)
        s.m[0] = mx[1]
        s.l[T.ramp(0, 1, 2)] = s.l[T.ramp(0, 1, 2)] * T.broadcast(mx[0], 2)
        for t in T.unroll(PS):  # 16-key step t: its exponentials, (deferred) MFMAs, then its P^T and sums
            for e in T.unroll(per):
                s.rs[t * per + e] = ops.exp2(s.rs[t * per + e] * s.scale - _shifted(plan, mx[1]))
            if deferred:
                mfma(s.Od, s.Vf[:, t : t + 1], s.Pf[:, t : t + 1])
            for w in T.unroll(per // G):
                to_p(s.rp, s.rs, t * (per // G) + w)
            for e in T.unroll(per // 2):  # two partial sums: packed adds
                s.l[T.ramp(0, 1, 2)] = s.l[T.ramp(0, 1, 2)] + s.rs[T.ramp(t * per + 2 * e, 1, 2)]
            if deferred:
                T.evaluate(T.call_llvm_intrin("llvm.amdgcn.sched.barrier", T.int32(0), ty="void"))  # in this order
        for r in T.unroll(n_o):
            s.ro[r] = s.ro[r] * mx[0]
    return softmax


@attrs.frozen(eq=False)
class KvState(AttentionRegs):
    """What every kv-loop step of a thread works on (``_kv_step``): the registers and views of
    ``emit.AttentionRegs``, the LDS K tile, the (batch, kv head)'s K and V views, the staging registers and
    the lane's query row."""

    SK: object
    Kh: object
    Vh: object
    rkv: object
    q: object


def _pv(plan: AttentionPlan):
    """Macros ``(read_v, pv)``: ``read_v(s, stage)`` reads the V^T fragments of the tile whose V
    is in LDS stage ``stage`` into ``s.rv`` (``ds_read_tr``); ``pv(s, stage)`` reads them and runs
    ``O^T += V^T P^T`` with ``P^T`` in ``s.rp``."""
    op = CATALOG[plan.mfma]
    RD, PS = plan.d_tiles, plan.pv_steps
    frag_v = fragment_reader(op, "A", "tr", plan.storage, op.a_elems, PS, tr=plan.tr, byte_tiles=plan.scaled, staged=True)
    mfma = _mfma(plan, RD)

    @T.macro
    def read_v(s, stage):
        for kk in T.unroll(PS):
            for di in T.unroll(RD):
                frag_v(s.rv, s.SV, di, kk, 0, s.lane, stage)

    @T.macro
    def pv(s, stage):
        read_v(s, stage)
        for kk in T.unroll(PS):
            mfma(s.Od, s.Vf[:, kk : kk + 1], s.Pf[:, kk : kk + 1])
    return read_v, pv


def _kv_step(plan: AttentionPlan, masked: bool, deferred: bool):
    """Macro ``step(s, j, tiles)``: kv tile ``j`` of the loop (module docstring), its scores masked
    or not (``_softmax``). Tile ``j`` landed in LDS (``_kv_transfer``; K in stage ``j % k_stages``,
    V in ``j % v_stages``); tile ``j + 1``'s loads begun (in flight over this tile's work);
    ``S^T = K Q^T``; ``deferred``: tile ``j - 1``'s ``O^T += V^T P^T`` (``_pv``; its MFMAs run
    under this tile's softmax); the softmax; without ``defer_pv``, this tile's ``O^T += V^T P^T``."""
    op = CATALOG[plan.mfma]
    E, RKV, KS, n = op.a_elems, plan.kv_blocks, plan.k_steps, plan.v_stages
    frag_k = fragment_reader(op, "A", "wide", plan.storage, E, KS, n=E, staged=True)
    mfma = _mfma(plan, RKV)
    (begin, land), softmax, (read_v, pv) = _kv_transfer(plan), _softmax(plan, masked, deferred), _pv(plan)

    @T.macro
    def step(s, j, tiles):
        land(s, j)
        if j + 1 < tiles:
            begin(s, j + 1)  # in flight over tile j's MFMAs and softmax
        for kk in T.unroll(KS):
            for mi in T.unroll(RKV):
                frag_k(s.rk, s.SK, mi, kk, 0, s.lane, j % plan.k_stages)
        if deferred:
            read_v(s, (j + n - 1) % n)
        for r in T.unroll(RKV * op.acc_elems):
            s.rs[r] = T.float32(0)
        for kk in T.unroll(KS):
            mfma(s.Sd, s.Kf[:, kk : kk + 1], s.Qf[:, kk : kk + 1])
        softmax(s, j)
        if not plan.config.defer_pv:
            pv(s, j % n)
    return step


def _kv_loop(plan: AttentionPlan):
    """Macro ``loop(s, q0)``: the query block's kv tiles (``kv_tiles_for``), the first
    ``kv_full_tiles_for`` unmasked, the rest (the diagonal tiles, the masked tail) masked (the loop
    left out where no block enters it: ``AttentionPlan.masked_loop``); tile 0 fetched before. With
    ``defer_pv``: tile 0 first (masked if any tile is: a mask on a whole tile changes nothing), then
    the loops from tile 1 with the previous tile's ``O^T += V^T P^T`` deferred into each step, the
    last tile's after them."""
    p, BQ, BKV, n = plan.problem, plan.config.block_q, plan.config.block_kv, plan.v_stages
    d = plan.config.defer_pv
    first, unmasked, masked = _kv_step(plan, plan.masked_tiles, False), _kv_step(plan, False, d), _kv_step(plan, True, d)
    begin, _ = _kv_transfer(plan)
    _, pv = _pv(plan)

    @T.macro
    def loop(s, q0):
        begin(s, 0)
        tiles = kv_tiles_for(p, BQ, BKV, q0, plan.config.skip_masked, T.min)
        if d:
            first(s, 0, tiles)
        full = T.max(kv_full_tiles_for(p, BQ, BKV, q0, T.min), int(d)) if plan.masked_tiles else tiles
        for j in T.serial(full - int(d)):
            unmasked(s, j + int(d), tiles)
        if I.constexpr(plan.masked_loop):  # left out, not under a false condition: its body is checked
            for j in T.serial(tiles - full):
                masked(s, full + j, tiles)
        if d:
            pv(s, (tiles - 1) % n)
    return loop


def _tile(plan: AttentionPlan):
    """Macro ``tile(args, bid, tx, SK, SV)``: the workgroup's query block (module docstring)."""
    p = plan.problem
    op = CATALOG[plan.mfma]
    D, BQ, E = p.head_dim, plan.config.block_q, op.a_elems
    RKV, RD, KS, PS = plan.kv_blocks, plan.d_tiles, plan.k_steps, plan.pv_steps  # PS: P V steps per tile
    st, esize, byte = plan.storage, plan.esize, plan.scaled
    QV = min(E, _vec(plan))  # Q elements per global load
    lq, nq = mfma_fragment(op, "B", (1, KS), byte_tiles=byte)
    lk, nk = mfma_fragment(op, "A", (RKV, KS), byte_tiles=byte)
    lv, nv = mfma_fragment(op, "A", (RD, PS), byte_tiles=byte)
    lp, npr = mfma_fragment(op, "B", (1, PS), byte_tiles=byte)
    ls, ns = mfma_fragment(op, "D", (RKV, 1))
    lo, no = mfma_fragment(op, "D", (RD, 1))
    loop = _kv_loop(plan)
    score, out_scale = _scales(plan)

    def regs(n, dtype=st):
        return T.alloc_tensor(ty_args=[T.Tensor((n,), dtype, scope="local")])

    def view(r, shape, layout, dtype=st):
        return T.decl_tensor(r.ptr_to([0]), ty_args=[T.Tensor(shape, dtype, scope="local", layout=layout)])

    def head_view(X, b, h, rows):
        return T.decl_tensor(X.ptr_to([T.cast(b, "int64"), h, 0, 0]), ty_args=[T.Tensor((rows, D), st)])

    @T.macro
    def tile(args, bid, tx, SK, SV):
        idx = decode(plan.grid, bid)
        b = idx.batch // p.heads
        h = idx.batch % p.heads
        q0 = idx.row * BQ
        lane = tx % 64
        q = q0 + tx // 64 * WAVE_ROWS + lane % WAVE_ROWS  # the lane's query row
        Qh = head_view(args.Q, b, h, p.seq_q)
        Kh = head_view(args.K, b, p.kv_head(h), p.seq_kv)
        Vh = head_view(args.V, b, p.kv_head(h), p.seq_kv)
        rq, rk, rv, rp = regs(nq), regs(nk), regs(nv), regs(npr)
        rs, ro, m, l = regs(ns, "float32"), regs(no, "float32"), regs(1, "float32"), regs(2, "float32")
        rkv = regs(2 * plan.chunks * _vec(plan))
        Qf, Kf = view(rq, (1, KS, op.n, op.k), lq), view(rk, (RKV, KS, op.m, op.k), lk)
        Vf, Pf = view(rv, (RD, PS, op.m, op.k), lv), view(rp, (1, PS, op.n, op.k), lp)
        Sd, Od = view(rs, (RKV, 1, op.m, op.n), ls, "float32"), view(ro, (RD, 1, op.m, op.n), lo, "float32")
        s = KvState(SK, Kh, Vh, rkv, q, rk=rk, rv=rv, rp=rp, rs=rs, ro=ro, m=m, l=l, Qf=Qf, Kf=Kf, Vf=Vf, Pf=Pf,
                    Sd=Sd, Od=Od, SV=SV, lane=lane, tx=tx, scale=score(args))
        for kk in T.unroll(KS):  # the lane's Q row, head-dim elements k kk + E (lane // 32) ..., zeros past Sq
            for c in T.unroll(E // QV):
                rq[T.ramp(kk * E + c * QV, 1, QV)] = T.rocm.buffer_load(
                    Qh.data, p.seq_q * D * esize, T.if_then_else(
                        q < p.seq_q, (q * D + kk * op.k + lane // 32 * E + c * QV) * esize, T.int32(BUFFER_OOB)),
                    0, f"{st}x{QV}")
        m[0] = T.float32(-math.inf)
        l[0] = T.float32(0)
        l[1] = T.float32(0)
        for r in T.unroll(no):
            ro[r] = T.float32(0)
        loop(s, q0)
        l[0] = T.rocm.wave_reduce("sum", l[0] + l[1], lanes=plan.mfma, axis="col")
        if q < p.seq_q:
            for di in T.unroll(RD):
                for r in T.unroll(op.acc_elems):
                    args.O[b, h, q, di * op.m + lanes.acc_owner(op, lane, r).row] = epilogue_value(
                        plan.epilogue, out_scale(args, ro[di * op.acc_elems + r] / l[0]))
            if lane < WAVE_ROWS:
                args.LSE[b, h, q] = (_shifted(plan, m[0])
                                     + T.call_llvm_pure_intrin(LOG2, l[0], ty="float32")) * T.float32(LN2)
    return tile


@transpile_once
def emit_gfx950_attention(plan: AttentionPlan):
    """The PrimFunc ``attention(Q, K, V, O, LSE)`` of a plan."""
    tile = _tile(plan)
    shape = (plan.stage_rows, plan.lds_row)

    @T.macro
    def body(args):
        bid = T.launch_thread("blockIdx.x", plan.grid.groups)
        tx = T.launch_thread("threadIdx.x", plan.threads)
        SK = T.alloc_tensor(ty_args=[lds_stage(shape, plan.storage, plan.k_stages)])
        SV = T.alloc_tensor(ty_args=[lds_stage(shape, plan.storage, plan.v_stages)])
        tile(args, bid, tx, SK, SV)

    return kernel_function("attention", plan.params, body)


__all__ = ["emit_gfx950_attention"]
