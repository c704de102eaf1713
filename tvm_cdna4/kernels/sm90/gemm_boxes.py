"""The sm90 GEMM's tile boxes: the K-tile row and its swizzle atom (``ROW_BYTES``, ``ATOM_ROWS``), the rows a load
brings (``trim_boxes``, ``loaded_box``: ``Sm90Config.trim_loads``), a cluster's shares of B (``b_shares``) and its work
units (``cluster_units``). Leaf helpers of ``gemm_plan`` (which re-exports them), the cost model and the emitter."""

from __future__ import annotations

from ...isa.hopper_layout import swizzle_period
from ..common import ceil_div

ROW_BYTES = 128
"""The bytes of one K-tile row: one 128-byte swizzle row (``gemm_plan``'s module docstring), for every input dtype."""
ATOM_ROWS = swizzle_period(ROW_BYTES) // ROW_BYTES
"""The K-tile rows of one 128-byte swizzle atom (8 rows of 128 bytes, 1024 bytes; ``isa.hopper_layout.swizzle_period``):
a TMA box into the ring starts on an atom so that its swizzle is the ring's (a cluster's share of B, ``b_shares``)."""


def trim_boxes(block: int) -> tuple[int, ...]:
    """The box rows of a trimmed ``block``-row tile's loads: ``ATOM_ROWS`` (one swizzle atom), twice that, ... below
    ``block``: at most one load an operand a stage, its zero-filled rows fewer than those that exist."""
    return tuple(ATOM_ROWS << j for j in range(block.bit_length()) if ATOM_ROWS << j < block)


def loaded_box(exist, block: int, trim: bool = True, select=None):
    """The rows one load of a ``block``-row tile brings where ``exist`` of them exist: ``block``, or with ``trim``
    (``Sm90Config.trim_loads``) the least of ``trim_boxes(block)`` that holds them. ``select(cond, a, b)``: ``a`` where
    ``cond``, else ``b`` (Python's by default; the emitter's ``T.if_then_else`` for a run-time ``exist``:
    ``gemm_emit.loaded_rows``)."""
    select = select or (lambda cond, a, b: a if cond else b)
    brought = block
    for box in reversed(trim_boxes(block) if trim else ()):
        brought = select(exist <= box, box, brought)
    return brought


def b_shares(block_n: int, cluster_m: int) -> tuple[int, ...]:
    """The rows of a ``block_n``-row B tile each CTA rank of a cluster loads and multicasts (``gemm_cluster``): the
    tile's 8-row swizzle atoms (``ATOM_ROWS``) split as evenly as possible, the lower ranks one atom more, each share
    on an atom (its first row ``sum(shares[:rank])``): ``block_n / 2`` each where ``block_n % 16 == 0``, 88 + 80 of
    168, 40 + 32 of 72; ``(block_n,)`` without a cluster. A share of 0 rows (``block_n`` = 8 in a pair) is refused
    (``Sm90Config.check``)."""
    atoms, extra = divmod(block_n // ATOM_ROWS, cluster_m)
    return tuple((atoms + (rank < extra)) * ATOM_ROWS for rank in range(cluster_m))


def cluster_units(tiles_m, tiles_n, cluster_m: int, swap_ab: bool = False):
    """The work units of a clustered plan: the tile rows rounded up to whole clusters, times the tile columns
    (``swap_ab``: the tile columns, the token tiles, rounded up, times the tile rows)."""
    if swap_ab:
        return ceil_div(tiles_n, cluster_m) * cluster_m * tiles_m
    return ceil_div(tiles_m, cluster_m) * cluster_m * tiles_n


__all__ = ["ATOM_ROWS", "ROW_BYTES", "b_shares", "cluster_units", "loaded_box", "trim_boxes"]
