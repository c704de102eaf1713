"""gfx950 MX block-scaled GEMM through the scaled MFMA: ``C = (A * 2^(sa-127)) @ (B * 2^(sb-127))``.

Formats (OCP MX): ``mxfp8`` (E4M3), ``mxbf8`` (E5M2), ``mxfp6`` (E2M3), ``mxbf6`` (E3M2),
``mxfp4`` (E2M1), one E8M0 scale per 32 consecutive K elements of a row of A / column of B.

Storage, every layout: each operand is the matrix its layout names (``n``: A ``M x K``, B
``K x N``; ``t``: A ``K x M``, B ``N x K``), row-major, each row packed little-endian into
``uint32`` words along its contiguous dimension (element ``j`` of a row at bits
``[j*bits, (j+1)*bits)``, the row padded with zero bits to whole words): ``pack_operands`` /
``pack_rows``, i.e. ``isa.formats.to_words`` per row. So a K-contiguous operand (A of ``n?``, B of
``?t``) is K-packed (fp4: two K values per byte), and an M/N-contiguous one (A of ``t?``, B of
``?n``) is M/N-packed (fp4: two M/N values per byte): that is what ``ds_read_tr4/tr6/tr8`` read,
16 (tr8: 8) consecutive M/N elements of one K row per lane chunk, and hand each lane one M/N
position's consecutive K values, K-packed as the scaled MFMA takes them. Scales, every layout:
``(M, K/32)`` and ``(N, K/32)`` uint8 E8M0 codes. K must be a multiple of 32.

Structure: the dense kernel's (``gfx950_gemm``): 256 threads in 2 x 2 waves of ``16x16x128``
scaled MFMAs over ``block_k``-wide K tiles (one or two MFMA K steps), padded LDS rows, and
``pipeline.fragment_pipeline``: two LDS stages and two fragment register sets, so that a period
stores one tile, loads another, reads a third's fragments and runs the MFMAs of a fourth, then ends
with the only wait of the loop; ``prefetch_program`` places the memory instructions between the
MFMAs and the fragment reads are emitted in its order (``prefetch_reads``), and a scheduling fence
per period keeps LLVM from moving ALU work on loaded registers (scale bytes, tr6 copies) or MFMAs
into the period before, where they would need waits of their own. The pipeline's records:
``MxStage``, ``MxStaging``, ``MxFragments``, ``MxWaveState``. The per-operand plan (``MxOperand``)
fixes how a tile travels:

* K-contiguous: 16-byte ``buffer_load_dwordx4`` chunks, LDS rows of packed K words, and each lane
  reads its 32 K positions (4/6/8 words) with wide LDS reads (fp6: a 16- and an 8-byte read, the
  rows padded so that 16 rows lie beyond one ``ds_read2_b64``, which would otherwise pair the
  8-byte reads of two fragments and leave copies).
* M/N-contiguous: the tile is stored in LDS with K rows and M/N contiguous, in slots of one
  ``ds_read_tr`` chunk (tr6: 12 bytes in a 16-byte slot, its LDS alignment, each chunk one
  ``buffer_load_dwordx3`` and one 12-byte LDS store); fp4/fp6 fragments come from the tile form of
  ``ds_read_tr4/tr6`` (two calls per 32 K, 2/3 words each), fp8/bf8 fragments are ``uint8``
  element tiles from the operand form of ``ds_read_tr8`` (four calls). gfx950 register tuples
  are even-aligned, so the second ``ds_read_b96_tr_b6`` of a 6-register fp6 operand cannot land
  in place (it would start at an odd register): a tr6 fragment takes an 8-register slot, one half
  at each even quarter, and the MFMA's period copies the second half next to the first (three
  ``v_mov_b32`` per fragment, after the period's wait).

The E8M0 scales of a tile row (four per 128 K) travel as a 32-bit word (an A and a B word per
thread, one of them out of range, ORed at the store) and are stored to LDS byte by byte, so that
the word a lane reads holds its scales for four fragments (K group of its lane, byte = fragment
mod 4) and each MFMA picks its byte with ``op_sel``: one scale register per four MFMA operands and
no byte extraction. The MFMAs see those registers as ``uint8`` scale tiles (``patterns.mfma``), from
whose byte positions the pattern takes each MFMA's register and ``op_sel``, so that one
``tile.apply`` issues every MFMA of a K step (``_scaled_mfmas``; one per A fragment where A's slots
are split, so that each fragment's copy precedes its own MFMAs).

Edges: global loads outside the matrices read zeros (K rows and K words past the end), M/N
positions past the end only reach masked outputs; the epilogue stores only inside C.
"""

