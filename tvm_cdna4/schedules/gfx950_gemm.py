"""gfx950 GEMM from the CDNA4 patterns and plain TIRx: ``C = op(A) @ op(B)``, per dtype.

Layout strings name how A and B are stored: ``n`` = as used (A ``M x K``, B ``K x N``, row-major),
``t`` = transposed (A stored ``K x M``, B stored ``N x K``). The operand whose K is contiguous in
memory keeps K contiguous in LDS and is read with wide LDS loads; the other keeps M/N contiguous
and reaches the MFMA layout through ``ds_read_tr`` (8/16-bit types; 32/64-bit types have no
transposing load and use per-element LDS reads).

fp8/bf8 (all four A/B combinations) run on the scaled ``f8f6f4`` MFMAs (16x16x128, 32x32x64: twice
the rate of the dense fp8 MFMAs on gfx950) with unit E8M0 scales (127 = 2^0) in a constant
register; the format codes ``cbsz`` (A) and ``blgp`` (B) select fp8 (E4M3, 0) or bf8 (E5M2, 1) per
operand. Their fragments are ``uint8`` element tiles like every other dtype's (``patterns.mfma``):
32 consecutive K bytes per lane, two 16-byte LDS reads or four ``ds_read_tr8``.

Structure: 256-thread workgroups (4 waves in a 2 x 2 grid over the ``block_m x block_n`` tile);
a software pipeline over ``block_k`` tiles with two stages (LDS + registers): step ``ko`` stores
the registers holding tile ``ko + 1`` into their LDS stage, buffer-loads tile ``ko + 2`` into the
other registers and runs the MFMAs of tile ``ko`` (one barrier per step; ``sched.group.barrier``
groups interleave the memory instructions with the MFMAs). LDS rows are padded (``lds_pad`` bytes) so that the 16 lanes
of a wide or transposing read hit different banks. Edges: global loads outside the matrices read
zeros (buffer range check, or clamped element loads); the epilogue stores only inside C.
docs/gfx950_gemm.md explains the choices.
"""

from __future__ import annotations

import attrs
import numpy as np
from tvm_tirx.script import tirx as T

from ..isa import CATALOG, SCALE_FORMAT_CODES, lanes
from ..patterns import register
from ..patterns.layouts import mfma_fragment
from .pipeline import chunk_loader, interleave_program, k_pipeline, lds_stage, schedule_hint


def lane_maps(op):
    """The catalog's owner maps of one MFMA as functions of a lane expression: A row and first K,
    B column and first K of the lane's elements; accumulator row and column of register ``r``."""
    return (lambda lane: lanes.a_owner(op, lane, 0)[1], lambda lane: lanes.a_owner(op, lane, 0)[2],
            lambda lane: lanes.b_owner(op, lane, 0)[2], lambda lane: lanes.b_owner(op, lane, 0)[1],
            lambda lane, r: lanes.acc_owner(op, lane, r)[1], lambda lane, r: lanes.acc_owner(op, lane, r)[2])


@attrs.frozen
class DtypeSpec:
    storage: str  # TIR dtype of A/B in memory (bf16 travels as int16 bit patterns)
    numpy: object  # numpy dtype users pass
    mfma16: str  # 16x16 MFMA
    mfma32: str  # 32x32 MFMA
    tr: str | None  # ds_read_tr for the M/N-contiguous operand; None: per-element LDS reads
    acc: str  # accumulator TIR dtype
    outs: tuple[str, ...]  # legal output dtypes (first = default)
    scaled: tuple[str, str] | None = None  # A/B formats of the scaled MFMAs (unit scales); None: dense MFMAs

    @property
    def formats(self) -> tuple[str, str]:
        """A and B element formats."""
        return self.scaled or (CATALOG[self.mfma16].a_format, CATALOG[self.mfma16].b_format)


FORMAT_CODES = {fmt: code for code, fmt in SCALE_FORMAT_CODES.items()}  # scaled MFMA cbsz / blgp values
UNIT_SCALES = 0x7F7F7F7F  # E8M0 127 = 2^0 in every byte (whatever op_sel picks)


def _np(name):
    import ml_dtypes

    return {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
            "bf8": ml_dtypes.float8_e5m2, "i8": np.int8, "f32": np.float32, "f64": np.float64}[name]


def _fp8(a, b):
    """fp8/bf8 on the scaled f8f6f4 MFMAs with unit scales (module docstring)."""
    return DtypeSpec("uint8", (_np(a), _np(b)), "mfma_scale_f32_16x16x128_f8f6f4", "mfma_scale_f32_32x32x64_f8f6f4",
                     "ds_read_tr8_b64_v2i32", "float32", ("f32", "f16", "bf16"), (a, b))


DTYPES: dict[str, DtypeSpec] = {
    "f16": DtypeSpec("float16", _np("f16"), "mfma_f32_16x16x32_f16", "mfma_f32_32x32x16_f16", "ds_read_tr16_b64_v4f16",
                     "float32", ("f32", "f16", "bf16")),
    "bf16": DtypeSpec("int16", _np("bf16"), "mfma_f32_16x16x32_bf16", "mfma_f32_32x32x16_bf16", "ds_read_tr16_b64_v4bf16",
                      "float32", ("f32", "f16", "bf16")),
    "fp8": _fp8("fp8", "fp8"),
    "bf8": _fp8("bf8", "bf8"),
    "fp8_bf8": _fp8("fp8", "bf8"),
    "bf8_fp8": _fp8("bf8", "fp8"),
    "i8": DtypeSpec("int8", _np("i8"), "mfma_i32_16x16x64_i8", "mfma_i32_32x32x32_i8", "ds_read_tr8_b64_v2i32", "int32", ("i32",)),
    "f32": DtypeSpec("float32", _np("f32"), "mfma_f32_16x16x4f32", "mfma_f32_32x32x2f32", None, "float32", ("f32", "f16", "bf16")),
    "f64": DtypeSpec("float64", _np("f64"), "mfma_f64_16x16x4f64", "mfma_f64_16x16x4f64", None, "float64", ("f64",)),
}
OUT_STORAGE = {"f32": "float32", "f16": "float16", "bf16": "int16", "i32": "int32", "f64": "float64"}
LAYOUTS = ("nn", "nt", "tn", "tt")


@attrs.frozen
class Gfx950GemmConfig:
    """Tile configuration. ``mfma``: "16x16" or "32x32" (the wide-K double-rate shapes)."""

    block_m: int = 128
    block_n: int = 128
    block_k: int = 64
    mfma: str = "16x16"
    lds_pad: int = 16  # bytes added to every LDS row (keeps 16-byte alignment)
    # Ask LLVM's scheduler (sched.group.barrier) to issue the LDS reads, LDS stores and global loads
    # of each K tile between its MFMAs instead of clustering the MFMAs
    interleave: bool = True
    transpose_loads: bool = True  # ds_read_tr for the M/N-contiguous operand; False: per-element LDS reads

    def check(self, spec: DtypeSpec) -> None:
        op = CATALOG[spec.mfma16 if self.mfma == "16x16" else spec.mfma32]
        if self.mfma not in ("16x16", "32x32"):
            raise ValueError(f"config.mfma must be '16x16' or '32x32'; got {self.mfma!r}")
        if self.block_m % (2 * op.m) or self.block_n % (2 * op.n) or self.block_k % op.k:
            raise ValueError(f"block {self.block_m}x{self.block_n}x{self.block_k} does not tile 2 x 2 waves of "
                             f"{op.m}x{op.n}x{op.k} MFMAs ({op.name})")
        if self.lds_pad % 16:
            raise ValueError(f"lds_pad must be a multiple of 16 bytes; got {self.lds_pad}")


def default_config(dtype: str) -> Gfx950GemmConfig:
    if dtype in ("f32", "f64"):
        return Gfx950GemmConfig(block_m=64, block_n=64, block_k=16)
    if dtype == "i8":  # K = 64 per MFMA: two K steps per LDS tile like the 16-bit types
        return Gfx950GemmConfig(block_k=128)
    if DTYPES[dtype].scaled:  # K = 128 per 16x16x128 MFMA: one K step per LDS tile
        return Gfx950GemmConfig(block_k=128)
    return Gfx950GemmConfig()


def _elem_bytes(storage: str) -> int:
    return np.dtype({"float16": np.float16, "int16": np.int16, "uint8": np.uint8, "int8": np.int8,
                     "float32": np.float32, "float64": np.float64}[storage]).itemsize


