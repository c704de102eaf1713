"""Paged decode attention on sm80-class GPUs (issue 37): the time of one call at a given partition, for known
contexts. Pure Python, no TIRx.

``paged_decode_plan.choose_partition`` sizes the grid from a hint of the longest context (the host does not know
the contexts: reading them would synchronize), so it cannot weigh what decides the time at a small batch: how many
of the grid's CTAs are **non-empty** (a CTA whose partition starts past its sequence's length exits at once) and
how they fall into waves of ``resident x sms`` slots. This estimate does, given the contexts (a benchmark's draw):
the check the partition choice is held to (``benchmarks/paged_decode.py`` prints it beside every timed partition),
not an input of the choice (but for ``paged_decode_rule``'s, off: below).

**The estimate** (``partition_seconds``): the non-empty CTAs in launch order (``pid = (b Hkv + g) split_kv + s``:
the partition fastest), each ``keys x 2 D elem`` bytes of K and V, fill ``resident x sms`` slots; a CTA holds its
slot ``CTA_START_S`` before its first bytes arrive (the block table, the first pages, Q: dependent round trips no
other load of its own hides), then streams its bytes at an equal share of the read rate (``READ_SHARE`` of
``hbm_bytes_s``, less ``ROW_SHARE_LOSS`` a query row past ``BASE_ROWS``: GQA 64/8 ran 1-6 % slower than 32/8 on
the same bytes), at most ``CTA_RATE`` (its warps' rings in flight over the latency: a tail of few CTAs cannot take
the whole read rate); ``FIXED_S`` adds the launches, the merge kernel and Q / O (every plan of ``FIT_RUNS`` merged
in the kernel); a plan's estimate (``plan_seconds``) trades the merge kernel for its own merge (``merge_term``: a
last-CTA merge saves the kernel's ``paged_decode_grid.merge_seconds`` term and pays its partials'). A
processor-sharing simulation, exact for that model: the waves' tail, the partial last wave and the per-CTA start all
follow from it.

**Fitted** (``FIT_RUNS``: every bf16 timing of the H100 runs of 2026-12-06 whose partition is known, 38 of them:
the 18 bf16 rows of the FlashInfer run at the model's partition, the 12 forced partitions 128..512 at batch 8 /
1.8k, the 8 bf16 rows of the wide-tile run), a grid search on the relative error: **rms 2.8 %**, worst -5.6 /
+6.2 %. The partition-blind estimate (the bytes at the same read rate plus its own least-squares fixed time, 10.9
us: what the rule implies) is off by 3.5 % rms, -8.5 / +9.6 % worst, and gives every partition one time: it cannot
see that 512 keys ran 5-9 % faster than 320 / 384 at batch 8 / 1.8k (one wave of 256 non-empty CTAs on 264 slots,
against two), which this estimate ranks right (``tests/kernels/sm80/test_paged_decode_estimate.py``). Not
fitted: fp8 (the wide tiles' only timings are at the model's partition), other head dims, the sm90 kernel.

**A plan's launch order and its balanced partition** (``plan_seconds``, ``cta_work``): the estimate above counts
the non-empty CTAs only, in the default (bh-major) order, at a partition fixed on the host. A plan's grid also
has empty CTAs (a partition past its sequence's length), each holding its slot ``EMPTY_CTA_S`` before the next CTA
takes it, so where they come in the launch order counts: bh-major puts each sequence's empty ones between the next
sequences' partitions, partition-major (``PagedDecodePlan.split_major``) puts them last; and a balanced plan
(``PagedDecodePlan.balance``) takes the partition its CTAs compute on the device (``balance_tiles``), each CTA
starting ``BALANCE_START_S`` later (it reads and sums every length before its table). Both constants are fitted
(a grid search on the relative difference from each row's default) to ``BALANCE_RUNS``, the H100 runs of stop 53:
6 bf16 rows at batch 8 twice, the default, ``balance``, ``split_major`` and both, every plan merging in the kernel
as it ran: 2.0 points rms (recomputed at stop 56; stop 55 quoted 1.7 for the same estimates), the sign right on 12 of
12; balance with
split_major estimated +1.0 % at 1.8k (timed +2.4..+3.6 %), -1.2..-1.3 % at 9.4k (-2.0..-3.7 %), -4.1..-4.4 % at 15k
(-1.9..-3.5 %). ``partition_seconds`` keeps the fit above (the empty CTAs' term moves it: not refitted). The
rule that weighs it: ``paged_decode_rule``.
"""

