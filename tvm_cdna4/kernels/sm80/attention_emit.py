"""Emission of the sm80 attention forward: a :class:`~tvm_cdna4.kernels.sm80.attention_plan.Sm80AttentionPlan`
to a TIRx PrimFunc ``main(Q, K, V, O, LSE)``: Q, K, V and O stored as ``AttentionProblem.layout`` says
(``global_at``, the one index of their every access), LSE ``[B, H, Sq]``.

Every decision is in the plan (its module docstring: work split, fragments, shared memory, masking);
the macros spell it with plain ``T.ptx`` instructions on registers, as the decode GEMM does
(``cuda_decode_emit``): ``cp.async`` 16-byte chunks into the swizzled tiles, ``ldmatrix.x4`` (Q, K)
and ``ldmatrix.x4.trans`` (V) into ``uint32`` fragment words, ``mma.sync.m16n8k16`` on them,
``cvt.rn.*x2.f32`` packing P and O, ``T.exp2`` (NVRTC with TIRx's fast math: ``ex2.approx.ftz.f32``,
``kernels.sm80.gemm_emit.TIR_OPS``) and ``__shfl_xor_sync`` for the quad reductions. The signature is
``kernels.sm80.gemm_emit.signature_source``'s.

Register arrays of a thread (``Regs``; ``m`` = ``m_tiles``): ``qf`` Q fragments (``4 m k_steps``, or
``4 m`` without ``q_regs``: ``qi``), ``o`` the O accumulators (``4 m d_tiles``: ``oi``; element ``c`` = 0,
1 row g, 2, 3 row g + 8), ``s`` the scores (``4 m n_tiles``: ``si``, same order), ``pf`` P packed (4 per
m-tile: the A fragment of one 16-key step), ``kf`` one ldmatrix's four words, ``row`` the running state
of the lane's ``2 m`` rows (max, sum, the tile's max / exponent offset, alpha: ``softmax``).
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...tirx_private import transpile_once
from ..attention.problem import LN2, kv_full_tiles_for, kv_tiles_for, work_item
from .attention_plan import Sm80AttentionPlan, swizzle
from .gemm_emit import signature_source
from .gemm_emit_common import wide_at
from .gemm_emit_epilogue import TIR_OPS

FULL = 0xFFFFFFFF


def fmax(a, b):
    """``fmaxf(a, b)``: one ``FMNMX`` (``T.max`` on floats is written NaN-propagating, ``a > b || a != a ? a
    : b``, three instructions; the scores hold no NaN, and ``-inf`` works either way)."""
    return T.call_pure_extern("fmaxf", a, b, ty=T.float32)


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


def global_at(p: Sm80AttentionPlan, name: str, b, head, row, column) -> list:
    """The index of (``row``, ``column``) of (``b``, ``head``) in Q, K, V or O (``name``) as stored
    (``AttentionProblem.shapes``): ``[b, head, row, column]``, or ``"bshd"`` ``[b, row, head, column]`` (the row
    stride ``H D``, the head stride ``D``); every one but the last through ``wide_index`` (``wide_at``)."""
    if p.problem.layout == "bshd":
        return wide_at(p, name, b, row, head, column)
    return wide_at(p, name, b, head, row, column)


# ---- global -> shared ----------------------------------------------------------------------------


@T.macro
def copy_tile(p, G, SMH, base, b, head, r0, rows, extent, name):
    # rows r0 .. r0+rows-1 of G[b, head] into the swizzled tile at `base`; rows past `extent` zero-filled;
    # name: G's parameter (its indices int64 where the plan says: offsets64)
    tid = T.cuda.thread_idx("x")
    chunk = tid % p.chunks
    for i in T.unroll(p.copy_reps(rows)):
        r = tid // p.chunks + i * (p.threads // p.chunks)
        T.ptx[p.copy_instr](
            SMH.ptr_to([base + r * p.problem.head_dim + swizzle(r, chunk) * 8]),
            G.ptr_to(global_at(p, name, b, head, T.min(r0 + r, extent - 1), chunk * 8)), 16,
            T.if_then_else(r0 + r < extent, T.uint32(16), T.uint32(0)))


@T.macro
def copy_kv(p, args, rg, j, stage):
    copy_tile(p, args["K"], rg.SMH, p.stage_offset(stage, 0), rg.b, rg.hk, j * p.config.block_kv, p.config.block_kv,
              p.problem.seq_kv, "K")
    copy_tile(p, args["V"], rg.SMH, p.stage_offset(stage, 1), rg.b, rg.hk, j * p.config.block_kv, p.config.block_kv,
              p.problem.seq_kv, "V")


# ---- S = Q K^T, the softmax, O += P V --------------------------------------------------------------


def si(p: Sm80AttentionPlan, mi, n, c):
    """Register of score element ``c`` of n-tile ``n`` of the warp's m-tile ``mi`` (``Regs.s``)."""
    return (mi * p.n_tiles + n) * 4 + c


def oi(p: Sm80AttentionPlan, mi, dn, c):
    """Register of O element ``c`` of head-dim n-tile ``dn`` of m-tile ``mi`` (``Regs.o``)."""
    return (mi * p.d_tiles + dn) * 4 + c


def qi(p: Sm80AttentionPlan, mi, kk, q):
    """Register of Q fragment word ``q`` of k-step ``kk`` of m-tile ``mi`` (``Regs.qf``; without
    ``q_regs`` only the current k-step's words are held)."""
    return (mi * (p.k_steps if p.config.q_regs else 1) + (kk if p.config.q_regs else 0)) * 4 + q


def warp_row(p: Sm80AttentionPlan, lane, mi):
    """The CTA row of the lane's fragment row ``lane % 8 + 8 ((lane >> 3) & 1)`` in m-tile ``mi``."""
    return T.cuda.warp_id() * p.config.warp_rows + 16 * mi + lane % 8 + 8 * ((lane >> 3) & 1)


@T.macro
def load_q_step(p, rg, kk):
    # Q's A fragments of k-step kk (ldmatrix.x4: matrices rows 0-7 / 8-15 x chunks 2kk / 2kk+1)
    lane = T.cuda.lane_id()
    for mi in T.unroll(p.config.m_tiles):
        T.ptx[p.ldmatrix](rg.qf[qi(p, mi, kk, 0)], rg.qf[qi(p, mi, kk, 1)], rg.qf[qi(p, mi, kk, 2)],
                          rg.qf[qi(p, mi, kk, 3)],
                          rg.SMH.ptr_to([tile_offset(p, warp_row(p, lane, mi), 2 * kk, lane_xor(lane, 4))]))


@T.macro
def load_q(p, rg):
    # q_regs: every k-step's Q fragments once, for the whole kernel
    if I.constexpr(p.config.q_regs):
        for kk in T.unroll(p.k_steps):
            load_q_step(p, rg, kk)


@T.macro
def mma(p, acc, at, a, kf, half):
    # acc[at[0..3]] += A B on mma.sync m16n8k16: A the four fragment words a, B the words 2 half and
    # 2 half + 1 of the ldmatrix.x4 result kf (one n8 tile of its two)
    T.ptx[p.mma_instr](acc[at[0]], acc[at[1]], acc[at[2]], acc[at[3]], a[0], a[1], a[2], a[3],
                       kf[2 * half], kf[2 * half + 1], acc[at[0]], acc[at[1]], acc[at[2]], acc[at[3]])


