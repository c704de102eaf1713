"""The fused residual staged in the chunked TMA epilogue's buffers (``Sm90Config.residual_read="chunks"``; CUTLASS's
sm90 "staged C" with ``ReuseSmemC``: C and D share the buffers).

The chunked epilogue (``epilogue_tile``, ``gemm_epilogue.store_tma_chunks``) writes chunk ``q`` of a warpgroup's rows
(``epilogue_tile`` columns) into its buffer ``q % 2`` and stores it with TMA. Here the producer's thread first
TMA-loads the residual's chunk into that buffer (boxes of C's map: ``rows x 64``, 128-byte swizzled, C's staging
layout), so each consumer thread reads its words of C's pairs where it then writes D's: no shared memory beyond the
chunk buffers, so 128x256 keeps its 4 ring stages (the whole-tile staged reads, ``tma``, need 64 KB and 3).

Each buffer (warpgroup ``wg``, buffer ``b``) has two mbarriers after the ring's (``full_bar``, ``free_bar``): "full",
armed by the producer with the chunk's bytes, its phase completed by the TMA load; "free", arrived on by the
warpgroup's storing thread once its TMA store has read the buffer (``cp.async.bulk.wait_group.read 0``). Use ``u`` of a
buffer (``use_of``: the CTA's ``i``-th tile's chunk ``q`` is use ``i * uses(b) + q // 2``) waits "full" at parity
``u % 2`` (consumers) and "free" at parity ``(u + 1) % 2`` (producer: the first use passes), the phases carried across
the CTA's tiles.

When (the producer thread, ``load_chunks``): the tile's first ``EARLY_CHUNKS`` chunks after its mainloop's last
ring load, ``stages`` k-tiles ahead of the consumers (about 3 us at 4096^3: a DRAM read's latency is about 1 us
under load), their buffers freed by the previous tile's last two chunks (freed in this tile's first k-tile:
``free_last``); with them an L2 prefetch of the tile's later chunks (``cp.async.bulk.prefetch.tensor``). The later
chunks (2.., 128x256 / 64: 2 and 3) need buffers the tile's own chunks 0.. still hold: the producer loads them in the
next tile's producer loop after its ``min(stages, k_tiles)``-th ring load (``late_at``), the point at which it would
wait on "empty" until the consumers' next mainloop anyway (so the ring loses nothing), waiting "free" of chunk
``q - 2``, which the storing thread frees right after that chunk's store (``store_chunks``: it waits for its store's read
then, the other warps writing the next chunk meanwhile). The CTA's last tile's later chunks after its loop
(``load_last``). The depth is two chunks (the two buffers): a later chunk's load is exposed in the epilogue for its L2
latency (prefetched) less one chunk's work; CUTLASS's four 32-column C buffers a warpgroup go deeper (the journal, stop
53 "resclock").

The last two chunks' buffers are freed in the next tile's first k-tile (``free_last``: after its wgmma issue, where the
storing thread's wait for its stores' read costs the warpgroup nothing) rather than in the epilogue.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from .gemm_epilogue import (EPILOGUE_BARRIER, chunk_count, staging_byte, staging_element, staging_word,
                            store_chunk_blocks, tile_j)
from .gemm_plan import SWIZZLE_COLUMNS, WARPGROUP, WGMMA_M, Sm90Plan
from .gemm_residual import PREFETCH, residual_half
from .gemm_store import out_value

EARLY_CHUNKS = 2
"""The chunks a tile's residual loads start with after its mainloop's last ring load: one a buffer."""


def full_bar(p: Sm90Plan, wg, b):
    """The "full" mbarrier of warpgroup ``wg``'s buffer ``b`` (after the ring's 2 ``stages``)."""
    return 2 * p.config.stages + 2 * wg + b


def free_bar(p: Sm90Plan, wg, b):
    """The "free" mbarrier of warpgroup ``wg``'s buffer ``b`` (after the "full" ones)."""
    return 2 * p.config.stages + 2 * p.config.consumers + 2 * wg + b


def barriers(p: Sm90Plan) -> int:
    """The mbarriers of the staged chunks: "full" and "free" for each warpgroup's two buffers."""
    return 4 * p.config.consumers


def uses(p: Sm90Plan, b: int) -> int:
    """The uses of buffer ``b`` a tile: chunks ``b, b + 2, ...``."""
    return (chunk_count(p) - b + 1) // 2


def use_of(p: Sm90Plan, i, q: int):
    """Buffer ``q % 2``'s use by chunk ``q`` of the CTA's ``i``-th tile."""
    return i * uses(p, q % 2) + q // 2


def late_at(p: Sm90Plan) -> int:
    """The k-tile of a tile's producer loop after whose ring load the previous tile's later chunks are loaded."""
    return min(p.config.stages, p.k_tiles) - 1


