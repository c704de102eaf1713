"""Lane maps: pure functions from (lane, element/register) to matrix coordinates and back.

Every function takes Python ints, integer numpy arrays (vectorized, broadcasting) or TIR integer
expressions (the patterns prove ownership over a symbolic lane) and is the only place its formula
exists; patterns, the reference semantics, the emulator, the CLI and the docs
all call these.

MFMA inputs (AMD's matrix instruction calculator formula, ``sources.SOURCES['calculator']``)::

    A(lane, e) = (block, row, k) with row = lane % M, block = (lane // M) % blocks,
                 k = (lane // (M*blocks)) * elems + e
    B(lane, e) = (block, col, k) with the same formula, col = lane % N

It reproduces the seed's 16x16x32 f16 example (``k = 8*(lane//16) + e``) and the rules "packed
inputs: blocks = 64 / M" and "scalar inputs: each K position occupies a separate group of M lanes".

Accumulators follow the seed's five layout tables (``ACC_LAYOUTS``); ``reg`` counts accumulator
*elements* (FP64: register pairs).
"""

from __future__ import annotations


from typing import NamedTuple

from .records import WAVE_SIZE, DsReadTrOp, MfmaOp

# --------------------------------------------------------------------------------------------
# Coordinates: named, in atom order. A pattern's atom of an operand is the register tile its lanes
# own: A ``(row, k)``, B ``(col, k)`` (B's N x K view: each lane holds consecutive K of one
# column), C/D ``(row, col)``; multi-block MFMAs put the block first. ``atom(op)`` gives those
# coordinates; the fields name them, so no caller depends on a positional order.


class AElem(NamedTuple):
    """An A operand element: ``block``, ``row`` (M), ``k``."""

    block: object
    row: object
    k: object

    @property
    def mn(self):
        """The M coordinate (``row``): the operand's non-K axis."""
        return self.row

    def atom(self, op: MfmaOp) -> tuple:
        """Atom coordinates ``(block?, row, k)`` (the block only for multi-block shapes)."""
        return tuple(self) if op.blocks > 1 else (self.row, self.k)


class BElem(NamedTuple):
    """A B operand element: ``block``, ``col`` (N), ``k``; in the math ``B[k, col]``."""

    block: object
    col: object
    k: object

    @property
    def mn(self):
        """The N coordinate (``col``): the operand's non-K axis."""
        return self.col

    def atom(self, op: MfmaOp) -> tuple:
        """Atom coordinates ``(block?, col, k)``."""
        return tuple(self) if op.blocks > 1 else (self.col, self.k)


class AccElem(NamedTuple):
    """An accumulator (C/D) element: ``block``, ``row``, ``col``."""

    block: object
    row: object
    col: object

    def atom(self, op: MfmaOp) -> tuple:
        """Atom coordinates ``(block?, row, col)``."""
        return tuple(self) if op.blocks > 1 else (self.row, self.col)


# --------------------------------------------------------------------------------------------
# MFMA A / B operands


