"""The sm90 GEMM's epilogues of C from the consumers' accumulators (``gemm_emit``'s ``finish_tile``, ``split_store``
and ``grouped_emit`` call them): ``store``, the register epilogue (column pairs straight to global memory, the fused
epilogue applied first: ``gemm_store.out_value``; ``store_fragment`` picks it or, ``swap_ab``, ``store_transposed``),
and ``store_tma``, ``epilogue="tma"``'s: the warpgroup's rows converted into its staging buffer (128-byte swizzled,
``staging_word``; a tail block, ``Sm90Config.tail_columns``, at ``tail_word``) and stored with TMA, the whole tile or
chunks of ``epilogue_tile`` columns in two buffers (``store_tma_chunks``: one named barrier a chunk, ``CHUNK_WAIT``); a
staged residual (``residual_read``) is read where C's words go.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from . import gemm_shift as shift
from .gemm_plan import SWIZZLE_COLUMNS, WARPGROUP, WGMMA_M, Sm90Plan
from .gemm_residual import held_half, held_index, pair_half, residual_half, residual_pairs, residual_word
from .gemm_store import out_value, store_transposed

TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
EPILOGUE_BARRIER = 1
"""The first of the TMA epilogue's named barriers (``bar.sync``, PTX ISA §9.7.13.1): ``EPILOGUE_BARRIER + wg`` joins
consumer warpgroup ``wg``'s 128 threads around its staging buffer's writes (0 is the CTA's ``__syncthreads``)."""
CHUNK_WAIT = 0
"""The bulk groups a chunk's storing thread leaves pending at its wait before the chunk's barrier
(``epilogue_tile``, ``store_tma_chunks``): 0, so the previous chunk's store has read the other buffer, which the
next chunk writes after this barrier (two buffers, one barrier a chunk)."""


@T.macro
def store(p, acc, args, row, col, m_end, group, held=None, first=None):
    # acc[mi * N/2 + j * 4 + h * 2 + e] is C[row + 64 mi + 8 h, col + 8 j + e] (PTX ISA 9.7.17.5.1.1.1,
    # the wgmma D fragment: thread t of the warpgroup holds rows 16 (t / 32) + (t % 32) / 4 + 8 h), the
    # fused epilogue applied first (out_value); rows below m_end stored (p.M; a grouped tile's group end),
    # the per-column fused inputs of ``group`` (a grouped GEMM's; None: one GEMM); ``held``: the residual's words
    # (residual_read="early", gemm_residual.load_early), else read from global memory; rows from ``first`` only
    # (shift_last: the tile's own, gemm_shift.kept)
    c = p.config
    C = args["C"]
    n2 = c.block_n // 2
    if I.constexpr(p.N % 2 == 0 and p.out_dtype == "f32"):
        for mi in T.unroll(c.rows // WGMMA_M):
            for j in T.unroll(c.block_n // 8):
                for h in T.unroll(2):
                    r = row + mi * WGMMA_M + 8 * h
                    T.ptx["st.global.v2.f32"](C.ptr_to([r, col + 8 * j]),
                                              out_value(p, args, acc[mi * n2 + j * 4 + h * 2], r, col + 8 * j, group),
                                              out_value(p, args, acc[mi * n2 + j * 4 + h * 2 + 1], r, col + 8 * j + 1, group),
                                              pred=T.and_(shift.kept(p, r, first, r < m_end, T.and_), col + 8 * j < p.N))
    elif I.constexpr(p.N % 2 == 0):
        word = T.alloc_tensor(ty_args=[T.Tensor((1 + residual_pairs(p),), "uint32", scope="local", layout="default")])
        for mi in T.unroll(c.rows // WGMMA_M):
            for j in T.unroll(c.block_n // 8):
                for h in T.unroll(2):
                    r = row + mi * WGMMA_M + 8 * h
                    residual_word(p, args, word, r, col + 8 * j, held, held_index(p, mi, j, h))
                    T.ptx[f"cvt.rn.{p.out_dtype}x2.f32"](
                        word[0], out_value(p, args, acc[mi * n2 + j * 4 + h * 2 + 1], r, col + 8 * j + 1, group, pair_half(p, word, 1)),
                        out_value(p, args, acc[mi * n2 + j * 4 + h * 2], r, col + 8 * j, group, pair_half(p, word, 0)))
                    T.ptx["st.global.b32"](C.ptr_to([r, col + 8 * j]), word[0], pred=T.and_(shift.kept(p, r, first, r < m_end, T.and_), col + 8 * j < p.N))
    else:
        for mi in T.unroll(c.rows // WGMMA_M):
            for j in T.unroll(c.block_n // 8):
                for h in T.unroll(2):
                    for e in T.unroll(2):
                        if T.and_(shift.kept(p, row + mi * WGMMA_M + 8 * h, first, row + mi * WGMMA_M + 8 * h < m_end, T.and_),
                                  col + 8 * j + e < p.N):
                            C[row + mi * WGMMA_M + 8 * h, col + 8 * j + e] = T.Cast(p.tir_out, out_value(
                                p, args, acc[mi * n2 + j * 4 + h * 2 + e], row + mi * WGMMA_M + 8 * h, col + 8 * j + e, group,
                                held_half(p, held, held_index(p, mi, j, h), e)))


@T.macro
def store_fragment(p, acc, args, row, col, held=None, first=None):
    # the register epilogue of a (non-grouped) tile: the thread's fragment from (row, col) of the kernel's product,
    # C's (store; held: residual_read="early"'s words) or, swap_ab, C^T's (store_transposed)
    if I.constexpr(p.config.swap_ab):
        store_transposed(p, acc, args, row, col, first)
    else:
        store(p, acc, args, row, col, p.M, None, held, first)


@T.macro
def store_tma(p, SMH, acc, args, map_c, part, wg, t, m0, n0, group, res, held=None, first=None):
    # epilogue="tma": the warpgroup's rows of the tile through shared memory and TMA stores, the whole tile at
    # once (epilogue_tile 0) or in chunks of epilogue_tile columns alternating between two buffers; the
    # per-column fused inputs of ``group`` (a grouped GEMM's; None: one GEMM); ``res``: the residual in the
    # staging buffer (residual_read="tma", consumer_tile's tuple; None: read from global memory, or ``held``'s
    # registers: residual_read="early"); ``first``: shift_last's own first token row (the shifted tile: store_shifted)
    if I.constexpr(p.config.epilogue_tile == 0):
        store_tma_chunk(p, SMH, acc, args, map_c, part, wg, t, m0, n0, 0, 0, group, res, held, first)
    else:
        store_tma_chunks(p, SMH, acc, args, map_c, part, wg, t, m0, n0, group, held, first)


@T.macro
def store_tma_chunks(p, SMH, acc, args, map_c, part, wg, t, m0, n0, group, held, first=None):
    # epilogue_tile: chunk q of the warpgroup's columns into buffer q % 2, one named barrier a chunk (CHUNK_WAIT):
    # the chunk's words, the fence, the storing thread's wait_group.read 0 (chunk q - 1's store has read the
    # other buffer), the barrier, then chunk q's store and commit. After chunk q's barrier the other buffer is
    # free for chunk q + 1; a tile's first chunk finds buffer 0 free when the chunks are even (the previous
    # tile's last barrier retired its chunk n - 2, buffer 0's), else it waits for all and syncs first. The
    # stores' coordinates are computed once a tile (origin), not in each chunk's store branch
    c = p.config
    SMW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn", layout="default", align=1024)])
    word = T.alloc_tensor(ty_args=[T.Tensor((1 + residual_pairs(p),), "uint32", scope="local", layout="default")])
    origin = T.alloc_tensor(ty_args=[T.Tensor((2,), "int32", scope="local", layout="default")])
    origin[0] = n0  # bound once a tile: each chunk's store reads it (an expression would be recomputed in each)
    origin[1] = m0 + part * c.rows
    if I.constexpr(chunk_count(p) % 2 == 1):
        if t == 0:
            T.ptx["cp.async.bulk.wait_group.read"](0)
        T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
    for q in T.unroll(chunk_count(p)):
        if I.constexpr(first is None):
            chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, None, held, staging_byte(p, wg, q % 2), None)
            issue_chunk_store(p, SMH, map_c, wg, t, origin, q)
        else:
            if first > m0:  # the shifted tile: from registers (store_shifted), no shared memory, no barrier
                chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, None, held, staging_byte(p, wg, q % 2), first)
            else:
                chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, None, held, staging_byte(p, wg, q % 2), None)
                issue_chunk_store(p, SMH, map_c, wg, t, origin, q)


@T.macro
def issue_chunk_store(p, SMH, map_c, wg, t, origin, q):
    # chunk q written into buffer q % 2 (store_tma_chunks): the writes made visible to the async proxy, the
    # storing thread's wait for the other buffer's store (chunk q - 1's, its only group pending; the other
    # threads, with none, pass it: 16 SASS instructions a tile fewer than a branch around it), the barrier,
    # then its 64-column blocks stored with TMA at the tile's ``origin`` (column, row) + chunk q's columns, as one
    # bulk group (store_chunk_blocks)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.ptx["cp.async.bulk.wait_group.read"](CHUNK_WAIT)  # every thread: one with no bulk group returns at once, no branch
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
    if t == 0:
        store_chunk_blocks(p, SMH, map_c, wg, origin, q)


@T.macro
def store_chunk_blocks(p, SMH, map_c, wg, origin, q):
    # the storing thread's TMA stores of chunk q (buffer q % 2), its 64-column blocks at the tile's ``origin``
    # (column, row) + chunk q's columns, committed as one bulk group
    c = p.config
    for cb in T.unroll(c.epilogue_tile // SWIZZLE_COLUMNS):
        T.ptx[TMA_STORE](T.address_of(map_c[0]), origin[0] + q * c.epilogue_tile + cb * SWIZZLE_COLUMNS, origin[1],
                         T.cuda.cvta_generic_to_shared(SMH.ptr_to([staging_element(p, wg, q % 2) + cb * c.rows * SWIZZLE_COLUMNS])))
    T.ptx["cp.async.bulk.commit_group"]()


@T.macro
def store_tma_chunk(p, SMH, acc, args, map_c, part, wg, t, m0, n0, q, b, group, res, held, first=None):
    # the warpgroup's rows of the whole tile (epilogue_tile 0: q = 0, b = 0; chunks: store_tma_chunks), converted
    # (the fused epilogue first), into its staging buffer b, 128-byte swizzled in 64-column blocks (16-byte chunk
    # j % 8 of row r at chunk (j % 8) ^ (r % 8): conflict-free, and what the TMA store's CU_TENSOR_MAP_SWIZZLE_128B
    # reads); then one thread stores the blocks with TMA (clipped at C's edges) and commits them as one bulk
    # group. Before the buffer is written again, the stores that read it have (wait_group.read 0, then the
    # barrier). Rows part * rows.. of the tile; the buffer and the named barrier are warpgroup wg's. With ``res``
    # the buffer holds the residual (load_residual): once its barrier's phase of tile res[2] completes, each
    # thread reads the word of each pair where it then writes C's; ``held``: residual_read="early"'s words (store). ``first`` (shift_last): a tile
    # whose box starts below its own first row (m0 < first) stores its own rows from registers (store_shifted)
    c = p.config
    SMW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn", layout="default", align=1024)])
    word = T.alloc_tensor(ty_args=[T.Tensor((1 + residual_pairs(p),), "uint32", scope="local", layout="default")])
    base = staging_byte(p, wg, b)
    if t == 0:
        T.ptx["cp.async.bulk.wait_group.read"](0)
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
    if I.constexpr(res is not None and c.residual_read != "preread"):  # preread: waited before its reads
        T.cuda.mbarrier_wait(res[0].ptr_to([2 * c.stages + wg]), res[2] % 2)
    if I.constexpr(first is None):
        chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, res, held, base, None)
        issue_tma_stores(p, SMH, map_c, part, wg, t, m0, n0, q, b)
    else:
        if first > m0:  # the shifted tile: the previous tile row's rows lie in its box (gemm_shift.kept)
            chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, res, held, base, first)
            T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))  # the staged residual read
        else:
            chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, res, held, base, None)
            issue_tma_stores(p, SMH, map_c, part, wg, t, m0, n0, q, b)


