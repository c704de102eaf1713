"""One-wave probe kernels: one pattern application per opcode, with per-lane register images in
global memory. They drive ``python -m tvm_cdna4 selftest`` and the tests, and (with the emulator)
check an opcode end to end against ``tvm_cdna4.isa.reference``.

- MFMA probe ``(A, B, C, D)`` (scaled: ``(A, B, C, SA, SB, D)``): ``X[t, r]`` is register ``r`` of
  thread ``t`` in the format's storage dtype; the kernel loads them, views them through the canonical
  fragment layouts, applies the pattern and stores D.
- ds_read_tr probe ``(SRC, D)``: ``SRC`` is copied to an LDS tile laid out in the tile form's
  canonical shape; ``D[t, r]`` receives the thread's result registers.

``repeats`` adds repeat axes (MFMA: ``(M, N, K)`` repeats; ds_read_tr: one count); ``waves=w`` builds
the ``scope="workgroup"`` form, whose operands carry a leading wave axis of extent ``w`` (wave ``i``
owns slice ``i``), launched with ``64 * w`` threads unless ``threads`` says otherwise.
"""

from __future__ import annotations

from math import prod

from tvm_tirx.script import tirx as T

from .isa import SCALE_FORMAT_CODES, DsReadTrOp, MfmaOp
from .isa.formats import FORMATS
from .rocm.build import register
from .patterns.layouts import mfma_fragment, tr_fragment
from .patterns.mfma import _atoms

# the probes' dtype per element format (isa.formats): the format's own TIR dtype, or for the dtypes TIRx
# widens (bf16, fp8, bf8) their integer bit storage (int16, uint8), the spelling every route accepts
STORAGE = {name: f.bit_dtypes[0] if f.widened else f.tir_dtype
           for name, f in FORMATS.items() if name in ("f16", "bf16", "fp8", "bf8", "i8", "f32", "f64", "i32")}


def mfma_probe(op: MfmaOp, cbsz: int = 0, abid: int = 0, blgp: int = 0, op_sel_a: int = 0, op_sel_b: int = 0,
               *, scope: str = "wave", layouts=None, dtypes=None, scopes=None, atoms=None, params=None,
               opcode: str | None = None, threads: int | None = None, repeats: tuple[int, int, int] = (1, 1, 1),
               waves: int = 0, operand_repeats=None):
    """The probe for ``op``. Keyword overrides (per operand "A", "B", "C", "D"; ``operand_repeats``
    replaces an operand's repeat shape) exist to build deliberately wrong kernels in the contract
    tests; ``params`` replaces the modifiers."""
    register()
    threads = threads or 64 * max(waves, 1)
    reps = _mfma_repeats(repeats, operand_repeats)
    if op.kind == "mfma_scale":
        return _scaled_probe(op, cbsz, blgp, op_sel_a, op_sel_b, atoms=atoms, dtypes=dtypes, scope=scope,
                             layouts=layouts, params=params, threads=threads, reps=reps, waves=waves)
    a_atom, b_atom, d_atom = _atoms(op)
    atoms = {"A": a_atom, "B": b_atom, "C": d_atom, "D": d_atom, **(atoms or {})}
    frags = {k: mfma_fragment(op, "D" if k == "C" else k, reps[k], waves=waves) for k in "ABCD"}
    layouts = {k: v[0] for k, v in frags.items()} | (layouts or {})
    regs = {k: v[1] for k, v in frags.items()}
    lead = {k: (waves,) * bool(waves) + reps[k] for k in "ABCD"}
    dtypes = {"A": STORAGE[op.a_format], "B": STORAGE[op.b_format], "C": STORAGE[op.acc_format],
              "D": STORAGE[op.acc_format]} | (dtypes or {})
    scopes = {"A": "local", "B": "local", "C": "local", "D": "local"} | (scopes or {})
    params = {"cbsz": cbsz, "abid": abid, "blgp": blgp} if params is None else params
    na, nb, nc, nd = regs["A"], regs["B"], regs["C"], regs["D"]
    at, bt, ct, dt = dtypes["A"], dtypes["B"], dtypes["C"], dtypes["D"]
    la, lb, lc, ld = layouts["A"], layouts["B"], layouts["C"], layouts["D"]
    sa, sb, sc, sd = scopes["A"], scopes["B"], scopes["C"], scopes["D"]
    xa, xb, xc, xd = (lead[k] + tuple(atoms[k]) for k in "ABCD")
    opcode = opcode or op.name

    @T.function
    def kernel(A: T.Tensor((threads, na), at), B: T.Tensor((threads, nb), bt), C: T.Tensor((threads, nc), ct),
               D: T.Tensor((threads, nd), dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), at, scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), bt, scope="local")])
            rc = T.alloc_tensor(ty_args=[T.Tensor((nc,), ct, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dt, scope="local")])
            for r in T.unroll(na):
                ra[r] = A[tx, r]
            for r in T.unroll(nb):
                rb[r] = B[tx, r]
            for r in T.unroll(nc):
                rc[r] = C[tx, r]
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor(xa, at, scope=sa, layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor(xb, bt, scope=sb, layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor(xc, ct, scope=sc, layout=lc)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor(xd, dt, scope=sd, layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, scope=scope, **params)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def _mfma_repeats(repeats, overrides) -> dict[str, tuple[int, ...]]:
    """Repeat shape per operand: A (M, K), B (N, K), C and D (M, N), scales like A and B."""
    m, n, k = repeats
    reps = {"A": (m, k), "B": (n, k), "C": (m, n), "D": (m, n), "scale_a": (m, k), "scale_b": (n, k)}
    return reps | {name: tuple(r) for name, r in (overrides or {}).items()}


def _scaled_probe(op: MfmaOp, cbsz, blgp, op_sel_a, op_sel_b, *, atoms, dtypes, scope, layouts, params, threads,
                  reps, waves):
    fa, fb = SCALE_FORMAT_CODES.get(cbsz, "fp8"), SCALE_FORMAT_CODES.get(blgp, "fp8")
    a_atom, b_atom, d_atom = _atoms(op, fa, fb)
    a_atom, b_atom = (atoms or {}).get("A", a_atom), (atoms or {}).get("B", b_atom)
    st = (dtypes or {}).get("scale", "uint32")
    s_atom = (op.m, op.k // 32)
    fmt_of = {8: "fp8", 6: "fp6", 4: "fp4"}
    frags = {"A": mfma_fragment(op, "A", reps["A"], fmt_of[a_atom[-1]], fb, waves=waves),
             "B": mfma_fragment(op, "B", reps["B"], fa, fmt_of[b_atom[-1]], waves=waves),
             "C": mfma_fragment(op, "D", reps["C"], waves=waves), "D": mfma_fragment(op, "D", reps["D"], waves=waves),
             "scale_a": mfma_fragment(op, "scale_a", reps["scale_a"], waves=waves),
             "scale_b": mfma_fragment(op, "scale_b", reps["scale_b"], waves=waves)}
    lay = {k: v[0] for k, v in frags.items()} | (layouts or {})
    na, nb, nc, nd, nsa, nsb = (frags[k][1] for k in ("A", "B", "C", "D", "scale_a", "scale_b"))
    la, lb, lc, ld, lsa, lsb = (lay[k] for k in ("A", "B", "C", "D", "scale_a", "scale_b"))
    g = (waves,) * bool(waves)
    xa, xb = g + reps["A"] + tuple(a_atom), g + reps["B"] + tuple(b_atom)
    xc, xd = g + reps["C"] + d_atom, g + reps["D"] + d_atom
    xsa, xsb = g + reps["scale_a"] + s_atom, g + reps["scale_b"] + s_atom
    params = {"cbsz": cbsz, "blgp": blgp, "op_sel_a": op_sel_a, "op_sel_b": op_sel_b} if params is None else params
    opcode = op.name

    @T.function
    def kernel(A: T.Tensor((threads, na), "uint32"), B: T.Tensor((threads, nb), "uint32"),
               C: T.Tensor((threads, nc), "float32"), SA: T.Tensor((threads * nsa,), "uint32"),
               SB: T.Tensor((threads * nsb,), "uint32"), D: T.Tensor((threads, nd), "float32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint32", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local")])
            rc = T.alloc_tensor(ty_args=[T.Tensor((nc,), "float32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            rsa = T.alloc_tensor(ty_args=[T.Tensor((nsa,), st, scope="local")])
            rsb = T.alloc_tensor(ty_args=[T.Tensor((nsb,), st, scope="local")])
            for r in T.unroll(na):
                ra[r] = A[tx, r]
            for r in T.unroll(nb):
                rb[r] = B[tx, r]
            for r in T.unroll(nc):
                rc[r] = C[tx, r]
            for r in T.unroll(nsa):
                rsa[r] = T.reinterpret(SA[tx * nsa + r], ty=st)
            for r in T.unroll(nsb):
                rsb[r] = T.reinterpret(SB[tx * nsb + r], ty=st)
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor(xa, "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor(xb, "uint32", scope="local", layout=lb)])
            Cf = T.decl_tensor(rc.ptr_to([0]), ty_args=[T.Tensor(xc, "float32", scope="local", layout=lc)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor(xd, "float32", scope="local", layout=ld)])
            Sa = T.decl_tensor(rsa.ptr_to([0]), ty_args=[T.Tensor(xsa, st, scope="local", layout=lsa)])
            Sb = T.decl_tensor(rsb.ptr_to([0]), ty_args=[T.Tensor(xsb, st, scope="local", layout=lsb)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, Af, Bf, Cf, Sa, Sb, scope=scope, **params)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def tr_probe(op: DsReadTrOp, *, row_pitch: int | None = None, align: int = 16, src_scope: str = "shared",
             dst_scope: str = "local", dst_layout=None, dtype: str | None = None, src_layout=None, scope: str = "wave",
             repeats: int = 1, waves: int = 0, threads: int | None = None, dst_repeats: int | None = None,
             params=None):
    """SRC: the tile form's canonical src ``(*waves, repeats, *atom)``, flattened row-major (bytes for
    tr4/tr6). In LDS each row of the tile starts every ``row_pitch`` elements (default: one 16-byte
    slot per chunk, so tr6's 12-byte chunks stay 16-byte aligned). Other keywords build deliberately
    wrong kernels."""
    register()
    threads = threads or 64 * max(waves, 1)
    sub_byte = op.element_bits < 8
    src_atom = (4, 16, op.load_bits // 8) if sub_byte else (4, op.elements, 16)
    dst_atom = (4, 16, op.load_bits // 32) if sub_byte else (4, op.elements, 16)
    src_dt = "uint8" if sub_byte or op.element_bits == 8 else STORAGE.get(op.result_format, "int16")
    src_dt = dtype or src_dt
    dst_dt = "uint32" if sub_byte else src_dt
    g = (waves,) * bool(waves)
    dst_reps = dst_repeats or repeats
    ld, nd = tr_fragment(op, (dst_reps,), waves=waves)
    ld = dst_layout or ld
    row = row_pitch or (16 if sub_byte else src_atom[-1])
    src_shape, dst_shape = (*g, repeats, *src_atom), (*g, dst_reps, *dst_atom)
    n_src = prod(src_shape)
    tile = src_atom[0] * src_atom[1] * row
    src_layout = src_layout or T.TileLayout(T.S[src_shape : (*(repeats * tile,) * bool(waves), tile, src_atom[1] * row, row, 1)])
    params = params or {}
    opcode = op.name

    @T.function
    def kernel(SRC: T.Tensor((n_src,), src_dt), D: T.Tensor((threads, nd), dst_dt)):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", threads)
            S = T.alloc_tensor(ty_args=[T.Tensor(src_shape, src_dt, scope=src_scope, align=align, layout=src_layout)])
            for q in T.serial((n_src + threads - 1) // threads):
                if q * threads + tx < n_src:
                    S[_unflatten(q * threads + tx, src_shape)] = SRC[q * threads + tx]
            T.rocm.workgroup_barrier()
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), dst_dt, scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor(dst_shape, dst_dt, scope=dst_scope, layout=ld)])
            T.rocm.tile.apply(T.amdgcn[opcode], Df, S, scope=scope, **params)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def _unflatten(flat, shape):
    """Row-major indices of element ``flat`` of a tensor of ``shape``."""
    return tuple(flat // prod(shape[i + 1:]) % extent for i, extent in enumerate(shape))
