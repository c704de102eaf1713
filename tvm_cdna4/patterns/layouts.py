"""Register-fragment layouts that satisfy the pattern contracts, derived from the catalog maps.

``mfma_fragment(op, "A", repeats=(2, 4))`` returns a ``Fragment``: the ``TileLayout`` of a ``local``
tensor of shape ``(*repeats, *atom)`` whose every element lives in the lane and register the hardware
uses, and the registers per lane of that whole tile (all 8 repeats, not one atom). The
layout is read off the catalog's lane maps bit by bit (each atom axis is split into binary digits,
the map is evaluated at each digit's unit vector) and then checked against the full map, so it
restates no formula. Repeats take consecutive register blocks, innermost repeat fastest.
"""

from __future__ import annotations

from math import prod
from typing import NamedTuple

import numpy as np
from tvm_tirx.tirx.layout import S, TileLayout

from ..errors import ContractError
from ..isa import DsReadTrOp, MfmaOp, lanes
from ..tirx_private import register_rocm_axes
from .mfma import _atoms


def _digits(extent: int) -> list[int]:
    """Binary digits (as place values, outer first) of a power-of-two extent; else the axis whole."""
    if extent & (extent - 1) == 0:
        return [1 << b for b in reversed(range(extent.bit_length() - 1))]
    return [1]


def _derive(atom: tuple[int, ...], place) -> tuple[list[tuple[int, int, int]], int]:
    """Digits (extent, lane stride, register stride) of ``place: coords -> (lane, reg)``, outer first,
    verified exhaustively; returns (digits, registers per lane)."""
    digits = []
    for axis, extent in enumerate(atom):
        values = _digits(extent)
        for value in values:
            unit = [0] * len(atom)
            unit[axis] = value
            lane, reg = (int(x) for x in place(tuple(unit)))
            digits.append((2 if len(values) > 1 or extent == 2 else extent, lane, reg))
    grid = np.indices(atom).reshape(len(atom), -1)
    lane_want, reg_want = (np.asarray(x) for x in place(tuple(grid)))
    flat = np.ravel_multi_index(tuple(grid), atom)
    extents = [d[0] for d in digits]
    radix = np.array([prod(extents[i + 1:]) for i in range(len(extents))], int)
    code = (flat[:, None] // radix) % np.array(extents)
    lane_got = code @ np.array([d[1] for d in digits], int)
    reg_got = code @ np.array([d[2] for d in digits], int)
    if not ((lane_got == lane_want).all() and (reg_got == reg_want).all()):
        raise ValueError("lane map is not a sum of per-digit strides; no TileLayout expresses it")
    return _merge(digits), int(reg_want.max()) + 1


def _merge(digits):
    out = []
    for extent, lane, reg in reversed(digits):  # inner first; fuse a digit into the inner one it extends
        if out and (lane, reg) == (out[-1][1] * out[-1][0], out[-1][2] * out[-1][0]) and (lane == 0 or reg == 0):
            inner = out.pop()
            out.append((inner[0] * extent, inner[1], inner[2]))
        else:
            out.append((extent, lane, reg))
    return list(reversed(out))


def _layout(digits, regs: int, repeats: tuple[int, ...], waves: int = 0) -> TileLayout:
    wl, wave = register_rocm_axes()
    shape, strides = ([waves], [1 @ wave]) if waves else ([], [])
    span = regs
    rep_strides = []
    for r in reversed(repeats):
        rep_strides.append(span)
        span *= r
    for r, st in zip(repeats, reversed(rep_strides)):
        shape.append(r)
        strides.append(st)
    for extent, lane, reg in digits:
        shape.append(extent)
        strides.append(lane @ wl if lane else reg)
    return TileLayout(S[tuple(shape) : tuple(strides)])


class Fragment(NamedTuple):
    """A register fragment's layout and its size. ``tile_registers`` counts the elements each lane
    holds for the WHOLE ``(*repeats, *atom)`` tile, every repeat included (one atom's share times the
    number of repeats): the length of the ``local`` buffer to allocate under the layout."""

    layout: TileLayout
    tile_registers: int


def mfma_fragment(op: MfmaOp, operand: str, repeats: tuple[int, ...] = (), fmt_a: str = "fp8", fmt_b: str = "fp8",
                  waves: int = 0, byte_tiles: bool = False) -> Fragment:
    """``Fragment(layout, tile_registers)`` of an MFMA operand ``"A"``, ``"B"``, ``"D"`` (= ``"C"``)
    or, for scaled MFMA, ``"scale_a"``/``"scale_b"``; the tensor shape is ``(*repeats, *atom)``, or
    ``(waves, *repeats, *atom)`` for scope="workgroup" (wave ``w`` owns slice ``w``).
    ``tile_registers`` is per lane for the whole repeated tile, not one atom (``Fragment``). Scaled
    MFMA A/B are packed words, or with ``byte_tiles`` fp8/bf8 element tiles ``(m, k)`` (``patterns.mfma``)."""
    a_atom, b_atom, d_atom = _atoms(op, fmt_a, fmt_b, byte_tiles)
    if op.kind == "mfma_scale" and operand in (("scale_a", "scale_b") if byte_tiles else ("A", "B", "scale_a", "scale_b")):
        words = a_atom[-1] if operand == "A" else b_atom[-1]
        if operand.startswith("scale"):
            atom = (op.m, op.k // 32)
            place = lambda c: (c[0] + op.m * c[1], 0 * c[0])  # noqa: E731 - lanes.scale_owner inverse
        else:
            atom = (op.m, op.k // 32, words)
            place = lambda c: (c[0] + op.m * c[1], c[2])  # noqa: E731
        _check_scale_place(op)
    elif operand == "A":
        atom, place = a_atom, lambda c: lanes.a_lane(op, *_with_block(op, c))
    elif operand == "B":
        atom, place = b_atom, lambda c: lanes.b_lane(op, *_with_block(op, c))
    elif operand in ("C", "D"):
        atom, place = d_atom, lambda c: lanes.acc_lane(op, *_with_block(op, c))
    else:
        raise ContractError("mfma_fragment: unknown operand", opcode=op.name, expected="A, B, C, D, scale_a or scale_b",
                            found=repr(operand), check="parameters")
    digits, regs = _derive(atom, place)
    return Fragment(_layout(digits, regs, tuple(repeats), waves), regs * prod(repeats))


def _with_block(op, c):
    return c if op.blocks > 1 else (0 * c[0], *c)


def _check_scale_place(op):
    lane = np.arange(64)
    row, kb = lanes.scale_owner(op, lane)
    assert (row + op.m * kb == lane).all()


def tr_fragment(op: DsReadTrOp, repeats: tuple[int, ...] = (), waves: int = 0) -> Fragment:
    """``Fragment(layout, tile_registers)`` of a ds_read_tr tile-form destination ``(*repeats, 4, n, 16)``
    (sub-byte loads: ``(*repeats, 4, 16, words)``); ``tile_registers`` covers every repeat."""
    if op.element_bits < 8:
        atom, place = (4, 16, op.load_bits // 32), lambda c: (16 * c[0] + c[1], c[2])
    else:
        atom, place = (4, op.elements, 16), lambda c: (16 * c[0] + c[2], c[1])
    digits, regs = _derive(atom, place)
    return Fragment(_layout(digits, regs, tuple(repeats), waves), regs * prod(repeats))


__all__ = ["Fragment", "mfma_fragment", "tr_fragment"]
