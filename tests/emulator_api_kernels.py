"""Small kernels for the emulator's argument checks, math calls and global-store checks (issue 35;
TVMScript must live in a .py file)."""

from tvm_tirx import tirx
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T


def scaled_copy():
    """Out[t] = A[t] * n for 64 threads; ``n`` an int32 scalar parameter."""
    @T.function
    def kernel(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32"), n: T.int32):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            Out[tx] = A[tx] * T.Cast("float32", n)

    return kernel


def gather_offsets():
    """Out[t] = offsets[t % 4] (an int32 tensor, like a grouped GEMM's group offsets)."""
    @T.function
    def kernel(offsets: T.Tensor((4,), "int32"), Out: T.Tensor((64,), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            Out[tx] = offsets[tx % 4]

    return kernel


def dynamic_rows():
    """Out[r, :] = A[r, :] + 1 for a symbolic row count M (one workgroup of 64 threads per 64 rows)."""
    M = tirx.Var("M", "int32")

    @T.function
    def kernel(A: T.Tensor((M, 4), "float32"), Out: T.Tensor((M, 4), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", (M + 63) // 64)
            tx = T.launch_thread("threadIdx.x", 64)
            if bx * 64 + tx < M:
                for c in T.unroll(4):
                    Out[bx * 64 + tx, c] = A[bx * 64 + tx, c] + T.float32(1)

    return kernel


def math_call(name: str, args: int = 1, dtype: str = "float32"):
    """C[t] = T.<name>(A[t]) (``args`` 2: T.<name>(A[t], B[t])) for 64 threads."""
    op = getattr(T, name)
    if args == 1:
        @T.function
        def unary(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype), C: T.Tensor((64,), dtype)):
            with T.device_entry():
                bx = T.launch_thread("blockIdx.x", 1)
                tx = T.launch_thread("threadIdx.x", 64)
                C[tx] = op(A[tx])

        return unary

    @T.function
    def binary(A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype), C: T.Tensor((64,), dtype)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            C[tx] = op(A[tx], B[tx])

    return binary


def extern_call(symbol: str = "my_device_function"):
    """C[t] = symbol(A[t]), an extern function the emulator does not know."""
    @T.function
    def kernel(A: T.Tensor((64,), "float32"), C: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            C[tx] = T.call_pure_extern(symbol, A[tx], ty="float32")

    return kernel


def workgroup_stores(groups: int = 2, overlap: bool = True, lanes: int = 64):
    """Each of ``groups`` workgroups of 64 threads stores Out[t] (``overlap``: the same elements, a race)
    or Out[64 g + t]; only the first ``lanes`` lanes store."""
    @T.function
    def kernel(Out: T.Tensor((64 * groups,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 64)
            if tx < lanes:
                if I.constexpr(overlap):
                    Out[tx] = T.Cast("float32", bx)
                else:
                    Out[bx * 64 + tx] = T.Cast("float32", bx)

    return kernel


def ordered_overwrite(groups: int = 2, fences: bool = True):
    """Workgroup g stores Out[t], releases, draws a ticket; the workgroup with the last ticket acquires
    and stores Out[t] again: ordered by the release/acquire pair (without ``fences``: a race)."""
    @T.function
    def kernel(Out: T.Tensor((64,), "float32"), S: T.Tensor((1,), "uint32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 64)
            ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared")])
            if bx == 0:
                Out[tx] = T.float32(1)
            if I.constexpr(fences):
                T.rocm.fence_release()
            T.rocm.workgroup_barrier()
            if tx == 0:
                ticket[0] = T.rocm.global_atomic_add_u32(S, 0, T.uint32(1))
            T.rocm.workgroup_barrier()
            if ticket[0] == T.uint32(groups - 1):
                if I.constexpr(fences):
                    T.rocm.fence_acquire()
                Out[tx] = T.float32(2)

    return kernel


def wide_stores(groups: int, reps: int, atomic: bool = False):
    """``groups`` workgroups of 256 threads; thread t of workgroup g writes elements
    ``(g * reps + i) * 1024 + 4 t .. + 3`` of an f32 output for i < reps (plain stores of 4 f32, or
    ``atomic``: an f32 atomic add to the first, and a release): a large output written fast."""
    n = groups * reps * 1024

    @T.function
    def kernel(Out: T.Tensor((n,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 256)
            for i in T.serial(reps):
                if I.constexpr(atomic):
                    T.rocm.global_atomic_add_f32(Out, (bx * reps + i) * 1024 + tx * 4, T.float32(1))
                    T.rocm.fence_release()
                else:
                    for e in T.vectorized(4):
                        Out[(bx * reps + i) * 1024 + tx * 4 + e] = T.float32(1)

    return kernel


def sm80_wide_stores(groups: int, reps: int):
    """The sm80 twin of ``wide_stores`` (plain ``st.global.v4.f32``)."""
    n = groups * reps * 1024

    @T.function
    def kernel(Out: T.Tensor((n,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=groups, block=256))
        tx = T.cuda.thread_idx("x")
        bx = T.cuda.block_idx("x")
        for i in T.serial(reps):
            T.ptx["st.global.v4.f32"](Out.ptr_to([(bx * reps + i) * 1024 + tx * 4]), T.float32(1), T.float32(1),
                                      T.float32(1), T.float32(1))

    return kernel
