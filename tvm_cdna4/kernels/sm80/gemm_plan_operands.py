"""How the CUDA GEMM's operands travel (part of the plan, ``kernels.sm80.gemm_plan``): the shared-memory
swizzle (:class:`Swizzle`), each operand's shared tile and its split over the CTA's threads
(:class:`OperandTile`, ``make_operands``), the global -> shared copy (:class:`CopyPlan`, ``plan_copy``)
and the shared -> register ``ldmatrix`` reads (:class:`LdmatrixPlan`, ``plan_ldmatrix``), together an
:class:`OperandPlan`. Pure Python, no TIRx."""

from __future__ import annotations

import math
from dataclasses import dataclass

import attrs

from ..gemm.dynamic_m import divides, is_static
from .gemm_config import LDMATRIX, LDMATRIX_TRANS, GemmConfig


# ----------------------------------------------------------------------------------------------
# Shared-memory swizzle
# ----------------------------------------------------------------------------------------------


def swizzle_shift(row_elems: int) -> int:
    """CUTLASS ``Swizzle<3, 3, S>`` shift for a shared tile whose rows hold ``row_elems`` halves.

    The XOR takes the 16-byte chunk index (element bits 3..5) and flips it with three row bits.
    For rows of >= 64 halves those are the three lowest row bits; for 32-half rows two rows share a
    128-byte line, so the row bits 1..3 are used. Either way the eight 16-byte rows that one ldmatrix
    phase reads (and the 16-byte chunks that eight consecutive cp.async threads write) land in eight
    different bank groups.
    """
    return max(3, int(math.log2(row_elems)) - 3)


@attrs.frozen
class Swizzle:
    """CUTLASS ``Swizzle<bits, base, shift>``: offset bits ``[base + shift, base + shift + bits)`` XORed
    into bits ``[base, base + bits)``. The one swizzle of the shared tiles, for every use: ``swz(x)``
    on a Python int (the planner's checks) or on a TIR expression (the emission's per-lane and
    per-thread addresses), and ``layout(tile)``, the same map as TIRx's ``ComposeLayout`` (the
    shared views; ``tests/kernels/sm80/test_cuda_gemm.py`` checks they agree)."""

    base: int
    """Offset bits left alone below the XORed field (3 on element offsets: a 16-byte chunk)."""
    bits: int
    """Width of the XORed field (3: eight 16-byte chunks)."""
    shift: int
    """Distance from the XORed field up to the bits XORed into it (``swizzle_shift``)."""

    @classmethod
    def for_row(cls, row_elems: int) -> Swizzle:
        """The element-offset swizzle of a shared tile whose rows hold ``row_elems`` halves."""
        return cls(3, 3, swizzle_shift(row_elems))

    def words(self) -> Swizzle:
        """The same swizzle on b32-word offsets (two halves a word)."""
        return Swizzle(self.base - 1, self.bits, self.shift)

    def __call__(self, x):
        return x ^ (((x >> (self.base + self.shift)) & ((1 << self.bits) - 1)) << self.base)

    def layout(self, tile):
        """TIRx's ``ComposeLayout`` of this swizzle over ``tile`` (a ``TileLayout``)."""
        from tvm_tirx.tirx.layout import ComposeLayout

        return ComposeLayout(self.base, self.bits, self.shift, tile)


def swizzle_elem(offset: int, row_elems: int) -> int:
    """The swizzled element offset (``Swizzle.for_row(row_elems)``)."""
    return Swizzle.for_row(row_elems)(offset)


def swizzle_word(word: int, row_elems: int) -> int:
    """The swizzled offset in b32 words (two halves) of a word offset."""
    return Swizzle.for_row(row_elems).words()(word)


