"""Emission of the sm90 paged decode attention: a ``Sm90PagedDecodePlan`` to two TIRx PrimFuncs, ``main`` (the
split-KV partials, its K and V tiles loaded by a producer warp with TMA into the consumer warps' mbarrier rings:
``paged_decode_plan``'s docstring) and ``merge`` (the sm80 merge kernel, unchanged).

The consumers' math, the CTA's state and the merges are the sm80 kernel's macros
(``kernels.sm80.paged_decode_emit``); the plan's ``smem_word`` (TMA's swizzle), ``q_wait_groups`` and
``block_threads`` adapt them. Here: the tensor maps, the producer and the consumers' mbarrier loop.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...isa.hopper_layout import TMA_SWIZZLE_MODE
from ...tirx_private import transpile_once
from ..sm80.paged_decode_emit import (FULL, cta_kernel, cta_merge, empty_state, issue_q, last_cta, mask_softmax,
                                      page_ok, part_tiles_of, pv, q_fragments, scores, value_factor, write_partial)
from ..sm80.paged_decode_plan import TILE_KEYS
from .gemm_emit import TMA_LOAD, tensor_map_lines
from .paged_decode_plan import TABLE_CHUNK, Sm90PagedDecodePlan

TMA_LOAD_3D = TMA_LOAD.replace(".2d.", ".3d.")


def table_page(p, args, ln, tile):
    """The block table's page of kv tile ``tile`` of the lane's sequence (any int32)."""
    return args["BLOCK_TABLE"][ln.b, tile * TILE_KEYS // p.problem.page_size]


def cache_row(p: Sm90PagedDecodePlan, page, tile):
    """The tensor maps' row (dim 2) of tile ``tile``'s first key on ``page``: past the cache (TMA's zeros) where
    the page is outside it."""
    return T.if_then_else(page_ok(p, page), page * p.problem.page_size + tile * TILE_KEYS % p.problem.page_size,
                          p.problem.num_pages * p.problem.page_size)


@T.macro
def issue_tile(p, args, ln, MB, PG, tile, w, n, page):
    # lane 0 of the producer: once the consumer released the stage, the page beside it, "full" armed with the
    # tile's bytes, the K and V boxes (slices of swizzle_bytes per row) into warp w's ring slot n
    S = p.config.stages
    s = n % S
    T.cuda.mbarrier_wait(MB.ptr_to([p.empty_barrier(w, s)]), (n // S + 1) % 2)
    PG[w * S + s] = page
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([p.full_barrier(w, s)]), T.uint32(p.tile_bytes))
    for h in T.unroll(p.slices):
        tma_box(p, ln, args["MAP_K"], p.ring_word(w, s, 0) + h * TILE_KEYS * p.slice_words, h * p.slice_elems,
                cache_row(p, page, tile), MB.ptr_to([p.full_barrier(w, s)]))
        tma_box(p, ln, args["MAP_V"], p.ring_word(w, s, 1) + h * TILE_KEYS * p.slice_words, h * p.slice_elems,
                cache_row(p, page, tile), MB.ptr_to([p.full_barrier(w, s)]))


def tma_box(p: Sm90PagedDecodePlan, ln, tensor_map, word, dim, row, mbar):
    """One TMA box (16 rows of one kv head from cache row ``row``, dims ``dim ..``) into shared word ``word``,
    completing on ``mbar``."""
    return T.ptx[TMA_LOAD_3D](T.cuda.cvta_generic_to_shared(ln.SMW.ptr_to([word])), T.address_of(tensor_map), dim,
                              ln.hk, row, mbar)


@T.macro
def producer(p, args, ln, MB, PG, t0, t1):
    # the producer warp: its lanes read the table TABLE_CHUNK tiles at a time, one chunk ahead (pg[1]); lane 0
    # issues tile t0 + j into the ring of warp j % warps
    lane = T.cuda.lane_id()
    W = p.config.warps
    if t0 + lane < t1:
        ln.pg[1] = table_page(p, args, ln, t0 + lane)
    for j in range(t1 - t0):
        if j % TABLE_CHUNK == 0:
            ln.pg[0] = ln.pg[1]
            if t0 + j + TABLE_CHUNK + lane < t1:
                ln.pg[1] = table_page(p, args, ln, t0 + j + TABLE_CHUNK + lane)
        ln.pg[2] = T.cuda.__shfl_sync(T.uint32(FULL), ln.pg[0], j % TABLE_CHUNK, 32)
        if lane == 0:
            issue_tile(p, args, ln, MB, PG, t0 + j, j % W, j // W, ln.pg[2])


@T.macro
def zero_rows(p, ln, base, keep):
    # rows keep.. of the V tile at word base to zeros (the sequence's last tile: rows past L), then ordered
    # before any later TMA write of the slot
    lane = T.cuda.lane_id()
    for i in T.unroll(TILE_KEYS * p.row_words // 32):
        if (lane + 32 * i) // p.row_words >= keep:
            ln.SMW[base + p.smem_word((lane + 32 * i) // p.row_words, (lane + 32 * i) % p.row_words)] = T.uint32(0)
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.warp_sync()


@T.macro
def consumer_loop(p, ln, MB, PG, first, count):
    # the warp's tiles first, first + warps, ...: wait on "full", the sm80 math on the slot, release "empty"
    W, S = p.config.warps, p.config.stages
    w = T.cuda.warp_id()
    for n in range(count):
        s = n % S
        tile = first + n * W
        T.cuda.mbarrier_wait(MB.ptr_to([p.full_barrier(w, s)]), (n // S) % 2)
        if (tile + 1) * TILE_KEYS > ln.L:
            zero_rows(p, ln, p.ring_word(w, s, 1), ln.L - tile * TILE_KEYS)
        scores(p, ln, p.ring_word(w, s, 0))
        mask_softmax(p, ln, tile, PG[w * S + s])
        pv(p, ln, p.ring_word(w, s, 1))
        # the slot's generic reads ordered before the producer's next TMA write of it (a write after read across
        # proxies: PTX ISA 9.4 §8.6; CUTLASS's epilogue fences before releasing a C buffer it read the same way)
        T.ptx["fence.proxy.async.shared::cta"]()
        T.cuda.warp_sync()
        if T.cuda.lane_id() == 0:
            T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([p.empty_barrier(w, s)]), T.uint32(1))


@T.macro
def tma_body(p, args, ln, split, bh):
    # the CTA's partition as sm80's paged_body; the producer warp (warp `warps`) and the consumers as two roles
    W, S = p.config.warps, p.config.stages
    MB = T.alloc_tensor(ty_args=[T.Tensor((p.barriers,), "uint64", scope="shared", layout="default")])
    PG = T.alloc_tensor(ty_args=[T.Tensor((W * S,), "int32", scope="shared", layout="default")])
    tid = T.cuda.thread_idx("x")
    tiles = (ln.L + TILE_KEYS - 1) // TILE_KEYS
    t0 = split * part_tiles_of(p, args)  # (no name for it: a Python int binds a variable in the code)
    if t0 < tiles:
        t1 = T.if_then_else(split == p.split_kv - 1, tiles, T.min(t0 + part_tiles_of(p, args), tiles))
        if tid == 0:
            for i in T.unroll(p.barriers):
                T.ptx.mbarrier.init.shared.b64(MB.ptr_to([i]), T.uint32(1))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        T.cuda.cta_sync()
        if tid >= p.threads:
            producer(p, args, ln, MB, PG, t0, t1)
        else:
            w = T.cuda.warp_id()
            issue_q(p, args, ln)
            q_fragments(p, ln)
            empty_state(p, ln)
            consumer_loop(p, ln, MB, PG, t0 + w, T.max(t1 - t0 - w + W - 1, 0) // W)
            write_partial(p, args, ln, bh * p.split_kv + split, value_factor(p, args, ln.hk))
            if I.constexpr(p.last_cta):
                last_cta(p, args, bh, tiles)
    if I.constexpr(p.last_cta):
        if T.and_(T.and_(tiles == 0, split == 0), tid < p.threads):  # no key: O = 0, LSE = -inf
            cta_merge(p, args, bh, 0)


def signature_source(p: Sm90PagedDecodePlan) -> str:
    """``main(<p.params>)``: the host part encodes the tensor maps of K and V (``(D, Hkv, num_pages
    page_size)``, boxes ``(slice_elems, 1, 16)``: ``paged_decode_plan``'s docstring), then the kernel."""
    pr = p.problem
    names = [q.name for q in p.params]
    dtype = {q.name: q.dtype for q in p.params}["K_CACHE"]
    lines = ["@T.function", f"def main({', '.join(f'{n}: types[{i}]' for i, n in enumerate(names))}):"]
    row = pr.head_dim * p.elem_bytes
    for name in ("K_CACHE", "V_CACHE"):
        lines += tensor_map_lines(name, "[0, 0, 0, 0]", (pr.head_dim, pr.kv_heads, pr.num_pages * pr.page_size),
                                  (row, pr.kv_heads * row), (p.slice_elems, 1, TILE_KEYS), dtype,
                                  TMA_SWIZZLE_MODE[p.swizzle_bytes])
    args = ", ".join(f"{n!r}: {n}" for n in names)
    return "\n".join([*lines, f"    cta_kernel(p, {{{args}, 'MAP_K': mapK_CACHE, 'MAP_V': mapV_CACHE}}, tma_body)", ""])


@transpile_once
def emit_paged_decode(p: Sm90PagedDecodePlan):
    """The TIRx PrimFunc ``main`` of a plan: the partials (merge "last-cta": O and LSE too; ``p.params``)."""
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p), {"T": T, "cta_kernel": cta_kernel, "tma_body": tma_body, "p": p,
                                       "types": types})


__all__ = ["emit_paged_decode"]