@T.macro
def chunk_words(p, SMW, acc, args, word, part, t, m0, n0, q, group, res, held, base, first):
    # the warpgroup's C words of chunk q (store_tma_chunk), each into the staging buffer at ``base`` or, with
    # ``first`` (store_shifted: the shifted tile), straight to C where gemm_shift.kept keeps its row
    c = p.config
    for mi in T.unroll(c.rows // WGMMA_M):
        for j in T.unroll(c.staging_columns // 8):
            for h in T.unroll(2):
                r = mi * WGMMA_M + (t // 32) * 16 + (t % 32) // 4 + 8 * h
                if I.constexpr(res is not None):
                    word[0] = staged_word(p, SMW, res, base, mi, j, h, r, t)
                    T.ptx[f"cvt.rn.{p.out_dtype}x2.f32"](
                        word[0],
                        out_value(p, args, acc[mi * c.block_n // 2 + tile_j(p, q, j) * 4 + h * 2 + 1], m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4) + 1, group, residual_half(p, word[0], 1)),
                        out_value(p, args, acc[mi * c.block_n // 2 + tile_j(p, q, j) * 4 + h * 2], m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4), group, residual_half(p, word[0], 0)))
                else:
                    residual_word(p, args, word, m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4), held,
                                  held_index(p, mi, tile_j(p, q, j), h))
                    T.ptx[f"cvt.rn.{p.out_dtype}x2.f32"](
                        word[0],
                        out_value(p, args, acc[mi * c.block_n // 2 + tile_j(p, q, j) * 4 + h * 2 + 1], m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4) + 1, group, pair_half(p, word, 1)),
                        out_value(p, args, acc[mi * c.block_n // 2 + tile_j(p, q, j) * 4 + h * 2], m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4), group, pair_half(p, word, 0)))
                if I.constexpr(first is None):
                    SMW[staging_word(p, base, j, r, t)] = word[0]
                else:
                    store_shifted(p, args, word, m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4), first)


@T.macro
def store_shifted(p, args, word, row, col, first):
    # the shifted tile's word of C at (row, col), a column pair (epilogue="tma" with shift_last): stored from
    # registers where gemm_shift.kept keeps its row (its own, inside M) and the pair lies in C. A box store at the
    # tile's origin would rewrite the previous tile row's rows; one at its own first row reaches into the next
    # warpgroup's rows (each warpgroup's buffer holds only its own)
    T.ptx["st.global.b32"](args["C"].ptr_to([row, col]), word[0],
                           pred=T.and_(shift.kept(p, row, first, row < p.M, T.and_), col < p.N))


@T.macro
def issue_tma_stores(p, SMH, map_c, part, wg, t, m0, n0, q, b):
    # the staging buffer b's chunk q written (store_tma_chunk): the writes made visible to the async proxy, then
    # one thread stores its 64-column blocks (and a tail block) with TMA and commits them as one bulk group
    c = p.config
    T.ptx["fence.proxy.async.shared::cta"]()
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
    if t == 0:
        for cb in T.unroll(c.staging_columns // SWIZZLE_COLUMNS):
            T.ptx[TMA_STORE](T.address_of(map_c[0]), chunk_column(p, n0, q) + cb * SWIZZLE_COLUMNS, m0 + part * c.rows,
                             T.cuda.cvta_generic_to_shared(SMH.ptr_to([staging_element(p, wg, b) + cb * c.rows * SWIZZLE_COLUMNS])))
        if I.constexpr(c.tail_columns):  # the tail block through C's tail map: its box ends at the tile's last column
            T.ptx[TMA_STORE](T.address_of(map_c[1]), n0 + tail_column(p), m0 + part * c.rows,
                             T.cuda.cvta_generic_to_shared(SMH.ptr_to([tail_element(p, wg, b)])))
        T.ptx["cp.async.bulk.commit_group"]()


def chunk_count(p: Sm90Plan) -> int:
    """The chunks of a tile's columns (``epilogue_tile``; the whole tile: 1)."""
    return p.config.block_n // p.config.epilogue_tile if p.config.epilogue_tile else 1


def staged_word(p: Sm90Plan, SMW, res, base, mi, j, h, r, t):
    """The staged residual word of the column pair (``mi``, ``j``, ``h``) at row ``r`` (whole-tile staging): read
    from the staging buffer (``staging_word``), or ``preread``'s register (``res[-1]``, ``held_index``)."""
    if p.config.residual_read == "preread":
        return res[-1][held_index(p, mi, j, h)]
    return SMW[staging_word(p, base, j, r, t)]


def staging_word(p: Sm90Plan, base, j, r, t):
    """The 4-byte word of a staging buffer (at byte ``base``) holding the column pair of group ``j`` (of the
    chunk) in row ``r`` that thread ``t`` of the warpgroup owns: 64-column blocks of ``rows`` 128-byte rows,
    16-byte chunk ``j % 8`` of row ``r`` at chunk ``(j % 8) ^ (r % 8)`` (``(t % 32) // 4`` is ``r % 8``); the
    tail block's groups (``Sm90Config.tail_columns``) at ``tail_word``."""
    word = (base + (j // 8) * p.config.rows * 128 + r * 128 + T.bitwise_xor(j % 8, (t % 32) // 4) * 16) // 4 + t % 4
    if not p.config.tail_columns:
        return word
    whole = p.config.block_n // SWIZZLE_COLUMNS * 8  # the 8-column groups of the whole blocks
    return T.if_then_else(j < whole, word, tail_word(p, base, j - whole, r, t))


def tail_word(p: Sm90Plan, base, j, r, t):
    """The word of the tail block (``Sm90Config.tail_columns``, after the whole blocks) holding group ``j`` of it in
    row ``r`` for thread ``t``: ``rows`` rows of the tail's bytes, 16-byte chunk ``j`` of row ``r`` at ``tail_chunk``."""
    c = p.config
    start = base + c.block_n // SWIZZLE_COLUMNS * c.rows * SWIZZLE_COLUMNS * 2
    return (start + r * c.tail_columns * 2 + tail_chunk(p, j, t) * 16) // 4 + t % 4


def tail_chunk(p: Sm90Plan, j, t):
    """Where 16-byte chunk ``j`` of a tail row ``r`` lies (``r % 8`` is ``(t % 32) // 4``): swizzled
    (``Sm90Config.tail_swizzle``, ``Swizzle<B,4,3>``) at ``j ^ ((r / (128 / width)) % (width / 16))``: 64-byte,
    ``j ^ ((r / 2) % 4)``, 32-byte, ``j ^ ((r / 4) % 2)``; a warp's 8 rows x 4 words fill the 32 banks once). An
    unswizzled tail (8, 24, 40, 48 or 56 columns) keeps ``j``: its rows of 16, 48, 80, 112 bytes put a warp's 8 rows
    on distinct banks; 96-byte rows (48 columns) two rows a bank (``TAIL_SWIZZLE``)."""
    width = p.config.tail_swizzle
    if not width:
        return j
    return T.bitwise_xor(j % (width // 16), (t % 32) // (4 * (128 // width)))


def tail_column(p: Sm90Plan) -> int:
    """The tile's first column of its tail block (``Sm90Config.tail_columns``)."""
    return p.config.block_n - p.config.tail_columns


def tail_element(p: Sm90Plan, wg, b):
    """The first element of the tail block of warpgroup ``wg``'s staging buffer ``b``: after its whole blocks."""
    return staging_element(p, wg, b) + tail_column(p) * p.config.rows


def tile_j(p: Sm90Plan, q, j):
    """The tile's 8-column group of group ``j`` of chunk ``q`` (the whole tile: ``j``)."""
    return j if p.config.epilogue_tile == 0 else q * (p.config.epilogue_tile // 8) + j


def chunk_column(p: Sm90Plan, n0, q):
    """C's first column of chunk ``q`` of the tile at column ``n0``."""
    return n0 if p.config.epilogue_tile == 0 else n0 + q * p.config.epilogue_tile


def staging_element(p: Sm90Plan, wg, b):
    """The first element of warpgroup ``wg``'s staging buffer ``b`` (``Sm90Config.staging_bytes``: each
    warpgroup's ``staging_buffers`` buffers of ``rows x staging_columns``, after the ring)."""
    c = p.config
    if c.epilogue_tile == 0:
        return p.staging + wg * c.rows * c.block_n
    return p.staging + (wg * 2 + b) * c.rows * c.epilogue_tile


def staging_byte(p: Sm90Plan, wg, b):
    """``staging_element`` in bytes."""
    c = p.config
    if c.epilogue_tile == 0:
        return p.staging * 2 + wg * c.rows * c.block_n * 2
    return p.staging * 2 + (wg * 2 + b) * c.rows * c.epilogue_tile * 2


__all__ = ["CHUNK_WAIT", "EPILOGUE_BARRIER", "TMA_STORE", "chunk_count", "staging_byte", "staging_element", "staging_word", "store", "store_fragment",
           "store_tma", "tail_column", "tail_element"]
