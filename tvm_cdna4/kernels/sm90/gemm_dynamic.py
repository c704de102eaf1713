"""Dynamic M on Hopper: the sm90 GEMM's ``DynamicGemm`` (``kernels.gemm.dynamic_m``).

N, K, the dtypes, the layout (``nt``) and the fused epilogue are fixed at build time; M is the TIR variable
``M`` bound at launch from A's shape (checked against C's): the host part encodes A's tensor map (and a TMA
epilogue's C map) with the run-time M, and the persistent grid is ``min(tiles, SMs)`` of the run-time tiles
(``kernels.sm90.gemm_plan``). The buckets of M (``dynamic_buckets``) are the shared ones
(``kernels.gemm.dynamic_m.BUCKET_EDGES``) cut further at ``EDGES``, then, per problem, at multiples of ``CUT_ROWS``
wherever one plan would lose more than ``REGRET_MAX`` by the model inside a bucket (``refined``), and each gets the
plan that serves its range of M best (``planned_range``):

* a bucket whose largest M the planners weigh the decode kernel at (``decode_plan.decode_weighed``: ``1..16``, and
  ``17..32`` where ``decode_plan.WEIGH_WIDE_DECODE`` is on) keeps the sm80 weight-streaming decode kernel
  (``kernels.sm80.decode_plan``, its own cost model's ``DecodeConfig`` at the bucket's largest M, built for
  ``sm_90a``) while ``decode_keeps`` (the target's ``DECODE_KEEPS``): measured at 1.0x torch.matmul and more at
  M <= 16 on the H100 and H200 (docs/sm90_gemm.md);
* every other bucket: the sm90 cost model's ``Sm90Config`` for the whole range (``gemm_cost.choose_for_range``:
  the least worst loss against each M's own best config); in the buckets up to ``gemm_cost.SWAP_DYNAMIC_MAX_M``
  swapped ones too (``Sm90Config.swap_ab``, while ``gemm_cost.WEIGH_SWAP_DYNAMIC``: the bucket's largest M in up to
  ``gemm_cost.SWAP_M_TILES`` tiles of M, ``gemm_cost.swap_widths``), above it unswapped (the swapped bucket plans
  there timed slower through the torch op: docs/sm90_gemm.md "Swap AB"; where ``gemm_cost.WEIGH_SWAP_NARROW`` (on),
  past it up to ``gemm_cost.SWAP_NARROW_MAX_M`` in parts of ``gemm_cost.SWAP_NARROW_ROWS`` rows whose plan is swapped:
  ``narrowed``).

Why the finer buckets: this kernel's tile is right for an M when its tiles fill the SMs' waves, and that
changes with every 1.3-2x of M (at 132 SMs); the model's worst loss over M = 17..8192 on sixteen LLM
projections (N, K of 2k-38k) is 2.5x with the shared buckets planned at their largest M, 1.6x with the shared
buckets planned over their range, 1.23x (geometric mean 1.0%) with ``EDGES`` added and planned over their
range (`docs/sm90_gemm.md` "Dynamic M"). A bucket is a kernel built on its first use (about 3 s of TIRx
lowering, then the driver's compile; the build cache keeps it across processes).

The buckets end where C's 32-bit offsets do (``m_limit(N)``: ``M N < 2^31``, the sm90 epilogue's rule); a
larger M is refused by ``DynamicGemm.bucket`` (a ``ContractError`` naming A). What the sm90 kernel does not
run is refused when the ``DynamicGemm`` is made (``gemm_plan.check_problem``: layout, K % 8, dtypes).
"""

from __future__ import annotations

import functools

from ..gemm.dynamic_m import BUCKET_EDGES, DynamicGemm, MBucket, buckets, m_limit
from ..gemm.epilogue import Fusion
from . import gemm_cost
from .gemm_plan import check_problem, epilogue_choices, plan as make_plan


