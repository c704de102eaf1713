"""Emission of the sm80 paged decode attention: a ``PagedDecodePlan`` to two TIRx PrimFuncs, ``main``
(the split-KV partials) and ``merge`` (``paged_decode_plan``'s docstring tells the whole kernel).

A lane (g = lane / 4, t = lane % 4) of a warp holds, per m16 tile ``mi`` of the query rows: Q's A
fragments (``qf``, 4 words per k16 step), the scores of the tile's 16 keys (``s``: n-tile n, element c:
row g + 8 (c // 2), key 8 n + 2 t + c % 2), P packed (``pf``), the O accumulators (``o``: d-tile dn,
element c: row g + 8 (c // 2), dim ``o_dim(dn, 2 t + c % 2)``) and the running max (base-2 units) and sum of its
rows g and g + 8 (``row``: max at ``2 mi + h``, sum at ``2 m + 2 mi + h``).
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...tirx_private import transpile_once
from ..attention.paged import LN2
from ..gemm.epilogue import LOG2E
from .gemm_emit import signature_source
from .gemm_emit_epilogue import TIR_OPS
from .paged_decode_pdl import serialization
from .paged_decode_plan import COPY, MERGE_BATCH, MERGE_LANES, MERGE_PASS, TILE_KEYS, PagedDecodePlan, balance_tiles

FULL = 0xFFFFFFFF
NEG_INF = float("-inf")
FP8_WIDEN = 256.0  # e4m3 bits moved into f16 give x / 256 (paged_decode_plan's docstring)


def fmax(a, b):
    return T.call_pure_extern("fmaxf", a, b, ty=T.float32)


@attrs.frozen
class Lane:
    """A thread's kernel-wide values (module docstring)."""

    SMW: object
    qf: object
    s: object
    pf: object
    o: object
    row: object
    kb: object  # two B fragment words
    vw: object  # four V words (P V's B fragments of v_per d-tiles)
    pg: object  # the cache pages of the warp's next stages + 1 tiles (warp_loop)
    mx: object  # two f32 scratch values
    b: object
    hk: object
    L: object  # the clamped context
    c: object  # raw score -> base-2 units (fp8: times K_SCALE 256)


def swz(p: PagedDecodePlan, key, word):
    """The shared-memory word of word ``word`` of K / V row ``key`` (the plan's layout: ``smem_word``)."""
    return p.smem_word(key, word)


CONSUMER_BARRIER = 1
"""The named barrier of a CTA's consumer warps where it has a producer warp besides (sm90's TMA kernel)."""


def consumer_sync(p: PagedDecodePlan):
    """A barrier of the CTA's consumer warps: the CTA's own where they are all of it, else ``bar.sync
    CONSUMER_BARRIER`` of their threads."""
    if p.block_threads == p.threads:
        return T.cuda.cta_sync()
    return T.ptx["bar.sync"](T.Cast("uint32", CONSUMER_BARRIER), T.uint32(p.threads))


PRMT = "prmt.b32"
CVT_E4M3 = "cvt.rn.f16x2.e4m3x2"  # PTX ISA 9.7.10.24 (sm_89+): an e4m3 pair (a b16) to f16x2, exactly
K_PAIRS = ((0, 1), (2, 3))  # an fp8 K word's byte pairs (prmt byte indices: a's 0-3)


def v_pairs(c: int) -> tuple[int, int]:
    """The pair of byte ``c`` of two V words (prmt byte indices: ``a``'s ``c``, ``b``'s ``4 + c``)."""
    return c, 4 + c


def fp8_widen(p: PagedDecodePlan) -> float:
    """A widened fp8 value's factor: ``FP8_WIDEN`` where the bits move (``x / 256``), 1 through ``CVT_E4M3``."""
    return 1.0 if p.fp8_cvt else FP8_WIDEN


def f16_of_e4m3(v):
    """Two e4m3 bytes at bits 8-15 and 24-31 of ``v`` (the other bits anything) as f16x2, each ``x / 256``: the
    sign stays, the magnitude moves down one bit (paged_decode_plan's docstring)."""
    return (v & T.uint32(0x80008000)) | ((v >> T.uint32(1)) & T.uint32(0x3F803F80))


@T.macro
def widen(p, buf, i, a, b, pair):
    # buf[i] = the e4m3 bytes pair[0], pair[1] of {b, a} (prmt byte indices) as f16x2 (pair[0] low): moved bits
    # (prmt to bits 8-15 and 24-31, x / 256), or the plan's fp8_cvt (one cvt; a pair of one word, a half of it)
    if I.constexpr(not p.fp8_cvt):
        T.ptx[PRMT](buf[i], a, b, T.uint32(pair[1] << 12 | pair[0] << 4))
        buf[i] = f16_of_e4m3(buf[i])
    elif I.constexpr(pair[1] == pair[0] + 1 and pair[0] % 2 == 0):
        T.ptx[CVT_E4M3](buf[i], T.Cast("uint16", a >> T.uint32(8 * pair[0])))
    else:
        T.ptx[PRMT](buf[i], a, b, T.uint32(pair[1] << 4 | pair[0]))
        T.ptx[CVT_E4M3](buf[i], T.Cast("uint16", buf[i]))


def k_word(p: PagedDecodePlan, ln: Lane, base, key, kk, half):
    """B fragment word ``half`` of k16 step ``kk`` for key ``key``: K[key][16 kk + 2t + 8 half, +1] (16-bit)."""
    t = T.cuda.lane_id() % 4
    return ln.SMW[base + swz(p, key, 8 * kk + t + 4 * half)]


