"""gfx950 kernels for the compile-time LDS synchronization check (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG, lanes
from tvm_cdna4.patterns.layouts import mfma_fragment

OP = CATALOG["mfma_f32_16x16x32_f16"]


def double_buffered_gemm(k_tiles: int = 4, prologue_barrier: bool = True, step_barrier: bool = True,
                         stages: int = 2):
    """D (64 x 16) = A (64 x K) @ B (K x 16), K = 32 * ``k_tiles``, by 4 waves (wave w: rows 16w ..
    16w + 15) over ``stages`` LDS stages (2: double, 3: triple buffering). The prologue stores K tile
    0 (``stages - 1`` tiles), a barrier (``prologue_barrier``); K step ``kt`` stores tile
    ``kt + stages - 1`` into the stage that step ``kt - 1`` read, reads the fragments of tile ``kt``,
    runs the MFMA, then a barrier (``step_barrier``). Every wave stores a column block of every row of
    A's tile and two elements of B's, so every wave reads what other waves stored."""
    la, _ = mfma_fragment(OP, "A", (1, 1))
    lb, _ = mfma_fragment(OP, "B", (1, 1))
    ld, _ = mfma_fragment(OP, "D", (1, 1))
    a_row, a_k = (lambda lane: lanes.a_owner(OP, lane, 0).row), (lambda lane: lanes.a_owner(OP, lane, 0).k)
    b_col, b_k = (lambda lane: lanes.b_owner(OP, lane, 0).col), (lambda lane: lanes.b_owner(OP, lane, 0).k)
    acc_row, acc_col = (lambda lane, r: lanes.acc_owner(OP, lane, r).row), (lambda lane, r: lanes.acc_owner(OP, lane, r).col)
    K, SA_N, SB_N = 32 * k_tiles, 64 * 32, 32 * 16

    @T.macro
    def store(SA, SB, A, B, tx, kt):
        for e in T.unroll(8):
            SA[kt % stages * SA_N + tx % 64 * 32 + tx // 64 * 8 + e] = A[tx % 64, kt * 32 + tx // 64 * 8 + e]
        for e in T.unroll(2):
            SB[kt % stages * SB_N + tx * 2 + e] = B[kt * 32 + (tx * 2 + e) // 16, (tx * 2 + e) % 16]

    @T.function
    def kernel(A: T.Tensor((64, K), "float16"), B: T.Tensor((K, 16), "float16"), D: T.Tensor((64, 16), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 256)
            SA = T.alloc_tensor(ty_args=[T.Tensor((stages * SA_N,), "float16", scope="shared", align=16)])
            SB = T.alloc_tensor(ty_args=[T.Tensor((stages * SB_N,), "float16", scope="shared", align=16)])
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            lane = tx % 64
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            for p in T.unroll(stages - 1):
                store(SA, SB, A, B, tx, p)
            if prologue_barrier:
                T.rocm.workgroup_barrier()
            for kt in T.serial(k_tiles):
                if kt + stages - 1 < k_tiles:
                    store(SA, SB, A, B, tx, kt + stages - 1)
                for e in T.unroll(8):
                    ra[e] = SA[kt % stages * SA_N + (tx // 64 * 16 + a_row(lane)) * 32 + a_k(lane) + e]
                    rb[e] = SB[kt % stages * SB_N + (b_k(lane) + e) * 16 + b_col(lane)]
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Bf, Df, scope="wave")
                if step_barrier:
                    T.rocm.workgroup_barrier()
            for r in T.unroll(4):
                D[tx // 64 * 16 + acc_row(lane, r), acc_col(lane, r)] = rd[r]

    return kernel


def undecidable_index():
    """An LDS index read from memory: the check cannot evaluate it and leaves the kernel to the emulator."""

    @T.function
    def kernel(A: T.Tensor((128,), "float32"), P: T.Tensor((128,), "int32"), B: T.Tensor((128,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            S[P[tx]] = A[tx]
            B[tx] = S[(tx + 64) % 128]

    return kernel
