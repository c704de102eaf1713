"""The sm90 GEMM's persistent tile order: the DRAM bytes of A and B it costs, and the order the cost model takes
(issue 36; docs/sm90_gemm.md "The tile order").

**The model (``order_bytes``).** The persistent grid of ``ctas`` CTAs walks the order (``Sm90Plan.tile_of``) a wave of
``ctas`` consecutive units at a time (CTA ``pid`` takes units ``pid, pid + ctas, ...``: its i-th unit lies in wave i).
The CTAs of a wave step through K at about the same pace, so a panel (a tile row's ``block_m x K`` of A, a tile
column's ``block_n x K`` of B) that several of the wave's tiles read leaves DRAM once for the wave (``wave_panels``:
the distinct panels of a wave). From one wave to the next a panel stays in L2 only where the whole previous wave's
panels fit the L2 one wave can use (``L2_SHARE`` of ``DeviceSpec.l2_bytes``): every CTA starts K again, so where
they do not fit, the first k-tiles the next wave reads are the ones evicted first (least recently used).

**Why half the L2 (``L2_SHARE``).** The L2 is two partitions, each caching the accesses of the SMs of the GPCs wired
to it (NVIDIA A100 Tensor Core GPU Architecture whitepaper, "A100 L2 Cache"; the H100 whitepaper keeps the partitioned
L2 at 50 MB): a panel the SMs of both sides read is held in both. Checked against ncu (benchmarks/journal/2026-12.md,
stop 42, "ncu"): the plain 4096^3 GEMM (128x256 tiles, 132 CTAs, ``group_m`` 8) moved 215 MB of DRAM; the model's A and
B are 178 MiB (186.6 MB), C's 33.6 MB beside them 220 MB. With the whole 50 MB it would say 64 MiB, the floor.

**The choice (``best_order``).** For a data-parallel config (no K split: a split's waves are of K slices) the order of
least modelled bytes over ``ORDER_GROUPS`` (and a group of every tile row or column) and both ``RASTERS``; a tie keeps
the config's own order (``group_m`` 8, ``raster`` "m": the code of every choice the model does not move stays
byte-identical). ``gemm_cost.estimate`` counts these bytes in its HBM term and ``gemm_cost.ranked`` takes each
candidate's best order only where ``WEIGH_ORDER`` (not yet: no GPU timing says the model's orders are faster;
``benchmarks/sm90_order.py`` times them).
"""

from __future__ import annotations

from itertools import chain

import attrs

from ..common import ceil_div
from .gemm_plan import RASTERS, Sm90Config, cluster_units

L2_SHARE = 0.5
"""The share of the L2 the panels of a wave of CTAs spread over every SM can use (the module docstring)."""
ORDER_GROUPS = (8, 4, 16, 2, 32, 1)
"""The ``group_m`` values ``best_order`` weighs beside one group of every tile row (or column), in the order a tie
is broken (8 first: the order of every kernel before issue 36; Triton's ``GROUP_M`` is 8 too)."""
WEIGH_ORDER = False
"""Whether the cost model's choice (``gemm_cost.ranked``) takes each data-parallel candidate's ``best_order`` and its
estimate counts the order's modelled DRAM bytes (``order_bytes``) instead of A and B read once: not until
``benchmarks/sm90_order.py`` on a GPU says the model's orders run faster (the module docstring)."""