def a_owner(op: MfmaOp, lane, elem) -> AElem:
    """(lane, element) of the A operand -> ``AElem(block, row, k)``."""
    return AElem((lane // op.m) % op.blocks, lane % op.m, (lane // (op.m * op.blocks)) * op.a_elems + elem)


def b_owner(op: MfmaOp, lane, elem) -> BElem:
    """(lane, element) of the B operand -> ``BElem(block, col, k)``."""
    return BElem((lane // op.n) % op.blocks, lane % op.n, (lane // (op.n * op.blocks)) * op.b_elems + elem)


def a_lane(op: MfmaOp, block, row, k):
    """Inverse of :func:`a_owner`: (block, row, k) -> (lane, element)."""
    return row + op.m * block + op.m * op.blocks * (k // op.a_elems), k % op.a_elems


def b_lane(op: MfmaOp, block, col, k):
    """Inverse of :func:`b_owner`: (block, col, k) -> (lane, element)."""
    return col + op.n * block + op.n * op.blocks * (k // op.b_elems), k % op.b_elems


# --------------------------------------------------------------------------------------------
# Accumulators: the seed's layout tables. Each entry: (owner, inverse).
#   owner(lane, reg, blocks) -> (block, row, col);  inverse(block, row, col, blocks) -> (lane, reg)


def _acc32_owner(lane, reg, blocks):
    # rows in bands of four; band parity picks the lane half, band // 2 the register quad
    r = reg % 16
    return reg // 16, 8 * (r // 4) + 4 * (lane // 32) + r % 4, lane % 32


def _acc32_lane(block, row, col, blocks):
    return col + 32 * ((row // 4) % 2), 16 * block + 4 * (row // 8) + row % 4


def _acc16_owner(lane, reg, blocks):
    return reg // 4, 4 * (lane // 16) + reg % 4, lane % 16


def _acc16_lane(block, row, col, blocks):
    return col + 16 * (row // 4), 4 * block + row % 4


def _acc4_owner(lane, reg, blocks):
    return lane // 4, reg, lane % 4


def _acc4_lane(block, row, col, blocks):
    return 4 * block + col, row


def _acc16f64_owner(lane, reg, blocks):
    return 0 * lane, 4 * reg + lane // 16, lane % 16


def _acc16f64_lane(block, row, col, blocks):
    return col + 16 * (row % 4), row // 4


def _acc4f64_owner(lane, reg, blocks):
    return (lane // 4) % 4, lane // 16 + 0 * reg, lane % 4


def _acc4f64_lane(block, row, col, blocks):
    return 16 * row + 4 * block + col, 0 * row


ACC_LAYOUTS = {
    "32x32": (_acc32_owner, _acc32_lane),
    "16x16": (_acc16_owner, _acc16_lane),
    "4x4": (_acc4_owner, _acc4_lane),
    "16x16_f64": (_acc16f64_owner, _acc16f64_lane),
    "4x4_f64": (_acc4f64_owner, _acc4f64_lane),
}


def acc_owner(op: MfmaOp, lane, reg) -> AccElem:
    """(lane, accumulator element) -> ``AccElem(block, row, col)``."""
    owner, _ = ACC_LAYOUTS[op.acc_layout]
    return AccElem(*owner(lane, reg, op.blocks))


def acc_lane(op: MfmaOp, block, row, col):
    """(block, row, col) -> (lane, accumulator element)."""
    _, inverse = ACC_LAYOUTS[op.acc_layout]
    return inverse(block, row, col, op.blocks)


# --------------------------------------------------------------------------------------------
# MFMA modifiers as lane/block maps


def blgp_source_lane(pattern: int, lane):
    """B lane-group pattern: the lane whose B data lane ``lane`` uses (calculator, BLGP field).

    0 normal; 1 lanes 0-31 broadcast to 32-63; 2 lanes 32-63 broadcast to 0-31; 3 rotate down
    by 16 (lane L reads lane L+16 mod 64); 4..7 broadcast lanes 16*(pattern-4) .. +15 to all groups.
    """
    if pattern == 0:
        return lane
    if pattern == 1:
        return lane % 32
    if pattern == 2:
        return lane % 32 + 32
    if pattern == 3:
        return (lane + 16) % WAVE_SIZE
    if 4 <= pattern <= 7:
        return lane % 16 + 16 * (pattern - 4)
    raise ValueError(f"blgp lane-group pattern {pattern} is not in [0, 7]")


def a_source_block(cbsz: int, abid: int, block):
    """A broadcast: the block whose A operand output block ``block`` uses."""
    group = 1 << cbsz
    return (block // group) * group + abid


# --------------------------------------------------------------------------------------------
# Scaled MFMA scales


def scale_owner(op: MfmaOp, lane):
    """Scaled MFMA: lane -> (row or column, 32-wide K block) that its E8M0 scale byte covers.

    Each lane holds 32 consecutive K positions of one A row (B column), exactly one OCP MX scale
    block, so a lane's own scale register scales its own data.
    """
    return lane % op.m, (lane // op.m) * op.a_elems // 32


# --------------------------------------------------------------------------------------------
# ds_read_tr provider map

TR_GROUP = 16  # lanes exchange data inside groups of 16


def tr_provider(op: DsReadTrOp, lane, elem):
    """(result lane, element) -> (lane whose address supplies it, element offset in that lane's chunk).

    With l = lane % 16 and n elements per lane: element i of lane L is element l % n of the chunk
    read at the address of lane (L - l) + l // n + (16 // n) * i.
    """
    n = op.elements
    l = lane % TR_GROUP
    return TR_GROUP * (lane // TR_GROUP) + l // n + (TR_GROUP // n) * elem, l % n


def tr_operand_element(op: DsReadTrOp, call, elem):
    """The K split: consecutive calls fill an MFMA operand's per-lane elements in order, so element
    ``elem`` of call ``call`` is operand element ``call * n + elem`` (n elements per call)."""
    return call * op.elements + elem


def tr_call_of(op: DsReadTrOp, operand_elem):
    """Inverse of :func:`tr_operand_element`: operand element -> (call, element of that call)."""
    return operand_elem // op.elements, operand_elem % op.elements


def tr_consumer(op: DsReadTrOp, src_lane, src_elem):
    """Inverse of :func:`tr_provider`: (supplying lane, chunk element) -> (result lane, element)."""
    n = op.elements
    per = TR_GROUP // n  # chunks per row of a 16-lane group
    j = src_lane % TR_GROUP
    return TR_GROUP * (src_lane // TR_GROUP) + (j % per) * n + src_elem, j // per


# --------------------------------------------------------------------------------------------
# Cross-lane reductions (``T.rocm.wave_reduce``): the exchange steps and the lanes of an accumulator
# row or column. A lane group is given by a *lane mask*: the lanes that differ from each other only
# in the bits of the mask (``0x1f``: aligned groups of 32 consecutive lanes; ``0x20``: lanes ``l``
# and ``l ^ 32``).


class LaneExchange(NamedTuple):
    """One step of a wave reduction: every lane combines its value with that of lane ``lane ^ xor``.

    ``dpp_ctrl``: the DPP control of ``llvm.amdgcn.update.dpp`` that reads that lane
    (``sources.SOURCES['dpp']``: ``QUAD_PERM`` = the four 2-bit selects, ``ROW_MIRROR`` 0x140,
    ``ROW_HALF_MIRROR`` 0x141; a row is 16 lanes); None for the gfx950 swaps
    ``v_permlane16_swap_b32`` / ``v_permlane32_swap_b32`` (``swap``: the LLVM intrinsic), which
    exchange odd and even 16-lane rows / the two 32-lane halves of two registers: given the same
    value twice, the two results are the lane's and its partner's value, in some order, which a
    commutative combine does not see. ``asm``: what llc-22 prints for the step (the combine of a
    DPP step is fused into it: ``v_max_f32_dpp ... quad_perm:[1,0,3,2]``). ``bit``: the lane bit
    the step adds to the lanes combined so far."""

    xor: int
    bit: int
    dpp_ctrl: int | None
    swap: str | None
    asm: str


WAVE_REDUCE_STEPS = (
    LaneExchange(1, 0, 0b10_11_00_01, None, "quad_perm:[1,0,3,2]"),   # lane ^ 1 within each quad
    LaneExchange(2, 1, 0b01_00_11_10, None, "quad_perm:[2,3,0,1]"),   # lane ^ 2
    LaneExchange(7, 2, 0x141, None, "row_half_mirror"),               # 7 - i within each 8 lanes = lane ^ 7
    LaneExchange(15, 3, 0x140, None, "row_mirror"),                   # 15 - i within each row = lane ^ 15
    LaneExchange(16, 4, None, "llvm.amdgcn.permlane16.swap", "v_permlane16_swap_b32"),  # lane ^ 16
    LaneExchange(32, 5, None, "llvm.amdgcn.permlane32.swap", "v_permlane32_swap_b32"),  # lane ^ 32
)
"""The steps in order. After the DPP steps with ``xor`` 1, 2, 7, 15 (taken as a prefix: 7 and 15
need the quad, resp. the 8 lanes, combined first) a lane holds the combine over its aligned group
of 2, 4, 8, 16 lanes; each swap adds one lane bit (4, 5) to whatever group it is given. Both lanes
of a pair compute the same ``op(a, b)``, so every lane of a group ends with the same bits."""

REDUCE_WIDTHS = tuple(2 << i for i in range(len(WAVE_REDUCE_STEPS)))
REDUCE_MASKS = tuple(low | high for high in (0, 16, 32, 48) for low in (0, 1, 3, 7, 15) if low | high)
"""The lane masks a reduction combines over: a prefix of the DPP steps and any of the two swaps."""


def reduce_steps(mask: int) -> tuple[LaneExchange, ...]:
    """The exchange steps that combine each group of lanes differing only in the bits of ``mask``
    (``REDUCE_MASKS``; aligned groups of ``w`` consecutive lanes: ``w - 1``)."""
    if mask not in REDUCE_MASKS:
        raise ValueError(f"a wave reduction combines the lanes of a mask in {[hex(m) for m in REDUCE_MASKS]}, "
                         f"not {mask:#x}")
    return tuple(step for step in WAVE_REDUCE_STEPS if mask >> step.bit & 1)


def exchange_partner(step: LaneExchange, lane):
    """The lane whose value ``lane`` combines with in ``step``."""
    return lane ^ step.xor


def acc_lane_mask(op: MfmaOp, axis: str = "row") -> int:
    """The lane mask (``reduce_steps``) of the lanes that share one accumulator row (``axis``
    "row": the row's ``n`` columns, one register of each lane) or one column ("col": the column's
    rows, in several registers of each lane) of ``op``, read off ``acc_lane``: 32x32 rows ``0x1f``
    (the 32 lanes of a wave half), columns ``0x20`` (lanes ``c``, ``c + 32``); 16x16 rows ``0xf``,
    columns ``0x30``; 4x4 rows ``0x3``, columns one lane (0). Raises ``ValueError`` where the lanes
    of a row or column are not such a group."""
    import numpy as np

    block, row, col = np.meshgrid(np.arange(op.blocks), np.arange(op.m), np.arange(op.n), indexing="ij")
    lane, reg = (np.broadcast_to(x, block.shape) for x in acc_lane(op, block, row, col))
    if axis == "col":
        lane, reg = lane.swapaxes(1, 2), reg.swapaxes(1, 2)  # (block, col, row)
    elif axis != "row":
        raise ValueError(f"axis {axis!r}: expected 'row' or 'col'")
    groups = lane.reshape(-1, lane.shape[-1])
    mask = int(np.bitwise_or.reduce(groups ^ groups[:, :1], axis=None))
    span = np.array([m for m in range(64) if m & ~mask == 0])
    same = all(set(g.tolist()) == set((g[0] ^ span).tolist()) for g in groups)
    if not same or (axis == "row" and not (reg == reg[..., :1]).all()) or (mask and mask not in REDUCE_MASKS):
        raise ValueError(f"{op.name}: the lanes of an accumulator {axis} do not differ in a fixed set of lane bits")
    return mask
