"""Dynamic M: one GEMM kernel per bucket of M values, shared by both targets (pure Python; the TIR
variable is made on first use).

A dynamic-M GEMM has N and K (and the dtypes, layout and fused epilogue) fixed at build time and M
known only at launch: the kernel's M is the TIR variable ``M``, which TIRx binds from A's shape at
launch and checks against C's. Every load and store along M is masked (the planners mark them so:
an expression never divides a tile height). One kernel cannot be the best tiling for every M, so a
:class:`DynamicGemm` keeps a small dispatch table: the M axis is cut into ``BUCKETS``, each bucket
gets the plan the target's cost model chooses at its representative M, and its kernel is built on
first use and cached (the build cache key is the plan record, which holds the bucket, not an M).

The buckets (``BUCKET_EDGES``) follow the planners' own steps, so that a bucket's plan is what the
static planner picks across the bucket: 16 (the CUDA planners' decode kernel, ``decode_plan.DECODE_WEIGHED_M``; 16-row tiles on
both targets), 32, 64, 128 (the small-M tile heights both planners weigh), 256 (up to it the CUDA
planner weighs small tiles and split-K, ``kernels.sm80.gemm_plan.SMALL_M``), then 1024 and 4096 (above 256 the
big tile, which changes only with the number of tiles: ``kernels.sm80.gemm_plan.default_config`` takes 128 x 128
below 264 tiles) and one bucket above 4096. A bucket's representative M is its largest (the tile
must not lose on the largest problem it serves; the benchmark's M = 16, 128 and 4096 are bucket
ends), ``LAST_REPRESENTATIVE`` for the last one.

Every bucket is bounded, so a split-K workspace is sized for its bucket's largest M. gfx950's last
bucket ends where an offset would leave 32 bits (``m_limit``: its buffer loads count 31-bit bytes).
The CUDA GEMM's last 32-bit bucket ends there too (``kernels.gemm.offsets.int32_rows``, an extra edge
of ``buckets``), and one more bucket follows, up to what its grid and the ``int32`` M still index
(``offsets.grid_limit``), whose plans give A and C 64-bit offsets (``GemmPlan.offsets64``, issue 35):
an LM head of 32,768 tokens x a 128,256 vocabulary runs there.
"""

from __future__ import annotations

from collections.abc import Callable

from ..common import ceil_div, extent_record  # noqa: F401 (re-exported: the shared vocabulary)

import attrs

BUCKET_EDGES = (16, 32, 64, 128, 256, 1024, 4096)
"""The largest M of each bucket but the last (the module docstring says why these)."""

LAST_REPRESENTATIVE = 8192
"""The M at which the last bucket (M > 4096) is planned."""

VAR_NAME = "M"
"""The name of a dynamic-M kernel's M: a scalar parameter of its device function."""


@attrs.frozen
class MBucket:
    """The M values ``lo..hi`` (inclusive) one dynamic-M kernel serves; its record replaces M in
    the plan's record (the build-cache key)."""

    lo: int
    hi: int

    def __attrs_post_init__(self):
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"M bucket {self.lo}..{self.hi}: expected 1 <= lo <= hi")

    @property
    def representative(self) -> int:
        """The M the bucket is planned at: its largest, ``LAST_REPRESENTATIVE`` (or its least M, when that
        is larger) for the buckets past ``BUCKET_EDGES``."""
        return self.hi if self.lo <= BUCKET_EDGES[-1] else max(self.lo, min(self.hi, LAST_REPRESENTATIVE))

    def __contains__(self, M: int) -> bool:
        return self.lo <= M <= self.hi

    def describe(self) -> str:
        return f"{self.lo}-{self.hi}"


def m_limit(*row_elems: int) -> int:
    """The largest M whose element offsets fit int32 for rows of ``row_elems`` elements (A's K, C's
    N, or bytes where a buffer load counts bytes): the last bucket's end."""
    return (2**31 - 1) // max(row_elems)


def buckets(limit: int, *edges: int) -> tuple[MBucket, ...]:
    """The dispatch table's buckets up to M = ``limit`` (``BUCKET_EDGES`` and the extra ``edges``: a
    bucket's last M each, then ``edge + 1 .. limit``)."""
    out, lo = [], 1
    for edge in sorted(set(BUCKET_EDGES) | {e for e in edges if e >= 1}):
        if lo > limit:
            break
        out.append(MBucket(lo, min(edge, limit)))
        lo = edge + 1
    if lo <= limit:
        out.append(MBucket(lo, limit))
    return tuple(out)


def symbolic_m():
    """A fresh TIR variable for M (``int32``, named ``VAR_NAME``)."""
    from tvm_tirx import tirx

    return tirx.Var(VAR_NAME, "int32")


def is_static(x) -> bool:
    """Whether an extent is a Python int (not a TIR expression of a symbolic M)."""
    return isinstance(x, int)


def divides(x, d: int) -> bool:
    """Whether ``d`` divides the extent ``x`` for every value it takes: only a static multiple does."""
    return is_static(x) and x % d == 0


def check_layout(layout: str, who: str) -> None:
    """Dynamic M needs A stored [M, K] (layouts ``nn``, ``nt``): stored [K, M], A's rows would be the
    run-time M long, and their length decides the copy width and alignment both targets plan."""
    if layout[:1] != "n":
        raise ValueError(f"{who}: dynamic M needs A stored [M, K] (layouts nn, nt); layout {layout!r} stores A as "
                         "[K, M], whose row length (the run-time M) would decide the copy width and alignment")


def resolve_m(M, who: str):
    """``(M for the plan, bucket or None, largest M)`` of a planner's ``M`` argument: an int, or an
    ``MBucket`` (then a fresh TIR variable and the bucket's largest M)."""
    if isinstance(M, MBucket):
        return symbolic_m(), M, M.hi
    if not isinstance(M, int):
        raise TypeError(f"{who}: M must be an int or an MBucket (dynamic M), not {type(M).__name__}")
    return M, None, M


class DynamicGemm:
    """A dynamic-M GEMM: ``buckets`` of M, each with its plan (``plan_bucket(bucket)``, made on first
    use) and its kernel (``build_plan(plan)``, built on first use and cached by the target's build
    cache); ``kernel_for(M)`` is the kernel that serves M."""

    def __init__(self, target: str, bucket_table: tuple[MBucket, ...], plan_bucket: Callable, build_plan: Callable,
                 emit_plan: Callable | None = None, describe: str = ""):
        self.target, self.describe = target, describe
        self._buckets = tuple(bucket_table)
        self._plan_bucket, self._build_plan, self._emit_plan = plan_bucket, build_plan, emit_plan
        self._plans: dict[MBucket, object] = {}
        self._kernels: dict[MBucket, object] = {}
        self._funcs: dict[MBucket, object] = {}

    @property
    def buckets(self) -> tuple[MBucket, ...]:
        return self._buckets

    @property
    def limit(self) -> int:
        """The largest M served."""
        return self._buckets[-1].hi

    def bucket(self, M: int) -> MBucket:
        """The bucket that serves ``M``; ValueError outside ``1..limit``."""
        if isinstance(M, bool) or not isinstance(M, int):
            raise TypeError(f"dynamic-M GEMM: M must be an int, not {type(M).__name__}")
        for b in self._buckets:
            if M in b:
                return b
        from ...errors import ContractError

        raise ContractError(f"dynamic-M GEMM{self.describe}: M = {M} is outside 1..{self.limit}, what the kernels index "
                            "(kernels.gemm.dynamic_m.m_limit, kernels.gemm.offsets.grid_limit)", operand="A",
                            expected=f"1 <= M <= {self.limit} (A's and C's rows)", found=str(M), check="shape",
                            suggestion="split the rows into several launches")

    def plan(self, M: int):
        """The plan of ``M``'s bucket (its M the TIR variable)."""
        b = self.bucket(M)
        if b not in self._plans:
            self._plans[b] = self._plan_bucket(b)
        return self._plans[b]

    def kernel_for(self, M: int):
        """The built kernel of ``M``'s bucket (built on first use)."""
        b = self.bucket(M)
        if b not in self._kernels:
            self._kernels[b] = self._build_plan(self.plan(M))
        return self._kernels[b]

    def primfunc(self, M: int):
        """The TIRx PrimFunc of ``M``'s bucket (emitted on first use; what the emulator runs)."""
        b = self.bucket(M)
        if b not in self._funcs:
            self._funcs[b] = self._emit_plan(self.plan(M))
        return self._funcs[b]

    def built(self) -> tuple[MBucket, ...]:
        """The buckets whose kernels are built so far."""
        return tuple(b for b in self._buckets if b in self._kernels)

    def __repr__(self) -> str:
        return f"DynamicGemm({self.target}{self.describe}, buckets {[b.describe() for b in self._buckets]})"


__all__ = ["BUCKET_EDGES", "LAST_REPRESENTATIVE", "VAR_NAME", "DynamicGemm", "MBucket", "buckets", "ceil_div", "check_layout",
           "divides",
           "extent_record", "is_static", "m_limit", "resolve_m", "symbolic_m"]