EDGES = (96, 192, 384, 512, 768, 1536, 2048, 2560, 3072, 6144, 8192)
"""The sm90 buckets' last M beside the shared ``BUCKET_EDGES`` (the module docstring says why). 2560: one
2049..3072 bucket keeps 128x192 for N = 3584 (at M = 2049 the 224-column tile runs 2.06 waves), 2561..3072 takes
128x224, by the model 1.19x at M = 3000 (docs/sm90_gemm.md "Tile widths")."""


REFINE_BUCKETS = True
"""Whether a bucket whose one plan loses more than ``REGRET_MAX`` at some M of its range is cut further
(``refined``). Why: ``EDGES`` alone leave the model's own worst loss inside a bucket at 1.2-1.38x on the o, QKV
and down projections past M = 768 (``choose_for_range``'s minimax plan at M = 1255 of 1025..1536 for Qwen2.5-7B down
is 128x256 /k2, estimated 1.30x the 128x144 the model picks for that M alone), because the tile count a wave changes
at every ``CUT_ROWS`` rows. Measured (H100, 2026-12-07, ``runs/torch_gemm_splitepi_h100_2026-12-07b.md``): the torch
op ran M = 1200 at 0.51-0.76x cuBLAS on those rows where M = 768, a bucket's top, ran 0.94-1.10x."""

REGRET_MAX = 1.05
"""The largest loss (``gemm_cost.range_choice``'s worst regret) a bucket's plan may take at an M of its range before
``refined`` cuts the bucket (where it is wider than ``CUT_ROWS``)."""

CUT_ROWS = gemm_cost.WAVE_ROWS[0][0]
"""``refined`` cuts a bucket at a multiple of these rows (the two-consumer tile's: its tile count changes there)."""

FINE_CUTS = True
"""Whether ``refined`` cuts a part too narrow for a ``CUT_ROWS`` cut, whose plan still loses more than ``REGRET_MAX``, at a
multiple of ``FINE_CUT_ROWS`` (the one-consumer tile's rows: its tile count changes there). Why: 257..384 is one
``CUT_ROWS`` wide, and its one plan loses 1.07-1.09x by the model at M = 300 on five of the twelve projections of
``benchmarks/torch_gemm.py`` (the plan of 257..384 against that of 257..320: a 64-row tile for the 128-row one on
Qwen2.5-7B o and Phi-3-medium down, a narrower 64-row one on the other three), where the torch op ran 0.79x cuBLAS.
Timed through the torch op (H100, 2026-12-07, ``runs/torch_gemm_finecut_h100_2026-12-07c.md``, the five changed
rows): on / off geo-mean 1.03x at M = 260 (0.79-1.37), 1.07x at 288, 1.12x at 300, 1.19x at 320. The rule is not
257..384's alone: any part one ``CUT_ROWS`` wide whose plan loses is cut, untimed elsewhere (on the H100, of 60 shapes
N = 512..16384 x K = 1024..14336, 18, all N <= 3072, cut parts of 385..2304 too, e.g. N = 1024, K = 4096 769..896 at
832; the twelve projections change at 257..384 only). On three other models (Llama-3.2-3B, Qwen2.5-14B, Qwen2.5-1.5B:
``benchmarks/sm90_reach.py``; H200, 2026-12-07, ``runs/torch_gemm_reach_h200_2026-12-07d.md``) the 27 changed rows ran
1.10x on / off (geo-mean; Qwen2.5-14B o / down 1.23-1.50x at 260-316), the cut of 769..832 on Qwen2.5-1.5B down lost
(0.93x at 772, 0.82x at 800)."""

FINE_CUT_ROWS = gemm_cost.WAVE_ROWS[-1][0]
"""The rows of ``FINE_CUTS``' cuts."""


