"""The end of an sm90 attention work item (``attention_emit``'s consumers): O and LSE stored, Q's "empty" arrival.

``finish``: O / l from the registers (rows past ``Sq`` not stored). ``finish_tma`` (``epilogue="tma"``): O staged in
the warpgroup's rows of the Q tile and stored by TMA, Q's "empty" arrival once the stores read them.
``finish_buffered`` (``"tma_buffer"``): O staged in a buffer of its own and stored by TMA, waited for only before the
buffer's next use. ``release_q``: Q's "empty" arrival (``plan.early_q_release``: at the item's last S).
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ..attention.problem import LN2
from .attention_plan import Sm90AttentionPlan
from .gemm_epilogue import EPILOGUE_BARRIER
from .gemm_plan import ROW_BYTES, WARPGROUP, WGMMA_M

TMA_STORE_3D = "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group"
TMA_STORE_4D = TMA_STORE_3D.replace(".3d.", ".4d.")  # "bshd" (``attention_emit.map_source``)
FULL = 0xFFFFFFFF


def swizzled_word(p: Sm90AttentionPlan, base, row, byte):
    """The 4-byte word of byte ``byte`` (a multiple of 4) of row ``row`` of a 128-byte-swizzled tile at element
    (byte) ``base``: 16-byte chunk ``byte / 16`` stored at chunk ``(byte / 16) ^ (row % 8)``."""
    return (base + row * 128 + T.bitwise_xor(byte // 16, row % 8) * 16 + byte % 16) // 4


def row_of(p: Sm90AttentionPlan, rg, h):
    """The query row of the thread's fragment row ``h`` (0: ``l / 4``, 1: ``+ 8``)."""
    return rg.q0 + rg.wg * WGMMA_M + 16 * (rg.t // 32) + (rg.t % 32) // 4 + 8 * h


def box_origin(p: Sm90AttentionPlan, column, row, batch, head, heads: int) -> tuple:
    """The coordinates of the box at (``column``, sequence row ``row``) of (``batch``, ``head``) in the tensor map
    of a tensor of ``heads`` heads (``map_source``): ``"bhsd"`` ``(column, row, batch x heads + head)``,
    ``"bshd"`` ``(column, head, row, batch)``."""
    if p.problem.layout == "bshd":
        return column, head, row, batch
    return column, row, batch * heads + head


def tma_store_o(p: Sm90AttentionPlan, map_o, origin, source):
    """One TMA store of O's box at ``origin`` (``box_origin``) from the shared address ``source``."""
    T.ptx[TMA_STORE_3D if len(origin) == 3 else TMA_STORE_4D](T.address_of(map_o), *origin, source)


def o_index(p: Sm90AttentionPlan, rg, row, column) -> list:
    """O's index of (``row``, ``column``) of the thread's (batch, head): ``[b, h, row, column]``, or ``"bshd"``
    ``[b, row, h, column]`` (``AttentionProblem.shapes``)."""
    if p.problem.layout == "bshd":
        return [rg.b, row, rg.h, column]
    return [rg.b, rg.h, row, column]


def score_scale(p: Sm90AttentionPlan, rg):
    """``c``: a raw score to base-2 units, ``scale log2 e`` (fp8: times Q's and K's scales, ``row[8]``)."""
    return rg.row[8] if p.fp8 else T.float32(p.problem.scale_log2)


def exponent_offset(p: Sm90AttentionPlan, rg, h):
    """What the exponent of row ``h`` subtracts: ``m c`` (fp8: less ``P_SHIFT``, so that ``p <= 2^8``)."""
    if not p.p_shift:
        return rg.row[h] * score_scale(p, rg)
    return rg.row[h] * score_scale(p, rg) - T.float32(p.p_shift)


@T.macro
def row_total(p, rg, h):
    # row h's sum over the quad (row[2 + h]) and O's factor 1 / l (row[4 + h]; fp8: V's scale too)
    for sh in T.unroll(2):
        rg.row[2 + h] = rg.row[2 + h] + T.cuda.__shfl_xor_sync(T.uint32(FULL), rg.row[2 + h], 1 << sh, 32)
    rg.row[4 + h] = (rg.row[9] if p.fp8 else T.float32(1)) / rg.row[2 + h]


@T.macro
def store_lse(p, args, rg, h):
    # row h's LSE, by the quad's first thread
    if rg.t % 4 == 0:
        args["LSE"][rg.b, rg.h, row_of(p, rg, h)] = (exponent_offset(p, rg, h) + T.log2(rg.row[2 + h])) * T.float32(LN2)


@T.macro
def finish(p, args, rg):
    # the row sums over the quad, O / l packed and stored (rows inside the sequence), LSE by the quad's first
    word = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    for h in T.unroll(2):
        if I.constexpr(not p.config.item_overlap):  # (item_overlap: taken under the last P V, ``overlapped_loop``)
            row_total(p, rg, h)
        if row_of(p, rg, h) < p.problem.seq_q:
            for dn in T.unroll(p.problem.head_dim // 8):
                T.ptx[p.pack_instr](word[0], rg.o[dn * 4 + 2 * h + 1] * rg.row[4 + h], rg.o[dn * 4 + 2 * h] * rg.row[4 + h])
                T.ptx["st.global.b32"](args["O"].ptr_to(o_index(p, rg, row_of(p, rg, h), 8 * dn + 2 * (rg.t % 4))), word[0])
            store_lse(p, args, rg, h)


@T.macro
def finish_tma(p, SMH, MB, args, map_o, rg):
    # epilogue="tma": O / l packed into the warpgroup's own rows of the Q tile once each of its warps has seen its
    # GEMMs (the only readers of those rows) retire (its named barrier: a warp's wait_group covers only its own),
    # 128-byte swizzled as Q landed (``o_word``), fenced for the async proxy; once the warpgroup's writes are done
    # (the barrier again), one thread stores the D / 64 boxes of 64 rows by TMA (rows past Sq clipped), waits for
    # the stores to read them and releases Q (its "empty" arrival). LSE as ``finish``
    SW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn",
                                                          layout="default")])
    word = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + rg.wg), T.uint32(WARPGROUP))
    stage_o(p, SW, word, args, rg, 0)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + rg.wg), T.uint32(WARPGROUP))
    if rg.t == 0:
        store_o(p, SMH, map_o, rg, 0)
        T.ptx["cp.async.bulk.wait_group.read"](0)
        T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([1 + 2 * p.config.stages]), T.uint32(1))


