"""The gfx950 GEMM emitter: the TIRx pieces the dense GEMM (``gfx950_gemm_emit``) and the MX GEMM
(``gfx950_mx_gemm``) are built from, each a function of plan data (``gfx950_plan``) returning a
macro or a value, so that another gfx950 kernel (attention) imports them as they are.

* ``kernel_function``: the PrimFunc whose parameter list is the plan's (``Param`` records; the
  epilogue's inputs follow C) around the kernel's body macro.
* ``tile_origin``: the workgroup's first row and column of C, its batch index and (split-K) its
  first K tile, from the plan's ``Grid`` decoded once per kernel; ``k_offset``: a pipeline tile's K.
* The pipeline's records: ``Stage`` (one LDS stage), ``Staging`` (one register set of global loads),
  ``Fragments`` (one register set of MFMA operands), ``WaveState`` (what every period works on),
  and ``staging_sets`` (two register sets, or one when the loads run one tile ahead).
* ``fragment_reader``: one MFMA operand fragment from an LDS stage into its register slot (wide
  reads along K, per-element reads, or ``ds_read_tr`` in its operand or tile form).
* ``mfma_step``: one ``tile.apply`` of an MFMA (the scaled ones with their scale tiles).
* ``epilogue_value`` / ``epilogue_store``: the plan's ``Epilogue`` applied to an accumulator (the
  fused steps: ``kernels.gemm.epilogue.apply`` over ``fused_ops``, the inputs ``fused_inputs`` loaded
  inside C) and the wave's accumulator tile stored inside C; ``split_store``: a split-K tile
  reduced through the workspace and its ticket, then stored the same way (fused once, after the
  reduction).
"""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import attrs
from tvm_tirx.script import tirx as T
from tvm_tirx.script.parser import parse

from ...isa import CATALOG, lanes
from ...isa.llvm_helpers import EXP2
from ...patterns.layouts import mfma_fragment, tr_fragment
from ..gemm.epilogue import Fusion, Param, apply
from .gemm_common import Epilogue, Grid
from .gemm_config import UNIT_SCALES

THREADS = 256  # 2 x 2 waves per workgroup


# ---------------------------------------------------------------------------------------- the kernel

def kernel_function(name: str, params: tuple[Param, ...], body):
    """PrimFunc ``name(*params)``: ``with T.device_entry(): body(args)``, where ``args`` names the
    parameters (``args.A``, ``args.C``, ...), so that a kernel's signature is its plan's."""
    names = tuple(p.name for p in params)
    args = namedtuple(f"{name}_params", names)
    signature = ", ".join(f"{n}: _param_{i}" for i, n in enumerate(names))
    source = f"@T.function\ndef {name}({signature}):\n    with T.device_entry():\n        _body(_args({', '.join(names)}))\n"
    types = {f"_param_{i}": T.Tensor(p.shape, p.dtype) for i, p in enumerate(params)}
    return parse(source, {"T": T, "_body": body, "_args": args, **types}, filename=f"<gfx950 {name}>")


@attrs.frozen
class TileOrigin:
    """A workgroup's place in C (``tile_origin``): batch index, first row, first column."""

    bz: object
    m0: object
    n0: object
    kt: object = 0  # the first K tile of the workgroup's K range (split-K; 0 without)
    m_end: object = None  # the end of the rows it may store (grouped: its group's end, ``Groups.origin``); None: M
    group: object = None  # grouped: the tile's group (its per-column fused inputs' row); None: one GEMM


def rows_end(origin: TileOrigin, M):
    """The rows of C below which a tile stores: ``M``, or its group's end (``TileOrigin.m_end``)."""
    return M if origin.m_end is None else origin.m_end


def decode(grid: Grid, bid):
    """``grid.decode(bid)``, with truncating division where its tile rows are symbolic (``Grid.decode``;
    ``bid`` and the extents are non-negative, where truncating and floor division agree)."""
    return grid.decode(bid, T.truncdiv, T.truncmod) if grid.symbolic else grid.decode(bid)


