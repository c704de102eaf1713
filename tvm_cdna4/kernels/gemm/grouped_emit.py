"""The grouped GEMM's search in TIRx, shared by both targets' emitters (``cuda_emit``,
``gfx950_gemm_emit``): a CTA's row-tile index to its group (``kernels.gemm.grouped``: the formula and
why it is right)."""

from __future__ import annotations

from tvm_tirx.script import ir as I
from tvm_tirx.script import tirx as T


@T.macro
def find_group(groups, offsets, r, found):
    # found[0] = the last group whose first row tile is at most r: Groups.steps, each taking the
    # candidate group (found + step) when Groups.accepts it; offsets read clamped inside [0, G)
    found[0] = 0
    if I.constexpr(len(groups.steps) > 0):
        for i in T.unroll(len(groups.steps)):
            cand = found[0] + (groups.steps[0] >> i)
            ok = groups.accepts(cand, offsets[T.min(cand, groups.count - 1)], r, T.And)
            found[0] = T.Select(ok, cand, found[0])


__all__ = ["find_group"]
