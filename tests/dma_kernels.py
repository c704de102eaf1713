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


def dma_lane_destination():
    """A direct-to-LDS load whose LDS destination is indexed by the lane (not wave-uniform)."""
    @T.function
    def kernel(X: T.Tensor((1024,), "int16"), D: T.Tensor((64,), "int16")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((520,), "int16", scope="shared", align=16)])
            T.rocm.buffer_load_lds(X.data, 2048, tx * 16, 0, S[tx * 8], 16)
            T.rocm.s_waitcnt_vmcnt(0)
            D[tx] = S[tx]

    return kernel


def dma_misaligned_destination():
    """A direct-to-LDS load to byte 2 + 32k of an int16 tile (never 4-byte aligned)."""
    @T.function
    def kernel(X: T.Tensor((1024,), "int16"), D: T.Tensor((64,), "int16")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((1040,), "int16", scope="shared", align=16)])
            T.rocm.buffer_load_lds(X.data, 2048, tx * 16, 0, S[tx // 64 * 16 + 1], 16)
            T.rocm.s_waitcnt_vmcnt(0)
            D[tx] = S[tx]

    return kernel


def dma_bad_call(what: str):
    """``T.rocm.buffer_load_lds`` refused as it is written: ``"local"`` (a register destination),
    ``"size"`` (8 bytes per lane)."""
    local = what == "local"

    @T.function
    def kernel(X: T.Tensor((1024,), "int16"), D: T.Tensor((64,), "int16")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            R = T.alloc_tensor(ty_args=[T.Tensor((8,), "int16", scope="local")])
            T.rocm.buffer_load_lds(X.data, 2048, tx * 16, 0, R[0], 16 if local else 8)
            D[tx] = R[0]

    return kernel


def dma_tile(tile, row_stride: int, waves: int = 2):
    """``waves`` waves load ``tile`` (an ``LdsTile``) of the int32 matrix G (``row_stride`` bytes per row)
    with direct-to-LDS loads, block ``i`` by wave ``i % waves``, each lane's chunk from the tile's
    inverse map; then the workgroup copies the LDS bytes (``tile.dma_bytes``) to D."""
    size, block = tile.size, 64 * tile.size
    blocks = tile.dma_bytes // block
    words = tile.dma_bytes // 4
    per_thread = words // (64 * waves)
    g_words = tile.rows * row_stride // 4

    @T.function
    def kernel(G: T.Tensor((g_words,), "int32"), D: T.Tensor((words,), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64 * waves)
            S = T.alloc_tensor(ty_args=[T.Tensor((words,), "int32", scope="shared", align=16)])
            for j in T.unroll(blocks // waves):
                base = (j * waves + tx // 64) * block
                b = base + tx % 64 * size
                T.rocm.buffer_load_lds(G.data, g_words * 4,
                                       T.if_then_else(tile.in_tile(b), tile.row_at(b) * row_stride + tile.col_at(b) * size,
                                                      BUFFER_OOB), 0, S[base // 4], size)
            T.rocm.s_waitcnt_vmcnt(0)
            T.rocm.workgroup_barrier()
            for e in T.unroll(per_thread):
                D[tx * per_thread + e] = S[tx * per_thread + e]

    return kernel
