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
``kernels.gfx950.pipeline.fragment_pipeline``: two LDS stages and two fragment register sets, so that a period
stores one tile, loads another, reads a third's fragments and runs the MFMAs of a fourth, then ends
with the only wait of the loop; ``prefetch_program`` places the memory instructions between the
MFMAs and the fragment reads are emitted in its order (``prefetch_reads``), and a scheduling fence
per period keeps LLVM from moving ALU work on loaded registers (scale bytes, tr6 copies) or MFMAs
into the period before, where they would need waits of their own. ``plan_mx_gemm`` (``gfx950_plan``,
no TIRx) decides the kernel as a frozen ``MxGemmPlan`` (validation included); ``emit_mx_gemm`` spells
it with the emitter shared with the dense GEMM (``gfx950_emit``: its fragment readers, MFMA step,
tile origin, epilogue store and pipeline records). The per-operand plan (``MxOperand``) fixes how a
tile travels:

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
``tile.apply`` issues every MFMA of a K step (``_mfmas``; one per A fragment where A's slots
are split, so that each fragment's copy precedes its own MFMAs).

Edges: global loads outside the matrices read zeros (K rows and K words past the end), M/N
positions past the end only reach masked outputs; the epilogue stores only inside C.
"""

from __future__ import annotations

import numpy as np
from tvm_tirx.script import tirx as T

from ...isa import CATALOG
from ...isa.formats import fmt as format_of
from ...isa.formats import to_words
from ...patterns.layouts import mfma_fragment
from ...patterns.wave import BUFFER_OOB
from ...tirx_private import transpile_once
from ..gemm.epilogue import Fusion
from .emit import (THREADS, Fragments, Stage, Staging, TileOrigin, WaveState, epilogue_store, fragment_reader,
                          kernel_function, mfma_step, operand_coords, span, staging_sets, tile_origin)
from .mx_gemm_plan import (MX_FORMATS, MxGemmConfig, MxGemmPlan, MxOperand, default_mx_config, lds_bytes,
                           operand_plan, plan_mx_gemm)
from .pipeline import chunk_loader, fragment_pipeline, guarded_load, lds_stage, prefetch_reads, schedule_hint


def _lds_tensor(plan: MxOperand):
    """The operand's LDS stage: row-major K words, or bytes; the tile form's 5-D view of K rows."""
    if len(plan.lds_shape) == 2:
        return lds_stage(plan.lds_shape, plan.lds_dtype)
    rk, calls, groups, rows, pitch = plan.lds_shape
    strides = (rk * 128 * pitch, 128 * pitch, 16 * pitch, 32 * pitch, pitch, 1)
    return T.Tensor((1, *plan.lds_shape), plan.lds_dtype, scope="shared", align=16,
                    layout=T.TileLayout(T.S[(1, *plan.lds_shape) : strides]))


def gfx950_mx_gemm(M: int, N: int, K: int, dtype: str = "mxfp8", layout: str = "nt", config: MxGemmConfig | None = None,
                   *, fusion: Fusion | None = None):
    """PrimFunc ``(A words, B words, SA, SB, C float32, *fused inputs)``; see the module docstring
    (``fusion``: the fused epilogue on the f32 accumulators, ``kernels.gemm.epilogue``)."""
    from ...rocm.build import register

    register()
    return emit_mx_gemm(plan_mx_gemm(M, N, K, dtype, layout, config, fusion))


class _Scales:
    """Where the E8M0 scales travel (module docstring): global words, LDS bytes, a lane's words."""

    def __init__(self, plan: MxGemmPlan):
        self.plan, self.op = plan, CATALOG[plan.mfma]
        self.RK, (self.RWa, self.RWb) = plan.repeats[2], plan.scale_words
        self.b_base = 2 * self.op.m * 4 * self.RK * self.RWa  # B's first LDS word

    def words_of(self, SA_, SB_, m0_, n0_, row, ko, kk):
        """The four scales (K groups) of K step ``kk`` of tile ``ko`` of scale row ``row`` (A rows
        first, then B rows) as two words whose OR is the row's (the other is zero, as are rows past
        the matrices), ORed by the store. ``SA_`` and ``SB_`` are flat views of the scale matrices."""
        p, (BM, BN, _) = self.plan, self.plan.block
        M, N, kb = p.M, p.N, p.scale_row_bytes
        k4 = (ko * self.RK + kk) * 4  # first scale byte
        if p.word_scales:  # two buffer loads; the one for the other operand is out of range (zero)
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

    def slot(self, h, r, g, RW: int, base: int):
        """First LDS scale word of wave half ``h``, lane row ``r`` and K group ``g`` of an operand
        (``RW`` words per K step; A from word 0, B from ``base``): the ``RK * RW`` words a lane reads."""
        return base + ((h * self.op.m + r) * 4 + g) * self.RK * RW

    def lane_words(self, L, word, n: int):
        """``n`` words of the LDS scale bytes ``L`` from word ``word``."""
        return T.reinterpret(L[0, T.ramp(4 * word, 1, 4 * n)], ty="uint32" if n == 1 else f"uint32x{n}")

    def byte(self, row, g, kk):
        """LDS byte of the scale of row ``row`` (A rows, then B rows), K group ``g`` and K step ``kk``:
        fragment ``i`` (row ``16 i + r`` of its wave half) is byte ``i % 4`` of word ``i // 4``, so that
        one word holds a lane's scales of four MFMAs, selected by ``op_sel``; rows past the tile go to
        the spare words."""
        op, (BM, BN, _), (WM, WN), RK = self.op, self.plan.block, self.plan.warp_tile, self.RK
        b, b_base = row - BM, self.b_base
        a_word = self.slot(row // WM, row % op.m, g, self.RWa, 0) + kk * self.RWa + row % WM // op.m // 4
        b_word = self.slot(b // WN, b % op.n, g, self.RWb, b_base) + kk * self.RWb + b % WN // op.n // 4
        spare = 4 * (b_base + 2 * op.n * 4 * RK * self.RWb + g * RK + kk)
        return T.if_then_else(row < BM, 4 * a_word + row % WM // op.m % 4,
                              T.if_then_else(row < BM + BN, 4 * b_word + b % WN // op.n % 4, spare))


def _copy(plan: MxGemmPlan, operand: MxOperand):
    """Macros ``load(regs, X, Xg, tile0, t, q, k0)`` (unit ``q`` of thread ``t`` of the tile at
    M/N ``tile0`` (elements), K ``k0``: global -> registers, zeros outside) and ``store(L, regs, t,
    q)`` (registers -> the LDS stage ``L``)."""
    bits, p = format_of(plan.fmt).bits, operand
    if p.k_contiguous:
        chunk = chunk_loader("uint32", 4, (p.rows, p.row_words), p.tile_words // 4, False, 0, p.rows * p.row_words)
        cpr = p.tile_words // 4

        @T.macro
        def load(regs, X, Xg, tile0, t, q, k0):
            chunk(regs, X, Xg, 0, tile0, t, q, k0 * bits // 32)

        @T.macro
        def store(L, regs, t, q):
            L[0, (q * THREADS + t) // cpr, T.ramp((q * THREADS + t) % cpr * 4, 1, 4)] = regs[T.ramp(q * 4, 1, 4)]

        return load, store
    return _tr_load(p, bits), _tr_store(p)


def _tr_load(p: MxOperand, bits: int):
    """``_copy``'s load of an M/N-contiguous operand: one buffer load per unit where every unit lies
    wholly inside or outside a row, else clamped word loads."""
    per, U = p.tile_words // p.unit_words, p.unit_words
    nbytes = p.rows * p.row_words * 4
    if p.row_words % U == 0 and nbytes < 2**31:
        @T.macro
        def load(regs, X, Xg, tile0, t, q, k0):
            row, col = (q * THREADS + t) // per, tile0 * bits // 32 + (q * THREADS + t) % per * U
            inside = T.And(k0 + row < p.rows, col < p.row_words)
            voff = T.if_then_else(inside, (row * p.row_words + col) * 4, T.int32(BUFFER_OOB))
            regs[T.ramp(q * U, 1, U)] = T.rocm.buffer_load(X.data, nbytes, voff, k0 * p.row_words * 4, f"uint32x{U}")
    else:
        @T.macro
        def load(regs, X, Xg, tile0, t, q, k0):
            row, col = (q * THREADS + t) // per, tile0 * bits // 32 + (q * THREADS + t) % per * U
            for e in T.unroll(U):
                regs[q * U + e] = guarded_load(Xg, 0, k0 + row, col + e, (p.rows, p.row_words), "uint32")
    return load


def _tr_store(p: MxOperand):
    """``_copy``'s store of an M/N-contiguous operand: a unit is 16 bytes of unpadded chunks (tr8,
    tr4) or one 12-byte tr6 chunk in its 16-byte slot."""
    per, U = p.tile_words // p.unit_words, p.unit_words
    if len(p.lds_shape) == 2:
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
    return store


def _reader(plan: MxGemmPlan, operand: MxOperand, slot: int, byte: bool):
    """The operand's ``fragment_reader`` into slots of ``slot`` registers: wide word reads
    (K-contiguous), the operand form of ds_read_tr8 (byte tiles), the tile form of tr4/tr6."""
    op, RK = CATALOG[plan.mfma], plan.repeats[2]
    if operand.k_contiguous:
        return fragment_reader(op, operand.name, "wide", "uint32", slot, RK, n=plan.words, k_bits=format_of(plan.fmt).bits)
    if byte:
        return fragment_reader(op, operand.name, "tr", "uint8", slot * 4, RK, tr=operand.tr, byte_tiles=True)
    return fragment_reader(op, operand.name, "tr_tile", "uint32", slot, RK, tr=operand.tr, slot_bytes=operand.slot_bytes)


def _operand(plan: MxGemmPlan, name: str, slot: int, total: int, R: int, byte: bool):
    """Macro ``operand(regs, kk, i0, use, x)``: runs ``use(V, x)`` with ``V`` the ``(R, 1, *atom)``
    MFMA operands of fragments ``i0 ..`` of K step ``kk`` of the register set ``regs`` (``total``
    fragments; fragment ``i`` in its slot of ``slot`` registers, or bytes for byte tiles, at
    ``i * RK + kk``): a view of the set itself, or for a split 6-word slot (two ds_read_tr6 halves, 4
    registers apart) a copy, whose three moves per fragment run in the period of the MFMAs, after
    its wait."""
    op, fmt, W, RK = CATALOG[plan.mfma], plan.fmt, plan.words, plan.repeats[2]
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


def _in_order(macros):
    """Macro ``run(x, s)``: the ``macros`` (each of two arguments) one after the other, for
    sequences whose members differ in Python values (immediates, static indices)."""
    @T.macro
    def run(x, s):
        _ = [macro(x, s) for macro in macros]
    return run


def _frag_read(frag, operand: str, kk: int, i: int):
    """Macro ``read((stage, f), s)``: fragment ``i`` of K step ``kk`` of ``operand`` (``frag``: its reader)."""
    if operand == "A":
        @T.macro
        def read(sf, s):
            frag(sf[1].regs_a, sf[0].lds_a, i, kk, s.wm, s.tx % 64)
    else:
        @T.macro
        def read(sf, s):
            frag(sf[1].regs_b, sf[0].lds_b, i, kk, s.wn, s.tx % 64)
    return read


def _copies(plan: MxGemmPlan):
    """The pipeline's macros ``load(staging, state, ko)`` (A and B units, scale words: global ->
    staging registers) and ``store(stage, staging, state)`` (-> the stage's LDS)."""
    pa, pb, (BM, BN, BK), RK = plan.a, plan.b, plan.block, plan.repeats[2]
    M, N, kb, s_rows = plan.M, plan.N, plan.scale_row_bytes, plan.scale_rows
    (load_a, store_a), (load_b, store_b), scales = _copy(plan, pa), _copy(plan, pb), _Scales(plan)

    @T.macro
    def load(g, s, ko):
        """Every thread's share of K tile ``ko`` (A and B units, scale words): global -> staging registers."""
        Ag_ = T.decl_tensor(s.args.A.data, ty_args=[T.Tensor((pa.rows * pa.row_words,), "uint32")])
        Bg_ = T.decl_tensor(s.args.B.data, ty_args=[T.Tensor((pb.rows * pb.row_words,), "uint32")])
        SAg_ = T.decl_tensor(s.args.SA.data, ty_args=[T.Tensor((M * kb,), "uint8")])
        SBg_ = T.decl_tensor(s.args.SB.data, ty_args=[T.Tensor((N * kb,), "uint8")])
        for q in T.unroll(pa.units):
            load_a(g.regs_a, s.args.A, Ag_, s.origin.m0, s.tx, q, ko * BK)
        for q in T.unroll(pb.units):
            load_b(g.regs_b, s.args.B, Bg_, s.origin.n0, s.tx, q, ko * BK)
        for q in T.unroll(s_rows):
            for kk in T.unroll(RK):
                wa, wb = scales.words_of(SAg_, SBg_, s.origin.m0, s.origin.n0, q * THREADS + s.tx, ko, kk)
                g.regs_s[2 * (q * RK + kk)] = wa
                g.regs_s[2 * (q * RK + kk) + 1] = wb

    @T.macro
    def store(stage, g, s):
        """The staging registers -> the stage's LDS (A, B and the scale words)."""
        for q in T.unroll(pa.units):
            store_a(stage.lds_a, g.regs_a, s.tx, q)
        for q in T.unroll(pb.units):
            store_b(stage.lds_b, g.regs_b, s.tx, q)
        for q in T.unroll(s_rows):
            for kk in T.unroll(RK):
                for gi in T.unroll(4):
                    stage.lds_s[0, scales.byte(q * THREADS + s.tx, gi, kk)] = T.cast(
                        (g.regs_s[2 * (q * RK + kk)] | g.regs_s[2 * (q * RK + kk) + 1]) >> T.uint32(8) * T.cast(gi, "uint32"), "uint8")
    return load, store


def _fragment_reads(plan: MxGemmPlan):
    """The pipeline's macro ``read(stage, frags, state)``: the stage's fragments (W words, or 32
    bytes, per lane and MFMA operand) in ``prefetch_reads`` order, so that each read group of the
    interleave program takes its own fragment's reads, and the lane's scale words (one LDS read per
    operand for all its fragments: ``_Scales.byte``) -> the register set."""
    op, (WM, WN), RK, (RWa, RWb) = CATALOG[plan.mfma], plan.warp_tile, plan.repeats[2], plan.scale_words
    frags = {"A": _reader(plan, plan.a, plan.slots[0], plan.byte_tiles[0]),
             "B": _reader(plan, plan.b, plan.slots[1], plan.byte_tiles[1])}
    reads, scales = _in_order([_frag_read(frags[x], x, kk, i) for x, kk, i in prefetch_reads(plan.repeats)]), _Scales(plan)

    @T.macro
    def read(stage, f, s):
        lane = s.tx % 64
        reads((stage, f), s)
        f.regs_s[span(0, RK * RWa)] = scales.lane_words(
            stage.lds_s, scales.slot(s.wm // WM, operand_coords(op, "A", lane).mn, operand_coords(op, "A", lane).k // 32,
                                     RWa, 0), RK * RWa)
        f.regs_s[span(RK * RWa, RK * RWb)] = scales.lane_words(
            stage.lds_s, scales.slot(s.wn // WN, operand_coords(op, "B", lane).mn, operand_coords(op, "B", lane).k // 32,
                                     RWb, scales.b_base), RK * RWb)
    return read


def _mfmas(plan: MxGemmPlan):
    """The pipeline's macro ``mma(frags, state)``: the scaled MFMAs of a register set (one
    ``tile.apply`` per K step, or per A fragment where A's slots are split, so that each fragment's
    copy precedes its own MFMAs; ``mi`` outer, ``ni`` inner; ``_operand``), the scales as bytes so
    that each MFMA's ``op_sel`` picks its byte (``_Scales.byte``), with the period's memory
    instructions between them."""
    op, (RM, RN, RK), (RWa, RWb) = CATALOG[plan.mfma], plan.repeats, plan.scale_words
    ls, _ = mfma_fragment(op, "scale_a", (RM, 1))  # uint8: fragment i's scale in byte i % 4 of word i // 4
    lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))
    a_rows = [(mi, 1) for mi in range(RM)] if plan.split_a else [(0, RM)]
    (slot_a, slot_b), (byte_a, byte_b) = plan.slots, plan.byte_tiles
    operand_a = _operand(plan, "A", slot_a * (4 if byte_a else 1), RM, a_rows[0][1], byte_a)
    operand_b = _operand(plan, "B", slot_b * (4 if byte_b else 1), RN, RN, byte_b)
    step = mfma_step(op.name, scaled=True, cbsz=plan.format_code, blgp=plan.format_code)

    def k_step(kk: int, i0: int, R: int):
        @T.macro
        def with_b(Bv, x):
            Av, f, s = x
            Sa = T.decl_tensor(f.regs_s.ptr_to([kk * RWa]),
                               ty_args=[T.Tensor((RM, 1, op.m, 4), "uint8", scope="local", layout=ls)])
            Sb = T.decl_tensor(f.regs_s.ptr_to([RK * RWa + kk * RWb]),
                               ty_args=[T.Tensor((RN, 1, op.n, 4), "uint8", scope="local", layout=lsb)])
            step(s.Df[i0 : i0 + R], Av, Bv, Sa[i0 : i0 + R], Sb)

        @T.macro
        def with_a(Av, x):
            operand_b(x[0].regs_b, kk, 0, with_b, (Av, x[0], x[1]))

        @T.macro
        def mfmas(f, s):
            operand_a(f.regs_a, kk, i0, with_a, (f, s))
        return mfmas

    steps, interleave = _in_order([k_step(kk, i0, R) for kk in range(RK) for i0, R in a_rows]), schedule_hint(plan.interleave)

    @T.macro
    def mma(f, s):
        steps(f, s)
        interleave()
    return mma


@transpile_once
def emit_mx_gemm(plan: MxGemmPlan):
    """The PrimFunc ``mx_gemm(*plan.params)`` of a plan (``gfx950_mx_gemm``)."""
    op, pa, pb = CATALOG[plan.mfma], plan.a, plan.b
    RM, RN, RK = plan.repeats
    (na, nb), (RWa, RWb), s_loads = plan.fragment_elems, plan.scale_words, plan.scale_loads
    a_dt, b_dt = ("uint8" if plan.byte_tiles[0] else "uint32"), ("uint8" if plan.byte_tiles[1] else "uint32")
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    load, store = _copies(plan)
    pipeline = fragment_pipeline(plan.k_steps, load, store, _fragment_reads(plan), _mfmas(plan), plan.config.load_ahead,
                                 plan.loads_per_tile, fence=True)
    lds_a, lds_b, lds_s = _lds_tensor(pa), _lds_tensor(pb), lds_stage((4 * plan.lds_scale_words,), "uint8")
    store_c, load_ahead = epilogue_store(op, plan.epilogue, (plan.M, plan.N), (RM, RN), flat=False), plan.config.load_ahead

    @T.macro
    def body(args):
        bid = T.launch_thread("blockIdx.x", plan.grid.groups)
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
        origin = tile_origin(plan.grid, plan.block, bid)
        m0 = origin.m0
        n0 = origin.n0
        wm = tx // 128 % 2 * plan.warp_tile[0]
        wn = tx // 64 % 2 * plan.warp_tile[1]
        lane = tx % 64
        for r in T.unroll(nd):
            rd[r] = T.float32(0)
        s = WaveState(args, Df, TileOrigin(origin.bz, m0, n0), wm, wn, tx)
        pipeline((Stage(LA0, LB0, LS0), Stage(LA1, LB1, LS1)),
                 staging_sets(load_ahead, Staging(ga0, gb0, gs0), Staging(ga1, gb1, gs1)),
                 (Fragments(ra0, rb0, rs0), Fragments(ra1, rb1, rs1)), s)
        store_c(args.C, rd, s, lane)

    return kernel_function("mx_gemm", plan.params, body)


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


__all__ = ["MX_FORMATS", "MxGemmConfig", "MxGemmPlan", "MxOperand", "default_mx_config", "emit_mx_gemm", "gfx950_mx_gemm",
           "lds_bytes", "operand_plan", "pack_operands", "pack_rows", "plan_mx_gemm"]
