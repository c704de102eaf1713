"""Hand-written gfx950 kernels for tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG
from tvm_cdna4.patterns.layouts import mfma_fragment

OP = CATALOG["f32_16x16x32_f16"]


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
                T.rocm.tile.apply(T.amdgcn["f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
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
            T.rocm.tile.apply(T.amdgcn["f32_16x16x32_f16"], Df, Af, Af, scope="wave")
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
            T.rocm.tile.apply(T.amdgcn["f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="workgroup")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def tr_operand_then_mfma(tr_name="ds_read_tr16_b64_v4f16", mfma_name="f32_32x32x16_f16", dtype="float16"):
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
