"""Hand-written gfx950 kernels for tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG
from tvm_cdna4.patterns.layouts import mfma_fragment

OP = CATALOG["mfma_f32_16x16x32_f16"]


def divergent_mfma():
    """An MFMA under `if tx < 32`: half the wave would skip a wave-collective instruction."""
    la, _ = mfma_fragment(OP, "A", (1, 1))
    ld, _ = mfma_fragment(OP, "D", (1, 1))

    @T.function
    def kernel(D: T.Tensor((64, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=la)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            if tx < 32:
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def three_operand_mfma():
    la, _ = mfma_fragment(OP, "A", (1, 1))
    ld, _ = mfma_fragment(OP, "D", (1, 1))

    @T.function
    def kernel(D: T.Tensor((64, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=la)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def lds_view_read():
    """Reads LDS through a rearranged view: TIRx's rocm codegen turns it into a global pointer."""

    @T.function
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((8, 8), "float32", scope="shared", align=16)])
            S[tx // 8, tx % 8] = A[tx]
            T.rocm.workgroup_barrier()
            V = S.rearrange("a b -> b a")
            B[tx] = V[tx % 8, tx // 8]

    return kernel


def workgroup_mfma(wave_axis_in_registers=False):
    """4 waves, scope='workgroup': operands carry a leading wave axis; wave w computes slice w.
    With ``wave_axis_in_registers`` the A layout wrongly puts that axis in registers."""
    la, na = mfma_fragment(OP, "A", (4, 1, 1) if wave_axis_in_registers else (1, 1), waves=0 if wave_axis_in_registers else 4)
    ld, nd = mfma_fragment(OP, "D", (1, 1), waves=4)

    @T.function
    def kernel(A: T.Tensor((256, 8), "float16"), D: T.Tensor((256, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 256)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = A[tx, r]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((4, 1, 1, 16, 32), "float16", scope="local", layout=la)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((4, 1, 1, 16, 16), "float32", scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="workgroup")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def tr_operand_then_mfma(tr_name="ds_read_tr16_b64_v4f16", mfma_name="mfma_f32_32x32x16_f16", dtype="float16"):
    """B (K x N, row-major in LDS) -> MFMA B fragment by the ds_read_tr operand form, then an MFMA."""
    mfma = CATALOG[mfma_name]
    lb, nb = mfma_fragment(mfma, "B", (1, 1))
    lb1, _ = mfma_fragment(mfma, "B")
    ld, nd = mfma_fragment(mfma, "D", (1, 1))
    K, N = mfma.k, mfma.n

    @T.function
    def kernel(B: T.Tensor((K, N), dtype), D: T.Tensor((64, nd), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            SB = T.alloc_tensor(ty_args=[T.Tensor((K, N), dtype, scope="shared", align=16, layout=T.TileLayout(T.S[(K, N) : (N, 1)]))])
            for q in T.serial(K * N // 64):
                SB[(q * 64 + tx) // N, (q * 64 + tx) % N] = B[(q * 64 + tx) // N, (q * 64 + tx) % N]
            T.rocm.workgroup_barrier()
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), dtype, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            Bf1 = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((N, K), dtype, scope="local", layout=lb1)])
            T.rocm.tile.apply(T.amdgcn[tr_name], Bf1, SB, scope="wave", mfma=mfma_name, operand="B")
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, N, K), dtype, scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, mfma.m, N), "float32", scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[mfma_name], Df, Bf, Bf, T.float32(0), scope="wave")
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


# ---- seeded bugs for the emulator ------------------------------------------------------------

def lds_exchange(barrier=True, offset=0, threads=128, skip_barrier_in_wave1=False):
    """Each thread writes LDS[tx]; after the barrier it reads LDS[(tx + 64 + offset) % n] (another wave's)."""
    n = threads

    @T.function
    def kernel(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", n)
            S = T.alloc_tensor(ty_args=[T.Tensor((n,), "float32", scope="shared", align=16)])
            S[tx] = A[tx]
            if barrier:
                if skip_barrier_in_wave1:
                    if tx < 64:
                        T.rocm.workgroup_barrier()
                else:
                    T.rocm.workgroup_barrier()
            B[tx] = S[(tx + 64 + offset) % (n + offset)]

    return kernel


def raw_mfma(transpose_a=False, half_wave=False):
    """16x16x32 f16 MFMA through the raw intrinsic (no pattern checks). A is read row-major
    A[lane % 16, 8 * (lane // 16) + e] unless ``transpose_a`` (a wrong lane map)."""

    @T.function
    def kernel(A: T.Tensor((16, 32), "float16"), B: T.Tensor((32, 16), "float16"), D: T.Tensor((16, 16), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for e in T.unroll(8):
                if transpose_a:
                    ra[e] = A[(8 * (tx // 16) + e) % 16, tx % 16 + 16 * ((8 * (tx // 16) + e) // 16)]
                else:
                    ra[e] = A[tx % 16, 8 * (tx // 16) + e]
                rb[e] = B[8 * (tx // 16) + e, tx % 16]
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            if half_wave:
                if tx < 32:
                    rd[T.ramp(0, 1, 4)] = T.call_llvm_pure_intrin("llvm.amdgcn.mfma.f32.16x16x32.f16", ra[T.ramp(0, 1, 8)], rb[T.ramp(0, 1, 8)], rd[T.ramp(0, 1, 4)], T.int32(0), T.int32(0), T.int32(0), ty="float32x4")
            else:
                rd[T.ramp(0, 1, 4)] = T.call_llvm_pure_intrin("llvm.amdgcn.mfma.f32.16x16x32.f16", ra[T.ramp(0, 1, 8)], rb[T.ramp(0, 1, 8)], rd[T.ramp(0, 1, 4)], T.int32(0), T.int32(0), T.int32(0), ty="float32x4")
            for r in T.unroll(4):
                D[4 * (tx // 16) + r, tx % 16] = rd[r]

    return kernel


def raw_ds_read_tr(byte_offset=0):
    """ds_read_tr16 of a 4x16 f16 tile per lane group, the address shifted by ``byte_offset`` bytes."""

    @T.function
    def kernel(A: T.Tensor((256,), "float16"), D: T.Tensor((64, 4), "float16")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((260,), "float16", scope="shared", align=16)])
            for q in T.unroll(4):
                S[q * 64 + tx] = A[q * 64 + tx]
            S[256 + tx % 4] = T.float16(0)
            T.rocm.workgroup_barrier()
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float16", scope="local")])
            rd[T.ramp(0, 1, 4)] = T.call_llvm_intrin("llvm.amdgcn.ds.read.tr16.b64.v4f16", T.address_of(S[64 * (tx // 16) + 16 * (tx % 16 // 4) + 4 * (tx % 4) + byte_offset // 2]), ty="float16x4")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def uninitialized_lds():
    """Reads LDS that nothing wrote."""

    @T.function
    def kernel(B: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            S[tx] = T.float32(1)
            T.rocm.workgroup_barrier()
            B[tx] = S[tx + 64]

    return kernel


def buffer_load_rows(n: int, valid_rows: int, soffset: int, voffset_step: int = 16):
    """Lane ``t`` buffer-loads 16 bytes of X (``n`` float32) at ``t * voffset_step + soffset``;
    lanes ``t >= valid_rows`` pass the out-of-range offset and must read zeros."""
    from tvm_cdna4.patterns.wave import BUFFER_OOB

    @T.function
    def kernel(X: T.Tensor((n,), "float32"), D: T.Tensor((64, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            r = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            r[T.ramp(0, 1, 4)] = T.rocm.buffer_load(X.data, n * 4, T.if_then_else(tx < valid_rows, tx * voffset_step, BUFFER_OOB),
                                                    soffset, "float32x4")
            for e in T.unroll(4):
                D[tx, e] = r[e]

    return kernel


def lds_exchange_s_barrier(wait=None, wait_after_barrier=False):
    """``lds_exchange`` synchronized by a bare ``T.rocm.s_barrier()``, with ``s_waitcnt
    lgkmcnt(wait)`` before it (after it with ``wait_after_barrier``; none when ``wait`` is None)."""
    before, after, n = wait is not None and not wait_after_barrier, wait is not None and wait_after_barrier, wait or 0

    @T.function
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            S = T.alloc_tensor(ty_args=[T.Tensor((128,), "float32", scope="shared", align=16)])
            S[tx] = A[tx]
            if before:
                T.rocm.s_waitcnt_lgkmcnt(n)
            T.rocm.s_barrier()
            if after:
                T.rocm.s_waitcnt_lgkmcnt(n)
            B[tx] = S[(tx + 64) % 128]

    return kernel


def widen_bf16():
    """B[i] = float32(A[i]) for a bfloat16 parameter A."""

    @T.function
    def kernel(A: T.Tensor((64,), "bfloat16"), B: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            B[tx] = T.Cast("float32", A[tx])

    return kernel


def global_off_by_one():
    """B[tx + 1] = A[tx]: the last thread writes one element past B."""

    @T.function
    def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            B[tx + 1] = A[tx]

    return kernel


def natural_exp(n: int = 64):
    """``Y = e^X`` as docs/emulator.md ("Exponentials (gfx950)") writes it: the hardware exponential
    ``llvm.amdgcn.exp2`` (``v_exp_f32``) of ``x * log2(e)``."""
    @T.function
    def kernel(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", n)
            Y[tx] = T.call_llvm_pure_intrin("llvm.amdgcn.exp2", X[tx] * T.float32(1.4426950408889634), ty="float32")

    return kernel
