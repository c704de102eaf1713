"""Emission of the sm90 grouped GEMM: a ``Sm90GroupedPlan`` to a TIRx PrimFunc ``main(A, B, C, offsets, ...)``.

The dense kernel's CTA, roles and ring (``gemm_emit``: ``cta``, ``load_tile``, ``mainloop``; ``gemm_epilogue``:
``store`` are its macros), with the work units of a grouped GEMM (``grouped_plan``'s docstring): both roles walk the
units ``pid, pid + ctas, ...`` in the plan's tile order, find each unit's group and rows (``m0 .. m_end``) and skip a
unit without rows (``0 <= m0 < m_end`` fails: a gap tile, or bad offsets); the ``windows`` walk is the prefix walk
with each group's units in windows of its own (``window_tile``). The ``gaps`` walk
(``Sm90Config.tile_walk``, ``units_gaps``) walks the ``Groups`` row tiles, a unit's group by
``kernels.gemm.grouped_emit.find_group`` (the binary search over the offsets in global memory) and its rows by
``Groups.origin``; the ``prefix`` walk (``units_prefix``) walks the row tiles with rows only: every CTA first copies
the offsets into shared memory and sums the groups' row tiles there (``scan_groups``, run by ``gemm_emit.cta`` before
the roles part), then finds a unit's group by a binary search over that prefix (``find_prefix``). ``done`` counts the
units with rows, the ring position of a unit's first k-tile being ``done * slice_tiles`` in both roles. The producer
loads A's box at row ``m0`` and B's at row ``g N + n0`` of the ``[G N, K]`` map; the consumers store rows below
``m_end`` and columns below N, the per-group fused inputs at row ``g``.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...tirx_private import transpile_once
from ..common import ceil_div
from ..gemm.grouped import OFFSETS
from ..gemm.grouped_emit import find_group, search
from .gemm_emit import cta, load_tile, mainloop, retire, tensor_map_source
from .gemm_epilogue import store, store_tma
from .gemm_plan import ELEMENT_BYTES, PREFIX_WORDS, SWIZZLE_COLUMNS, WGMMA_M, grouped_index
from .grouped_plan import Sm90GroupedPlan

SCAN_UNROLL = 8
"""Groups a step of the prefix walk's sum (``scan_groups``): their shared loads issued together."""


@T.macro
def kernel(p, args, maps):
    # the dense kernel's CTA (its ``cta``) with the grouped roles; the prefix walk sums the groups' tiles first
    if I.constexpr(p.config.tile_walk != "gaps"):
        cta(p, args, maps, producer, consumer, scan_groups)
    else:
        cta(p, args, maps, producer, consumer)


def prefix_view(p: Sm90GroupedPlan, SMH):
    """The prefix walk's shared words (``gemm_plan.PREFIX_WORDS``): the offsets at ``[0, G]``, the row tiles
    before group ``g`` at ``[G + 1 + g]`` (their total at ``[2 G + 1]``)."""
    return T.decl_tensor(SMH.ptr_to([p.prefix_at]), ty_args=[T.Tensor((PREFIX_WORDS * (p.groups + 1),), "int32",
                                                                      scope="shared.dyn", layout="default")])


@T.macro
def scan_groups(p, SMH, args, tid):
    # the prefix walk's sums (before the roles part): thread t copies offsets t, t + threads, ... into shared
    # memory and writes group t's ceil(max(rows, 0) / block_m) row tiles (grouped_plan.prefix_tiles) where its
    # prefix goes; after a barrier thread 0 adds them up in place, eight groups' loads at a time; the CTA's barrier
    # follows (cta's)
    PF = prefix_view(p, SMH)
    offsets = args[OFFSETS]
    for c in T.unroll(ceil_div(p.groups + 1, p.config.threads)):
        if c * p.config.threads + tid <= p.groups:
            PF[c * p.config.threads + tid] = offsets[c * p.config.threads + tid]
        if c * p.config.threads + tid < p.groups:
            PF[p.groups + 2 + c * p.config.threads + tid] = T.truncdiv(
                T.max(offsets[c * p.config.threads + tid + 1] - offsets[c * p.config.threads + tid], 0)
                + (p.config.block_m - 1), p.config.block_m)
    T.cuda.cta_sync()
    if tid == 0:
        total = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
        total[0] = 0
        PF[p.groups + 1] = 0
        for j in range(ceil_div(p.groups, SCAN_UNROLL)):
            for i in T.unroll(SCAN_UNROLL):
                if j * SCAN_UNROLL + i < p.groups:
                    total[0] = total[0] + PF[p.groups + 2 + j * SCAN_UNROLL + i]
                    PF[p.groups + 2 + j * SCAN_UNROLL + i] = total[0]


