"""The CUDA GEMM's k-loop (part of the plan, ``kernels.sm80.gemm_plan``): what each mma k-step issues
besides its mma (:class:`KStep`, ``plan_k_steps``), the mma issue order (``mma_order``) and the loop's
form and pipeline (:class:`KLoop`). Pure Python, no TIRx."""

from __future__ import annotations

import attrs

from .gemm_config import GemmConfig


@attrs.frozen
class KStep:
    """What one mma k-step (of ``k_steps`` per k-tile) issues besides its mma, in order: the
    fragments of the next k-step, the cp.async of a k-tile ``stages - 1`` ahead, the barrier."""

    kk: int
    """Index of the k-step within the k-tile."""
    next_stage: int
    """Stage of the next k-step's fragments relative to this one (1 after the last k-step)."""
    next_kk: int
    """k-step of the next fragments within their stage."""
    load: str | None
    """Operands copied ahead in this k-step: ``"A"``, ``"B"``, ``"AB"`` or None."""
    barrier: str | None
    """``"before_mma"`` or ``"after_mma"``: commit, wait for the stage ``stages - 2`` groups back and
    barrier in this k-step; None otherwise."""
    fragments: bool = True
    """Whether the k-step loads the next k-step's fragments: False only on the last k-step of a k-loop of
    one k-tile, whose next k-tile does not exist (its stage was never written: issue 35, item 6). With
    two or more k-tiles the last k-tile's last k-step still loads a stage an earlier k-tile wrote (the
    fragments go unused; the code of every such loop stays as it was)."""


@attrs.frozen
class KLoop:
    """The k-loop and the pipeline."""

    form: str
    """``"rolled"`` (runtime stage index), ``"unrolled"`` (by ``stages``: every shared-memory
    stage offset an immediate, then a static tail) or ``"persistent"`` (unrolled, looping over
    output tiles with the pipeline running on into the next tile)."""
    stages: int
    """cp.async pipeline depth (k-tiles in shared memory)."""
    k_tiles: int
    """k-tiles per output tile."""
    groups: int
    """Whole stage groups (``k_tiles // stages``), the unrolled loop's trip count."""
    tail: int
    """k-tiles after the last whole group (unrolled statically)."""
    steps: tuple[KStep, ...]
    """The k-steps of one k-tile."""
    mma_order: tuple[tuple[int, int], ...] | None
    """(mi, ni) issue order of a k-step's mma; None: one apply over the warp tile (``row``)."""

    def loads_ahead(self, kt) -> bool:
        """Whether k-tile ``kt`` issues the copies ``stages - 1`` ahead: False for the static tail
        k-tiles, whose copies would all be past K (a runtime ``kt`` decides at runtime)."""
        return not isinstance(kt, int) or kt + self.stages - 1 < self.k_tiles


def plan_k_steps(cfg: GemmConfig, k_steps: int, k_tiles: int = 2) -> tuple[KStep, ...]:
    """Per k-step: next fragments (none after the last k-step of a single k-tile: ``KStep.fragments``),
    copies ahead (A and B in different k-steps when there are at least three, so B still goes out
    before the commit at k-step ``k_steps - 2``), barrier."""
    split = cfg.split_loads and k_steps >= 3
    barrier = "after_mma" if cfg.sync_after_mma else "before_mma"
    steps = []
    for kk in range(k_steps):
        load = ("A" if split else "AB") if kk == 0 else ("B" if split and kk == 1 else None)
        last = kk == k_steps - 1
        steps.append(KStep(kk, 1 if last else 0, 0 if last else kk + 1, load,
                           barrier if kk == k_steps - 2 else None, not (last and k_tiles == 1)))
    return tuple(steps)


def mma_order(cfg: GemmConfig, mma_m: int, mma_n: int) -> tuple[tuple[int, int], ...] | None:
    """Issue order of a k-step's mma: serpentine reverses ni on odd mi, so one B fragment stays
    live across the turn; None for ``row`` (one apply over the whole warp tile)."""
    if cfg.mma_order == "row":
        return None
    return tuple((mi, ni) for mi in range(mma_m) for ni in (range(mma_n) if mi % 2 == 0 else reversed(range(mma_n))))
