"""Tiles loaded by direct-to-LDS loads: which global chunk each lane loads.

``T.rocm.buffer_load_lds`` does not let a lane choose where its bytes go: the hardware writes lane
``l``'s ``size`` bytes at ``base + l * size``, one contiguous ``64 * size``-byte block per wave and
instruction (``base`` from M0; LLVM ``llvm.amdgcn.raw.ptr.buffer.load.lds.gfx950.ll``, Triton's
``BufferLoadToLocal`` lowering, which gives each warp one LDS base). A kernel that wants a padded or
swizzled tile therefore inverts its layout: the lane whose slot is LDS byte ``b`` loads the chunk
that the layout puts at ``b``.

``LdsTile`` is such a layout (rows of ``cols`` chunks of ``size`` bytes, optional row padding and XOR
swizzle). Its ``offset`` (chunk -> LDS byte) and the inverse ``row_at`` / ``col_at`` / ``in_tile``
(LDS byte -> chunk) are written once with ``//``, ``%``, ``^`` and ``<``, so the same functions give
Python integers (plans, tests) and TIR expressions (kernels: ``b = base + lane * size``).
``lane_sources(tile)`` is the plan: one ``DmaInstruction`` per ``64 * size``-byte block, naming the
chunk of each lane (None: a padding slot, or past the tile; load it masked with ``BUFFER_OOB``, so it
writes zeros). The LDS allocation must hold ``tile.dma_bytes`` (whole blocks).
"""

from __future__ import annotations

import attrs

from ..errors import ContractError
from ..isa import WAVE_SIZE
from ..rocm.helpers import BUFFER_LOAD_LDS_MNEMONICS


@attrs.frozen
class Chunk:
    row: int
    col: int  # chunk index in the row (units of ``size`` bytes)


@attrs.frozen
class DmaInstruction:
    lds_base: int  # byte offset of the wave's block in the tile (its M0 relative to the tile)
    sources: tuple[Chunk | None, ...]  # per lane: the chunk it loads; None: masked (writes zeros)


@attrs.frozen
class LdsTile:
    """``rows`` x ``cols`` chunks of ``size`` bytes. Row ``r`` starts at byte ``r * row_bytes``
    (``row_bytes = cols * size + pad``); chunk ``c`` of row ``r`` sits at position
    ``c ^ (r % swizzle)`` of its row (``swizzle`` 1: none; a power of two dividing ``cols``)."""

    rows: int
    cols: int
    size: int = 16
    pad: int = 0
    swizzle: int = 1

    def __attrs_post_init__(self):
        rule = None
        if self.size not in BUFFER_LOAD_LDS_MNEMONICS:
            rule, operand, expected, found = "a chunk is what one lane loads", "size", sorted(BUFFER_LOAD_LDS_MNEMONICS), self.size
        elif self.pad % self.size:
            rule, operand, expected, found = ("row padding is whole chunks, so that every row starts at a lane slot",
                                              "pad", f"a multiple of {self.size}", self.pad)
        elif self.swizzle < 1 or self.swizzle & (self.swizzle - 1) or self.cols % self.swizzle:
            rule, operand, expected, found = ("the XOR swizzle permutes chunks within a row", "swizzle",
                                              f"a power of two dividing cols={self.cols}", self.swizzle)
        if rule:
            raise ContractError(rule, opcode="LdsTile", operand=operand, expected=expected, found=found)

    @property
    def row_bytes(self) -> int:
        return self.cols * self.size + self.pad

    @property
    def dma_bytes(self) -> int:
        """LDS bytes the loads write: the tile rounded up to whole ``64 * size``-byte blocks."""
        block = WAVE_SIZE * self.size
        return -(-self.rows * self.row_bytes // block) * block

    def offset(self, row, col):
        """LDS byte of chunk (``row``, ``col``)."""
        return row * self.row_bytes + (col ^ row % self.swizzle) * self.size

    def row_at(self, byte):
        return byte // self.row_bytes

    def col_at(self, byte):
        """The chunk column at LDS byte ``byte`` (meaningful where ``in_tile``)."""
        return byte % self.row_bytes // self.size ^ self.row_at(byte) % self.swizzle

    def in_tile(self, byte):
        """Whether LDS byte ``byte`` (a lane slot) holds a chunk of the tile, not padding or past it."""
        return (byte % self.row_bytes < self.cols * self.size) & (byte < self.rows * self.row_bytes)


def lane_sources(tile: LdsTile) -> tuple[DmaInstruction, ...]:
    """One instruction per ``64 * size``-byte block of the tile's LDS bytes, in order."""
    out = []
    for base in range(0, tile.dma_bytes, WAVE_SIZE * tile.size):
        slots = (base + lane * tile.size for lane in range(WAVE_SIZE))
        out.append(DmaInstruction(base, tuple(Chunk(tile.row_at(b), tile.col_at(b)) if tile.in_tile(b) else None
                                              for b in slots)))
    return tuple(out)