def prefix_test(p: Sm90GroupedPlan, PF, r):
    """``find_prefix``'s test of a candidate group: a group whose first row tile (``PF[G + 1 + g]``, read clamped
    inside ``[0, G)``) is at most ``r``."""
    return lambda cand: T.And(cand < p.groups, PF[p.groups + 1 + T.min(cand, p.groups - 1)] <= r)


@T.macro
def find_prefix(p, PF, r, found):
    # found[0] = the last group g < G whose first row tile (PF[G + 1 + g]) is at most r: find_group's binary search
    # (kernels.gemm.grouped_emit.search over Groups.steps) over the shared prefix; it has tiles when r < PF[2 G + 1]
    search(p.grouping.steps, prefix_test(p, PF, r), found)


@T.macro
def producer(p, SMH, MB, args, maps, pid):
    units(p, SMH, MB, args, maps, pid, load_unit, None, None, None)


@T.macro
def load_unit(p, SMH, MB, args, maps, wg, t, acc, tile, g, span, pos):
    # the unit's k-tiles from ring position pos * slice_tiles: A's box at row m0, B's at the group's weights
    load_tile(p, SMH, MB, maps, pos * p.slice_tiles, p.slice_tiles, 0, span[0], g * p.N + tile[1] * p.config.block_n)