from __future__ import annotations

import attrs
import numpy as np
from tvm_tirx.script import tirx as T

from ..isa import CATALOG
from ..isa.formats import fmt as format_of
from ..isa.formats import to_words
from ..isa.mfma_table import SCALE_VECTOR_WORDS
from ..rocm.build import register
from ..patterns.layouts import mfma_fragment, tr_fragment
from ..patterns.wave import BUFFER_OOB
from ..tirx_private import transpile_once
from .gfx950_plan import (FORMAT_CODES, LAYOUTS, MFMA, MX_FORMATS, THREADS, MxGemmConfig, MxOperand, _check,
                          _scale_words_per_stage, default_mx_config, lane_maps, lds_bytes, operand_plan)
from .pipeline import (chunk_loader, fragment_pipeline, guarded_load, lds_stage, prefetch_program, prefetch_reads,
                       schedule_hint)


@attrs.frozen(eq=False)
class MxStage:
    """One LDS stage of the K-tile pipeline (``pipeline.fragment_pipeline``)."""

    lds_a: object  # the A tile (``MxOperand.lds_shape``)
    lds_b: object  # the B tile
    lds_s: object  # the scale words of A and B (``_scale_index``)


@attrs.frozen(eq=False)
class MxStaging:
    """One register set staging a K tile's global loads on their way to LDS."""

    regs_a: object  # the thread's A units (``MxOperand.units`` x ``unit_words``)
    regs_b: object  # its B units
    regs_s: object  # its scale words (per scale row and K step: an A word and a B word)


@attrs.frozen(eq=False)
class MxFragments:
    """One register set of MFMA operands: every K step of one K tile."""

    regs_a: object  # the A fragments (RM x RK MFMA operands)
    regs_b: object  # the B fragments (RN x RK)
    regs_s: object  # the lane's scale words: per K step, one per four fragments of A, then of B (``op_sel``)


@attrs.frozen(eq=False)
class MxWaveState:
    """What every pipeline period of a thread works on besides its stage and register sets."""

    A: object  # the A words
    B: object  # the B words
    SA: object  # the A scales
    SB: object  # the B scales
    Df: object  # the accumulators as (RM, RN, m, n)
    m0: object  # the workgroup's first row of C
    n0: object  # the workgroup's first column of C
    wm: object  # the wave's first row within the tile
    wn: object  # the wave's first column within the tile
    tx: object  # thread index in the workgroup


def _lds_tensor(plan: MxOperand):
    """The operand's LDS stage: row-major K words, or bytes; the tile form's 5-D view of K rows."""
    if len(plan.lds_shape) == 2:
        return lds_stage(plan.lds_shape, plan.lds_dtype)
    rk, calls, groups, rows, pitch = plan.lds_shape
    strides = (rk * 128 * pitch, 128 * pitch, 16 * pitch, 32 * pitch, pitch, 1)
    return T.Tensor((1, *plan.lds_shape), plan.lds_dtype, scope="shared", align=16,
                    layout=T.TileLayout(T.S[(1, *plan.lds_shape) : strides]))


def _span(base, n: int):
    """Index of ``n`` consecutive elements from ``base`` (a scalar index for one)."""
    return base if n == 1 else T.ramp(base, 1, n)