def refined(bucket: MBucket, N: int, K: int, dtype: str, out_bytes: int, device,
            rows: int | None = None) -> tuple[MBucket, ...]:
    """``bucket`` cut in two at the multiple of ``rows`` (default ``CUT_ROWS``) nearest its ``planned_range``'s
    geometric middle, each half cut again, while the plan of a part loses more than ``REGRET_MAX`` somewhere in its
    range (the bucket itself where it does not, or is too narrow to cut: with ``FINE_CUTS``, too narrow for
    ``FINE_CUT_ROWS`` too). The decode bucket (``BUCKET_EDGES[0]`` and below) and the last one (past ``EDGES``) stay
    whole."""
    if bucket.hi <= BUCKET_EDGES[0] or bucket.lo > EDGES[-1]:
        return (bucket,)
    lo, hi = planned_range(bucket)
    if gemm_cost.range_choice(lo, hi, N, K, out_bytes, device, dtype, m_max=bucket.hi)[1] <= REGRET_MAX:
        return (bucket,)
    rows = rows or CUT_ROWS
    cut = round((lo * hi) ** 0.5 / rows) * rows
    if not bucket.lo <= cut < bucket.hi:
        fine = FINE_CUTS and rows > FINE_CUT_ROWS
        return refined(bucket, N, K, dtype, out_bytes, device, FINE_CUT_ROWS) if fine else (bucket,)
    return (refined(MBucket(bucket.lo, cut), N, K, dtype, out_bytes, device, rows)
            + refined(MBucket(cut + 1, bucket.hi), N, K, dtype, out_bytes, device, rows))


def dynamic_buckets(N: int, K: int | None = None, dtype: str = "bf16", out_dtype: str = "bf16",
                    device=None) -> tuple[MBucket, ...]:
    """The M buckets (``kernels.gemm.dynamic_m.buckets`` with ``EDGES``) up to the largest M with ``M N < 2^31``;
    with ``K`` and ``device`` (a ``devices.DeviceSpec``) and ``REFINE_BUCKETS``, each ``refined`` for that problem."""
    coarse = buckets(m_limit(N), *EDGES)
    if K is None or device is None or not REFINE_BUCKETS:
        return coarse
    size = out_bytes(out_dtype)
    return tuple(b for c in coarse for part, narrow in narrowed(c, N, K, dtype, size, device)
                 for b in ((part,) if narrow else coalesced(refined(part, N, K, dtype, size, device), N, K, dtype, size,
                                                            device)))


