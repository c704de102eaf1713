"""Tiles loaded by direct-to-LDS loads: which global chunk each lane loads.

``T.rocm.buffer_load_lds`` does not let a lane choose where its bytes go: the hardware writes lane
``l``'s ``size`` bytes at ``base + l * size``, one contiguous ``64 * size``-byte block per wave and
instruction (``base`` from M0; LLVM ``llvm.amdgcn.raw.ptr.buffer.load.lds.gfx950.ll``, Triton's
``BufferLoadToLocal`` lowering, which gives each warp one LDS base). A kernel that wants a padded or
swizzled tile therefore inverts its layout: the lane whose slot is LDS byte ``b`` loads the chunk
that the layout puts at ``b``.

``LdsTile`` is such a layout (rows of ``cols`` chunks of ``size`` bytes, optional padding after every
``pad_every`` rows, optional XOR swizzle). Its ``offset`` (chunk -> LDS byte) and the inverse
``row_at`` / ``col_at`` / ``in_tile`` (LDS byte -> chunk) are written once with ``//``, ``%``, ``^`` and ``<``, so the same functions give
Python integers (plans, tests) and TIR expressions (kernels: ``b = base + lane * size``).
``lane_sources(tile)`` is the plan: ``tile.loads`` instructions, load ``i`` at ``tile.load_base(i)``
(also a TIR expression), naming the chunk of each lane (None: a padding slot, or past the tile; load
it masked with ``BUFFER_OOB``, so it writes zeros). The LDS allocation must hold ``tile.dma_bytes``;
``tile.global_offset(byte, row_stride)`` is the masked ``voffset`` of the lane at LDS byte ``byte``.
"""

from __future__ import annotations

import attrs

from ..errors import ContractError
from ..isa import WAVE_SIZE
from ..isa.llvm_helpers import BUFFER_LOAD_LDS_MNEMONICS


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
    """``rows`` x ``cols`` chunks of ``size`` bytes, row-major, ``pad`` bytes of padding after every
    ``pad_every`` rows (1: after each row, what ds_read bank spreading usually wants; ``64 * size /
    (cols * size)`` rows: one padding per load block, Triton's gfx950 choice). Chunk ``c`` of row
    ``r`` sits at position ``c ^ (r % swizzle)`` of its row (``swizzle`` 1: none; a power of two
    dividing ``cols``)."""

    rows: int
    cols: int
    size: int = 16
    pad: int = 0
    pad_every: int = 1
    swizzle: int = 1

    def __attrs_post_init__(self):
        rule = None
        if self.size not in BUFFER_LOAD_LDS_MNEMONICS:
            rule, operand, expected, found = ("a chunk is what one lane loads", "size", sorted(BUFFER_LOAD_LDS_MNEMONICS),
                                              self.size)
        elif self.pad % self.size or self.pad < 0:
            rule, operand, expected, found = ("padding is whole chunks, so that every row starts at a lane slot", "pad",
                                              f"a multiple of {self.size}", self.pad)
        elif self.pad_every < 1:
            rule, operand, expected, found = "padding follows groups of rows", "pad_every", "at least 1", self.pad_every
        elif self.swizzle < 1 or self.swizzle & (self.swizzle - 1) or self.cols % self.swizzle:
            rule, operand, expected, found = ("the XOR swizzle permutes chunks within a row", "swizzle",
                                              f"a power of two dividing cols={self.cols}", self.swizzle)
        if rule:
            raise ContractError(rule, opcode="LdsTile", operand=operand, expected=expected, found=found, check="parameters")

    @property
    def row_bytes(self) -> int:
        """Bytes of one row's chunks (padding excluded)."""
        return self.cols * self.size

    @property
    def group_bytes(self) -> int:
        """Bytes from one padded group of ``pad_every`` rows to the next."""
        return self.pad_every * self.row_bytes + self.pad

    @property
    def loads(self) -> int:
        """Number of loads (``lane_sources``) that build the tile."""
        end = self.offset(self.rows - 1, 0) + self.row_bytes
        n = 1
        while self.load_base(n) < end:
            n += 1
        return n

    @property
    def dma_bytes(self) -> int:
        """LDS bytes the loads write (allocate at least this many)."""
        return self.load_base(self.loads - 1) + WAVE_SIZE * self.size

    def load_base(self, i):
        """LDS byte where load ``i`` starts (int or TIR expression): when a padded group of rows is
        whole load blocks, the group's blocks (no lane loads padding); otherwise ``i`` blocks in
        (the lanes whose slots are padding load masked)."""
        block, data = WAVE_SIZE * self.size, self.pad_every * self.row_bytes
        if data % block:
            return i * block
        return i // (data // block) * self.group_bytes + i % (data // block) * block

    def offset(self, row, col):
        """LDS byte of chunk (``row``, ``col``)."""
        return (row // self.pad_every * self.group_bytes + row % self.pad_every * self.row_bytes
                + (col ^ row % self.swizzle) * self.size)

    def row_at(self, byte):
        return byte // self.group_bytes * self.pad_every + byte % self.group_bytes // self.row_bytes

    def col_at(self, byte):
        """The chunk column at LDS byte ``byte`` (meaningful where ``in_tile``)."""
        return byte % self.group_bytes % self.row_bytes // self.size ^ self.row_at(byte) % self.swizzle

    def in_tile(self, byte):
        """Whether LDS byte ``byte`` (a lane slot) holds a chunk of the tile, not padding or past it."""
        return (byte % self.group_bytes < self.pad_every * self.row_bytes) & (self.row_at(byte) < self.rows)

    def global_offset(self, byte, row_stride: int):
        """``voffset`` of the lane whose slot is LDS byte ``byte``: its chunk's byte offset in a
        row-major global matrix of ``row_stride`` bytes per row, ``BUFFER_OOB`` (masked: writes
        zeros) for a padding slot. ``byte`` an int (plans, tests) or a TIR expression (kernels)."""
        from .wave import BUFFER_OOB

        offset = self.row_at(byte) * row_stride + self.col_at(byte) * self.size
        if isinstance(byte, int):
            return offset if self.in_tile(byte) else BUFFER_OOB
        from tvm_tirx.tirx import op as _op

        return _op.if_then_else(self.in_tile(byte), offset, BUFFER_OOB)


def lane_sources(tile: LdsTile) -> tuple[DmaInstruction, ...]:
    """The loads that build ``tile``: load ``i`` starts at ``tile.load_base(i)``; lane ``l`` loads the
    chunk at ``lds_base + l * size`` (None: padding or past the tile)."""
    out = []
    for i in range(tile.loads):
        slots = (tile.load_base(i) + lane * tile.size for lane in range(WAVE_SIZE))
        out.append(DmaInstruction(tile.load_base(i), tuple(Chunk(tile.row_at(b), tile.col_at(b)) if tile.in_tile(b)
                                                          else None for b in slots)))
    return tuple(out)
