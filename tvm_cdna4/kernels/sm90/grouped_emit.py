"""Emission of the sm90 grouped GEMM: a ``Sm90GroupedPlan`` to a TIRx PrimFunc ``main(A, B, C, offsets, ...)``.

The dense kernel's roles and ring (``gemm_emit``: ``load_tile``, ``mainloop``, ``store`` are its macros), with
the work units of a grouped GEMM (``grouped_plan``'s docstring): both roles walk the units ``pid, pid + ctas,
...`` in the plan's tile order, find each unit's group (``kernels.gemm.grouped_emit.find_group``: the binary
search over the offsets) and rows (``Groups.origin``: ``m0 .. m_end``), and skip a unit without rows
(``0 <= m0 < m_end`` fails: a gap tile, or bad offsets); ``done`` counts the units with rows, the ring position
of a unit's first k-tile being ``done * slice_tiles`` in both roles. The producer loads A's box at row ``m0``
and B's at row ``g N + n0`` of the ``[G N, K]`` map; the consumers store rows below ``m_end`` and columns below
N, the per-group fused inputs at row ``g``.
"""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...tirx_private import transpile_once
from ..gemm.grouped import OFFSETS
from ..gemm.grouped_emit import find_group
from .gemm_emit import load_tile, mainloop, retire, store, store_tma, tensor_map_source
from .gemm_plan import CONSUMER_REGS, ELEMENT_BYTES, PRODUCER_REGS, SWIZZLE_COLUMNS, WARPGROUP, WGMMA_M
from .grouped_plan import Sm90GroupedPlan


@T.macro
def kernel(p, args, maps):
    c = p.config
    T.device_entry(launch=T.cuda.LaunchConfig(grid=p.ctas, block=c.threads, dynamic_smem_bytes=p.smem_bytes),
                   kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1))
    SMH = T.alloc_tensor(ty_args=[T.Tensor((p.smem_bytes // 2,), p.smem_dtype, scope="shared.dyn", layout="default", align=1024)])
    MB = T.alloc_tensor(ty_args=[T.Tensor((2 * c.stages,), "uint64", scope="shared", layout="default")])
    tid = T.cuda.thread_idx("x")
    pid = T.cuda.block_idx("x")
    if tid == 0:
        for s in T.unroll(c.stages):
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(MB.ptr_to([c.stages + s]), T.uint32(c.consumers))
        T.ptx["fence.mbarrier_init.release.cluster"]()
    T.cuda.cta_sync()
    if tid < WARPGROUP:
        T.ptx["setmaxnreg.dec.sync.aligned.u32"](PRODUCER_REGS)
        if tid == 0:
            producer(p, SMH, MB, args, maps, pid)
    else:
        T.ptx["setmaxnreg.inc.sync.aligned.u32"](CONSUMER_REGS)
        consumer(p, SMH, MB, args, maps, pid, tid // WARPGROUP - 1, tid % WARPGROUP)


@T.macro
def producer(p, SMH, MB, args, maps, pid):
    c = p.config
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
            load_tile(p, SMH, MB, maps, done[0] * p.slice_tiles, p.slice_tiles, 0, span[0], g * p.N + tile[1] * c.block_n)
            done[0] = done[0] + 1


@T.macro
def consumer(p, SMH, MB, args, maps, pid, wg, t):
    c = p.config
    offsets = args[OFFSETS]
    acc = T.alloc_tensor(ty_args=[T.Tensor((c.rows // WGMMA_M * c.block_n // 2,), "float32", scope="local", layout="default")])
    done = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
    found = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local", layout="default")])
    done[0] = 0
    for i in range(T.truncdiv(p.units - 1 - pid, p.ctas) + 1):
        tile = p.tile_of(pid + i * p.ctas, T.truncdiv, T.truncmod, T.min)
        find_group(p.grouping, offsets, tile[0], found)
        g = found[0]
        span = p.grouping.origin(g, offsets[g], offsets[g + 1], tile[0], p.M, T.min)
        if T.And(span[0] >= 0, span[0] < span[1]):
            for r in T.unroll(c.rows // WGMMA_M * c.block_n // 2):
                acc[r] = T.float32(0)
            mainloop(p, SMH, MB, acc, done[0] * p.slice_tiles, p.slice_tiles, wg, wg, t, None)
            retire(p, acc)
            if t == 0:
                T.ptx.mbarrier.arrive.shared.b64(MB.ptr_to([c.stages + (done[0] * p.slice_tiles + p.slice_tiles - 1) % c.stages]), T.uint32(1))
            if I.constexpr(c.epilogue == "tma"):
                # the warpgroup's rows wholly inside the group: TMA stores (uniform across the warpgroup, whose
                # named barrier the staging takes); else, a group's last tile, masked stores from registers
                if span[0] + (wg + 1) * c.rows <= span[1]:
                    store_tma(p, SMH, acc, args, maps[2], wg, wg, t, span[0], tile[1] * c.block_n, g, None)
                else:
                    store(p, acc, args, span[0] + wg * c.rows + (t // 32) * 16 + (t % 32) // 4,
                          tile[1] * c.block_n + 2 * (t % 4), span[1], g)
            else:
                store(p, acc, args, span[0] + wg * c.rows + (t // 32) * 16 + (t % 32) // 4,
                      tile[1] * c.block_n + 2 * (t % 4), span[1], g)
            done[0] = done[0] + 1
    if I.constexpr(c.epilogue == "tma"):
        if t == 0:
            T.ptx["cp.async.bulk.wait_group"](0)  # the last tile's stores are done before the CTA exits


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