@T.macro
def scores(p, rg, kbase, sb, esb=None):
    # S = Q K^T: per k-step, one ldmatrix.x4 of K per key pair of n-tiles (keys 16 np + 0-7 / 8-15 x
    # chunks 2kk / 2kk+1: b0, b1 of n-tile 2np, then of 2np+1), used by every m-tile; esb (overlap): the
    # other buffer's exponentials, n-tile g after the g-th group of MMAs (in the MMAs' shadow)
    lane = T.cuda.lane_id()
    key = lane % 8 + 8 * (lane >> 4)
    for i in T.unroll(4 * p.n_tiles * p.config.m_tiles):
        rg.s[sb + i] = T.float32(0)
    for kk in T.unroll(p.k_steps):
        if I.constexpr(not p.config.q_regs):
            load_q_step(p, rg, kk)
        for np_ in T.unroll(p.n_tiles // 2):
            T.ptx[p.ldmatrix](rg.kf[0], rg.kf[1], rg.kf[2], rg.kf[3],
                              rg.SMH.ptr_to([kbase + tile_offset(p, key + 16 * np_, 2 * kk, lane_xor(lane, 3))]))
            for half in T.unroll(2):
                for mi in T.unroll(p.config.m_tiles):
                    mma(p, rg.s, [sb + si(p, mi, 2 * np_ + half, c) for c in range(4)],
                        [rg.qf[qi(p, mi, kk, c)] for c in range(4)], rg.kf, half)
            if I.constexpr(esb is not None):
                if kk * (p.n_tiles // 2) + np_ < p.n_tiles:
                    exps(p, rg, esb, kk * (p.n_tiles // 2) + np_)


@T.macro
def mask(p, rg, j, sb):
    # -inf for keys past the sequence and, causal, above the row's diagonal
    lane = T.cuda.lane_id()
    for mi in T.unroll(p.config.m_tiles):
        row = rg.q0 + T.cuda.warp_id() * p.config.warp_rows + 16 * mi + lane // 4
        for n in T.unroll(p.n_tiles):
            for c in T.unroll(4):
                key = j * p.config.block_kv + 8 * n + 2 * (lane % 4) + c % 2
                if I.constexpr(p.problem.causal):
                    rg.s[sb + si(p, mi, n, c)] = T.if_then_else(
                        T.or_(key >= p.problem.seq_kv, key > row + 8 * (c // 2)), T.float32(float("-inf")),
                        rg.s[sb + si(p, mi, n, c)])
                else:
                    rg.s[sb + si(p, mi, n, c)] = T.if_then_else(key >= p.problem.seq_kv, T.float32(float("-inf")),
                                                           rg.s[sb + si(p, mi, n, c)])


@T.macro
def softmax(p, rg, sb):
    # the row max and rescale, then every n-tile's exponentials
    row_max(p, rg, sb)
    for n in T.unroll(p.n_tiles):
        exps(p, rg, sb, n)


@T.macro
def row_max(p, rg, sb):
    # per row (m-tile mi, half h; state at ri = 2 mi + h: max row[ri], sum row[2 m + ri], scratch
    # row[4 m + ri], alpha row[6 m + ri]): m' = max(m, rowmax s); alpha = 2^((m - m') c); p = 2^(s c - m' c);
    # l = alpha l + sum p; O *= alpha. rescale_slack: only if some row of the warp grew past the slack
    # (``lazy_rescale``), else the stale maxima stay
    m2 = 2 * p.config.m_tiles
    for mi in T.unroll(p.config.m_tiles):
        for h in T.unroll(2):
            rg.row[2 * m2 + 2 * mi + h] = rg.row[2 * mi + h]
            for n in T.unroll(p.n_tiles):
                rg.row[2 * m2 + 2 * mi + h] = fmax(rg.row[2 * m2 + 2 * mi + h],
                                                    fmax(rg.s[sb + si(p, mi, n, 2 * h)], rg.s[sb + si(p, mi, n, 2 * h + 1)]))
            for sh in T.unroll(2):  # the quad: shfl.xor 1, then 2
                rg.row[2 * m2 + 2 * mi + h] = fmax(rg.row[2 * m2 + 2 * mi + h], T.cuda.__shfl_xor_sync(
                    T.uint32(FULL), rg.row[2 * m2 + 2 * mi + h], 1 << sh, 32))
            if I.constexpr(not p.config.rescale_slack):
                update(p, rg, mi, h)
    if I.constexpr(p.config.rescale_slack):
        lazy_rescale(p, rg)


@T.macro
def update(p, rg, mi, h):
    # the row's alpha = 2^((m - m') c), then its new max, sum and O (rescale)
    c = p.problem.scale_log2
    m2 = 2 * p.config.m_tiles
    rg.row[3 * m2 + 2 * mi + h] = TIR_OPS.exp2(rg.row[2 * mi + h] * T.float32(c) - rg.row[2 * m2 + 2 * mi + h] * T.float32(c))
    rescale(p, rg, mi, h)


def grew(p: Sm80AttentionPlan, rg):
    """Whether one of the lane's rows' new max (``row[4 m + ri]``) exceeds its max (``row[ri]``) by more
    than ``rescale_slack`` in the exponent (``-inf`` before the first tile: always, since tile 0 runs for
    every warp and every row sees key 0 there; a max still ``-inf`` would compare NaN, false)."""
    c, m2 = p.problem.scale_log2, 2 * p.config.m_tiles
    cond = None
    for ri in range(m2):
        term = (rg.row[2 * m2 + ri] - rg.row[ri]) * T.float32(c) > T.float32(p.config.rescale_slack)
        cond = term if cond is None else T.or_(cond, term)
    return T.if_then_else(cond, T.int32(1), T.int32(0))


@T.macro
def lazy_rescale(p, rg):
    # rescale_slack: every row of the warp updates (exactly: alpha from its new max) if one grew past the
    # slack (a warp vote: the branch is uniform); else each keeps its max, p = 2^(s c - m c) <= 2^slack
    c = p.problem.scale_log2
    m2 = 2 * p.config.m_tiles
    if T.cuda.any_sync(T.uint32(FULL), grew(p, rg)) != 0:
        for mi in T.unroll(p.config.m_tiles):
            for h in T.unroll(2):
                update(p, rg, mi, h)
    else:
        for ri in T.unroll(m2):
            rg.row[2 * m2 + ri] = rg.row[ri] * T.float32(c)


@T.macro
def rescale(p, rg, mi, h):
    # the row's new max, its sum and O scaled by alpha (row[6 m + ri])
    c = p.problem.scale_log2
    m2 = 2 * p.config.m_tiles
    alpha = rg.row[3 * m2 + 2 * mi + h]
    rg.row[2 * mi + h] = rg.row[2 * m2 + 2 * mi + h]
    rg.row[2 * m2 + 2 * mi + h] = rg.row[2 * mi + h] * T.float32(c)  # m' c, the exponent's offset
    rg.row[m2 + 2 * mi + h] = rg.row[m2 + 2 * mi + h] * alpha
    for dn in T.unroll(p.d_tiles):
        for e in T.unroll(2):
            rg.o[oi(p, mi, dn, 2 * h + e)] = rg.o[oi(p, mi, dn, 2 * h + e)] * alpha


@T.macro
def exps(p, rg, sb, n):
    # n-tile n's p = 2^(s c - m' c) of every row of the lane, added to the row sums
    c = p.problem.scale_log2
    m2 = 2 * p.config.m_tiles
    for mi in T.unroll(p.config.m_tiles):
        for h in T.unroll(2):
            for e in T.unroll(2):
                rg.s[sb + si(p, mi, n, 2 * h + e)] = TIR_OPS.exp2(rg.s[sb + si(p, mi, n, 2 * h + e)] * T.float32(c)
                                                                  - rg.row[2 * m2 + 2 * mi + h])
                rg.row[m2 + 2 * mi + h] = rg.row[m2 + 2 * mi + h] + rg.s[sb + si(p, mi, n, 2 * h + e)]


@T.macro
def pv(p, rg, vbase, sb):
    # P packed into A fragments (n-tiles 2kk, 2kk+1 = k-step kk), V by ldmatrix.x4.trans (keys 16 kk +
    # 0-7 / 8-15 x chunks 2 dn / 2 dn + 1: b0, b1 of d n-tile 2 dn, then of 2 dn + 1), used by every m-tile
    lane = T.cuda.lane_id()
    key = lane % 8 + 8 * ((lane >> 3) & 1)
    for kk in T.unroll(p.n_tiles // 2):
        for mi in T.unroll(p.config.m_tiles):
            for q in T.unroll(4):
                # a0: tile 2kk row g, a1: row g+8, a2: tile 2kk+1 row g, a3: row g+8 (hi = odd key)
                T.ptx[p.pack_instr](rg.pf[4 * mi + q], rg.s[sb + si(p, mi, 2 * kk + q // 2, 2 * (q % 2) + 1)],
                                    rg.s[sb + si(p, mi, 2 * kk + q // 2, 2 * (q % 2))])
        for dn in T.unroll(p.d_tiles // 2):
            T.ptx[p.ldmatrix_trans](rg.kf[0], rg.kf[1], rg.kf[2], rg.kf[3],
                                    rg.SMH.ptr_to([vbase + tile_offset(p, key + 16 * kk, 2 * dn, lane_xor(lane, 4))]))
            for half in T.unroll(2):
                for mi in T.unroll(p.config.m_tiles):
                    mma(p, rg.o, [oi(p, mi, 2 * dn + half, c) for c in range(4)],
                        [rg.pf[4 * mi + c] for c in range(4)], rg.kf, half)


@T.macro
def kv_tile(p, args, rg, j, n_kv, masked):
    # tile j: its copies landed (this thread's: the wait; every thread's: the barrier, after which
    # every warp is done with tile j - 1's buffer, which tile j + stages - 1 then overwrites)
    # (skew: every warp is done with tile j - 2's buffer, which tile j + stages - 2 then overwrites)
    S, L = p.config.stages, p.config.lead
    T.ptx["cp.async.wait_group"](L - 1)
    T.cuda.cta_sync()
    if j + L < n_kv:
        copy_kv(p, args, rg, j + L, (j + L) % S)
    T.ptx["cp.async.commit_group"]()
    if I.constexpr(p.config.skew):
        if lagging(p):
            if j > 0:  # tile j - 1's softmax and P V (its S and mask: the previous iteration)
                softmax(p, rg, 0)
                pv(p, rg, p.stage_offset((j - 1) % S, 1), 0)
            scores(p, rg, p.stage_offset(j % S, 0), 0)
            if I.constexpr(masked):
                mask(p, rg, j, 0)
        else:
            whole_tile(p, rg, j, masked)
    else:
        whole_tile(p, rg, j, masked)


@T.macro
def init_mbarriers(p, rg):
    # sync="mbarrier": thread 0 initializes every buffer's "full" and "empty" barrier (plan.mbarriers)
    full, empty = p.mbarriers["full"], p.mbarriers["empty"]
    if T.cuda.thread_idx("x") == 0:
        for s in T.unroll(p.config.stages):
            T.ptx.mbarrier.init.shared.b64(rg.SMH.ptr_to([p.mbarrier_elem(full[0] + s)]), T.uint32(full[1]))
            T.ptx.mbarrier.init.shared.b64(rg.SMH.ptr_to([p.mbarrier_elem(empty[0] + s)]), T.uint32(empty[1]))
    T.cuda.cta_sync()


@T.macro
def mb_copy(p, args, rg, t):
    # tile t's copies into buffer t % stages once every warp released its previous use, then this thread's
    # arrival on the buffer's "full" barrier when they land
    S = p.config.stages
    T.cuda.mbarrier_wait(rg.SMH.ptr_to([p.mbarrier_elem(p.mbarriers["empty"][0] + t % S)]), (t // S + 1) % 2)
    copy_kv(p, args, rg, t, t % S)
    T.ptx["cp.async.mbarrier.arrive.noinc.shared.b64"](rg.SMH.ptr_to([p.mbarrier_elem(p.mbarriers["full"][0] + t % S)]))


@T.macro
def mb_tile(p, args, rg, j, n_kv, masked):
    # sync="mbarrier": wait for tile j's data only, compute it, release its buffer (lane 0 per warp), then
    # copy tile j + stages - 1 into tile j - 1's buffer (a warp may run up to a tile ahead of the slowest)
    S, L = p.config.stages, p.config.lead
    T.cuda.mbarrier_wait(rg.SMH.ptr_to([p.mbarrier_elem(p.mbarriers["full"][0] + j % S)]), (j // S) % 2)
    whole_tile(p, rg, j, masked)
    T.cuda.warp_sync()
    if T.cuda.lane_id() == 0:
        T.ptx.mbarrier.arrive.shared.b64(rg.SMH.ptr_to([p.mbarrier_elem(p.mbarriers["empty"][0] + j % S)]),
                                          T.uint32(1))
    if j + L < n_kv:
        mb_copy(p, args, rg, j + L)


def lagging(p: Sm80AttentionPlan):
    """``skew``: whether the warp runs one phase behind (the upper half: warps ``w`` and ``w + warps / 2``
    share an SM sub-partition at 8 warps)."""
    return T.cuda.warp_id() >= p.config.warps // 2


@T.macro
def whole_tile(p, rg, j, masked):
    # tile j's S, mask, softmax and P V; causal with skip_masked, a masked tile is skipped by the warps whose
    # rows are all above its first key (``warp_sees``: all their scores -inf, their state would not change)
    if I.constexpr(masked and p.problem.causal and p.config.skip_masked):
        if warp_sees(p, rg, j):
            tile_body(p, rg, j, masked)
    else:
        tile_body(p, rg, j, masked)


def warp_sees(p: Sm80AttentionPlan, rg, j):
    """Causal: whether the warp's last row (``q0 + (warp + 1) warp_rows - 1``) sees the first key of kv
    tile ``j`` (a warp-uniform condition)."""
    return j * p.config.block_kv <= rg.q0 + (T.cuda.warp_id() + 1) * p.config.warp_rows - 1


@T.macro
def tile_body(p, rg, j, masked):
    S = p.config.stages
    scores(p, rg, p.stage_offset(j % S, 0), 0)
    if I.constexpr(masked):
        mask(p, rg, j, 0)
    softmax(p, rg, 0)
    pv(p, rg, p.stage_offset(j % S, 1), 0)


@T.macro
def overlapped_tile(p, args, rg, j, n_kv, n_full, cur):
    # Sm80AttentionConfig.overlap: tile j's mask and row max, then S of tile j + 1 into the other score
    # buffer with tile j's exponentials between its MMAs (independent of them: the warp issues them while
    # the tensor pipe works), then tile j's P V.
    # Tile j + 1 landed (the wait: tiles j + 2 .. j + stages - 2 may be in flight; the barrier: every
    # warp is done with tile j - 1, whose buffer tile j + stages - 1 then takes)
    S = p.config.stages
    T.ptx["cp.async.wait_group"](S - 3)
    T.cuda.cta_sync()
    if j + S - 1 < n_kv:
        copy_kv(p, args, rg, j + S - 1, (j + S - 1) % S)
    T.ptx["cp.async.commit_group"]()
    if j >= n_full:
        mask(p, rg, j, cur * p.s_regs)
    if j + 1 < n_kv:
        row_max(p, rg, cur * p.s_regs)
        scores(p, rg, p.stage_offset((j + 1) % S, 0), (1 - cur) * p.s_regs, cur * p.s_regs)
    else:
        softmax(p, rg, cur * p.s_regs)
    pv(p, rg, p.stage_offset(j % S, 1), cur * p.s_regs)


@T.macro
def overlapped_loop(p, args, rg, n_kv, n_full):
    # tile 0's scores, then pairs of tiles (static score buffers 0, 1), then an odd last tile
    scores(p, rg, p.stage_offset(0, 0), 0)
    for jj in range(n_kv // 2):
        overlapped_tile(p, args, rg, 2 * jj, n_kv, n_full, 0)
        overlapped_tile(p, args, rg, 2 * jj + 1, n_kv, n_full, 1)
    if n_kv % 2 == 1:
        overlapped_tile(p, args, rg, n_kv - 1, n_kv, n_full, 0)


def unmasked_tiles(p: Sm80AttentionPlan, q0, n_kv):
    """The leading kv tiles no row of the block masks: keys inside the sequence and, causal, at or
    below the block's first row ``q0``."""
    return T.min(n_kv, kv_full_tiles_for(p.problem, p.config.block_q, p.config.block_kv, q0, T.min))


# ---- the end: O / l, LSE -------------------------------------------------------------------------


@T.macro
def finish(p, args, rg):
    # the row sums over the quad, O / l packed and stored (rows inside the sequence), LSE by lane t = 0
    lane = T.cuda.lane_id()
    m2 = 2 * p.config.m_tiles
    packed = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    for mi in T.unroll(p.config.m_tiles):
        row = rg.q0 + T.cuda.warp_id() * p.config.warp_rows + 16 * mi + lane // 4
        for h in T.unroll(2):
            for sh in T.unroll(2):
                rg.row[m2 + 2 * mi + h] = rg.row[m2 + 2 * mi + h] + T.cuda.__shfl_xor_sync(
                    T.uint32(FULL), rg.row[m2 + 2 * mi + h], 1 << sh, 32)
            rg.row[2 * m2 + 2 * mi + h] = T.float32(1) / rg.row[m2 + 2 * mi + h]
            if row + 8 * h < p.problem.seq_q:
                for dn in T.unroll(p.d_tiles):
                    T.ptx[p.pack_instr](packed[0], rg.o[oi(p, mi, dn, 2 * h + 1)] * rg.row[2 * m2 + 2 * mi + h],
                                        rg.o[oi(p, mi, dn, 2 * h)] * rg.row[2 * m2 + 2 * mi + h])
                    T.ptx["st.global.b32"](args["O"].ptr_to(global_at(p, "O", rg.b, rg.h, row + 8 * h,
                                                                      8 * dn + 2 * (lane % 4))), packed[0])
                if lane % 4 == 0:
                    at = wide_at(p, "LSE", rg.b, rg.h, row + 8 * h)
                    args["LSE"][at[0], at[1], at[2]] = (rg.row[2 * mi + h] * T.float32(p.problem.scale_log2)
                                                        + T.log2(rg.row[m2 + 2 * mi + h])) * T.float32(LN2)



# ---- the kernel ----------------------------------------------------------------------------------


@T.macro
def attention_kernel(p, args):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.ctas, block=p.threads, dynamic_smem_bytes=p.smem_bytes))
    pid = T.cuda.block_idx("x")
    # groups of head_group heads one after the other, each longest first, its heads innermost (plan.head_group,
    # attention.problem.work_item)
    bh, qb = work_item(pid, p.q_blocks, p.problem.batch * p.problem.heads, p.head_group,
                       (T.min, T.truncdiv, T.truncmod))
    q0 = qb * p.config.block_q
    h = T.truncmod(bh, p.problem.heads)
    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // 2,), p.storage, scope="shared.dyn", layout="default",
                                           align=1024)])
    m = p.config.m_tiles
    qf = T.alloc_tensor(ty_args=[T.Tensor((4 * m * (p.k_steps if p.config.q_regs else 1),), "uint32", scope="local",
                                          layout="default")])
    o = T.alloc_tensor(ty_args=[T.Tensor((4 * m * p.d_tiles,), "float32", scope="local", layout="default")])
    s = T.alloc_tensor(ty_args=[T.Tensor(((2 if p.config.overlap else 1) * p.s_regs,), "float32", scope="local", layout="default")])
    pf = T.alloc_tensor(ty_args=[T.Tensor((4 * m,), "uint32", scope="local", layout="default")])
    kf = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
    row = T.alloc_tensor(ty_args=[T.Tensor((8 * m,), "float32", scope="local", layout="default")])
    rg = Regs(SMH, qf, o, s, pf, kf, row, T.truncdiv(bh, p.problem.heads), h, p.problem.kv_head(h), q0)
    attention_body(p, args, rg)


@T.macro
def attention_body(p, args, rg):
    n_kv = kv_tiles_for(p.problem, p.config.block_q, p.config.block_kv, rg.q0, p.config.skip_masked, T.min)
    n_full = unmasked_tiles(p, rg.q0, n_kv)
    if I.constexpr(p.config.mbarrier):
        init_mbarriers(p, rg)
    copy_tile(p, args["Q"], rg.SMH, 0, rg.b, rg.h, rg.q0, p.config.block_q, p.problem.seq_q, "Q")
    T.ptx["cp.async.commit_group"]()
    for st in T.unroll(p.config.lead):
        if st < n_kv:
            if I.constexpr(p.config.mbarrier):
                mb_copy(p, args, rg, st)
            else:
                copy_kv(p, args, rg, st, st)
        T.ptx["cp.async.commit_group"]()
    # Q landed (overlap: tile 0 too, whose scores come first)
    T.ptx["cp.async.wait_group"](p.config.lead - (1 if p.config.overlap else 0))
    T.cuda.cta_sync()
    load_q(p, rg)
    for i in T.unroll(4 * p.config.m_tiles * p.d_tiles):
        rg.o[i] = T.float32(0)
    for r in T.unroll(2 * p.config.m_tiles):
        rg.row[r] = T.float32(float("-inf"))
        rg.row[2 * p.config.m_tiles + r] = T.float32(0)
    if I.constexpr(p.config.mbarrier):
        for j in range(n_full):
            mb_tile(p, args, rg, j, n_kv, False)
        for j in range(n_full, n_kv):
            mb_tile(p, args, rg, j, n_kv, True)
    elif I.constexpr(p.config.overlap):
        overlapped_loop(p, args, rg, n_kv, n_full)
    else:
        for j in range(n_full):
            kv_tile(p, args, rg, j, n_kv, False)
        for j in range(n_full, n_kv):
            kv_tile(p, args, rg, j, n_kv, True)
        if I.constexpr(p.config.skew):
            if lagging(p):  # the last tile's softmax and P V
                softmax(p, rg, 0)
                pv(p, rg, p.stage_offset((n_kv - 1) % p.config.stages, 1), 0)
    T.ptx["cp.async.wait_group"](0)
    finish(p, args, rg)


@transpile_once
def emit_sm80_attention(p: Sm80AttentionPlan):
    """The TIRx PrimFunc ``main(Q, K, V, O, LSE)`` of a plan (its parameters: ``p.params``)."""
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p, "attention_kernel"),
                 {"T": T, "attention_kernel": attention_kernel, "p": p, "types": types})


__all__ = ["emit_sm80_attention"]