from __future__ import annotations

import heapq
import math

from ..attention.paged import PagedDecodeProblem, clamped_contexts
from ..devices import planned
from ..gemm.dynamic_m import ceil_div
from .paged_decode_grid import RESIDENT_CTAS, balance_tiles, merge_seconds, resident_ctas

FIT_RUNS = ("paged_decode_flashinfer_h100_2026-12-06f.json", "paged_decode_partitions_h100_2026-12-06f.json",
            "paged_decode_wide_h100_2026-12-06f.json")  # benchmarks/runs/: the timings the constants are fitted to
CTA_START_S = 1.0e-6  # fitted: a CTA's slot held before its first bytes arrive
CTA_RATE = 45e9  # fitted: the most bytes/s one CTA streams (4 warps x 3 stages of 8 KiB tiles over the latency)
READ_SHARE = 0.895  # fitted: the read rate the kernel reaches at BASE_ROWS rows, of hbm_bytes_s (H100: 3.0 TB/s)
BASE_ROWS = 4  # query rows a kv head (GQA 32/8, one query) where READ_SHARE was fitted
ROW_SHARE_LOSS = 0.011  # fitted: READ_SHARE lost a row past BASE_ROWS (8 rows, GQA 64/8: 2.85 TB/s on the H100)
FIXED_S = 9e-6  # fitted: the launches, the merge kernel, Q and O, per call (FIT_RUNS: every plan merged in the kernel)
BALANCE_RUNS = ("paged_decode_pagedb8_h100_2026-12-07e.json", "paged_decode_pagedb8b_h100_2026-12-07e.json")
"""benchmarks/runs/: the H100 timings of ``balance`` and ``split_major`` (stop 53) the next two are fitted to."""
EMPTY_CTA_S = 0.1e-6  # fitted (BALANCE_RUNS): an empty CTA's slot held (its length read, then its exit)
BALANCE_START_S = 0.25e-6  # fitted (BALANCE_RUNS): a balanced CTA's longer prologue (every length read and summed)


def grid_work(problem: PagedDecodeProblem, partition: int, split: int, lengths, split_major: bool = False) -> list[int]:
    """K and V bytes of every CTA of a ``batch x kv_heads x split`` grid of ``partition`` keys a CTA over the clamped
    ``lengths``, in launch order, 0 for an empty one (a partition past its sequence's length): bh-major (``pid = (b
    Hkv + g) split + s``) or partition-major (``pid = s batch Hkv + b Hkv + g``); the grid's last CTA also takes the
    keys past the grid."""
    key_bytes = 2 * problem.head_dim * (1 if problem.kv_dtype == "fp8" else 2)

    def keys(L: int, s: int) -> int:
        return max(0, (L if s == split - 1 else min(L, (s + 1) * partition)) - s * partition)
    if split_major:
        return [keys(L, s) * key_bytes for s in range(split) for L in lengths for _ in range(problem.kv_heads)]
    return [keys(L, s) * key_bytes for L in lengths for _ in range(problem.kv_heads) for s in range(split)]


def cta_bytes(problem: PagedDecodeProblem, partition: int, contexts, context: int | None = None) -> list[int]:
    """K and V bytes of each non-empty CTA of the grid, in launch order, for ``partition`` keys a CTA over a grid
    sized for ``context`` (default the longest of ``contexts``; the grid's last CTA takes the keys past it)."""
    lengths = clamped_contexts(problem, contexts)
    split = ceil_div(max(context or max(lengths), 1), partition)
    return [w for w in grid_work(problem, partition, split, lengths) if w]


def cta_partition(p, contexts) -> int:
    """The keys a CTA of plan ``p`` computes at ``contexts``: its partition, or with ``p.balance`` the one its CTAs
    compute on the device (``balance_tiles`` of the clamped lengths)."""
    if not p.balance:
        return p.partition
    lengths = clamped_contexts(p.problem, contexts)
    return p.tile_keys * balance_tiles(p.part_tiles, lengths, p.tile_keys, p.config.warps, p.balance)


def cta_work(p, contexts) -> list[int]:
    """``grid_work`` of plan ``p``'s grid (``batch x kv_heads x split_kv``, ``p.split_major``'s order) at
    ``cta_partition``."""
    return grid_work(p.problem, cta_partition(p, contexts), p.split_kv, clamped_contexts(p.problem, contexts),
                     p.split_major)


