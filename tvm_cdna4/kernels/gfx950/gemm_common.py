"""What the gfx950 GEMMs (dense and MX) and the gfx950 attention share, without TIRx: the launch grid
(``Grid``, decoded once per kernel: ``GridIndex``), the epilogue (``Epilogue``: what happens to the
accumulator tile before the store; ``split_epilogue``, ``convert_epilogue``, ``fuse_epilogue``) with the
output storage dtypes (``OUT_STORAGE``), and ``Extent``. Part of the plans (``kernels.gfx950.gemm_plan``).

Extents that depend on the problem (``M`` and what is derived from it: the grid's tile rows, C's
shape) are typed ``Extent``: Python ints, or a symbolic ``M`` (a TIR variable: dynamic M, the grouped
GEMM's total), so the emission never calls ``int()`` on them; the validation compares them only where
they are ints."""

from __future__ import annotations

import operator
from typing import Union

import attrs

from ..gemm.epilogue import Fusion, Param
from ..gemm.grouped import Groups


Extent = Union[int, "PrimExpr"]  # noqa: F821 (a TIR expression: the symbolic M to come)


# -------------------------------------------------------------------------------- the launch grid


@attrs.frozen
class Grid:
    """The launch grid, one workgroup per output tile: ``tiles`` = (tile rows, tile columns) per
    batch, ``batch`` workgroups along a batch axis (None: the kernel has no batch axis), ``k_splits``
    workgroups along K per tile (split-K: each a range of K tiles, ``tile_origin``). ``decode`` turns ``blockIdx.x``
    into the tile's indices once per kernel (tile column fastest, then row, then K split, then batch).
    ``grouping``: a grouped GEMM (``kernels.gemm.grouped``): ``tiles[0]`` is ``grouping.row_tiles(M)`` and a
    decoded row is a row-tile index, turned into the workgroup's group and rows by a search of the
    offsets (``Groups``)."""

    tiles: tuple[Extent, int]
    batch: int | None = None
    k_splits: int = 1
    grouping: Groups | None = None

    @property
    def groups(self) -> Extent:
        """Workgroups of the launch."""
        return self.tiles[0] * self.tiles[1] * (self.batch or 1) * self.k_splits

    def decode(self, bid, div=operator.floordiv, mod=operator.mod) -> GridIndex:
        """The tile indices of workgroup ``bid`` (an int or a TIR expression). ``div``, ``mod``: Python's
        (floor) operators; the emission passes truncating ones where the tile rows are a symbolic extent
        (``symbolic``: TIRx lowers a floor division whose dividend it cannot prove non-negative with an
        offset that leaves int32 once the divisor is not a power of two, e.g. 224 tile columns)."""
        per = self.tiles[0] * self.tiles[1]
        if self.batch is None and self.k_splits == 1:
            return GridIndex(0, 0, div(bid, self.tiles[1]), mod(bid, self.tiles[1]))
        split = 0 if self.k_splits == 1 else mod(div(bid, per), self.k_splits)
        return GridIndex(div(bid, per * self.k_splits), split, div(mod(bid, per), self.tiles[1]), mod(bid, self.tiles[1]))

    @property
    def symbolic(self) -> bool:
        """Whether the tile rows are a TIR expression (dynamic M, grouped), not an int."""
        return not isinstance(self.tiles[0], int)


@attrs.frozen
class GridIndex:
    """A workgroup's indices (``Grid.decode``): batch, K split, tile row, tile column."""

    batch: object
    k_split: object
    row: object
    col: object


# ----------------------------------------------------------------------------------- the epilogue


EPILOGUE_OPS = ("reduce", "fuse", "cast", "bf16_rne", "bf16_rna", "atomic_add")  # what an epilogue may apply, in order
REDUCTIONS = ("atomic", "ordered")  # how split-K partial tiles are reduced through the workspace
# C's TIR dtype per output dtype (bf16: its bit pattern as int16)
OUT_STORAGE = {"f32": "float32", "f16": "float16", "bf16": "int16", "i32": "int32", "f64": "float64"}


