"""When and in what pieces the sm90 GEMM reads a fused residual ahead of its epilogue
(``Sm90Config.residual_read``, ``gemm_plan.RESIDUAL_READS``): the k-tile of the staged loads (``residual_at``), the
sliced loads' boxes (``"sliced"``) and the producer's L2 prefetch (``"prefetch"``).

Why pieces: at 4096^3 on the H100 the residual cost 12 % over the plain GEMM whether it was read in the epilogue
(``global``) or by one TMA load of the warpgroup's rows halfway through the mainloop (``tma``); ncu put 29 % of the
warps' stalls on the consumers' wait for a ring stage's "full" barrier (benchmarks/RESULTS.md, the journal's stops
42 and 45): every CTA asks for its tile's 64 KB of residual at about the same moment (8 MB over 132 SMs) and the
3-stage ring's loads queue behind them, while the DRAM runs at about 1.2 of its 3.35 TB/s on average. Both reads
here spread the same bytes over the second half of the tile's mainloop, a small piece a k-tile beside the ring's
48 KB:

- ``sliced``: ``tma``'s loads into the staging buffer, cut into boxes of ``SLICE_ROWS`` rows x 64 columns (x the
  tail block's columns), issued by the warpgroup's thread 0 at k-tiles ``slice_window`` (from ``residual_at``, when
  the previous tile's stores have long read the buffer, to ``SLICE_LEAD`` k-tiles before the end, so that the last
  box lands before the epilogue waits); the epilogue is ``tma``'s. A box of one swizzle period (8 rows of 128, 64
  or 32 bytes: ``isa.hopper_layout.swizzle_period``) lands at a multiple of that period in the buffer, so TMA's
  swizzle, a function of the shared address, writes it where the whole-tile box would have.
- ``prefetch``: the producer's thread, beside the ring's loads of k-tiles ``prefetch_window``, brings one box of
  ``prefetch_rows`` rows x ``block_n`` columns of the tile's residual into L2 (``cp.async.bulk.prefetch.tensor``,
  PTX ISA 8.0, sm_90: no shared memory, no completion; out-of-bounds parts of a box are not fetched) through a
  tensor map of its own (unswizzled, ``prefetch_box``); the epilogue's ``global`` read then hits L2. Any epilogue
  and schedule (no K split). Between a line's prefetch and its read lies at most half a mainloop (about 23 us at
  4096^3, where the GEMM's DRAM traffic replaces the 50 MB L2 in about 40 us).
- ``preread`` (stop 49): ``tma``'s load; each thread reads its words (``held_words``) from the staging buffer into
  registers between the tile's last wgmma issue and its retirement (``preread``), so the epilogue reads no shared
  memory. ``tma``'s epilogue reads each word just before it writes C's there, and the CUDA compiler keeps every read
  behind the previous write (it cannot tell the swizzled addresses apart): at 128x256, 32 dependent round trips of two
  ``LDS`` a tile while the tensor cores wait (nvcc 13.0 SASS, benchmarks/journal/2026-12.md "Stop 49: epires").

- ``early`` (stop 52): ``global``'s loads of a column pair (``PAIR_LOAD``), issued in the mainloop into registers
  (``held_words``, ``held_index``: ``preread``'s words) rather than in the epilogue, a batch after each of the
  ``EARLY_TILES`` k-tiles that end ``EARLY_LEAD`` k-tiles before the mainloop's (``early_tile``, ``load_early``); the
  epilogue reads registers only. ``global``'s cost at 4096^3 is L1 time in the epilogue (a warp's fragment load
  touches 8 rows' lines: 4,096 wavefronts an SM a 128x256 tile, about 2.3 us at 1.75 GHz, stop 49) while the tensor
  cores wait; in the mainloop the LSU / L1 is idle (TMA fills the ring) and a k-tile's wgmma runs about 0.7 us, so
  an eighth of the tile's loads a k-tile (about 0.3 us of L1 time) hides under it, where one burst of all of them
  (2.3 us) would hold the warps' next wgmma issue back. Any schedule and epilogue, no K split, a 16-bit C
  (``Sm90Config.check``, ``gemm_plan.check_fused``).

The epilogue's reads from global memory (``global``, ``prefetch``) load a 16-bit C's column pair a load
(``residual_pairs``, ``load_pair``, ``pair_half``), as sm80's epilogue does.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ...isa.hopper_layout import CORE_ROWS
from ..common import ceil_div
from .gemm_plan import SWIZZLE_COLUMNS, WGMMA_M, Sm90Plan

SLICE_ROWS = CORE_ROWS
"""The rows of a ``sliced`` box: one period of every TMA swizzle (8 rows of the swizzle's width,
``isa.hopper_layout.swizzle_period``)."""
SLICE_LEAD = 4
"""``sliced``: the k-tiles between the last box's issue and the mainloop's end (about 3 us at 4096^3 on the H100,
0.7 us a k-tile: beyond a DRAM read's latency under load)."""
PREFETCH = "cp.async.bulk.prefetch.tensor.2d.L2.global.tile"
"""The TMA prefetch of a tensor map's box into L2 (``cp.async.bulk.prefetch.tensor``: PTX ISA 8.0, sm_90)."""


def residual_at(p: Sm90Plan) -> int:
    """The k-tile of a tile's mainloop after whose wgmma issue a warpgroup loads its residual rows
    (``residual_read="tma"``; ``"sliced"``: its first boxes): halfway, so the previous tile's TMA stores have long
    read the staging buffer (the wait costs nothing) and half a mainloop remains for the load."""
    return p.slice_tiles // 2


def window(p: Sm90Plan, lead: int) -> tuple[int, int]:
    """(first k-tile, k-tiles) of a spread read: from ``residual_at`` to ``lead`` k-tiles before the mainloop's end,
    at least one k-tile."""
    start = residual_at(p)
    return start, max(1, p.slice_tiles - lead - start)


def slice_window(p: Sm90Plan) -> tuple[int, int]:
    """``sliced``: the consumers' k-tiles that issue boxes (``window``, ``SLICE_LEAD``)."""
    return window(p, SLICE_LEAD)


def slice_boxes(p: Sm90Plan) -> int:
    """``sliced``: a warpgroup's boxes a tile: ``rows / SLICE_ROWS`` per 64-column block and per tail block."""
    c = p.config
    return (c.block_n // SWIZZLE_COLUMNS + (1 if c.tail_columns else 0)) * (c.rows // SLICE_ROWS)


def slice_range(p: Sm90Plan, kt, div=T.truncdiv):
    """``sliced``: the boxes ``[lo, hi)`` a warpgroup issues at k-tile ``kt`` of the window (box ``b`` at window step
    ``floor(b steps / boxes)``: the boxes spread evenly, the last at the window's last k-tile; ``div``: TIR's or
    Python's)."""
    start, steps = slice_window(p)
    boxes = slice_boxes(p)
    return div((kt - start) * boxes + steps - 1, steps), div((kt - start + 1) * boxes + steps - 1, steps)


def residual_box_rows(p: Sm90Plan) -> int:
    """The rows of the residual tensor map's boxes (a staged read): a warpgroup's rows (``tma``), ``SLICE_ROWS``
    (``sliced``)."""
    return SLICE_ROWS if p.config.residual_read == "sliced" else p.config.rows


def prefetch_window(p: Sm90Plan) -> tuple[int, int]:
    """``prefetch``: the producer's k-tiles that prefetch (``window`` without a lead: the producer runs up to
    ``stages`` k-tiles ahead of the consumers)."""
    return window(p, 0)


def prefetch_rows(p: Sm90Plan) -> int:
    """``prefetch``: the rows of a prefetch box, so that ``prefetch_window``'s k-tiles cover the tile's rows."""
    return ceil_div(p.config.block_m, prefetch_window(p)[1])


def prefetch_box(p: Sm90Plan) -> tuple[int, int]:
    """``prefetch``: the box of its tensor map, innermost first: the tile's columns x ``prefetch_rows`` (at most
    256 each: ``cuTensorMapEncodeTiled``; unswizzled, so a row of up to 512 bytes)."""
    return p.config.block_n, prefetch_rows(p)


def prefetch_map(p: Sm90Plan, maps):
    """``prefetch``: its tensor map among the kernel's (``gemm_emit.signature_source``: after A's, B's and, with a
    TMA epilogue, C's)."""
    return maps[2 + (p.config.epilogue == "tma")]


@T.macro
def prefetch_residual(p, maps, kt, m0, n0):
    # residual_read="prefetch", the producer's thread at k-tile kt of the tile at (m0, n0): box (kt - start) of the
    # tile's residual rows into L2 within prefetch_window
    if I.constexpr(p.config.residual_read == "prefetch"):
        rows = prefetch_rows(p)
        if T.and_(kt >= prefetch_window(p)[0], kt < prefetch_window(p)[0] + ceil_div(p.config.block_m, rows)):
            T.ptx[PREFETCH](T.address_of(prefetch_map(p, maps)), n0, m0 + (kt - prefetch_window(p)[0]) * rows)


@T.macro
def whole_box(p, SMH, res, load, whole, b, per, bar):
    # residual_read="sliced": box b of the 64-column blocks (block b // per, its rows (b % per) * SLICE_ROWS; per:
    # a block's boxes), loaded into the staging buffer at element ``whole`` + the box's place (load_slices)
    c = p.config
    load(p, SMH, whole + (b // per) * c.rows * SWIZZLE_COLUMNS + (b % per) * SLICE_ROWS * SWIZZLE_COLUMNS,
         res[1], res[4] + (b // per) * SWIZZLE_COLUMNS, res[3] + (b % per) * SLICE_ROWS, bar)


@T.macro
def load_slices(p, SMH, res, wg, kt, load, whole, tail, tail_col):
    # residual_read="sliced", thread 0 of warpgroup wg at k-tile kt: at the window's first k-tile, once the previous
    # tile's TMA stores have read the staging buffer, arm the residual barrier with the rows' bytes; then its
    # slice_range boxes (load: gemm_emit.tma_load) into the buffer at element ``whole`` (64-column blocks of rows x
    # 64) and ``tail`` (the tail block, its first column tail_col), each SLICE_ROWS rows
    c = p.config
    bar = res[0].ptr_to([2 * c.stages + wg])
    per = c.rows // SLICE_ROWS
    if kt == slice_window(p)[0]:
        T.ptx["cp.async.bulk.wait_group.read"](0)
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar, T.uint32(c.rows * c.block_n * 2))
    if T.and_(kt >= slice_window(p)[0], kt < slice_window(p)[0] + slice_window(p)[1]):
        for b in range(slice_range(p, kt)[0], slice_range(p, kt)[1]):
            if I.constexpr(c.tail_columns):
                if b >= c.block_n // SWIZZLE_COLUMNS * per:
                    load(p, SMH, tail + (b % per) * SLICE_ROWS * c.tail_columns, res[5], res[4] + tail_col,
                         res[3] + (b % per) * SLICE_ROWS, bar)
                else:
                    whole_box(p, SMH, res, load, whole, b, per, bar)
            else:
                whole_box(p, SMH, res, load, whole, b, per, bar)


def held_words(p: Sm90Plan) -> int:
    """``preread``: the staged residual words a consumer thread holds, one a column pair of its wgmma fragment
    (``rows / 64`` x ``block_n / 8`` x 2; 64 registers at 128x256)."""
    c = p.config
    return c.rows // WGMMA_M * c.block_n // 8 * 2


def held_index(p: Sm90Plan, mi: int, j: int, h: int) -> int:
    """``preread``: the held word of the thread's pair in 64-row block ``mi``, 8-column group ``j``, half ``h``."""
    return (mi * (p.config.block_n // 8) + j) * 2 + h


@T.macro
def preread(p, SMH, res, held, wg, t, base, word):
    # residual_read="preread", thread t of warpgroup wg between its tile's last wgmma issue and the retirement:
    # once its residual barrier's phase of tile res[2] completes, the word of each column pair whose C it will
    # write (word: gemm_epilogue.staging_word over the buffer at byte base) into held, all reads before any write
    c = p.config
    SMW = T.decl_tensor(SMH.ptr_to([0]), ty_args=[T.Tensor((p.smem_bytes // 4,), "uint32", scope="shared.dyn",
                                                           layout="default", align=1024)])
    T.cuda.mbarrier_wait(res[0].ptr_to([2 * c.stages + wg]), res[2] % 2)
    for mi in T.unroll(c.rows // WGMMA_M):
        for j in T.unroll(c.block_n // 8):
            for h in T.unroll(2):
                r = mi * WGMMA_M + (t // 32) * 16 + (t % 32) // 4 + 8 * h
                held[held_index(p, mi, j, h)] = SMW[word(p, base, j, r, t)]


PAIR_LOAD = "ld.global.b32"
"""``residual_pairs``: the load of a 16-bit residual's column pair (4 bytes, 4-byte aligned at an even column of an
even N)."""


def residual_pairs(p: Sm90Plan) -> bool:
    """Whether the epilogue reads a residual from global memory (``residual_read`` ``global`` / ``prefetch``; ``early``:
    from the registers its mainloop loaded, ``residual_word``) a column pair a load (``PAIR_LOAD``, ``load_pair``; the
    16-bit C's pairs of an even N, unswapped) rather than an element a load: a warp's load of the fragment touches 8
    rows' cache lines whatever its width, 8 L1 wavefronts, so two 2-byte loads a pair cost twice the L1 time of one
    4-byte load (at 128x256: 128 loads a thread, 8,192 wavefronts an SM a tile, about 4.7 us at 1.75 GHz while the
    tensor cores wait; stop 49, journal "Stop 49: epires")."""
    return (p.fusion.residual and not p.config.residual_staged and p.out_dtype != "f32" and p.N % 2 == 0
            and not p.config.swap_ab)


def pair_at(p: Sm90Plan, args, row, col):
    """The address of the residual's pair (``row``, ``col`` .. ``col + 1``) a ``PAIR_LOAD`` reads, its indices clamped
    into C (a pair outside C is computed, never stored)."""
    return args["residual"].ptr_to([T.min(row, p.M - 1), T.min(col, p.N - 2)])


@T.macro
def load_pair(p, args, word, row, col):
    # residual_pairs: the residual's pair (row, col .. col + 1) into word[1] (pair_at); nothing otherwise
    if I.constexpr(residual_pairs(p)):
        T.ptx[PAIR_LOAD](word[1], pair_at(p, args, row, col))


def pair_half(p: Sm90Plan, word, high: int):
    """``out_value``'s residual at the pair's element ``high`` (``residual_half`` of ``load_pair``'s word), or None
    (``out_value`` reads the element itself) without ``residual_pairs``."""
    return residual_half(p, word[1], high) if residual_pairs(p) else None


def residual_half(p: Sm90Plan, w, high: int):
    """The f32 value of the 16-bit C element in the low (``high`` 0: the pair's even column) or high half of a
    residual pair's word ``w``, staged or loaded (``load_pair``): the order ``cvt.rn.{bf16,f16}x2.f32`` packs a pair
    in."""
    bits = T.shift_right(w, T.uint32(16)) if high else T.bitwise_and(w, T.uint32(0xFFFF))
    return T.Cast("float32", T.reinterpret(T.Cast("uint16", bits), ty=p.tir_out))


EARLY_TILES = 8
"""``early``: the k-tiles after whose wgmma issue a batch of the tile's residual loads goes out (``early_tile``), each
an eighth of a thread's ``held_words``: at 128x256 8 loads a thread, 512 L1 wavefronts an SM (about 0.3 us at
1.75 GHz) under a k-tile's wgmma of about 0.7 us at 4096^3 on the H100 (the module docstring). Timed (H200,
2026-12-07, ``runs/sm90_epilogue_h200_2026-12-07d.md``): ``early`` +14.8 % over plain at 4096^3 where ``global`` ran
+7.6 %: the loads under the mainloop cost more than they save the epilogue; opt-in."""
EARLY_LEAD = 1
"""``early``: the k-tiles between the last batch and the mainloop's end (one k-tile, about 0.7 us at 4096^3, beside
the last wgmma's retirement, for a DRAM read's latency under load; the epilogue reads the batches' words in their
order, the last batch's last)."""


def early_start(p: Sm90Plan) -> int:
    """``early``: the k-tile of the first batch (``early_batches`` + ``EARLY_LEAD`` before the mainloop's end, or 0)."""
    return max(p.slice_tiles - EARLY_LEAD - early_batches(p), 0)


def early_tile(p: Sm90Plan, b, least=min):
    """``early``: the k-tile after whose wgmma issue batch ``b`` is loaded: ``early_start + b``, at most the last
    (a mainloop of fewer k-tiles loads its later batches at its last; ``least``: Python's or TIR's ``min``)."""
    return least(early_start(p) + b, p.slice_tiles - 1)


def early_batch(p: Sm90Plan) -> int:
    """``early``: the held words a batch loads (words ``b * early_batch ..`` of ``held_index``'s order, the last
    batch's fewer where ``EARLY_TILES`` does not divide ``held_words``)."""
    return ceil_div(held_words(p), EARLY_TILES)


def early_batches(p: Sm90Plan) -> int:
    """``early``: the batches of a tile's loads, ``EARLY_TILES`` or fewer (none empty)."""
    return ceil_div(held_words(p), early_batch(p))


def held_place(p: Sm90Plan, k):
    """(``mi``, ``j``, ``h``) of held word ``k`` (``held_index``'s inverse)."""
    groups = p.config.block_n // 8
    return k // 2 // groups, k // 2 % groups, k % 2


def early_held(p: Sm90Plan):
    """``early``: a consumer thread's registers for its ``held_words`` residual words (a local allocation; called in
    a macro), None for another read."""
    if p.config.residual_read != "early":
        return None
    return T.alloc_tensor(ty_args=[T.Tensor((held_words(p),), "uint32", scope="local", layout="default")])


def early_of(args, held, row, col):
    """``early``: what ``load_early`` needs (the kernel's arguments, ``early_held``'s registers, the thread's first
    fragment row and column), None without ``held``."""
    return None if held is None else (args, held, row, col)


@T.macro
def load_early(p, early, kt):
    # residual_read="early", after k-tile kt's wgmma issue: the batches due there (early_tile), each held word k the
    # thread's pair in row row + 64 mi + 8 h, column col + 8 j (held_place; early: consumer_tile's (args, held, row,
    # col), the thread's first fragment row and column); an odd N: the pair's elements a load each, packed as a pair
    args, held, row, col = early
    for b in T.unroll(early_batches(p)):
        if kt == early_tile(p, b, T.min):
            for w in T.unroll(early_batch(p)):
                if b * early_batch(p) + w < held_words(p):
                    early_word(p, args, held, b * early_batch(p) + w, row, col)


@T.macro
def early_word(p, args, held, k, row, col):
    # held word k (held_place) of the thread at (row, col): its pair, PAIR_LOAD at pair_at (an even N), else its two
    # elements, clamped into C (the second of the last column's pair: the first again; never stored)
    r = row + held_place(p, k)[0] * WGMMA_M + 8 * held_place(p, k)[2]
    n = col + 8 * held_place(p, k)[1]
    if I.constexpr(p.N % 2 == 0):
        T.ptx[PAIR_LOAD](held[k], pair_at(p, args, r, n))
    else:
        held[k] = T.bitwise_or(element_bits(p, args, r, n), T.shift_left(element_bits(p, args, r, n + 1), T.uint32(16)))


def element_bits(p: Sm90Plan, args, row, col):
    """The 16 bits of the residual's element (``row``, ``col``), clamped into C, as a ``uint32``."""
    value = args["residual"][T.min(row, p.M - 1), T.min(col, p.N - 1)]
    return T.Cast("uint32", T.reinterpret(value, ty="uint16"))


@T.macro
def residual_word(p, args, word, row, col, held, k):
    # the epilogue's residual pair (row, col .. col + 1) into word[1]: held word k (early), else load_pair
    if I.constexpr(held is not None):
        word[1] = held[k]
    else:
        load_pair(p, args, word, row, col)


def held_half(p: Sm90Plan, held, k, high):
    """``early``: the f32 residual of element ``high`` (0 or 1, a loop variable of the element stores) of held word
    ``k``, its bits ``16 high ..`` (``residual_half``'s order); None without ``held`` (``out_value`` reads the element
    itself)."""
    if held is None:
        return None
    bits = T.Cast("uint16", T.shift_right(held[k], T.Cast("uint32", 16 * high)))
    return T.Cast("float32", T.reinterpret(bits, ty=p.tir_out))


__all__ = ["EARLY_LEAD", "EARLY_TILES", "PAIR_LOAD", "PREFETCH", "SLICE_LEAD", "SLICE_ROWS", "early_batch",
           "early_batches", "early_held", "early_of", "early_start", "early_tile", "held_half", "held_index",
           "held_place", "held_words", "load_early", "load_pair", "load_slices", "pair_at", "pair_half",
           "prefetch_box", "prefetch_map", "prefetch_residual", "prefetch_rows", "prefetch_window", "preread",
           "residual_at", "residual_box_rows", "residual_half", "residual_pairs", "residual_word", "slice_boxes",
           "slice_range", "slice_window", "whole_box", "window"]
