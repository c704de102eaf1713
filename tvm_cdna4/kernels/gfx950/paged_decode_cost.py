"""The cost model of the gfx950 paged decode attention: the split count (``choose_splits``) and the
whole-GPU static estimate (``paged_estimate``). Pure Python; a *static estimate*, not a measurement.

Decode attention reads every byte of the KV cache once and does little else (one MFMA per 32 keys x
32 head-dim elements for each product), so its time is the cache's bytes over the bandwidth the
kernel can *draw*, and that is set by the bytes it keeps in flight (Little's law): a wave has
``PagedDecodePlan.tile_bytes`` (K and V of one tile) in flight while the tile before computes
(``prefetch``; the compiled loop's global loads say the same, ``report.paged_kernel_report``); the GPU needs ``HBM_BYTES_PER_S x LOADED_LATENCY_S`` in flight to run at
the HBM rate. So:

* **the split** (``choose_splits``): enough waves for that, ``waves_needed = ceil(HBM x latency /
  bytes per wave)``, capped by what can be resident (``RESIDENT_WAVES_PER_SIMD`` per SIMD of the
  ``MI355X`` CUs, ``kernels.devices``) and spread over the (sequence, kv head, row block) units:
  ``splits = ceil(waves_needed / units)``, at most one split per ``MIN_SPLIT_KEYS`` keys of the
  context (a split shorter than that spends more on its partial's write and the merge than it
  gains) and at most ``MAX_SPLITS``;
* **the estimate** (``paged_estimate``): the workgroups in dispatch order to the least loaded CU, each
  costing its tiles; the drawn bandwidth ``min(HBM, resident waves x bytes in flight / latency)``; the
  time ``max(bytes / drawn bandwidth, busiest CU's tiles x tile cycles) + launch latency``, the
  bytes the problem's (``PagedDecodeProblem.bytes_moved``) plus the workspace's partials (written
  and read once). The per-tile issue cycles come from the kernel's instruction mix (``report``'s
  loop counts when a compiled kernel is given; else ``TILE_CYCLES_PER_KEY``).
"""

from __future__ import annotations

import heapq

import attrs

from ..attention.paged import PagedDecodeProblem, clamped_contexts
from ..gemm.dynamic_m import ceil_div
from .gemm_cost import CLOCK_HZ, HBM_BYTES_PER_S, HBM_LATENCY_S, MI355X_CUS, SIMDS_PER_CU

LOADED_LATENCY_S = 2.0e-6  # an HBM load's round trip under full load (queueing included: about 3x the idle 0.6 us)
RESIDENT_WAVES_PER_SIMD = 2  # the kernel's waves a SIMD holds without a compiled kernel (bf16 D 128: 222 VGPRs of 512)
MIN_SPLIT_KEYS = 128  # the fewest keys of a split
MAX_SPLITS = 64
TILE_CYCLES_PER_KEY = 12.0  # SIMD issue cycles per key of a tile without a compiled kernel's counts (D 128)


def bytes_in_flight(tile_bytes: int, prefetch: bool) -> int:
    """K and V bytes a wave keeps in flight (module docstring): one tile's, with ``prefetch`` over the
    whole of the tile before's work, else only while it waits (half, on average)."""
    return tile_bytes if prefetch else tile_bytes // 2


def resident_waves(cus: int = MI355X_CUS) -> int:
    return cus * SIMDS_PER_CU * RESIDENT_WAVES_PER_SIMD


def choose_splits(problem: PagedDecodeProblem, block_kv: int, row_blocks: int, context: int | None = None,
                  prefetch: bool = True, cus: int = MI355X_CUS) -> int:
    """The split count (module docstring) for the longest context ``context`` (default ``capacity``)."""
    esize = 1 if problem.scaled else 2
    per_wave = bytes_in_flight(2 * block_kv * problem.head_dim * esize, prefetch)
    needed = min(ceil_div(int(HBM_BYTES_PER_S * LOADED_LATENCY_S), per_wave), resident_waves(cus))
    units = problem.batch * problem.kv_heads * row_blocks
    longest = max(ceil_div(clamped_contexts(problem, [problem.capacity if context is None else context])[0], block_kv), 1)
    return max(1, min(ceil_div(needed, units), ceil_div(longest, max(1, MIN_SPLIT_KEYS // block_kv)), MAX_SPLITS))


@attrs.frozen
class PagedEstimate:
    """The whole-GPU estimate (module docstring); times in seconds, bandwidths in bytes/s."""

    workgroups: int
    splits: int
    waves_per_simd: int
    waves_in_flight: int  # resident waves of the kernel (at most its workgroups' waves)
    flight_bytes: int  # K / V bytes one wave has in flight
    drawn_bytes_s: float  # min(HBM, waves x bytes in flight / latency)
    hbm_bytes: int  # the problem's bytes plus the workspace's
    memory_s: float
    compute_s: float  # the busiest CU's tiles at the tile's issue cycles
    time_s: float
    problem_bytes: int  # PagedDecodeProblem.bytes_moved

    @property
    def hbm_fraction(self) -> float:
        """The problem's bytes over the time, as a share of the HBM rate (the bar: >= 0.85)."""
        return self.problem_bytes / self.time_s / HBM_BYTES_PER_S


def decode_estimate(problem: PagedDecodeProblem, contexts, *, block_kv: int, splits: int, units: int, waves: int,
                    waves_per_simd: int, flight_bytes: int, tile_cycles: float, work_bytes: int = 0,
                    cus: int = MI355X_CUS) -> PagedEstimate:
    """The estimate of any split-KV decode kernel (ours, a peer's; module docstring): ``units``
    workgroups per (sequence, split) of ``waves`` waves, each running its split's ``block_kv``-key
    tiles at ``tile_cycles`` SIMD cycles with ``flight_bytes`` per wave in flight, ``waves_per_simd``
    resident; ``work_bytes``: its workspace traffic."""
    contexts = clamped_contexts(problem, contexts)
    load = [0.0] * cus
    for L in contexts:
        tiles = ceil_div(L, block_kv)
        per = ceil_div(tiles, splits)
        for s in range(splits):
            work = max(0, min(per, tiles - s * per))
            for _ in range(units):
                heapq.heapreplace(load, load[0] + work * waves / SIMDS_PER_CU)
    compute_s = max(load) * tile_cycles / CLOCK_HZ
    groups = len(contexts) * splits * units
    resident = min(groups * waves, cus * SIMDS_PER_CU * waves_per_simd)
    drawn = min(HBM_BYTES_PER_S, resident * flight_bytes / LOADED_LATENCY_S)
    problem_bytes = problem.bytes_moved(contexts)
    memory_s = (problem_bytes + work_bytes) / drawn
    return PagedEstimate(groups, splits, waves_per_simd, resident, flight_bytes, drawn, problem_bytes + work_bytes,
                         memory_s, compute_s, max(memory_s, compute_s) + HBM_LATENCY_S, problem_bytes)


def paged_estimate(plan, contexts, tile_cycles: float | None = None, waves_per_simd: int | None = None,
                   flight_bytes: int | None = None, cus: int = MI355X_CUS) -> PagedEstimate:
    """``decode_estimate`` of ``plan`` (a ``PagedDecodePlan``) on the host-side ``contexts``; without a
    compiled kernel's figures ``TILE_CYCLES_PER_KEY``, ``RESIDENT_WAVES_PER_SIMD`` and the plan's bytes
    in flight (``bytes_in_flight``)."""
    p, bkv = plan.problem, plan.config.block_kv
    tile_cycles = tile_cycles if tile_cycles is not None else TILE_CYCLES_PER_KEY * bkv * p.head_dim / 128
    flight = flight_bytes if flight_bytes is not None else bytes_in_flight(plan.tile_bytes(), plan.config.prefetch)
    # the real rows' partials written, then read by the merge
    work_bytes = 2 * plan.units * plan.splits * min(plan.rows, plan.block_rows) * (p.head_dim + 1) * 4
    return decode_estimate(p, contexts, block_kv=bkv, splits=plan.splits, units=p.kv_heads * plan.row_blocks, waves=1,
                           waves_per_simd=waves_per_simd or RESIDENT_WAVES_PER_SIMD, flight_bytes=flight,
                           tile_cycles=tile_cycles, work_bytes=work_bytes, cus=cus)


__all__ = ["LOADED_LATENCY_S", "MAX_SPLITS", "MIN_SPLIT_KEYS", "RESIDENT_WAVES_PER_SIMD", "TILE_CYCLES_PER_KEY",
           "PagedEstimate", "bytes_in_flight", "choose_splits", "decode_estimate", "paged_estimate", "resident_waves"]
