"""Emission of the sm90 attention forward: a ``Sm90AttentionPlan`` to a TIRx PrimFunc ``main(Q, K, V, O, LSE)``.

Every decision is in the plan (``attention_plan``'s docstring: the work split, the shared memory, the
tensor maps, the per-tile steps). Both GEMMs go through the checked wgmma tile pattern
(``T.sm90.tile.apply(T.wgmma[...])``, ``patterns.wgmma``): ``S = Q K^T`` in the SS form, ``O += P V`` in the
RS form with P in the registers of S (``rescale_pack``), each operand a view whose declared layout the pattern
proves against the descriptor (``q_layout``, ``k_layout``, ``v_layout``; fp8 ``vt_layout``). The TMA loads,
the mbarrier protocol and the ``setmaxnreg`` split are the sm90 GEMM's (``gemm_emit``; 3-D TMA loads here).
The schedules: ``kv_tile`` (one GEMM after the other), ``overlapped_loop`` (``overlap``; ``pingpong`` with
``ordered`` / ``hand_over``); the items of a persistent CTA: ``producer_item`` / ``consumer_item``, the ring's
stage and phase carried across tiles and items (``RING``, ``advance``); fp8's V transpose: ``transposed`` / ``transpose_v``. Opt-in: ``split_kv_barrier``
(``load_kv``, ``issue_pv``, ``transposed``: V on ``plan.v_full``). The end of an item (O and LSE stored, Q's
"empty" arrival; ``epilogue``): ``attention_epilogue``.

A consumer thread's registers (``Regs``): ``s`` the S accumulators (``block_kv / 2`` f32: register ``r``
is row ``16 w + l / 4 + 8 ((r % 4) / 2)``, key ``8 (r / 4) + 2 (l % 4) + r % 2``), ``pa`` P in 16 bits
(the same order, the RS A fragment; fp8: e4m3 in the A fragment's order, ``fp8_source``), ``o`` the O
accumulators (``D / 2``, the same map over head-dim columns), ``row`` the state of its two rows: max (raw score
units) 0-1, sum 2-3, the exponent's offset 4-5, the last rescale factor alpha 6-7; fp8 the scores' factor 8
and V's scale 9.
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...probes_wgmma import SWIZZLE_LEN, acc_layout, a_register_layout
from ...isa import wgmma_table as W
from ...rocm.build import register
from ...tirx_private import transpile_once
from ..attention.problem import kv_full_tiles_for, kv_tiles_for
from ..sm80.gemm_emit_epilogue import TIR_OPS
from .attention_epilogue import (FULL, box_origin, exponent_offset, finish, finish_buffered, finish_tma, release_q, row_of,
                                 row_total, score_scale, swizzled_word)
from .attention_plan import STAGED_EPILOGUES, TRANSPOSERS, Sm90AttentionPlan, work_item
from .gemm_emit import L2_PROMOTION_256B, SWIZZLE_128B
from .gemm_epilogue import EPILOGUE_BARRIER
from .gemm_plan import WARPGROUP, WGMMA_M, WGMMA_TYPES

TMA_LOAD_3D = "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TMA_LOAD_4D = TMA_LOAD_3D.replace(".3d.", ".4d.")  # "bshd": (D, heads, S, batch)


def _swizzled(p: Sm90AttentionPlan, tile):
    """``tile`` 128-byte swizzled (the swizzle's unit is 16 bytes: ``per_element`` log2 of its elements)."""
    from tvm_tirx.tirx.layout import ComposeLayout

    return ComposeLayout((16 // p.elem_bytes).bit_length() - 1, SWIZZLE_LEN[128], 3, tile)


def kmajor_layout(p: Sm90AttentionPlan, outer: tuple[int, int], rows: int, blocks: int, block_stride: int):
    """A K-major wgmma operand ``(outer[0], K / k, rows, k)`` (``k = p.k_step``) over tiles of 128-byte rows:
    ``outer[1]`` elements between the outer index's tiles, the K axis ``blocks`` column blocks of ``rows`` rows
    (``block_stride`` elements apart), each ``columns / k`` k-steps wide, 128-byte swizzled."""
    from tvm_tirx.tirx.layout import S, TileLayout

    k, cols = p.k_step, p.columns
    return _swizzled(p, TileLayout(S[(outer[0], blocks, cols // k, rows, k): (outer[1], block_stride, k, cols, 1)]))


def q_layout(p: Sm90AttentionPlan):
    """Q as SS A operands ``(consumers, D / k, 64, k)``: warpgroup ``w``'s 64 rows of the ``block_q x columns``
    column blocks, K-major, 128-byte swizzled (k-step ``kk`` in block ``kk k / columns``)."""
    return kmajor_layout(p, (p.consumers, WGMMA_M * p.columns), WGMMA_M, p.d_blocks, p.block_q * p.columns)


def k_layout(p: Sm90AttentionPlan):
    """The K tiles as SS B operands ``(stages, D / k, block_kv, k)``: K-major, a stage's K tile at
    ``stage_offset(s, 0)`` (the view's base is stage 0's), 128-byte swizzled."""
    kv = p.config.block_kv
    return kmajor_layout(p, (p.config.stages, p.stage_offset(1, 0) - p.stage_offset(0, 0)), kv, p.d_blocks,
                         kv * p.columns)


def vt_layout(p: Sm90AttentionPlan):
    """fp8: the transposed V tiles as K-major B operands ``(stages, block_kv / 32, D, 32)`` (N = head dim, K =
    key positions: one 128-byte row of keys per head-dim column), written by ``transpose_v``."""
    return kmajor_layout(p, (p.config.stages, p.stage_offset(1, 0) - p.stage_offset(0, 0)), p.problem.head_dim, 1,
                         0)


def v_layout(p: Sm90AttentionPlan):
    """16-bit: the V tiles as M/N-major B operands ``(stages, block_kv / 16, D, 16)`` (N = head dim, K = keys):
    each 128-byte row is 64 head-dim columns of one key, the column blocks ``block_kv`` rows apart (LBO),
    8 keys 1024 bytes apart (SBO)."""
    from tvm_tirx.tirx.layout import S, TileLayout

    kv, k, cols = p.config.block_kv, p.k_step, p.columns
    return _swizzled(p, TileLayout(S[(p.config.stages, kv // k, p.d_blocks, cols, 2, 8):
                                     (p.stage_offset(1, 0) - p.stage_offset(0, 0), k * cols, kv * cols, 1, 8 * cols,
                                      cols)]))


@attrs.frozen
class Regs:
    """A consumer thread's kernel-wide values (module docstring)."""

    s: object
    pa: object
    pw: object
    o: object
    row: object
    ring: object
    """The ring's state (``RING``: the current kv tile's stage and phase, the previous one's; carried
    across items)."""
    b: object
    h: object
    q0: object
    wg: object
    t: object


# ---- the ring's state ----------------------------------------------------------------------------

RING = 4
"""A thread's ring state, a local ``uint32`` array of this length (CUTLASS's ``PipelineState``): 0 the stage of the
current kv tile, 1 its phase (its stage's uses before it, mod 2: the parity its "full" barrier completes), 2 and 3
the previous tile's (the overlapped loop's ``P V``). Carried across tiles and items in place of the ring position
``t`` (stage ``t % stages``, phase ``t / stages % 2``): ``advance`` is a compare, a select and an xor, where the
position's modulo by a ``stages`` not a power of two is a multiply-high, a shift and a multiply-subtract a use."""

CURRENT, PREVIOUS = 0, 2
"""The ring state's slots (``RING``): a slot's stage at ``slot``, its phase at ``slot + 1``."""


@T.macro
def advance(p, ring):
    # the next kv tile: the current slot becomes the previous one; the stage wraps to 0 after stages - 1, the
    # phase flips as it wraps
    ring[PREVIOUS] = ring[CURRENT]
    ring[PREVIOUS + 1] = ring[CURRENT + 1]
    ring[CURRENT + 1] = ring[CURRENT + 1] ^ T.Cast("uint32", ring[CURRENT] == p.config.stages - 1)
    ring[CURRENT] = T.if_then_else(ring[CURRENT] == p.config.stages - 1, T.uint32(0), ring[CURRENT] + T.uint32(1))


def stage(ring, slot=CURRENT):
    """The stage of ring slot ``slot`` (an ``int32`` expression: barrier indices, shared offsets)."""
    return T.Cast("int32", ring[slot])


def phase(ring, slot=CURRENT):
    """The phase of ring slot ``slot``: the parity of its stage's "full" barriers (the "empty" one's is the other)."""
    return T.Cast("int32", ring[slot + 1])


def operand_stage(p: Sm90AttentionPlan, ring, slot=CURRENT):
    """The stage of ring slot ``slot`` where a wgmma operand's region starts at it: clamped to ``stages - 1`` (one
    unsigned min, a no-op: ``advance`` keeps the stage below ``stages``), since the wgmma pattern proves the region
    in bounds and cannot follow the counter's invariant across the loop (the bare counter is refused: "cannot
    prove region start is in bounds")."""
    return T.Cast("int32", T.min(ring[slot], T.uint32(p.config.stages - 1)))


# ---- the producer ---------------------------------------------------------------------------------


def tma_load(SMH, offset, tensor_map, origin, mbar):
    """One TMA load of a box at ``origin`` (``box_origin``: 3-D, or 4-D for ``"bshd"``) into the shared tile at
    element ``offset``."""
    T.ptx[TMA_LOAD_3D if len(origin) == 3 else TMA_LOAD_4D](T.cuda.cvta_generic_to_shared(SMH.ptr_to([offset])),
                                                             T.address_of(tensor_map), *origin, mbar)



ITEM_OPS = (T.min, T.truncdiv, T.truncmod)
"""(min, div, mod) of TIR expressions: ``work_item``'s and ``Sm90AttentionPlan.item_index``'s ``ops``."""


def item_of(p: Sm90AttentionPlan, u):
    """(batch, head, first query row) of work item ``u`` (``attention_plan.work_item``: sections of batch x heads
    sharing L2, longest query blocks first in each)."""
    bh, qb = work_item(u, p.q_blocks, p.heads_total, p.section_heads, ITEM_OPS)
    return T.truncdiv(bh, p.problem.heads), T.truncmod(bh, p.problem.heads), qb * p.block_q


@T.macro
def producer(p, SMH, MB, maps, pid, tid):
    # the CTA's items (``Sm90AttentionPlan.item_index``: pid, pid + ctas, ... by the round robin); ring: the ring's
    # state (``RING``), its current slot the next kv tile's.
    # Thread 0 issues the loads; fp8, the warpgroup's warps 1-3 transpose V in the same loop (one program order for
    # the warpgroup: on the GPU warp 0 runs ahead, the emulator's lockstep runs it as written)
    ring = T.alloc_tensor(ty_args=[T.Tensor((RING,), "uint32", scope="local", layout="default")])
    SW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn",
                                                          layout="default")])
    for k in T.unroll(RING):
        ring[k] = T.uint32(0)
    for i in range(p.items_of(pid)):
        producer_item(p, SMH, SW, MB, maps, item_of(p, p.item_index(pid, i, ITEM_OPS)), i, ring, tid)


@T.macro
def producer_item(p, SMH, SW, MB, maps, item, i, ring, tid):
    # the CTA's i-th item: Q once both consumers are done with the last item's (Q's "empty" barrier), then kv
    # tile j's K and V into the ring's next stage once both consumers released its previous use
    if I.constexpr(p.tiles_before_q > 0):
        # (``plan.tiles_before_q``: the tiles whose stages the last item released before Q's "empty" barrier can
        # complete are loaded first, as FA3's producer loads K before it waits for Q: with the TMA epilogue, whose
        # store reads Q's rows, the first ring-full; with Q released at the last item's last S, all but two)
        for j in range(T.min(p.tiles_before_q, kv_tiles(p, item[2]))):
            if tid == 0:
                load_kv(p, SMH, MB, maps, item, j, ring)
            advance(p, ring)
        if tid == 0:
            load_q(p, SMH, MB, maps, item, i)
        for j in range(T.min(p.tiles_before_q, kv_tiles(p, item[2])), kv_tiles(p, item[2])):
            if tid == 0:
                load_kv(p, SMH, MB, maps, item, j, ring)
            advance(p, ring)
    else:
        if tid == 0:
            load_q(p, SMH, MB, maps, item, i)
        for j in range(kv_tiles(p, item[2])):
            if tid == 0:
                load_kv(p, SMH, MB, maps, item, j, ring)
            if I.constexpr(p.fp8):
                if tid >= 32:
                    transposed(p, SW, MB, ring, tid - 32)
            advance(p, ring)


@T.macro
def load_q(p, SMH, MB, maps, item, i):
    # the item's Q once both consumers are done with the last item's (Q's "empty" barrier)
    T.cuda.mbarrier_wait(MB.ptr_to([1 + 2 * p.config.stages]), (i + 1) % 2)
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([0]), T.uint32(p.q_elems * p.elem_bytes))
    for db in T.unroll(p.d_blocks):
        tma_load(SMH, db * p.block_q * p.columns, maps[0],
                 box_origin(p, db * p.columns, item[2], item[0], item[1], p.problem.heads), MB.ptr_to([0]))


@T.macro
def load_kv(p, SMH, MB, maps, item, j, ring):
    # kv tile j's K and V into the ring's current stage once both consumers released its previous use (the "empty"
    # barrier's parity: the other phase)
    c = p.config
    s = stage(ring)
    T.cuda.mbarrier_wait(MB.ptr_to([1 + c.stages + s]), 1 - phase(ring))
    # (split_kv_barrier: K's bytes on the stage's "full" barrier, V's on its own, ``v_full``)
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([1 + s]),
                                               T.uint32(p.tile_bytes if c.split_kv_barrier else p.kv_bytes))
    for db in T.unroll(p.d_blocks):
        tma_load(SMH, p.stage_offset(s, 0) + db * c.block_kv * p.columns, maps[1],
                 box_origin(p, db * p.columns, j * c.block_kv, item[0], p.problem.kv_head(item[1]), p.problem.kv_heads),
                 MB.ptr_to([1 + s]))
    if I.constexpr(c.split_kv_barrier):
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([p.v_full(s)]), T.uint32(p.tile_bytes))
    for db in T.unroll(p.d_blocks):
        tma_load(SMH, p.stage_offset(s, 1) + db * c.block_kv * p.columns, maps[2],
                 box_origin(p, db * p.columns, j * c.block_kv, item[0], p.problem.kv_head(item[1]), p.problem.kv_heads),
                 MB.ptr_to([p.v_full(s)]))


# ---- fp8: V transposed by the producer warpgroup's warps 1-3 --------------------------------------------

PRMT = "prmt.b32"
PAIRS = (0x5140, 0x7362)  # prmt: bytes 0, 1 (2, 3) of two words interleaved: a0 b0 a1 b1 (a2 b2 a3 b3)
HALVES = (0x5410, 0x7632)  # prmt: halves 0 (1) of two words: a's then b's


@T.macro
def transposed(p, SW, MB, ring, w):
    # fp8, transposing thread w (0 .. 95), the ring's current stage: once its V landed (``v_full``: the stage's "full"
    # barrier, or V's own), V^T into the stage's third tile, the async proxy fenced, one arrival on its "transposed"
    # barrier
    T.cuda.mbarrier_wait(MB.ptr_to([p.v_full(stage(ring))]), phase(ring))
    transpose_v(p, SW, stage(ring), w)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([2 + 2 * p.config.stages + stage(ring)]), T.uint32(1))


@T.macro
def transpose_v(p, SW, s, w):
    # V^T[d][position] = V[fp8_key(position)][d] of stage s: 4 x 4-byte blocks, block (g, q) the positions 4g ..
    # 4g + 3 (keys base, base + 1, base + 8, base + 9: ``fp8_key``) of dims 4q .. 4q + 3, the 1024 blocks over
    # the 96 threads; four words read, eight prmt, four words written
    words = T.alloc_tensor(ty_args=[T.Tensor((8,), "uint32", scope="local", layout="default")])
    blocks = p.config.block_kv // 4 * (p.problem.head_dim // 4)
    for it in range((blocks + TRANSPOSERS * 32 - 1) // (TRANSPOSERS * 32)):
        if it * TRANSPOSERS * 32 + w < blocks:
            for e in T.unroll(4):
                words[e] = SW[swizzled_word(p, p.stage_offset(s, 1), v_key(p, it * TRANSPOSERS * 32 + w, e),
                                            4 * ((it * TRANSPOSERS * 32 + w) % (p.problem.head_dim // 4)))]
            T.ptx[PRMT](words[4], words[0], words[1], T.uint32(PAIRS[0]))
            T.ptx[PRMT](words[5], words[0], words[1], T.uint32(PAIRS[1]))
            T.ptx[PRMT](words[6], words[2], words[3], T.uint32(PAIRS[0]))
            T.ptx[PRMT](words[7], words[2], words[3], T.uint32(PAIRS[1]))
            T.ptx[PRMT](words[0], words[4], words[6], T.uint32(HALVES[0]))
            T.ptx[PRMT](words[1], words[4], words[6], T.uint32(HALVES[1]))
            T.ptx[PRMT](words[2], words[5], words[7], T.uint32(HALVES[0]))
            T.ptx[PRMT](words[3], words[5], words[7], T.uint32(HALVES[1]))
            for d in T.unroll(4):
                SW[swizzled_word(p, p.stage_offset(s, 2), 4 * ((it * TRANSPOSERS * 32 + w) % (p.problem.head_dim // 4)) + d,
                                 4 * ((it * TRANSPOSERS * 32 + w) // (p.problem.head_dim // 4)))] = words[d]


def v_key(p: Sm90AttentionPlan, block, e):
    """The key (row of V) of byte ``e`` of transpose block ``block``'s output words: ``fp8_key`` of position
    ``4 g + e`` (``g = block / (D / 4)``)."""
    g = block // (p.problem.head_dim // 4)
    return 32 * (g // 8) + fp8_key(4 * (g % 8) + e)


# ---- the consumers --------------------------------------------------------------------------------


def key_of(p: Sm90AttentionPlan, rg, j, r):
    """The key of S register ``r`` in kv tile ``j``."""
    return j * p.config.block_kv + 8 * (r // 4) + 2 * (rg.t % 4) + r % 2


@T.macro
def mask(p, rg, j):
    # -inf for keys past the sequence and, causal, above the row's diagonal
    for r in T.unroll(p.config.block_kv // 2):
        if I.constexpr(p.problem.causal):
            rg.s[r] = T.if_then_else(T.or_(key_of(p, rg, j, r) >= p.problem.seq_kv,
                                           key_of(p, rg, j, r) > row_of(p, rg, (r % 4) // 2)),
                                     T.float32(float("-inf")), rg.s[r])
        else:
            rg.s[r] = T.if_then_else(key_of(p, rg, j, r) >= p.problem.seq_kv, T.float32(float("-inf")), rg.s[r])


MAX_CHAINS = 4
"""The independent FMNMX chains of a row's max in ``softmax``, combined as a tree (``tree_max``); at most the
``block_kv / 4`` scores a thread holds of a row (fewer chains where a row has fewer: ``block_kv`` is at least 16)."""


def fmax(a, b):
    return T.call_pure_extern("fmaxf", a, b, ty=T.float32)


def max_chains(p) -> int:
    """``MAX_CHAINS``, or the ``block_kv / 4`` scores of a row a thread holds where fewer."""
    return min(MAX_CHAINS, p.config.block_kv // 4)


def tree_max(part, count: int):
    """``fmax`` of ``part[0 .. count)`` as a balanced tree, neighbours first (4: ``(p0 p1) (p2 p3)``)."""
    values = [part[q] for q in range(count)]
    while len(values) > 1:
        values = [fmax(*values[q:q + 2]) if q + 1 < len(values) else values[q] for q in range(0, len(values), 2)]
    return values[0]


@T.macro
def softmax(p, rg):
    # per row h: m' = max(m, rowmax s) over the quad; alpha = 2^((m - m') c) (row[6 + h]); p = 2^(s c - m' c +
    # shift) in place of s; l = alpha l + sum p. O is not touched (``rescale_pack``: after the P V that reads it)
    n = p.config.block_kv // 2
    part = T.alloc_tensor(ty_args=[T.Tensor((max_chains(p),), "float32", scope="local", layout="default")])
    for h in T.unroll(2):
        # (the row's max over ``max_chains(p)`` independent chains of its n / 2 scores, then the old max: as many
        # FMNMX as one chain, its dependent latency divided by the chains)
        for q in T.unroll(max_chains(p)):
            part[q] = rg.s[(q // 2) * 4 + 2 * h + q % 2]
        for r in T.unroll(max_chains(p), n // 2):
            part[r % max_chains(p)] = fmax(part[r % max_chains(p)], rg.s[(r // 2) * 4 + 2 * h + r % 2])
        rg.row[4 + h] = fmax(rg.row[h], tree_max(part, max_chains(p)))
        for sh in T.unroll(2):
            rg.row[4 + h] = fmax(rg.row[4 + h], T.cuda.__shfl_xor_sync(T.uint32(FULL), rg.row[4 + h], 1 << sh, 32))
        rg.row[6 + h] = TIR_OPS.exp2(rg.row[h] * score_scale(p, rg) - rg.row[4 + h] * score_scale(p, rg))
        rg.row[h] = rg.row[4 + h]
        rg.row[2 + h] = rg.row[2 + h] * rg.row[6 + h]
        rg.row[4 + h] = exponent_offset(p, rg, h)
        for r in T.unroll(n // 2):
            rg.s[(r // 2) * 4 + 2 * h + r % 2] = TIR_OPS.exp2(rg.s[(r // 2) * 4 + 2 * h + r % 2] * score_scale(p, rg)
                                                              - rg.row[4 + h])
            rg.row[2 + h] = rg.row[2 + h] + rg.s[(r // 2) * 4 + 2 * h + r % 2]


def fp8_source(q):
    """fp8: the S register (of a 32-key k-step's 16) whose value is element ``q`` of the thread's e4m3 A fragment
    (register ``q / 4``: row half ``h``, key half ``half``; byte ``e``): ``8 half + 4 (e / 2) + 2 h + e % 2``. The
    A fragment's key position ``16 half + 4 t + e`` then holds key ``16 half + 8 (e / 2) + 2 t + e % 2``
    (``fp8_key``), which ``transpose_v`` writes V^T in the order of: no register moves between threads."""
    reg, e = q // 4, q % 4
    return 8 * (reg // 2) + 4 * (e // 2) + 2 * (reg % 2) + e % 2


def e4m3_bits(p: Sm90AttentionPlan, x):
    """The 8 bits of f32 ``x`` rounded to e4m3 (fp8 P: at most ``2^P_SHIFT``, within e4m3's range), as a uint32."""
    return T.Cast("uint32", T.reinterpret(T.Cast(p.storage, x), ty="uint8"))


def fp8_key(position):
    """fp8: the key (of a 32-key k-step) at A-fragment key position ``position`` (``fp8_source``; an int or a TIR
    expression)."""
    half, t, e = position // 16, (position % 16) // 4, position % 4
    return 16 * half + 8 * (e // 2) + 2 * t + e % 2


@T.macro
def rescale_pack(p, rg):
    # O *= alpha per row; P packed into the RS A fragment (16-bit, pw: two values a word, the even key low; fp8:
    # e4m3 in the A fragment's order, ``fp8_source``)
    for h in T.unroll(2):
        for r in T.unroll(p.problem.head_dim // 4):
            rg.o[(r // 2) * 4 + 2 * h + r % 2] = rg.o[(r // 2) * 4 + 2 * h + r % 2] * rg.row[6 + h]
    if I.constexpr(p.fp8):  # whole words (byte stores would keep the fragment out of registers)
        for kk in T.unroll(p.config.block_kv // p.k_step):
            for reg in T.unroll(4):
                rg.pw[4 * kk + reg] = (e4m3_bits(p, rg.s[16 * kk + fp8_source(4 * reg)])
                                       | (e4m3_bits(p, rg.s[16 * kk + fp8_source(4 * reg + 1)]) << T.uint32(8))
                                       | (e4m3_bits(p, rg.s[16 * kk + fp8_source(4 * reg + 2)]) << T.uint32(16))
                                       | (e4m3_bits(p, rg.s[16 * kk + fp8_source(4 * reg + 3)]) << T.uint32(24)))
    else:
        for w in T.unroll(p.config.block_kv // 4):
            T.ptx[p.pack_instr](rg.pw[w], rg.s[2 * w + 1], rg.s[2 * w])


@T.macro
def issue_s(p, MB, rg, ops):
    # the current kv tile's K landed (the ring's current slot), then S = Q K^T (SS) issued as one wgmma group
    T.cuda.mbarrier_wait(MB.ptr_to([1 + stage(rg.ring)]), phase(rg.ring))
    T.sm90.tile.apply(T.wgmma[p.wgmma_s], ops["S"], ops["Q"][rg.wg % p.consumers:rg.wg % p.consumers + 1, :, :, :],
                      ops["K"][operand_stage(p, rg.ring):operand_stage(p, rg.ring) + 1, :, :, :], scope="warpgroup",
                      scale_d=False, hoist=True)


@T.macro
def issue_pv(p, MB, rg, ops, slot):
    # O += P V of the kv tile of ring slot ``slot`` (RS: P in registers; V M/N-major, fp8 V^T K-major once transposed)
    # as one wgmma group (split_kv_barrier: 16-bit V waited for here, on its own barrier; fp8's transposers wait for it)
    if I.constexpr(p.fp8):
        T.cuda.mbarrier_wait(MB.ptr_to([2 + 2 * p.config.stages + stage(rg.ring, slot)]), phase(rg.ring, slot))
        T.sm90.tile.apply(T.wgmma[p.wgmma_o], ops["O"], ops["P"],
                          ops["V"][operand_stage(p, rg.ring, slot):operand_stage(p, rg.ring, slot) + 1, :, :, :],
                          scope="warpgroup", hoist=True)
    else:
        if I.constexpr(p.config.split_kv_barrier):
            T.cuda.mbarrier_wait(MB.ptr_to([p.v_full(stage(rg.ring, slot))]), phase(rg.ring, slot))
        T.sm90.tile.apply(T.wgmma[p.wgmma_o], ops["O"], ops["P"],
                          ops["V"][operand_stage(p, rg.ring, slot):operand_stage(p, rg.ring, slot) + 1, :, :, :],
                          scope="warpgroup", b_major="mn", hoist=True)


@T.macro
def scores_ready(p, rg, pending):
    # the S group retired (``pending``: the newer groups left in flight), its registers fenced
    T.ptx["wgmma.wait_group.sync.aligned"](pending)
    for r in T.unroll(p.config.block_kv // 2):
        T.sm90.fence_operand(rg.s[r])


@T.macro
def pv_retired(p, MB, rg, slot):
    # every group retired, O fenced, the stage of ring slot ``slot`` released (one arrival per consumer warpgroup)
    T.ptx["wgmma.wait_group.sync.aligned"](0)
    for r in T.unroll(p.problem.head_dim // 2):
        T.sm90.fence_operand(rg.o[r])
    if rg.t == 0:
        T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([1 + p.config.stages + stage(rg.ring, slot)]), T.uint32(1))


def exp_register(p: Sm90AttentionPlan, n: int) -> int:
    """The S register ``softmax`` writes its ``n``-th exp of a tile to (1-based: the first row's ``block_kv / 4``,
    then the second's)."""
    h, r = divmod(n - 1, p.config.block_kv // 4)
    return (r // 2) * 4 + 2 * h + r % 2


@T.macro
def hold_pv_wait(p, MB, rg):
    # Sm90AttentionConfig.exps_before_pv_wait: the n-th exp stored to the warpgroup's sink word (by its thread 0), which
    # ptxas issues before the P V wait that follows, so the wait after that exp
    T.ptx["st.shared.b32"](MB.ptr_to([p.sink + rg.wg]),
                           T.reinterpret(rg.s[exp_register(p, p.config.exps_before_pv_wait)], ty="uint32"),
                           pred=rg.t == 0)


@T.macro
def kv_tile(p, SMH, MB, rg, ops, j, masked, n_kv):
    # tile j of n_kv (the ring's current slot), one GEMM after the other: S = Q K^T (the last one: Q released,
    # ``early_q_release``), the mask, the softmax, O += P V, the stage released, the ring advanced
    issue_s(p, MB, rg, ops)
    scores_ready(p, rg, 0)
    if I.constexpr(p.early_q_release):
        if j == n_kv - 1:
            release_q(p, MB, rg)
    if I.constexpr(masked):
        mask(p, rg, j)
    softmax(p, rg)
    rescale_pack(p, rg)
    issue_pv(p, MB, rg, ops, CURRENT)
    pv_retired(p, MB, rg, CURRENT)
    advance(p, rg.ring)


def order_barrier(p: Sm90AttentionPlan) -> int:
    """The first of the ping-pong's named barriers, one a consumer warpgroup (``order_barrier + wg``: its turn to
    issue), after the TMA epilogue's ``EPILOGUE_BARRIER + wg``: ``gemm_emit.ORDER_BARRIER`` with two consumers, the
    next free id with three (ids below 16, PTX ISA 9.7.13.1)."""
    return EPILOGUE_BARRIER + p.consumers


def successor_barrier(p: Sm90AttentionPlan, wg):
    """The order barrier of the warpgroup whose turn follows ``wg``'s (FA3's round robin: 0, 1, .., consumers - 1,
    0, ..)."""
    if p.consumers == 2:
        return order_barrier(p) + 1 - wg
    return order_barrier(p) + T.if_then_else(wg == p.consumers - 1, 0, wg + 1)


@T.macro
def ordered(p, rg):
    # ping-pong: wait for this warpgroup's turn to issue (its predecessor issued its GEMMs)
    if I.constexpr(p.config.pingpong):
        T.ptx["bar.sync"](T.Cast("uint32", order_barrier(p) + rg.wg), T.uint32(2 * WARPGROUP))


@T.macro
def hand_over(p, rg, last):
    # ping-pong: the next warpgroup's turn (``successor``); the last warpgroup's last turn hands over nothing: the
    # first one is done, and each barrier's arrivals match its waits (the last warpgroup's arrival at the start)
    if I.constexpr(p.config.pingpong):
        if I.constexpr(last):
            if I.constexpr(p.consumers == 2):
                if rg.wg == 0:
                    T.ptx["bar.arrive"](T.Cast("uint32", order_barrier(p) + 1), T.uint32(2 * WARPGROUP))
            else:
                if rg.wg < p.consumers - 1:
                    T.ptx["bar.arrive"](T.Cast("uint32", order_barrier(p) + rg.wg + 1), T.uint32(2 * WARPGROUP))
        else:
            T.ptx["bar.arrive"](T.Cast("uint32", successor_barrier(p, rg.wg)), T.uint32(2 * WARPGROUP))


@T.macro
def overlapped_loop(p, MB, rg, ops, n_kv, n_full):
    # Sm90AttentionConfig.overlap: tile j's S issued before tile j - 1's P V, so tile j's softmax runs while that
    # P V is in the tensor cores; pingpong: each warpgroup's GEMM issues in turns with the other's (named
    # barriers), so one's softmax runs under the other's GEMMs. The ring advanced before each S: tile j's the
    # current slot, tile j - 1's the previous one; once more after the last P V
    if I.constexpr(p.config.pingpong and not p.config.item_overlap):
        if rg.wg == p.consumers - 1:  # warpgroup 0 issues first: its predecessor's arrival
            T.ptx["bar.arrive"](T.Cast("uint32", order_barrier(p)), T.uint32(2 * WARPGROUP))
    edge_turn(p, MB, rg, ops, False)
    scores_ready(p, rg, 0)
    if I.constexpr(p.early_q_release):  # the item's last S retired: Q released
        if n_kv == 1:
            release_q(p, MB, rg)
    if 0 >= n_full:
        mask(p, rg, 0)
    softmax(p, rg)
    rescale_pack(p, rg)
    if I.constexpr(maybe_positive(n_kv - 1)):
        for j in range(1, n_kv):
            advance(p, rg.ring)
            ordered(p, rg)
            issue_s(p, MB, rg, ops)
            issue_pv(p, MB, rg, ops, PREVIOUS)
            hand_over(p, rg, False)
            scores_ready(p, rg, 1)
            if I.constexpr(p.early_q_release):
                if j == n_kv - 1:
                    release_q(p, MB, rg)
            if j >= n_full:
                mask(p, rg, j)
            softmax(p, rg)
            if I.constexpr(p.config.exps_before_pv_wait):
                hold_pv_wait(p, MB, rg)
            pv_retired(p, MB, rg, PREVIOUS)
            rescale_pack(p, rg)
    edge_turn(p, MB, rg, ops, True)
    if I.constexpr(p.config.item_overlap):  # the row sums while the last P V runs (FA3's finalize)
        for h in T.unroll(2):
            row_total(p, rg, h)
    pv_retired(p, MB, rg, CURRENT)
    advance(p, rg.ring)


@T.macro
def edge_turn(p, MB, rg, ops, last):
    # an item's first S (``last`` False) or last P V (True): a turn of ping-pong's round robin, or
    # (``item_overlap``) issued outside it, as FA3 issues them
    if I.constexpr(not p.config.item_overlap):
        ordered(p, rg)
    if I.constexpr(last):
        issue_pv(p, MB, rg, ops, CURRENT)
    else:
        issue_s(p, MB, rg, ops)
    if I.constexpr(not p.config.item_overlap):
        hand_over(p, rg, last)


@T.macro
def first_turn(p, rg, end):
    # ``item_overlap``: the round robin's first arrival once a CTA (warpgroup 0's first turn), before the items; at
    # the end (``end``) warpgroup 0 takes the last warpgroup's arrival after its last turn (none left pending)
    if I.constexpr(p.config.item_overlap):
        if I.constexpr(end):
            if rg.wg == 0:
                T.ptx["bar.sync"](T.Cast("uint32", order_barrier(p)), T.uint32(2 * WARPGROUP))
        else:
            if rg.wg == p.consumers - 1:
                T.ptx["bar.arrive"](T.Cast("uint32", order_barrier(p)), T.uint32(2 * WARPGROUP))


def kv_tiles(p: Sm90AttentionPlan, q0):
    """The kv tiles the query block at row ``q0`` runs (``kv_tiles_for``): an int or a TIR expression."""
    return kv_tiles_for(p.problem, p.block_q, p.config.block_kv, q0, p.config.skip_masked, T.min)


def full_tiles(p: Sm90AttentionPlan, q0):
    """Its leading tiles that need no mask (``kv_full_tiles_for``), at most ``kv_tiles``; 0 where every tile
    holds the sequence's end (a constant, so that ``maybe_positive`` leaves the loop out)."""
    if p.problem.seq_kv < p.config.block_kv:
        return 0
    return T.min(kv_tiles(p, q0), kv_full_tiles_for(p.problem, p.block_q, p.config.block_kv, q0, T.min))


def maybe_positive(extent) -> bool:
    """Whether a loop of ``extent`` iterations may run (False where the extent is provably at most 0: such a
    loop is left out, since the pattern cannot prove its operands' bounds over an empty range)."""
    from tvm_tirx.sym import Analyzer

    return extent > 0 if isinstance(extent, int) else not Analyzer().can_prove(extent <= 0)


@T.macro
def consumer(p, SMH, MB, args, maps, pid, wg, t):
    c = p.config
    s = T.alloc_tensor(ty_args=[T.Tensor((c.block_kv // 2,), "float32", scope="local", layout="default")])
    o = T.alloc_tensor(ty_args=[T.Tensor((p.problem.head_dim // 2,), "float32", scope="local", layout="default")])
    pa = T.alloc_tensor(ty_args=[T.Tensor((c.block_kv // 2,), p.storage, scope="local", layout="default")])
    # (P: per thread 2 rows x block_kv / 4 keys of the 64 x block_kv tile: block_kv / 2 elements)
    pw = T.decl_tensor(pa.ptr_to([0]), ty_args=[T.Tensor((c.block_kv * p.elem_bytes // 8,), "uint32", scope="local",
                                                         layout="default")])
    row = T.alloc_tensor(ty_args=[T.Tensor((10 if p.fp8 else 8,), "float32", scope="local", layout="default")])
    if I.constexpr(p.fp8):  # c times Q's and K's scales; V's
        row[8] = T.float32(p.problem.scale_log2) * args["SCALES"][0] * args["SCALES"][1]
        row[9] = args["SCALES"][2]
    kind = W.KIND[WGMMA_TYPES[p.problem.dtype]]
    SS = T.decl_tensor(s.ptr_to([0]), ty_args=[T.Tensor((1, 1, WGMMA_M, c.block_kv), "float32", scope="local",
                                                        layout=acc_layout(c.block_kv))])
    SO = T.decl_tensor(o.ptr_to([0]), ty_args=[T.Tensor((1, 1, WGMMA_M, p.problem.head_dim), "float32", scope="local",
                                                        layout=acc_layout(p.problem.head_dim))])
    SP = T.decl_tensor(pa.ptr_to([0]), ty_args=[T.Tensor((1, c.block_kv // p.k_step, WGMMA_M, p.k_step), p.storage,
                                                         scope="local",
                                                         layout=a_register_layout(kind, (1, c.block_kv // p.k_step)))])
    SQ = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.consumers, p.problem.head_dim // p.k_step, WGMMA_M, p.k_step),
                                                          p.smem_dtype,
                                                          scope="shared.dyn", layout=q_layout(p), align=1024)])
    SK = T.decl_tensor(SMH.ptr_to([p.stage_offset(0, 0)]), ty_args=[T.Tensor(
        (c.stages, p.problem.head_dim // p.k_step, c.block_kv, p.k_step), p.smem_dtype, scope="shared.dyn",
        layout=k_layout(p), align=1024)])
    SV = T.decl_tensor(SMH.ptr_to([p.stage_offset(0, 2 if p.fp8 else 1)]), ty_args=[T.Tensor(
        (c.stages, c.block_kv // p.k_step, p.problem.head_dim, p.k_step), p.smem_dtype, scope="shared.dyn",
        layout=vt_layout(p) if p.fp8 else v_layout(p), align=1024)])
    ops = {"S": SS, "O": SO, "P": SP, "Q": SQ, "K": SK, "V": SV}
    ring = T.alloc_tensor(ty_args=[T.Tensor((RING,), "uint32", scope="local", layout="default")])
    for k in T.unroll(RING):
        ring[k] = T.uint32(0)
    first_turn(p, Regs(s, pa, pw, o, row, ring, 0, 0, 0, wg, t), False)
    for i in range(p.items_of(pid)):
        item = item_of(p, p.item_index(pid, i, ITEM_OPS))
        consumer_item(p, SMH, MB, args, maps, ops, Regs(s, pa, pw, o, row, ring, *item, wg, t), i)
    first_turn(p, Regs(s, pa, pw, o, row, ring, 0, 0, 0, wg, t), True)
    if I.constexpr(c.epilogue in STAGED_EPILOGUES):
        if t == 0:
            T.ptx["cp.async.bulk.wait_group"](0)  # the last item's O stores are done before the CTA exits


@T.macro
def consumer_item(p, SMH, MB, args, maps, ops, rg, i):
    # the CTA's i-th item: its kv tiles from the ring's current slot (``Regs.ring``), Q's "empty" arrival once its
    # GEMMs retired (``early_q_release``: at its last S, in the loop), then O and LSE (epilogue="tma": O through the
    # Q tile, Q's "empty" arrival once stored; "tma_buffer": O through its own buffer)
    c = p.config
    for r in T.unroll(p.problem.head_dim // 2):
        rg.o[r] = T.float32(0)
    for r in T.unroll(2):
        rg.row[r] = T.float32(float("-inf"))
        rg.row[2 + r] = T.float32(0)
    T.cuda.mbarrier_wait(MB.ptr_to([0]), i % 2)
    if I.constexpr(c.overlap):
        overlapped_loop(p, MB, rg, ops, kv_tiles(p, rg.q0), full_tiles(p, rg.q0))
    else:
        if I.constexpr(maybe_positive(full_tiles(p, rg.q0))):
            for j in range(full_tiles(p, rg.q0)):
                kv_tile(p, SMH, MB, rg, ops, j, False, kv_tiles(p, rg.q0))
        if I.constexpr(maybe_positive(kv_tiles(p, rg.q0) - full_tiles(p, rg.q0))):
            for j in range(full_tiles(p, rg.q0), kv_tiles(p, rg.q0)):
                kv_tile(p, SMH, MB, rg, ops, j, True, kv_tiles(p, rg.q0))
    if I.constexpr(c.epilogue == "tma"):
        finish_tma(p, SMH, MB, args, maps[3], rg)
    else:
        if I.constexpr(not p.early_q_release):
            release_q(p, MB, rg)
        if I.constexpr(c.epilogue == "tma_buffer"):
            finish_buffered(p, SMH, args, maps[3], rg)
        else:
            finish(p, args, rg)


# ---- the kernel -----------------------------------------------------------------------------------


@T.macro
def kernel(p, args, maps):
    c = p.config
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.ctas, block=p.threads, dynamic_smem_bytes=p.smem_bytes),
                   kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1))
    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // p.elem_bytes,), p.smem_dtype, scope="shared.dyn", layout="default",
                                           align=1024)])
    MB = T.alloc_tensor(ty_args=[T.Tensor((p.barriers,), "uint64", scope="shared", layout="default")])
    tid = T.cuda.thread_idx("x")
    pid = T.cuda.block_idx("x")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(MB.ptr_to([0]), T.uint32(1))
        for s in T.unroll(c.stages):
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([1 + s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([1 + c.stages + s]), T.uint32(p.consumers))
        T.ptx.mbarrier.init.shared.b64(MB.ptr_to([1 + 2 * c.stages]), T.uint32(p.consumers))
        if I.constexpr(p.fp8):
            for s in T.unroll(c.stages):
                T.ptx.mbarrier.init.shared.b64(MB.ptr_to([2 + 2 * c.stages + s]), T.uint32(TRANSPOSERS * 32))
        if I.constexpr(c.split_kv_barrier):
            for s in T.unroll(c.stages):
                T.ptx.mbarrier.init.shared.b64(MB.ptr_to([p.v_full(s)]), T.uint32(1))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid < WARPGROUP:
        T.ptx["setmaxnreg.dec.sync.aligned.u32"](p.producer_regs)
        if I.constexpr(p.fp8):  # every thread of the warpgroup: thread 0 loads, warps 1-3 transpose V
            producer(p, SMH, MB, maps, pid, tid)
        elif tid == 0:
            producer(p, SMH, MB, maps, pid, tid)
    else:
        T.ptx["setmaxnreg.inc.sync.aligned.u32"](p.consumer_regs)
        # (the consumer warpgroup broadcast from lane 0, as CUTLASS's ``canonical_warp_group_idx``: the compiler
        # knows it warp-uniform, so that Q's descriptors live in uniform registers)
        wg = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
        wg[0] = T.cuda.__shfl_sync(T.uint32(FULL), tid // WARPGROUP - 1, 0, 32)
        consumer(p, SMH, MB, args, maps, pid, wg[0], tid % WARPGROUP)


def map_source(p: Sm90AttentionPlan, name: str, dims, box_rows: int) -> list[str]:
    """The host lines encoding ``map<name>`` of ``name`` with ``dims = (D, S, batch, heads)``, boxes of one head's
    ``columns x box_rows`` (128 bytes x rows), 128-byte swizzled: ``"bhsd"`` a 3-D map ``(D, S, batch x heads)``
    (innermost first), ``"bshd"`` a 4-D map ``(D, heads, S, batch)`` (its strides ascending as
    ``cuTensorMapEncodeTiled`` asks; the box ``columns x 1 x box_rows x 1`` lands as the same rows x columns tile)."""
    D, S, batch, heads = dims
    e = p.elem_bytes
    if p.problem.layout == "bshd":
        shape = f"{D}, {heads}, {S}, {batch}, {D * e}, {heads * D * e}, {S * heads * D * e}, {p.columns}, 1, {box_rows}, 1"
        rank = 4
    else:
        shape, rank = f"{D}, {S}, {batch * heads}, {D * e}, {S * D * e}, {p.columns}, {box_rows}, 1", 3
    return [f"    map{name} = T.stack_alloca('tensormap', 1)",
            f"    T.cuda.tensormap_encode_tiled(map{name}, {name}.ptr_to([0, 0, 0, 0]), {shape}, "
            f"{', '.join(['1'] * rank)}, descriptor_dtype='{p.storage}', rank={rank}, "
            f"swizzle={SWIZZLE_128B}, l2_promotion={L2_PROMOTION_256B})"]


def signature_source(p: Sm90AttentionPlan) -> str:
    """``main(Q, K, V, O, LSE)``: the host part encodes the tensor maps of Q, K, V, then the kernel."""
    pr = p.problem
    names = [q.name for q in p.params]
    lines = ["@T.function", f"def main({', '.join(f'{n}: types[{i}]' for i, n in enumerate(names))}):"]
    lines += map_source(p, "Q", (pr.head_dim, pr.seq_q, pr.batch, pr.heads), p.block_q)
    for name in ("K", "V"):
        lines += map_source(p, name, (pr.head_dim, pr.seq_kv, pr.batch, pr.kv_heads), p.config.block_kv)
    maps = "mapQ, mapK, mapV"
    if p.config.epilogue in STAGED_EPILOGUES:  # O's stores: boxes of a consumer warpgroup's 64 rows
        lines += map_source(p, "O", (pr.head_dim, pr.seq_q, pr.batch, pr.heads), WGMMA_M)
        maps += ", mapO"
    args = ", ".join(f"{n!r}: {n}" for n in names)
    return "\n".join([*lines, f"    kernel(p, {{{args}}}, ({maps}))", ""])


@transpile_once
def emit_sm90_attention(p: Sm90AttentionPlan):
    """The TIRx PrimFunc ``main(Q, K, V, O, LSE)`` of a plan (its parameters: ``p.params``)."""
    register()  # T.sm90 / T.wgmma
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p), {"T": T, "kernel": kernel, "p": p, "types": types})


__all__ = ["emit_sm90_attention", "k_layout", "q_layout", "signature_source", "v_layout"]
