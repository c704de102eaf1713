"""Kernels for the error and workgroup-scope tests (TVMScript must live in a .py file)."""

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from tvm_cdna4.isa import CATALOG, MfmaOp
from tvm_cdna4.patterns.layouts import mfma_fragment, tr_fragment
from tvm_cdna4.patterns.mfma import _atoms
from tvm_cdna4.probes import STORAGE


def workgroup_mfma_probe(op: MfmaOp, waves: int = 4, blgp: int = 0):
    """``waves`` waves each run ``op`` at scope="workgroup" on their own slice: ``X[64 w + lane, r]``
    is register ``r`` of ``lane`` in wave ``w`` (like ``probes.mfma_probe``, one wave per 64 rows)."""
    a_atom, b_atom, d_atom = _atoms(op)
    (la, na), (lb, nb), (ld, nd) = (mfma_fragment(op, k, (1, 1), waves=waves) for k in "ABD")
    at, bt, dt = STORAGE[op.a_format], STORAGE[op.b_format], STORAGE[op.acc_format]
    threads = 64 * waves

    @T.function
    def kernel(A: T.Tensor((threads, na), at), B: T.Tensor((threads, nb), bt), C: T.Tensor((threads, nd), dt),
               D: T.Tensor((threads, nd), dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), at, scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), bt, scope="local")])
            rc = T.alloc_tensor(ty_args=[T.Tensor((nd,), dt, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dt, scope="local")])
            for r in T.unroll(na):
                ra[r] = A[tx, r]
            for r in T.unroll(nb):
                rb[r] = B[tx, r]
            for r in T.unroll(nd):
                rc[r] = C[tx, r]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *a_atom), at, scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *b_atom), bt, scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *d_atom), dt, scope="local", layout=ld)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *d_atom), dt, scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[op.name], Df, Af, Bf, Cf, scope="workgroup", blgp=blgp)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def workgroup_scaled_probe(op: MfmaOp, waves: int = 4):
    """The scaled MFMA ``op`` (fp8 x fp8) at scope="workgroup": per wave like ``probes.mfma_probe``;
    the scale registers ``SA[64 w + lane]``, ``SB[...]`` are one register per lane."""
    a_atom, b_atom, d_atom = _atoms(op, "fp8", "fp8")
    s_atom = (op.m, op.k // 32)
    (la, na), (lb, nb), (ld, nd), (ls, _) = (mfma_fragment(op, k, (1, 1), waves=waves) for k in ("A", "B", "D", "scale_a"))
    threads = 64 * waves

    @T.function
    def kernel(A: T.Tensor((threads, na), "uint32"), B: T.Tensor((threads, nb), "uint32"),
               C: T.Tensor((threads, nd), "float32"), SA: T.Tensor((threads,), "uint32"),
               SB: T.Tensor((threads,), "uint32"), D: T.Tensor((threads, nd), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint32", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local")])
            rc = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            rs = T.alloc_tensor(ty_args=[T.Tensor((2,), "uint32", scope="local")])
            for r in T.unroll(na):
                ra[r] = A[tx, r]
            for r in T.unroll(nb):
                rb[r] = B[tx, r]
            for r in T.unroll(nd):
                rc[r] = C[tx, r]
            rs[0] = SA[tx]
            rs[1] = SB[tx]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *a_atom), "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *b_atom), "uint32", scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *d_atom), "float32", scope="local", layout=ld)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *d_atom), "float32", scope="local", layout=ld)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((waves, 1, 1, *s_atom), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([1]), ty_args=[T.Tensor((waves, 1, 1, *s_atom), "uint32", scope="local", layout=ls)])
            T.rocm.tile.apply(T.amdgcn[op.name], Df, Af, Bf, Cf, Sa, Sb, scope="workgroup")
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


OP = CATALOG["mfma_f32_16x16x32_f16"]
TR16 = CATALOG["ds_read_tr16_b64_v4f16"]
MALFORMED = ("scalar A", "scalar D", "five operands", "no operands", "global D", "repeat mismatch", "no layout", "tr scalar src",
             "tr global src", "tr one operand")


def malformed_apply(variant: str):
    """One wave applies ``mfma_f32_16x16x32_f16`` (or ``ds_read_tr16_b64_v4f16`` for the ``tr``
    variants) to a malformed operand list; ``variant`` is one of ``MALFORMED``."""
    la, _ = mfma_fragment(OP, "A", (1, 1))
    la2, _ = mfma_fragment(OP, "A", (1, 2))
    ld, _ = mfma_fragment(OP, "D", (1, 1))
    lt, _ = tr_fragment(TR16, (1,))
    mfma = T.amdgcn["mfma_f32_16x16x32_f16"]
    tr = T.amdgcn["ds_read_tr16_b64_v4f16"]
    # I.constexpr: TVMScript resolves the branch at parse time (a plain `if` would become IR)
    scalar_a, scalar_d, five, none, global_d, repeats, no_layout, tr_scalar, tr_global, tr_one = (
        variant == name for name in MALFORMED)

    @T.function
    def kernel(G: T.Tensor((1, 1, 16, 16), "float32"), S: T.Tensor((1, 4, 4, 16), "float16")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            ra = T.alloc_tensor(ty_args=[T.Tensor((16,), "float16", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local", layout=la)])
            A2 = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 2, 16, 32), "float16", scope="local", layout=la2)])
            An = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 32), "float16", scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, 16, 16), "float32", scope="local", layout=ld)])
            Tf = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 4, 4, 16), "float16", scope="local", layout=lt)])
            if I.constexpr(scalar_a):
                T.rocm.tile.apply(mfma, Df, T.float32(1), Af, T.float32(0), scope="wave")
            elif I.constexpr(scalar_d):
                T.rocm.tile.apply(mfma, T.float32(0), Af, Af, T.float32(0), scope="wave")
            elif I.constexpr(five):
                T.rocm.tile.apply(mfma, Df, Af, Af, Df, Df, scope="wave")
            elif I.constexpr(none):
                T.rocm.tile.apply(mfma, scope="wave")
            elif I.constexpr(global_d):
                T.rocm.tile.apply(mfma, G, Af, Af, T.float32(0), scope="wave")
            elif I.constexpr(repeats):
                T.rocm.tile.apply(mfma, Df, A2, Af, T.float32(0), scope="wave")
            elif I.constexpr(no_layout):
                T.rocm.tile.apply(mfma, Df, An, Af, T.float32(0), scope="wave")
            elif I.constexpr(tr_scalar):
                T.rocm.tile.apply(tr, Tf, T.float16(0), scope="wave")
            elif I.constexpr(tr_global):
                T.rocm.tile.apply(tr, Tf, S, scope="wave")
            elif I.constexpr(tr_one):
                T.rocm.tile.apply(tr, Tf, scope="wave")

    return kernel
