"""gfx950 kernels for the global atomic tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import tirx as T


def atomic_sum(groups: int = 2, bins: int = 8, store_after: bool = False):
    """Every thread of ``groups`` workgroups of 128 adds X[t] to C[t % bins] atomically
    (``store_after``: then thread 0 of each workgroup stores C[0] plainly: a race)."""
    n = groups * 128

    @T.function
    def kernel(X: T.Tensor((n,), "float32"), C: T.Tensor((bins,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 128)
            T.rocm.global_atomic_add_f32(C, (bx * 128 + tx) % bins, X[bx * 128 + tx])
            if store_after and tx == 0:
                C[0] = T.float32(1)

    return kernel


def store_then_atomic():
    """Workgroup 0 stores C[3]; every workgroup adds to C[3]: a race whichever comes first."""
    @T.function
    def kernel(C: T.Tensor((8,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 2)
            tx = T.launch_thread("threadIdx.x", 64)
            if bx == 0 and tx == 0:
                C[3] = T.float32(5)
            T.rocm.global_atomic_add_f32(C, 3, T.float32(1))

    return kernel


def atomic_on(dtype: str = "float16", scope: str = "global", value_dtype: str = "float32"):
    """An atomic add into a ``dtype`` tensor (in LDS when ``scope`` is shared), of a ``value_dtype`` value."""
    if scope == "shared":
        @T.function
        def lds(C: T.Tensor((64,), dtype)):
            with T.device_entry():
                bx = T.launch_thread("blockIdx.x", 1)
                tx = T.launch_thread("threadIdx.x", 64)
                S = T.alloc_tensor(ty_args=[T.Tensor((64,), dtype, scope="shared")])
                T.rocm.global_atomic_add_f32(S, tx, T.cast(1, value_dtype))
        return lds

    @T.function
    def kernel(C: T.Tensor((64,), dtype)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            T.rocm.global_atomic_add_f32(C, tx, T.cast(1, value_dtype))

    return kernel


def slice_reduce(groups: int = 3, release: bool = True, acquire: bool = True):
    """The deterministic variant: workgroup g stores X[g, t] into its slice W[g, t] (plain stores),
    releases, draws a ticket; the last acquires and adds the slices in index order into Y."""
    @T.function
    def kernel(X: T.Tensor((groups * 64,), "float32"), W: T.Tensor((groups * 64,), "float32"),
               S: T.Tensor((1,), "uint32"), Y: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 64)
            ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared")])
            acc = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local")])
            W[bx * 64 + tx] = X[bx * 64 + tx]
            if release:
                T.rocm.fence_release()
            T.rocm.workgroup_barrier()
            if tx == 0:
                ticket[0] = T.rocm.global_atomic_add_u32(S, 0, T.uint32(1))
            T.rocm.workgroup_barrier()
            if ticket[0] == T.uint32(groups - 1):
                if acquire:
                    T.rocm.fence_acquire()
                acc[0] = W[tx]
                for g in T.unroll(1, groups):
                    acc[0] = acc[0] + W[g * 64 + tx]
                Y[tx] = acc[0]
                if tx == 0:
                    S[0] = T.uint32(0)

    return kernel


def ticket_reduce(groups: int = 3, release: bool = True, acquire: bool = True):
    """The split-K publication pattern on a small scale: every thread of ``groups`` workgroups of 64
    adds X[g, t] into the f32 workspace W[t] atomically, releases (``release``), the workgroup
    synchronises, thread 0 draws a ticket from S[0] into LDS; the workgroup that draws
    ``groups - 1`` acquires (``acquire``), copies W into Y, zeroes W and resets S[0]."""
    @T.function
    def kernel(X: T.Tensor((groups * 64,), "float32"), W: T.Tensor((64,), "float32"), S: T.Tensor((1,), "uint32"),
               Y: T.Tensor((64,), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 64)
            ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared")])
            T.rocm.global_atomic_add_f32(W, tx, X[bx * 64 + tx])
            if release:
                T.rocm.fence_release()
            T.rocm.workgroup_barrier()
            if tx == 0:
                ticket[0] = T.rocm.global_atomic_add_u32(S, 0, T.uint32(1))
            T.rocm.workgroup_barrier()
            if ticket[0] == T.uint32(groups - 1):
                if acquire:
                    T.rocm.fence_acquire()
                Y[tx] = W[tx]
                W[tx] = T.float32(0)
                if tx == 0:
                    S[0] = T.uint32(0)

    return kernel


def ticket_on(dtype: str):
    """A ticket drawn from a ``dtype`` counter."""
    @T.function
    def kernel(S: T.Tensor((1,), dtype), Y: T.Tensor((64,), "uint32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            Y[tx] = T.rocm.global_atomic_add_u32(S, 0, T.uint32(1))

    return kernel
