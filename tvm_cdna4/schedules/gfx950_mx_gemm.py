"""gfx950 MX block-scaled GEMM through the scaled MFMA: ``C = (A * 2^(sa-127)) @ (B * 2^(sb-127))``.

Formats (OCP MX): ``mxfp8`` (E4M3), ``mxbf8`` (E5M2), ``mxfp6`` (E2M3), ``mxbf6`` (E3M2),
``mxfp4`` (E2M1), one E8M0 scale per 32 consecutive K elements of a row of A / column of B.

Storage (K contiguous for both operands, i.e. layout ``nt``): A is ``(M, K*bits/32)`` uint32
words holding each row's K elements packed little-endian (element ``k`` at bits
``[k*bits, (k+1)*bits)`` of the row); B is ``(N, K*bits/32)`` the same way per column of B;
scales are ``(M, K/32)`` and ``(N, K/32)`` uint8 E8M0 codes. K must be a multiple of 32.

Structure: the dense kernel's (``gfx950_gemm``): 256 threads in 2 x 2 waves of ``16x16x128``
scaled MFMAs, the two-stage LDS software pipeline of ``schedules.pipeline`` over 128-wide K tiles
(packed A/B words by ``buffer_load_dwordx4``; the four E8M0 scales of each tile row as one 32-bit
word, staged in LDS beside the data), padded LDS rows, and MFMAs interleaved with the memory
instructions. Each lane reads its 32 K positions (4/6/8 words) with wide LDS reads and extracts
its scale byte from the row's word. Edges are zero-filled, the epilogue masked.
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import tirx as T

from ..isa import CATALOG
from ..isa.mfma_table import SCALE_VECTOR_WORDS
from ..patterns import register
from ..patterns.layouts import mfma_fragment
from ..patterns.wave import BUFFER_OOB
from .gfx950_gemm import FORMAT_CODES, lane_maps
from .pipeline import chunk_loader, guarded_load, interleave_program, k_pipeline, lds_stage, schedule_hint

MX_FORMATS = {"mxfp8": "fp8", "mxbf8": "bf8", "mxfp6": "fp6", "mxbf6": "bf6", "mxfp4": "fp4"}
_BITS = {"fp8": 8, "bf8": 8, "fp6": 6, "bf6": 6, "fp4": 4}


@attrs.frozen
class MxGemmConfig:
    """Tile configuration; K tiles are 128 wide (one scaled MFMA K step, one scale word per row)."""

    block_m: int = 128
    block_n: int = 128
    lds_pad: int = 16  # bytes added to every LDS row
    interleave: bool = True  # as Gfx950GemmConfig.interleave


def words_per_row(K: int, fmt: str) -> int:
    return K * _BITS[fmt] // 32


def gfx950_mx_gemm(M: int, N: int, K: int, dtype: str = "mxfp8", layout: str = "nt", config: MxGemmConfig | None = None):
    """PrimFunc ``(A words, B words, SA, SB, C float32)``; see the module docstring."""
    register()
    if dtype not in MX_FORMATS:
        raise ValueError(f"MX GEMM: dtype {dtype!r}; expected one of {sorted(MX_FORMATS)}")
    if layout != "nt":
        raise ValueError(f"MX GEMM: layout {layout!r} is not supported: sub-byte elements are packed along K, "
                         "so A and B must both be K-contiguous (layout 'nt')")
    if K % 32 or min(M, N, K) < 1:
        raise ValueError(f"MX GEMM: K must be a positive multiple of 32 (one E8M0 scale per 32 K); got M={M}, N={N}, K={K}")
    fmt = MX_FORMATS[dtype]
    cfg = config or MxGemmConfig()
    op = CATALOG["mfma_scale_f32_16x16x128_f8f6f4"]
    BM, BN, BK = cfg.block_m, cfg.block_n, op.k
    W = SCALE_VECTOR_WORDS[fmt]  # words per lane per MFMA (32 K positions)
    bits, code = _BITS[fmt], FORMAT_CODES[fmt]
    kw, bkw = words_per_row(K, fmt), words_per_row(BK, fmt)  # words per matrix row / per tile row
    if BM % (2 * op.m) or BN % (2 * op.n) or (BM * bkw) % 1024 or (BN * bkw) % 1024 or cfg.lds_pad % 16:
        raise ValueError(f"MX GEMM: block {BM}x{BN} must tile 2 x 2 waves of {op.m}x{op.n} MFMAs with whole 16-byte "
                         f"chunks per thread ({bkw} words per tile row), lds_pad a multiple of 16; got {cfg}")
    WM, WN = BM // 2, BN // 2
    RM, RN = WM // op.m, WN // op.n
    la, na = mfma_fragment(op, "A", (RM, 1), fmt, fmt)
    lb, nb = mfma_fragment(op, "B", (RN, 1), fmt, fmt)
    ls, _ = mfma_fragment(op, "scale_a", (RM, 1))
    lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    grid_m, grid_n = -(-M // BM), -(-N // BN)
    k_steps = -(-K // BK)
    kb = K // 32  # scale bytes per row
    a_chunks, b_chunks = BM * bkw // 1024, BN * bkw // 1024  # 16-byte chunks per thread
    s_rows = -(-(BM + BN) // 256)  # scale rows (A rows, then B rows) per thread
    row_w = bkw + cfg.lds_pad // 4  # LDS row stride in words
    a_row, a_k, b_col, b_k, acc_row, acc_col = lane_maps(op)

    _chunk_a = chunk_loader("uint32", 4, (M, kw), bkw // 4, False, 0, M * kw)
    _chunk_b = chunk_loader("uint32", 4, (N, kw), bkw // 4, False, 0, N * kw)
    word_scales = kb % 4 == 0  # each row's four scales of a tile are one aligned 32-bit word

    def _scale_words(SA_, SB_, m0_, n0_, row, ko):
        """The four scales of tile ``ko`` of scale row ``row`` (A rows first, then B rows) as
        (word from A, word from B), the other one zero; they are ORed when stored to LDS, a step
        later, so that no instruction waits for the loads right after issuing them. ``SA_`` and
        ``SB_`` are flat views of the scale matrices."""
        if word_scales:  # two buffer loads; the one for the other operand is out of range (zero)
            a_ok = T.And(row < BM, m0_ + row < M)
            b_ok = T.And(T.And(row >= BM, row < BM + BN), n0_ + row - BM < N)
            return (T.rocm.buffer_load(SA_.data, M * kb, T.if_then_else(a_ok, (m0_ + row) * kb, BUFFER_OOB), ko * 4, "uint32"),
                    T.rocm.buffer_load(SB_.data, N * kb, T.if_then_else(b_ok, (n0_ + row - BM) * kb, BUFFER_OOB), ko * 4, "uint32"))
        word = T.uint32(0)
        for e in range(4):
            a = guarded_load(SA_, 0, m0_ + row, ko * 4 + e, (M, kb), "uint8")
            b = guarded_load(SB_, 0, n0_ + T.max(row - BM, 0), ko * 4 + e, (N, kb), "uint8")
            byte = T.if_then_else(row < BM, a, T.if_then_else(row < BM + BN, b, T.uint8(0)))
            word = word | (T.cast(byte, "uint32") << T.uint32(8 * e))
        return word, T.uint32(0)

    def _scale_slot(row):
        """LDS word of scale row ``row`` (A rows, then B rows): within each wave's half of the tile,
        row ``16 * i + r`` goes to ``r * R + i``, so a lane's R fragments' scales are adjacent."""
        a_slot = row // WM * WM + row % 16 * RM + row % WM // 16
        b = row - BM
        return T.if_then_else(row < BM, a_slot, BM + b // WN * WN + b % 16 * RN + b % WN // 16)

    # pipeline state: (A, B, SA, SB, ra, rb, rs, Af, Bf, Sa, Sb, Df, m0, n0, wm, wn, tx); stage: (LA, LB, LS, ga, gb, gs)
    @T.macro
    def _load(stage, state, ko):
        LA_, LB_, LS_, ga_, gb_, gs_ = stage
        A_, B_, SA_, SB_, ra_, rb_, rs_, Af_, Bf_, Sa_, Sb_, Df_, m0_, n0_, wm_, wn_, t_ = state
        Ag_ = T.decl_tensor(A_.data, ty_args=[T.Tensor((M * kw,), "uint32")])
        Bg_ = T.decl_tensor(B_.data, ty_args=[T.Tensor((N * kw,), "uint32")])
        SAg_ = T.decl_tensor(SA_.data, ty_args=[T.Tensor((M * kb,), "uint8")])
        SBg_ = T.decl_tensor(SB_.data, ty_args=[T.Tensor((N * kb,), "uint8")])
        for q in T.unroll(a_chunks):
            _chunk_a(ga_, A_, Ag_, 0, m0_, t_, q, ko * bkw)
        for q in T.unroll(b_chunks):
            _chunk_b(gb_, B_, Bg_, 0, n0_, t_, q, ko * bkw)
        for q in T.unroll(s_rows):
            wa, wb = _scale_words(SAg_, SBg_, m0_, n0_, q * 256 + t_, ko)
            gs_[2 * q] = wa
            gs_[2 * q + 1] = wb

    @T.macro
    def _store(stage, state):
        LA_, LB_, LS_, ga_, gb_, gs_ = stage
        A_, B_, SA_, SB_, ra_, rb_, rs_, Af_, Bf_, Sa_, Sb_, Df_, m0_, n0_, wm_, wn_, t_ = state
        for q in T.unroll(a_chunks):
            LA_[0, (q * 256 + t_) // (bkw // 4), T.ramp((q * 256 + t_) % (bkw // 4) * 4, 1, 4)] = ga_[T.ramp(q * 4, 1, 4)]
        for q in T.unroll(b_chunks):
            LB_[0, (q * 256 + t_) // (bkw // 4), T.ramp((q * 256 + t_) % (bkw // 4) * 4, 1, 4)] = gb_[T.ramp(q * 4, 1, 4)]
        for q in T.unroll(s_rows):
            if q * 256 + t_ < BM + BN:
                LS_[0, _scale_slot(q * 256 + t_)] = gs_[2 * q] | gs_[2 * q + 1]

    reads = (RM + RN) * -(-W // 4) + 2  # wide data reads per fragment, one scale read per operand
    _interleave = schedule_hint(interleave_program(
        RM * RN, (RN + 1) * -(-W // 4) + 2, reads, a_chunks + b_chunks + s_rows, a_chunks + b_chunks + 2 * s_rows,
        loads_first=True) if cfg.interleave else None)

    @T.macro
    def _compute(stage, state):
        """Fragments (W words and the scale byte per lane) from LDS, then the scaled MFMAs."""
        LA_, LB_, LS_, ga_, gb_, gs_ = stage
        A_, B_, SA_, SB_, ra_, rb_, rs_, Af_, Bf_, Sa_, Sb_, Df_, m0_, n0_, wm_, wn_, t_ = state
        # one LDS read brings a lane's scale words for all its fragments (see _scale_slot)
        rs_[T.ramp(0, 1, RM)] = LS_[0, T.ramp(wm_ + a_row(t_ % 64) * RM, 1, RM)]
        rs_[T.ramp(RM, 1, RN)] = LS_[0, T.ramp(BM + wn_ + b_col(t_ % 64) * RN, 1, RN)]
        for ni in T.unroll(RN):
            rb_[T.ramp(ni * W, 1, W)] = LB_[0, wn_ + ni * op.n + b_col(t_ % 64), T.ramp(b_k(t_ % 64) * bits // 32, 1, W)]
            rs_[RM + ni] = rs_[RM + ni] >> T.uint32(8) * T.cast(b_k(t_ % 64) // 32, "uint32") & T.uint32(255)
        for mi in T.unroll(RM):
            ra_[T.ramp(mi * W, 1, W)] = LA_[0, wm_ + mi * op.m + a_row(t_ % 64), T.ramp(a_k(t_ % 64) * bits // 32, 1, W)]
            rs_[mi] = rs_[mi] >> T.uint32(8) * T.cast(a_k(t_ % 64) // 32, "uint32") & T.uint32(255)
        T.rocm.tile.apply(T.amdgcn[op.name], Df_, Af_, Bf_, Df_, Sa_, Sb_, scope="wave",
                          cbsz=code, blgp=code, op_sel_a=0, op_sel_b=0)
        _interleave()

    pipeline = k_pipeline(k_steps, _load, _store, _compute)

    @T.function
    def mx_gemm(A: T.Tensor((M, kw), "uint32"), B: T.Tensor((N, kw), "uint32"), SA: T.Tensor((M, kb), "uint8"),
                SB: T.Tensor((N, kb), "uint8"), C: T.Tensor((M, N), "float32")):
        with T.device_entry():
            bid = T.launch_thread("blockIdx.x", grid_m * grid_n)
            tx = T.launch_thread("threadIdx.x", 256)
            LA0 = T.alloc_tensor(ty_args=[lds_stage((BM, row_w), "uint32")])
            LA1 = T.alloc_tensor(ty_args=[lds_stage((BM, row_w), "uint32")])
            LB0 = T.alloc_tensor(ty_args=[lds_stage((BN, row_w), "uint32")])
            LB1 = T.alloc_tensor(ty_args=[lds_stage((BN, row_w), "uint32")])
            LS0 = T.alloc_tensor(ty_args=[lds_stage((BM + BN,), "uint32")])
            LS1 = T.alloc_tensor(ty_args=[lds_stage((BM + BN,), "uint32")])
            ga0 = T.alloc_tensor(ty_args=[T.Tensor((a_chunks * 4,), "uint32", scope="local")])
            gb0 = T.alloc_tensor(ty_args=[T.Tensor((b_chunks * 4,), "uint32", scope="local")])
            gs0 = T.alloc_tensor(ty_args=[T.Tensor((2 * s_rows,), "uint32", scope="local")])
            ga1 = T.alloc_tensor(ty_args=[T.Tensor((a_chunks * 4,), "uint32", scope="local")])
            gb1 = T.alloc_tensor(ty_args=[T.Tensor((b_chunks * 4,), "uint32", scope="local")])
            gs1 = T.alloc_tensor(ty_args=[T.Tensor((2 * s_rows,), "uint32", scope="local")])
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint32", scope="local")])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local")])
            rs = T.alloc_tensor(ty_args=[T.Tensor((RM + RN,), "uint32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, 4, W), "uint32", scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((RN, 1, op.n, 4, W), "uint32", scope="local", layout=lb)])
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, 4), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([RM]), ty_args=[T.Tensor((RN, 1, op.n, 4), "uint32", scope="local", layout=lsb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), "float32", scope="local", layout=ld)])
            m0 = bid // grid_n * BM
            n0 = bid % grid_n * BN
            wm = tx // 128 % 2 * WM
            wn = tx // 64 % 2 * WN
            lane = tx % 64
            for r in T.unroll(nd):
                rd[r] = T.float32(0)
            pipeline((LA0, LB0, LS0, ga0, gb0, gs0), (LA1, LB1, LS1, ga1, gb1, gs1),
                     (A, B, SA, SB, ra, rb, rs, Af, Bf, Sa, Sb, Df, m0, n0, wm, wn, tx))
            for mi in T.unroll(RM):
                for ni in T.unroll(RN):
                    for r in T.unroll(op.acc_elems):
                        if T.And(m0 + wm + mi * op.m + acc_row(lane, r) < M, n0 + wn + ni * op.n + acc_col(lane, r) < N):
                            C[m0 + wm + mi * op.m + acc_row(lane, r), n0 + wn + ni * op.n + acc_col(lane, r)] = rd[(mi * RN + ni) * op.acc_elems + r]

    return mx_gemm


def pack_rows(values, fmt: str):
    """(rows, K) values in the format's dtype -> (rows, K*bits/32) uint32 words (the storage above)."""
    from ..isa.formats import to_words

    return to_words(fmt, values)
