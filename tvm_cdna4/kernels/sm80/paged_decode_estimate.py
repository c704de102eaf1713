"""Paged decode attention on sm80-class GPUs (issue 37): the time of one call at a given partition, for known
contexts. Pure Python, no TIRx.

``paged_decode_plan.choose_partition`` sizes the grid from a hint of the longest context (the host does not know
the contexts: reading them would synchronize), so it cannot weigh what decides the time at a small batch: how many
of the grid's CTAs are **non-empty** (a CTA whose partition starts past its sequence's length exits at once) and
how they fall into waves of ``resident x sms`` slots. This estimate does, given the contexts (a benchmark's draw):
the check the partition choice is held to (``benchmarks/paged_decode.py`` prints it beside every timed partition),
not an input of the choice.

**The estimate** (``partition_seconds``): the non-empty CTAs in launch order (``pid = (b Hkv + g) split_kv + s``:
the partition fastest), each ``keys x 2 D elem`` bytes of K and V, fill ``resident x sms`` slots; a CTA holds its
slot ``CTA_START_S`` before its first bytes arrive (the block table, the first pages, Q: dependent round trips no
other load of its own hides), then streams its bytes at an equal share of the read rate (``READ_SHARE`` of
``hbm_bytes_s``, less ``ROW_SHARE_LOSS`` a query row past ``BASE_ROWS``: GQA 64/8 ran 1-6 % slower than 32/8 on
the same bytes), at most ``CTA_RATE`` (its warps' rings in flight over the latency: a tail of few CTAs cannot take
the whole read rate); ``FIXED_S`` adds the launches, the merge and Q / O. A processor-sharing simulation, exact
for that model: the waves' tail, the partial last wave and the per-CTA start all follow from it.

**Fitted** (``FIT_RUNS``: every bf16 timing of the H100 runs of 2026-12-06 whose partition is known, 38 of them:
the 18 bf16 rows of the FlashInfer run at the model's partition, the 12 forced partitions 128..512 at batch 8 /
1.8k, the 8 bf16 rows of the wide-tile run), a grid search on the relative error: **rms 2.8 %**, worst -5.6 /
+6.2 %. The partition-blind estimate (the bytes at the same read rate plus its own least-squares fixed time, 10.9
us: what the rule implies) is off by 3.5 % rms, -8.5 / +9.6 % worst, and gives every partition one time: it cannot
see that 512 keys ran 5-9 % faster than 320 / 384 at batch 8 / 1.8k (one wave of 256 non-empty CTAs on 264 slots,
against two), which this estimate ranks right (``tests/kernels/sm80/test_paged_decode_estimate.py``). Not
fitted: fp8 (the wide tiles' only timings are at the model's partition), other head dims, the sm90 kernel.
"""

from __future__ import annotations

import heapq
import math

from ..attention.paged import PagedDecodeProblem, clamped_contexts
from ..devices import planned
from ..gemm.dynamic_m import ceil_div
from .paged_decode_plan import RESIDENT_CTAS

FIT_RUNS = ("paged_decode_flashinfer_h100_2026-12-06f.json", "paged_decode_partitions_h100_2026-12-06f.json",
            "paged_decode_wide_h100_2026-12-06f.json")  # benchmarks/runs/: the timings the constants are fitted to
CTA_START_S = 1.0e-6  # fitted: a CTA's slot held before its first bytes arrive
CTA_RATE = 45e9  # fitted: the most bytes/s one CTA streams (4 warps x 3 stages of 8 KiB tiles over the latency)
READ_SHARE = 0.895  # fitted: the read rate the kernel reaches at BASE_ROWS rows, of hbm_bytes_s (H100: 3.0 TB/s)
BASE_ROWS = 4  # query rows a kv head (GQA 32/8, one query) where READ_SHARE was fitted
ROW_SHARE_LOSS = 0.011  # fitted: READ_SHARE lost a row past BASE_ROWS (8 rows, GQA 64/8: 2.85 TB/s on the H100)
FIXED_S = 9e-6  # fitted: the two launches, the merge, Q and O, per call


def cta_bytes(problem: PagedDecodeProblem, partition: int, contexts, context: int | None = None) -> list[int]:
    """K and V bytes of each non-empty CTA of the grid, in launch order, for ``partition`` keys a CTA over a grid
    sized for ``context`` (default the longest of ``contexts``; the grid's last CTA takes the keys past it)."""
    lengths = clamped_contexts(problem, contexts)
    key_bytes = 2 * problem.head_dim * (1 if problem.kv_dtype == "fp8" else 2)
    split = ceil_div(max(context or max(lengths), 1), partition)
    out = []
    for L in lengths:
        parts = [min(L, (s + 1) * partition) - s * partition for s in range(split - 1)] + [L - (split - 1) * partition]
        out += [k * key_bytes for k in parts if k > 0] * problem.kv_heads
    return out


def stream_seconds(work: list[int], slots: int, rate: float, cta_rate: float = CTA_RATE,
                   start: float = CTA_START_S) -> float:
    """When the last of ``work`` (bytes a CTA, in launch order) ends: ``slots`` CTAs at a time, each ``start``
    seconds in its slot before its bytes, which stream at ``min(cta_rate, rate / streaming CTAs)``."""
    t = served = 0.0  # served: the bytes every streaming CTA has received since time 0 (all at one rate)
    waiting, streaming, i = [], [], 0
    while i < min(slots, len(work)):
        heapq.heappush(waiting, (start, i))
        i += 1
    while waiting or streaming:
        share = min(cta_rate, rate / len(streaming)) if streaming else 0.0
        done = t + (streaming[0] - served) / share if streaming else math.inf
        ready = waiting[0][0] if waiting else math.inf
        step = min(done, ready)
        served, t = served + share * (step - t), step
        if done <= ready:
            heapq.heappop(streaming)
            if i < len(work):
                heapq.heappush(waiting, (t + start, i))
                i += 1
        else:
            heapq.heappush(streaming, served + work[heapq.heappop(waiting)[1]])
    return t


def partition_seconds(problem: PagedDecodeProblem, partition: int, contexts, context: int | None = None,
                      resident: int = RESIDENT_CTAS, device=None) -> float:
    """The estimated seconds of one call (module docstring) at ``partition`` keys a CTA, ``resident`` CTAs an SM
    (``paged_decode_plan.resident_ctas``), on ``device`` (default ``planned("sm80")``)."""
    device = device or planned("sm80")
    rows = problem.group * problem.queries
    share = READ_SHARE - ROW_SHARE_LOSS * max(0, rows - BASE_ROWS)
    work = cta_bytes(problem, partition, contexts, context)
    return FIXED_S + stream_seconds(work, resident * device.units, share * device.hbm_bytes_s)


__all__ = ["BASE_ROWS", "CTA_RATE", "CTA_START_S", "FIT_RUNS", "FIXED_S", "READ_SHARE", "ROW_SHARE_LOSS",
           "cta_bytes", "partition_seconds", "stream_seconds"]
