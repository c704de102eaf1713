"""Reference semantics in numpy: the executable definition every other part is checked against.

Inputs and outputs are per-lane arrays of 64 rows. MFMA operands are *element* arrays
(``(64, a_elems)`` of the format's numpy dtype, ``formats.FORMATS``); ``*_words`` variants take and
return ``uint32`` register words for the emulator. Products are exact, sums are formed in float64
(int64 for integers) and rounded once to the accumulator type, so hardware results may differ from
these by the accumulator's rounding (floats) and must equal them exactly (integers).
"""

from __future__ import annotations

import functools

import numpy as np

from . import lanes
from .formats import fmt, from_words, to_float64, to_words
from .mfma_table import SCALE_BLOCK_K, SCALE_FORMAT_CODES
from .records import WAVE_SIZE, DsReadTrOp, MfmaOp

_LANE = np.arange(WAVE_SIZE)


def _check_shape(op_name: str, operand: str, arr: np.ndarray, cols: int) -> None:
    if arr.shape != (WAVE_SIZE, cols):
        raise ValueError(f"{op_name}: operand {operand} must have shape (64, {cols}); found {arr.shape}")


@functools.cache
def _owner_map(op: MfmaOp, operand: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The owner map of an operand over (lane, element) as index arrays, once per opcode: A (block,
    row, k), B (block, k, col), the accumulator (block, row, col); read-only."""
    if operand == "A":
        lane, elem = np.meshgrid(_LANE, np.arange(op.a_elems), indexing="ij")
        blk, row, k = lanes.a_owner(op, lane, elem)
        out = (blk, row, k)
    elif operand == "B":
        lane, elem = np.meshgrid(_LANE, np.arange(op.b_elems), indexing="ij")
        blk, col, k = lanes.b_owner(op, lane, elem)
        out = (blk, k, col)
    else:
        lane, reg = np.meshgrid(_LANE, np.arange(op.acc_elems), indexing="ij")
        out = tuple(lanes.acc_owner(op, lane, reg))
    out = tuple(np.asarray(x) for x in out)
    for x in out:
        x.flags.writeable = False
    return out


def gather_a(op: MfmaOp, a64: np.ndarray) -> np.ndarray:
    """Per-lane A values (64, a_elems) -> tiles (blocks, M, K) through the A owner map."""
    tiles = np.zeros((op.blocks, op.m, op.k), dtype=a64.dtype)
    tiles[_owner_map(op, "A")] = a64
    return tiles


def gather_b(op: MfmaOp, b64: np.ndarray) -> np.ndarray:
    """Per-lane B values (64, b_elems) -> tiles (blocks, K, N) through the B owner map."""
    tiles = np.zeros((op.blocks, op.k, op.n), dtype=b64.dtype)
    tiles[_owner_map(op, "B")] = b64
    return tiles


def gather_acc(op: MfmaOp, c: np.ndarray) -> np.ndarray:
    """Per-lane accumulator (64, acc_elems) -> tiles (blocks, M, N)."""
    tiles = np.zeros((op.blocks, op.m, op.n), dtype=c.dtype)
    tiles[_owner_map(op, "acc")] = c
    return tiles


def scatter_acc(op: MfmaOp, tiles: np.ndarray) -> np.ndarray:
    """Tiles (blocks, M, N) -> per-lane accumulator (64, acc_elems)."""
    return tiles[_owner_map(op, "acc")]


def scatter_a(op: MfmaOp, tiles: np.ndarray) -> np.ndarray:
    return tiles[_owner_map(op, "A")]


def scatter_b(op: MfmaOp, tiles: np.ndarray) -> np.ndarray:
    return tiles[_owner_map(op, "B")]


def _round_acc(op: MfmaOp, exact: np.ndarray) -> np.ndarray:
    if op.acc_format == "i32":
        return exact.astype(np.int64).astype(np.int32)  # two's complement wrap, like the hardware
    return exact.astype(fmt(op.acc_format).dtype)


def mfma(op: MfmaOp, a: np.ndarray, b: np.ndarray, c: np.ndarray, *, cbsz: int = 0, abid: int = 0, blgp: int = 0):
    """One dense MFMA on per-lane element arrays; returns the per-lane accumulator D."""
    if op.kind != "mfma":
        raise ValueError(f"{op.name} is a scaled MFMA: use mfma_scale()")
    op.check_modifiers(cbsz=cbsz, abid=abid, blgp=blgp)
    _check_shape(op.name, "A", np.asarray(a), op.a_elems)
    _check_shape(op.name, "B", np.asarray(b), op.b_elems)
    _check_shape(op.name, "C", np.asarray(c), op.acc_elems)
    integer = op.acc_format == "i32"
    conv = (lambda f, x: np.asarray(x).astype(fmt(f).dtype).astype(np.int64)) if integer else to_float64
    a_val, b_val, c_val = conv(op.a_format, a), conv(op.b_format, b), conv(op.acc_format, c)
    if op.blgp_role == "lane_group_pattern":
        b_val = b_val[lanes.blgp_source_lane(blgp, _LANE)]
    elif op.blgp_role == "negate":
        a_val, b_val, c_val = [(-x if blgp >> bit & 1 else x) for bit, x in enumerate((a_val, b_val, c_val))]
    at, bt, ct = gather_a(op, a_val), gather_b(op, b_val), gather_acc(op, c_val)
    at = at[lanes.a_source_block(cbsz, abid, np.arange(op.blocks))]
    return scatter_acc(op, _round_acc(op, at @ bt + ct))


def e8m0_value(scale_regs: np.ndarray, op_sel: int) -> np.ndarray:
    """Value 2**(byte - 127) of byte ``op_sel`` of each lane's 32-bit scale register (0xFF -> NaN)."""
    byte = (np.asarray(scale_regs, dtype=np.uint64) >> np.uint64(8 * op_sel)) & np.uint64(0xFF)
    return np.where(byte == 0xFF, np.nan, np.exp2(byte.astype(np.float64) - 127.0))


def mfma_scale(
    op: MfmaOp,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    *,
    cbsz: int,
    blgp: int,
    scale_a: np.ndarray,
    scale_b: np.ndarray,
    op_sel_a: int = 0,
    op_sel_b: int = 0,
):
    """One scaled MFMA. ``a``/``b``: (64, 32) elements of the formats coded by ``cbsz``/``blgp``;
    ``scale_a``/``scale_b``: (64,) 32-bit scale registers, byte ``op_sel_*`` holds each lane's E8M0."""
    if op.kind != "mfma_scale":
        raise ValueError(f"{op.name} is not a scaled MFMA: use mfma()")
    op.check_modifiers(cbsz=cbsz, blgp=blgp, op_sel_a=op_sel_a, op_sel_b=op_sel_b)
    fa, fb = SCALE_FORMAT_CODES[cbsz], SCALE_FORMAT_CODES[blgp]
    _check_shape(op.name, "A", np.asarray(a), op.a_elems)
    _check_shape(op.name, "B", np.asarray(b), op.b_elems)
    _check_shape(op.name, "C", np.asarray(c), op.acc_elems)
    a_val = to_float64(fa, a) * e8m0_value(scale_a, op_sel_a)[:, None]
    b_val = to_float64(fb, b) * e8m0_value(scale_b, op_sel_b)[:, None]
    assert op.a_elems == SCALE_BLOCK_K  # one scale per lane covers the lane's whole K slice
    at, bt, ct = gather_a(op, a_val), gather_b(op, b_val), gather_acc(op, to_float64("f32", c))
    return scatter_acc(op, _round_acc(op, at @ bt + ct))


def mfma_words(op: MfmaOp, a_words, b_words, c_words, **modifiers) -> np.ndarray:
    """Like :func:`mfma`/:func:`mfma_scale` but on ``uint32`` register words (64, nwords)."""
    if op.kind == "mfma_scale":
        fa, fb = SCALE_FORMAT_CODES[modifiers["cbsz"]], SCALE_FORMAT_CODES[modifiers["blgp"]]
        a = from_words(fa, a_words, op.a_elems)
        b = from_words(fb, b_words, op.b_elems)
        d = mfma_scale(op, a, b, from_words("f32", c_words, op.acc_elems), **modifiers)
    else:
        a = from_words(op.a_format, a_words, op.a_elems)
        b = from_words(op.b_format, b_words, op.b_elems)
        d = mfma(op, a, b, from_words(op.acc_format, c_words, op.acc_elems), **modifiers)
    return to_words(op.acc_format, d)


class LaneAddressError(ValueError):
    """A lane's address breaks the ds_read_tr contract; ``lane`` and ``detail`` say which and how."""

    def __init__(self, op_name: str, lane: int, detail: str):
        self.lane, self.detail = lane, detail
        super().__init__(f"{op_name}: lane {lane} {detail}")


def ds_read_tr(op: DsReadTrOp, lds: np.ndarray, addresses: np.ndarray) -> np.ndarray:
    """One ds_read_tr: LDS bytes + 64 per-lane byte addresses -> per-lane result words (64, nwords).

    Raises LaneAddressError (a ValueError) for a misaligned or out-of-range address (the hardware
    contract).
    """
    lds = np.asarray(lds, dtype=np.uint8)
    addresses = np.asarray(addresses, dtype=np.int64)
    if addresses.shape != (WAVE_SIZE,):
        raise ValueError(f"{op.name}: need 64 lane addresses; found shape {addresses.shape}")
    nbytes = op.load_bits // 8
    bad = np.nonzero(addresses % op.lds_alignment)[0]
    if bad.size:
        lane = int(bad[0])
        raise LaneAddressError(op.name, lane, f"address {int(addresses[lane])} is not {op.lds_alignment}-byte aligned")
    oob = np.nonzero((addresses < 0) | (addresses + nbytes > lds.size))[0]
    if oob.size:
        lane = int(oob[0])
        raise LaneAddressError(op.name, lane, f"reads LDS [{int(addresses[lane])}, +{nbytes}) outside {lds.size} B")
    chunks = lds[addresses[:, None] + np.arange(nbytes)]  # (64, nbytes)
    bits = np.unpackbits(chunks, axis=1, bitorder="little").reshape(WAVE_SIZE, op.elements, op.element_bits)
    lane, elem = np.meshgrid(_LANE, np.arange(op.elements), indexing="ij")
    src_lane, src_elem = lanes.tr_provider(op, lane, elem)
    out_bits = bits[src_lane, src_elem].reshape(WAVE_SIZE, -1)
    return np.packbits(out_bits, axis=1, bitorder="little").view("<u4")
