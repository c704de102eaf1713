"""Kernels for the whole-kernel analyses (tests/rocm/test_analysis.py, tests/rocm/test_tirx_route.py).

Each kernel applies one 16x16x32 f16 MFMA per wave (``scope="wave"``) under a different kind of
control; ``threads`` threads in one workgroup. TVMScript is parsed from source, hence one function
per shape of control.
"""

from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG
from tvm_cdna4.patterns.layouts import mfma_fragment

OP = CATALOG["mfma_f32_16x16x32_f16"]
LA, _ = mfma_fragment(OP, "A", (1, 1))
LD, _ = mfma_fragment(OP, "D", (1, 1))


# ---- lane-varying control: refused ------------------------------------------------------------

def let_bound_condition(threads=64):
    """``half = tx < 32`` then ``if half:`` (the printed script no longer names tx in the if)."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            half = tx < 32
            if half:
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def buffer_condition(threads=64):
    """The lane parity goes through a register buffer, then the branch reads the buffer."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            flag = T.alloc_tensor(ty_args=[T.Tensor((1,), "int32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            flag[0] = tx % 2
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            if flag[0] == 0:
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def shared_buffer_condition(threads=64):
    """Each lane writes its index to LDS through a view; the branch reads the view's storage back."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            S = T.alloc_tensor(ty_args=[T.Tensor((threads,), "int32", scope="shared", align=16)])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            S[tx] = tx
            T.rocm.workgroup_barrier()
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            if S[5] < 3:
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def nested_loop_bound(threads=64):
    """A uniform branch around a loop whose trip count depends on the lane."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32"), n: T.int32):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            if n > 0:
                for i in T.serial(tx % 4):
                    T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def nested_loop_variable(threads=64):
    """A uniform loop, then a branch comparing its variable with a value carried by a let."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            quarter = tx // 16
            for i in T.serial(4):
                if bx == 0:
                    if i == quarter:
                        T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


# ---- wave-uniform control: accepted -----------------------------------------------------------

def wave_id_branch(threads=128):
    """Only wave 0 (``T.rocm.wave_id() == 0``) multiplies."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            wave = T.rocm.wave_id()
            if wave == 0:
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def thread_index_over_64_branch(threads=256):
    """Waves 1 and 3 (``tx // 64`` odd, written once with a shift) multiply."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            if tx // 64 % 2 == 1:
                if (tx >> 6) < 4:
                    T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def kernel_argument_branch(threads=64):
    """When ``n`` (a kernel argument) is positive, a loop of ``n`` iterations accumulates
    ``D += A @ A`` on its odd iterations (a uniform loop variable)."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32"), n: T.int32):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            if n > 0:
                for i in T.serial(n):
                    if i % 2 == 1:
                        T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, Df, scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def boolean_and_branch(threads=128):
    """Wave 1 multiplies, if there is one: ``if (tx // 64 == 1) & (threads > 64):``, a boolean ``&``
    whose right side Python folds to a constant (``cond & True``: not the integer ``x & 1``)."""

    @T.function
    def kernel(D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = T.float16(1)
            for r in T.unroll(4):
                rd[r] = T.float32(0)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=LA)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=LD)])
            if (tx // 64 == 1) & (threads > 64):
                T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="wave")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


# ---- workgroup scope: waves against the wave axis ---------------------------------------------

def workgroup_waves(threads: int, axis: int):
    """``scope="workgroup"`` over operands with a leading wave axis of ``axis``, launched with
    ``threads`` threads."""
    la, _ = mfma_fragment(OP, "A", (1, 1), waves=axis)
    ld, _ = mfma_fragment(OP, "D", (1, 1), waves=axis)

    @T.function
    def kernel(A: T.Tensor((threads, 8), "float16"), D: T.Tensor((threads, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((8,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            for r in T.unroll(8):
                ra[r] = A[tx, r]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((axis, 1, 1, 16, 32), "float16", scope="local", layout=la)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((axis, 1, 1, 16, 16), "float32", scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn["mfma_f32_16x16x32_f16"], Df, Af, Af, T.float32(0), scope="workgroup")
            for r in T.unroll(4):
                D[tx, r] = rd[r]

    return kernel


def plain_copy(threads=64):
    """No CDNA4 instruction at all: a kernel this package does not own."""

    @T.function
    def kernel(A: T.Tensor((threads,), "float32"), B: T.Tensor((threads,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            B[tx] = A[tx] + T.float32(1)

    return kernel