@attrs.frozen
class Epilogue:
    """The operations applied to the accumulator tile before the store to C, in order: ``fuse``
    (``fusion``'s steps on the f32 accumulator: scales, bias, activation, residual; ``kernels.gemm.epilogue``),
    ``cast`` (to ``out``), ``bf16_rne`` (round to nearest even, the bf16 bit pattern as int16), ``bf16_rna``
    (round to nearest, ties away from zero: one integer add for finite values, where the tie rule does
    not matter, e.g. attention's P; the same error bound), ``atomic_add``
    (the split-K reduction into an f32 C: the f32 values are added to C with
    ``T.rocm.global_atomic_add_f32`` instead of stored, so C must hold zeros on entry); none: the
    accumulators are stored as they are. ``reduce`` (first; split-K into any output): the
    workgroup's partial tile goes to the f32 workspace ``W`` (``reduction`` "atomic": added with
    f32 atomics into one slice; "ordered": stored into the workgroup's K slice), then a ticket from
    the tile's counter in ``S``; the workgroup that draws the last ticket reads the tile's sum
    (atomic: and zeroes ``W``; ordered: the slices added in index order, bit-reproducible), resets
    the counter and applies the other operations to it (``kernels.gfx950.emit.split_store``). Each
    operation brings its parameters (``params``: the fused inputs in ``kernels.gemm.epilogue.PARAM_ORDER``, then
    the split-K workspace)."""

    acc: str  # TIR dtype of the accumulators
    out_dtype: str  # OUT_STORAGE key of C
    out: str  # TIR dtype of C
    ops: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()  # the epilogue's inputs besides C (the fused inputs; split-K: the workspace W, the tickets S)
    reduction: str | None = None  # REDUCTIONS entry with ``reduce``; None without
    slices: int = 0  # f32 workspace slices of M x N: k_splits (ordered), 1 (atomic), 0 without ``reduce``
    fusion: Fusion = Fusion()  # the fused steps of ``fuse`` (empty without)

    def __attrs_post_init__(self):
        unknown = [op for op in self.ops if op not in EPILOGUE_OPS]
        if unknown:
            raise ValueError(f"epilogue: unknown operations {unknown}; expected some of {EPILOGUE_OPS}")
        if ("reduce" in self.ops) != (self.reduction in REDUCTIONS):
            raise ValueError(f"epilogue: 'reduce' needs a reduction in {REDUCTIONS} and only it has one; got ops "
                             f"{self.ops}, reduction {self.reduction!r}")
        if ("fuse" in self.ops) == self.fusion.empty:
            raise ValueError(f"epilogue: 'fuse' needs a fusion and only it has one; got ops {self.ops}, fusion "
                             f"{self.fusion.describe()}")
        if "fuse" in self.ops and "atomic_add" in self.ops:
            raise ValueError("epilogue: a fused epilogue cannot add partial products into C ('atomic_add'): the fused "
                             "steps apply to the whole sum (reduce through the workspace)")


def split_epilogue(acc: str, out_dtype: str, k_splits: int, reduction: str = "atomic", outputs: Extent = 0,
                   tiles: Extent = 0, fused: bool = False) -> Epilogue:
    """The epilogue of a GEMM split ``k_splits`` ways along K (f32 accumulators only): the
    conversion (no split); an f32 output with ``reduction`` "atomic" and nothing ``fused``: the f32
    atomic add of the partial products into C (zeroed on entry); otherwise ``reduce`` through the
    workspace ``W`` (``slices`` x ``outputs`` f32, ``outputs`` = batch x M x N) and the tickets ``S``
    (one uint32 per output tile, ``tiles``), then the conversion (``Epilogue``; ``fuse_epilogue``
    adds the fused steps after the reduction)."""
    if k_splits == 1:
        return convert_epilogue(acc, out_dtype)
    if acc != "float32":
        raise ValueError(f"split-K (k_splits={k_splits}) reduces f32 partial products: it needs f32 accumulators; got "
                         f"{acc} -> {out_dtype}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"split-K reduction {reduction!r}; expected one of {REDUCTIONS}")
    if (out_dtype, reduction) == ("f32", "atomic") and not fused:
        return Epilogue(acc, out_dtype, OUT_STORAGE[out_dtype], ("atomic_add",))
    slices = k_splits if reduction == "ordered" else 1
    convert = convert_epilogue(acc, out_dtype)
    return Epilogue(acc, out_dtype, convert.out, ("reduce", *convert.ops),
                    (Param("W", (slices * outputs,), "float32"), Param("S", (tiles,), "uint32")), reduction, slices)


def convert_epilogue(acc: str, out_dtype: str) -> Epilogue:
    """The epilogue that only converts the accumulators to ``out_dtype``."""
    out = OUT_STORAGE[out_dtype]
    ops = ("bf16_rne",) if out_dtype == "bf16" else ("cast",) if out != acc else ()
    return Epilogue(acc, out_dtype, out, ops)


def fuse_epilogue(epilogue: Epilogue, fusion: Fusion, M: Extent, N: int, batch: int = 0, groups: int = 0) -> Epilogue:
    """``epilogue`` with ``fusion``'s steps (``fuse``: after the reduction, before the conversion)
    and its inputs (``Fusion.params``) before the workspace; ``epilogue`` itself when nothing is
    fused. ValueError where the fused epilogue cannot run: accumulators other than f32 (it computes
    in f32), a batch axis (one set of inputs per matrix is not defined). ``groups``: a grouped GEMM's
    count (its per-column inputs per group, ``Fusion.params``)."""
    if fusion.empty:
        return epilogue
    if epilogue.acc != "float32":
        raise ValueError(f"fused epilogue ({fusion.describe()}): it computes on f32 accumulators; this GEMM "
                         f"accumulates in {epilogue.acc} ({epilogue.out_dtype} output)")
    if batch:
        raise ValueError(f"fused epilogue ({fusion.describe()}): not with a batch axis (batch={batch}); the inputs "
                         f"are per matrix (row_scale [M], bias [N], residual [M, N])")
    at = 1 if epilogue.ops[:1] == ("reduce",) else 0
    return attrs.evolve(epilogue, ops=(*epilogue.ops[:at], "fuse", *epilogue.ops[at:]),
                        params=(*fusion.params(M, N, epilogue.out, groups), *epilogue.params), fusion=fusion)
