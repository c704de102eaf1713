"""sm90 cluster test kernels for the CUDA emulator (tests/emulator/test_emulator_cluster.py): a cluster of 2 CTAs
that multicasts a TMA box (each CTA loads half of it into both), signals a peer's mbarrier through ``mapa``, and
syncs the cluster with ``barrier.cluster``; each flag removes or breaks one step."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

MULTICAST = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
ROWS, COLS, DTYPE = 16, 64, "bfloat16"


def multicast_kernel(mask=3, peer=1, remote=True, trailing=True, partial_arrive=False, local_mapped=False):
    """Grid 4, clusters of 2: CTA ``b`` (rank ``b % 2``) loads rows ``(b // 2) * 16 + r * 8 ..`` (8 rows) of ``A``
    into shared rows ``r * 8 ..`` of every CTA of ``mask`` (onto the mbarrier at the same offset; each CTA expects
    the whole 16-row box), waits, copies its box to ``Out[b * 16 ..]``; then thread 0 arrives on its own "done"
    barrier (count 2) and, ``remote``, through ``mapa`` on the one of the CTA of rank ``(rank + peer) % 2``; every
    thread waits on "done"; a trailing cluster barrier (``trailing``). ``partial_arrive``: only warps 0-1 take
    the first cluster barrier's arrive; ``local_mapped``: the TMA's mbarrier operand is a mapped address."""
    half = ROWS // 2

    @T.macro
    def body(A, Out, mapA):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=128, cluster=2))
        tid = T.cuda.thread_idx("x")
        bid = T.cuda.block_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor((ROWS * COLS,), "bfloat16", scope="shared.dyn", layout="default", align=1024)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((2,), "uint64", scope="shared", layout="default", align=8)])
        rem = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local", layout="default")])
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([1]), T.uint32(2))
            T.ptx["fence.mbarrier_init.release.cluster"]()
        if I.constexpr(partial_arrive):
            if tid < 64:
                T.ptx["barrier.cluster.arrive.relaxed.aligned"]()
        else:
            T.ptx["barrier.cluster.arrive.relaxed.aligned"]()
        T.ptx["barrier.cluster.wait.aligned"]()
        if tid == 0:
            T.ptx["mbarrier.arrive.expect_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(ROWS * COLS * 2))
            if I.constexpr(local_mapped):
                T.ptx.mapa.shared__cluster.u32(rem[0], T.cuda.cvta_generic_to_shared(BAR.ptr_to([0])), T.uint32(bid % 2))
                T.ptx[MULTICAST](T.cuda.cvta_generic_to_shared(SM.ptr_to([(bid % 2) * half * COLS])), T.address_of(mapA),
                                 0, (bid // 2) * ROWS + (bid % 2) * half, rem[0], T.uint16(mask))
            else:
                T.ptx[MULTICAST](T.cuda.cvta_generic_to_shared(SM.ptr_to([(bid % 2) * half * COLS])), T.address_of(mapA),
                                 0, (bid // 2) * ROWS + (bid % 2) * half, BAR.ptr_to([0]), T.uint16(mask))
        T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
        for i in range(ROWS * COLS // 128):
            Out[bid * ROWS + (i * 128 + tid) // COLS, (i * 128 + tid) % COLS] = SM[i * 128 + tid]
        if tid == 0:
            if I.constexpr(remote):
                T.ptx.mapa.shared__cluster.u32(rem[0], T.cuda.cvta_generic_to_shared(BAR.ptr_to([1])),
                                               T.uint32((bid + peer) % 2 if peer < 2 else peer))
                T.ptx.mbarrier.arrive.shared__cluster.b64(rem[0])
            T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([1]))
        T.cuda.mbarrier_wait(BAR.ptr_to([1]), 0)
        if I.constexpr(trailing):
            T.ptx["barrier.cluster.arrive.aligned"]()
            T.ptx["barrier.cluster.wait.aligned"]()

    @T.function
    def main(A: T.Tensor((64, COLS), DTYPE), Out: T.Tensor((64, COLS), DTYPE)):
        mapA = T.stack_alloca("tensormap", 1)
        T.cuda.tensormap_encode_tiled(mapA, A.ptr_to([0, 0]), COLS, 64, COLS * 2, COLS, half, 1, 1,
                                      descriptor_dtype="bfloat16", rank=2, swizzle=0, l2_promotion=2)
        body(A, Out, mapA)

    return main
