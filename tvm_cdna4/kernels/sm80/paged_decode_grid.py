"""The sm80-class paged decode's grid arithmetic (issue 37), below the planner (``paged_decode_plan``), its estimate
(``paged_decode_estimate``) and its rules (``paged_decode_rule``), which share it: the CTAs an SM holds, the balanced
partition's divisor and tiles (``paged_decode_plan``'s module docstring, "The balanced partition"), the merge model
(``merge_seconds``: the planner's merge choice and the estimate's merge term; "The merge" there). Pure Python."""

from __future__ import annotations

from ..attention.paged import PagedDecodeProblem
from ..gemm.dynamic_m import ceil_div
from .attention_plan import MAX_THREADS_PER_SM

RESIDENT_CTAS = 2  # paged CTAs resident per SM (the bf16 D 128 kernel's, resident_ctas): a wave is sms x this
MERGE_LANES = 8  # merge-kernel lanes per (row, dim pair) item: each merges a 1/8 share of the partitions, then shuffles
MERGE_PASS = 4  # (row, dim pair) items a last-CTA merge thread takes per pass (their loads in flight together)
MERGE_THREADS = 128  # threads of a merge-kernel CTA
MERGE_RUNS = ("paged_decode_short2k_h100_2026-12-07e.json", "paged_decode_pagedb8_h100_2026-12-07e.json",
              "paged_decode_pagedb8b_h100_2026-12-07e.json", "paged_decode_pagedpdl_h100_2026-12-07f.log")
"""The H100 runs (``benchmarks/runs``) whose (merge kernel, last CTA) pairs ``merge_seconds``' constants are fitted to."""
LAUNCH_S = 0.3e-6  # fitted (MERGE_RUNS): the merge kernel's launch after main, in a CUDA graph
MERGE_CTA_S = 0.1e-6  # fitted (MERGE_RUNS): a merge-kernel CTA (merge_kernel_ctas) per SM
PARTIAL_S = 0.1e-6  # fitted (MERGE_RUNS): a partial the last CTA merges, per pass


def resident_ctas(p, device) -> int:
    """Main's CTAs an SM holds by shared memory and threads (registers not modeled: ptxas gave the fp8 D 128 kernel
    156, 3 CTAs where its 53 KB hold 4; ``choose_min_ctas``), at least 1."""
    return max(1, min(device.smem_per_unit // p.smem_bytes, MAX_THREADS_PER_SM // p.block_threads))


def balance_divisor(problem: PagedDecodeProblem, slots: int) -> int:
    """``slots // kv_heads - batch``: the CTAs per kv head one wave of ``slots`` (``resident_ctas x sms``) holds,
    less one per sequence (each sequence's last partition is partly empty); below 1, no balanced partition."""
    return slots // problem.kv_heads - problem.batch


def balance_tiles(part_tiles: int, lengths, tile_keys: int, warps: int, divisor: int, most=max) -> int:
    """The balanced partition in tiles (the kernel computes it on the device from ``CONTEXT_LENS``, clamped: the
    emitter's ``part_tiles_of`` calls this with TIR's ``most``, ``T.max``): the sum ``S`` of the sequences' tiles over ``divisor`` rounded up
    to whole warps' tiles, at least the plan's ``part_tiles``. Then the non-empty CTAs of a kv head, ``sum_b
    ceil(T_b / P) <= S / P + batch``, are at most ``divisor + batch``: one wave, FlashInfer's rule for its
    tensor-core decode (``PrefillSplitQOKVIndptr``: the least chunk that fits ``2 sms`` CTAs), in closed form."""
    total = sum(ceil_div(L, tile_keys) for L in lengths)
    return most(part_tiles, ceil_div(total, divisor * warps) * warps)


def merge_kernel_ctas(problem: PagedDecodeProblem) -> int:
    """The merge kernel's CTAs: ``MERGE_LANES`` lanes per (sequence x kv head, row, dim pair) item."""
    items = problem.batch * problem.kv_heads * problem.group * problem.queries * (problem.head_dim // 2)
    return ceil_div(items * MERGE_LANES, MERGE_THREADS)


def last_merge_passes(problem: PagedDecodeProblem, warps: int, per_pass: int = MERGE_PASS) -> int:
    """The last-CTA merge's passes over a (sequence, kv head)'s (row, dim pair) items (rows x ``head_dim / 2``),
    ``per_pass`` items a thread of ``32 warps`` each (``PagedDecodePlan.merge_passes``, ``merge_seconds``)."""
    return ceil_div(problem.group * problem.queries * (problem.head_dim // 2), 32 * warps * per_pass)


def merge_seconds(problem: PagedDecodeProblem, partials: int, warps: int, sms: int, per_pass: int = MERGE_PASS) -> dict:
    """The model's cost in seconds of each merge (``paged_decode_plan``'s module docstring, "The merge") where a sequence has ``partials`` partitions:
    the last CTA's ``partials`` per pass (``PARTIAL_S``, ``last_merge_passes``; none for one partition), the merge
    kernel's launch and its CTAs over the SMs (``LAUNCH_S``, ``MERGE_CTA_S``)."""
    passes = last_merge_passes(problem, warps, per_pass)
    last = passes * partials * PARTIAL_S if partials > 1 else 0.0
    return {"last-cta": last, "kernel": LAUNCH_S + MERGE_CTA_S * merge_kernel_ctas(problem) / sms}


__all__ = ["LAUNCH_S", "MERGE_CTA_S", "MERGE_LANES", "MERGE_PASS", "MERGE_RUNS", "MERGE_THREADS", "PARTIAL_S", "RESIDENT_CTAS",
           "balance_divisor", "balance_tiles", "last_merge_passes", "merge_kernel_ctas", "merge_seconds",
           "resident_ctas"]
