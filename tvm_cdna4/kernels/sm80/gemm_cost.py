"""The CUDA GEMM's cost model and its choice of tiling (docs/cuda_gemm.md, "Plans for every M"): what the
model knows of a GPU (:class:`Device`, by default the H200's 132 SMs), its figures for one tiling
(``estimate`` -> :class:`Estimate`: tiles x waves over SMs, padded MMA rows, roofline max(FLOPs / peak,
bytes / bandwidth) with the bandwidth the resident CTAs can draw, the split-K workspace traffic), the
tilings the planner weighs (``candidates``: the default, and up to ``SMALL_M`` rows 16/32/64/128-row tiles
with K split over 1..16 CTAs; ``grouped_candidates``) and its choice (``choose_config``;
``replan_stages`` for a tiling given by hand). Pure Python, no TIRx; ``kernels.sm80.gemm_plan.plan``
calls ``choose_config`` when it is given no config."""

from __future__ import annotations

import math
from dataclasses import replace

import attrs

from ..devices import DEVICES
from ..gemm.dynamic_m import MBucket, ceil_div
from ..gemm.grouped import Groups, expected_row_tiles, tail_rows
from .gemm_config import GemmConfig, _short_out, default_config, fit_stages
from .gemm_plan_operands import make_operands


# ----------------------------------------------------------------------------------------------
# The cost model
# ----------------------------------------------------------------------------------------------


H200_SMS = DEVICES["H200"].units  # the default GPU's SMs (kernels.devices; the present GPU's: devices.planned)


