"""Kernels of tests/patterns/test_wgmma_check.py: the accumulator-wait rule around control flow (an if after
a wait, a break before one, a view made through a pointer variable)."""

from tvm_tirx.script import tirx as T

from tvm_cdna4.probes_wgmma import acc_layout, shared_layout

n, k, kr = 16, 16, 1
bsh = shared_layout(n, k, kr, 16, 0)
ash = shared_layout(64, k, kr, 16, 0)
FORM = "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"
W = "wgmma.wait_group.sync.aligned"
@T.function
def k_break(D: T.Tensor((64, n), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    t = T.cuda.thread_in_warpgroup()
    SB = T.alloc_tensor(ty_args=[T.Tensor((1, kr, n, k), "bfloat16", scope="shared", layout=bsh, align=1024)])
    SA = T.alloc_tensor(ty_args=[T.Tensor((1, kr, 64, k), "bfloat16", scope="shared", layout=ash, align=1024)])
    acc_raw = T.alloc_tensor(ty_args=[T.Tensor((n // 2,), "float32", scope="local", layout="default")])
    Dr = T.decl_tensor(acc_raw.ptr_to([0]), ty_args=[T.Tensor((1, 1, 64, n), "float32", scope="local", layout=acc_layout(n))])
    for i in range(4):
        T.sm90.tile.apply(T.wgmma[FORM], Dr, SA, SB, scope="warpgroup", scale_d=False)
        if i == 2:
            break
        T.ptx[W](0)
    D[t // 2, 0] = acc_raw[0]

@T.function
def k_ptr(D: T.Tensor((64, n), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    t = T.cuda.thread_in_warpgroup()
    SB = T.alloc_tensor(ty_args=[T.Tensor((1, kr, n, k), "bfloat16", scope="shared", layout=bsh, align=1024)])
    SA = T.alloc_tensor(ty_args=[T.Tensor((1, kr, 64, k), "bfloat16", scope="shared", layout=ash, align=1024)])
    acc_raw = T.alloc_tensor(ty_args=[T.Tensor((n // 2,), "float32", scope="local", layout="default")])
    p = acc_raw.ptr_to([0])
    Dr = T.decl_tensor(p, ty_args=[T.Tensor((1, 1, 64, n), "float32", scope="local", layout=acc_layout(n))])
    V = T.decl_tensor(p, ty_args=[T.Tensor((n // 2,), "float32", scope="local", layout="default")])
    T.sm90.tile.apply(T.wgmma[FORM], Dr, SA, SB, scope="warpgroup", scale_d=False)
    D[t // 2, 0] = V[0]
    T.ptx[W](0)

@T.function
def k_ok_ctrl(D: T.Tensor((64, n), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    t = T.cuda.thread_in_warpgroup()
    SB = T.alloc_tensor(ty_args=[T.Tensor((1, kr, n, k), "bfloat16", scope="shared", layout=bsh, align=1024)])
    SA = T.alloc_tensor(ty_args=[T.Tensor((1, kr, 64, k), "bfloat16", scope="shared", layout=ash, align=1024)])
    acc_raw = T.alloc_tensor(ty_args=[T.Tensor((n // 2,), "float32", scope="local", layout="default")])
    Dr = T.decl_tensor(acc_raw.ptr_to([0]), ty_args=[T.Tensor((1, 1, 64, n), "float32", scope="local", layout=acc_layout(n))])
    T.sm90.tile.apply(T.wgmma[FORM], Dr, SA, SB, scope="warpgroup", scale_d=False)
    D[t // 2, 0] = acc_raw[0]
    T.ptx[W](0)

@T.function
def k_if_ok(D: T.Tensor((64, n), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    t = T.cuda.thread_in_warpgroup()
    SB = T.alloc_tensor(ty_args=[T.Tensor((1, kr, n, k), "bfloat16", scope="shared", layout=bsh, align=1024)])
    SA = T.alloc_tensor(ty_args=[T.Tensor((1, kr, 64, k), "bfloat16", scope="shared", layout=ash, align=1024)])
    acc_raw = T.alloc_tensor(ty_args=[T.Tensor((n // 2,), "float32", scope="local", layout="default")])
    Dr = T.decl_tensor(acc_raw.ptr_to([0]), ty_args=[T.Tensor((1, 1, 64, n), "float32", scope="local", layout=acc_layout(n))])
    T.sm90.tile.apply(T.wgmma[FORM], Dr, SA, SB, scope="warpgroup", scale_d=False, wait=0)
    if t < 64:
        D[t, 0] = acc_raw[0]


bsh128 = shared_layout(n, 64, 1, 16, 128)
ash128 = shared_layout(72, 64, 1, 16, 128)


def sliced_a(first_row: int):
    """A 128-byte-swizzled A operand sliced from row ``first_row`` of a 72-row tile (row 4: 512 bytes into a
    1024-byte swizzle period; row 8: a whole period in)."""

    @T.function
    def kb(D: T.Tensor((64, n), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        t = T.cuda.thread_in_warpgroup()
        SB = T.alloc_tensor(ty_args=[T.Tensor((1, 1, n, 64), "bfloat16", scope="shared", layout=bsh128, align=1024)])
        SA = T.alloc_tensor(ty_args=[T.Tensor((1, 1, 72, 64), "bfloat16", scope="shared", layout=ash128, align=1024)])
        acc_raw = T.alloc_tensor(ty_args=[T.Tensor((n // 2,), "float32", scope="local", layout="default")])
        Dr = T.decl_tensor(acc_raw.ptr_to([0]), ty_args=[T.Tensor((1, 1, 64, n), "float32", scope="local",
                                                                    layout=acc_layout(n))])
        T.sm90.tile.apply(T.wgmma[FORM], Dr, SA[0:1, 0:1, first_row:first_row + 64, 0:16], SB[0:1, 0:1, 0:16, 0:16],
                          scope="warpgroup", scale_d=False, wait=0)
        D[t // 2, 0] = acc_raw[0]

    return kb
