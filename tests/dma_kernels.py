"""gfx950 kernels for the direct-to-LDS load tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.patterns.wave import BUFFER_OOB


def dma_copy(size: int = 16, waves: int = 1, valid: int = 64, wait: bool = True, read_other_wave: bool = False,
             wait_after_barrier: bool = False):
    """Wave ``w`` loads X words ``[(64w + l) * size/4, ...)`` of lane ``l`` straight into LDS block ``w``
    (lanes ``l >= valid`` are masked out), waits (``s_waitcnt vmcnt(0)`` when ``wait``; after the
    barrier with ``wait_after_barrier``), barriers, then thread ``t`` copies LDS words ``t*size/4 ...`` (of the next wave's block when
    ``read_other_wave``) to D."""
    words = size // 4
    n = 64 * waves * words

    @T.function
    def kernel(X: T.Tensor((n,), "int32"), D: T.Tensor((64 * waves, words), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64 * waves)
            S = T.alloc_tensor(ty_args=[T.Tensor((n,), "int32", scope="shared", align=16)])
            lane = tx % 64
            T.rocm.buffer_load_lds(X.data, n * 4, T.if_then_else(lane < valid, tx * size, BUFFER_OOB), 0,
                                   S[tx // 64 * 64 * words], size)
            if wait and not wait_after_barrier:
                T.rocm.s_waitcnt_vmcnt(0)
            T.rocm.workgroup_barrier()
            if wait and wait_after_barrier:
                T.rocm.s_waitcnt_vmcnt(0)
            src = (tx + 64) % (64 * waves) if read_other_wave else tx
            for e in T.unroll(words):
                D[tx, e] = S[src * words + e]

    return kernel