def tile_origin(grid: Grid, block: tuple[int, ...], bid, k_steps: int = 0) -> TileOrigin:
    """The origin of workgroup ``bid``'s tile (``Grid.decode``; ``block`` = (BM, BN, ...)); with a
    K split, its K range starts at K tile ``k_split * k_steps`` (``k_steps`` K tiles per range)."""
    idx = decode(grid, bid)
    if grid.k_splits == 1:
        return TileOrigin(idx.batch, idx.row * block[0], idx.col * block[1])
    return TileOrigin(idx.batch, idx.row * block[0], idx.col * block[1], idx.k_split * k_steps)


def k_offset(split: bool, BK: int):
    """``k0(s, ko)``: the first K of pipeline tile ``ko`` of the wave's state ``s`` (``ko * BK``, or
    from the workgroup's K range with a split)."""
    if split:
        return lambda s, ko: (s.origin.kt + ko) * BK
    return lambda s, ko: ko * BK


# ------------------------------------------------------------------------------ the pipeline records

@attrs.frozen(eq=False)
class Stage:
    """One LDS stage of the K-tile pipeline (``kernels.gfx950.pipeline.fragment_pipeline``): the A and B tiles (and
    the MX GEMM's scale words)."""

    lds_a: object
    lds_b: object
    lds_s: object = None


@attrs.frozen(eq=False)
class Staging:
    """One register set staging a K tile's global loads on their way to LDS: the thread's A and B
    chunks (and scale words)."""

    regs_a: object
    regs_b: object
    regs_s: object = None


@attrs.frozen(eq=False)
class Fragments:
    """One register set of MFMA operands, every K step of one K tile: A (RM x RK fragments) and B
    (RN x RK), the lane's scale words (MX), the sets as MFMA operand tiles (dense: (R, RK, mn, k))."""

    regs_a: object
    regs_b: object
    regs_s: object = None
    Af: object = None
    Bf: object = None


@attrs.frozen(eq=False)
class WaveState:
    """What every pipeline period of a thread works on besides its stage and register sets."""

    args: object  # the kernel's parameters by name (``kernel_function``)
    Df: object  # the accumulators as (RM, RN, m, n)
    origin: TileOrigin  # the workgroup's tile
    wm: object  # the wave's first row within the tile
    wn: object  # the wave's first column within the tile
    tx: object  # thread index in the workgroup


@attrs.frozen(eq=False, kw_only=True)
class AttentionRegs:
    """What every kv step of an attention wave works on (the dense kernel's ``KvState``, the paged decode's
    ``Wave`` add their own): the register tensors of K, V^T, P^T, S^T and O^T, the running max and sum, their
    MFMA operand views, the LDS V tile, the lane and thread, and the factor from a raw score to base 2."""

    rk: object
    rv: object
    rp: object
    rs: object
    ro: object
    m: object
    l: object
    Qf: object
    Kf: object
    Vf: object
    Pf: object
    Sd: object
    Od: object
    SV: object
    lane: object
    tx: object
    scale: object


def staging_sets(load_ahead: int, first: Staging, second: Staging) -> tuple[Staging, Staging]:
    """The staging register sets of even and odd tiles: one set when loads are one tile ahead."""
    return (first, second) if load_ahead == 2 else (first, first)


# --------------------------------------------------------------------------------- fragments, MFMAs

def span(base, n: int):
    """Index of ``n`` consecutive elements from ``base`` (a scalar index for one)."""
    return base if n == 1 else T.ramp(base, 1, n)


def operand_coords(op, operand: str, lane):
    """The catalog's coordinates of a lane's first element of MFMA operand ``operand``
    (``lanes.AElem`` / ``BElem``: ``.mn``, ``.k``)."""
    return (lanes.a_owner if operand == "A" else lanes.b_owner)(op, lane, 0)


