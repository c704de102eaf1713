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
a software pipeline over ``block_k`` tiles (``pipeline.fragment_pipeline``) with two LDS stages and
two MFMA fragment register sets: period ``p`` stores the staged registers of tile ``p + 1`` into
its LDS stage, buffer-loads tile ``p + 1 + load_ahead``, reads tile ``p``'s fragments into one set
and runs tile ``p - 1``'s MFMAs from the other, then one ``s_waitcnt`` and one barrier: the only
waits of the main loop (``sched.group.barrier`` groups interleave the memory instructions with the
MFMAs). LDS rows are padded (``lds_pad`` bytes) so that the 16 lanes of a wide or transposing read
hit different banks. Edges: global loads outside the matrices read
zeros (buffer range check, or clamped element loads); the epilogue stores only inside C.
docs/gfx950_gemm.md explains the choices.

Plan -> emission: ``plan_gfx950_gemm`` (``gfx950_plan``, no TIRx) is a pure function of the problem and the config returning a
frozen ``Gfx950GemmPlan`` (tile, MFMA, repeats, per-operand ``OperandPlan``: storage, LDS stage,
global chunks, ds_read_tr or not, LDS reads; the interleave program); ``emit_gfx950_gemm`` builds
the PrimFunc from it, passing the pipeline's LDS stages, staging and fragment register sets and
per-thread state as named records (``Stage``, ``Staging``, ``Fragments``, ``WaveState``).
"""

from __future__ import annotations

import attrs
from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T

from ..isa import CATALOG
from ..rocm.build import register
from ..patterns.layouts import mfma_fragment
from ..tirx_private import transpile_once
from .gfx950_plan import (DTYPES, FORMAT_CODES, LAYOUTS, UNIT_SCALES, Gfx950GemmConfig, Gfx950GemmPlan, OperandPlan,
                          default_config, dma_config, lane_maps, plan_gfx950_gemm)
from .pipeline import chunk_loader, dma_loader, dma_pipeline, fragment_pipeline, lds_stage, schedule_hint


@attrs.frozen(eq=False)
class Stage:
    """One LDS stage of the K-tile pipeline (``pipeline.fragment_pipeline``): the tiles of A and B."""

    lds_a: object  # shared (1, *plan.a.lds_shape)
    lds_b: object  # shared (1, *plan.b.lds_shape)


@attrs.frozen(eq=False)
class Staging:
    """One register set staging a K tile's global loads on their way to LDS."""

    regs_a: object  # local (a.chunks * vec,): the thread's 16-byte chunks of the A tile
    regs_b: object  # local (b.chunks * vec,)


@attrs.frozen(eq=False)
class Fragments:
    """One register set of MFMA operand fragments: every K step of one K tile."""

    regs_a: object  # local registers of the A fragments (RM x RK MFMA operands)
    regs_b: object  # local registers of the B fragments (RN x RK)
    Af: object  # regs_a as the MFMA pattern's (RM, RK, m, k) tile
    Bf: object  # regs_b as (RN, RK, n, k)


@attrs.frozen(eq=False)
class WaveState:
    """What every pipeline period of a thread works on besides its stage and fragment set."""

    A: object  # the A parameter
    B: object  # the B parameter
    Df: object  # the accumulators as (RM, RN, m, n)
    bz: object  # batch index
    m0: object  # the workgroup's first row of C
    n0: object  # the workgroup's first column of C
    wm: object  # the wave's first row within the tile
    wn: object  # the wave's first column within the tile
    tx: object  # thread index in the workgroup


def gfx950_gemm(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nn", out_dtype: str | None = None,
                config: Gfx950GemmConfig | None = None, batch: int = 0):
    """PrimFunc ``(A, B, C)`` (with ``batch``: a leading batch axis on each) for gfx950.

    A is ``(M, K)`` for layout ``n?`` and ``(K, M)`` for ``t?``; B is ``(K, N)`` for ``?n`` and
    ``(N, K)`` for ``?t``; C is ``(M, N)`` in ``out_dtype`` (bf16 outputs and inputs are int16 bit
    patterns in the signature; numpy bfloat16 arrays pass as they are).
    """
    register()
    return emit_gfx950_gemm(plan_gfx950_gemm(M, N, K, dtype, layout, out_dtype, config, batch))


@transpile_once
def emit_gfx950_gemm(plan: Gfx950GemmPlan):
    """The PrimFunc of a plan (``gfx950_gemm``)."""
    op = CATALOG[plan.mfma]
    M, N, K, batch = plan.M, plan.N, plan.K, plan.batch
    elem, acc, out = plan.elem, plan.acc, plan.out
    BM, BN, BK = plan.block
    RM, RN, RK = plan.repeats
    pa, pb, vec = plan.a, plan.b, plan.vec
    E = op.a_elems
    scaled = plan.format_codes is not None
    la, na = mfma_fragment(op, "A", (RM, RK), byte_tiles=scaled)
    lb, nb = mfma_fragment(op, "B", (RN, RK), byte_tiles=scaled)
    la1, _ = mfma_fragment(op, "A", byte_tiles=scaled)
    lb1, _ = mfma_fragment(op, "B", byte_tiles=scaled)
    ld, nd = mfma_fragment(op, "D", (RM, RN))
    a_shape = (K, M) if pa.mn_contiguous else (M, K)
    b_shape = (N, K) if not pb.mn_contiguous else (K, N)
    if batch:
        a_shape, b_shape, c_shape = (batch, *a_shape), (batch, *b_shape), (batch, M, N)
    else:
        c_shape = (M, N)
    grid_m, grid_n = plan.grid
    _interleave = schedule_hint(plan.interleave)
    a_row, a_k, b_col, b_k, acc_row, acc_col = lane_maps(op)

    def _convert(value):
        if plan.out_dtype == "bf16":  # round to nearest even, keep the bit pattern in int16
            bits = T.reinterpret(value, ty="uint32")
            rounded = (bits + T.uint32(0x7FFF) + ((bits >> T.uint32(16)) & T.uint32(1))) >> T.uint32(16)
            return T.reinterpret(T.cast(rounded, "uint16"), ty="int16")
        return T.cast(value, out) if out != acc else value

    def _frag_loader(operand: OperandPlan, mn_of, k_of, atom_layout):
        """Macro ``frag(regs, lds, buf, i, kk, w0, lane)``: MFMA fragment ``i`` of K step ``kk`` of
        ``operand`` from an LDS stage (the wave's tile starts at ``w0`` along M or N) into
        ``regs``: ds_read_tr where its M/N is contiguous in LDS and a transposing load exists,
        per-element reads where not, one wide read where K is contiguous."""
        ext = op.m if operand.name == "A" else op.n
        tr = operand.transpose_read
        if tr:
            @T.macro
            def frag(regs, lds, buf, i, kk, w0, lane):
                V = T.decl_tensor(regs.ptr_to([(i * RK + kk) * E]), ty_args=[T.Tensor((1, ext, op.k), elem, scope="local", layout=atom_layout)])
                T.rocm.tile.apply(T.amdgcn[tr], V, lds[buf : buf + 1, kk * op.k : kk * op.k + op.k, w0 + i * ext : w0 + i * ext + ext],
                                  scope="wave", mfma=plan.mfma, operand=operand.name)
        elif operand.mn_contiguous:
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

    _frag_a = _frag_loader(pa, a_row, a_k, la1)
    _frag_b = _frag_loader(pb, b_col, b_k, lb1)

    @T.macro
    def _store_c(dst, bz, row, col, value):
        if row < M and col < N:
            dst[bz * (M * N) + row * N + col] = _convert(value)

    _chunk_a = chunk_loader(elem, vec, pa.storage, pa.chunks_per_row, pa.mn_contiguous, M * K, max(batch, 1) * M * K)
    _chunk_b = chunk_loader(elem, vec, pb.storage, pb.chunks_per_row, pb.mn_contiguous, K * N, max(batch, 1) * K * N)

    if scaled:
        code_a, code_b = plan.format_codes
        kb = op.k // 32  # scale registers per lane and MFMA: one per 32 K (unit scales here)
        ls, _ = mfma_fragment(op, "scale_a", (RM, 1))
        lsb, _ = mfma_fragment(op, "scale_b", (RN, 1))

        @T.macro
        def _mfma(Df_, Af_, Bf_):
            """The scaled MFMAs with unit scales (a constant LLVM keeps in one VGPR)."""
            rs = T.alloc_tensor(ty_args=[T.Tensor((RM + RN,), "uint32", scope="local")])
            for r in T.unroll(RM + RN):
                rs[r] = T.uint32(UNIT_SCALES)
            Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((RM, 1, op.m, kb), "uint32", scope="local", layout=ls)])
            Sb = T.decl_tensor(rs.ptr_to([RM]), ty_args=[T.Tensor((RN, 1, op.n, kb), "uint32", scope="local", layout=lsb)])
            T.rocm.tile.apply(T.amdgcn[plan.mfma], Df_, Af_, Bf_, Df_, Sa, Sb, scope="wave",
                              cbsz=code_a, blgp=code_b, op_sel_a=0, op_sel_b=0)
    else:
        @T.macro
        def _mfma(Df_, Af_, Bf_):
            T.rocm.tile.apply(T.amdgcn[plan.mfma], Df_, Af_, Bf_, Df_, scope="wave")

    @T.macro
    def _load(g, s, ko):
        """Every thread's share of K tile ``ko`` of A and B, global -> staging registers (zeros outside)."""
        Ag_ = T.decl_tensor(s.A.data, ty_args=[T.Tensor((max(batch, 1) * M * K,), elem)])
        Bg_ = T.decl_tensor(s.B.data, ty_args=[T.Tensor((max(batch, 1) * K * N,), elem)])
        for q in T.unroll(pa.chunks):
            _chunk_a(g.regs_a, s.A, Ag_, s.bz, s.m0, s.tx, q, ko * BK)
        for q in T.unroll(pb.chunks):
            _chunk_b(g.regs_b, s.B, Bg_, s.bz, s.n0, s.tx, q, ko * BK)

    @T.macro
    def _store(stage, g, s):
        """The staging registers -> the stage's LDS tiles."""
        for q in T.unroll(pa.chunks):
            stage.lds_a[0, (q * 256 + s.tx) // pa.chunks_per_row, T.ramp((q * 256 + s.tx) % pa.chunks_per_row * vec, 1, vec)] = g.regs_a[T.ramp(q * vec, 1, vec)]
        for q in T.unroll(pb.chunks):
            stage.lds_b[0, (q * 256 + s.tx) // pb.chunks_per_row, T.ramp((q * 256 + s.tx) % pb.chunks_per_row * vec, 1, vec)] = g.regs_b[T.ramp(q * vec, 1, vec)]

    @T.macro
    def _read(stage, f, s):
        """Every K step's operand fragments of the stage's tile -> the register set."""
        for kk in T.unroll(RK):
            for mi in T.unroll(RM):
                _frag_a(f.regs_a, stage.lds_a, 0, mi, kk, s.wm, s.tx % 64)
            for ni in T.unroll(RN):
                _frag_b(f.regs_b, stage.lds_b, 0, ni, kk, s.wn, s.tx % 64)

    @T.macro
    def _mma(f, s):
        """The MFMAs of a register set's tile, with the period's memory instructions between them."""
        for kk in T.unroll(RK):
            _mfma(s.Df, f.Af[:, kk : kk + 1], f.Bf[:, kk : kk + 1])
        _interleave()

    def _staging_sets(first: Staging, second: Staging) -> tuple[Staging, Staging]:
        """The staging register sets of even and odd tiles: one set when loads are one tile ahead."""
        return (first, second) if plan.config.load_ahead == 2 else (first, first)

    if plan.config.lds_dma:
        _load_lds = _dma_tile_loads(plan)
        _dma_run = dma_pipeline(plan.k_steps, _load_lds, _read, _mma, pa.dma_loads + pb.dma_loads)

        @T.macro
        def _run(stages, staging, frags, s):
            _dma_run(stages, frags, s)
    else:
        _run = fragment_pipeline(plan.k_steps, _load, _store, _read, _mma, plan.config.load_ahead,
                                 pa.chunks + pb.chunks)

    @T.macro
    def _tile(A, B, C, bid, tx, stages, staging):
        """The thread's fragment sets, accumulators and tile coordinates; the K pipeline over the LDS
        ``stages`` (and ``staging`` register sets); the accumulators -> C (inside C only)."""
        ra0 = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
        rb0 = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
        ra1 = T.alloc_tensor(ty_args=[T.Tensor((na,), elem, scope="local")])
        rb1 = T.alloc_tensor(ty_args=[T.Tensor((nb,), elem, scope="local")])
        rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), acc, scope="local")])
        Af0 = T.decl_tensor(ra0.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
        Bf0 = T.decl_tensor(rb0.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
        Af1 = T.decl_tensor(ra1.ptr_to([0]), ty_args=[T.Tensor((RM, RK, op.m, op.k), elem, scope="local", layout=la)])
        Bf1 = T.decl_tensor(rb1.ptr_to([0]), ty_args=[T.Tensor((RN, RK, op.n, op.k), elem, scope="local", layout=lb)])
        Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((RM, RN, op.m, op.n), acc, scope="local", layout=ld)])
        Cg = T.decl_tensor(C.data, ty_args=[T.Tensor((max(batch, 1) * M * N,), out)])
        bz = bid // (grid_m * grid_n)
        m0 = bid % (grid_m * grid_n) // grid_n * BM
        n0 = bid % grid_n * BN
        wm = tx // 128 % 2 * plan.warp_tile[0]  # "% 2" lets the pattern prove the region is in bounds
        wn = tx // 64 % 2 * plan.warp_tile[1]
        lane = tx % 64
        for r in T.unroll(nd):
            rd[r] = T.cast(0, acc)
        _run(stages, staging, (Fragments(ra0, rb0, Af0, Bf0), Fragments(ra1, rb1, Af1, Bf1)),
             WaveState(A, B, Df, bz, m0, n0, wm, wn, tx))
        for mi in T.unroll(RM):
            for ni in T.unroll(RN):
                for r in T.unroll(op.acc_elems):
                    _store_c(Cg, bz, m0 + wm + mi * op.m + acc_row(lane, r), n0 + wn + ni * op.n + acc_col(lane, r),
                             rd[(mi * RN + ni) * op.acc_elems + r])

    dma = plan.config.lds_dma

    @T.function
    def gemm(A: T.Tensor(a_shape, elem), B: T.Tensor(b_shape, elem), C: T.Tensor(c_shape, out)):
        with T.device_entry():
            bid = T.launch_thread("blockIdx.x", plan.groups)
            tx = T.launch_thread("threadIdx.x", 256)
            SA0 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
            SA1 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
            if I.constexpr(dma):  # a third LDS stage, no staging registers
                SA2 = T.alloc_tensor(ty_args=[lds_stage(pa.lds_shape, elem)])
            SB0 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
            SB1 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
            if I.constexpr(dma):
                SB2 = T.alloc_tensor(ty_args=[lds_stage(pb.lds_shape, elem)])
                _tile(A, B, C, bid, tx, (Stage(SA0, SB0), Stage(SA1, SB1), Stage(SA2, SB2)), None)
            else:
                ga0 = T.alloc_tensor(ty_args=[T.Tensor((pa.chunks * vec,), elem, scope="local")])
                gb0 = T.alloc_tensor(ty_args=[T.Tensor((pb.chunks * vec,), elem, scope="local")])
                ga1 = T.alloc_tensor(ty_args=[T.Tensor((pa.chunks * vec,), elem, scope="local")])
                gb1 = T.alloc_tensor(ty_args=[T.Tensor((pb.chunks * vec,), elem, scope="local")])
                _tile(A, B, C, bid, tx, (Stage(SA0, SB0), Stage(SA1, SB1)),
                      _staging_sets(Staging(ga0, gb0), Staging(ga1, gb1)))

    return gemm


def _dma_tile_loads(plan: Gfx950GemmPlan):
    """Macro ``load(stage, state, ko)`` of ``pipeline.dma_pipeline``: the wave's direct-to-LDS loads
    of K tile ``ko`` of A and B (``pipeline.dma_loader``; the wave issues loads ``4 j + wave``)."""
    M, N, K, batch = plan.M, plan.N, plan.K, plan.batch
    pa, pb, BK = plan.a, plan.b, plan.block[2]
    _dma_a = dma_loader(pa.dma, plan.vec, pa.storage, pa.mn_contiguous, M * K, max(batch, 1) * M * K)
    _dma_b = dma_loader(pb.dma, plan.vec, pb.storage, pb.mn_contiguous, K * N, max(batch, 1) * K * N)

    @T.macro
    def load(stage, s, ko):
        for j in T.unroll(pa.dma_loads):
            _dma_a(stage.lds_a, s.A, s.bz, s.m0, j * 4 + s.tx // 64, s.tx % 64, ko * BK)
        for j in T.unroll(pb.dma_loads):
            _dma_b(stage.lds_b, s.B, s.bz, s.n0, j * 4 + s.tx // 64, s.tx % 64, ko * BK)
    return load


__all__ = ["DTYPES", "FORMAT_CODES", "LAYOUTS", "UNIT_SCALES", "Gfx950GemmConfig", "Gfx950GemmPlan", "OperandPlan",
           "default_config", "dma_config", "emit_gfx950_gemm", "gfx950_gemm", "plan_gfx950_gemm"]
