"""One-wave probe kernels: one pattern application per opcode, with per-lane register images in
global memory. They drive ``python -m tvm_cdna4 selftest`` and the tests, and (with the emulator)
check an opcode end to end against ``tvm_cdna4.isa.reference``.

- MFMA probe ``(A, B, C, D)`` (scaled: ``(A, B, C, SA, SB, D)``): ``X[lane, r]`` is register ``r`` of
  ``lane`` in the format's storage dtype; the kernel loads them, views them through the canonical
  fragment layouts, applies the pattern and stores D.
- ds_read_tr probe ``(SRC, D)``: ``SRC`` is copied to an LDS tile laid out in the tile form's
  canonical shape; ``D[lane, r]`` receives the lane's result registers.
"""

from __future__ import annotations

from tvm_tirx.script import tirx as T

from .isa import SCALE_FORMAT_CODES, DsReadTrOp, MfmaOp
from .patterns import register
from .patterns.layouts import mfma_fragment, tr_fragment
from .patterns.mfma import _atoms

# storage dtype per element format (bf16 travels as int16 bit patterns: see rocm/helpers.py)
STORAGE = {"f16": "float16", "bf16": "int16", "fp8": "uint8", "bf8": "uint8", "i8": "int8", "f32": "float32",
           "f64": "float64", "i32": "int32"}


def mfma_probe(op: MfmaOp, cbsz: int = 0, abid: int = 0, blgp: int = 0, op_sel_a: int = 0, op_sel_b: int = 0):
    register()
    if op.kind == "mfma_scale":
        return _scaled_probe(op, cbsz, blgp, op_sel_a, op_sel_b)
    a_atom, b_atom, d_atom = _atoms(op)
    la, na = mfma_fragment(op, "A", (1, 1))
    lb, nb = mfma_fragment(op, "B", (1, 1))
    ld, nd = mfma_fragment(op, "D", (1, 1))
    at, bt, dt = STORAGE[op.a_format], STORAGE[op.b_format], STORAGE[op.acc_format]
    opcode = op.name

    @T.function
    def kernel(A: T.Tensor((64, na), at), B: T.Tensor((64, nb), bt), C: T.Tensor((64, nd), dt),
               D: T.Tensor((64, nd), dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
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
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, *a_atom), at, scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, *b_atom), bt, scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor((1, 1, *d_atom), dt, scope="local", layout=ld)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, *d_atom), dt, scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, scope="wave", cbsz=cbsz, abid=abid, blgp=blgp)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def _scaled_probe(op: MfmaOp, cbsz: int, blgp: int, op_sel_a: int, op_sel_b: int):
    fa, fb = SCALE_FORMAT_CODES[cbsz], SCALE_FORMAT_CODES[blgp]
    a_atom, b_atom, d_atom = _atoms(op, fa, fb)
    s_atom = (op.m, op.k // 32)
    la, na = mfma_fragment(op, "A", (1, 1), fa, fb)
    lb, nb = mfma_fragment(op, "B", (1, 1), fa, fb)
    ld, nd = mfma_fragment(op, "D", (1, 1))
    ls, _ = mfma_fragment(op, "scale_a", (1, 1))
    opcode = op.name

    @T.function
    def kernel(A: T.Tensor((64, na), "uint32"), B: T.Tensor((64, nb), "uint32"), C: T.Tensor((64, nd), "float32"),
               SA: T.Tensor((64,), "uint32"), SB: T.Tensor((64,), "uint32"), D: T.Tensor((64, nd), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
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
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, *a_atom), "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, *b_atom), "uint32", scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor((1, 1, *d_atom), "float32", scope="local", layout=ld)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, *d_atom), "float32", scope="local", layout=ld)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((1, 1, *s_atom), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([1]), ty_args=[T.Tensor((1, 1, *s_atom), "uint32", scope="local", layout=ls)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, Sa, Sb, scope="wave", cbsz=cbsz, blgp=blgp,
                              op_sel_a=op_sel_a, op_sel_b=op_sel_b)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def tr_probe(op: DsReadTrOp):
    """SRC: the tile form's canonical src, flattened row-major (bytes for tr4/tr6)."""
    register()
    sub_byte = op.element_bits < 8
    src_atom = (4, 16, op.load_bits // 8) if sub_byte else (4, op.elements, 16)
    dst_atom = (4, 16, op.load_bits // 32) if sub_byte else (4, op.elements, 16)
    src_dt = "uint8" if sub_byte else {16: "int16" if "bfloat" in op.result_vector else "float16", 8: "uint8"}[op.element_bits]
    if op.result_format == "i16":
        src_dt = "int16"
    dst_dt = "uint32" if sub_byte else src_dt
    ld, nd = tr_fragment(op, (1,))
    # one chunk per 16-byte slot keeps every chunk start aligned (tr6: 12 data bytes in 16)
    row = src_atom[-1] if not sub_byte else 16
    n_src = src_atom[0] * src_atom[1] * src_atom[2]
    src_layout = T.TileLayout(T.S[(1, *src_atom) : (0, src_atom[1] * row, row, 1)])
    lds_elems = src_atom[0] * src_atom[1] * row
    opcode = op.name

    @T.function
    def kernel(SRC: T.Tensor((n_src,), src_dt), D: T.Tensor((64, nd), dst_dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((1, *src_atom), src_dt, scope="shared", align=16, layout=src_layout)])
            for q in T.serial((n_src + 63) // 64):
                if q * 64 + tx < n_src:
                    S[0, (q * 64 + tx) // (src_atom[1] * src_atom[2]), (q * 64 + tx) // src_atom[2] % src_atom[1],
                      (q * 64 + tx) % src_atom[2]] = SRC[q * 64 + tx]
            T.rocm.workgroup_barrier()
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dst_dt, scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, *dst_atom), dst_dt, scope="local", layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, S, scope="wave")
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    kernel.lds_elems = lds_elems
    return kernel
