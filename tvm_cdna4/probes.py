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


def mfma_probe(op: MfmaOp, cbsz: int = 0, abid: int = 0, blgp: int = 0, op_sel_a: int = 0, op_sel_b: int = 0,
               *, scope: str = "wave", layouts=None, dtypes=None, scopes=None, atoms=None, params=None,
               opcode: str | None = None, threads: int = 64):
    """The probe for ``op``. Keyword overrides (per operand "A", "B", "C", "D") exist to build
    deliberately wrong kernels in the contract tests; ``params`` replaces the modifiers."""
    register()
    if op.kind == "mfma_scale":
        return _scaled_probe(op, cbsz, blgp, op_sel_a, op_sel_b, atoms=atoms, dtypes=dtypes)
    a_atom, b_atom, d_atom = _atoms(op)
    atoms = {"A": a_atom, "B": b_atom, "C": d_atom, "D": d_atom, **(atoms or {})}
    frags = {k: mfma_fragment(op, k, (1, 1)) for k in "ABD"}
    frags["C"] = frags["D"]
    layouts = {k: v[0] for k, v in frags.items()} | (layouts or {})
    regs = {k: v[1] for k, v in frags.items()}
    dtypes = {"A": STORAGE[op.a_format], "B": STORAGE[op.b_format], "C": STORAGE[op.acc_format],
              "D": STORAGE[op.acc_format]} | (dtypes or {})
    scopes = {"A": "local", "B": "local", "C": "local", "D": "local"} | (scopes or {})
    params = {"cbsz": cbsz, "abid": abid, "blgp": blgp} if params is None else params
    na, nb, nd = regs["A"], regs["B"], regs["D"]
    at, bt, ct, dt = dtypes["A"], dtypes["B"], dtypes["C"], dtypes["D"]
    la, lb, lc, ld = layouts["A"], layouts["B"], layouts["C"], layouts["D"]
    sa, sb, sc, sd = scopes["A"], scopes["B"], scopes["C"], scopes["D"]
    xa, xb, xc, xd = atoms["A"], atoms["B"], atoms["C"], atoms["D"]
    opcode = opcode or op.name

    @T.function
    def kernel(A: T.Tensor((64, na), at), B: T.Tensor((64, nb), bt), C: T.Tensor((64, nd), ct),
               D: T.Tensor((64, nd), dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), at, scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), bt, scope="local")])
            rc = T.alloc_tensor(ty_args=[T.Tensor((nd,), ct, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dt, scope="local")])
            for r in T.unroll(na):
                ra[r] = A[tx, r]
            for r in T.unroll(nb):
                rb[r] = B[tx, r]
            for r in T.unroll(nd):
                rc[r] = C[tx, r]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, *xa), at, scope=sa, layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, *xb), bt, scope=sb, layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor((1, 1, *xc), ct, scope=sc, layout=lc)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, *xd), dt, scope=sd, layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, scope=scope, **params)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def _scaled_probe(op: MfmaOp, cbsz: int, blgp: int, op_sel_a: int, op_sel_b: int, atoms=None, dtypes=None):
    fa, fb = SCALE_FORMAT_CODES.get(cbsz, "fp8"), SCALE_FORMAT_CODES.get(blgp, "fp8")
    a_atom, b_atom, d_atom = _atoms(op, fa, fb)
    a_atom, b_atom = (atoms or {}).get("A", a_atom), (atoms or {}).get("B", b_atom)
    st = (dtypes or {}).get("scale", "uint32")
    s_atom = (op.m, op.k // 32)
    la, na = mfma_fragment(op, "A", (1, 1), {8: "fp8", 6: "fp6", 4: "fp4"}[a_atom[-1]], fb)
    lb, nb = mfma_fragment(op, "B", (1, 1), fa, {8: "fp8", 6: "fp6", 4: "fp4"}[b_atom[-1]])
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
            rs = T.alloc_tensor(ty_args=[T.Tensor((2,), st, scope="local")])
            for r in T.unroll(na):
                ra[r] = A[tx, r]
            for r in T.unroll(nb):
                rb[r] = B[tx, r]
            for r in T.unroll(nd):
                rc[r] = C[tx, r]
            rs[0] = T.reinterpret(SA[tx], ty=st)
            rs[1] = T.reinterpret(SB[tx], ty=st)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, *a_atom), "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, *b_atom), "uint32", scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor((1, 1, *d_atom), "float32", scope="local", layout=ld)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, *d_atom), "float32", scope="local", layout=ld)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((1, 1, *s_atom), st, scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([1]), ty_args=[T.Tensor((1, 1, *s_atom), st, scope="local", layout=ls)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, Sa, Sb, scope="wave", cbsz=cbsz, blgp=blgp,
                              op_sel_a=op_sel_a, op_sel_b=op_sel_b)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def tr_probe(op: DsReadTrOp, *, row_pitch: int | None = None, align: int = 16, src_scope: str = "shared",
             dst_scope: str = "local", dst_layout=None, dtype: str | None = None, src_layout=None):
    """SRC: the tile form's canonical src, flattened row-major (bytes for tr4/tr6). In LDS each
    row of the tile starts every ``row_pitch`` elements (default: one 16-byte slot per chunk, so
    tr6's 12-byte chunks stay 16-byte aligned). Other keywords build deliberately wrong kernels."""
    register()
    sub_byte = op.element_bits < 8
    src_atom = (4, 16, op.load_bits // 8) if sub_byte else (4, op.elements, 16)
    dst_atom = (4, 16, op.load_bits // 32) if sub_byte else (4, op.elements, 16)
    src_dt = "uint8" if sub_byte else {16: "int16" if op.result_format != "f16" else "float16", 8: "uint8"}[op.element_bits]
    src_dt = dtype or src_dt
    dst_dt = "uint32" if sub_byte else src_dt
    ld, nd = tr_fragment(op, (1,))
    ld = dst_layout or ld
    row = row_pitch or (16 if sub_byte else src_atom[-1])
    n_src = src_atom[0] * src_atom[1] * src_atom[2]
    src_layout = src_layout or T.TileLayout(T.S[(1, *src_atom) : (0, src_atom[1] * row, row, 1)])
    opcode = op.name

    @T.function
    def kernel(SRC: T.Tensor((n_src,), src_dt), D: T.Tensor((64, nd), dst_dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((1, *src_atom), src_dt, scope=src_scope, align=align, layout=src_layout)])
            for q in T.serial((n_src + 63) // 64):
                if q * 64 + tx < n_src:
                    S[0, (q * 64 + tx) // (src_atom[1] * src_atom[2]), (q * 64 + tx) // src_atom[2] % src_atom[1],
                      (q * 64 + tx) % src_atom[2]] = SRC[q * 64 + tx]
            T.rocm.workgroup_barrier()
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dst_dt, scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, *dst_atom), dst_dt, scope=dst_scope, layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, S, scope="wave")
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel
