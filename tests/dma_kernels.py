"""gfx950 kernels for the direct-to-LDS load tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.patterns.wave import BUFFER_OOB


def dma_copy(size: int = 16, waves: int = 1, valid: int = 64, wait: bool = True, read_other_wave: bool = False,
             wait_after_barrier: bool = False):
    """Wave ``w`` loads X words ``[(64w + l) * size/4, ...)`` of lane ``l`` straight into LDS block ``w``
    (lanes ``l >= valid`` are masked out), waits (``s_waitcnt vmcnt(0)`` when ``wait``; after the
    barrier with ``wait_after_barrier``), barriers, then thread ``t`` copies LDS words ``t*size/4 ...``
    (of the next wave's block when ``read_other_wave``) to D."""
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
    with direct-to-LDS loads, load ``i`` (at ``tile.load_base(i)``) by wave ``i % waves``, each lane's
    chunk from the tile's inverse map (``global_offset``); then the workgroup copies the LDS bytes
    (``tile.dma_bytes``) to D."""
    assert tile.loads % waves == 0
    size, words = tile.size, tile.dma_bytes // 4
    threads = 64 * waves
    per_thread = -(-words // threads)
    g_words = tile.rows * row_stride // 4

    @T.function
    def kernel(G: T.Tensor((g_words,), "int32"), D: T.Tensor((words,), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64 * waves)
            S = T.alloc_tensor(ty_args=[T.Tensor((words,), "int32", scope="shared", align=16)])
            for j in T.unroll(tile.loads // waves):
                base = tile.load_base(j * waves + tx // 64)
                T.rocm.buffer_load_lds(G.data, g_words * 4, tile.global_offset(base + tx % 64 * size, row_stride), 0,
                                       S[base // 4], size)
            T.rocm.s_waitcnt_vmcnt(0)
            T.rocm.workgroup_barrier()
            for e in T.unroll(per_thread):
                if e * threads + tx < words:
                    D[e * threads + tx] = S[e * threads + tx]

    return kernel


def dma_sizes(valid: int = 64, vmcnt: int = 0, read_from: int = 0, read_bytes: int = 2048):
    """One wave loads X with one direct-to-LDS load of each size into consecutive LDS blocks (16-byte
    lanes to bytes [0, 1024), 12-byte lanes to [1024, 1792), 4-byte lanes to [1792, 2048); lanes
    ``l >= valid`` masked out), waits ``s_waitcnt vmcnt(vmcnt)``, then copies LDS bytes
    ``[read_from, read_from + read_bytes)`` (repeated) to D: thread ``t`` word ``e`` is LDS word
    ``read_from / 4 + (8t + e) % (read_bytes / 4)``."""
    @T.function
    def kernel(X: T.Tensor((512,), "int32"), D: T.Tensor((64, 8), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((512,), "int32", scope="shared", align=16)])
            T.rocm.buffer_load_lds(X.data, 2048, T.if_then_else(tx < valid, tx * 16, BUFFER_OOB), 0, S[0], 16)
            T.rocm.buffer_load_lds(X.data, 2048, T.if_then_else(tx < valid, tx * 12, BUFFER_OOB), 1024, S[256], 12)
            T.rocm.buffer_load_lds(X.data, 2048, T.if_then_else(tx < valid, tx * 4, BUFFER_OOB), 1792, S[448], 4)
            T.rocm.s_waitcnt_vmcnt(vmcnt)
            for e in T.unroll(8):
                D[tx, e] = S[read_from // 4 + (tx * 8 + e) % (read_bytes // 4)]

    return kernel


def dma_pipeline(tiles: int = 4, waves: int = 2, vmcnt: int = 1, barrier_after_reads: bool = True):
    """A double-buffered loop: while the workgroup sums LDS tile ``k`` (every thread the 16 bytes that
    a lane of the *next* wave loaded), the direct-to-LDS loads of tile ``k + 1`` fill the other buffer.
    Wave ``w`` loads block ``w`` of each tile of X (``64 * waves`` lanes x 16 bytes per tile). Tile ``k``
    is complete at ``s_waitcnt vmcnt(vmcnt)`` (1: all but the newest load, tile ``k + 1``), published by
    the barrier after it; the barrier after the reads keeps the next loads from overwriting them."""
    lanes = 64 * waves
    words = lanes * 4

    @T.function
    def kernel(X: T.Tensor((tiles * words,), "int32"), D: T.Tensor((lanes, 4), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", lanes)
            S = T.alloc_tensor(ty_args=[T.Tensor((2 * words,), "int32", scope="shared", align=16)])
            acc = T.alloc_tensor(ty_args=[T.Tensor((4,), "int32", scope="local")])
            for e in T.unroll(4):
                acc[e] = 0
            T.rocm.buffer_load_lds(X.data, tiles * words * 4, tx * 16, 0, S[tx // 64 * 256], 16)
            for k in T.serial(tiles - 1):
                T.rocm.buffer_load_lds(X.data, tiles * words * 4, tx * 16, (k + 1) * words * 4,
                                       S[(k + 1) % 2 * words + tx // 64 * 256], 16)
                T.rocm.s_waitcnt_vmcnt(vmcnt)
                T.rocm.workgroup_barrier()
                for e in T.unroll(4):
                    acc[e] = acc[e] + S[k % 2 * words + (tx + 64) % lanes * 4 + e]
                if barrier_after_reads:
                    T.rocm.workgroup_barrier()
            T.rocm.s_waitcnt_vmcnt(0)
            T.rocm.workgroup_barrier()
            for e in T.unroll(4):
                D[tx, e] = acc[e] + S[(tiles - 1) % 2 * words + (tx + 64) % lanes * 4 + e]

    return kernel


def dma_soffset(by: str = "wave_id"):
    """Wave ``w`` of 4 loads the 1024-byte blocks ``4w .. 4w + 3`` of X straight into the same LDS
    blocks, the block's byte offset in ``soffset`` written ``by`` ``"tx"`` (``tx // 64 * ...``: uniform,
    but LLVM cannot prove it), ``"wave_id"`` (``T.rocm.wave_id()``), or in ``voffset`` (``"voffset"``,
    soffset 0); then waits, barriers and copies the LDS to D."""
    by_tx, by_wave = by == "tx", by == "wave_id"

    @T.function
    def kernel(X: T.Tensor((4096,), "int32"), D: T.Tensor((256, 16), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 256)
            S = T.alloc_tensor(ty_args=[T.Tensor((4096,), "int32", scope="shared", align=16)])
            lane = tx % 64
            for j in T.unroll(4):
                if by_tx:
                    T.rocm.buffer_load_lds(X.data, 16384, lane * 16, (tx // 64 * 4 + j) * 1024,
                                           S[(tx // 64 * 4 + j) * 256], 16)
                elif by_wave:
                    T.rocm.buffer_load_lds(X.data, 16384, lane * 16, (T.rocm.wave_id() * 4 + j) * 1024,
                                           S[(tx // 64 * 4 + j) * 256], 16)
                else:
                    T.rocm.buffer_load_lds(X.data, 16384, (tx // 64 * 4 + j) * 1024 + lane * 16, 0,
                                           S[(tx // 64 * 4 + j) * 256], 16)
            T.rocm.s_waitcnt_vmcnt(0)
            T.rocm.workgroup_barrier()
            for e in T.unroll(16):
                D[tx, e] = S[tx * 16 + e]

    return kernel


def dma_unpublished():
    """A direct-to-LDS load, a workgroup barrier, then LDS reads, with no ``s_waitcnt vmcnt`` between:
    the reads' index depends on a kernel argument, so ``rocm.lds_sync`` cannot decide it (a WARNING,
    left to the emulator), and LLVM waits for no async direct-to-LDS load (``rocm.waitcheck`` refuses
    the code)."""
    @T.function
    def kernel(X: T.Tensor((256,), "int32"), D: T.Tensor((64, 4), "int32"), shift: T.int32):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((256,), "int32", scope="shared", align=16)])
            T.rocm.buffer_load_lds(X.data, 1024, tx * 16, 0, S[0], 16)
            T.rocm.workgroup_barrier()
            for e in T.unroll(4):
                D[tx, e] = S[(tx * 4 + e + shift) % 256]

    return kernel