def gfx950_gemm(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None,
                config: Gfx950GemmConfig | None = None, batch: int = 0):
    """PrimFunc ``(A, B, C)`` (with ``batch``: a leading batch axis on each) for gfx950.

    A is ``(M, K)`` for layout ``n?`` and ``(K, M)`` for ``t?``; B is ``(K, N)`` for ``?n`` and
    ``(N, K)`` for ``?t``; C is ``(M, N)`` in ``out_dtype`` (bf16 outputs and inputs are int16 bit
    patterns in the signature; numpy bfloat16 arrays pass as they are).
    """
    register()
    if dtype not in DTYPES:
        raise ValueError(f"gfx950 GEMM: dtype {dtype!r} is not supported; expected one of {sorted(DTYPES)}")
    if layout not in LAYOUTS:
        raise ValueError(f"gfx950 GEMM: layout {layout!r}; expected one of {LAYOUTS}")
    spec = DTYPES[dtype]
    out_dtype = out_dtype or spec.outs[0]
    if out_dtype not in spec.outs:
        raise ValueError(f"gfx950 GEMM: output {out_dtype!r} for {dtype}; expected one of {list(spec.outs)}")
    if min(M, N, K) < 1:
        raise ValueError(f"gfx950 GEMM: M, N, K must be positive; got {M}, {N}, {K}")
    cfg = config or default_config(dtype)
    cfg.check(spec)
    op = CATALOG[spec.mfma16 if cfg.mfma == "16x16" else spec.mfma32]
    a_t, b_t = layout[0] == "t", layout[1] == "t"
    elem, acc, out = spec.storage, spec.acc, OUT_STORAGE[out_dtype]
    esize = _elem_bytes(elem)
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    WM, WN = BM // 2, BN // 2
    RM, RN, RK = WM // op.m, WN // op.n, BK // op.k
    E = op.a_elems
    scaled = spec.scaled is not None
    la, na = mfma_fragment(op, "A", (RM, RK), byte_tiles=scaled)
    lb, nb = mfma_fragment(op, "B", (RN, RK), byte_tiles=scaled)
    la1, _ = mfma_fragment(op, "A", byte_tiles=scaled)
    lb1, _ = mfma_fragment(op, "B", byte_tiles=scaled)
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    if scaled:
        kb = op.k // 32  # scale registers per lane and MFMA: one per 32 K (unit scales here)
        ls, _ = mfma_fragment(op, "scale_a", (RM, 1))
        lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))
    pad = cfg.lds_pad // esize
    # LDS tiles: K-contiguous operands are (rows, BK); M/N-contiguous ones (BK, cols); + padding
    sa_shape = (BK, BM + pad) if a_t else (BM, BK + pad)
    sb_shape = (BN, BK + pad) if b_t else (BK, BN + pad)
    a_shape = (K, M) if a_t else (M, K)
    b_shape = (N, K) if b_t else (K, N)
    if batch:
        a_shape, b_shape, c_shape = (batch, *a_shape), (batch, *b_shape), (batch, M, N)
    else:
        c_shape = (M, N)
    grid_m, grid_n = -(-M // BM), -(-N // BN)
    groups = grid_m * grid_n * max(batch, 1)
    k_steps = -(-K // BK)
    vec = max(1, 16 // esize)  # elements per 16-byte global/LDS chunk
    a_rows, a_cols = sa_shape[0], BK if not a_t else BM
    b_rows, b_cols = sb_shape[0], BK if b_t else BN
    a_chunks = a_rows * a_cols // vec // 256  # 16-byte chunks per thread
    b_chunks = b_rows * b_cols // vec // 256
    if a_chunks * 256 * vec != a_rows * a_cols or b_chunks * 256 * vec != b_rows * b_cols or min(a_chunks, b_chunks) < 1:
        raise ValueError(f"tile {BM}x{BN}x{BK} is not a whole number of 16-byte chunks per thread")
    a_cpr, b_cpr = a_cols // vec, b_cols // vec  # chunks per LDS row
    tr = spec.tr if cfg.transpose_loads else None
    use_tr_a, use_tr_b = a_t and tr is not None, (not b_t) and tr is not None
    mfma_name = op.name
    wide_reads = -(-E * esize // 16)  # LDS reads per fragment: 16-byte reads, or one ds_read_tr per n elements
    a_reads = RM * RK * (E // CATALOG[tr].elements if use_tr_a else wide_reads)
    b_reads = RN * RK * (E // CATALOG[tr].elements if use_tr_b else wide_reads)
    # a tile of one K step (the fp8 default) issues its global loads first: no later K step hides them
    _interleave = schedule_hint(interleave_program(RM * RN * RK, (a_reads + b_reads) // RK, a_reads + b_reads,
                                                   a_chunks + b_chunks, a_chunks + b_chunks, loads_first=RK == 1)
                                if cfg.interleave else None)

    a_row, a_k, b_col, b_k, acc_row, acc_col = lane_maps(op)

    # global operand access through flat views: storage (rows, cols), leading dimension ld
    a_lim = (K, M) if a_t else (M, K)
    b_lim = (N, K) if b_t else (K, N)

    def _convert(value):
        if out_dtype == "bf16":  # round to nearest even, keep the bit pattern in int16
            bits = T.reinterpret(value, ty="uint32")
            rounded = (bits + T.uint32(0x7FFF) + ((bits >> T.uint32(16)) & T.uint32(1))) >> T.uint32(16)
            return T.reinterpret(T.cast(rounded, "uint16"), ty="int16")
        return T.cast(value, out) if out != acc else value

    def _frag_loader(operand, mn_contiguous, transposing, mn_of, k_of, atom_layout):
        """Macro ``frag(regs, lds, buf, i, kk, w0, lane)``: MFMA fragment ``i`` of K step ``kk`` of
        ``operand`` from an LDS stage (the wave's tile starts at ``w0`` along M or N) into
        ``regs``: ds_read_tr where its M/N is contiguous in LDS and a transposing load exists,
        per-element reads where not, one wide read where K is contiguous."""
        ext = op.m if operand == "A" else op.n
        if transposing:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                V = T.decl_tensor(regs.ptr_to([(i * RK + kk) * E]), ty_args=[T.Tensor((1, ext, op.k), elem, scope="local", layout=atom_layout)])
                T.rocm.tile.apply(T.amdgcn[tr], V, lds[buf : buf + 1, kk * op.k : kk * op.k + op.k, w0 + i * ext : w0 + i * ext + ext],
                                  scope="wave", mfma=mfma_name, operand=operand)
        elif mn_contiguous:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                for e in T.unroll(E):
                    regs[(i * RK + kk) * E + e] = lds[buf, kk * op.k + k_of(lane) + e, w0 + i * ext + mn_of(lane)]
        elif E == 1:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                regs[(i * RK + kk) * E] = lds[buf, w0 + i * ext + mn_of(lane), kk * op.k + k_of(lane)]
        else:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                regs[T.ramp((i * RK + kk) * E, 1, E)] = lds[buf, w0 + i * ext + mn_of(lane), T.ramp(kk * op.k + k_of(lane), 1, E)]
        return frag

    _frag_a = _frag_loader("A", a_t, use_tr_a, a_row, a_k, la1)
    _frag_b = _frag_loader("B", not b_t, use_tr_b, b_col, b_k, lb1)

    @T.macro
    def _store_c(dst, bz, row, col, value):
        if row < M and col < N:
            dst[bz * (M * N) + row * N + col] = _convert(value)

    _chunk_a = chunk_loader(elem, vec, a_lim, a_cpr, a_t, M * K, max(batch, 1) * M * K)
    _chunk_b = chunk_loader(elem, vec, b_lim, b_cpr, not b_t, K * N, max(batch, 1) * K * N)

    if scaled:
        code_a, code_b = (FORMAT_CODES[f] for f in spec.scaled)

        @T.macro
        def _mfma(Df_, Af_, Bf_):
            """The scaled MFMAs with unit scales (a constant LLVM keeps in one VGPR)."""
            rs = T.alloc_tensor(ty_args=[T.Tensor((RM + RN,), "uint32", scope="local")])
            for r in T.unroll(RM + RN):
                rs[r] = T.uint32(UNIT_SCALES)
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, kb), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([RM]), ty_args=[T.Tensor((RN, 1, op.n, kb), "uint32", scope="local", layout=lsb)])
            T.rocm.tile.apply(T.amdgcn[mfma_name], Df_, Af_, Bf_, Df_, Sa, Sb, scope="wave",
                              cbsz=code_a, blgp=code_b, op_sel_a=0, op_sel_b=0)
    else:
        @T.macro
        def _mfma(Df_, Af_, Bf_):
            T.rocm.tile.apply(T.amdgcn[mfma_name], Df_, Af_, Bf_, Df_, scope="wave")

    # pipeline state: (A, B, ra, rb, Af, Bf, Df, bz, m0, n0, wm, wn, tx); stage: (SA, SB, ga, gb)
    @T.macro
    def _load(stage, state, ko):
        """Every thread's share of K tile ``ko`` of A and B, global -> registers (zeros outside)."""
        SA_, SB_, ga_, gb_ = stage
        A_, B_, ra_, rb_, Af_, Bf_, Df_, bz_, m0_, n0_, wm_, wn_, t_ = state
        Ag_ = T.decl_tensor(A_.data, ty_args=[T.Tensor((max(batch, 1) * M * K,), elem)])
        Bg_ = T.decl_tensor(B_.data, ty_args=[T.Tensor((max(batch, 1) * K * N,), elem)])
        for q in T.unroll(a_chunks):
            _chunk_a(ga_, A_, Ag_, bz_, m0_, t_, q, ko * BK)
        for q in T.unroll(b_chunks):
            _chunk_b(gb_, B_, Bg_, bz_, n0_, t_, q, ko * BK)

    @T.macro
    def _store(stage, state):
        SA_, SB_, ga_, gb_ = stage
        A_, B_, ra_, rb_, Af_, Bf_, Df_, bz_, m0_, n0_, wm_, wn_, t_ = state
        for q in T.unroll(a_chunks):
            SA_[0, (q * 256 + t_) // a_cpr, T.ramp((q * 256 + t_) % a_cpr * vec, 1, vec)] = ga_[T.ramp(q * vec, 1, vec)]
        for q in T.unroll(b_chunks):
            SB_[0, (q * 256 + t_) // b_cpr, T.ramp((q * 256 + t_) % b_cpr * vec, 1, vec)] = gb_[T.ramp(q * vec, 1, vec)]

    @T.macro
    def _compute(stage, state):
        """Per K step of the tile: the operand fragments from LDS, then its MFMAs."""
        SA_, SB_, ga_, gb_ = stage
        A_, B_, ra_, rb_, Af_, Bf_, Df_, bz_, m0_, n0_, wm_, wn_, t_ = state
        for kk in T.unroll(RK):
            for mi in T.unroll(RM):
                _frag_a(ra_, SA_, 0, mi, kk, wm_, t_ % 64)
            for ni in T.unroll(RN):
                _frag_b(rb_, SB_, 0, ni, kk, wn_, t_ % 64)
            _mfma(Df_, Af_[:, kk : kk + 1], Bf_[:, kk : kk + 1])
        _interleave()

    pipeline = k_pipeline(k_steps, _load, _store, _compute)

    @T.function
    def gemm(A: T.Tensor(a_shape, elem), B: T.Tensor(b_shape, elem), C: T.Tensor(c_shape, out)):
        with T.device_entry():
            bid = T.launch_thread("blockIdx.x", groups)
            tx = T.launch_thread("threadIdx.x", 256)
            SA0 = T.alloc_tensor(ty_args=[lds_stage(sa_shape, elem)])
            SA1 = T.alloc_tensor(ty_args=[lds_stage(sa_shape, elem)])
            SB0 = T.alloc_tensor(ty_args=[lds_stage(sb_shape, elem)])
            SB1 = T.alloc_tensor(ty_args=[lds_stage(sb_shape, elem)])
            ga0 = T.alloc_tensor(ty_args=[T.Tensor((a_chunks * vec,), elem, scope="local")])
            gb0 = T.alloc_tensor(ty_args=[T.Tensor((b_chunks * vec,), elem, scope="local")])
            ga1 = T.alloc_tensor(ty_args=[T.Tensor((a_chunks * vec,), elem, scope="local")])
            gb1 = T.alloc_tensor(ty_args=[T.Tensor((b_chunks * vec,), elem, scope="local")])
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), acc, scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), acc, scope="local", layout=ld)])
            Cg = T.decl_tensor(C.data, ty_args=[T.Tensor((max(batch, 1) * M * N,), out)])
            bz = bid // (grid_m * grid_n)
            m0 = bid % (grid_m * grid_n) // grid_n * BM
            n0 = bid % grid_n * BN
            wm = tx // 128 % 2 * WM  # "% 2" lets the pattern prove the region is in bounds
            wn = tx // 64 % 2 * WN
            lane = tx % 64
            for r in T.unroll(nd):
                rd[r] = T.cast(0, acc)
            pipeline((SA0, SB0, ga0, gb0), (SA1, SB1, ga1, gb1), (A, B, ra, rb, Af, Bf, Df, bz, m0, n0, wm, wn, tx))
            for mi in T.unroll(RM):
                for ni in T.unroll(RN):
                    for r in T.unroll(op.acc_elems):
                        _store_c(Cg, bz, m0 + wm + mi * op.m + acc_row(lane, r), n0 + wn + ni * op.n + acc_col(lane, r),
                                 rd[(mi * RN + ni) * op.acc_elems + r])

    return gemm


__all__ = ["DTYPES", "FORMAT_CODES", "LAYOUTS", "UNIT_SCALES", "Gfx950GemmConfig", "default_config", "gfx950_gemm"]
