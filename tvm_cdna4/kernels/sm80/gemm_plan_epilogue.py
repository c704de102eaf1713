"""The CUDA GEMM's epilogue (part of the plan, ``kernels.sm80.gemm_plan``): the operations on the f32
accumulator tile before the store (:class:`EpilogueOp`: the split-K reduction, the fused epilogue, the
conversion) and the store (:class:`Epilogue`, ``plan_epilogue``); the residual's L2 prefetch
(``plan_prefetch``) and its copy through shared memory (``plan_residual_stage``). Pure Python, no TIRx."""

from __future__ import annotations

import attrs

from ..gemm.dynamic_m import divides, is_static
from ..gemm.epilogue import Fusion
from .gemm_config import Extent, GemmConfig, _short_out
from .gemm_plan_kloop import KLoop


@attrs.frozen
class EpilogueOp:
    """One operation on the thread's f32 accumulator tile before the store."""

    kind: str
    """``"reduce"``: the split-K reduction (first: the slice's partial tile goes to the f32
    workspace ``W``; the tile's last CTA, by the ticket counter ``S``, gathers the sum into its
    accumulators and clears ``W`` and ``S`` for the next launch); ``"fuse"``: the fused epilogue
    (``GemmPlan.fusion``, ``kernels.gemm.epilogue.apply`` on every accumulator element, its inputs read
    at the element's row and column); ``"convert"``: rounding to the output dtype."""
    instr: str
    """Its PTX: ``red.global.add.f32`` (atomic reduction) or ``st.global.f32`` (ordered: one
    workspace slice per K slice) for ``reduce``; for ``fuse`` its activation's instruction
    (``ex2.approx.ftz.f32`` for silu and gelu, ``max.f32`` for relu) or, without one, ``fma.rn.f32``
    (scales, bias and residual); ``cvt.rn.{f16,bf16}x2.f32`` (a pair into one b32) or
    ``cvt.rn.{f16,bf16}.f32`` (one element, odd N) for ``convert``."""
    dtype: str
    """TIR dtype of the registers it produces (``uint32`` pairs, ``uint16`` elements)."""
    vector: int = 1
    """Elements per instruction of ``reduce``: 1, or 2 (``st.global.v2.f32`` column pairs)."""
    gather: str = ""
    """``reduce``: the last CTA's workspace load (``ld.global.cg.f32``, ``ld.global.cg.v2.f32``)."""
    branch_free: bool = False
    """``reduce``: no branch at C's edge: each workspace store carries its edge test as its PTX
    predicate, each gather load reads at its row and column clamped into C (a sum outside C is never
    stored; the atomic slice's clearing store is predicated). A symbolic M sets it (``plan_epilogue``):
    its edge tests never fold away, and a branch around each pair made the tile's last CTA wait for
    one pair's loads before issuing the next's (an L2 round trip per pair). A static M keeps the
    branches its kernels were pinned with."""


@attrs.frozen
class Epilogue:
    """How the accumulators reach C: ``ops`` in order on the accumulator tile, then one store."""

    out_dtype: str
    """TIR dtype of C."""
    ops: tuple[EpilogueOp, ...]
    """Applied in order to the f32 accumulators (for odd N per element, just before its store)."""
    vector: int
    """Elements per store: 2 (N even) or 1 (odd N: rows not 4/8-byte aligned)."""
    store_instr: str
    """``st.global.v2.f32`` / ``st.global.b32`` (an f32 pair / a converted 16-bit pair), or for odd N
    ``st.global.f32`` / ``st.global.b16`` (one element)."""
    masked: bool
    """A tile can cross the edge of C: each store is predicated (per row half for pairs, per element
    for odd N, where it is always set)."""
    align: int
    """Byte alignment of a store."""
    prefetch: str = ""
    """The L2 prefetch of the tile's residual rows (``prefetch.global.L2``: one per 128-byte line a
    warp's row covers), issued at the start of k-tile ``prefetch_at`` (the persistent kernel: of each
    of its tiles), so that the epilogue's residual loads hit the L2 instead of waiting on DRAM after
    the k-loop, when nothing else runs on the SM; "" for none (no residual) (``plan_prefetch``)."""
    prefetch_at: int = 0
    """The k-tile at whose start the prefetch goes out (the unrolled loop: the start of its group)."""
    residual_rows: int = 0
    """The residual through shared memory (``plan_residual_stage``): rows of the residual tile that one
    freed stage takes; the tile's ``block_m / residual_rows`` parts are copied by ``cp.async`` (16-byte
    chunks, coalesced) at k-tiles ``residual_first``, ``residual_first + 1``, ..., each into the stage
    that k-tile's copies ahead would fill were there k-tiles left, and the fused epilogue reads its
    residual pairs from there (conflict-free: rows ``residual_pitch`` elements apart). 0: the epilogue
    loads the residual from global memory."""
    residual_first: int = 0
    """The k-tile that copies the residual's first part (``k_tiles - stages + 1``: the first without
    copies ahead)."""
    residual_pitch: int = 0
    """Elements from one residual row to the next in shared memory (``block_n + 8``: 16 bytes of padding
    put a warp's eight rows of one pair load in different banks)."""

    @property
    def convert(self) -> EpilogueOp | None:
        """The conversion to ``out_dtype`` (None for f32 C)."""
        return next((op for op in self.ops if op.kind == "convert"), None)

    @property
    def reduce(self) -> EpilogueOp | None:
        """The split-K reduction (None without a K split)."""
        return next((op for op in self.ops if op.kind == "reduce"), None)

    @property
    def fuse(self) -> EpilogueOp | None:
        """The fused epilogue (None when the plan fuses nothing)."""
        return next((op for op in self.ops if op.kind == "fuse"), None)


