"""The gfx950 paged decode attention's emission: ``emit_gfx950_paged_decode(plan)`` spells a
``PagedDecodePlan`` (``paged_decode_plan``: the launch, the MFMA orientation, the clamps, the merge) in
TIRx from the shared emitter pieces (``emit``: ``kernel_function``, ``fragment_reader``, ``mfma_step``,
``epilogue_value``, ``fused_ops``).

Per workgroup (one wave: a (sequence, kv head, row block, split)):

1. the context ``L`` (clamped), the split's kv tiles ``t0 .. t0 + n``; the rows' Q into registers;
2. per tile (``_tile_step``): the tile's K and V, loaded the step before (``prefetch``) into raw
   staging registers (``_loads``: the block-table entries of the tile's pages first, ``_pages``), are
   moved to the K fragments (fp8: dequantized, ``_dequant``) and the V tile in LDS (key rows at
   ``v_lds_row``); the next tile's loads are issued; ``S^T = K Q^T``; the online softmax (``_softmax``:
   absent pages and keys past a row's last visible key ``-inf``); ``O^T += V^T P^T`` with V^T read by
   ``ds_read_tr16``;
3. the rows' partial ``O / l`` and base-2 LSE into the workspace, the ticket, and in the last
   workgroup of the unit the merge into ``O`` and ``LSE`` (``_merge``).
"""

from __future__ import annotations

import math

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ...isa import CATALOG
from ...isa.llvm_helpers import CVT_PK_BF16_FP8, LOG2
from ...patterns.layouts import mfma_fragment
from ...patterns.wave import BUFFER_OOB
from ...tirx_private import transpile_once
from ..attention.problem import LN2
from .attention_plan import p_convert
from .emit import AttentionRegs, epilogue_value, fragment_reader, fused_ops, kernel_function, mfma_step
from .paged_decode_plan import MFMA_ROWS, THREADS, PagedDecodePlan, head_dim_of, v_lds_row
from .pipeline import lds_stage

NEG_INF = -math.inf


@attrs.frozen(eq=False)
class Wave(AttentionRegs):
    """What every step of the wave works on: the registers and views of ``emit.AttentionRegs``, the
    arguments, the unit's indices and context, the block-table entries, the raw staging registers (the
    score factor: fp8 times K_SCALE)."""

    args: object
    b: object
    kvh: object
    r0: object  # the row block's first row
    unit: object
    split: object
    L: object  # the clamped context
    pg: object  # block-table entries of the tile being loaded (-1: absent)
    pgc: object  # ... of the tile being computed
    kraw: object
    vraw: object
    rkw: object  # rk as 32-bit words


def _dequant(word, high: bool):
    """Two e4m3 bytes of ``word`` (0-1, or 2-3) -> two bf16 in one int32 (``v_cvt_scalef32_pk_bf16_fp8``)."""
    return T.call_pure_extern(CVT_PK_BF16_FP8[high], word, ty="int32")


def _pages(plan: PagedDecodePlan):
    """Macro ``pages(s, tile)``: the block-table entries of tile ``tile``'s pages into ``s.pg``: an
    entry is read only for a page below ``ceil(L / page_size)`` (else the load's offset is past the
    table: zero, unused); an entry outside ``0 .. num_pages - 1`` (or unread) is -1: absent."""
    p = plan.problem
    P, BKV = p.page_size, plan.config.block_kv
    nbytes = p.batch * p.max_pages * 4

    @T.macro
    def pages(s, tile):
        for i in T.unroll(plan.tile_pages):
            no = tile * BKV // P + i
            need = no * P < s.L
            e = T.rocm.buffer_load(s.args.BLOCK_TABLE.data, nbytes,
                                   T.if_then_else(need, (s.b * p.max_pages + no) * 4, T.int32(BUFFER_OOB)), 0, "int32")
            s.pg[i] = T.if_then_else(T.And(need, T.And(e >= 0, e < p.num_pages)), e, T.int32(-1))
    return pages