def chunk_bytes(p: Sm90Plan) -> int:
    """A warpgroup's chunk of the residual in bytes (16-bit: ``rows x epilogue_tile x 2``)."""
    return p.config.rows * p.config.epilogue_tile * 2


@T.macro
def init(p, MB):
    # the staged chunks' mbarriers, one arrival a phase each (the producer's expect_tx; the storing thread's)
    if I.constexpr(p.config.residual_read == "chunks"):
        for k in T.unroll(barriers(p)):
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([2 * p.config.stages + k]), T.uint32(1))


@T.macro
def load_chunk(p, SMH, MB, maps, load, i, q, m0, n0):
    # the producer's thread: chunk q of the CTA's i-th tile (at m0, n0) into each warpgroup's buffer q % 2, once the
    # store of its previous use has read it ("free"), "full" armed with its bytes (load: gemm_emit.tma_load; maps[3]:
    # the residual's map, C's boxes)
    c = p.config
    for wg in T.unroll(c.consumers):
        T.cuda.mbarrier_wait(MB.ptr_to([free_bar(p, wg, q % 2)]), (use_of(p, i, q) + 1) % 2)
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([full_bar(p, wg, q % 2)]), T.uint32(chunk_bytes(p)))
        for cb in T.unroll(c.epilogue_tile // SWIZZLE_COLUMNS):
            load(p, SMH, staging_element(p, wg, q % 2) + cb * c.rows * SWIZZLE_COLUMNS, maps[3],
                 n0 + q * c.epilogue_tile + cb * SWIZZLE_COLUMNS, m0 + wg * c.rows, MB.ptr_to([full_bar(p, wg, q % 2)]))


@T.macro
def prefetch_late(p, maps, m0, n0):
    # the tile's later chunks (EARLY_CHUNKS..) into L2, each warpgroup's 64-column boxes
    c = p.config
    if I.constexpr(chunk_count(p) > EARLY_CHUNKS):
        for q in T.unroll(EARLY_CHUNKS, chunk_count(p)):
            for wg in T.unroll(c.consumers):
                for cb in T.unroll(c.epilogue_tile // SWIZZLE_COLUMNS):
                    T.ptx[PREFETCH](T.address_of(maps[3]), n0 + q * c.epilogue_tile + cb * SWIZZLE_COLUMNS,
                                    m0 + wg * c.rows)


def origin_of(p: Sm90Plan, pid, i) -> tuple:
    """(first row, first column) of the CTA ``pid``'s ``i``-th tile (data-parallel: unit ``pid + i ctas``)."""
    tile = p.tile_of(p.unit_of(pid + i * p.ctas, T.truncdiv, T.truncmod)[1], T.truncdiv, T.truncmod, T.min)
    return tile[0] * p.config.block_m, tile[1] * p.config.block_n


def chunks_of(p: Sm90Plan, i, pid):
    """What the producer's ``load_chunks`` needs of the CTA ``pid``'s ``i``-th tile (``residual_read="chunks"``), else
    None."""
    return (i, pid) if p.config.residual_read == "chunks" else None


def last_tile(p: Sm90Plan, pid):
    """The index of the CTA ``pid``'s last tile."""
    return T.truncdiv(p.units - 1 - pid, p.ctas)


@T.macro
def load_chunks(p, SMH, MB, maps, load, kt, i, pid, m0, n0):
    # residual_read="chunks", the producer's thread after k-tile kt's ring load of the CTA's i-th tile (at m0, n0): at
    # late_at the previous tile's later chunks, after the last k-tile this tile's first EARLY_CHUNKS and the L2
    # prefetch of its later ones
    if kt == late_at(p):
        if i > 0:
            load_late(p, SMH, MB, maps, load, i - 1, *origin_of(p, pid, i - 1))
    if kt == p.k_tiles - 1:
        for q in T.unroll(EARLY_CHUNKS):
            load_chunk(p, SMH, MB, maps, load, i, q, m0, n0)
        prefetch_late(p, maps, m0, n0)


@T.macro
def load_last(p, SMH, MB, maps, load, pid):
    # residual_read="chunks", the producer's thread after its last tile: that tile's later chunks
    if I.constexpr(p.config.residual_read == "chunks"):
        load_late(p, SMH, MB, maps, load, last_tile(p, pid), *origin_of(p, pid, last_tile(p, pid)))


@T.macro
def load_late(p, SMH, MB, maps, load, i, m0, n0):
    # the later chunks (EARLY_CHUNKS..) of the CTA's i-th tile (at m0, n0), in order
    if I.constexpr(chunk_count(p) > EARLY_CHUNKS):
        for q in T.unroll(EARLY_CHUNKS, chunk_count(p)):
            load_chunk(p, SMH, MB, maps, load, i, q, m0, n0)


@T.macro
def free_last(p, MB, i, wg, t, kt):
    # residual_read="chunks", warpgroup wg's k-tile kt of the CTA's i-th tile: at its first, after the wgmma issue, the
    # storing thread waits for the previous tile's last stores' reads and frees both buffers (their last uses)
    if kt == 0:
        if t == 0:
            if i > 0:
                T.ptx["cp.async.bulk.wait_group.read"](0)
                for b in T.unroll(2):
                    T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([free_bar(p, wg, b)]), T.uint32(1))


def held_words(p: Sm90Plan) -> int:
    """A consumer thread's residual words of a chunk, one a column pair (``rows / 64 x epilogue_tile / 8 x 2``: 16 at
    64 rows x 64 columns), read all before the chunk's first write (no read behind a write: ``gemm_residual``'s
    ``preread``)."""
    return p.config.rows // WGMMA_M * p.config.epilogue_tile // 8 * 2


@T.macro
def store_chunks(p, SMH, MB, acc, args, map_c, part, wg, t, m0, n0, i):
    # residual_read="chunks": the epilogue of the CTA's i-th tile, chunk q into buffer q % 2: wait "full" (its residual
    # landed; the buffer's previous store has read it, as the producer waited "free"), the thread's residual words
    # into registers, its D words over them, the fence, ONE named barrier, the storing thread's TMA store and commit,
    # then, where a later chunk reuses the buffer, its wait for the store's read and the buffer's "free"
    c = p.config
    SMW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn", layout="default", align=1024)])
    word = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    held = T.alloc_tensor(ty_args=[T.Tensor((held_words(p),), "uint32", scope="local", layout="default")])
    origin = T.alloc_tensor(ty_args=[T.Tensor((2,), "int32", scope="local", layout="default")])
    origin[0] = n0  # bound once a tile: each chunk's store reads it
    origin[1] = m0 + part * c.rows
    for q in T.unroll(chunk_count(p)):
        T.cuda.mbarrier_wait(MB.ptr_to([full_bar(p, wg, q % 2)]), use_of(p, i, q) % 2)
        for mi in T.unroll(c.rows // WGMMA_M):
            for j in T.unroll(c.epilogue_tile // 8):
                for h in T.unroll(2):
                    held[(mi * (c.epilogue_tile // 8) + j) * 2 + h] = SMW[staging_word(
                        p, staging_byte(p, wg, q % 2), j, mi * WGMMA_M + (t // 32) * 16 + (t % 32) // 4 + 8 * h, t)]
        chunk_words(p, SMW, acc, args, word, held, part, wg, t, m0, n0, q)
        T.ptx["fence.proxy.async.shared::cta"]()
        T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
        if t == 0:
            store_chunk_blocks(p, SMH, map_c, wg, origin, q)
            if q + 2 < chunk_count(p):  # a later chunk of the tile reuses the buffer (else: free_last)
                T.ptx["cp.async.bulk.wait_group.read"](0)
                T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([free_bar(p, wg, q % 2)]), T.uint32(1))


@T.macro
def chunk_words(p, SMW, acc, args, word, held, part, wg, t, m0, n0, q):
    # chunk q's D words of the thread (the fused epilogue over acc, the held residual pair added), each over its
    # residual word in buffer q % 2
    c = p.config
    for mi in T.unroll(c.rows // WGMMA_M):
        for j in T.unroll(c.epilogue_tile // 8):
            for h in T.unroll(2):
                r = mi * WGMMA_M + (t // 32) * 16 + (t % 32) // 4 + 8 * h
                k = (mi * (c.epilogue_tile // 8) + j) * 2 + h
                a = mi * c.block_n // 2 + tile_j(p, q, j) * 4 + h * 2
                T.ptx[f"cvt.rn.{p.out_dtype}x2.f32"](
                    word[0],
                    out_value(p, args, acc[a + 1], m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4) + 1, None,
                              residual_half(p, held[k], 1)),
                    out_value(p, args, acc[a], m0 + part * c.rows + r, n0 + 8 * tile_j(p, q, j) + 2 * (t % 4), None,
                              residual_half(p, held[k], 0)))
                SMW[staging_word(p, staging_byte(p, wg, q % 2), j, r, t)] = word[0]


__all__ = ["EARLY_CHUNKS", "barriers", "chunk_bytes", "chunks_of", "free_bar", "free_last", "full_bar", "held_words",
           "init", "last_tile", "late_at", "origin_of", "load_chunk", "load_chunks", "load_last", "load_late", "prefetch_late", "store_chunks", "use_of", "uses"]