# ----------------------------------------------------------------------------------------------
# Operand tiles
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperandTile:
    """One input operand's tile in shared memory and how the CTA's threads split its copy."""

    name: str
    """``"A"`` or ``"B"``."""
    rows: int
    """Tile rows (the dimension that is not contiguous in memory)."""
    cols: int
    """Tile columns (contiguous in global and shared memory)."""
    grows: int
    """Global extent along the rows."""
    gcols: int
    """Global extent along the columns (the leading dimension)."""
    trans: bool
    """Read with ``ldmatrix .trans``: K is the row dimension (A in ``t*``, B in ``*n``)."""
    vec: int
    """Elements per cp.async chunk (8, 4, 2), or 1 for plain element copies."""
    threads: int
    """Threads of the CTA sharing the copy."""

    @property
    def chunks_per_row(self) -> int:
        return self.cols // self.vec

    @property
    def reps(self) -> int:
        return self.rows * self.chunks_per_row // self.threads

    @property
    def elems(self) -> int:
        return self.rows * self.cols

    def chunk_coord(self, tid, rep):
        """(row, col) in the tile of the chunk copied by thread ``tid`` in repeat ``rep``."""
        cpr, nt = self.chunks_per_row, self.threads
        if cpr <= nt:
            return rep * (nt // cpr) + tid // cpr, (tid % cpr) * self.vec
        per = cpr // nt
        return rep // per, ((rep % per) * nt + tid) * self.vec

    def copy_iters(self, row_stride: int):
        """Shard factors (extent, stride) of the (warp, lane, rep, elem) chunk view."""
        cpr, nt, v = self.chunks_per_row, self.threads, self.vec
        if cpr <= nt:
            return [(nt // cpr, row_stride), (cpr, v), (self.reps, (nt // cpr) * row_stride), (v, 1)]
        per = cpr // nt
        return [(nt, v), (self.reps // per, row_stride), (per, nt * v), (v, 1)]


def _vec_for(ld: int) -> int:
    for v in (8, 4, 2):
        if ld % v == 0:
            return v
    return 1


def make_operands(M, N, K, layout, cfg: GemmConfig) -> tuple[OperandTile, OperandTile]:
    """The shared tiles of A and B for a problem, layout and tiling."""
    layout = layout.lower()
    nt = cfg.threads
    if layout[0] == "n":  # A [M, K]
        a = OperandTile("A", cfg.block_m, cfg.block_k, M, K, False, _vec_for(K), nt)
    else:  # A [K, M]
        a = OperandTile("A", cfg.block_k, cfg.block_m, K, M, True, _vec_for(M), nt)
    if layout[1] == "t":  # B [N, K]
        b = OperandTile("B", cfg.block_n, cfg.block_k, N, K, False, _vec_for(K), nt)
    else:  # B [K, N]
        b = OperandTile("B", cfg.block_k, cfg.block_n, K, N, True, _vec_for(N), nt)
    for op in (a, b):
        total = op.rows * op.chunks_per_row
        if total % nt:
            raise ValueError(f"{op.name} tile {op.rows}x{op.cols} does not split over {nt} threads")
        cpr = op.chunks_per_row
        if not (cpr <= nt and nt % cpr == 0) and not (cpr > nt and cpr % nt == 0):
            raise ValueError(f"{op.name}: {cpr} chunks per row vs {nt} threads")
    return a, b


def _check_warp_offsets_neutral(op: OperandTile, cfg: GemmConfig) -> None:
    """The per-warp base offset must commute with the swizzle (it is added to the pointer)."""
    off = cfg.warp_m if op.name == "A" else cfg.warp_n
    if op.trans:
        span = [(r, c) for r in range(op.rows) for c in range(off)]
        offsets = [w * off for w in range(op.cols // off)]
    else:
        span = [(r, c) for r in range(off) for c in range(op.cols)]
        offsets = [w * off * op.cols for w in range(op.rows // off)]
    swz = Swizzle.for_row(op.cols)
    for base in offsets:
        for r, c in span[:: max(1, len(span) // 4096)]:
            x = r * op.cols + c
            if swz(base + x) != base + swz(x):
                raise ValueError(
                    f"{op.name}: warp tile offset {base} does not commute with the shared swizzle; "
                    "use a warp tile of at least 64 along the contiguous dimension"
                )


# ----------------------------------------------------------------------------------------------
# Copy and ldmatrix records
# ----------------------------------------------------------------------------------------------


@attrs.frozen
class CopyPlan:
    """How one operand's tile goes from global to shared memory each k-tile.

    ``kind`` selects the form: ``"thread"``, every thread copies its own chunks through a
    per-thread view whose repeat offsets are immediates (the swizzle leaves them unchanged, checked
    for every thread); ``"cta"``, one CTA-wide copy through the swizzled ``ComposeLayout`` view;
    ``"element"``, plain element copies (leading dimension odd: no aligned cp.async exists)."""

    kind: str
    """``"thread"``, ``"cta"`` or ``"element"``."""
    instr: str | None
    """``cp.async.cg.shared.global`` (16 B chunks) or ``cp.async.ca.shared.global`` (8/4 B);
    None for element copies."""
    chunk_bytes: int
    """Bytes per cp.async chunk."""
    masked: bool
    """The tile can run past the global extent: every chunk is zero-filled past it (``src_size``)."""
    rows_clamped: bool = False
    """``"thread"`` copies of a symbolic row extent (a dynamic M, a grouped GEMM's T) whose columns stay
    inside: each chunk's row is clamped to the last row instead (``min(row, rows - 1)``; the tile's rows
    past the end load a copy of the last row, whose products are never stored), so no copy carries a
    predicate in the k-loop and ``masked`` is False (``clamp_rows``)."""
    thread_shape: tuple[int, ...] = ()
    """``"thread"``: the per-thread view's shape, repeat factors then the chunk."""
    thread_global_strides: tuple[int, ...] = ()
    """``"thread"``: element strides of that view in global memory."""
    thread_shared_strides: tuple[int, ...] = ()
    """``"thread"``: element strides of that view in the shared tile (after the thread's swizzle)."""
    row_deltas: tuple[int, ...] = ()
    """``"thread"``: tile rows of each repeat's chunk after the thread's first chunk."""
    col_deltas: tuple[int, ...] = ()
    """``"thread"``: tile columns of each repeat's chunk after the thread's first chunk."""
    global_iters: tuple[tuple[int, int], ...] = ()
    """``"cta"``: (extent, stride) of the (warp, lane, repeat, element) view of global memory."""
    shared_iters: tuple[tuple[int, int], ...] = ()
    """``"cta"``: the same view of the (unswizzled) shared tile."""


@attrs.frozen
class LaneAddress:
    """A lane's word offset inside its warp's slice of a stage, before the swizzle:
    ``warp * warp_stride + (lane // 16) * matrix_hi + (lane // 8 % 2) * matrix_lo + (lane % 8) * row``.
    Lanes 8j..8j+7 give the row addresses of matrix j of an ``.x4`` ldmatrix."""

    warp_stride: int
    """Words between the slices of consecutive warps along the operand's tile dimension."""
    matrix_hi: int
    """Words to matrices 2 and 3 (lanes 16..31)."""
    matrix_lo: int
    """Words to matrices 1 and 3 (lanes 8..15, 24..31)."""
    row: int
    """Words between the eight rows of one matrix."""

    def offset(self, warp, lane):
        """The word offset of ``lane`` in warp ``warp``: Python ints (the planner's checks) or TIR
        expressions (the emission's ``lof``)."""
        return warp * self.warp_stride + (lane // 16) * self.matrix_hi + ((lane // 8) % 2) * self.matrix_lo + (lane % 8) * self.row


@attrs.frozen
class LdmatrixGroup:
    """One ``ldmatrix`` apply of a k-step with a precomputed lane address: it reads repeats
    ``first .. first + count - 1`` at ``(swizzled lane address ^ xor) + add + i * stride`` words."""

    first: int
    """First repeat (x4 matrix quad) of the group."""
    count: int
    """Repeats issued by the apply."""
    xor: int
    """Word offset XORed into the lane's swizzled address (chunk-index bits only)."""
    add: int
    """Word offset added after the XOR (bits the swizzle never reads)."""
    stride: int
    """Words between consecutive repeats of the group (0 for a single repeat)."""


@attrs.frozen
class LdmatrixPlan:
    """How a warp reads one operand's fragments from shared memory."""

    instr: str
    """``ldmatrix...x4.shared.b16``, with ``.trans`` for the operand whose K is not contiguous."""
    trans: bool
    """Whether ``instr`` transposes (the operand is stored [K][M or N])."""
    repeats: int
    """x4 ldmatrix per k-step and warp (``mma_m`` for A, ``mma_n / 2`` for B)."""
    view: tuple[tuple[int, int], ...]
    """(extent, stride) in words of the (k-step, repeat, matrix hi, matrix lo, row, word) view of
    a warp's slice (the generic path's ``ComposeLayout`` source)."""
    warp_words: int
    """Words between the slices of consecutive warps (the generic path adds it to the pointer)."""
    lane: LaneAddress | None
    """The precomputed lane address; None on the generic path (``precompute=False``, or a swizzle
    that does not split into XOR and add parts for this operand)."""
    steps: tuple[tuple[LdmatrixGroup, ...], ...] = ()
    """Per k-step, the applies issued from the precomputed lane address (empty on the generic path)."""
    offset_in_view: bool = False
    """Each group's constant part (stage, tile and k-step offsets; the stage a constant or a
    loop variable that unrolls after lowering) is the
    view's offset from a pointer holding only ``lof ^ xor``, so the device compiler sees the
    pointer plus an immediate; otherwise it is folded into the pointer's int index. B stored
    [K, N] (layouts ``*n``) takes the first form: its four groups per k-step, each with its own
    XOR, make 4 x k-steps x stages distinct int sums in the unrolled k-loop, and NVRTC 13.0 keeps
    them in registers (255 + ~500 B of spills on sm_90) where the pointer-plus-immediate form
    needs one register per XOR (255, no spills; tests/kernels/sm80/test_cuda_gemm.py)."""

    def per_repeat(self, kk: int) -> bool:
        """Whether k-step ``kk`` issues one apply per repeat (``repeat_group``), not one group."""
        return len(self.steps[kk]) > 1

    def repeat_group(self, kk: int, rep) -> LdmatrixGroup:
        """The apply of repeat ``rep`` in a per-repeat k-step ``kk``; ``rep`` may be a loop
        variable, the fields then TIR expressions that fold once the loop unrolls."""
        (_, skk), (_, srep), *_ = self.view
        xor, add = split_offset(kk * skk + rep * srep)
        return LdmatrixGroup(rep, 1, xor, add, 0)

    def group(self, kk: int, i) -> LdmatrixGroup:
        """Apply ``i`` of k-step ``kk`` (``i`` a loop variable over ``len(steps[kk])``): the step's one
        group, or its per-repeat group ``i``."""
        return self.repeat_group(kk, i) if self.per_repeat(kk) else self.steps[kk][0]


@attrs.frozen
class OperandPlan:
    """Everything about one input operand: storage, shared tile, copy and ldmatrix."""

    name: str
    """``"A"`` or ``"B"``."""
    shape: tuple[int, int]
    """Global storage shape (``operand_shapes``)."""
    tile: OperandTile
    """The shared tile and its split over the CTA's threads."""
    smem_offset: int
    """Elements from the start of a stage to this tile (A first, then B)."""
    swizzle: Swizzle
    """The shared tile's element-offset swizzle (``Swizzle.for_row(tile.cols)``)."""
    warp_offset: int
    """Elements between the slices of consecutive warps in the shared tile."""
    copy: CopyPlan
    """Global -> shared copy."""
    ldmatrix: LdmatrixPlan
    """Shared -> registers."""


# ----------------------------------------------------------------------------------------------
# Planning the ldmatrix reads and the copies
# ----------------------------------------------------------------------------------------------


def ldmatrix_view(op: OperandTile, k_steps: int, repeats: int) -> tuple[tuple[int, int], ...]:
    """(extent, stride) in b32 words of the (k-step, repeat, matrix hi, matrix lo, row, word)
    ldmatrix source view of one warp's slice. Matrix j = 2 * hi + lo covers, for A, (k half hi,
    m half lo); for B, (n half hi, k half lo) -- the mma fragment order."""
    rw = op.cols // 2
    if op.name == "A" and not op.trans:  # rows m, cols k
        it = [(k_steps, 8), (repeats, 16 * rw), (2, 4), (2, 8 * rw), (8, rw), (4, 1)]
    elif op.name == "A":  # rows k, cols m
        it = [(k_steps, 16 * rw), (repeats, 8), (2, 8 * rw), (2, 4), (8, rw), (4, 1)]
    elif not op.trans:  # B rows n, cols k
        it = [(k_steps, 8), (repeats, 16 * rw), (2, 8 * rw), (2, 4), (8, rw), (4, 1)]
    else:  # B rows k, cols n
        it = [(k_steps, 16 * rw), (repeats, 8), (2, 4), (2, 8 * rw), (8, rw), (4, 1)]
    return tuple(it)


def split_offset(d):
    """A word offset from the lane's swizzled address as (XOR part, add part): the chunk-index
    bits the swizzle reads (0x1C) and the rest. ``d`` is an int (the planner) or a TIR expression
    of loop variables (the emission of a per-repeat k-step as one loop)."""
    dx = d & 0x1C
    return dx, d - dx


def _ldmatrix_steps(op: OperandTile, view, lane: LaneAddress, warps: int):
    """The precomputed-address applies per k-step, or None when the swizzle does not split.

    For every ldmatrix a lane issues, the address is swz(x_lane + d), d a compile-time offset
    (k-step, repeat). When d splits into bits the XOR never reads (added) and bits of the chunk
    index the lane part never sets (XORed), swz(x + d) == (swz(x) ^ dx) + da: the lane computes
    swz(x) once, outside the k-loop, and each ldmatrix is one XOR/add (or a register+immediate
    address). The split is verified here for every warp and lane."""
    (k_steps, skk), (repeats, srep), *_ = view
    lanes = [lane.offset(w, ln) for w in range(warps) for ln in range(32)]
    swz = Swizzle.for_row(op.cols).words()
    steps = []
    for kk in range(k_steps):
        parts = []
        for rep in range(repeats):
            d = kk * skk + rep * srep
            dx, da = split_offset(d)
            if any((swz(x) ^ dx) + da != swz(x + d) for x in lanes):
                return None
            parts.append((dx, da))
        dxs = {dx for dx, _ in parts}
        strides = {parts[i + 1][1] - parts[i][1] for i in range(repeats - 1)}
        if len(dxs) == 1 and len(strides) <= 1:
            steps.append((LdmatrixGroup(0, repeats, parts[0][0], parts[0][1], strides.pop() if strides else 0),))
        else:
            steps.append(tuple(LdmatrixGroup(rep, 1, dx, da, 0) for rep, (dx, da) in enumerate(parts)))
    return tuple(steps)


def plan_ldmatrix(op: OperandTile, cfg: GemmConfig) -> LdmatrixPlan:
    """The ldmatrix plan of one operand (precomputed lane addresses when ``cfg.precompute``)."""
    k_steps = cfg.block_k // 16
    repeats = cfg.warp_m // 16 if op.name == "A" else cfg.warp_n // 16
    view = ldmatrix_view(op, k_steps, repeats)
    warp_elems = cfg.warp_m if op.name == "A" else cfg.warp_n
    warp_words = warp_elems // 2 if op.trans else warp_elems * op.cols // 2
    instr = LDMATRIX_TRANS if op.trans else LDMATRIX
    if cfg.precompute:
        _, _, (_, sjh), (_, sjl), (_, srow), _ = view
        lane = LaneAddress(warp_words, sjh, sjl, srow)
        steps = _ldmatrix_steps(op, view, lane, cfg.warps_m if op.name == "A" else cfg.warps_n)
        if steps is not None:
            return LdmatrixPlan(instr, op.trans, repeats, view, warp_words, lane, steps,
                                offset_in_view=op.name == "B" and op.trans)
    _check_warp_offsets_neutral(op, cfg)  # generic path: the warp offset goes into the view's base
    return LdmatrixPlan(instr, op.trans, repeats, view, warp_words, None)


def _thread_copy(op: OperandTile, masked: bool, instr: str) -> CopyPlan | None:
    """The per-thread copy view, or None when a repeat's swizzled offset is not the thread's first
    chunk's swizzled offset plus a constant (then the CTA-wide view is used)."""
    nt, cpr, v = op.threads, op.chunks_per_row, op.vec
    if cpr <= nt:
        reps_f = [(op.reps, nt // cpr, 0)]
    else:
        per = cpr // nt
        reps_f = [(op.reps // per, 1, 0), (per, 0, nt * v)]
    r0, c0 = op.chunk_coord(0, 0)
    deltas = [(r1 - r0, c1 - c0) for r1, c1 in (op.chunk_coord(0, rep) for rep in range(op.reps))]
    swz = Swizzle.for_row(op.cols)
    for tid in range(nt):
        r0, c0 = op.chunk_coord(tid, 0)
        base = swz(r0 * op.cols + c0)
        for rep, (dr, dc) in enumerate(deltas):
            r1, c1 = op.chunk_coord(tid, rep)
            if (r1 - r0, c1 - c0) != (dr, dc):
                return None
            if swz(r1 * op.cols + c1) != base + dr * op.cols + dc:
                return None
    return CopyPlan(
        "thread", instr, 2 * v, masked,
        thread_shape=tuple(e for e, _, _ in reps_f) + (v,),
        thread_global_strides=tuple(dr * op.gcols + dc for _, dr, dc in reps_f) + (1,),
        thread_shared_strides=tuple(dr * op.cols + dc for _, dr, dc in reps_f) + (1,),
        row_deltas=tuple(d[0] for d in deltas),
        col_deltas=tuple(d[1] for d in deltas),
    )


def clamp_rows(op: OperandTile) -> bool:
    """Whether an operand's copies clamp their rows (``CopyPlan.rows_clamped``) instead of masking them:
    its rows are a symbolic extent (a static M keeps the masked copy its kernels were pinned with,
    tests/kernels/sm80/test_cuda_gemm_golden.py) and its columns divide into tiles. The masked copy's predicates
    (row and column per chunk) were recomputed in the k-loop; clamped rows cost one register per
    chunk, bound before the loop."""
    return not is_static(op.grows) and divides(op.gcols, op.cols)


def plan_copy(op: OperandTile, cfg: GemmConfig) -> CopyPlan:
    """The global -> shared copy plan of one operand."""
    masked = not divides(op.grows, op.rows) or not divides(op.gcols, op.cols)
    if op.vec == 1:
        return CopyPlan("element", None, 2, masked)
    instr = "cp.async.cg.shared.global" if op.vec == 8 else "cp.async.ca.shared.global"
    fast = _thread_copy(op, masked, instr) if cfg.precompute else None
    if fast is not None and clamp_rows(op):
        fast = attrs.evolve(fast, masked=False, rows_clamped=True)
    return fast or CopyPlan("cta", instr, 2 * op.vec, masked,
                            global_iters=tuple(op.copy_iters(op.gcols)), shared_iters=tuple(op.copy_iters(op.cols)))
