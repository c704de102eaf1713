"""Probe kernels whose operands pass through storage of chosen dtypes (tests/contract_fuzz.py storage cases).

Each operand travels global (``glob``) -> optionally an LDS tile (``lds``) -> a register buffer
(``regs``) -> the operand view (``view``, a ``decl_tensor`` over the registers). The copies between
them are plain TIR stores; the dtypes along one chain are of one width, so that a copy of a bf16 /
fp8 value into integer storage (or back) is, as issue 23 specifies it, a bit move.
"""

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from tvm_cdna4.patterns.layouts import mfma_fragment, tr_fragment
from tvm_cdna4.patterns.mfma import _atoms


def mfma_storage_kernel(op, chains: dict, params: dict, acc: str = "float32"):
    """``(A, B, C, D)`` of one wave, as ``tvm_cdna4.probes.mfma_probe``; ``chains["A"]`` /
    ``chains["B"]``: ``{"glob", "lds", "regs", "view"}`` dtypes (``lds`` None: no LDS hop); C and D
    in the accumulator dtype ``acc``."""
    la, na = mfma_fragment(op, "A", (1, 1))
    lb, nb = mfma_fragment(op, "B", (1, 1))
    ld, nd = mfma_fragment(op, "D", (1, 1))
    a_atom, b_atom, d_atom = _atoms(op)
    ca, cb = chains["A"], chains["B"]
    lds_a, lds_b = ca["lds"] is not None, cb["lds"] is not None
    la_t, lb_t = ca["lds"] or ca["regs"], cb["lds"] or cb["regs"]
    xa, xb, xd = (1, 1, *a_atom), (1, 1, *b_atom), (1, 1, *d_atom)
    opcode = op.name

    @T.function
    def kernel(A: T.Tensor((64, na), ca["glob"]), B: T.Tensor((64, nb), cb["glob"]), C: T.Tensor((64, nd), acc),
               D: T.Tensor((64, nd), acc)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            SA = T.alloc_tensor(ty_args=[T.Tensor((64 * na,), la_t, scope="shared", align=16)])
            SB = T.alloc_tensor(ty_args=[T.Tensor((64 * nb,), lb_t, scope="shared", align=16)])
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), ca["regs"], scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), cb["regs"], scope="local")])
            rc = T.alloc_tensor(ty_args=[T.Tensor((nd,), acc, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), acc, scope="local")])
            if I.constexpr(lds_a):
                for r in T.unroll(na):
                    SA[tx * na + r] = A[tx, r]
            if I.constexpr(lds_b):
                for r in T.unroll(nb):
                    SB[tx * nb + r] = B[tx, r]
            T.rocm.workgroup_barrier()
            for r in T.unroll(na):
                if I.constexpr(lds_a):
                    ra[r] = SA[tx * na + r]
                else:
                    ra[r] = A[tx, r]
            for r in T.unroll(nb):
                if I.constexpr(lds_b):
                    rb[r] = SB[tx * nb + r]
                else:
                    rb[r] = B[tx, r]
            for r in T.unroll(nd):
                rc[r] = C[tx, r]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor(xa, ca["view"], scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor(xb, cb["view"], scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor(xd, acc, scope="local", layout=ld)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor(xd, acc, scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, scope="wave", **params)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def tr_storage_kernel(op, chain: dict):
    """``(SRC, D)`` of one wave, as ``tvm_cdna4.probes.tr_probe`` (one canonical tile, 16-byte rows):
    SRC (``glob``) -> the LDS tile (``lds``) -> ds_read_tr -> registers (``regs``) viewed as ``view``."""
    src_atom = (4, op.elements, 16)
    dst_atom = (4, op.elements, 16)
    ld, nd = tr_fragment(op, (1,))
    n_src = 4 * op.elements * 16
    src_shape, dst_shape = (1, *src_atom), (1, *dst_atom)
    layout = T.TileLayout(T.S[src_shape : (n_src, op.elements * 16, 16, 1)])
    opcode = op.name

    @T.function
    def kernel(SRC: T.Tensor((n_src,), chain["glob"]), D: T.Tensor((64, nd), chain["regs"])):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor(src_shape, chain["lds"], scope="shared", align=16, layout=layout)])
            for q in T.serial(n_src // 64):
                S[0, (q * 64 + tx) // (op.elements * 16), (q * 64 + tx) // 16 % op.elements, (q * 64 + tx) % 16] = SRC[q * 64 + tx]
            T.rocm.workgroup_barrier()
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), chain["regs"], scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor(dst_shape, chain["view"], scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, S, scope="wave")
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel
