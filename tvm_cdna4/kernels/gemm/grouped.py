"""Grouped GEMM (mixture of experts), shared by both targets: pure Python, no TIRx.

G GEMMs share N and K; group ``g`` owns the rows ``offsets[g] .. offsets[g + 1] - 1`` of A ``[T, K]``
and C ``[T, N]`` (tokens sorted by expert; ``offsets`` a device ``int32`` array ``[G + 1]``,
``offsets[0] = 0``, ``offsets[G] = T``, non-decreasing: empty groups allowed) and its own weights,
``B[g]`` of ``[G, N, K]`` (layout ``nt``) or ``[G, K, N]`` (``nn``). The row counts are known only on
the device, so one launch must serve any split of T rows into G groups.

**Where a CTA finds its tile** (``Groups``). Each group is cut into row tiles of ``block_m`` rows,
``ceil(M_g / block_m)`` of them. Row tile ``j`` of group ``g`` gets the index
``start(g) + j`` with ``start(g) = offsets[g] // block_m + g``; these indices never collide
(``start(g) + ceil(M_g / block_m) <= start(g + 1)``: with ``offsets[g] = q block_m + s`` and
``M_g = p block_m + t``, the left side is ``q + p + [t > 0] + g`` and the right side
``q + p + (s + t) // block_m + g + 1``), and all are below ``start(G) = T // block_m + G``. So the
launch has ``row_tiles(T) = T // block_m + G`` row tiles (times the column tiles); row tile ``r``
belongs to the last group with ``start(g) <= r`` (``start`` is increasing in ``g``), found by a
binary search over ``offsets`` of ``ceil(log2 G)`` wave-uniform loads (``steps``: each step takes
the candidate ``g + 2^i`` when its start is at most ``r``). A row tile in the gap after its group's
last tile (at most one per group, and the ones past ``start(G)``) has no rows (``m0 >= m_end``):
its CTA exits before it loads anything. Against scanning the offsets (``O(G)`` loads per CTA), the
search costs ``log2 G`` loads (8 for 256 experts) and the gaps at most ``G + 1`` empty CTAs per tile
column. The CUDA kernel may instead test every group at once (``Groups.search`` "cta", ``owns``: one
load latency and two barriers per CTA). The rows of a tile are ``m0 = offsets[g] + j block_m`` up to ``m_end = min(offsets[g + 1], T)``:
A's loads are masked at T (rows of the next group computed in the tile are never stored), C's
stores and the epilogue at ``m_end``; ``0 <= m0`` and ``m_end <= T`` keep a kernel given bad
offsets inside its arrays.

**Per group** the kernel views ``B[g]`` (an ``int64`` element offset: ``G N K`` may pass 2^31) and,
for the fused epilogue, ``bias[g]`` and ``col_scale[g]`` (``[G, N]``); the row scale ``[T]`` and the
residual ``[T, N]`` are read at the global row.

**Plan choice**: the cost model of each target at the expected rows per group, ``T / G`` rounded
up (``rows_per_group``), cut into the dynamic-M buckets (``kernels.gemm.dynamic_m.buckets``): a grouped GEMM is
a dispatch table of at most 8 kernels, the bucket of ``ceil(T / G)`` picking one
(``GroupedGemm``). A group's row count is not the mean: with random routing each group pads its
last tile by about half a tile, so the cost models count ``expected_row_tiles`` (``M / block_m +
1/2`` tiles per group, at least one) rather than ``ceil(M / block_m)``.
"""

from __future__ import annotations

import operator

import attrs

from .dynamic_m import DynamicGemm, MBucket, buckets, ceil_div

SEARCHES = ("binary", "cta")
"""How a CTA finds its group (``Groups.search``)."""

LAYOUTS = ("nt", "nn")
"""Weights ``[G, N, K]`` (``nt``: ``C = A @ B[g]^T``) or ``[G, K, N]`` (``nn``); A is ``[T, K]``."""

OFFSETS = "offsets"
"""The kernel parameter holding the group offsets (``int32 [G + 1]``), after C."""


@attrs.frozen
class Groups:
    """How a grouped GEMM's CTAs find their (group, row tile) (the module docstring): a field of the
    grid record of both targets (``kernels.sm80.gemm_plan.GridPlan.grouping``, ``kernels.gfx950.gemm_plan.Grid.grouping``)."""

    count: int
    """G: the groups (experts)."""
    block_m: int
    """Rows of a row tile (the plan's tile height)."""
    rows: MBucket
    """The rows per group (``ceil(T / G)``) the plan was chosen for: its dispatch bucket."""
    search: str = "binary"
    """How a CTA finds its group: ``"binary"``, the binary search (``steps``: ``ceil(log2 G)`` dependent
    loads); ``"cta"`` (CUDA), every thread tests groups of its own at once (``owns``: ``ceil(G / threads)``
    loads, independent, then a barrier), the owner handing its group and offsets to the CTA through
    shared memory."""
    live_rows: bool = False
    """Short tiles (CUDA): a row tile with fewer than ``block_m`` rows (a group's last) issues the mma
    only for its 16-row mma tiles that hold rows, in a second copy of the k-loop; full tiles run the
    first, unchanged (``kernels.sm80.gemm_plan.GemmConfig.live_rows``; the cost: ``tail_rows``)."""

    def __attrs_post_init__(self):
        if self.count < 1 or self.block_m < 1:
            raise ValueError(f"grouped GEMM: {self.count} groups of {self.block_m}-row tiles; expected at least one of each")
        if self.search not in SEARCHES:
            raise ValueError(f"grouped GEMM: group search {self.search!r}; expected one of {SEARCHES}")

    @property
    def steps(self) -> tuple[int, ...]:
        """The binary search's steps, largest first: the powers of two below G (none for G = 1)."""
        return tuple(1 << i for i in reversed(range((self.count - 1).bit_length())))

    def search_loads(self, threads: int) -> int:
        """Rounds of offset loads a thread of a CTA of ``threads`` makes to find its group: the binary
        search's ``steps`` (dependent; none for G = 1), or with ``"cta"`` ``ceil(G / threads)``
        (independent: thread ``t`` tests groups ``t``, ``t + threads``, ...)."""
        return ceil_div(self.count, threads) if self.search == "cta" else len(self.steps)

    def row_tiles(self, T):
        """Row-tile indices launched for ``T`` rows (an int or a TIR expression): ``T // block_m + G``."""
        return T // self.block_m + self.count

    def start(self, g, offset):
        """The first row-tile index of group ``g`` whose first row is ``offset``."""
        return offset // self.block_m + g

    def accepts(self, candidate, offset, r, and_=operator.and_):
        """Whether the search moves to ``candidate`` (its first row ``offset``, read clamped inside
        ``[0, G)``) for row tile ``r``: a group and its start at most ``r``."""
        return and_(candidate < self.count, self.start(candidate, offset) <= r)

    def owns(self, g, offset, next_offset, r, and_=operator.and_):
        """Whether group ``g`` (its first row ``offset``, the next group's ``next_offset``) holds row tile
        ``r``: its start at most ``r`` and the next group's above it. ``start`` increases strictly with
        ``g`` (by at least one per group) and ``start(G) = T // block_m + G`` is above every launched ``r``,
        so with valid offsets exactly one group owns each ``r``: the one ``locate``'s search finds (the
        ``"cta"`` search: every thread tests its groups at once)."""
        return and_(self.start(g, offset) <= r, self.start(g + 1, next_offset) > r)

    def origin(self, g, offset, next_offset, r, T, minimum=min):
        """``(m0, m_end)`` of row tile ``r`` in group ``g`` (first row ``offset``, the next group's
        ``next_offset``): the tile's first row and the end of its rows (``min(next_offset, T)``)."""
        return offset + (r - self.start(g, offset)) * self.block_m, minimum(next_offset, T)

    def summary(self) -> dict:
        """The grouped fields of a plan's ``--emit config`` object."""
        return {"groups": self.count, "rows_per_group": [self.rows.lo, self.rows.hi],
                "planned_at_rows_per_group": self.rows.representative}

    def locate(self, r: int, offsets) -> tuple[int, int, int] | None:
        """``(g, m0, m_end)`` of row tile ``r`` (Python ints; the formula the kernels emit), None for
        a tile without rows."""
        g = 0
        for step in self.steps:
            cand = g + step
            if self.accepts(cand, offsets[min(cand, self.count - 1)], r):
                g = cand
        m0, m_end = self.origin(g, offsets[g], offsets[g + 1], r, offsets[-1])
        return (g, m0, m_end) if 0 <= m0 < m_end else None


def expected_row_tiles(rows: float, block_m: int) -> float:
    """Row tiles per group the cost models count at ``rows`` rows per group: ``rows / block_m + 1/2``
    (a group's last tile is half empty on average), at least one."""
    return max(1.0, rows / block_m + 0.5)


def tail_rows(rows: float, block_m: int, grain: int = 16) -> float:
    """The mean rows of a group's last row tile at ``rows`` rows per group (the tile ``expected_row_tiles``
    counts half empty: ``block_m / 2`` rows; all of them below ``block_m / 2``), plus half a ``grain``: the
    rows a short tile issues mma for (``Groups.live_rows``: whole 16-row mma tiles), at most ``block_m``."""
    last = rows if rows < block_m / 2 else block_m / 2
    return min(float(block_m), last + grain / 2)


def rows_per_group(T: int, G: int) -> int:
    """The dispatch key: the mean rows per group rounded up, at least 1 (T = 0 launches no rows)."""
    return max(1, -(-T // G))


def row_bucket_table(t_limit: int, G: int) -> tuple[MBucket, ...]:
    """The rows-per-group buckets of a grouped GEMM serving up to ``t_limit`` rows in all."""
    return buckets(max(1, -(-t_limit // G)))


def offsets_of(sizes) -> list[int]:
    """The offsets ``[0, s0, s0 + s1, ...]`` of group row counts ``sizes`` (each >= 0)."""
    out = [0]
    for s in sizes:
        if int(s) < 0:
            raise ValueError(f"grouped GEMM: group sizes must be >= 0; got {list(sizes)}")
        out.append(out[-1] + int(s))
    return out


def moved_bytes(sizes, N: int, K: int, in_bytes: int, out_bytes: int) -> int:
    """HBM bytes a grouped GEMM must move: A, the weights of the groups with rows, C."""
    T = sum(sizes)
    return in_bytes * (T * K + sum(1 for s in sizes if s) * N * K) + out_bytes * T * N


def check_offsets(offsets, G: int, T: int, who: str = "grouped GEMM") -> None:
    """Host-side check of an offsets array (numpy or list): int32, shape ``(G + 1,)``, from 0 to
    ``T``, non-decreasing. The kernels cannot check them (no host synchronization): they stay inside
    their arrays whatever the offsets, but rows outside every group are left unwritten."""
    import numpy as np

    arr = np.asarray(offsets)
    if arr.dtype != np.int32:
        raise ValueError(f"{who}: offsets must be int32 (the kernel reads 32-bit offsets); found {arr.dtype}")
    if arr.shape != (G + 1,):
        raise ValueError(f"{who}: offsets must have shape ({G + 1},) (G + 1 for G = {G} groups); found {arr.shape}")
    if arr[0] != 0 or arr[-1] != T:
        raise ValueError(f"{who}: offsets must start at 0 and end at T = {T} (A's rows); found {int(arr[0])} .. "
                         f"{int(arr[-1])}")
    if np.any(np.diff(arr) < 0):
        bad = int(np.argmax(np.diff(arr) < 0))
        raise ValueError(f"{who}: offsets must be non-decreasing (group g owns rows offsets[g] .. offsets[g + 1] - 1); "
                         f"found offsets[{bad}] = {int(arr[bad])} > offsets[{bad + 1}] = {int(arr[bad + 1])}")


def reference(a, b, offsets, layout: str):
    """float64 ``C[offsets[g]:offsets[g+1]] = A[...] @ op(B[g])`` (``layout`` ``nt``: B ``[G, N, K]``)."""
    import numpy as np

    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    n = b64.shape[1] if layout == "nt" else b64.shape[2]
    out = np.zeros((a64.shape[0], n))
    for g in range(b64.shape[0]):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        out[lo:hi] = a64[lo:hi] @ (b64[g].T if layout == "nt" else b64[g])
    return out


def group_of_rows(offsets):
    """The group of every row (numpy ``[T]``): what per-group epilogue inputs are gathered by."""
    import numpy as np

    off = np.asarray(offsets)
    return np.repeat(np.arange(len(off) - 1), np.diff(off))


def per_row(inputs: dict, offsets) -> dict:
    """A grouped GEMM's fused inputs for ``kernels.gemm.epilogue.reference`` / ``check``: the per-group
    ones (``Input.per_group``: ``bias``, ``col_scale``) ``[G, N]`` gathered to every row's group,
    ``[T, N]``; the others as they are."""
    import numpy as np

    from .epilogue import INPUT

    rows = group_of_rows(offsets)
    return {name: np.asarray(x)[rows] if INPUT[name].per_group else x for name, x in inputs.items()}


def check_layout(layout: str, who: str = "grouped GEMM") -> str:
    layout = layout.lower()
    if layout not in LAYOUTS:
        raise ValueError(f"{who}: layout {layout!r}; expected one of {LAYOUTS} (A [T, K]; weights [G, N, K] for nt, "
                         "[G, K, N] for nn)")
    return layout


class GroupedGemm(DynamicGemm):
    """A grouped GEMM: a ``DynamicGemm`` whose dispatch key is the total rows T (the kernel's M),
    mapped to the bucket of ``rows_per_group(T, G)``; ``plan(T)``, ``kernel_for(T)``, ``primfunc(T)``
    as there. ``limit`` is the largest T served."""

    def __init__(self, target: str, groups: int, t_limit: int, plan_bucket, build_plan, emit_plan=None,
                 describe: str = ""):
        super().__init__(target, row_bucket_table(t_limit, groups), plan_bucket, build_plan, emit_plan, describe)
        self.groups, self.t_limit = groups, t_limit

    @property
    def limit(self) -> int:
        return self.t_limit

    def bucket(self, T: int) -> MBucket:
        """The bucket of ``T`` rows in all (``rows_per_group``); ValueError outside ``0..limit``."""
        if isinstance(T, bool) or not isinstance(T, int):
            raise TypeError(f"grouped GEMM: T (A's rows) must be an int, not {type(T).__name__}")
        if not 0 <= T <= self.t_limit:
            from ...errors import ContractError

            raise ContractError(f"grouped GEMM{self.describe}: T = {T} rows is outside 0..{self.t_limit} (the 32-bit "
                                "element offsets of A [T, K] and C [T, N])", operand="A", check="shape",
                                expected=f"T <= {self.t_limit} (T x max(K, N) < 2^31)", found=str(T),
                                suggestion="split the tokens into several launches")
        return super().bucket(min(rows_per_group(T, self.groups), self._buckets[-1].hi))

    def __repr__(self) -> str:
        return (f"GroupedGemm({self.target}{self.describe}, G={self.groups}, rows-per-group buckets "
                f"{[b.describe() for b in self._buckets]})")


__all__ = ["LAYOUTS", "OFFSETS", "SEARCHES", "GroupedGemm", "Groups", "check_layout", "check_offsets", "expected_row_tiles",
           "group_of_rows", "moved_bytes", "offsets_of", "per_row", "reference", "row_bucket_table", "rows_per_group",
           "tail_rows"]