def merge_term(p, contexts) -> float:
    """The seconds plan ``p``'s merge adds to ``FIXED_S`` (which counts the merge kernel's, as fitted): none for the
    merge kernel; the last CTA's ``merge_seconds`` term less the kernel's (the launch it saves) for the last-CTA
    merge, at the most partitions a sequence of ``contexts`` fills (``cta_partition``; at most ``split_kv``)."""
    if p.merge == "kernel":
        return 0.0
    part = cta_partition(p, contexts)
    partials = max(min(p.split_kv, ceil_div(L, part)) for L in clamped_contexts(p.problem, contexts))
    cost = merge_seconds(p.problem, partials, p.config.warps, p.sms, p.last_pass)
    return cost["last-cta"] - cost["kernel"]


def plan_seconds(p, contexts, device=None) -> float:
    """The estimated seconds of one call of plan ``p`` (a ``PagedDecodePlan``) at ``contexts``: ``cta_work``'s grid,
    empty CTAs included, ``resident_ctas(p, device)`` CTAs on each of the plan's ``sms``, ``device``'s read rate
    (default ``planned("sm80")``); a balanced plan's CTAs each start ``BALANCE_START_S`` later; its merge:
    ``merge_term``."""
    device = device or planned("sm80")
    rows = p.problem.group * p.problem.queries
    share = READ_SHARE - ROW_SHARE_LOSS * max(0, rows - BASE_ROWS)
    late = BALANCE_START_S if p.balance else 0.0
    stream = stream_seconds(cta_work(p, contexts), resident_ctas(p, device) * p.sms, share * device.hbm_bytes_s,
                            start=CTA_START_S + late, empty=EMPTY_CTA_S + late)
    return FIXED_S + merge_term(p, contexts) + stream


def stream_seconds(work: list[int], slots: int, rate: float, cta_rate: float = CTA_RATE,
                   start: float = CTA_START_S, empty: float = EMPTY_CTA_S) -> float:
    """When the last of ``work`` (bytes a CTA, in launch order; 0: an empty CTA) ends: ``slots`` CTAs at a time,
    each ``start`` seconds in its slot before its bytes, which stream at ``min(cta_rate, rate / streaming CTAs)``;
    an empty CTA holds its slot ``empty`` seconds, then the next CTA takes it."""
    t = served = 0.0  # served: the bytes every streaming CTA has received since time 0 (all at one rate)
    waiting, streaming, i = [], [], 0

    def admit(now: float) -> int:  # the next CTA in launch order takes a free slot
        heapq.heappush(waiting, (now + (start if work[i] else empty), i))
        return i + 1
    while i < min(slots, len(work)):
        i = admit(0.0)
    while waiting or streaming:
        share = min(cta_rate, rate / len(streaming)) if streaming else 0.0
        done = t + (streaming[0] - served) / share if streaming else math.inf
        ready = waiting[0][0] if waiting else math.inf
        step = min(done, ready)
        served, t = served + share * (step - t), step
        if done <= ready:
            heapq.heappop(streaming)
            i = admit(t) if i < len(work) else i
        else:
            j = heapq.heappop(waiting)[1]
            if work[j]:
                heapq.heappush(streaming, served + work[j])
            elif i < len(work):
                i = admit(t)
    return t


def partition_seconds(problem: PagedDecodeProblem, partition: int, contexts, context: int | None = None,
                      resident: int = RESIDENT_CTAS, device=None) -> float:
    """The estimated seconds of one call (module docstring) at ``partition`` keys a CTA, ``resident`` CTAs an SM
    (``paged_decode_plan.resident_ctas``), on ``device`` (default ``planned("sm80")``): the non-empty CTAs only (the
    fit of ``FIT_RUNS``; ``plan_seconds`` counts the empty ones too)."""
    device = device or planned("sm80")
    rows = problem.group * problem.queries
    share = READ_SHARE - ROW_SHARE_LOSS * max(0, rows - BASE_ROWS)
    work = cta_bytes(problem, partition, contexts, context)
    return FIXED_S + stream_seconds(work, resident * device.units, share * device.hbm_bytes_s)


__all__ = ["BALANCE_RUNS", "BALANCE_START_S", "BASE_ROWS", "CTA_RATE", "CTA_START_S", "EMPTY_CTA_S", "FIT_RUNS",
           "FIXED_S", "READ_SHARE", "ROW_SHARE_LOSS", "cta_bytes", "cta_partition", "cta_work", "grid_work", "merge_term",
           "partition_seconds", "plan_seconds", "stream_seconds"]