@T.macro
def consumer(p, SMH, MB, args, maps, pid, wg, t):
    c = p.config
    acc = T.alloc_tensor(ty_args=[T.Tensor((c.rows // WGMMA_M * c.block_n // 2,), "float32", scope="local", layout="default")])
    units(p, SMH, MB, args, maps, pid, compute_unit, wg, t, acc)
    if I.constexpr(c.epilogue == "tma"):
        if t == 0:
            T.ptx["cp.async.bulk.wait_group"](0)  # the last tile's stores are done before the CTA exits


@T.macro
def units(p, SMH, MB, args, maps, pid, role, wg, t, acc):
    # the walk of both roles (the module docstring): the CTA's units pid, pid + ctas, ...; each one with rows
    # (its tile, group g, rows span[0] .. span[1]) is role(..., tile, g, span, done), done counting those before it
    if I.constexpr(p.config.tile_walk != "gaps"):
        units_prefix(p, SMH, MB, args, maps, pid, role, wg, t, acc)
    else:
        units_gaps(p, SMH, MB, args, maps, pid, role, wg, t, acc)


@T.macro
def units_prefix(p, SMH, MB, args, maps, pid, role, wg, t, acc):
    # the prefix walk: units below PF[2 G + 1] tile rows x tiles_n, in the tile order over those rows; a unit's
    # group by find_prefix, its rows from the shared offsets (m_end clipped at T; 0 <= m0 < m_end still checked:
    # bad offsets). The unit's tile and rows are read once into registers (at): the roles' k-loops issue asm
    # with memory clobbers, after which a shared read would be made again at every k-tile
    PF = prefix_view(p, SMH)
    done = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
    found = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
    at = T.alloc_tensor(ty_args=[T.Tensor((4,), "int32", scope="local", layout="default")])
    done[0] = 0
    for i in range(T.truncdiv(p.units - 1 - pid, p.ctas) + 1):
        if pid + i * p.ctas < PF[2 * p.groups + 1] * p.tiles_n:
            if I.constexpr(p.config.tile_walk == "windows"):
                window_tile(p, PF, pid + i * p.ctas, found, at)
            else:
                tile = p.tile_of(pid + i * p.ctas, T.truncdiv, T.truncmod, T.min, PF[2 * p.groups + 1])
                at[0] = tile[0]
                at[1] = tile[1]
                find_prefix(p, PF, at[0], found)
            at[2] = PF[found[0]] + (at[0] - PF[p.groups + 1 + found[0]]) * p.config.block_m
            at[3] = T.min(PF[found[0] + 1], p.M)
            if T.And(at[2] >= 0, at[2] < at[3]):
                role(p, SMH, MB, args, maps, wg, t, acc, (at[0], at[1]), found[0], (at[2], at[3]), done[0])
                done[0] = done[0] + 1


def window_test(p: Sm90GroupedPlan, PF, u):
    """``window_tile``'s test of a candidate group: a group whose first unit (``PF[G + 1 + g]`` row tiles times the
    tile columns, read clamped inside ``[0, G)``) is at most ``u``."""
    return lambda cand: T.And(cand < p.groups, PF[p.groups + 1 + T.min(cand, p.groups - 1)] * p.tiles_n <= u)


@T.macro
def window_tile(p, PF, u, found, at):
    # the windows walk's unit u: its group (found[0]: the last group whose first unit, PF[G + 1 + g] x tiles_n, is at
    # most u), then the grouped order over that group's row tiles alone (grouped_plan.window_locate): at[0] its row
    # tile, at[1] its column
    search(p.grouping.steps, window_test(p, PF, u), found)
    tile = grouped_index(u - PF[p.groups + 1 + found[0]] * p.tiles_n,
                         PF[p.groups + 2 + found[0]] - PF[p.groups + 1 + found[0]], p.tiles_n, p.config.group_m,
                         T.truncdiv, T.truncmod, T.min)
    at[0] = PF[p.groups + 1 + found[0]] + tile[0]
    at[1] = tile[1]


@T.macro
def units_gaps(p, SMH, MB, args, maps, pid, role, wg, t, acc):
    # the gaps walk: every Groups row tile, each unit's group by the binary search over the global offsets
    offsets = args[OFFSETS]
    done = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
    found = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
    done[0] = 0
    for i in range(T.truncdiv(p.units - 1 - pid, p.ctas) + 1):
        tile = p.tile_of(pid + i * p.ctas, T.truncdiv, T.truncmod, T.min)
        find_group(p.grouping, offsets, tile[0], found)
        g = found[0]
        span = p.grouping.origin(g, offsets[g], offsets[g + 1], tile[0], p.M, T.min)
        if T.And(span[0] >= 0, span[0] < span[1]):
            role(p, SMH, MB, args, maps, wg, t, acc, tile, g, span, done[0])
            done[0] = done[0] + 1


@T.macro
def compute_unit(p, SMH, MB, args, maps, wg, t, acc, tile, g, span, pos):
    # consumer warpgroup wg's rows of the unit: the mainloop from ring position pos * slice_tiles, "empty" of
    # its last stage, the stores
    c = p.config
    for r in T.unroll(c.rows // WGMMA_M * c.block_n // 2):
        acc[r] = T.float32(0)
    mainloop(p, SMH, MB, acc, pos * p.slice_tiles, p.slice_tiles, wg, wg, t, None)
    retire(p, acc)
    if t == 0:
        T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([c.stages + (pos * p.slice_tiles + p.slice_tiles - 1) % c.stages]), T.uint32(1))
    if I.constexpr(c.epilogue == "tma"):
        # the warpgroup's rows wholly inside the group: TMA stores (uniform across the warpgroup, whose
        # named barrier the staging takes); else, a group's last tile, masked stores from registers
        if span[0] + (wg + 1) * c.rows <= span[1]:
            store_tma(p, SMH, acc, args, (maps[2], None), wg, wg, t, span[0], tile[1] * c.block_n, g, None)
        else:
            store(p, acc, args, span[0] + wg * c.rows + (t // 32) * 16 + (t % 32) // 4,
                  tile[1] * c.block_n + 2 * (t % 4), span[1], g)
    else:
        store(p, acc, args, span[0] + wg * c.rows + (t // 32) * 16 + (t % 32) // 4,
              tile[1] * c.block_n + 2 * (t % 4), span[1], g)


def signature_source(p: Sm90GroupedPlan) -> str:
    """``main(A, B, C, offsets, <the fused inputs>)`` (``p.params``): the host part encodes the tensor maps of A
    (``[T, K]`` at the run-time T, boxes ``block_m x block_k``), of the weights as ``[G N, K]`` (boxes
    ``block_n x block_k``) and, with ``epilogue="tma"``, of C (``[T, N]``, boxes of a consumer's rows x 64),
    innermost dimension first (the driver's order), then the kernel."""
    c = p.config
    names = [q.name for q in p.params]
    lines = ["@T.function", f"def main({', '.join(f'{n}: types[{i}]' for i, n in enumerate(names))}):"]
    e = ELEMENT_BYTES[p.dtype]
    maps = [("A", "p.M", "[0, 0]", c.block_m), ("B", p.groups * p.N, "[0, 0, 0]", c.block_n)]
    for name, rows, origin, box_rows in maps:
        lines += tensor_map_source(name, origin, rows, p.K, box_rows, p.block_k, p.tir_dtype, e)
    if c.epilogue == "tma":  # C's stores of the tiles inside a group: boxes of a consumer's rows x 64 columns
        maps.append(("C", "p.M", "[0, 0]", c.rows))
        lines += tensor_map_source("C", "[0, 0]", "p.M", p.N, c.rows, SWIZZLE_COLUMNS, p.tir_out, 2)
    args = ", ".join(f"{n!r}: {n}" for n in names)
    return "\n".join([*lines, f"    kernel(p, {{{args}}}, ({', '.join(f'map{m[0]}' for m in maps)},))", ""])


@transpile_once
def emit(p: Sm90GroupedPlan):
    """The TIRx PrimFunc ``main(A, B, C, offsets, ...)`` of a grouped plan (its parameters: ``p.params``)."""
    from ...rocm.build import register

    register()  # T.sm90 / T.wgmma, whatever route reached here first (a torch op's first grouped call)
    types = [T.Tensor(q.shape, q.dtype) for q in p.params]
    return parse(signature_source(p), {"T": T, "kernel": kernel, "p": p, "types": types})


__all__ = ["emit", "signature_source"]