def fragment_reader(op, operand: str, how: str, dtype: str, slot: int, rk: int, n: int = 0, tr: str | None = None,
                    k_bits: int = 0, byte_tiles: bool = False, slot_bytes: int = 0, staged: bool = False):
    """Macro ``frag(regs, lds, i, kk, w0, lane)``: fragment ``i`` of K step ``kk`` of ``operand`` of
    MFMA ``op`` from an LDS stage ``lds`` (the wave's tile starts at ``w0`` along M or N) into its
    slot of ``slot`` elements of ``regs`` at ``i * rk + kk``. ``staged`` (``"tr"`` and ``"wide"``):
    the macro is ``frag(regs, lds, i, kk, w0, lane, stage)``, ``lds`` a ``(stages, ...)`` tensor
    (``kernels.gfx950.pipeline.lds_stage``) read at ``stage`` (an expression). ``how``:

    * ``"wide"``: K contiguous in LDS, one read of the lane's ``n`` elements (``k_bits``: LDS holds
      packed 32-bit words of ``k_bits``-bit elements);
    * ``"elements"``: M/N contiguous, one read per element (no transposing load);
    * ``"tr"``: the ``ds_read_tr`` operand form (``tr``; ``byte_tiles``: uint8 element tiles);
    * ``"tr_tile"``: the tile form of ``ds_read_tr4/tr6``, two calls per 32 K (``slot_bytes`` LDS
      bytes per chunk; the halves at registers 0 and ``slot // 2``)."""
    ext = op.m if operand == "A" else op.n
    if staged and how not in ("tr", "wide"):
        raise ValueError(f"fragment_reader: staged reads are the 'tr' and 'wide' forms'; got how={how!r}")
    if staged and how == "wide":
        @T.macro
        def frag(regs, lds, i, kk, w0, lane, stage):
            regs[span((i * rk + kk) * slot, n)] = lds[stage, w0 + i * ext + operand_coords(op, operand, lane).mn,
                                                      span(kk * op.k + operand_coords(op, operand, lane).k, n)]
    elif staged:
        atom, _ = mfma_fragment(op, operand, byte_tiles=byte_tiles)

        @T.macro
        def frag(regs, lds, i, kk, w0, lane, stage):
            V = T.decl_tensor(regs.ptr_to([(i * rk + kk) * slot]), ty_args=[T.Tensor((1, ext, op.k), dtype, scope="local", layout=atom)])
            T.rocm.tile.apply(T.amdgcn[tr], V, lds[stage : stage + 1, kk * op.k : kk * op.k + op.k, w0 + i * ext : w0 + i * ext + ext],
                              scope="wave", mfma=op.name, operand=operand)
    elif how == "tr":
        atom, _ = mfma_fragment(op, operand, byte_tiles=byte_tiles)

        @T.macro
        def frag(regs, lds, i, kk, w0, lane):
            V = T.decl_tensor(regs.ptr_to([(i * rk + kk) * slot]), ty_args=[T.Tensor((1, ext, op.k), dtype, scope="local", layout=atom)])
            T.rocm.tile.apply(T.amdgcn[tr], V, lds[0:1, kk * op.k : kk * op.k + op.k, w0 + i * ext : w0 + i * ext + ext],
                              scope="wave", mfma=op.name, operand=operand)
    elif how == "tr_tile":
        frag = _tr_tile_reader(CATALOG[tr], slot, rk, slot_bytes)
    elif how == "elements":
        @T.macro
        def frag(regs, lds, i, kk, w0, lane):
            for e in T.unroll(slot):
                regs[(i * rk + kk) * slot + e] = lds[0, kk * op.k + operand_coords(op, operand, lane).k + e,
                                                     w0 + i * ext + operand_coords(op, operand, lane).mn]
    else:
        col = (lambda k: k * k_bits // 32) if k_bits else (lambda k: k)

        @T.macro
        def frag(regs, lds, i, kk, w0, lane):
            regs[span((i * rk + kk) * slot, n)] = lds[0, w0 + i * ext + operand_coords(op, operand, lane).mn,
                                                      span(col(kk * op.k + operand_coords(op, operand, lane).k), n)]
    return frag


def _tr_tile_reader(tr, slot: int, rk: int, slot_bytes: int):
    """``fragment_reader``'s ``"tr_tile"``: call ``j`` reads the lane's K positions ``16 j ..
    16 j + 15`` into half ``j`` of the slot."""
    words, nbytes = tr.load_bits // 32, tr.load_bits // 8
    lt, _ = tr_fragment(tr, (1, 1, 1))

    @T.macro
    def frag(regs, lds, i, kk, w0, lane):
        for j in T.unroll(2):
            D = T.decl_tensor(regs.ptr_to([(i * rk + kk) * slot + j * (slot // 2)]),
                              ty_args=[T.Tensor((1, 1, 1, 4, 16, words), "uint32", scope="local", layout=lt)])
            cb = (w0 // tr.elements + i) * slot_bytes
            T.rocm.tile.apply(T.amdgcn[tr.name], D, lds[0:1, kk : kk + 1, j : j + 1, 0:4, 0:16, cb : cb + nbytes], scope="wave")
    return frag


def mfma_step(mfma: str, scaled: bool = False, **modifiers):
    """Macro ``step(D, A, B)`` (``scaled``: ``step(D, A, B, Sa, Sb)``): ``D += A @ B`` over the MFMA
    operand tiles, one ``tile.apply`` of ``mfma`` for all of them, with the scaled MFMAs' scale
    tiles and ``modifiers`` (``cbsz``, ``blgp``, ``op_sel_a`` ...)."""
    if scaled:
        @T.macro
        def step(D, A, B, Sa, Sb):
            T.rocm.tile.apply(T.amdgcn[mfma], D, A, B, D, Sa, Sb, scope="wave", **modifiers)
    else:
        @T.macro
        def step(D, A, B):
            T.rocm.tile.apply(T.amdgcn[mfma], D, A, B, D, scope="wave", **modifiers)
    return step


def unit_scaled_step(mfma: str, rm: int, rn: int, codes: tuple[int, int]):
    """Macro ``mfma(Df, Af, Bf)``: ``mfma_step`` of the scaled f8f6f4 MFMA ``mfma`` over ``rm x rn``
    operand tiles with unit E8M0 scales (``UNIT_SCALES``: a constant LLVM keeps in one VGPR) and the
    format codes ``codes`` = (``cbsz``, ``blgp``) of A and B (``kernels.gfx950.gemm_plan.FORMAT_CODES``)."""
    op = CATALOG[mfma]
    kb = op.k // 32  # scale registers per lane and MFMA: one per 32 K (unit scales here)
    ls, _ = mfma_fragment(op, "scale_a", (rm, 1))
    lsb, _ = mfma_fragment(op, "scale_b", (rn, 1))
    step = mfma_step(mfma, scaled=True, cbsz=codes[0], blgp=codes[1], op_sel_a=0, op_sel_b=0)

    @T.macro
    def mfma_(Df_, Af_, Bf_):
        rs = T.alloc_tensor(ty_args=[T.Tensor((rm + rn,), "uint32", scope="local")])
        for r in T.unroll(rm + rn):
            rs[r] = T.uint32(UNIT_SCALES)
        Sa = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((rm, 1, op.m, kb), "uint32", scope="local", layout=ls)])
        Sb = T.decl_tensor(rs.ptr_to([rm]), ty_args=[T.Tensor((rn, 1, op.n, kb), "uint32", scope="local", layout=lsb)])
        step(Df_, Af_, Bf_, Sa, Sb)
    return mfma_


# ------------------------------------------------------------------------------------- the epilogue

def fused_ops(out: str) -> SimpleNamespace:
    """The operations ``kernels.gemm.epilogue.apply`` evaluates its formula with, on TIR f32 values:
    ``max`` (``v_max_f32``), ``exp2`` (the hardware exponential ``v_exp_f32``: ``llvm.amdgcn.exp2``,
    one instruction; ``llvm.exp2.f32`` adds a range reduction for denormal results, which the
    formulas do not need), ``const`` (an f32 immediate) and ``f32`` (a residual of C's TIR dtype
    ``out`` as f32: f16 widened, bf16 bits (int16) moved into the high half)."""
    if out == "int16":
        def f32(x):
            return T.reinterpret(T.cast(T.reinterpret(x, ty="uint16"), "uint32") << T.uint32(16), ty="float32")
    else:
        def f32(x):
            return x if out == "float32" else T.cast(x, "float32")
    return SimpleNamespace(max=T.max, exp2=lambda x: T.call_llvm_pure_intrin(EXP2, x, ty="float32"),
                           const=T.float32, f32=f32)


def fused_inputs(fusion: Fusion, args, row, col, group=None) -> dict:
    """``kernels.gemm.epilogue.apply``'s ``at``: the fused inputs at element (``row``, ``col``) of C,
    loaded from the kernel's parameters (``args``; ``Fusion.params``); a grouped tile's per-column
    inputs (``[G, N]``) at its ``group``'s row; each indexed by its broadcast (``Input.at``)."""
    return {i.name: i.at(getattr(args, i.name), row, col, group) for i in fusion.steps()}


def epilogue_value(epilogue: Epilogue, value, at: dict | None = None):
    """``kernels.gemm.epilogue.ops`` applied to one accumulator ``value``, in order (``atomic_add`` is the store's;
    ``fuse``: ``kernels.gemm.epilogue.apply`` with the inputs ``at`` (``fused_inputs``) and ``fused_ops``)."""
    for name in epilogue.ops:
        if name == "atomic_add":
            continue
        if name == "fuse":
            value = apply(epilogue.fusion, value, at, fused_ops(epilogue.out))
            continue
        if name == "bf16_rne":  # round to nearest even, keep the bit pattern in int16
            bits = T.reinterpret(value, ty="uint32")
            rounded = (bits + T.uint32(0x7FFF) + ((bits >> T.uint32(16)) & T.uint32(1))) >> T.uint32(16)
            value = T.reinterpret(T.cast(rounded, "uint16"), ty="int16")
        elif name == "bf16_rna":  # round to nearest, ties away from zero (finite values): one add
            rounded = (T.reinterpret(value, ty="uint32") + T.uint32(0x8000)) >> T.uint32(16)
            value = T.reinterpret(T.cast(rounded, "uint16"), ty="int16")
        else:
            value = T.cast(value, epilogue.out)
    return value


def epilogue_store(op, epilogue: Epilogue, extent: tuple, repeats: tuple[int, int], flat: bool):
    """Macro ``store(C, rd, s, lane)``: the wave's accumulator registers ``rd`` (RM x RN MFMA tiles,
    ``repeats``) through the epilogue into C, the elements inside the ``extent`` = (M, N) matrix
    only. ``flat``: C is a flat view with a leading batch axis (``s.origin.bz``), else ``C[row, col]``."""
    M, N = extent
    RM, RN = repeats
    if flat:
        @T.macro
        def put(C, bz, row, col, value):
            C[bz * (M * N) + row * N + col] = value
    else:
        @T.macro
        def put(C, bz, row, col, value):
            C[row, col] = value

    if "atomic_add" in epilogue.ops:  # split-K: the partial products are added into C
        @T.macro
        def put(C, bz, row, col, value):
            T.rocm.global_atomic_add_f32(C, bz * (M * N) + row * N + col, value)

    @T.macro
    def inside(C, s, row, col, value):
        if T.And(row < rows_end(s.origin, M), col < N):
            put(C, s.origin.bz, row, col, epilogue_value(epilogue, value, fused_inputs(epilogue.fusion, s.args, row, col, s.origin.group)))

    @T.macro
    def store(C, rd, s, lane):
        for mi in T.unroll(RM):
            for ni in T.unroll(RN):
                for r in T.unroll(op.acc_elems):
                    inside(C, s, s.origin.m0 + s.wm + mi * op.m + lanes.acc_owner(op, lane, r).row,
                           s.origin.n0 + s.wn + ni * op.n + lanes.acc_owner(op, lane, r).col, rd[(mi * RN + ni) * op.acc_elems + r])
    return store


def _workspace_macros(reduction: str, k_steps: int, outputs, slices: int):
    """``split_store``'s macros ``partial(W, s, at, value)`` (a partial value into the workspace) and
    ``gather(W, rd, e, at)`` (the tile's sum of element ``at`` into accumulator ``e``): atomic: add
    into the one slice, read it back and zero it; ordered: store into the K split's slice, add the
    slices in index order."""
    if reduction == "atomic":
        @T.macro
        def partial(W, s, at, value):
            T.rocm.global_atomic_add_f32(W, at, value)

        @T.macro
        def gather(W, rd, e, at):
            rd[e] = W[at]
            W[at] = T.float32(0)
    else:
        @T.macro
        def partial(W, s, at, value):
            W[s.origin.kt // k_steps * outputs + at] = value

        @T.macro
        def gather(W, rd, e, at):
            rd[e] = W[at]
            for sl in T.unroll(1, slices):
                rd[e] = rd[e] + W[sl * outputs + at]
    return partial, gather


def split_store(op, epilogue: Epilogue, grid: Grid, block: tuple[int, ...], k_steps: int, extent: tuple,
                repeats: tuple[int, int]):
    """Macro ``store(C, rd, s, lane)`` of a split-K epilogue (``Epilogue.ops`` starts with
    ``reduce``; ``epilogue_store``'s signature, C flat with a batch axis). In order:

    1. the wave's partial tile (inside C) into the workspace ``W``: ``reduction`` "atomic": f32
       atomic adds into its one slice; "ordered": plain stores into the slice of the K split;
    2. ``T.rocm.fence_release`` (every thread: its writes complete and reach the agent-coherent
       level), the workgroup barrier, thread 0 draws the tile's ticket
       (``T.rocm.global_atomic_add_u32`` on ``S[tile]``) into LDS, the barrier;
    3. the workgroup that drew ``k_splits - 1`` (the last of its tile): ``T.rocm.fence_acquire``,
       the tile's sum into the accumulators (atomic: ``W``'s slice, then zeros back; ordered: the
       slices added in index order, the same bits every run), thread 0 resets ``S[tile]``, then the
       rest of the epilogue (the conversion) and the store to C, as ``epilogue_store``.

    So ``W`` and ``S`` are zero after every launch (allocate them zeroed once)."""
    M, N = extent
    RM, RN = repeats
    splits, slices = grid.k_splits, epilogue.slices
    outputs = (grid.batch or 1) * M * N
    convert = attrs.evolve(epilogue, ops=epilogue.ops[1:], params=(), reduction=None, slices=0)
    store_c = epilogue_store(op, convert, extent, repeats, flat=True)

    def coords(s, lane, mi, ni, r):
        return (s.origin.m0 + s.wm + mi * op.m + lanes.acc_owner(op, lane, r).row,
                s.origin.n0 + s.wn + ni * op.n + lanes.acc_owner(op, lane, r).col)

    def flat(s, lane, mi, ni, r):
        return s.origin.bz * (M * N) + coords(s, lane, mi, ni, r)[0] * N + coords(s, lane, mi, ni, r)[1]

    def inside(s, lane, mi, ni, r):
        return T.And(coords(s, lane, mi, ni, r)[0] < M, coords(s, lane, mi, ni, r)[1] < N)

    partial, gather = _workspace_macros(epilogue.reduction, k_steps, outputs, slices)

    @T.macro
    def store(C, rd, s, lane):
        tile = s.origin.bz * (grid.tiles[0] * grid.tiles[1]) + s.origin.m0 // block[0] * grid.tiles[1] + s.origin.n0 // block[1]
        ticket = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="shared")])
        for mi in T.unroll(RM):
            for ni in T.unroll(RN):
                for r in T.unroll(op.acc_elems):
                    if inside(s, lane, mi, ni, r):
                        partial(s.args.W, s, flat(s, lane, mi, ni, r), rd[(mi * RN + ni) * op.acc_elems + r])
        T.rocm.fence_release()
        T.rocm.workgroup_barrier()
        if s.tx == 0:
            ticket[0] = T.rocm.global_atomic_add_u32(s.args.S, tile, T.uint32(1))
        T.rocm.workgroup_barrier()
        if ticket[0] == T.uint32(splits - 1):
            T.rocm.fence_acquire()
            for mi in T.unroll(RM):
                for ni in T.unroll(RN):
                    for r in T.unroll(op.acc_elems):
                        if inside(s, lane, mi, ni, r):
                            gather(s.args.W, rd, (mi * RN + ni) * op.acc_elems + r, flat(s, lane, mi, ni, r))
            if s.tx == 0:
                s.args.S[tile] = T.uint32(0)
            store_c(C, rd, s, lane)
    return store


__all__ = ["THREADS", "Fragments", "Stage", "Staging", "TileOrigin", "WaveState", "decode", "epilogue_store",
           "epilogue_value", "fragment_reader", "fused_inputs", "fused_ops", "k_offset", "kernel_function", "mfma_step",
           "operand_coords", "rows_end", "span", "split_store", "staging_sets", "tile_origin", "unit_scaled_step"]