def v_per(p: PagedDecodePlan) -> int:
    """V elements per 32-bit word (2 for 16-bit, 4 for fp8): the d-tiles one word load serves."""
    return 4 // p.elem_bytes


def o_dim(p: PagedDecodePlan, dn, n):
    """The dim of column ``n`` of P V's d-tile ``dn``: ``v_per`` consecutive d-tiles share a word of V per
    column (dims ``v_per (n + 8 (dn // v_per)) + dn % v_per``), so that one load gives ``v_per`` B words."""
    return v_per(p) * (n + 8 * (dn // v_per(p))) + dn % v_per(p)


def v_pair(lo, hi, c):
    """B fragment word of P V from two keys' 16-bit V words: element ``c`` of ``lo`` low, of ``hi`` high."""
    return ((lo >> T.uint32(16 * c)) & T.uint32(0xFFFF)) | ((hi >> T.uint32(16 * c)) << T.uint32(16))


def q_word(p: PagedDecodePlan, kk, t, a):
    """The word of Q's row holding A fragment word ``a`` of k16 step ``kk`` (``a // 2``: the upper dims)."""
    if p.elem_bytes == 2:
        return 8 * kk + t + 4 * (a // 2)
    return 8 * kk + 2 * t + a // 2  # fp8 K: dims 4t .. 4t + 3 of the step


def score_factor(p: PagedDecodePlan, args, hk):
    """Raw score -> base-2 units: ``scale log2(e)``, fp8 times ``K_SCALE[hk] 256 / q_factor``."""
    c = p.problem.softmax_scale * LOG2E / p.q_factor
    return args["K_SCALE"][hk] * T.float32(c * fp8_widen(p)) if p.problem.scaled else T.float32(c)


def value_factor(p: PagedDecodePlan, args, hk):
    """O's factor: fp8 ``V_SCALE[hk] 256``, else 1."""
    return args["V_SCALE"][hk] * T.float32(fp8_widen(p)) if p.problem.scaled else T.float32(1)


def cta_split(p: PagedDecodePlan, pid):
    """The CTA's partition: partition-major (``p.split_major``) ``pid // (batch kv_heads)``, else ``pid % split_kv``."""
    return pid // (p.problem.batch * p.problem.kv_heads) if p.split_major else pid % p.split_kv


def cta_bh(p: PagedDecodePlan, pid):
    """The CTA's (sequence, kv head) ``b kv_heads + g`` in the launch order of ``cta_split``."""
    return pid % (p.problem.batch * p.problem.kv_heads) if p.split_major else pid // p.split_kv


def part_tiles_of(p: PagedDecodePlan, args):
    """A CTA's tiles: the plan's ``part_tiles``; balanced (``p.balance``), ``paged_decode_plan.balance_tiles`` of
    the clamped ``CONTEXT_LENS`` on the device (every sequence's length, loads in flight together)."""
    if not p.balance:
        return p.part_tiles
    lengths = [T.min(T.max(args["CONTEXT_LENS"][i], 0), p.problem.capacity) for i in range(p.problem.batch)]
    return balance_tiles(p.part_tiles, lengths, p.tile_keys, p.config.warps, p.balance, most=T.max)


def page_of(p: PagedDecodePlan, args, ln: Lane, tile, h=0):
    """The cache page of kv tile ``tile``'s half ``h`` of the lane's sequence (read from BLOCK_TABLE; any int32)."""
    if h == 0:
        return args["BLOCK_TABLE"][ln.b, tile * p.tile_keys // p.problem.page_size]
    # a half past L (a capacity of an odd number of 16-key pages): its first half's page, no column past L's
    return args["BLOCK_TABLE"][ln.b, T.min((tile * p.tile_keys + h * TILE_KEYS) // p.problem.page_size,
                                           (ln.L - 1) // p.problem.page_size)]


def pg_at(p: PagedDecodePlan, k, h=0):
    """The page ring's entry of the warp's ``k``-th next tile's page ``h`` (``tile_pages`` entries a tile)."""
    return k if p.tile_pages == 1 else k * p.tile_pages + h


def ring_pages(p: PagedDecodePlan, ln: Lane, k):
    """The pages of the warp's ``k``-th next tile: one expression, or a tuple of one per half (``tile_pages``)."""
    if p.tile_pages == 1:
        return ln.pg[k]
    return tuple(ln.pg[pg_at(p, k, h)] for h in range(p.tile_pages))


def half_page(p: PagedDecodePlan, page, h):
    """The page of a tile's half ``h`` (``page``: ``ring_pages``' value)."""
    return page if p.tile_pages == 1 else page[h]


def first_key(p: PagedDecodePlan, tile, h):
    """The first key of tile ``tile``'s half ``h`` in its sequence."""
    return tile * p.tile_keys if h == 0 else tile * p.tile_keys + h * TILE_KEYS


def plus(a, b):
    """``a + b``, ``a`` itself where ``b`` is 0 (the 16-key tiles' expressions as they were)."""
    return a if isinstance(b, int) and b == 0 else a + b


def pf_at(p: PagedDecodePlan, mi, kh):
    """P's first A word of m-tile ``mi``'s half ``kh`` (4 words a half)."""
    return plus(4 * p.halves * mi, 4 * kh)


def n_ok(p: PagedDecodePlan, ok, page, n):
    """Whether n8 tile ``n``'s page is inside the cache (``ok``: the first page's; a wide tile of two pages: its
    half's)."""
    return ok if p.tile_pages == 1 else T.if_then_else(n < 2, ok, page_ok(p, page[1]))


def page_ok(p: PagedDecodePlan, page):
    return T.and_(page >= 0, page < p.problem.num_pages)


@T.macro
def copy_tile(p, args, ln, tile, stage, page):
    # the tile's K and V rows into the warp's ring, a 16-key half at a time (each inside one page)
    copy_half(p, args, ln, tile, stage, half_page(p, page, 0), 0)
    if I.constexpr(p.halves > 1):
        copy_half(p, args, ln, tile, stage, half_page(p, page, 1), 1)


@T.macro
def copy_half(p, args, ln, tile, stage, page, h):
    # half h's 16 K and V rows into the warp's ring; rows of a missing page or past L: zeros, from page 0
    lane = T.cuda.lane_id()
    safe = T.if_then_else(page_ok(p, page), page, 0)
    r0 = first_key(p, tile, h) % p.problem.page_size
    for i in T.unroll(TILE_KEYS * p.chunks // 32):
        key = (lane + 32 * i) // p.chunks
        chunk = (lane + 32 * i) % p.chunks
        size = T.if_then_else(T.and_(page_ok(p, page), first_key(p, tile, h) + key < ln.L), T.uint32(16),
                              T.uint32(0))
        dst = key * p.row_words + (chunk ^ (key % p.swizzle)) * 4
        T.ptx[COPY](ln.SMW.ptr_to([plus(p.ring_word(T.cuda.warp_id(), stage, 0), h * p.tile_words // p.halves) + dst]),
                    args["K_CACHE"].ptr_to([safe, r0 + key, ln.hk, chunk * 16 // p.elem_bytes]), 16, size)
        T.ptx[COPY](ln.SMW.ptr_to([plus(p.ring_word(T.cuda.warp_id(), stage, 1), h * p.tile_words // p.halves) + dst]),
                    args["V_CACHE"].ptr_to([safe, r0 + key, ln.hk, chunk * 16 // p.elem_bytes]), 16, size)


@T.macro
def scores(p, ln, base):
    lane = T.cuda.lane_id()
    g = lane // 4
    for i in T.unroll(8 * p.halves * p.m_tiles):
        ln.s[i] = T.float32(0)
    for kk in T.unroll(p.problem.head_dim // 16):
        for n in T.unroll(2 * p.halves):
            b0 = ln.kb
            if p.elem_bytes == 2:
                b0[0] = k_word(p, ln, base, 8 * n + g, kk, 0)
                b0[1] = k_word(p, ln, base, 8 * n + g, kk, 1)
            else:  # fp8: the word K[key][16 kk + 4t .. + 3] feeds both halves (Q permuted alike)
                ln.vw[0] = ln.SMW[base + swz(p, 8 * n + g, 4 * kk + lane % 4)]
                widen(p, b0, 0, ln.vw[0], ln.vw[0], K_PAIRS[0])
                widen(p, b0, 1, ln.vw[0], ln.vw[0], K_PAIRS[1])
            for mi in T.unroll(p.m_tiles):
                q = (mi * (p.problem.head_dim // 16) + kk) * 4
                at = (mi * (2 * p.halves) + n) * 4
                T.ptx[p.mma_instr](ln.s[at], ln.s[at + 1], ln.s[at + 2], ln.s[at + 3], ln.qf[q], ln.qf[q + 1],
                                   ln.qf[q + 2], ln.qf[q + 3], b0[0], b0[1], ln.s[at], ln.s[at + 1], ln.s[at + 2],
                                   ln.s[at + 3])


@T.macro
def mask_softmax(p, ln, tile, page):
    # base-2 scores, the mask (paged module: j <= L - q + query, a page inside the cache), the online softmax
    lane = T.cuda.lane_id()
    ok = page_ok(p, half_page(p, page, 0))
    m2 = 2 * p.m_tiles
    mx = ln.mx
    for mi in T.unroll(p.m_tiles):
        for h in T.unroll(2):
            r = 16 * mi + lane // 4 + 8 * h
            limit = ln.L - p.problem.queries + r // p.problem.group
            mx[0] = T.float32(NEG_INF)
            for n in T.unroll(2 * p.halves):
                for e in T.unroll(2):
                    key = tile * p.tile_keys + 8 * n + 2 * (lane % 4) + e
                    at = (mi * (2 * p.halves) + n) * 4 + 2 * h + e
                    ln.s[at] = T.if_then_else(T.and_(n_ok(p, ok, page, n), T.and_(key <= limit, r < p.rows)),
                                              ln.s[at] * ln.c, T.float32(NEG_INF))
                    mx[0] = fmax(mx[0], ln.s[at])
            for sh in T.unroll(2):
                mx[0] = fmax(mx[0], T.cuda.__shfl_xor_sync(T.uint32(FULL), mx[0], 1 << sh, 32))
            mx[0] = fmax(mx[0], ln.row[2 * mi + h])  # the new max
            mx[1] = T.if_then_else(mx[0] == T.float32(NEG_INF), T.float32(0), mx[0])  # its offset (empty: 0)
            if mx[0] > ln.row[2 * mi + h]:  # O and the sum rescaled only where the max grew (mostly early tiles)
                alpha = TIR_OPS.exp2(ln.row[2 * mi + h] - mx[1])
                ln.row[2 * mi + h] = mx[0]
                ln.row[m2 + 2 * mi + h] = ln.row[m2 + 2 * mi + h] * alpha
                for dn in T.unroll(p.problem.head_dim // 8):
                    for e in T.unroll(2):
                        ln.o[(mi * (p.problem.head_dim // 8) + dn) * 4 + 2 * h + e] = \
                            ln.o[(mi * (p.problem.head_dim // 8) + dn) * 4 + 2 * h + e] * alpha
            for n in T.unroll(2 * p.halves):
                for e in T.unroll(2):
                    at = (mi * (2 * p.halves) + n) * 4 + 2 * h + e
                    ln.s[at] = TIR_OPS.exp2(ln.s[at] - mx[1])
                    ln.row[m2 + 2 * mi + h] = ln.row[m2 + 2 * mi + h] + ln.s[at]


@T.macro
def pv(p, ln, base):
    lane = T.cuda.lane_id()
    g, t = lane // 4, lane % 4
    for mi in T.unroll(p.m_tiles):
        for q in T.unroll(4 * p.halves):  # a0: keys 2t.. row g, a1: row g + 8, a2 / a3: keys 8 + 2t.. (per half)
            T.ptx[p.pack_instr](ln.pf[4 * p.halves * mi + q], ln.s[(mi * (2 * p.halves) + q // 2) * 4 + 2 * (q % 2) + 1],
                                ln.s[(mi * (2 * p.halves) + q // 2) * 4 + 2 * (q % 2)])
    pv_half(p, ln, base, g, t, 0)
    if I.constexpr(p.halves > 1):  # a wide tile's second k16 step: keys 16.. (rows 16.. of the ring's tile)
        pv_half(p, ln, base + TILE_KEYS * p.row_words, g, t, 1)


@T.macro
def pv_half(p, ln, base, g, t, kh):
    # O += P V over the tile's half kh (16 keys from ``base``): P's A words pf[4 kh ..] of each m-tile
    per = v_per(p)
    for j in T.unroll(p.problem.head_dim // 8 // per):
        for kq in T.unroll(4):  # the words of keys 2t, 2t + 1, 2t + 8, 2t + 9 at dims o_dim(8 j per.., g)
            ln.vw[kq] = ln.SMW[base + swz(p, 2 * t + kq % 2 + 8 * (kq // 2), g + 8 * j)]
        for c in range(per):  # Python: the selectors are constants
            b = ln.kb
            if p.elem_bytes == 2:
                b[0] = v_pair(ln.vw[0], ln.vw[1], c)
                b[1] = v_pair(ln.vw[2], ln.vw[3], c)
            else:
                widen(p, b, 0, ln.vw[0], ln.vw[1], v_pairs(c))
                widen(p, b, 1, ln.vw[2], ln.vw[3], v_pairs(c))
            for mi in T.unroll(p.m_tiles):
                at = (mi * (p.problem.head_dim // 8) + per * j + c) * 4
                T.ptx[p.mma_instr](ln.o[at], ln.o[at + 1], ln.o[at + 2], ln.o[at + 3], ln.pf[pf_at(p, mi, kh)],
                                   ln.pf[pf_at(p, mi, kh) + 1], ln.pf[pf_at(p, mi, kh) + 2],
                                   ln.pf[pf_at(p, mi, kh) + 3], b[0], b[1], ln.o[at], ln.o[at + 1], ln.o[at + 2],
                                   ln.o[at + 3])


@T.macro
def issue_q(p, args, ln):
    # Q's rows (r: query r // group, head hk group + r % group; rows past group x queries: zeros) into shared
    # memory: one cp.async group, committed before the warps' first tiles (q_fragments waits for it alone)
    D, G = p.problem.head_dim, p.problem.group
    chunks = D // 8
    for i in T.unroll((16 * p.m_tiles * chunks + p.threads - 1) // p.threads):
        idx = T.cuda.thread_idx("x") + p.threads * i
        r = idx // chunks
        if idx < 16 * p.m_tiles * chunks:
            rr = T.min(r, p.rows - 1)
            T.ptx[COPY](ln.SMW.ptr_to([r * (D // 2) + idx % chunks * 4]),
                        args["Q"].ptr_to([ln.b, rr // G, ln.hk * G + rr % G, idx % chunks * 8]), 16,
                        T.if_then_else(r < p.rows, T.uint32(16), T.uint32(0)))
    T.ptx["cp.async.commit_group"]()


@T.macro
def q_fragments(p, ln):
    # Q's A fragments once its group landed (the stages - 1 tile groups after it may still fly; fp8 K: dims
    # permuted as K's words, 4t .. 4t + 3 per k16 step)
    lane = T.cuda.lane_id()
    D = p.problem.head_dim
    T.ptx["cp.async.wait_group"](p.q_wait_groups)
    consumer_sync(p)
    g, t = lane // 4, lane % 4
    for mi in T.unroll(p.m_tiles):
        for kk in T.unroll(D // 16):
            for a in T.unroll(4):  # a0 row g, a1 row g + 8, a2 / a3 the upper dims
                word = ln.SMW[(16 * mi + g + 8 * (a % 2)) * (D // 2) + q_word(p, kk, t, a)]
                if p.q_factor == 1:
                    ln.qf[(mi * (D // 16) + kk) * 4 + a] = word
                else:  # bf16 -> f32 (exact) x q_factor -> f16 (paged_decode_plan's docstring)
                    f = T.float32(p.q_factor)
                    T.ptx[p.pack_instr](ln.qf[(mi * (D // 16) + kk) * 4 + a],
                                        T.reinterpret(word & T.uint32(0xFFFF0000), ty="float32") * f,
                                        T.reinterpret(word << T.uint32(16), ty="float32") * f)


def smf(ln: Lane, word):
    """The f32 at word ``word`` of shared memory (the CTA's merge area, ``PagedDecodePlan.o_word``)."""
    return T.reinterpret(ln.SMW[word], ty="float32")


@T.macro
def put(ln, word, value, add):
    if add:
        ln.SMW[word] = T.reinterpret(smf(ln, word) + value, ty="uint32")
    else:
        ln.SMW[word] = T.reinterpret(value, ty="uint32")


@T.macro
def rescale_to_cta_max(p, ln):
    # each warp's rows to the CTA's maxima (the warps' maxima in shared memory): O and the sum times 2^(m - M)
    lane = T.cuda.lane_id()
    m2 = 2 * p.m_tiles
    for mi in T.unroll(p.m_tiles):
        for h in T.unroll(2):
            r = T.min(16 * mi + lane // 4 + 8 * h, p.rows - 1)
            ln.mx[0] = T.float32(NEG_INF)
            for w in T.unroll(p.config.warps):
                ln.mx[0] = fmax(ln.mx[0], smf(ln, w * p.rows + r))
            ln.mx[1] = TIR_OPS.exp2(ln.row[2 * mi + h] - T.if_then_else(ln.mx[0] == T.float32(NEG_INF), T.float32(0),
                                                                        ln.mx[0]))
            ln.row[m2 + 2 * mi + h] = ln.row[m2 + 2 * mi + h] * ln.mx[1]
            for dn in T.unroll(p.problem.head_dim // 8):
                for e in T.unroll(2):
                    ln.o[(mi * (p.problem.head_dim // 8) + dn) * 4 + 2 * h + e] = \
                        ln.o[(mi * (p.problem.head_dim // 8) + dn) * 4 + 2 * h + e] * ln.mx[1]


@T.macro
def add_warp_state(p, ln, add):
    # this warp's rescaled O and sums into the CTA's (``add`` False: the first warp stores)
    lane = T.cuda.lane_id()
    m2, D = 2 * p.m_tiles, p.problem.head_dim
    for mi in T.unroll(p.m_tiles):
        for h in T.unroll(2):
            r = 16 * mi + lane // 4 + 8 * h
            if r < p.rows:
                for dn in T.unroll(D // 8):
                    for e in T.unroll(2):
                        put(ln, p.o_word + r * D + o_dim(p, dn, 2 * (lane % 4) + e),
                            ln.o[(mi * (D // 8) + dn) * 4 + 2 * h + e], add)
                if lane % 4 == 0:
                    put(ln, p.l_word + r, ln.row[m2 + 2 * mi + h], add)


@T.macro
def write_partial(p, args, ln, slot, vscale):
    # the warps' states merged in shared memory (over Q and the rings), then the CTA's one partial
    lane = T.cuda.lane_id()
    m2, W, D = 2 * p.m_tiles, p.config.warps, p.problem.head_dim
    consumer_sync(p)  # every warp is past its loop: Q and the rings are free
    for mi in T.unroll(p.m_tiles):
        for h in T.unroll(2):
            r = 16 * mi + lane // 4 + 8 * h
            for sh in T.unroll(2):
                ln.row[m2 + 2 * mi + h] = ln.row[m2 + 2 * mi + h] + T.cuda.__shfl_xor_sync(
                    T.uint32(FULL), ln.row[m2 + 2 * mi + h], 1 << sh, 32)
            if T.and_(r < p.rows, lane % 4 == 0):
                put(ln, T.cuda.warp_id() * p.rows + r, ln.row[2 * mi + h], False)
    consumer_sync(p)
    rescale_to_cta_max(p, ln)
    for w in T.unroll(W):
        if T.cuda.warp_id() == w:
            add_warp_state(p, ln, w > 0)
        consumer_sync(p)
    tid = T.cuda.thread_idx("x")
    for i in T.unroll((p.rows * D + p.threads - 1) // p.threads):
        idx = tid + p.threads * i
        if idx < p.rows * D:
            args["WO"][slot, idx // D, idx % D] = smf(ln, p.o_word + idx) * vscale
    for i in T.unroll((p.rows + p.threads - 1) // p.threads):  # rows may outnumber the threads (one warp)
        r = tid + p.threads * i
        if r < p.rows:
            ln.mx[0] = T.float32(NEG_INF)
            for w in T.unroll(W):
                ln.mx[0] = fmax(ln.mx[0], smf(ln, w * p.rows + r))
            args["WM"][slot, r] = ln.mx[0]
            args["WL"][slot, r] = smf(ln, p.l_word + r)


@T.macro
def warp_prologue(p, args, ln, first, count):
    # the pages of the warp's first S + 1 tiles (pg[k]: tile i + k in the loop), its first S - 1 tiles' copies
    S, W = p.config.stages, p.config.warps
    for k in T.unroll(S + 1):
        if k < count:
            ln.pg[pg_at(p, k)] = page_of(p, args, ln, first + k * W)
            if I.constexpr(p.tile_pages > 1):
                ln.pg[pg_at(p, k, 1)] = page_of(p, args, ln, first + k * W, 1)
    for st in T.unroll(S - 1):
        if st < count:
            copy_tile(p, args, ln, first + st * W, st, ring_pages(p, ln, st))
        T.ptx["cp.async.commit_group"]()


@T.macro
def warp_loop(p, args, ln, first, count):
    # the warp's tiles first, first + warps, ... (count of them) through its stages-deep ring; each tile's page
    # read from the table two iterations before its copy (warp_prologue read the first ones)
    S, W = p.config.stages, p.config.warps
    for i in range(count):
        T.ptx["cp.async.wait_group"](S - 2)
        T.cuda.warp_sync()
        if i + S - 1 < count:
            copy_tile(p, args, ln, first + (i + S - 1) * W, (i + S - 1) % S, ring_pages(p, ln, S - 1))
        T.ptx["cp.async.commit_group"]()
        scores(p, ln, p.ring_word(T.cuda.warp_id(), i % S, 0))
        mask_softmax(p, ln, first + i * W, ring_pages(p, ln, 0))
        for k in T.unroll(S * p.tile_pages):
            ln.pg[k] = ln.pg[k + p.tile_pages]
        if i + 1 + S < count:
            ln.pg[pg_at(p, S)] = page_of(p, args, ln, first + (i + 1 + S) * W)
            if I.constexpr(p.tile_pages > 1):
                ln.pg[pg_at(p, S, 1)] = page_of(p, args, ln, first + (i + 1 + S) * W, 1)
        pv(p, ln, p.ring_word(T.cuda.warp_id(), i % S, 1))
    T.ptx["cp.async.wait_group"](0)


def register_cap(p: PagedDecodePlan):
    """main's ``__launch_bounds__(threads, min_ctas)`` (the plan's ``min_ctas``; 0: None, ``__launch_bounds__``
    of the threads alone, as before)."""
    return T.cuda.KernelAttributes(min_blocks_per_sm=p.min_ctas) if p.min_ctas else None


@T.macro
def grid_wait(p):
    # PDL: wait for the kernels before this one in the stream, then let the next one start (paged_decode_pdl)
    if I.constexpr(p.pdl):
        T.ptx["griddepcontrol.wait"]()
        T.ptx["griddepcontrol.launch_dependents"]()


@T.macro
def paged_kernel(p, args):
    cta_kernel(p, args, paged_body)


@T.macro
def cta_kernel(p, args, body):
    # the launch, the CTA's (sequence, kv head, partition) and its lanes' state; then body(p, args, ln, split, bh)
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.ctas, block=p.block_threads, dynamic_smem_bytes=p.smem_bytes,
                                              programmatic_stream_serialization=serialization(p)),
                   kernel_attrs=register_cap(p))
    pid = T.cuda.block_idx("x")
    split = cta_split(p, pid)
    bh = cta_bh(p, pid)
    b = bh // p.problem.kv_heads
    hk = bh % p.problem.kv_heads
    SMW = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn", layout="default",
                                           align=1024)])
    m, D = p.m_tiles, p.problem.head_dim
    qf = T.alloc_tensor(ty_args=[T.Tensor((4 * m * (D // 16),), "uint32", scope="local", layout="default")])
    s = T.alloc_tensor(ty_args=[T.Tensor((8 * p.halves * m,), "float32", scope="local", layout="default")])
    pf = T.alloc_tensor(ty_args=[T.Tensor((4 * p.halves * m,), "uint32", scope="local", layout="default")])
    o = T.alloc_tensor(ty_args=[T.Tensor((4 * m * (D // 8),), "float32", scope="local", layout="default")])
    row = T.alloc_tensor(ty_args=[T.Tensor((4 * m,), "float32", scope="local", layout="default")])
    kb = T.alloc_tensor(ty_args=[T.Tensor((2,), "uint32", scope="local", layout="default")])
    mx = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local", layout="default")])
    vw = T.alloc_tensor(ty_args=[T.Tensor((4,), "uint32", scope="local", layout="default")])
    pg = T.alloc_tensor(ty_args=[T.Tensor(((p.config.stages + 1) * p.tile_pages,), "int32", scope="local",
                                          layout="default")])
    grid_wait(p)  # PDL: before the first global read (paged_decode_pdl)
    L = T.min(T.max(args["CONTEXT_LENS"][b], 0), p.problem.capacity)
    if I.constexpr(p.halves > 1):  # wide tiles: the score factor once a CTA (its K_SCALE load out of the loop)
        c = score_factor(p, args, hk)
        body(p, args, Lane(SMW, qf, s, pf, o, row, kb, vw, pg, mx, b, hk, L, c), split, bh)
    else:
        ln = Lane(SMW, qf, s, pf, o, row, kb, vw, pg, mx, b, hk, L, score_factor(p, args, hk))
        body(p, args, ln, split, bh)


@T.macro
def empty_state(p, ln):
    # O = 0, every row's max -inf and sum 0: no key seen yet
    for i in T.unroll(4 * p.m_tiles * (p.problem.head_dim // 8)):
        ln.o[i] = T.float32(0)
    for r in T.unroll(2 * p.m_tiles):
        ln.row[r] = T.float32(NEG_INF)
        ln.row[2 * p.m_tiles + r] = T.float32(0)


@T.macro
def paged_body(p, args, ln, split, bh):
    # the CTA's partition (paged_decode_plan: fixed keys; the grid's last takes the rest; past L: exit at once)
    W = p.config.warps
    tiles = (ln.L + p.tile_keys - 1) // p.tile_keys
    t0 = split * part_tiles_of(p, args)  # (no name for it: a Python int binds a variable in the code)
    if t0 < tiles:
        t1 = T.if_then_else(split == p.split_kv - 1, tiles, T.min(t0 + part_tiles_of(p, args), tiles))
        w = T.cuda.warp_id()
        count = T.max(t1 - t0 - w + W - 1, 0) // W
        issue_q(p, args, ln)
        warp_prologue(p, args, ln, t0 + w, count)  # the table and the first tiles in flight while Q lands
        q_fragments(p, ln)
        empty_state(p, ln)
        warp_loop(p, args, ln, t0 + w, count)
        write_partial(p, args, ln, bh * p.split_kv + split, value_factor(p, args, ln.hk))
        if I.constexpr(p.last_cta):
            last_cta(p, args, bh, tiles)
    if I.constexpr(p.last_cta):
        if T.and_(tiles == 0, split == 0):  # a sequence of no key: its first CTA writes O = 0, LSE = -inf
            cta_merge(p, args, bh, 0)


def off(base, i):
    """``base + i`` (``base`` 0: ``i`` itself, the merge kernel's indices as they were)."""
    return i if isinstance(base, int) and base == 0 else base + i


@T.macro
def merge_batch(p, args, acc, w, valid, slot, r, dp, cg=False, a=0, b=0, nb=MERGE_BATCH):
    # an online merge of nb partials at once (their loads in flight together; past valid: max -inf,
    # the last valid slot's values weighted 0): acc[a ..] = (max, -, sum, O pair), w[b ..] the loads; cg: the
    # loads through ld.global.cg (the last-CTA merge reads what other CTAs of the launch wrote)
    for j in T.unroll(nb):
        at = T.min(slot + j, slot + valid - 1)
        if I.constexpr(cg):
            T.ptx["ld.global.cg.f32"](w[off(b, 4 * j)], args["WM"].ptr_to([at, r]))
            w[off(b, 4 * j)] = T.if_then_else(j < valid, w[off(b, 4 * j)], T.float32(NEG_INF))
            T.ptx["ld.global.cg.f32"](w[off(b, 4 * j + 1)], args["WL"].ptr_to([at, r]))
            T.ptx["ld.global.cg.f32"](w[off(b, 4 * j + 2)], args["WO"].ptr_to([at, r, 2 * dp]))
            T.ptx["ld.global.cg.f32"](w[off(b, 4 * j + 3)], args["WO"].ptr_to([at, r, 2 * dp + 1]))
        else:
            w[4 * j] = T.if_then_else(j < valid, args["WM"][at, r], T.float32(NEG_INF))
            w[4 * j + 1] = args["WL"][at, r]
            w[4 * j + 2] = args["WO"][at, r, 2 * dp]
            w[4 * j + 3] = args["WO"][at, r, 2 * dp + 1]
    acc[off(a, 1)] = acc[off(a, 0)]
    for j in T.unroll(nb):
        acc[off(a, 1)] = fmax(acc[off(a, 1)], w[off(b, 4 * j)])
    f = TIR_OPS.exp2(acc[off(a, 0)] - T.if_then_else(acc[off(a, 1)] == T.float32(NEG_INF), T.float32(0),
                                                      acc[off(a, 1)]))
    acc[off(a, 2)] = acc[off(a, 2)] * f
    acc[off(a, 3)] = acc[off(a, 3)] * f
    acc[off(a, 4)] = acc[off(a, 4)] * f
    acc[off(a, 0)] = acc[off(a, 1)]
    for j in T.unroll(nb):
        g = TIR_OPS.exp2(w[off(b, 4 * j)] - T.if_then_else(acc[off(a, 0)] == T.float32(NEG_INF), T.float32(0),
                                                          acc[off(a, 0)]))
        acc[off(a, 2)] = acc[off(a, 2)] + g * w[off(b, 4 * j + 1)]
        acc[off(a, 3)] = acc[off(a, 3)] + g * w[off(b, 4 * j + 2)]
        acc[off(a, 4)] = acc[off(a, 4)] + g * w[off(b, 4 * j + 3)]


@T.macro
def merge_kernel(p, args):
    # MERGE_LANES adjacent lanes per (row, dim pair) item (whole warps: the items are a multiple of 64), each
    # merging a contiguous share of the n partials, then combined across the lanes by shfl.xor
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.merge_ctas, block=p.merge_threads,
                                              programmatic_stream_serialization=serialization(p)))
    half = p.problem.head_dim // 2
    lanes = T.cuda.block_idx("x") * p.merge_threads + T.cuda.thread_idx("x")
    item = lanes // MERGE_LANES
    lane = lanes % MERGE_LANES
    if item < p.problem.batch * p.problem.kv_heads * p.merge_items:
        dp = item % half
        r = item // half % p.rows
        bh = item // half // p.rows
        parts = p.split_kv
        grid_wait(p)  # PDL: every global read after it (paged_decode_pdl)
        L = T.min(T.max(args["CONTEXT_LENS"][bh // p.problem.kv_heads], 0), p.problem.capacity)
        if I.constexpr(p.balance):  # the partitions written (empty ones: never)
            pt = part_tiles_of(p, args)
            n = T.min(((L + p.tile_keys - 1) // p.tile_keys + pt - 1) // pt, parts)
        else:
            n = T.min((L + p.partition - 1) // p.partition, parts)
        share = (n + MERGE_LANES - 1) // MERGE_LANES
        first = T.min(lane * share, n)
        count = T.min(n - first, share)
        acc = T.alloc_tensor(ty_args=[T.Tensor((5,), "float32", scope="local", layout="default")])
        w = T.alloc_tensor(ty_args=[T.Tensor((4 * MERGE_BATCH,), "float32", scope="local", layout="default")])
        acc[0] = T.float32(NEG_INF)
        acc[2] = T.float32(0)
        acc[3] = T.float32(0)
        acc[4] = T.float32(0)
        for k4 in range((count + MERGE_BATCH - 1) // MERGE_BATCH):
            merge_batch(p, args, acc, w, T.min(count - MERGE_BATCH * k4, MERGE_BATCH),
                        bh * parts + first + MERGE_BATCH * k4, r, dp)
        merge_lanes(acc, w)
        if lane == 0:
            merge_store(p, args, acc, bh, r, dp)


@T.macro
def merge_lanes(acc, w):
    # the butterfly over MERGE_LANES lanes of the states acc (max, -, sum, O pair): w[0 .. 3] the partner's,
    # acc[1] the joint max, w[4] and w[5] the two states' factors (a state of max -inf: factor 0)
    for sh in T.unroll(MERGE_LANES.bit_length() - 1):
        w[0] = T.cuda.__shfl_xor_sync(T.uint32(FULL), acc[0], 1 << sh, 32)
        w[1] = T.cuda.__shfl_xor_sync(T.uint32(FULL), acc[2], 1 << sh, 32)
        w[2] = T.cuda.__shfl_xor_sync(T.uint32(FULL), acc[3], 1 << sh, 32)
        w[3] = T.cuda.__shfl_xor_sync(T.uint32(FULL), acc[4], 1 << sh, 32)
        acc[1] = fmax(acc[0], w[0])
        w[5] = T.if_then_else(acc[1] == T.float32(NEG_INF), T.float32(0), acc[1])
        w[4] = TIR_OPS.exp2(acc[0] - w[5])
        w[5] = TIR_OPS.exp2(w[0] - w[5])
        acc[2] = acc[2] * w[4] + w[1] * w[5]
        acc[3] = acc[3] * w[4] + w[2] * w[5]
        acc[4] = acc[4] * w[4] + w[3] * w[5]
        acc[0] = acc[1]


@T.macro
def merge_store(p, args, acc, bh, r, dp, a=0):
    G = p.problem.group
    b, hk = bh // p.problem.kv_heads, bh % p.problem.kv_heads
    inv = T.if_then_else(acc[off(a, 2)] > T.float32(0), T.float32(1) / acc[off(a, 2)], T.float32(0))
    packed = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    T.ptx[p.out_pack](packed[0], acc[off(a, 4)] * inv, acc[off(a, 3)] * inv)
    T.ptx["st.global.b32"](args["O"].ptr_to([b, r // G, hk * G + r % G, 2 * dp]), packed[0])
    if dp == 0:
        args["LSE"][b, r // G, hk * G + r % G] = T.if_then_else(
            acc[off(a, 2)] > T.float32(0), (acc[off(a, 0)] + T.log2(acc[off(a, 2)])) * T.float32(LN2), T.float32(NEG_INF))


@T.macro
def cta_merge(p, args, bh, n):
    # the last CTA of (sequence, kv head) bh merges its n partials (n 0: O = 0, LSE = -inf), last_pass (row,
    # dim pair) items per thread a pass, last_batch partials each a round, in flight together (paged_decode_plan)
    tid = T.cuda.thread_idx("x")
    half = p.problem.head_dim // 2
    acc = T.alloc_tensor(ty_args=[T.Tensor((5 * p.last_pass,), "float32", scope="local", layout="default")])
    w = T.alloc_tensor(ty_args=[T.Tensor((4 * p.last_batch * p.last_pass,), "float32", scope="local",
                                         layout="default")])
    for ps in range(p.merge_passes):
        for k in T.unroll(p.last_pass):
            acc[5 * k] = T.float32(NEG_INF)
            acc[5 * k + 2] = T.float32(0)
            acc[5 * k + 3] = T.float32(0)
            acc[5 * k + 4] = T.float32(0)
        for k4 in range((n + p.last_batch - 1) // p.last_batch):
            for k in T.unroll(p.last_pass):
                item = (ps * p.last_pass + k) * p.threads + tid
                merge_batch(p, args, acc, w, T.min(n - p.last_batch * k4, p.last_batch),
                            bh * p.split_kv + p.last_batch * k4, item // half % p.rows, item % half, True, 5 * k,
                            4 * p.last_batch * k, p.last_batch)
        for k in T.unroll(p.last_pass):
            item = (ps * p.last_pass + k) * p.threads + tid
            if item < p.merge_items:
                merge_store(p, args, acc, bh, item // half, item % half, 5 * k)


@T.macro
def last_cta(p, args, bh, tiles):
    # after the partial: a fence, the ticket of bh (none where the sequence has one partition); the CTA that
    # draws the last merges, then zeroes the counter for the next call
    tid = T.cuda.thread_idx("x")
    n = T.min((tiles + part_tiles_of(p, args) - 1) // part_tiles_of(p, args), p.split_kv)
    T.ptx["fence.acq_rel.gpu"]()
    consumer_sync(p)
    ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared", layout="default")])
    drawn = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    if tid == 0:
        drawn[0] = T.uint32(0)
        if n > 1:
            T.ptx["atom.global.add.u32"](drawn[0], args["TICKETS"].ptr_to([bh]), T.uint32(1))
        ticket[0] = drawn[0]
    consumer_sync(p)
    if ticket[0] == T.Cast("uint32", n - 1):
        T.ptx["fence.acq_rel.gpu"]()
        if tid == 0:
            args["TICKETS"][bh] = T.uint32(0)
        cta_merge(p, args, bh, n)


@transpile_once
def emit_paged_decode(p: PagedDecodePlan):
    """The TIRx PrimFunc ``main`` of a plan: the partials, with merge "last-cta" O and LSE too (its parameters
    ``p.params``)."""
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p, "paged_kernel"), {"T": T, "paged_kernel": paged_kernel, "p": p, "types": types})


@attrs.frozen
class _MergeView:
    params: tuple


@transpile_once
def emit_paged_merge(p: PagedDecodePlan):
    """The TIRx PrimFunc ``main`` of the merge (its parameters ``p.merge_params``)."""
    types = [T.Tensor(q.shape, q.dtype) for q in p.merge_params]
    source = signature_source(_MergeView(p.merge_params), "merge_kernel")
    return parse(source, {"T": T, "merge_kernel": merge_kernel, "p": p, "types": types})


__all__ = ["emit_paged_decode", "emit_paged_merge"]
