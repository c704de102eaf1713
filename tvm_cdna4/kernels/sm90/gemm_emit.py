"""Emission of the sm90 GEMM: a ``Sm90Plan`` to a TIRx PrimFunc ``main(A, B, C, ...)`` (the plan's ``params``:
the fused epilogue's inputs follow C).

The kernel (``gemm_plan``'s docstring tells the design): warpgroup 0 is the producer (``setmaxnreg.dec``
to ``PRODUCER_REGS``; thread 0 waits on a stage's "empty" mbarrier, arms its "full" one with
``mbarrier.arrive.expect_tx`` and issues the two TMA loads, ``cp.async.bulk.tensor.2d`` (``tma_load``)
through the ``CUtensorMap`` of A and B that ``main``'s host part encodes at each launch
(``T.cuda.tensormap_encode_tiled``: 128-byte swizzle, out-of-bounds boxes zero-filled; TIRx passes
them as ``__grid_constant__`` kernel parameters; TIRx's TMA tile pattern would encode them too, but it
proves the swizzled shared view element by element: minutes of lowering for a 128x256 tile);
warpgroups 1.. are the consumers (``setmaxnreg.inc`` to ``CONSUMER_REGS``): per k-tile they wait on "full", issue
``wgmma.mma_async`` from the stage's 128-byte-swizzled tiles (``wgmma_issue``, the checked tile pattern: the one place the
instruction is written), commit, wait for the previous k-tile's group and release its stage (one
arrival per consumer warpgroup on "empty"). After the tile's last k-tile the consumers store C from
their registers (``gemm_epilogue``), the fused epilogue applied first (``out_value``), in column pairs
(``st.global.v2.f32``, or ``cvt.rn.{bf16,f16}x2.f32`` + ``st.global.b32``; each predicated inside C;
odd N: one element at a time) while the producer already loads the next tile's stages. Both roles
walk the same tiles, ``pid, pid + ctas, ...`` in the plan's grouped order (``Sm90Plan.tile_of``);
the ring position of k-tile ``kt`` of the CTA's ``i``-th tile is ``i * k_tiles + kt`` (stage: modulo
``stages``; mbarrier phase: its quotient's parity). ``schedule="pingpong"``: each consumer takes whole,
alternate tiles (``consumer``), its mainloop ordered after the other's by named barriers (``ORDER_BARRIER``),
so one's epilogue runs under the other's mainloop.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...isa import hopper_layout as L
from ...probes_wgmma import acc_layout, shared_layout
from ...rocm.build import register
from ...tirx_private import transpile_once
from . import gemm_chunkres as chunkres
from . import gemm_cluster as cluster
from . import gemm_shift as shift
from .gemm_plan import (BLOCK_K, CONSUMER_REGS, ELEMENT_BYTES, OUT_BYTES, PRODUCER_REGS, ROW_BYTES,
                        SWIZZLE_COLUMNS, WARPGROUP, WGMMA_M, WGMMA_TYPES, Sm90Plan, loaded_box, trim_boxes, wgmma_k)
from .gemm_epilogue import (EPILOGUE_BARRIER, TMA_STORE, staging_byte, staging_element, staging_word,  # noqa: F401
                            store_fragment, store_tma, tail_column, tail_element)  # (re-exported: TMA_STORE)
from .gemm_residual import (early_held, early_of, held_words, load_early, load_slices, prefetch_box, prefetch_residual, preread,
                            residual_at, residual_box_rows)
from .gemm_store import TANH_OPS, out_value  # noqa: F401 (re-exported: TANH_OPS, out_value)

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
SWIZZLE_128B = 3
"""The TMA swizzle mode (``CU_TENSOR_MAP_SWIZZLE_128B``, CUDA driver API ``CUtensorMapSwizzle``)."""


def wgmma_instr(p: Sm90Plan) -> str:
    t = WGMMA_TYPES[p.dtype]
    return f"wgmma.mma_async.sync.aligned.m{WGMMA_M}n{p.config.block_n}k{wgmma_k(p.dtype)}.f32.{t}.{t}"


def operand_type(p: Sm90Plan, operand: str):
    """The tensor type of a checked wgmma operand (``patterns.wgmma``) over the accumulator (D) or the ring
    (A, B): D ``(rows / 64, 1, 64, block_n)`` by the owner map (``probes_wgmma.acc_layout``: ``acc[mi * N/2 +
    r]`` is register r of the mi-th 64 rows); A ``(stages * block_m / 64, K / k, 64, k)`` and B ``(stages, K /
    k, block_n, k)`` in the input dtype (fp8: the bytes of the ring's 2-byte words), K-major rows of 128 bytes,
    128-byte swizzled (``ring_layout``: the canonical layout the descriptor names and TMA's
    ``CU_TENSOR_MAP_SWIZZLE_128B`` writes)."""
    c = p.config
    k = wgmma_k(p.dtype)
    bits = 8 * ELEMENT_BYTES[p.dtype]
    if operand == "D":
        m = c.rows // WGMMA_M
        return T.Tensor((m, 1, WGMMA_M, c.block_n), "float32", scope="local", layout=acc_layout(c.block_n, (m, 1)))
    blocks, rows = (c.stages * c.block_m // WGMMA_M, WGMMA_M) if operand == "A" else (c.stages, c.block_n)
    return T.Tensor((blocks, p.block_k // k, rows, k), p.tir_dtype, scope="shared.dyn",
                    layout=ring_layout(blocks, rows, p.block_k, bits), align=1024)


def ring_layout(blocks: int, rows: int, row_elements: int, bits: int):
    """A ring operand ``(blocks, row_elements / k, rows, k)``: blocks of ``rows`` K-major rows of 128 bytes,
    one after another, each row's ``k``-element wgmma slices side by side, 128-byte swizzled: one block is
    ``probes_wgmma.shared_layout`` (its swizzle taken from there), the blocks stacked."""
    from tvm_tirx.tirx.layout import ComposeLayout, S, TileLayout

    k = L.k_of(bits)
    one = shared_layout(rows, k, row_elements // k, bits)
    tile = TileLayout(S[(blocks, row_elements // k, rows, k): (rows * row_elements, k, row_elements, 1)])
    return ComposeLayout(one.per_element, one.swizzle_len, one.atom_len, tile)


@T.macro
def wgmma_issue(p, D, SA, SB, a_block, s):
    """The k-tile's wgmma group on stage ``s``: ``rows / 64`` x ``K / k`` SS ``wgmma.mma_async`` (both K-major)
    accumulating into D, A from 64-row block ``a_block`` of the ring, through the checked tile pattern
    (register fences, ``wgmma.fence``, the instructions, ``wgmma.commit_group``): the one place the
    instruction is written."""
    T.sm90.tile.apply(T.wgmma[wgmma_instr(p)], D, SA[a_block:a_block + p.config.rows // WGMMA_M, :, :, :],
                      SB[s:s + 1, :, :, :], scope="warpgroup")


def tma_load(p: Sm90Plan, SMH, offset: int, tensor_map, k0, row0, mbar):
    """One 2-D TMA load of a ``rows x BLOCK_K`` box at (``row0``, ``k0``) into the shared tile at element
    ``offset``, completing on ``mbar``: the one call a TMA tile pattern can replace."""
    T.ptx[TMA_LOAD](T.cuda.cvta_generic_to_shared(SMH.ptr_to([offset])), T.address_of(tensor_map), k0, row0, mbar)


@T.macro
def kernel(p, args, maps):
    cta(p, args, maps, producer, consumer)


@T.macro
def cta(p, args, maps, producer_role, consumer_role, setup=None):
    # the CTA of the dense and the grouped kernels: shared memory, the mbarriers, one producer warpgroup
    # (``producer_role(p, SMH, MB, args, maps, pid)``: its one thread issues the TMA loads) and the consumer
    # warpgroups (``consumer_role(p, SMH, MB, args, maps, pid, wg, t)``); ``setup(p, SMH, args, tid)``: every
    # thread's work before the roles part (the grouped prefix walk's sums), ended by the CTA's barrier
    c = p.config
    T.device_entry(launch=cluster.launch(p, c.threads),
                   kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1))
    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // 2,), p.smem_dtype, scope="shared.dyn", layout="default", align=1024)])
    MB = T.alloc_tensor(ty_args=[T.Tensor((barriers(p),), "uint64", scope="shared", layout="default")])
    tid = T.cuda.thread_idx("x")
    pid = T.cuda.block_idx("x")
    if tid == 0:
        for s in T.unroll(c.stages):
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([c.stages + s]), T.uint32(cluster.empty_arrivals(p)))
        if I.constexpr(c.residual_staged):
            for w in T.unroll(c.consumers):
                T.ptx.mbarrier.init.shared.b64(MB.ptr_to([2 * c.stages + w]), T.uint32(1))
        chunkres.init(p, MB)  # residual_read="chunks": its buffers' "full" and "free"
        T.ptx["fence.mbarrier_init.release.cluster"]()
    if I.constexpr(setup is not None):
        setup(p, SMH, args, tid)
    if I.constexpr(c.trim_loads):
        clear_ring(p, SMH, tid)
    T.cuda.cta_sync()
    cluster.cluster_sync(p)  # a cluster: the peer's mbarriers initialized before they are signalled
    if tid < WARPGROUP:
        T.ptx["setmaxnreg.dec.sync.aligned.u32"](PRODUCER_REGS)
        if tid == 0:
            producer_role(p, SMH, MB, args, maps, pid)
    else:
        T.ptx["setmaxnreg.inc.sync.aligned.u32"](CONSUMER_REGS)
        consumer_role(p, SMH, MB, args, maps, pid, tid // WARPGROUP - 1, tid % WARPGROUP)
    cluster.cluster_sync(p)  # a cluster: no CTA exits while its peer may still signal or fill its shared memory


CLEAR_WORDS = 8
"""The ring's 2-byte words ``clear_ring`` zeroes a store (one ``st.shared.v4.b32``, 16 bytes)."""


@T.macro
def clear_ring(p, SMH, tid):
    # Sm90Config.trim_loads: every thread zeroes its share of the ring once, 16 bytes a store, so that the rows a
    # trimmed load leaves hold data (these zeros, later a stage's earlier rows: never never-written shared memory, which
    # the emulator refuses to read), then orders its writes before the TMA's and wgmma's (async proxy); the CTA's barrier
    # follows (cta). Only a role whose operand ends inside a tile (ring_regions: M or N not a multiple of the tile) can
    # be trimmed: only its stages are cleared. Past a region the store is predicated off, its address clamped into it
    # (the emulator resolves a shared address in every lane)
    a, b = ring_regions(p)
    clear_region(p, SMH, tid, *a)
    clear_region(p, SMH, tid, *b)
    T.ptx["fence.proxy.async.shared::cta"]()


@T.macro
def clear_region(p, SMH, tid, start, words, partial):
    # clear_ring's stores over the ring's words start .. start + words - 1, where ``partial`` (static or at run time)
    c = p.config
    chunks = words // CLEAR_WORDS
    if I.constexpr(partial is not False):
        if partial:
            for i in range(-(-chunks // c.threads)):
                T.ptx["st.shared.v4.b32"](SMH.ptr_to([start + T.min(tid + i * c.threads, chunks - 1) * CLEAR_WORDS]),
                                          T.uint32(0), T.uint32(0), T.uint32(0), T.uint32(0),
                                          pred=tid + i * c.threads < chunks)


def ring_regions(p: Sm90Plan) -> tuple:
    """The ring's A and B role regions (first word, words) and whether a tile of each can run past its operand (M or
    N, the roles', not a multiple of the tile's rows: a TIR expression of a dynamic M)."""
    c, (ra, rb) = p.config, role_rows(p)
    a_words = c.stages * c.block_m * BLOCK_K
    return ((0, a_words, ra % c.block_m != 0), (a_words, c.stages * c.block_n * BLOCK_K, rb % c.block_n != 0))


@T.macro
def producer(p, SMH, MB, args, maps, pid):
    if I.constexpr(p.hybrid):
        for i in range(p.waves):  # the full waves' whole tiles, then the CTA's split units
            producer_unit(p, SMH, MB, maps, (0, pid + i * p.grid_cap), i * p.k_tiles, p.k_tiles)
        for j in range(split_count(p, pid)):
            producer_unit(p, SMH, MB, maps, p.split_unit(pid + j * p.ctas, T.truncdiv, T.truncmod),
                          p.waves * p.k_tiles + j * p.slice_tiles, p.slice_tiles)
    else:
        for i in range(T.truncdiv(p.units - 1 - pid, p.ctas) + 1):
            producer_unit(p, SMH, MB, maps, p.unit_of(pid + i * p.ctas, T.truncdiv, T.truncmod), i * p.slice_tiles,
                          p.slice_tiles, chunkres.chunks_of(p, i, pid))
        chunkres.load_last(p, SMH, MB, maps, tma_load, pid)  # residual_read="chunks": the last tile's later chunks


@T.macro
def producer_unit(p, SMH, MB, maps, unit, pos, count, chunks=None):
    # work unit (K slice, linear tile): its count k-tiles from ring position pos (chunks: load_tile's)
    c = p.config
    tile = p.tile_of(unit[1], T.truncdiv, T.truncmod, T.min)
    m0 = tile[0] * c.block_m
    n0 = tile[1] * c.block_n
    load_tile(p, SMH, MB, maps, pos, count, unit[0], *token_origin(p, m0, n0), chunks)


def token_origin(p: Sm90Plan, m0, n0) -> tuple:
    """(``m0``, ``n0``) of a tile's boxes with the token one at its shifted origin (``gemm_shift.tile_origin``)."""
    return shift.tile_origin(p, m0, n0, T.max, T.min, shift_align(p), T.if_then_else)


def shift_align(p: Sm90Plan) -> int:
    """The alignment of a shifted token tile's origin (``gemm_shift.origin``): the swapped K split's workspace pairs of
    tokens (``reduce_vector``) need an even one, else 1."""
    return reduce_vector(p) if p.config.swap_ab and p.split > 1 else 1


def split_count(p: Sm90Plan, pid):
    """The split units of a hybrid plan's CTA ``pid``: ``pid, pid + ctas, ...`` below ``split_units``."""
    return T.truncdiv(p.split_units + p.ctas - 1 - pid, p.ctas)


@T.macro
def load_tile(p, SMH, MB, maps, pos, count, k_slice, a_row, b_row, chunks=None):
    # one work unit's count k-tiles at ring positions pos, pos + 1, ...: wait on "empty", arm "full", the TMA
    # loads of A's box at row a_row and B's at row b_row (a grouped GEMM's: its group's weights); ``chunks``
    # (residual_read="chunks": the CTA's tile index and pid) the residual's chunks due after a k-tile
    c = p.config
    for kt in range(count):
        it = pos + kt
        s = it % c.stages
        T.cuda.mbarrier_wait(MB.ptr_to([c.stages + s]), (it // c.stages + 1) % 2)
        if I.constexpr(c.trim_loads):
            trimmed_stage(p, SMH, MB, maps, s, k_first(p, k_slice, kt), a_row, b_row)
        else:
            whole_stage(p, SMH, MB, maps, s, k_slice, kt, a_row, b_row)
        prefetch_residual(p, maps, kt, a_row, b_row)  # residual_read="prefetch": a box of the tile's residual into L2
        if I.constexpr(chunks is not None):
            chunkres.load_chunks(p, SMH, MB, maps, tma_load, kt, *chunks, a_row, b_row)


@T.macro
def whole_stage(p, SMH, MB, maps, s, k_slice, kt, a_row, b_row):
    # one stage's boxes, whole (TMA zero-fills their rows past the operands), arming "full" with the stage's bytes
    c = p.config
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([s]), T.uint32(c.stage_bytes()))
    if I.constexpr(cluster.multicasts(p, "A")):  # swap_ab's cluster: the CTA's share of the weights, to both
        cluster.a_load(p, TMA_LOAD, T.cuda.cvta_generic_to_shared(SMH.ptr_to([cluster.share_offset(
            p, "A", s * c.block_m * BLOCK_K)])), maps[0], k_first(p, k_slice, kt), cluster.share_row(p, "A", a_row),
            MB.ptr_to([s]))
    else:
        tma_load(p, SMH, s * c.block_m * BLOCK_K, maps[0], k_first(p, k_slice, kt), a_row, MB.ptr_to([s]))
    cluster.b_load(p, TMA_LOAD, T.cuda.cvta_generic_to_shared(SMH.ptr_to([cluster.b_offset(
        p, c.stages * c.block_m * BLOCK_K + s * c.block_n * BLOCK_K)])), b_maps(p, maps),
        k_first(p, k_slice, kt), cluster.b_row(p, b_row), MB.ptr_to([s]))


@T.macro
def trimmed_stage(p, SMH, MB, maps, s, k0, a_row, b_row):
    # Sm90Config.trim_loads: "full" armed with the bytes of the rows the stage loads, then each operand's tile
    (ra, rb), (a_boxes, b_boxes) = role_rows(p), trim_maps(p, maps)
    c = p.config
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(MB.ptr_to([s]), T.uint32(
        (loaded_rows(a_row, ra, c.block_m) + loaded_rows(b_row, rb, c.block_n)) * ROW_BYTES))
    trimmed_load(p, SMH, s * c.block_m * BLOCK_K, maps[0], a_boxes, k0, a_row, ra, c.block_m, MB.ptr_to([s]))
    trimmed_load(p, SMH, (c.stages * c.block_m + s * c.block_n) * BLOCK_K, maps[1], b_boxes, k0, b_row, rb, c.block_n,
                 MB.ptr_to([s]))


@T.macro
def trimmed_load(p, SMH, offset, whole_map, box_maps, k0, row0, rows, block, mbar, j=0):
    # rows row0 .. row0 + block - 1 of an operand of ``rows`` rows: one box, the tile's where they all exist, else the
    # least of trim_boxes(block) that holds the rows that do (its rows past the operand zero-filled): box j, or on
    if I.constexpr(j == len(trim_boxes(block))):
        tma_load(p, SMH, offset, whole_map, k0, row0, mbar)
    else:
        if rows - row0 <= trim_boxes(block)[j]:
            tma_load(p, SMH, offset, box_maps[j], k0, row0, mbar)
        else:
            trimmed_load(p, SMH, offset, whole_map, box_maps, k0, row0, rows, block, mbar, j + 1)


def loaded_rows(row0, rows: int, block: int):
    """The rows ``trimmed_load`` brings of a tile of ``block`` rows at ``row0`` of an operand of ``rows``: the least of
    ``trim_boxes(block)`` that holds the rows that exist, else ``block`` (``gemm_boxes.loaded_box``, at run time)."""
    return loaded_box(rows - row0, block, select=T.if_then_else)


def trimmed(p: Sm90Plan, maps) -> int:
    """How many of ``maps`` are ``trim_maps``' (the last)."""
    return sum(map(len, trim_maps(p, maps)))


def role_rows(p: Sm90Plan) -> tuple:
    """The rows of the operands in the kernel's A and B roles: (M, N), swapped (N, M)."""
    return (p.N, p.M) if p.config.swap_ab else (p.M, p.N)


def trim_maps(p: Sm90Plan, maps) -> tuple:
    """``Sm90Config.trim_loads``: the A and B roles' maps of ``trim_boxes`` rows (the last maps, A's then B's), else
    two empty tuples."""
    a, b = (len(trim_boxes(r)) if p.config.trim_loads else 0 for r in (p.config.block_m, p.config.block_n))
    return tuple(maps[len(maps) - a - b:len(maps) - b]), tuple(maps[len(maps) - b:])


def b_maps(p: Sm90Plan, maps) -> tuple:
    """B's tensor maps (``gemm_cluster.b_load``): ``maps[1]``, then a cluster's second B map (rank 1's share of
    uneven halves, ``gemm_cluster.b_peer_rows``: after the other maps and before the tail maps) or None."""
    return maps[1], (maps[len(maps) - trimmed(p, maps) - len(tail_maps(p)) - 1] if cluster.b_peer_rows(p) else None)


def k_first(p: Sm90Plan, k_slice, kt):
    """The first K element of k-tile ``kt`` of K slice ``k_slice`` (a split's last slice may run past K: TMA
    zero-fills those boxes)."""
    return kt * p.block_k if p.split == 1 else (k_slice * p.slice_tiles + kt) * p.block_k


def barriers(p: Sm90Plan) -> int:
    """The kernel's mbarriers: each stage's "full" and "empty" ones, then (``residual_read`` ``"tma"`` or ``"sliced"``)
    one per consumer warpgroup on which its residual loads complete (``"chunks"``: ``gemm_chunkres.barriers``)."""
    c = p.config
    return 2 * c.stages + (c.consumers if c.residual_staged else 0) + (chunkres.barriers(p) if c.residual_read == "chunks" else 0)


ORDER_BARRIER = 3
"""The first of the ping-pong schedule's two named barriers (0 is the CTA's, ``EPILOGUE_BARRIER + wg`` the TMA
epilogue's, ``gemm_epilogue``): barrier ``ORDER_BARRIER + wg`` lets consumer ``wg`` start its next mainloop once the
other's is issued."""


@T.macro
def consumer(p, SMH, MB, args, maps, pid, wg, t):
    c = p.config
    acc = T.alloc_tensor(ty_args=[T.Tensor((c.rows // WGMMA_M * c.block_n // 2,), "float32", scope="local", layout="default")])
    if I.constexpr(c.pingpong):
        # the CTA's tiles i = wg, wg + 2, ...: whole tiles, alternating; the ring position of a tile's k-tile is
        # the producer's, so a consumer waits on "full" at most one lap ahead only because the other consumer
        # has waited on every earlier position (the ordering barriers below)
        for j in range(T.truncdiv(T.truncdiv(p.units - 1 - pid, p.ctas) + 2 - wg, 2)):
            consumer_tile(p, SMH, MB, args, maps, pid, 2 * j + wg, 0, wg, t, acc,
                          p.unit_of(pid + (2 * j + wg) * p.ctas, T.truncdiv, T.truncmod), (2 * j + wg) * p.slice_tiles,
                          p.slice_tiles, p.split > 1)
    elif I.constexpr(p.hybrid):  # the full waves' whole tiles, then the CTA's split units (Sm90Plan.split_unit)
        for i in range(p.waves):
            consumer_tile(p, SMH, MB, args, maps, pid, i, wg, wg, t, acc, (0, pid + i * p.grid_cap), i * p.k_tiles,
                          p.k_tiles, False)
        for j in range(split_count(p, pid)):
            consumer_tile(p, SMH, MB, args, maps, pid, j, wg, wg, t, acc,
                          p.split_unit(pid + j * p.ctas, T.truncdiv, T.truncmod), p.waves * p.k_tiles + j * p.slice_tiles,
                          p.slice_tiles, True)
    else:
        for i in range(T.truncdiv(p.units - 1 - pid, p.ctas) + 1):
            consumer_tile(p, SMH, MB, args, maps, pid, i, wg, wg, t, acc, p.unit_of(pid + i * p.ctas, T.truncdiv, T.truncmod),
                          i * p.slice_tiles, p.slice_tiles, p.split > 1)
    if I.constexpr(c.epilogue == "tma"):
        if t == 0:
            T.ptx["cp.async.bulk.wait_group"](0)  # the last tile's stores are done before the CTA exits


@T.macro
def consumer_tile(p, SMH, MB, args, maps, pid, i, part, wg, t, acc, unit, pos, count, split):
    # the CTA's i-th tile, work unit (K slice, linear tile) of count k-tiles from ring position pos (split: a K
    # slice, reduced through the workspace): its rows part * rows .. (part + 1) * rows, by consumer warpgroup wg
    c = p.config
    tile = p.tile_of(unit[1], T.truncdiv, T.truncmod, T.min)
    m0 = tile[0] * c.block_m
    n0 = tile[1] * c.block_n
    for r in T.unroll(c.rows // WGMMA_M * c.block_n // 2):
        acc[r] = T.float32(0)
    if I.constexpr(c.pingpong):
        if i > 0:  # the other consumer has issued tile i - 1's mainloop
            T.ptx["bar.sync"](T.Cast("uint32", ORDER_BARRIER + wg), T.uint32(2 * WARPGROUP))
    res = residual_of(p, MB, maps, i, token_origin(p, m0, n0)[0] + part * c.rows, n0)
    held = early_held(p)  # residual_read="early": the thread's residual words, loaded in the mainloop (else None)
    mainloop(p, SMH, MB, acc, pos, count, part, wg, t, res,
             early_of(args, held, *fragment_origin(p, *token_origin(p, m0, n0), part, t)))
    if I.constexpr(c.pingpong):
        if i + 1 < T.truncdiv(p.units - 1 - pid, p.ctas) + 1:  # the other consumer's next tile may start
            T.ptx["bar.arrive"](T.Cast("uint32", ORDER_BARRIER + 1 - wg), T.uint32(2 * WARPGROUP))
    if I.constexpr(c.residual_read == "preread"):
        preread_tile(p, SMH, MB, acc, args, maps, part, wg, t, *token_origin(p, m0, n0),
                     unit, pos, count, res, shift.first_token(p, m0, n0))
    else:  # shift_last: the tile's boxes at their origin, its own rows from first_token (gemm_shift)
        finish_tile(p, SMH, MB, acc, args, maps, part, wg, t, *token_origin(p, m0, n0),
                    unit, pos, count, split, res, held, shift.first_token(p, m0, n0))


@T.macro
def finish_tile(p, SMH, MB, acc, args, maps, part, wg, t, m0, n0, unit, pos, count, split, res, held=None, first=None):
    # after the tile's mainloop: its wgmma retired, its last ring stage released, C stored (consumer_tile's names;
    # held: residual_read="early"'s words; first: shift_last's own first token row, gemm_shift.kept)
    c = p.config
    retire(p, acc)
    if t == 0:
        cluster.release(p, MB, c.stages + (pos + count - 1) % c.stages)
    if I.constexpr(split):
        split_store(p, SMH, acc, args, maps, part, wg, t, m0, n0, unit, first)
    elif I.constexpr(c.residual_read == "chunks"):
        chunkres.store_chunks(p, SMH, MB, acc, args, c_maps(p, maps), part, wg, t, m0, n0, res[2])
    elif I.constexpr(c.epilogue == "tma"):
        store_tma(p, SMH, acc, args, c_maps(p, maps), part, wg, t, m0, n0, None, res, held, first)
    else:
        store_fragment(p, acc, args, *fragment_origin(p, m0, n0, part, t), held, first)


@T.macro
def preread_tile(p, SMH, MB, acc, args, maps, part, wg, t, m0, n0, unit, pos, count, res, first=None):
    # residual_read="preread": the thread's staged residual words into registers (held) while the tile's last wgmma
    # runs, then finish_tile with them (res + (held,): store_tma_chunk's words; first: shift_last's, finish_tile)
    held = T.alloc_tensor(ty_args=[T.Tensor((held_words(p),), "uint32", scope="local", layout="default")])
    preread(p, SMH, res, held, wg, t, staging_byte(p, wg, 0), staging_word)
    finish_tile(p, SMH, MB, acc, args, maps, part, wg, t, m0, n0, unit, pos, count, False, res + (held,), None, first)


@T.macro
def mainloop(p, SMH, MB, acc, pos, count, part, wg, t, res, early=None):
    # the count k-tiles at ring positions pos, pos + 1, ...: wait on "full", the wgmma of the warpgroup's rows
    # (part * rows ..) through the checked pattern (its operands: operand_type's views of acc and the ring),
    # commit, wait for the previous k-tile's group and release its stage; with ``res`` (residual_read="tma":
    # consumer_tile's tuple) warpgroup wg's residual load at k-tile RESIDUAL_AT; with ``early`` (residual_read="early":
    # consumer_tile's (args, held, row, col)) the thread's residual loads due after the k-tile's (load_early)
    c = p.config
    D = T.decl_tensor(acc.ptr_to([0]), ty_args=[operand_type(p, "D")])
    SA = T.decl_tensor(SMH.ptr_to([0]), ty_args=[operand_type(p, "A")])
    SB = T.decl_tensor(SMH.ptr_to([c.stages * c.block_m * BLOCK_K]), ty_args=[operand_type(p, "B")])
    for kt in range(count):
        it = pos + kt
        s = it % c.stages
        T.cuda.mbarrier_wait(MB.ptr_to([s]), (it // c.stages) % 2)
        # A: 64-row block part * rows / 64 of stage s (``part % consumers``: the same value, its range provable
        # where the pattern checks the region's bounds; the analyzer does not read the branch's tid >= 128)
        wgmma_issue(p, D, SA, SB, s * (c.block_m // WGMMA_M) + part % c.consumers * (c.rows // WGMMA_M), s)
        T.ptx["wgmma.wait_group.sync.aligned"](1)
        if kt > 0:
            if t == 0:
                cluster.release(p, MB, c.stages + (it + c.stages - 1) % c.stages)
        if I.constexpr(res is not None and c.residual_read == "chunks"):
            chunkres.free_last(p, MB, res[2], wg, t, kt)
        elif I.constexpr(res is not None and c.residual_read == "sliced"):
            if t == 0:
                load_slices(p, SMH, res, wg, kt, tma_load, staging_element(p, wg, 0), tail_element(p, wg, 0), tail_column(p))
        elif I.constexpr(res is not None):
            if kt == residual_at(p):
                if t == 0:
                    load_residual(p, SMH, res, wg)
        if I.constexpr(early is not None):
            load_early(p, early, kt)


def fragment_origin(p: Sm90Plan, m0, n0, part, t) -> tuple:
    """(row, column) of C at which thread ``t`` of the warpgroup of rows ``part * rows ..`` of the tile at (``m0``,
    ``n0``) holds its first accumulator pair (the wgmma D fragment: rows 16 (t / 32) + (t % 32) / 4, columns 2 (t % 4);
    ``gemm_epilogue.store``)."""
    return m0 + part * p.config.rows + (t // 32) * 16 + (t % 32) // 4, n0 + 2 * (t % 4)


def residual_of(p: Sm90Plan, MB, maps, i, row0, n0):
    """``residual_read`` ``"tma"`` or ``"sliced"``: what the mainloop's residual loads and the epilogue's reads need
    (the mbarriers, the residual's tensor map, the CTA's tile index ``i``, the warpgroup's first row and the tile's
    first column; with a tail block the residual's tail map, ``tail_map``); None otherwise. ``preread`` appends its held words to it (``preread_tile``: ``staged_word``)."""
    if not p.config.residual_staged and p.config.residual_read != "chunks":
        return None
    return (MB, maps[3], i, row0, n0) + ((tail_map(p, maps, "residual"),) if p.config.tail_columns else ())


@T.macro
def load_residual(p, SMH, res, wg):
    # residual_read="tma", thread 0 of warpgroup wg: once the previous tile's TMA stores have read its staging
    # buffer, arm its residual barrier with the rows' bytes and load them there with TMA, in the layout C is
    # staged in (64-column blocks, 128-byte swizzled: the residual's map has C's boxes; zero-filled past C)
    c = p.config
    T.ptx["cp.async.bulk.wait_group.read"](0)
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(res[0].ptr_to([2 * c.stages + wg]), T.uint32(c.rows * c.block_n * 2))
    for cb in T.unroll(c.block_n // SWIZZLE_COLUMNS):
        tma_load(p, SMH, staging_element(p, wg, 0) + cb * c.rows * SWIZZLE_COLUMNS, res[1], res[4] + cb * SWIZZLE_COLUMNS,
                 res[3], res[0].ptr_to([2 * c.stages + wg]))
    if I.constexpr(c.tail_columns):  # the tail block through the residual's tail map (Sm90Config.tail_swizzle)
        tma_load(p, SMH, tail_element(p, wg, 0), res[5], res[4] + tail_column(p), res[3], res[0].ptr_to([2 * c.stages + wg]))


@T.macro
def retire(p, acc):
    # after the mainloop: every wgmma group retired (wait_group 0), then a register fence on each accumulator
    # (patterns.wgmma_fence), so that the compiler moves no read of acc above the wait
    T.ptx["wgmma.wait_group.sync.aligned"](0)
    for r in T.unroll(p.config.rows // WGMMA_M * p.config.block_n // 2):
        T.sm90.fence_operand(acc[r])


def c_maps(p: Sm90Plan, maps) -> tuple:
    """What ``store_tma`` stores C through: (C's tensor map of the whole 64-column blocks, ``maps[2]``; C's tail map
    with a tail block, ``Sm90Config.tail_columns``, after the other maps and before the residual's, else None)."""
    return maps[2], (tail_map(p, maps, "C") if p.config.tail_columns else None)


def tail_map(p: Sm90Plan, maps, name: str):
    """``name``'s tail-block map (``tail_maps``): the tail maps come after the other maps, before the trimmed loads'
    (``trim_maps``, the last)."""
    return maps[len(maps) - trimmed(p, maps) - len(tail_maps(p)) + tail_maps(p).index(name)]


def tail_maps(p: Sm90Plan) -> tuple:
    """The tensors whose tail-block maps (boxes ``rows x tail_columns``, ``tail_swizzle``) the host part encodes
    after the other maps: C's, then the residual's (``residual_read`` ``"tma"`` or ``"sliced"``); none without a tail block."""
    c = p.config
    if not c.tail_columns:
        return ()
    return ("C", "residual") if c.residual_staged else ("C",)


# ---- split-K (Sm90Config.split_k): sm80's reduction through the workspace W and the tickets S -------------


def reduce_vector(p: Sm90Plan) -> int:
    """Elements per workspace store and gather load: column pairs (``st.global.v2.f32`` / ``ld.global.cg.v2.f32``)
    for the ordered reduction of an even N (8-byte-aligned pairs; ``swap_ab``: an even row of ``W``, ``workspace_cols``),
    else one element (``red.global.add.f32`` has no pair form on sm_80's path this reuses)."""
    return 2 if p.config.reduction == "ordered" and workspace_cols(p) % 2 == 0 else 1


def workspace_cols(p: Sm90Plan) -> int:
    """The columns of a workspace row: the kernel's product's (N; ``swap_ab``: C^T's, the largest M)."""
    return p.params[-2].shape[2]


def partial_ok(p: Sm90Plan, r, col, first=None):
    """Whether the partial pair (or element) at the kernel's (``r``, ``col``) is stored: inside C (``swap_ab``:
    inside C^T by its first element; a pair's second element past the run-time M lands in ``W``'s own columns: zero
    where A's rows past M load as zeros, a stale ring row's sum with ``trim_loads``; either way gathered only into
    that element, which is never stored); ``first``: shift_last's own first token (``gemm_shift.kept``)."""
    if p.config.swap_ab:
        return shift.kept(p, col, first, inside(p, r, col), T.and_)
    return T.and_(shift.kept(p, r, first, r < p.M, T.and_), col + reduce_vector(p) - 1 < p.N)


def is_atomic(p: Sm90Plan) -> bool:
    return p.config.reduction == "atomic"


def workspace_slice(p: Sm90Plan, k_slice):
    """The workspace slice a K slice writes: its own (ordered) or the one shared slice (atomic)."""
    return 0 if is_atomic(p) else k_slice


@T.macro
def split_store(p, SMH, acc, args, maps, part, wg, t, m0, n0, unit, first=None):
    # the unit's partial tile (rows part * rows.. of tile unit[1], K slice unit[0]) into W, a fence, the
    # warpgroup's ticket S[tile * parts + part]; the last of the tile's split_k draws gathers the sum (and
    # leaves W, atomic, and the ticket zero for the next launch), then the fused epilogue and C's store
    c = p.config
    TK = T.alloc_tensor(ty_args=[T.Tensor((c.consumers,), "uint32", scope="shared", layout="default")])
    drawn = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
    row = fragment_origin(p, m0, n0, part, t)[0]
    col = fragment_origin(p, m0, n0, part, t)[1]
    ticket = unit[1] * p.parts + part
    reduce_partials(p, args["W"], acc, row, col, workspace_slice(p, unit[0]), False, first)
    T.ptx["fence.acq_rel.gpu"]()
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
    if t == 0:
        T.ptx["atom.global.add.u32"](drawn[0], args["S"].ptr_to([ticket]), T.uint32(1))
        TK[wg] = drawn[0]
    T.ptx["bar.sync"](T.Cast("uint32", EPILOGUE_BARRIER + wg), T.uint32(WARPGROUP))
    if TK[wg] == T.uint32(p.split - 1):
        T.ptx["fence.acq_rel.gpu"]()
        reduce_partials(p, args["W"], acc, row, col, 0, True, first)
        if t == 0:
            args["S"][ticket] = T.uint32(0)
        if I.constexpr(c.epilogue == "tma"):
            store_tma(p, SMH, acc, args, c_maps(p, maps), part, wg, t, m0, n0, None, None, None, first)
        else:
            store_fragment(p, acc, args, row, col, None, first)


@T.macro
def reduce_partials(p, W, acc, row, col, k_slice, gathering, first=None):
    # over the thread's accumulators (acc[mi * N/2 + j * 4 + h * 2 + e] is element (row + 64 mi + 8 h,
    # col + 8 j + e): ``store``'s fragment), by pairs or elements (reduce_vector): the partial into W slice
    # k_slice, each store predicated inside C (gathering False), or the gather of the sum, every load at its
    # row and column clamped into C (a sum outside C is never stored), the slices added in index order
    c = p.config
    vec = reduce_vector(p)
    part = T.alloc_tensor(ty_args=[T.Tensor((2,), "float32", scope="local", layout="default")])
    for mi in T.unroll(c.rows // WGMMA_M):
        for j in T.unroll(c.block_n // 8):
            for h in T.unroll(2):
                for g in T.unroll(2 // vec):
                    if I.constexpr(gathering):
                        gather_at(p, W, acc, part, row + mi * WGMMA_M + 8 * h, col + 8 * j + g * vec,
                                  mi * c.block_n // 2 + j * 4 + h * 2 + g * vec, first)
                    else:
                        partial_at(p, W, acc, k_slice, row + mi * WGMMA_M + 8 * h, col + 8 * j + g * vec,
                                   mi * c.block_n // 2 + j * 4 + h * 2 + g * vec, first)


@T.macro
def partial_at(p, W, acc, k_slice, r, col, e, first=None):
    # one pair (accumulators e, e + 1) or element of the partial store, predicated inside C (and the tile's own rows)
    ok = partial_ok(p, r, col, first)
    if I.constexpr(reduce_vector(p) == 2):
        T.ptx["st.global.v2.f32"](W.ptr_to([k_slice, r, col]), acc[e], acc[e + 1], pred=ok)
    elif I.constexpr(is_atomic(p)):
        T.ptx["red.global.add.f32"](W.ptr_to([0, r, col]), acc[e], pred=ok)
    else:
        T.ptx["st.global.f32"](W.ptr_to([k_slice, r, col]), acc[e], pred=ok)


@T.macro
def gather_at(p, W, acc, part, row, col, e, first=None):
    # one pair or element of the gather (sm80's gather_group): slice 0, then 1.. added in order (ordered), or
    # the one slice read and cleared (atomic); the load clamped into C, the clearing store predicated
    r, cc = gather_at_clamped(p, row, col)
    if I.constexpr(reduce_vector(p) == 2):
        T.ptx["ld.global.cg.v2.f32"](acc[e], acc[e + 1], W.ptr_to([0, r, cc]))
        for s in T.unroll(1, p.split):
            T.ptx["ld.global.cg.v2.f32"](part[0], part[1], W.ptr_to([s, r, cc]))
            acc[e] = acc[e] + part[0]
            acc[e + 1] = acc[e + 1] + part[1]
    else:
        T.ptx["ld.global.cg.f32"](acc[e], W.ptr_to([0, r, cc]))
        if I.constexpr(is_atomic(p)):
            T.ptx["st.global.f32"](W.ptr_to([0, r, cc]), T.float32(0), pred=shift.kept(
                p, col if p.config.swap_ab else row, first, inside(p, row, col), T.and_))
        else:
            for s in T.unroll(1, p.split):
                T.ptx["ld.global.cg.f32"](part[0], W.ptr_to([s, r, cc]))
                acc[e] = acc[e] + part[0]


def inside(p: Sm90Plan, row, col):
    """Whether the kernel's element (``row``, ``col``) is inside its product: C (``swap_ab``: C^T)."""
    return T.and_(row < p.N, col < p.M) if p.config.swap_ab else T.and_(row < p.M, col < p.N)


def gather_at_clamped(p: Sm90Plan, row, col):
    """The workspace element a gather at the kernel's (``row``, ``col``) loads: clamped into C (``swap_ab``: into
    ``W``'s rows of C^T; a sum outside C is never stored)."""
    if p.config.swap_ab:
        return T.min(row, p.N - 1), T.min(col, workspace_cols(p) - reduce_vector(p))
    return T.min(row, p.M - 1), T.min(col, p.N - reduce_vector(p))


L2_PROMOTION_256B = 2
"""``CU_TENSOR_MAP_L2_PROMOTION_L2_256B`` (CUDA driver API ``CUtensorMapL2promotion``)."""


def signature_source(p: Sm90Plan) -> str:
    """``main(A, B, C, <the fused inputs>)`` (``p.params``): the host part encodes the tensor maps of A
    (``[M, K]``, boxes ``block_m x 64``), B (``[N, K]``, boxes ``block_n x 64``; ``swap_ab``: B's boxes
    ``block_m x 64`` first, the kernel's A role, then A's ``block_n x 64``) and, with
    ``epilogue="tma"``, C (``[M, N]``, boxes of a consumer's rows x 64), the residual (a staged read: C's boxes;
    ``sliced``: ``SLICE_ROWS`` rows) or its L2 prefetch's map (``gemm_residual.prefetch_box``, unswizzled), the tail
    maps, innermost dimension first (the driver's order), then the kernel."""
    c = p.config
    names = [q.name for q in p.params]
    lines = ["@T.function", f"def main({', '.join(f'{n}: types[{i}]' for i, n in enumerate(names))}):"]
    m = p.M if p.dynamic_m is None else "p.M"  # dynamic M: the run-time M (the TIR variable A's shape binds)
    e = ELEMENT_BYTES[p.dtype]
    maps = [("A", m, p.K, c.block_m, p.block_k, p.tir_dtype, e),
            ("B", p.N, p.K, cluster.b_box_rows(p), p.block_k, p.tir_dtype, e)]  # a cluster: a CTA's share of B's box
    if c.swap_ab:  # the kernel's A role: B's rows (boxes block_m x K tile; a cluster: a CTA's share); its B role: A's
        maps = [("B", p.N, p.K, cluster.a_box_rows(p), p.block_k, p.tir_dtype, e),
                ("A", m, p.K, c.block_n, p.block_k, p.tir_dtype, e)]
    if c.epilogue == "tma":  # C's stores: boxes of a consumer's rows x 64 columns
        maps.append(("C", m, p.N, c.rows, SWIZZLE_COLUMNS, p.tir_out, 2))
    if c.residual_staged or c.residual_read == "chunks":  # the residual's loads into the staging buffers: C's boxes
        maps.append(("residual", m, p.N, residual_box_rows(p), SWIZZLE_COLUMNS, p.tir_out, 2))
    for name, rows, cols, box_rows, box_cols, dtype, size in maps:
        lines += tensor_map_source(name, "[0, 0]", rows, cols, box_rows, box_cols, dtype, size)
    own = ["mapresidualL2"] if c.residual_read == "prefetch" else []  # the L2 prefetch's map: unswizzled, prefetch_box
    if own:
        lines += tensor_map_lines("residualL2", "[0, 0]", (p.N, m), (p.N * OUT_BYTES[p.out_dtype],), prefetch_box(p),
                                  p.tir_out, 0, tensor="residual")  # C's dtype: an f32 C's rows are 4 N bytes
    if cluster.b_peer_rows(p):  # a cluster's uneven shares of B: rank 1's box, the last map before the tails (b_maps)
        own.append("mapB1")
        lines += tensor_map_source("B1", "[0, 0]", p.N, p.K, cluster.b_peer_rows(p), p.block_k, p.tir_dtype, e,
                                   tensor="B")
    for name in tail_maps(p):  # the tail block's boxes: rows x Sm90Config.tail_columns, its tail_swizzle
        lines += tensor_map_lines(f"{name}Tail", "[0, 0]", (p.N, m), (p.N * 2,), (c.tail_columns, c.rows if name == "C" else
                                  residual_box_rows(p)), p.tir_out, L.TMA_SWIZZLE_MODE[c.tail_swizzle], tensor=name)
    boxes = [(name, box, rows, cols, box_cols, dtype, size) for name, rows, cols, block, box_cols, dtype, size in maps[:2]
             for box in trim_boxes(block)] if c.trim_loads else []  # the A then B role's trim_boxes, the last maps
    for name, box, rows, cols, box_cols, dtype, size in boxes:
        lines += tensor_map_source(f"{name}Box{box}", "[0, 0]", rows, cols, box, box_cols, dtype, size, tensor=name)
    args = ", ".join(f"{n!r}: {n}" for n in names)
    names = [f"map{q[0]}" for q in maps] + own + [f"map{n}Tail" for n in tail_maps(p)]
    names += [f"map{b[0]}Box{b[1]}" for b in boxes]
    return "\n".join([*lines, f"    kernel(p, {{{args}}}, ({', '.join(names)},))", ""])


def tensor_map_source(name: str, origin: str, rows, cols, box_rows, box_cols, dtype: str, size: int,
                      tensor: str | None = None) -> list[str]:
    """The host lines encoding ``map<name>``: a 2-D ``rows x cols`` tensor map over ``name`` (``tensor`` where
    given) from element ``origin`` (rows of ``cols * size`` bytes), boxes ``box_rows x box_cols``, 128-byte
    swizzled, innermost dimension first (the driver's order)."""
    return tensor_map_lines(name, origin, (cols, rows), (cols * size,), (box_cols, box_rows), dtype, SWIZZLE_128B,
                            tensor=tensor)


def tensor_map_lines(name: str, origin: str, dims, strides, box, dtype: str, swizzle: int,
                     tensor: str | None = None) -> list[str]:
    """The host lines encoding ``map<name>``: a tensor map of ``len(dims)`` dimensions over ``name`` from element
    ``origin``, innermost first (the driver's order): ``dims``, the byte ``strides`` of dims 1.., ``box``, element
    strides 1, the TMA swizzle mode ``swizzle`` (``CUtensorMapSwizzle``), out-of-bounds boxes zero-filled; ``tensor``:
    the tensor's name where it is not ``name``."""
    numbers = ", ".join(str(v) for v in (*dims, *strides, *box, *(1,) * len(dims)))
    return [f"    map{name} = T.stack_alloca('tensormap', 1)",
            f"    T.cuda.tensormap_encode_tiled(map{name}, {tensor or name}.ptr_to({origin}), {numbers}, "
            f"descriptor_dtype='{dtype}', rank={len(dims)}, swizzle={swizzle}, l2_promotion={L2_PROMOTION_256B})"]


@transpile_once
def emit(p: Sm90Plan):
    """The TIRx PrimFunc ``main(A, B, C, ...)`` of a plan (its parameters: ``p.params``)."""
    register()  # T.sm90 / T.wgmma
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p), {"T": T, "kernel": kernel, "p": p, "types": types})


__all__ = ["TMA_LOAD", "TMA_STORE", "emit", "retire", "store_tma", "tensor_map_lines", "tensor_map_source", "operand_type", "ring_layout", "signature_source", "tma_load", "wgmma_instr",
           "wgmma_issue", "out_value"]