@attrs.frozen
class Device:
    """What the cost model knows of a GPU (defaults: the H200, mma.sync dense 16-bit). The rates
    below ``sms`` were fitted to H200 measurements at M = 64 and 128: the sweep of 400 tilings, then
    ``pairs_s`` on the second run, then refitted pooled with the sweep of 2026-12-02; the ``decode_*``
    fields to that sweep's decode configs at M = 1 and 16 (``benchmarks/cost_model_fit.py``,
    docs/cuda_gemm.md "Plans for every M" and "The decode kernel"); ``sms`` scales everything that is
    per SM."""

    sms: int = H200_SMS
    peak_flops: float = 590e12
    """mma.sync f16/bf16 FLOP/s of the whole GPU under the board's power cap (the register-only
    loop with changing operands: 589 TFLOP/s)."""
    hbm_bytes_s: float = 4.0e12
    """HBM bandwidth a GEMM gets right after the L2 flush of the timing method (the flush leaves
    the L2 full of dirty lines to write back): 4.0 TB/s fitted, of 4.8 on the datasheet."""
    l2_bytes_s: float = 12e12
    """L2 -> SM bandwidth of the whole GPU: every CTA's tile loads (A and B panels, re-reads
    included) pass it."""
    sm_bytes_s: float = 80e9
    """What one SM's loads can stream from L2 at most (bytes/s), however many are in flight."""
    latency_s: float = 1.5e-6
    """Loaded memory latency: an SM with ``c`` resident CTAs keeps ``c * (stages - 1)`` stages in
    flight, so it streams at most that many bytes per ``latency_s`` (Little's law): few, shallow
    CTAs cannot use the SM's share of the bandwidth."""
    smem_bytes_clk: float = 128.0
    """Shared-memory bytes per SM per clock: ldmatrix reads of the warp tiles and cp.async writes
    of the stages share it with the mma issue (narrow warp tiles read more per FLOP)."""
    issue_warps: int = 1
    """Warps an SM needs resident to issue its mma and ldmatrix at full rate (each warp's chain
    waits on its own results); with fewer the SM's issue time grows by ``issue_warps / warps``
    (refitted to 1 on 2026-12-02: the pooled measurements rank best with no such stretch)."""
    clock_hz: float = 1.7e9
    """SM clock under load (the power cap holds it at 1650-1695 MHz)."""
    wave_s: float = 1.0e-6
    """Fixed cost of one wave of CTAs on an SM (pipeline fill, epilogue)."""
    launch_s: float = 3.0e-6
    """Fixed cost of a launch (the kernel's start and drain)."""
    split_s: float = 5.0e-6
    """Extra fixed cost of the split-K epilogue (fence, ticket, the last CTA's gather)."""
    atomic_s: float = 7e10
    """Workspace elements per second of the element-wise reductions (``red.global.add.f32``, or
    the ordered ``st.global.f32``, and the last CTA's gather): each slice adds its whole tile, one
    element a thread-instruction."""
    roof_flops: float = 660e12
    roof_bytes_s: float = 4.8e12
    """The roofline's rates (issue 24's definition, ``benchmarks/llm_linear.py``): ``roofline_s`` =
    max(FLOPs / roof_flops, A + B + C bytes / roof_bytes_s)."""
    pairs_s: float = 1.5e11
    """Workspace elements per second of the ordered reduction by column pairs
    (``reduce_vector = 2``: plain ``st.global.v2.f32`` / ``ld.global.cg.v2.f32``, no read-modify-write
    in L2), fitted on the second H200 run (its split-K reductions set and tuned candidates)."""
    overlap: float = 0.3
    """Fraction of the shorter of an SM's load and mma-issue time that does not hide under the
    longer."""
    # the decode kernel's model (kernels.sm80.decode_plan.decode_estimate), fitted to the H200 sweep of 2026-12-02
    # (benchmarks/cost_model_fit.py --fit-decode: 16 shapes at M = 1 and 16, flush timing)
    decode_bytes_s: float = 4.5e12
    """HBM rate of the decode kernel's weight stream (fitted)."""
    decode_sm_bytes_s: float = 50e9
    """What one SM's decode CTAs stream at most (W and x rows through their cp.async pipelines)."""
    decode_latency_s: float = 0.75e-6
    """Little's law for the decode pipelines: an SM streams at most its CTAs' bytes in flight per this."""
    stream_ramp_s: float = 1e-6
    """The decode kernel's fixed cost beyond ``launch_s``: the first bytes' latency and the last CTAs' drain."""
    dirty_bytes: float = 30e6
    """HBM write-back that the timing's L2 flush (``runtime.cuda.bench_ms`` "flush": 256 MB zeroed, up to
    the 60 MB L2 left dirty) hands the timed kernel: a kernel reading fewer bytes evicts fewer (fitted)."""
    half_line: float = 1.15
    """Time factor of a decode plan whose warp instructions copy half lines (``line_copy`` off, or unroll 1:
    8 rows x 64 bytes; fitted: the same config with and without ``line_copy`` measured 1.10x on average
    over 176 pairs, unroll 1 slower still)."""
    search_s: float = 0.26e-6
    """One dependent load of a grouped CTA's search for its group (an L2 hit of the offsets): a CTA waits
    ``ceil(log2 G)`` of them (``Groups.search`` "binary") or ``ceil(G / threads)`` ("cta") before its
    first copy. Fitted to the H200 call of 2026-12-02 (h-gaps25): the CTA-wide search took 115 µs off the
    DeepSeek-V3-like prefill (7362 -> 7247 µs), 63 CTAs per SM each waiting 7 loads fewer."""
    regs: int = 65536
    smem: int = 227 * 1024


@attrs.frozen
class Estimate:
    """The cost model's figures for one tiling of one problem."""

    ctas: int
    """CTAs launched (output tiles times ``split_k``)."""
    per_sm: int
    """CTAs resident per SM (shared memory, registers, threads)."""
    waves: int
    """``ceil(ctas / (sms * per_sm))``."""
    tile_efficiency: float
    """Useful fraction of the issued MMA work (padded rows and columns, padded k-tiles)."""
    bytes: int
    """HBM traffic: A, B and C once, plus the split-K workspace traffic."""
    time_s: float
    """``max(compute, memory) + overlap * min(compute, memory) + waves * wave_s (+ split_s)``."""
    roofline_s: float
    """``max(flops / peak, (A + B + C) / bandwidth)``: the problem's roofline time."""

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_s / self.time_s