def wave_panels(lo: int, hi: int, grouped: int, other: int, g: int) -> tuple[set, set]:
    """The indices along the grouped and the other dimension that units ``lo .. hi - 1`` of the grouped order over a
    ``grouped`` x ``other`` grid touch (``gemm_plan.grouped_index``'s order: groups of ``g``, the grouped index fastest
    inside a group), counted a group at a time without walking the units."""
    major, minor, per = set(), set(), g * other
    for group in range(lo // per, (hi - 1) // per + 1):
        first, base = group * g, group * per
        rows = min(grouped - first, g)
        a, b = max(lo, base) - base, min(hi, base + rows * other) - base
        if b <= a:
            continue
        minor.update(range(a // rows, (b - 1) // rows + 1))
        i, j = a % rows, (b - 1) % rows
        if b - a >= rows:
            major.update(range(first, first + rows))
        else:  # fewer units than the group's rows: a run of rows, wrapping past the group's last row
            major.update(range(first + i, first + j + 1) if i <= j else
                         chain(range(first + i, first + rows), range(first, first + j + 1)))
    return major, minor


def tile_panels(cfg: Sm90Config, tiles_m: int, tiles_n: int, lo: int, hi: int) -> tuple[set, set]:
    """The tile rows and tile columns units ``lo .. hi - 1`` of ``cfg``'s order (``Sm90Plan.tile_of``) touch: a cluster's
    units in pairs of tile rows (``swap_ab``: of tile columns; a pair's row past the tiles is left out: TMA reads
    nothing of it)."""
    cm = cfg.cluster_m
    if cm > 1 and cfg.swap_ab:  # the pairs along the columns (Sm90Plan.swapped_pair)
        pairs, ulo, uhi = ceil_div(tiles_n, cm), lo // cm, ceil_div(hi, cm)
        if cfg.raster == "n":
            cols, rows = wave_panels(ulo, uhi, pairs, tiles_m, max(1, cfg.group_m // cm))
        else:
            rows, cols = wave_panels(ulo, uhi, tiles_m, pairs, cfg.group_m)
        return rows, {c * cm + k for c in cols for k in range(cm) if c * cm + k < tiles_n}
    pairs, ulo, uhi = ceil_div(tiles_m, cm), lo // cm, ceil_div(hi, cm)
    if cfg.raster == "n":
        cols, rows = wave_panels(ulo, uhi, tiles_n, pairs, cfg.group_m)
    else:
        rows, cols = wave_panels(ulo, uhi, pairs, tiles_n, cfg.group_m if cm == 1 else max(1, cfg.group_m // cm))
    if cm > 1:
        rows = {r * cm + k for r in rows for k in range(cm) if r * cm + k < tiles_m}
    return rows, cols


def order_bytes(cfg: Sm90Config, M: int, N: int, K: int, ctas: int, l2_bytes: int, bytes_per: int = 2) -> int:
    """The DRAM bytes of A and B that ``cfg``'s persistent order reads on (M, N, K) (the kernel's: C^T's with
    ``swap_ab``, the caller swaps) with ``ctas`` CTAs and an L2 of ``l2_bytes`` (the module docstring): per wave of
    ``ctas`` units its distinct panels, less those the previous wave left in L2 where its panels fit ``L2_SHARE`` of
    it. A panel is its rows (a last tile's part) x K x ``bytes_per``; a cluster's units count in whole clusters."""
    tiles_m, tiles_n = ceil_div(M, cfg.block_m), ceil_div(N, cfg.block_n)
    units = tiles_m * tiles_n if cfg.cluster_m == 1 else cluster_units(tiles_m, tiles_n, cfg.cluster_m, cfg.swap_ab)

    def a(r):
        return min(cfg.block_m, M - r * cfg.block_m) * K * bytes_per

    def b(c):
        return min(cfg.block_n, N - c * cfg.block_n) * K * bytes_per

    room, total, kept = l2_bytes * L2_SHARE, 0, (set(), set())
    for lo in range(0, units, ctas):
        rows, cols = tile_panels(cfg, tiles_m, tiles_n, lo, min(units, lo + ctas))
        total += sum(a(r) for r in rows - kept[0]) + sum(b(c) for c in cols - kept[1])
        fits = sum(map(a, rows)) + sum(map(b, cols)) <= room
        kept = (rows, cols) if fits else (set(), set())
    return total


def orders(cfg: Sm90Config, tiles_m: int, tiles_n: int) -> list[Sm90Config]:
    """``cfg`` and the orders ``best_order`` weighs, in the order a tie is broken: ``cfg``'s own first, then each
    raster (``RASTERS``) with each of ``ORDER_GROUPS`` and one group of every tile row (column); a group past the
    grouped dimension's tiles is that one group (left out where a smaller one is already)."""
    out = [cfg]
    for raster in RASTERS:
        grouped = tiles_m if raster == "m" else tiles_n
        seen = set()
        for g in (*ORDER_GROUPS, grouped):
            key = min(g, grouped)
            if key not in seen:
                seen.add(key)
                out.append(attrs.evolve(cfg, group_m=g, raster=raster))
    return out


def best_order(cfg: Sm90Config, M: int, N: int, K: int, ctas: int, l2_bytes: int, bytes_per: int = 2) -> Sm90Config:
    """``cfg`` in the order of least ``order_bytes`` (``orders``; a tie keeps the earlier: ``cfg``'s own first); a K
    split or a hybrid, whose units are not the tiles, keeps its order. ``swap_ab``: (M, N) the kernel's (C^T's)."""
    if cfg.split_k != 1:
        return cfg
    tiles_m, tiles_n = ceil_div(M, cfg.block_m), ceil_div(N, cfg.block_n)
    return min(orders(cfg, tiles_m, tiles_n), key=lambda c: order_bytes(c, M, N, K, ctas, l2_bytes, bytes_per))


__all__ = ["L2_SHARE", "ORDER_GROUPS", "WEIGH_ORDER", "best_order", "order_bytes", "orders", "tile_panels",
           "wave_panels"]