def _kv_offset(plan: PagedDecodePlan, s, page, key, col):
    """Byte offset of head-dim element ``col`` of key ``key`` (of the sequence) on cache page ``page``,
    or ``BUFFER_OOB`` (zeros) for an absent page or a key at or past ``L``."""
    p = plan.problem
    off = ((page * p.page_size + key % p.page_size) * p.kv_heads + s.kvh) * p.head_dim + col
    return T.if_then_else(T.And(page >= 0, key < s.L), off * plan.kv_esize, T.int32(BUFFER_OOB))


def _page_of(plan: PagedDecodePlan, first_key: int) -> int:
    """The index into ``pg`` of the page holding tile key ``first_key`` (and the keys after it up to the
    page's end: every caller's keys sit on one page)."""
    return first_key // plan.problem.page_size if plan.config.block_kv > plan.problem.page_size else 0


def _loads(plan: PagedDecodePlan):
    """Macro ``load(s, tile)``: tile ``tile``'s K (each lane its fragment rows: key ``16 mi + lane % 16``,
    16 contiguous bytes per load) and V (16-byte chunks of the tile's rows, row-major over the lanes)
    into the raw staging registers ``s.kraw``, ``s.vraw`` (32-bit words), after its pages (``_pages``)."""
    p = plan.problem
    BKV, D, esize = plan.config.block_kv, p.head_dim, plan.kv_esize
    cbytes = p.num_pages * p.page_size * p.kv_heads * D * esize
    kc = plan.k_steps // (2 // esize)  # K loads per key block: 16-bit one per step, fp8 one per two
    cpr = D * esize // 16  # V chunks per row
    vec = 16 // esize
    pages = _pages(plan)

    @T.macro
    def load(s, tile):
        pages(s, tile)
        for mi in T.unroll(plan.kv_blocks):
            for c in T.unroll(kc):
                s.kraw[T.ramp((mi * kc + c) * 4, 1, 4)] = T.rocm.buffer_load(
                    s.args.K_CACHE.data, cbytes,
                    _kv_offset(plan, s, s.pg[_page_of(plan, 16 * mi)], tile * BKV + 16 * mi + s.lane % 16,
                               head_dim_of(c * (2 // esize), s.lane // 16, 0)), 0, "uint32x4")
        for q in T.unroll(plan.v_chunks):
            s.vraw[T.ramp(q * 4, 1, 4)] = T.rocm.buffer_load(
                s.args.V_CACHE.data, cbytes,
                _kv_offset(plan, s, s.pg[_page_of(plan, q * THREADS // cpr)], tile * BKV + (q * THREADS + s.tx) // cpr,
                           (q * THREADS + s.tx) % cpr * vec), 0, "uint32x4")
    return load


def _consume(plan: PagedDecodePlan):
    """Macro ``consume(s)``: the staged tile into the K fragments (16-bit: moved; fp8: dequantized, the
    16 elements of a load into steps ``2 c`` and ``2 c + 1``) and the V tile into LDS (rows at
    ``v_lds_row``; fp8 dequantized), between two barriers (the previous tile's V^T reads retired
    before, the writes visible after)."""
    p = plan.problem
    D, esize = p.head_dim, plan.kv_esize
    cpr, vec = D * esize // 16, 16 // esize
    words = plan.kv_blocks * plan.k_steps * 4

    @T.macro
    def consume(s):
        for i in T.unroll(plan.tile_pages):  # the tile's pages, for its masks (pg: the next tile's)
            s.pgc[i] = s.pg[i]
        if I.constexpr(plan.scaled):
            for c in T.unroll(words // 8):  # one 16-byte load: steps 2 c' and 2 c' + 1 of a key block
                for w in T.unroll(4):
                    s.rkw[c * 8 + w * 2] = _dequant(s.kraw[c * 4 + w], False)
                    s.rkw[c * 8 + w * 2 + 1] = _dequant(s.kraw[c * 4 + w], True)
        else:
            for w in T.unroll(words):
                s.rkw[w] = T.reinterpret(s.kraw[w], ty="int32")
        T.rocm.workgroup_barrier()
        for q in T.unroll(plan.v_chunks):
            row = (q * THREADS + s.tx) // cpr
            col = (q * THREADS + s.tx) % cpr * vec
            if I.constexpr(plan.scaled):
                cv = T.alloc_tensor(ty_args=[T.Tensor((16,), plan.storage, scope="local")])
                cw = T.decl_tensor(cv.ptr_to([0]), ty_args=[T.Tensor((8,), "int32", scope="local")])
                for w in T.unroll(4):
                    cw[2 * w] = _dequant(s.vraw[q * 4 + w], False)
                    cw[2 * w + 1] = _dequant(s.vraw[q * 4 + w], True)
                s.SV[0, v_lds_row(row), T.ramp(col, 1, 8)] = cv[T.ramp(0, 1, 8)]
                s.SV[0, v_lds_row(row), T.ramp(col + 8, 1, 8)] = cv[T.ramp(8, 1, 8)]
            else:
                v16 = T.decl_tensor(s.vraw.ptr_to([q * 4]), ty_args=[T.Tensor((8,), plan.storage, scope="local")])
                s.SV[0, v_lds_row(row), T.ramp(col, 1, 8)] = v16[T.ramp(0, 1, 8)]
        T.rocm.workgroup_barrier()
    return consume


def _softmax(plan: PagedDecodePlan):
    """Macro ``softmax(s, tile)``: the tile's scores of each row tile (``s.rs``: lane ``l`` holds row
    ``l % 16``, keys ``16 mi + 4 (l // 16) + i``), masked (an absent page, a key past the row's last
    visible one ``L - q + query``: ``-inf``), the running max ``s.m`` (base 2; a row with no key yet
    keeps ``-inf`` and subtracts 0), the lane's sum ``s.l``, P^T into ``s.rp`` (the query dtype, to
    nearest), the O accumulators scaled."""
    p = plan.problem
    op = CATALOG[plan.mfma]
    RN, RKV, RD, PS, BKV = plan.row_tiles, plan.kv_blocks, plan.d_tiles, plan.pv_steps, plan.config.block_kv
    ops = fused_ops("float32")
    conv = p_convert(p.q_dtype)

    def visible(s, tile, mi, i, ni):
        key = tile * BKV + 16 * mi + 4 * (s.lane // 16) + i
        limit = s.L - p.queries + (s.r0 + ni * MFMA_ROWS + s.lane % 16) // p.group
        return T.And(s.pgc[_page_of(plan, 16 * mi)] >= 0, key <= limit)

    @T.macro
    def softmax(s, tile):
        mx = T.alloc_tensor(ty_args=[T.Tensor((3,), "float32", scope="local")])
        for ni in T.unroll(RN):
            mx[0] = T.float32(NEG_INF)
            for mi in T.unroll(RKV):
                for i in T.unroll(4):
                    s.rs[(mi * RN + ni) * 4 + i] = T.if_then_else(visible(s, tile, mi, i, ni), s.rs[(mi * RN + ni) * 4 + i],
                                                                  T.float32(NEG_INF))
                    mx[0] = T.max(mx[0], s.rs[(mi * RN + ni) * 4 + i])
            mx[1] = T.max(s.m[ni], T.rocm.wave_reduce("max", mx[0], lanes=plan.mfma, axis="col") * s.scale)
            mx[2] = T.if_then_else(mx[1] == T.float32(NEG_INF), T.float32(0), mx[1])  # subtracted
            mx[0] = ops.exp2(s.m[ni] - mx[2])  # alpha
            s.m[ni] = mx[1]
            s.l[ni] = s.l[ni] * mx[0]
            for mi in T.unroll(RKV):
                for i in T.unroll(4):
                    s.rs[(mi * RN + ni) * 4 + i] = ops.exp2(s.rs[(mi * RN + ni) * 4 + i] * s.scale - mx[2])
                    s.l[ni] = s.l[ni] + s.rs[(mi * RN + ni) * 4 + i]
            for t in T.unroll(PS):
                for e in T.unroll(8):
                    s.rp[(ni * PS + t) * 8 + e] = epilogue_value(conv, s.rs[((2 * t + e // 4) * RN + ni) * 4 + e % 4])
            for di in T.unroll(RD):
                for i in T.unroll(op.acc_elems):
                    s.ro[(di * RN + ni) * 4 + i] = s.ro[(di * RN + ni) * 4 + i] * mx[0]
    return softmax


def _tile_step(plan: PagedDecodePlan):
    """Macro ``step(s, t0, j, n)``: tile ``t0 + j`` of the split's ``n`` (module docstring)."""
    op = CATALOG[plan.mfma]
    RN, RKV, RD, PS, KS = plan.row_tiles, plan.kv_blocks, plan.d_tiles, plan.pv_steps, plan.k_steps
    mfma = mfma_step(plan.mfma)
    frag_v = fragment_reader(op, "A", "tr", plan.storage, op.a_elems, PS, tr=plan.tr, staged=True)
    load, consume, softmax = _loads(plan), _consume(plan), _softmax(plan)

    @T.macro
    def step(s, t0, j, n):
        if I.constexpr(not plan.config.prefetch):
            load(s, t0 + j)
        consume(s)
        if I.constexpr(plan.config.prefetch):
            if j + 1 < n:
                load(s, t0 + j + 1)
        for r in T.unroll(RKV * RN * op.acc_elems):
            s.rs[r] = T.float32(0)
        for kk in T.unroll(KS):
            mfma(s.Sd, s.Kf[:, kk : kk + 1], s.Qf[:, kk : kk + 1])
        softmax(s, t0 + j)
        for t in T.unroll(PS):
            for di in T.unroll(RD):
                frag_v(s.rv, s.SV, di, t, 0, s.lane, 0)
        for t in T.unroll(PS):
            mfma(s.Od, s.Vf[:, t : t + 1], s.Pf[:, t : t + 1])
    return step


def _partial(plan: PagedDecodePlan):
    """Macro ``partial(s)``: the rows' ``O / l`` (fp8: times ``V_SCALE``; 0 for a row without keys) and
    base-2 LSE (``-inf`` without keys) into the split's slice of ``WORK_O`` / ``WORK_LSE``."""
    op = CATALOG[plan.mfma]
    RN, RD = plan.row_tiles, plan.d_tiles

    @T.macro
    def partial(s):
        tot = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local")])
        for ni in T.unroll(RN):
            tot[0] = T.rocm.wave_reduce("sum", s.l[ni], lanes=plan.mfma, axis="col")
            tot[1] = T.if_then_else(tot[0] > T.float32(0), T.float32(1) / tot[0], T.float32(0))
            if I.constexpr(plan.scaled):
                tot[1] = tot[1] * s.args.V_SCALE[s.kvh]
            if s.r0 + ni * MFMA_ROWS + s.lane % 16 < plan.rows:  # the padding rows are not written
                for di in T.unroll(RD):
                    for i in T.unroll(op.acc_elems):
                        s.args.WORK_O[s.unit, s.split, ni * MFMA_ROWS + s.lane % 16, di * 16 + 4 * (s.lane // 16) + i] = \
                            s.ro[(di * RN + ni) * 4 + i] * tot[1]
            if T.And(s.lane < 16, s.r0 + ni * MFMA_ROWS + s.lane < plan.rows):
                s.args.WORK_LSE[s.unit, s.split, ni * MFMA_ROWS + s.lane] = T.if_then_else(
                    tot[0] > T.float32(0), s.m[ni] + T.call_llvm_pure_intrin(LOG2, tot[0], ty="float32"),
                    T.float32(NEG_INF))
    return partial


def _merge(plan: PagedDecodePlan):
    """Macro ``merge(s)``: the unit's splits in index order into O and the natural LSE: lane ``l`` takes
    row ``l % 16`` of each row tile and head-dim elements ``D / 4`` from ``(l // 16) D / 4``; weights
    ``2^(lse_s - max)`` (a row without keys anywhere: ``O = 0``, ``LSE = -inf``)."""
    p = plan.problem
    D, S, RN = p.head_dim, plan.splits, plan.row_tiles
    part = D // 4
    ops = fused_ops("float32")

    @T.macro
    def merge_row(s, acc, w, rl):
        w[0] = T.float32(NEG_INF)
        for sp in T.serial(S):
            w[0] = T.max(w[0], s.args.WORK_LSE[s.unit, sp, rl])
        w[1] = T.if_then_else(w[0] == T.float32(NEG_INF), T.float32(0), w[0])
        w[3] = T.float32(0)
        for e in T.unroll(part):
            acc[e] = T.float32(0)
        for sp in T.serial(S):
            w[2] = ops.exp2(s.args.WORK_LSE[s.unit, sp, rl] - w[1])
            w[3] = w[3] + w[2]
            for e in T.unroll(part):
                acc[e] = acc[e] + w[2] * s.args.WORK_O[s.unit, sp, rl, s.lane // 16 * part + e]
        w[2] = T.if_then_else(w[3] > T.float32(0), T.float32(1) / w[3], T.float32(0))
        for e in T.unroll(part):
            s.args.O[s.b, (s.r0 + rl) // p.group, s.kvh * p.group + (s.r0 + rl) % p.group,
                     s.lane // 16 * part + e] = epilogue_value(plan.epilogue, acc[e] * w[2])
        if s.lane < 16:
            s.args.LSE[s.b, (s.r0 + rl) // p.group, s.kvh * p.group + (s.r0 + rl) % p.group] = T.if_then_else(
                w[3] > T.float32(0), (w[0] + T.call_llvm_pure_intrin(LOG2, w[3], ty="float32")) * T.float32(LN2),
                T.float32(NEG_INF))

    @T.macro
    def merge(s):
        acc = T.alloc_tensor(ty_args=[T.Tensor((part,), "float32", scope="local")])
        w = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])  # max, its safe form, weight, sum
        for ni in T.unroll(RN):
            rl = ni * MFMA_ROWS + s.lane % 16
            if s.r0 + rl < plan.rows:
                merge_row(s, acc, w, rl)
    return merge


def _finish(plan: PagedDecodePlan):
    """Macro ``finish(s)``: the partial, ``fence_release``, the barrier, the unit's ticket; the last
    split's workgroup merges (``fence_acquire`` first) and resets the ticket."""
    partial, merge = _partial(plan), _merge(plan)

    @T.macro
    def finish(s):
        ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared")])
        partial(s)
        T.rocm.fence_release()
        T.rocm.workgroup_barrier()
        if s.tx == 0:
            ticket[0] = T.rocm.global_atomic_add_u32(s.args.TICKETS, s.unit, T.uint32(1))
        T.rocm.workgroup_barrier()
        if ticket[0] == T.uint32(plan.splits - 1):
            T.rocm.fence_acquire()
            merge(s)
            if s.tx == 0:
                s.args.TICKETS[s.unit] = T.uint32(0)
    return finish


def _score_scale(plan: PagedDecodePlan, args, kvh):
    """The factor from a raw ``q . k`` to base 2: ``scale / ln 2``, fp8 times ``K_SCALE[kvh]``."""
    base = T.float32(plan.problem.softmax_scale / LN2)
    return base * args.K_SCALE[kvh] if plan.scaled else base


def _regs(n: int, dtype: str):
    return T.alloc_tensor(ty_args=[T.Tensor((n,), dtype, scope="local")])


def _view(r, shape, layout, dtype):
    return T.decl_tensor(r.ptr_to([0]), ty_args=[T.Tensor(shape, dtype, scope="local", layout=layout)])


def _body(plan: PagedDecodePlan):
    """Macro ``body(args)``: the workgroup (module docstring)."""
    p = plan.problem
    op = CATALOG[plan.mfma]
    RN, RKV, RD, PS, KS, S = plan.row_tiles, plan.kv_blocks, plan.d_tiles, plan.pv_steps, plan.k_steps, plan.splits
    BKV, st, D = plan.config.block_kv, plan.storage, p.head_dim
    lq, nq = mfma_fragment(op, "B", (RN, KS))
    lk, nk = mfma_fragment(op, "A", (RKV, KS))
    lv, nv = mfma_fragment(op, "A", (RD, PS))
    lp, npr = mfma_fragment(op, "B", (RN, PS))
    ls, ns = mfma_fragment(op, "D", (RKV, RN))
    lo, no = mfma_fragment(op, "D", (RD, RN))
    step, finish, load = _tile_step(plan), _finish(plan), _loads(plan)
    qbytes = p.batch * p.queries * p.heads * D * 2

    @T.macro
    def body(args):
        bid = T.launch_thread("blockIdx.x", plan.groups)
        tx = T.launch_thread("threadIdx.x", THREADS)
        SV = T.alloc_tensor(ty_args=[lds_stage((BKV, plan.lds_row), st, 1)])
        unit = bid // S
        b = unit // (p.kv_heads * plan.row_blocks)
        kvh = unit // plan.row_blocks % p.kv_heads
        r0 = unit % plan.row_blocks * plan.block_rows
        lane = tx % 64
        L = T.min(T.max(args.CONTEXT_LENS[b], 0), p.capacity)
        tiles = (L + (BKV - 1)) // BKV
        per = (tiles + (S - 1)) // S
        t0 = bid % S * per
        n = T.max(T.min(per, tiles - t0), 0)
        rq, rk, rv, rp = _regs(nq, st), _regs(nk, st), _regs(nv, st), _regs(npr, st)
        rs, ro, m, l = _regs(ns, "float32"), _regs(no, "float32"), _regs(RN, "float32"), _regs(RN, "float32")
        kraw, vraw = _regs(RKV * KS * 4 // (2 // plan.kv_esize), "uint32"), _regs(plan.v_chunks * 4, "uint32")
        pg, pgc = _regs(plan.tile_pages, "int32"), _regs(plan.tile_pages, "int32")
        rkw = T.decl_tensor(rk.ptr_to([0]), ty_args=[T.Tensor((nk // 2,), "int32", scope="local")])
        scale = _score_scale(plan, args, kvh)
        Qf, Kf = _view(rq, (RN, KS, op.n, op.k), lq, st), _view(rk, (RKV, KS, op.m, op.k), lk, st)
        Vf, Pf = _view(rv, (RD, PS, op.m, op.k), lv, st), _view(rp, (RN, PS, op.n, op.k), lp, st)
        Sd, Od = _view(rs, (RKV, RN, op.m, op.n), ls, "float32"), _view(ro, (RD, RN, op.m, op.n), lo, "float32")
        s = Wave(args, b, kvh, r0, unit, bid % S, L, pg, pgc, kraw, vraw, rkw, rk=rk, rv=rv, rp=rp, rs=rs, ro=ro,
                 m=m, l=l, Qf=Qf, Kf=Kf, Vf=Vf, Pf=Pf, Sd=Sd, Od=Od, SV=SV, lane=lane, tx=tx, scale=scale)
        for ni in T.unroll(RN):  # the lane's row (lane % 16) of each row tile, zeros past the rows
            for kk in T.unroll(KS):
                rq[T.ramp((ni * KS + kk) * 8, 1, 8)] = T.rocm.buffer_load(
                    args.Q.data, qbytes, T.if_then_else(
                        r0 + ni * MFMA_ROWS + lane % 16 < plan.rows,
                        ((((b * p.queries + (r0 + ni * MFMA_ROWS + lane % 16) // p.group) * p.heads + kvh * p.group
                           + (r0 + ni * MFMA_ROWS + lane % 16) % p.group) * D) + head_dim_of(kk, lane // 16, 0)) * 2,
                        T.int32(BUFFER_OOB)), 0, f"{st}x8")
            m[ni] = T.float32(NEG_INF)
            l[ni] = T.float32(0)
        for r in T.unroll(no):
            ro[r] = T.float32(0)
        if I.constexpr(plan.config.prefetch):
            load(s, t0)
        for j in T.serial(n):
            step(s, t0, j, n)
        finish(s)
    return body


@transpile_once
def emit_gfx950_paged_decode(plan: PagedDecodePlan):
    """The PrimFunc ``paged_decode(Q, K_CACHE, V_CACHE, BLOCK_TABLE, CONTEXT_LENS, O, LSE[, K_SCALE,
    V_SCALE], WORK_O, WORK_LSE, TICKETS)`` of a plan."""
    return kernel_function("paged_decode", plan.params, _body(plan))


__all__ = ["emit_gfx950_paged_decode"]