def _resident(cfg: GemmConfig, dev: Device) -> int:
    """CTAs resident per SM: shared memory, registers (64 + accumulators + fragments per thread, at
    most 255) and 2048 threads."""
    acc_regs = cfg.warp_m * cfg.warp_n // 32
    regs = min(255, 64 + acc_regs + (cfg.warp_m + cfg.warp_n) // 8)
    return max(1, min(dev.smem // cfg.smem_bytes(), dev.regs // (regs * cfg.threads), 2048 // cfg.threads, 32))


def _sm_time(cfg: GemmConfig, K: int, n_max: int, per_sm: int, dev: Device, rows: float | None = None) -> float:
    """The busiest SM's time: its ``n_max`` CTAs in waves of ``per_sm``; per wave the larger of its
    loads (the SM's bandwidth, or what its stages in flight allow, Little's law) and its mma issue
    (the SM's share of the peak, or its shared-memory traffic: ldmatrix reads plus cp.async writes),
    plus the fixed cost of a wave. ``rows``: CTAs that issue the mma for only that many rows (a short
    tile, ``GemmConfig.live_rows``): their loads are whole, their mma and the ldmatrix of their warps
    with rows (``ceil(rows / warp_m)`` warp rows) shrink."""
    c = min(per_sm, n_max)
    waves = ceil_div(n_max, per_sm)
    kt = cfg.slice_k_tiles(K)
    stage_bytes = (cfg.block_m + cfg.block_n) * cfg.block_k * 2
    bw = min(dev.sm_bytes_s, c * (cfg.stages - 1) * stage_bytes / dev.latency_s)
    load = c * kt * stage_bytes / bw
    live = cfg.block_m if rows is None else rows
    warps_live = cfg.warps_m if rows is None else min(cfg.warps_m, math.ceil(rows / cfg.warp_m))
    flops = c * 2 * live * cfg.block_n * kt * cfg.block_k
    # every warp reads its warp_m rows of A and warp_n columns of B per k: the CTA's ldmatrix bytes
    ldmatrix = 2 * kt * cfg.block_k * (cfg.warp_m * warps_live * cfg.warps_n + cfg.block_n * warps_live)
    smem = c * (ldmatrix + kt * stage_bytes) / (dev.smem_bytes_clk * dev.clock_hz)
    warps = c * cfg.warps_m * cfg.warps_n
    issue = max(flops / (dev.peak_flops / dev.sms), smem) * max(1.0, dev.issue_warps / warps)
    return waves * (max(load, issue) + dev.overlap * min(load, issue) + dev.wave_s)


def estimate(M: int, N: int, K: int, cfg: GemmConfig, out_bytes: int = 2, dev: Device = Device(),
             groups: int = 0) -> Estimate:
    """The cost model (docs/cuda_gemm.md, "Plans for every M"): the busiest SM's CTAs (``_sm_time``),
    bounded below by HBM traffic (A, B, C once) and the L2 -> SM traffic of every CTA's panels,
    plus the split-K reduction (the workspace traffic at ``atomic_s`` or ``pairs_s``) and fixed costs.
    ``groups`` > 0: a grouped GEMM of that many groups of ``M`` rows each, each with its own weights
    (``kernels.gemm.grouped``: ``expected_row_tiles`` row tiles per group)."""
    n = max(groups, 1)
    gm = math.ceil(groups * expected_row_tiles(M, cfg.block_m)) if groups else ceil_div(M, cfg.block_m)
    gn = ceil_div(N, cfg.block_n)
    ctas = gm * gn * cfg.split_k
    per_sm = _resident(cfg, dev)
    waves = ceil_div(ctas, dev.sms * per_sm)
    k_issued = cfg.slice_k_tiles(K) * cfg.block_k * cfg.split_k
    issued = 2 * gm * cfg.block_m * gn * cfg.block_n * k_issued
    short = groups and cfg.live_rows
    if short:  # each group's last row tile short (kernels.gemm.grouped.tail_rows), the others full
        issued = 2 * groups * gn * k_issued * cfg.block_n * (
            (expected_row_tiles(M, cfg.block_m) - 1) * cfg.block_m + tail_rows(M, cfg.block_m))
    flops = 2 * n * M * N * K
    base_bytes = n * (2 * (M * K + N * K) + out_bytes * M * N)
    # the workspace is written by every slice and read once by the last CTA
    work = 4 * n * M * N * (cfg.split_k + 1) if cfg.split_k > 1 else 0
    stage_bytes = (cfg.block_m + cfg.block_n) * cfg.block_k * 2
    loads = ctas * cfg.slice_k_tiles(K) * stage_bytes
    if short:
        full = ctas - groups * gn
        sm = (_sm_time(cfg, K, ceil_div(full, dev.sms), per_sm, dev) if full > 0 else 0.0) + _sm_time(
            cfg, K, ceil_div(groups * gn, dev.sms), per_sm, dev, tail_rows(M, cfg.block_m))
    else:
        sm = _sm_time(cfg, K, ceil_div(ctas, dev.sms), per_sm, dev)
    memory = max((base_bytes + work) / dev.hbm_bytes_s, loads / dev.l2_bytes_s)
    split = 0.0
    if cfg.split_k > 1:  # every slice adds its tile, the last CTA reads and clears it
        rate = dev.pairs_s if cfg.reduce_vector == 2 and cfg.reduction == "ordered" else dev.atomic_s
        split = dev.split_s + (cfg.split_k + 2) * gm * cfg.block_m * gn * cfg.block_n / rate
    sm += _search_s(M, N, cfg, groups, per_sm, dev) if groups else 0.0
    time = max(sm, memory) + split + dev.launch_s
    roof = max(flops / dev.roof_flops, base_bytes / dev.roof_bytes_s)
    return Estimate(ctas, per_sm, waves, flops / issued, base_bytes + work, time, roof)


def _search_s(M: int, N: int, cfg: GemmConfig, groups: int, per_sm: int, dev: Device) -> float:
    """A grouped GEMM's searches on the busiest SM: every launched CTA (``Groups.row_tiles`` of ``groups``
    x ``M`` rows, those without rows included) waits its search's dependent loads (``Device.search_s``
    each: ``ceil(log2 G)`` for the binary search, ``ceil(G / threads)`` for the CTA-wide one) before its
    first copy, hidden only by the SM's other resident CTAs (``per_sm``)."""
    grouping = Groups(groups, cfg.block_m, MBucket(1, 1), cfg.group_search)
    launched = grouping.row_tiles(groups * M) * ceil_div(N, cfg.block_n)
    loads = max(1, grouping.search_loads(cfg.threads))  # G = 1: the group's offsets, one load
    return ceil_div(launched, dev.sms) * loads * dev.search_s / per_sm


# ----------------------------------------------------------------------------------------------
# The candidates and the choice
# ----------------------------------------------------------------------------------------------


SMALL_M = 256
"""Up to this M (two 128-row tiles) the planner weighs the small-M tilings and split-K; above it it
keeps ``default_config`` (the tuned big-M kernels, pinned by the golden digests). Inclusive, so that
the dynamic-M bucket 129..256, planned at its largest M (``kernels.gemm.dynamic_m``), is planned as
the small problem it serves (at 256 rows the default 128 x 128 tile of N = 4096 fills 64 of 132
SMs)."""


PIPELINES = ((64, 4), (128, 3), (128, 4))
"""(block_k, stages) of the small-M candidates: the default 4 x 64, a deeper k-tile of 3 stages
(twice the bytes per stage and half the barriers: Triton's 32x64x128 / 3 stages, the fastest tiling
of the first H200 sweep on 6 of its 16 shapes) and of 4 stages (16x64x128, 32x128x128 and 64x128x128
with 4 stages led the 2026-12-02 sweep at M = 16-128); those whose shared memory does not fit are
dropped."""


def candidates(M: int, N: int, K: int, dtype: str = "f16") -> list[GemmConfig]:
    """The tilings the planner weighs: ``default_config`` and, up to ``SMALL_M`` rows, 16/32/64/128-row
    tiles (one 16-row mma per warp at 16 rows) over 64/128/256 columns and the ``PIPELINES``, each
    with K split in 1..16 slices of at least two k-tiles."""
    base = default_config(dtype, M, N)
    if M > SMALL_M:
        return [base]
    out = [base]
    for bm, wm in ((16, 1), (32, 1), (64, 2), (128, 2)):
        if bm > 2 * max(16, M):
            continue
        for bn in (64, 128, 256):
            for bk, stages in PIPELINES:
                cfg = replace(base, block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=4, stages=stages)
                if cfg.smem_bytes() > 227 * 1024:
                    continue
                kt = math.ceil(K / cfg.block_k)
                for split in (1, 2, 3, 4, 6, 8, 12, 16):
                    if split > 1 and kt < 2 * split:
                        break
                    out.append(replace(cfg, split_k=split))
                    if split > 1 and N % 2 == 0:  # the ordered reduction by column pairs
                        out.append(replace(cfg, split_k=split, reduction="ordered", reduce_vector=2))
    return out


def grouped_candidates(M: int, N: int, K: int, dtype: str, groups: int) -> list[GemmConfig]:
    """The tilings a grouped GEMM of ``groups`` groups of ``M`` rows weighs: ``default_config`` of the
    whole problem, then the small-M tilings of ``candidates`` (at most ``SMALL_M`` rows per group),
    without a K split (a group's rows are known only on the device); then all of them with the CTA-wide
    group search (``GemmConfig.group_search``), ranked by the same ``estimate``. Short tiles
    (``GemmConfig.live_rows``) are not offered: measured slower on the H200 (docs/grouped_gemm.md,
    "Short tiles"), though ``estimate`` ranks them ahead."""
    small = candidates(min(M, SMALL_M), N, K, dtype)
    pool = [default_config(dtype, groups * M, N)] + [cfg for cfg in small if cfg.split_k == 1]
    return pool + [replace(cfg, group_search="cta") for cfg in pool]


def choose_config(M: int, N: int, K: int, dtype: str = "f16", layout: str = "nt", out_dtype: str = "f32",
                  sms: int = H200_SMS, groups: int = 0) -> GemmConfig:
    """The planner's choice: the candidate (``candidates``) of least estimated time
    (``estimate`` on a GPU of ``sms`` SMs) that plans for this problem; ties keep the earlier
    candidate (the default first). ``groups`` > 0: a grouped GEMM of that many groups of ``M``
    rows each (``grouped_candidates``, ``estimate`` with ``groups``)."""
    dev = Device(sms=sms)
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    pool = grouped_candidates(M, N, K, dtype, groups) if groups else candidates(M, N, K, dtype)
    scored = sorted(enumerate(pool), key=lambda ic: (estimate(M, N, K, ic[1], ob, dev, groups).time_s, ic[0]))
    for _, cfg in scored:
        try:
            cfg.check()
            make_operands(M, N, K, layout, cfg)
        except ValueError:
            continue
        return cfg
    return default_config(dtype, M, N)


def device_model(spec) -> Device:
    """The model of the GPU ``spec`` (a ``kernels.devices.DeviceSpec``): its SMs, and the fitted H200 HBM rate
    scaled by the datasheets' ratio (``spec.hbm_bytes_s / DEVICES["H200"].hbm_bytes_s``: the H100's 3.35 of
    4.8 TB/s). What the decode choice (``choose_decode``) weighs: at decode the weights' stream is the time."""
    h200 = Device()
    return Device(sms=spec.units, hbm_bytes_s=h200.hbm_bytes_s * spec.hbm_bytes_s / DEVICES["H200"].hbm_bytes_s)


def active_groups(groups: int, tokens: int) -> int:
    """The groups a decode launch of ``tokens`` rows in all is expected to give rows: ``min(G, T)`` (each row
    routed to one group; at most every group), at least one. The decode cost term of a grouped plan
    (``decode_estimate``): few active groups with long K leave SMs idle unless K is split across CTAs."""
    return max(1, min(groups, tokens))


def decode_estimate(tokens: int, N: int, K: int, cfg: GemmConfig, out_bytes: int, dev: Device,
                    groups: int) -> Estimate:
    """The cost model of a grouped GEMM at decode, ``tokens`` (T) rows in all: ``estimate`` of the
    ``active_groups(G, T)`` groups with rows, ``ceil(T / active)`` rows each (the groups without rows stream
    no weights; their CTAs exit after the search)."""
    active = active_groups(groups, tokens)
    return estimate(ceil_div(tokens, active), N, K, cfg, out_bytes, dev, active)


def decode_points(rows: MBucket, groups: int) -> tuple[int, ...]:
    """The totals T a grouped decode bucket (``rows``: rows per group, ``ceil(T / G)``) is planned over: the
    powers of two from 1 and the bucket's largest T, ``rows.hi * G`` (its least T is ``(rows.lo - 1) G + 1``)."""
    lo, hi = (rows.lo - 1) * groups + 1, rows.hi * groups
    return tuple(sorted({hi, lo} | {1 << i for i in range(hi.bit_length()) if lo <= 1 << i <= hi}))


def decode_candidates(M: int, N: int, K: int, dtype: str, groups: int) -> list[GemmConfig]:
    """The tilings a grouped decode bucket weighs: ``grouped_candidates`` and the small-M tilings with K
    split (``candidates``: 2..16 slices; a split-K grouped plan reduces through the workspace of the
    bucket's largest T, ``gemm_plan.plan``)."""
    split = [cfg for cfg in candidates(min(M, SMALL_M), N, K, dtype) if cfg.split_k > 1]
    return grouped_candidates(M, N, K, dtype, groups) + split


def choose_decode(rows: MBucket, N: int, K: int, dtype: str, layout: str, out_dtype: str, dev: Device,
                  groups: int) -> GemmConfig:
    """The tiling of a grouped decode bucket: ``choose_config``'s at the bucket's representative rows (the
    plan every grouped bucket had before the K split), unless one of ``decode_candidates`` (at the bucket's
    largest rows per group) that plans for the problem is predicted no slower at every total of
    ``decode_points`` (``decode_estimate``, within ``DECODE_TOLERANCE``) and faster on their geometric mean:
    then the fastest such on that mean. Why not the least worst regret against each point's best: a split
    that wins by 2x at one T and loses 5-8 % at another was chosen by it (Mixtral's down projection at 8-64
    tokens, the model's own figures), and a decode launch must never get slower for the split's sake.
    ``dev``: the GPU's model (``device_model``)."""
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    pool = []
    first = choose_config(rows.representative, N, K, dtype, layout, out_dtype, dev.sms, groups)
    for cfg in [first] + decode_candidates(rows.hi, N, K, dtype, groups):
        try:
            cfg.check()
            make_operands(rows.hi, N, K, layout, cfg)
        except ValueError:
            continue
        pool.append(cfg)
    if not pool or pool[0] is not first:
        return first
    points = decode_points(rows, groups)
    times = [[decode_estimate(t, N, K, cfg, ob, dev, groups).time_s for t in points] for cfg in pool]
    base = times[0]
    safe = [i for i, row in enumerate(times) if all(x <= b * (1 + DECODE_TOLERANCE) for x, b in zip(row, base))]
    return pool[min(safe, key=lambda i: (sum(math.log(x / b) for x, b in zip(times[i], base)), i))]


DECODE_TOLERANCE = 0.0
"""How much slower than the first plan ``choose_decode`` lets a candidate be predicted at any total: none."""


def replan_stages(cfg: GemmConfig, M: int, N: int, K: int, out_dtype: str = "f32", sms: int = H200_SMS) -> GemmConfig:
    """``cfg`` (a tiling given by hand) with the stage count the planner's rule gives it: of 2 to the
    deepest of ``PIPELINES``, each capped at the k-tiles (``fit_stages``), those whose shared memory
    fits, the least ``estimate`` (ties: deeper); ``cfg`` itself when none fits (``check`` says why)."""
    ob = 4 if _short_out(out_dtype) == "f32" else 2
    fits = [fit_stages(replace(cfg, stages=s), K) for s in range(max(s for _, s in PIPELINES), 1, -1)]
    fits = [c for c in fits if c.smem_bytes() <= 227 * 1024]
    if not fits:
        return cfg
    return min(fits, key=lambda c: estimate(M, N, K, c, ob, Device(sms=sms)).time_s)
