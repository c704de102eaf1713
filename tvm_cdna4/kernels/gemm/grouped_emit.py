"""The grouped GEMM's search in TIRx, shared by both targets' emitters (``cuda_emit``,
``gfx950_gemm_emit``): a CTA's row-tile index to its group (``kernels.gemm.grouped``: the formula and
why it is right)."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T


@T.macro
def search(steps, accepts, found):
    # found[0] = the last candidate the steps reach that accepts(candidate) takes: from 0, each of Groups.steps
    # (steps[0] >> i) taken where accepts holds; the binary search of find_group and of the sm90 prefix walk
    found[0] = 0
    if I.constexpr(len(steps) > 0):
        for i in T.unroll(len(steps)):
            cand = found[0] + (steps[0] >> i)
            ok = accepts(cand)
            found[0] = T.Select(ok, cand, found[0])


def offsets_test(groups, offsets, r):
    """``find_group``'s test of a candidate group: ``Groups.accepts`` of its offset (read clamped inside
    ``[0, G)``) for row tile ``r``."""
    return lambda cand: groups.accepts(cand, offsets[T.min(cand, groups.count - 1)], r, T.And)


@T.macro
def find_group(groups, offsets, r, found):
    # found[0] = the last group whose first row tile is at most r: Groups.steps, each taking the
    # candidate group (found + step) when Groups.accepts it; offsets read clamped inside [0, G)
    search(groups.steps, offsets_test(groups, offsets, r), found)


__all__ = ["find_group", "offsets_test", "search"]
