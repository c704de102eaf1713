"""The sm80-class paged decode's grid arithmetic (issue 37), below the planner (``paged_decode_plan``), its estimate
(``paged_decode_estimate``) and its rules (``paged_decode_rule``), which share it: the CTAs an SM holds, the balanced
partition's divisor and tiles (``paged_decode_plan``'s module docstring, "The balanced partition"). Pure Python."""

from __future__ import annotations

from ..attention.paged import PagedDecodeProblem
from ..gemm.dynamic_m import ceil_div
from .attention_plan import MAX_THREADS_PER_SM

RESIDENT_CTAS = 2  # paged CTAs resident per SM (the bf16 D 128 kernel's, resident_ctas): a wave is sms x this


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


__all__ = ["RESIDENT_CTAS", "balance_divisor", "balance_tiles", "resident_ctas"]