@transpile_once
def gfx950_mx_gemm(M: int, N: int, K: int, dtype: str = "mxfp8", layout: str = "nt", config: MxGemmConfig | None = None):
    """PrimFunc ``(A words, B words, SA, SB, C float32)``; see the module docstring."""
    register()
    if dtype not in MX_FORMATS:
        raise ValueError(f"MX GEMM: dtype {dtype!r}; expected one of {sorted(MX_FORMATS)}")
    if layout not in LAYOUTS:
        raise ValueError(f"MX GEMM: layout {layout!r}; expected one of {LAYOUTS}")
    if K % 32 or min(M, N, K) < 1:
        raise ValueError(f"MX GEMM: K must be a positive multiple of 32 (one E8M0 scale per 32 K); got M={M}, N={N}, K={K}")
    fmt = MX_FORMATS[dtype]
    cfg = config or default_mx_config(dtype, layout)
    op = CATALOG[MFMA]
    BM, BN, BK = cfg.block_m, cfg.block_n, cfg.block_k
    if BM % (2 * op.m) or BN % (2 * op.n) or BK not in (op.k, 2 * op.k) or cfg.lds_pad % 16 or cfg.load_ahead not in (1, 2):
        raise ValueError(f"MX GEMM: block {BM}x{BN}x{BK} must tile 2 x 2 waves of {op.m}x{op.n}x{op.k} MFMAs, "
                         f"block_k {op.k} or {2 * op.k}, lds_pad a multiple of 16, load_ahead 1 or 2; got {cfg}")
    pa = operand_plan("A", layout[0] == "n", M, K, BM, BK, fmt, cfg.lds_pad)
    pb = operand_plan("B", layout[1] == "t", N, K, BN, BK, fmt, cfg.lds_pad)
    _check(pa, cfg)
    _check(pb, cfg)
    W = SCALE_VECTOR_WORDS[fmt]  # words per lane per MFMA (32 K positions)
    bits, code = format_of(fmt).bits, FORMAT_CODES[fmt]
    WM, WN = BM // 2, BN // 2
    RM, RN, RK = WM // op.m, WN // op.n, BK // op.k
    byte_a, byte_b = bits == 8 and not pa.k_contiguous, bits == 8 and not pb.k_contiguous
    # registers per fragment: 32 bytes, or W words; 6-word fragments from two ds_read_b96_tr_b6 take 8, so
    # that each half lands on an even register (gfx950 register tuples are even-aligned)
    slot_a, slot_b = (op.a_elems // 4 if byte else 8 if W == 6 and plan.tr else W
                      for byte, plan in ((byte_a, pa), (byte_b, pb)))
    na, nb = RM * RK * slot_a * (4 if byte_a else 1), RN * RK * slot_b * (4 if byte_b else 1)  # fragment set: registers or bytes
    ls, _ = mfma_fragment(op, "scale_a", (RM, 1))  # uint8: fragment i's scale in byte i % 4 of word i // 4
    lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    a_shape = (M, pa.row_words) if pa.k_contiguous else (K, pa.row_words)
    b_shape = (N, pb.row_words) if pb.k_contiguous else (K, pb.row_words)
    grid_m, grid_n = -(-M // BM), -(-N // BN)
    k_steps = -(-K // BK)
    kb = K // 32  # scale bytes per row
    s_rows = -(-(BM + BN) // THREADS)  # scale rows (A rows, then B rows) per thread
    a_row, a_k, b_col, b_k, acc_row, acc_col = lane_maps(op)
    word_scales = kb % 4 == 0  # each row's four scales of an MFMA K step are one aligned 32-bit word

    def _scale_words_of(SA_, SB_, m0_, n0_, row, ko, kk):
        """The four scales (K groups) of K step ``kk`` of tile ``ko`` of scale row ``row`` (A rows
        first, then B rows) as two words whose OR is the row's (the other is zero, as are rows past
        the matrices), ORed by the store. ``SA_`` and ``SB_`` are flat views of the scale matrices."""
        k4 = (ko * RK + kk) * 4  # first scale byte
        if word_scales:  # two buffer loads; the one for the other operand is out of range (zero)
            a_ok = T.And(T.And(row < BM, m0_ + row < M), k4 < kb)
            b_ok = T.And(T.And(T.And(row >= BM, row < BM + BN), n0_ + row - BM < N), k4 < kb)
            return (T.rocm.buffer_load(SA_.data, M * kb, T.if_then_else(a_ok, (m0_ + row) * kb, BUFFER_OOB), k4, "uint32"),
                    T.rocm.buffer_load(SB_.data, N * kb, T.if_then_else(b_ok, (n0_ + row - BM) * kb, BUFFER_OOB), k4, "uint32"))
        word = T.uint32(0)
        for e in range(4):
            a = guarded_load(SA_, 0, m0_ + row, k4 + e, (M, kb), "uint8")
            b = guarded_load(SB_, 0, n0_ + T.max(row - BM, 0), k4 + e, (N, kb), "uint8")
            byte = T.if_then_else(row < BM, a, T.if_then_else(row < BM + BN, b, T.uint8(0)))
            word = word | (T.cast(byte, "uint32") << T.uint32(8 * e))
        return word, T.uint32(0)

    RWa, RWb = -(-RM // 4), -(-RN // 4)  # scale words per lane and K step: one per four fragments

    def _scale_slot(h, r, g, RW: int, base: int):
        """First LDS scale word of wave half ``h``, lane row ``r`` and K group ``g`` of an operand
        (``RW`` words per K step; A from word 0, B from ``base``): the ``RK * RW`` words a lane reads."""
        return base + ((h * op.m + r) * 4 + g) * RK * RW

    def _scale_words(L, word, n: int):
        """``n`` words of the LDS scale bytes ``L`` from word ``word``."""
        return T.reinterpret(L[0, T.ramp(4 * word, 1, 4 * n)], ty="uint32" if n == 1 else f"uint32x{n}")

    def _scale_byte(row, g, kk):
        """LDS byte of the scale of row ``row`` (A rows, then B rows), K group ``g`` and K step ``kk``:
        fragment ``i`` (row ``16 i + r`` of its wave half) is byte ``i % 4`` of word ``i // 4``, so that
        one word holds a lane's scales of four MFMAs, selected by ``op_sel``; rows past the tile go to
        the spare words."""
        b, b_base = row - BM, 2 * op.m * 4 * RK * RWa
        a_word = _scale_slot(row // WM, row % op.m, g, RWa, 0) + kk * RWa + row % WM // op.m // 4
        b_word = _scale_slot(b // WN, b % op.n, g, RWb, b_base) + kk * RWb + b % WN // op.n // 4
        spare = 4 * (b_base + 2 * op.n * 4 * RK * RWb + g * RK + kk)
        return T.if_then_else(row < BM, 4 * a_word + row % WM // op.m % 4,
                              T.if_then_else(row < BM + BN, 4 * b_word + b % WN // op.n % 4, spare))

    def _copy(plan: MxOperand):
        """Macros ``load(regs, X, Xg, tile0, t, q, k0)`` (unit ``q`` of thread ``t`` of the tile at
        M/N ``tile0`` (elements), K ``k0``: global -> registers, zeros outside) and ``store(L, regs, t,
        q)`` (registers -> the LDS stage ``L``)."""
        if plan.k_contiguous:
            chunk = chunk_loader("uint32", 4, (plan.rows, plan.row_words), plan.tile_words // 4, False, 0,
                                 plan.rows * plan.row_words)
            cpr = plan.tile_words // 4

            @T.macro
            def load(regs, X, Xg, tile0, t, q, k0):
                chunk(regs, X, Xg, 0, tile0, t, q, k0 * bits // 32)

            @T.macro
            def store(L, regs, t, q):
                L[0, (q * THREADS + t) // cpr, T.ramp((q * THREADS + t) % cpr * 4, 1, 4)] = regs[T.ramp(q * 4, 1, 4)]

            return load, store
        per, U = plan.tile_words // plan.unit_words, plan.unit_words
        nbytes = plan.rows * plan.row_words * 4
        if plan.row_words % U == 0 and nbytes < 2**31:  # every unit wholly inside or outside a row: one buffer load
            @T.macro
            def load(regs, X, Xg, tile0, t, q, k0):
                row, col = (q * THREADS + t) // per, tile0 * bits // 32 + (q * THREADS + t) % per * U
                inside = T.And(k0 + row < plan.rows, col < plan.row_words)
                voff = T.if_then_else(inside, (row * plan.row_words + col) * 4, T.int32(BUFFER_OOB))
                regs[T.ramp(q * U, 1, U)] = T.rocm.buffer_load(X.data, nbytes, voff, k0 * plan.row_words * 4, f"uint32x{U}")
        else:
            @T.macro
            def load(regs, X, Xg, tile0, t, q, k0):
                row, col = (q * THREADS + t) // per, tile0 * bits // 32 + (q * THREADS + t) % per * U
                for e in T.unroll(U):
                    regs[q * U + e] = guarded_load(Xg, 0, k0 + row, col + e, (plan.rows, plan.row_words), "uint32")

        # a unit is 16 bytes of unpadded chunks (tr8, tr4) or one 12-byte tr6 chunk in its 16-byte slot
        if len(plan.lds_shape) == 2:
            @T.macro
            def store(L, regs, t, q):
                row, u = (q * THREADS + t) // per, (q * THREADS + t) % per
                L[0, row, T.ramp(u * 16, 1, U * 4)] = T.reinterpret(regs[T.ramp(q * U, 1, U)], ty=f"uint8x{U * 4}")
        else:
            @T.macro
            def store(L, regs, t, q):
                row, u = (q * THREADS + t) // per, (q * THREADS + t) % per
                L[0, row // 128, row % 32 // 16, row % 128 // 32, row % 16, T.ramp(u * 16, 1, U * 4)] = \
                    T.reinterpret(regs[T.ramp(q * U, 1, U)], ty=f"uint8x{U * 4}")
        return load, store

    _load_a, _store_a = _copy(pa)
    _load_b, _store_b = _copy(pb)

    def _frag_loader(plan: MxOperand, lane_mn, lane_k, P: int):
        """Macro ``frag(regs, L, i, kk, w0, lane)``: MFMA fragment ``i`` (the wave's tile starts at
        ``w0`` along M/N) of K step ``kk`` from the LDS stage ``L`` into its slot of ``P`` registers
        of ``regs`` (module docstring)."""
        ext = op.m
        if plan.k_contiguous:
            @T.macro
            def frag(regs, L, i, kk, w0, lane):
                regs[T.ramp((i * RK + kk) * P, 1, W)] = L[0, w0 + i * ext + lane_mn(lane),
                                                          T.ramp((kk * op.k + lane_k(lane)) * bits // 32, 1, W)]
            return frag
        tr = CATALOG[plan.tr]
        if bits == 8:
            atom, _ = mfma_fragment(op, plan.name, byte_tiles=True)

            @T.macro
            def frag(regs, L, i, kk, w0, lane):
                V = T.decl_tensor(regs.ptr_to([(i * RK + kk) * P * 4]),
                                  ty_args=[T.Tensor((1, ext, op.k), "uint8", scope="local", layout=atom)])
                T.rocm.tile.apply(T.amdgcn[tr.name], V, L[0:1, kk * op.k : kk * op.k + op.k, w0 + i * ext : w0 + i * ext + ext],
                                  scope="wave", mfma=MFMA, operand=plan.name)
            return frag
        words, nbytes = tr.load_bits // 32, tr.load_bits // 8
        lt, _ = tr_fragment(tr, (1, 1, 1))

        @T.macro
        def frag(regs, L, i, kk, w0, lane):
            for j in T.unroll(2):  # call j: the lane's K positions 16 j .. 16 j + 15, at the half j of the slot
                D = T.decl_tensor(regs.ptr_to([(i * RK + kk) * P + j * (P // 2)]),
                                  ty_args=[T.Tensor((1, 1, 1, 4, 16, words), "uint32", scope="local", layout=lt)])
                cb = (w0 // tr.elements + i) * plan.slot_bytes
                T.rocm.tile.apply(T.amdgcn[tr.name], D, L[0:1, kk : kk + 1, j : j + 1, 0:4, 0:16, cb : cb + nbytes], scope="wave")
        return frag

    _frag_a = _frag_loader(pa, a_row, a_k, slot_a)
    _frag_b = _frag_loader(pb, b_col, b_k, slot_b)

    def _operand(plan: MxOperand, name: str, slot: int, total: int, R: int, byte: bool):
        """Macro ``operand(regs, kk, i0, use, x)``: runs ``use(V, x)`` with ``V`` the ``(R, 1, *atom)``
        MFMA operands of fragments ``i0 ..`` of K step ``kk`` of the register set ``regs`` (``total``
        fragments; fragment ``i`` in its slot of ``slot`` registers, or bytes for byte tiles, at
        ``i * RK + kk``): a view of the set itself, or for a split 6-word slot (two ds_read_tr6 halves, 4
        registers apart) a copy, whose three moves per fragment run in the period of the MFMAs, after
        its wait."""
        elems, dt = (op.a_elems, "uint8") if byte else (W, "uint32")
        mn = op.m if name == "A" else op.n
        atom = (mn, op.k) if byte else (mn, 4, W)
        if slot == elems:
            whole, _ = mfma_fragment(op, name, (total, RK), fmt, fmt, byte_tiles=byte)

            @T.macro
            def operand(regs, kk, i0, use, x):
                V = T.decl_tensor(regs.ptr_to([0]), ty_args=[T.Tensor((total, RK, *atom), dt, scope="local", layout=whole)])
                use(V[i0 : i0 + R, kk : kk + 1], x)
            return operand
        frags, _ = mfma_fragment(op, name, (R, 1), fmt, fmt, byte_tiles=byte)
        half = elems // 2  # the split slot: halves at registers 0 and slot // 2

        @T.macro
        def operand(regs, kk, i0, use, x):
            c = T.alloc_tensor(ty_args=[T.Tensor((R * elems,), dt, scope="local")])
            for i in T.unroll(R):
                c[T.ramp(i * elems, 1, half)] = regs[T.ramp(((i0 + i) * RK + kk) * slot, 1, half)]
                c[T.ramp(i * elems + half, 1, half)] = regs[T.ramp(((i0 + i) * RK + kk) * slot + slot // 2, 1, half)]
            V = T.decl_tensor(c.ptr_to([0]), ty_args=[T.Tensor((R, 1, *atom), dt, scope="local", layout=frags)])
            use(V, x)
        return operand

    # a split A slot is copied fragment by fragment, each right before its MFMAs (one tile.apply per
    # fragment of A); every other operand feeds all the MFMAs of a K step (one tile.apply)
    split_a = pa.tr is not None and bits == 6
    a_rows = [(mi, 1) for mi in range(RM)] if split_a else [(0, RM)]
    a_dt, b_dt = ("uint8" if byte_a else "uint32"), ("uint8" if byte_b else "uint32")  # fragment sets
    _operand_a = _operand(pa, "A", slot_a * (4 if byte_a else 1), RM, a_rows[0][1], byte_a)
    _operand_b = _operand(pb, "B", slot_b * (4 if byte_b else 1), RN, RN, byte_b)

    @T.macro
    def _load(g, s, ko):
        """Every thread's share of K tile ``ko`` (A and B units, scale words): global -> staging registers."""
        Ag_ = T.decl_tensor(s.A.data, ty_args=[T.Tensor((a_shape[0] * a_shape[1],), "uint32")])
        Bg_ = T.decl_tensor(s.B.data, ty_args=[T.Tensor((b_shape[0] * b_shape[1],), "uint32")])
        SAg_ = T.decl_tensor(s.SA.data, ty_args=[T.Tensor((M * kb,), "uint8")])
        SBg_ = T.decl_tensor(s.SB.data, ty_args=[T.Tensor((N * kb,), "uint8")])
        for q in T.unroll(pa.units):
            _load_a(g.regs_a, s.A, Ag_, s.m0, s.tx, q, ko * BK)
        for q in T.unroll(pb.units):
            _load_b(g.regs_b, s.B, Bg_, s.n0, s.tx, q, ko * BK)
        for q in T.unroll(s_rows):
            for kk in T.unroll(RK):
                wa, wb = _scale_words_of(SAg_, SBg_, s.m0, s.n0, q * THREADS + s.tx, ko, kk)
                g.regs_s[2 * (q * RK + kk)] = wa
                g.regs_s[2 * (q * RK + kk) + 1] = wb

    @T.macro
    def _store(stage, g, s):
        """The staging registers -> the stage's LDS (A, B and the scale words)."""
        for q in T.unroll(pa.units):
            _store_a(stage.lds_a, g.regs_a, s.tx, q)
        for q in T.unroll(pb.units):
            _store_b(stage.lds_b, g.regs_b, s.tx, q)
        for q in T.unroll(s_rows):
            for kk in T.unroll(RK):
                for gi in T.unroll(4):
                    stage.lds_s[0, _scale_byte(q * THREADS + s.tx, gi, kk)] = T.cast(
                        (g.regs_s[2 * (q * RK + kk)] | g.regs_s[2 * (q * RK + kk) + 1]) >> T.uint32(8) * T.cast(gi, "uint32"), "uint8")

    def _in_order(macros):
        """Macro ``run(x, s)``: the ``macros`` (each of two arguments) one after the other, for
        sequences whose members differ in Python values (immediates, static indices)."""
        @T.macro
        def run(x, s):
            _ = [macro(x, s) for macro in macros]
        return run

    def _frag_read(operand: str, kk: int, i: int):
        """Macro ``read((stage, f), s)``: fragment ``i`` of K step ``kk`` of ``operand``."""
        if operand == "A":
            @T.macro
            def read(sf, s):
                _frag_a(sf[1].regs_a, sf[0].lds_a, i, kk, s.wm, s.tx % 64)
        else:
            @T.macro
            def read(sf, s):
                _frag_b(sf[1].regs_b, sf[0].lds_b, i, kk, s.wn, s.tx % 64)
        return read

    # the order prefetch_program places them in (each read group then takes its own fragment's reads)
    _frag_reads = _in_order([_frag_read(*frag) for frag in prefetch_reads((RM, RN, RK))])

    @T.macro
    def _read(stage, f, s):
        """The stage's fragments (W words, or 32 bytes, per lane and MFMA operand) and the lane's scale
        words (one LDS read per operand for all its fragments: ``_scale_byte``) -> the register set."""
        lane = s.tx % 64
        _frag_reads((stage, f), s)
        f.regs_s[_span(0, RK * RWa)] = _scale_words(stage.lds_s, _scale_slot(s.wm // WM, a_row(lane), a_k(lane) // 32, RWa, 0),
                                                    RK * RWa)
        f.regs_s[_span(RK * RWa, RK * RWb)] = _scale_words(
            stage.lds_s, _scale_slot(s.wn // WN, b_col(lane), b_k(lane) // 32, RWb, 2 * op.m * 4 * RK * RWa), RK * RWb)

    def _scaled_mfmas(kk: int, i0: int, R: int):
        """Macro ``mfmas(f, s)``: the scaled MFMAs of K step ``kk`` and A fragments ``i0 .. i0 + R``
        (``mi`` outer, ``ni`` inner; ``_operand``); the scales as bytes, so that each MFMA's ``op_sel``
        picks its byte (``_scale_byte``)."""
        @T.macro
        def with_b(Bv, x):
            Av, f, s = x
            Sa = T.decl_tensor(f.regs_s.ptr_to([kk * RWa]),
                               ty_args=[T.Tensor((RM, 1, op.m, 4), "uint8", scope="local", layout=ls)])
            Sb = T.decl_tensor(f.regs_s.ptr_to([RK * RWa + kk * RWb]),
                               ty_args=[T.Tensor((RN, 1, op.n, 4), "uint8", scope="local", layout=lsb)])
            T.rocm.tile.apply(T.amdgcn[op.name], s.Df[i0 : i0 + R], Av, Bv, s.Df[i0 : i0 + R], Sa[i0 : i0 + R], Sb,
                              scope="wave", cbsz=code, blgp=code)

        @T.macro
        def with_a(Av, x):
            _operand_b(x[0].regs_b, kk, 0, with_b, (Av, x[0], x[1]))

        @T.macro
        def mfmas(f, s):
            _operand_a(f.regs_a, kk, i0, with_a, (f, s))
        return mfmas

    _mfmas = _in_order([_scaled_mfmas(kk, i0, R) for kk in range(RK) for i0, R in a_rows])

    @T.macro
    def _mma(f, s):
        """The scaled MFMAs of a register set, with the period's memory instructions between them."""
        _mfmas(f, s)
        _interleave()

    s_stores, s_loads = 4 * s_rows * RK, 2 * s_rows * RK  # scale-byte LDS stores and global loads per thread and tile
    scale_words = _scale_words_per_stage(cfg)
    _interleave = schedule_hint(prefetch_program((RM, RN, RK), pa.reads, pb.reads, pa.units + pb.units + s_stores,
                                                 pa.units + pb.units + s_loads) if cfg.interleave else None)
    pipeline = fragment_pipeline(k_steps, _load, _store, _read, _mma, cfg.load_ahead, pa.units + pb.units + s_loads,
                                  fence=True)
    lds_a, lds_b, lds_s = _lds_tensor(pa), _lds_tensor(pb), lds_stage((4 * scale_words,), "uint8")

    def _staging_sets(first: MxStaging, second: MxStaging) -> tuple[MxStaging, MxStaging]:
        """The staging register sets of even and odd tiles: one set when loads are one tile ahead."""
        return (first, second) if cfg.load_ahead == 2 else (first, first)

    @T.function
    def mx_gemm(A: T.Tensor(a_shape, "uint32"), B: T.Tensor(b_shape, "uint32"), SA: T.Tensor((M, kb), "uint8"),
                SB: T.Tensor((N, kb), "uint8"), C: T.Tensor((M, N), "float32")):
        with T.device_entry():
            bid = T.launch_thread("blockIdx.x", grid_m * grid_n)
            tx = T.launch_thread("threadIdx.x", THREADS)
            LA0 = T.alloc_tensor(ty_args=[lds_a])
            LA1 = T.alloc_tensor(ty_args=[lds_a])
            LB0 = T.alloc_tensor(ty_args=[lds_b])
            LB1 = T.alloc_tensor(ty_args=[lds_b])
            LS0 = T.alloc_tensor(ty_args=[lds_s])
            LS1 = T.alloc_tensor(ty_args=[lds_s])
            ga0 = T.alloc_tensor(ty_args=[T.Tensor((pa.units * pa.unit_words,), "uint32", scope="local")])
            gb0 = T.alloc_tensor(ty_args=[T.Tensor((pb.units * pb.unit_words,), "uint32", scope="local")])
            gs0 = T.alloc_tensor(ty_args=[T.Tensor((s_loads,), "uint32", scope="local")])
            ga1 = T.alloc_tensor(ty_args=[T.Tensor((pa.units * pa.unit_words,), "uint32", scope="local")])
            gb1 = T.alloc_tensor(ty_args=[T.Tensor((pb.units * pb.unit_words,), "uint32", scope="local")])
            gs1 = T.alloc_tensor(ty_args=[T.Tensor((s_loads,), "uint32", scope="local")])
            ra0 = T.alloc_tensor(ty_args=[T.Tensor((na,), a_dt, scope="local")])
            rb0 = T.alloc_tensor(ty_args=[T.Tensor((nb,), b_dt, scope="local")])
            rs0 = T.alloc_tensor(ty_args=[T.Tensor(((RWa + RWb) * RK,), "uint32", scope="local")])
            ra1 = T.alloc_tensor(ty_args=[T.Tensor((na,), a_dt, scope="local")])
            rb1 = T.alloc_tensor(ty_args=[T.Tensor((nb,), b_dt, scope="local")])
            rs1 = T.alloc_tensor(ty_args=[T.Tensor(((RWa + RWb) * RK,), "uint32", scope="local")])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), "float32", scope="local", layout=ld)])
            m0 = bid // grid_n * BM
            n0 = bid % grid_n * BN
            wm = tx // 128 % 2 * WM
            wn = tx // 64 % 2 * WN
            lane = tx % 64
            for r in T.unroll(nd):
                rd[r] = T.float32(0)
            pipeline((MxStage(LA0, LB0, LS0), MxStage(LA1, LB1, LS1)),
                     _staging_sets(MxStaging(ga0, gb0, gs0), MxStaging(ga1, gb1, gs1)),
                     (MxFragments(ra0, rb0, rs0), MxFragments(ra1, rb1, rs1)),
                     MxWaveState(A, B, SA, SB, Df, m0, n0, wm, wn, tx))
            for mi in T.unroll(RM):
                for ni in T.unroll(RN):
                    for r in T.unroll(op.acc_elems):
                        if T.And(m0 + wm + mi * op.m + acc_row(lane, r) < M, n0 + wn + ni * op.n + acc_col(lane, r) < N):
                            C[m0 + wm + mi * op.m + acc_row(lane, r), n0 + wn + ni * op.n + acc_col(lane, r)] = rd[(mi * RN + ni) * op.acc_elems + r]

    return mx_gemm


def pack_rows(values, fmt: str):
    """(rows, cols) values in the format's dtype -> (rows, ceil(cols*bits/32)) uint32 words: each row
    packed little-endian along its columns (the storage above; ``isa.formats.to_words``)."""
    return to_words(fmt, np.asarray(values))


def pack_operands(a, b, fmt: str, layout: str):
    """The kernel's A and B words for ``a`` (M x K) and ``b`` (K x N) in the format's dtype, stored as
    ``layout`` names (module docstring)."""
    A = a.T if layout[0] == "t" else a
    B = b.T if layout[1] == "t" else b
    return pack_rows(np.ascontiguousarray(A), fmt), pack_rows(np.ascontiguousarray(B), fmt)


__all__ = ["MX_FORMATS", "MxGemmConfig", "MxOperand", "default_mx_config", "gfx950_mx_gemm", "lds_bytes", "operand_plan",
           "pack_operands", "pack_rows"]