@T.macro
def finish_buffered(p, SMH, args, map_o, rg):
    # epilogue="tma_buffer": as ``finish_tma`` into O's buffer (``plan.o_buffer``, after the ring), once the last
    # item's stores of the warpgroup read it (its storing thread's ``wait_group.read``, then the named barrier);
    # the stores are committed and not waited for: they run under the next item (Q was released at the item's
    # last S, ``release_q``)
    SW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn",
                                                          layout="default")])
    word = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    if rg.t == 0:
        T.ptx["cp.async.bulk.wait_group.read"](0)
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + rg.wg), T.uint32(WARPGROUP))
    stage_o(p, SW, word, args, rg, p.o_buffer)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + rg.wg), T.uint32(WARPGROUP))
    if rg.t == 0:
        store_o(p, SMH, map_o, rg, p.o_buffer)


@T.macro
def stage_o(p, SW, word, args, rg, base):
    # the row sums over the quad, O / l packed into the warpgroup's rows of the Q-shaped tile at element ``base``
    # (``o_word``), LSE of the rows inside the sequence
    for h in T.unroll(2):
        if I.constexpr(not p.config.item_overlap):
            row_total(p, rg, h)
        for dn in T.unroll(p.problem.head_dim // 8):
            T.ptx[p.pack_instr](word[0], rg.o[dn * 4 + 2 * h + 1] * rg.row[4 + h], rg.o[dn * 4 + 2 * h] * rg.row[4 + h])
            SW[o_word(p, rg, h, dn, base)] = word[0]
        if row_of(p, rg, h) < p.problem.seq_q:
            store_lse(p, args, rg, h)


@T.macro
def store_o(p, SMH, map_o, rg, base):
    # the warpgroup's D / 64 boxes of 64 rows of the Q-shaped tile at element ``base`` by TMA (rows past Sq
    # clipped), one bulk group
    for db in T.unroll(p.d_blocks):
        tma_store_o(p, map_o, box_origin(p, db * p.columns, rg.q0 + rg.wg * WGMMA_M, rg.b, rg.h, p.problem.heads),
                    T.cuda.cvta_generic_to_shared(SMH.ptr_to([offset(base, (db * p.block_q + rg.wg * WGMMA_M)
                                                                             * p.columns)])))
    T.ptx["cp.async.bulk.commit_group"]()


@T.macro
def release_q(p, MB, rg):
    # Q's "empty" arrival of the warpgroup (one thread; its wait_group retired the GEMMs that read Q)
    if rg.t == 0:
        T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([1 + 2 * p.config.stages]), T.uint32(1))


def offset(base, x):
    """``base + x``, ``x`` alone where ``base`` is 0 (the Q tile's: the expressions of the code before O's buffer)."""
    return base + x if base else x


def o_word(p: Sm90AttentionPlan, rg, h, dn, base=0):
    """The 4-byte word where the thread's O pair of fragment row ``h`` and 8-column group ``dn`` is staged in the
    Q-shaped tile at element ``base`` (``epilogue="tma"``: the Q tile; ``"tma_buffer"``: ``plan.o_buffer``): its
    row of the warpgroup's 64 in column block ``dn / 8``, 16-byte chunk ``dn % 8`` (swizzled: ``swizzled_word``),
    word ``t % 4``."""
    row = rg.wg * WGMMA_M + 16 * (rg.t // 32) + (rg.t % 32) // 4 + 8 * h
    return swizzled_word(p, offset(base * p.elem_bytes, (dn // 8) * p.block_q * ROW_BYTES), row,
                         (dn % 8) * 16 + 4 * (rg.t % 4))