def narrowed(bucket: MBucket, N: int, K: int, dtype: str, out_bytes: int, device) -> tuple[tuple[MBucket, bool], ...]:
    """``bucket`` as (part, narrow) pairs: itself, or where ``gemm_cost.WEIGH_SWAP_NARROW`` (and
    ``WEIGH_SWAP_DYNAMIC``) its M past ``gemm_cost.SWAP_DYNAMIC_MAX_M`` up to ``SWAP_NARROW_MAX_M`` cut at multiples of
    ``gemm_cost.SWAP_NARROW_ROWS``, each such part kept (narrow) where its own plan is swapped
    (``gemm_cost.swap_weighed``), the rest rejoined in runs (``refined`` as any bucket)."""
    step, swapped = gemm_cost.SWAP_NARROW_ROWS, gemm_cost.WEIGH_SWAP_DYNAMIC and gemm_cost.WEIGH_SWAP_NARROW
    first, last = max(bucket.lo, gemm_cost.SWAP_DYNAMIC_MAX_M + 1), min(bucket.hi, gemm_cost.SWAP_NARROW_MAX_M)
    if not swapped or first > last:
        return ((bucket, False),)
    out: list = []

    def add(part: MBucket, narrow: bool) -> None:
        if out and not narrow and not out[-1][1]:
            out[-1] = (MBucket(out[-1][0].lo, part.hi), False)
        else:
            out.append((part, narrow))

    if bucket.lo < first:
        add(MBucket(bucket.lo, first - 1), False)
    for lo in range(first, last + 1):
        if lo == first or (lo - 1) % step == 0:
            hi = min(last, (lo - 1) // step * step + step)
            add(MBucket(lo, hi), gemm_cost.choose_for_range(lo, hi, N, K, out_bytes, device, dtype, m_max=hi).swap_ab)
    if last < bucket.hi:
        add(MBucket(last + 1, bucket.hi), False)
    return tuple(out)


def coalesced(parts: tuple[MBucket, ...], N: int, K: int, dtype: str, out_bytes: int, device) -> tuple[MBucket, ...]:
    """``refined``'s parts of one bucket with neighbours joined where the joined range's plan is the one each part has
    and loses at most ``REGRET_MAX`` (two halves of a cut that chose alike: one kernel built, not two)."""
    @functools.cache
    def choice(b: MBucket):  # each part's choice once, not once a neighbour
        return gemm_cost.range_choice(*planned_range(b), N, K, out_bytes, device, dtype, m_max=b.hi)

    out = [parts[0]]
    for b in parts[1:]:
        joined = MBucket(out[-1].lo, b.hi)
        cfg, loss = choice(joined)
        if loss <= REGRET_MAX and cfg == choice(out[-1])[0] == choice(b)[0]:
            out[-1] = joined
        else:
            out.append(b)
    return tuple(out)


def out_bytes(out_dtype: str) -> int:
    """Bytes of one element of C as the cost model counts them (f32 4, else 2)."""
    return 4 if out_dtype == "f32" else 2


def planned_range(bucket: MBucket) -> tuple[int, int]:
    """The M values a bucket's plan is weighed over: ``lo`` to its representative M (its largest), and for
    the last, unbounded bucket ``lo`` to ``2 lo`` (past 8192 rows the tile count no longer changes the
    choice)."""
    return bucket.lo, min(bucket.hi, max(bucket.representative, 2 * bucket.lo))


def plan_bucket(bucket: MBucket, N: int, K: int, dtype: str, layout: str, out_dtype: str, fusion: Fusion, device,
                decode_keeps: bool = True):
    """The plan of one bucket (the module docstring): the decode kernel's ``DecodePlan`` where ``decode_keeps`` and the
    planners weigh it at the bucket's largest M (``decode_weighed``), else the sm90 cost model's ``Sm90Plan`` over the bucket's ``planned_range``, on
    ``device`` (a ``devices.DeviceSpec``)."""
    from ..sm80.decode_plan import choose_decode, decode_weighed, plan_decode

    if decode_keeps and decode_weighed(bucket.hi, layout):
        cfg = choose_decode(bucket.representative, N, K, out_dtype, device.units)[0]
        return plan_decode(bucket, N, K, dtype, layout, out_dtype, cfg, fusion)
    cfg = epilogue_choices(gemm_cost.choose_for_range(*planned_range(bucket), N, K, out_bytes(out_dtype), device,
                                                   dtype, m_max=bucket.hi), fusion, out_dtype)  # a split's workspace: the bucket's rows
    return make_plan(bucket, N, K, dtype, layout, out_dtype, cfg, device.units, device.smem_per_unit, fusion)


def build_dynamic(N: int, K: int, dtype: str, layout: str, out_dtype: str, device, build_plan, emit,
                  fusion: Fusion = Fusion(), decode_keeps: bool = True) -> DynamicGemm:
    """The ``DynamicGemm`` of a dynamic-M sm90 problem: ``plan_bucket`` per bucket (made on first use),
    ``build_plan(plan)`` / ``emit(plan)`` (the target's, through its build cache) on first use. A
    ``ContractError`` naming the operand for a problem the sm90 kernel does not run."""
    check_problem(MBucket(1, 1), N, K, dtype, layout, out_dtype)
    return DynamicGemm("cuda", dynamic_buckets(N, K, dtype, out_dtype, device),
                       lambda b: plan_bucket(b, N, K, dtype, layout, out_dtype, fusion, device, decode_keeps),
                       build_plan, emit, describe=f" sm90 {layout} {dtype}->{out_dtype} N={N} K={K}" + (
                           "" if fusion.empty else f" epilogue {fusion.describe()}"))


__all__ = ["CUT_ROWS", "EDGES", "FINE_CUTS", "FINE_CUT_ROWS", "REFINE_BUCKETS", "REGRET_MAX", "build_dynamic", "coalesced", "dynamic_buckets", "narrowed", "out_bytes", "plan_bucket",
           "planned_range", "refined"]