def fuse_op(fusion: Fusion) -> EpilogueOp | None:
    """The ``"fuse"`` op of a fusion (None for ``Fusion()``): f32 in, f32 out."""
    if fusion.empty:
        return None
    instrs = {"silu": "ex2.approx.ftz.f32", "gelu": "ex2.approx.ftz.f32", "relu": "max.f32"}
    instr = instrs.get(fusion.activation, "fma.rn.f32")
    return EpilogueOp("fuse", instr, "float32")


def plan_epilogue(M: Extent, N: int, ot: str, cfg: GemmConfig, fusion: Fusion = Fusion()) -> Epilogue:
    """Pairs of columns (N even: ``st.global.v2.f32``, or ``cvt.rn.*x2.f32`` + ``st.global.b32``),
    else one element per store (``st.global.f32``, or ``cvt.rn.*.f32`` + ``st.global.b16``); with
    ``split_k`` > 1 the reduction comes first, then the fused epilogue (``fuse_op``), then the
    conversion."""
    ep = _store_epilogue(M, N, ot, cfg)
    fuse = fuse_op(fusion)
    if fuse is not None:
        ep = attrs.evolve(ep, ops=(fuse, *ep.ops))
    if cfg.split_k == 1:
        return ep
    vector = cfg.reduce_vector if N % 2 == 0 else 1  # pairs need even rows of W (8-byte aligned)
    if cfg.reduction == "atomic":
        op = EpilogueOp("reduce", "red.global.add.f32", "float32", 1, "ld.global.cg.f32")
    elif vector == 2:
        op = EpilogueOp("reduce", "st.global.v2.f32", "float32", 2, "ld.global.cg.v2.f32")
    else:
        op = EpilogueOp("reduce", "st.global.f32", "float32", 1, "ld.global.cg.f32")
    return attrs.evolve(ep, ops=(attrs.evolve(op, branch_free=not is_static(M)), *ep.ops))


PREFETCH_AHEAD = 8
"""How many k-tiles before the end of the k-loop the residual's L2 prefetch goes out: late enough
that the tile's A and B streaming does not evict the lines first (a wave of 128 x 256 tiles at
4096^3 streams about 40 MB through the L2 in its 64 k-tiles), early enough that DRAM returns them
(8 k-tiles of 64 are about 8 µs on the H200; the lines of one wave of residual tiles, 8 MB, take
about 2 µs)."""


def plan_prefetch(ep: Epilogue, fusion: Fusion, kloop: KLoop) -> Epilogue:
    """``ep`` with the residual's L2 prefetch (``Epilogue.prefetch``) when the plan fuses a residual,
    ``PREFETCH_AHEAD`` k-tiles before the end of each tile's k-loop (at the first k-tile of a short
    loop); plans without a residual are unchanged (so is their code)."""
    if not fusion.residual:
        return ep
    return attrs.evolve(ep, prefetch="prefetch.global.L2", prefetch_at=max(0, kloop.k_tiles - PREFETCH_AHEAD))


RESIDUAL_PAD = 8
"""Elements of padding per row of the residual in shared memory (``Epilogue.residual_pitch``): 16 bytes,
so a row stays 16-byte aligned for ``cp.async`` and the eight rows of a warp's pair load fall in eight
different groups of four banks."""


def plan_residual_stage(ep: Epilogue, fusion: Fusion, cfg: GemmConfig, kloop: KLoop, out_bytes: int) -> Epilogue:
    """``ep`` with the residual through shared memory (``Epilogue.residual_rows``) when the config asks
    for it (``GemmConfig.residual_stage``) and it applies: a fused residual read by pairs (16-bit C, N
    even), tiles that never cross C's edge, one tile per CTA and no K split (the stages freed in the last
    k-tiles hold it; the persistent kernel fills them with its next tile), and ``block_m`` cut into at most
    ``stages - 1`` parts of whole warp rows, each fitting one stage. It replaces the epilogue's global loads
    of the residual (4-byte pairs, half of every 32-byte sector, after the k-loop) by 16-byte copies
    overlapped with the last k-tiles, at the price of a CTA barrier before the epilogue (no warp starts
    its epilogue before the slowest finishes its mma); otherwise ``ep`` is unchanged (so is the code)."""
    if not (cfg.residual_stage and fusion.residual and ep.vector == 2 and ep.convert is not None and not ep.masked
            and kloop.form == "unrolled" and cfg.split_k == 1):
        return ep
    pitch = cfg.block_n + RESIDUAL_PAD
    stage_bytes = (cfg.block_m + cfg.block_n) * cfg.block_k * 2
    for parts in range(1, cfg.stages):
        rows = cfg.block_m // parts
        if cfg.block_m % parts == 0 and rows % cfg.warp_m == 0 and rows * pitch * out_bytes <= stage_bytes:
            return attrs.evolve(ep, residual_rows=rows, residual_first=kloop.k_tiles - cfg.stages + 1,
                                residual_pitch=pitch)
    return ep


def _store_epilogue(M: Extent, N: int, ot: str, cfg: GemmConfig) -> Epilogue:
    masked = not divides(M, cfg.block_m) or not divides(N, cfg.block_n)
    short = _short_out(ot)
    if N % 2 == 0:
        if ot == "float32":
            return Epilogue(ot, (), 2, "st.global.v2.f32", masked, 8)
        return Epilogue(ot, (EpilogueOp("convert", f"cvt.rn.{short}x2.f32", "uint32"),), 2, "st.global.b32", masked, 4)
    if ot == "float32":
        return Epilogue(ot, (), 1, "st.global.f32", True, 4)
    return Epilogue(ot, (EpilogueOp("convert", f"cvt.rn.{short}.f32", "uint16"),), 1, "st.global.b16", True, 2)
