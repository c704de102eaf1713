"""sm90 test kernels for the CUDA emulator's Hopper instructions (tests/emulator/test_emulator_hopper*.py):
TMA loads and stores through TIRx's tile pattern, mbarrier transaction counts, wgmma with raw
``T.ptx`` calls, elect.sync and setmaxnreg."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


def swizzled(rows: int, cols: int, width: int, elem_bytes: int = 2):
    """The shared layout of a ``rows`` x ``cols`` box a ``width``-byte-swizzled TMA writes
    (``Swizzle<B,4,3>`` in elements: B = log2(width/16) bits of the 16-byte chunk XOR the row's)."""
    tile = T.TileLayout(T.S[rows, cols])
    if width == 0:
        return tile
    per = {1: 4, 2: 3, 4: 2}[elem_bytes]
    return T.ComposeLayout(per, {32: 1, 64: 2, 128: 3}[width], 3, tile)


def tma_copy_kernel(shape=(64, 64), box=(64, 64), coords=(0, 0), width=128, dtype="bfloat16", wait=True,
                    expect=True, store=False):
    """One TMA load of a ``box`` of ``A`` (``shape``) at ``coords`` into shared memory, swizzled by
    ``width``, onto an mbarrier (expect-tx of the box's bytes by thread 0); then each of 128 threads
    copies the shared box to ``Out`` (``box``) element by element through the logical layout, or
    (``store``) a TMA store writes the box back to ``Out`` (``shape``) at ``coords``."""
    rows, cols = box
    esize = 1 if "float8" in dtype else (4 if dtype == "float32" else 2)
    nbytes = rows * cols * esize
    sw = {0: 0, 32: 1, 64: 2, 128: 3}[width]
    out_shape = shape if store else box

    @T.function
    def kernel(A: T.Tensor(shape, dtype), Out: T.Tensor(out_shape, dtype)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        SM = T.alloc_tensor(ty_args=[T.Tensor(box, dtype, scope="shared", layout=swizzled(rows, cols, width, esize),
                                              align=1024)])
        BAR = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint64", scope="shared", layout="default", align=8)])
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(BAR.ptr_to([0]), T.uint32(1))
        T.cuda.cta_sync()
        if tid == 0:
            if I.constexpr(expect):
                T.ptx["mbarrier.arrive.expect_tx.shared.b64"](BAR.ptr_to([0]), T.uint32(nbytes))
            else:
                T.ptx.mbarrier.arrive.shared.b64(BAR.ptr_to([0]), T.uint32(1))
            T.cuda.tile.apply(T.ptx[TMA_LOAD], SM[0:rows, 0:cols], A[0:shape[0], 0:shape[1]], box=box, coords=coords,
                              mbar=BAR.ptr_to([0]), swizzle=sw)
        if I.constexpr(wait):
            T.cuda.mbarrier_wait(BAR.ptr_to([0]), 0)
        if I.constexpr(store):
            T.ptx["fence.proxy.async.shared::cta"]()
            T.cuda.cta_sync()
            if tid == 0:
                T.cuda.tile.apply(T.ptx[TMA_STORE], Out[0:shape[0], 0:shape[1]], SM[0:rows, 0:cols], box=box,
                                  coords=coords, swizzle=sw)
                T.ptx["cp.async.bulk.commit_group"]()
                T.ptx["cp.async.bulk.wait_group"](0)
        else:
            for i in range(rows * cols // 128):
                Out[(i * 128 + tid) // cols, (i * 128 + tid) % cols] = SM[(i * 128 + tid) // cols, (i * 128 + tid) % cols]

    return kernel
