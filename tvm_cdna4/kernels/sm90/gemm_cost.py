"""The sm90 GEMM's cost model: an estimate of one config's time on a GPU, and the choice over candidates.

For a ``Sm90Config`` on problem (M, N, K) and a ``devices.DeviceSpec`` (the SM count, clock, HBM
bandwidth: ``kernels.devices``, never written here), the estimate in seconds is

    (compute^p + memory^p)^(1/p) + fill + epilogue        (p = ``OVERLAP``: they overlap, not wholly)

- compute: the persistent grid's busiest CTA, ``ceil(tiles / ctas)`` tiles, each ``block_m x block_n x
  k_tiles*64`` multiply-adds at ``TENSOR_FLOPS_PER_CLK`` flops per SM clock times the tile's
  efficiency: ``TENSOR_EFFICIENCY`` (issue and synchronization, fitted) times the share of the
  tensor rate that shared memory keeps up with: per k-tile the tensor cores need ``block_m block_n 64 2
  / TENSOR_FLOPS_PER_CLK`` clocks while shared memory, at ``SMEM_BYTES_PER_CLK``, takes the TMA's writes
  of both tiles and every wgmma's reads (each m64nNk16 reads its ``(64 + N) x 16`` elements), and at most
  ``N / WGMMA_FULL_N`` of it (a narrow wgmma does not reach the full rate), and one consumer warpgroup (no
  second one to hide its epilogue and waits) at ``ONE_CONSUMER`` of that;
- memory: A and B read once and C written once (the grouped tile order keeps the panels of one group
  in L2) at ``HBM_EFFICIENCY`` of the HBM bandwidth (a grid of fewer CTAs than SMs: ``few_ctas`` of that,
  ``(ctas / SMs)^FEW_CTAS``), or the busiest CTA's own bytes at ``SM_BYTES_PER_CLK`` when fewer CTAs than SMs
  stream (small M);
- fill: the first stage of every CTA before its first wgmma (the ring's latency);
- epilogue: the consumers store each tile's C from registers while the tensor cores wait, and every
  CTA reaches its epilogue at about the same time: the busiest CTA's tiles' C bytes, times the CTAs,
  at ``STORE_EFFICIENCY`` of the HBM bandwidth; with ``epilogue="tma"`` (the consumers write C into a
  shared staging buffer and go on while TMA stores drain it) ``STAGED_EPILOGUE`` of that.

With a K split (``split_k`` = S > 1; ``gemm_plan``'s docstring) the work units are the tiles times S, each
``ceil(k_tiles / S)`` k-tiles: compute and the busiest CTA's streamed bytes count its units, the C epilogue
its share of the tiles (``ceil(tiles / ctas)``, whoever gathers them; stored by every CTA, or where
``WEIGH_SPLIT_EPILOGUE`` by the ``min(tiles, ctas)`` that gather a tile), and a fourth term is added:

- reduction: the workspace traffic, every slice's f32 partial of C written and read back (``S M N 4`` bytes
  twice, as ``reduction="ordered"`` moves them; the chooser builds only ordered splits) at the loads' HBM rate,
  plus the tile's gather by one warpgroup's SM (``ceil(tiles / ctas)`` tiles of ``S block_m block_n 4`` bytes)
  at ``SM_BYTES_PER_CLK``, both at ``REDUCTION_EFFICIENCY`` of those rates: the last unit of a tile waits.

With the hybrid decomposition (``decomposition="hybrid"``: the full waves' tiles whole, the last wave's tiles
in ``split_k`` slices; ``gemm_plan``'s docstring) the busiest CTA runs its ``waves`` whole tiles, then
``ceil(rest S / ctas)`` slices of the ``rest`` split tiles; the C epilogue counts ``ceil(tiles / ctas)`` tiles
as before, and the reduction term is ``reduction`` of the split tiles only (``rest block_m`` rows of
``block_n``, ``ceil(rest / ctas)`` gathers a CTA): the same rates as split-K's, not fitted to a hybrid timing
yet (``benchmarks/sm90_sweep.py`` times the hybrid configs for that).

The choice (``decompositions``) weighs ``SPLITS`` for every candidate tile whose tiles leave SMs idle (fewer
tiles than SMs; a split of every tile of a full grid measured slower), and the same splits of the last wave
alone (hybrid) for a grid past a full wave whose last wave is partial; only those that leave every slice
``MIN_SLICE_TILES`` k-tiles and keep the workspace's offsets 32-bit (``splits``).

Rates marked *fitted* were fitted together (``benchmarks/sm90_fit.py``: a coordinate search for the least rms
log error) to 167 timings on an H100 SXM (2026-12-06): the 144 of ``benchmarks/sm90_sweep.py`` (M = 96, 200,
768 and 3000 on the twelve projections of Qwen2.5-7B, Gemma-2-9B and Phi-3-medium, the model's three first
configs each: 12 to 1,760 us; ``benchmarks/runs/sm90_sweep_h100_2026-12-06.json``), 13 of
``benchmarks/sm90_gemm.py`` (4096^3 at four tilings and the Llama-3-8B set) and 10 of its TMA epilogue
(``--study``). With the H100's ``DeviceSpec`` the estimate is within 6.5% rms of them (18% at worst), and of
each swept shape's three configs the one it ranks first is within 15% of the fastest (1.4% on geometric
mean; docs/sm90_gemm.md "Cost model"). The sm80 target's ``Device`` holds its fitted rates the same way. The
choice is over ``CANDIDATES`` and the shape's wave-fitting widths (``wave_widths``: the narrowest multiple of 8
whose tiles fill 1..``MAX_WAVES`` waves of the SMs; no term or rate is new for them), each with the deepest ring
that fits the SM's shared memory (at most ``MAX_STAGES``).

Swap AB (``Sm90Config.swap_ab``: C^T = B A^T, ``gemm_plan``'s docstring) is the estimate of the unswapped kernel over
C^T's problem (N, M, K), its tile's efficiency times ``SWAPPED_EFFICIENCY`` (at most the tensor rate). The choice
weighs the swapped configs (``swap_configs``: M as wgmma's N, with the K splits ``decompositions`` weighs for C^T's
tiles) at M up to ``TMA_BOX_MAX`` (``WEIGH_SWAP``). ``FEW_CTAS`` and ``SWAPPED_EFFICIENCY`` were fitted (the other
rates as above; ``benchmarks/sm90_fit.py --swap``) to those 167 timings and the 72 of ``benchmarks/sm90_sweep.py
--swap-ab`` on an H100 SXM (2026-12-06, ``benchmarks/runs/sm90_swap_ab_h100_2026-12-06d.json``: M = 32, 96, 200 on
the twelve projections, the model's unswapped choice and the best-estimated swapped config each, 13 to 174 us): at
these M the weights streamed at about 1.9-2.2 TB/s with 56-72 CTAs against 2.6-2.9 TB/s with all 132 SMs (what
``FEW_CTAS`` says), and the swapped tiles ran compute-bound shapes (the long-K down projections at M = 200) about
1.4x faster than the unswapped tile of C^T's shape is estimated to. With the H100's ``DeviceSpec`` the 72 estimates
are within 7.3% rms (14.3% at worst; the 167: 6.6%, from 6.5%), and of each of the 36 shapes' two kernels the model
ranks the faster first on 34 (tests/kernels/sm90/test_sm90_swap_cost.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import attrs

from ...errors import ContractError
from ..common import ceil_div
from ..gemm.grouped import expected_row_tiles
from . import gemm_order
from . import gemm_shift as SHIFT
from .gemm_plan import (ACC_REGS_MAX, BARRIER_BYTES, BLOCK_K, ELEMENT_BYTES, INT32_ELEMENTS, SWIZZLE_COLUMNS,
                        TMA_BOX_MAX, WGMMA_K, WGMMA_M, Sm90Config, block_k, cluster_units, loaded_box,
                        planned_loads, prefix_bytes)

TENSOR_FLOPS_PER_CLK = 4096
"""Dense f16/bf16 tensor flops per SM per clock on Hopper (2048 FMA: the NVIDIA H100 Tensor Core GPU
Architecture whitepaper, 4 tensor cores of 512 FP16 FMA per clock per SM)."""
TENSOR_RATE = {"f16": 1, "bf16": 1, "fp8": 2}
"""The dense tensor rate of an input dtype over f16/bf16's ``TENSOR_FLOPS_PER_CLK``: FP8 (e4m3/e5m2) is twice
FP16/BF16 (the NVIDIA H100 Tensor Core GPU Architecture whitepaper and the H100 datasheet: 1979 vs 989.5
TFLOP/s on the H100 SXM, both without sparsity). With fp8's 128-element K tile (the same 128 bytes a row) a k-tile takes the tensor
cores as many clocks as a 64-element f16/bf16 one and shared memory the same bytes: ``efficiency`` holds."""
SMEM_BYTES_PER_CLK = 128
"""Shared-memory bandwidth per SM per clock (32 banks of 4 bytes: the CUDA C++ Programming Guide)."""
SM_BYTES_PER_CLK = 77
"""What one SM pulls from L2/HBM per clock (fitted; bounds a small grid's streaming)."""
TENSOR_EFFICIENCY = 0.82
"""The share of the tensor rate (at the datasheet clock) a two-consumer tile keeps (fitted: the module
docstring)."""
STORE_EFFICIENCY = 0.31
"""The share of the HBM bandwidth the epilogue's stores reach when every CTA stores its tile at once
(fitted; direct 4-byte stores from registers, not overlapped with the next tile)."""
STAGED_EPILOGUE = 0.28
"""The share of that stall the TMA epilogue keeps (fitted: the consumers convert and write C into shared
memory, bank-conflict free, and wait only for the previous tile's stores, long drained)."""
ONE_CONSUMER = 0.98
"""The share of that a single consumer warpgroup keeps (fitted: nothing overlaps its epilogue)."""
HBM_EFFICIENCY = 0.80
"""The share of the datasheet HBM bandwidth the kernel's loads reach (fitted; the H100's measured read rate is
about 0.8 of its 3.35 TB/s)."""
OVERLAP = 3.6
"""How compute and memory overlap: the body is ``(compute^p + memory^p)^(1/p)`` (fitted; a large p is their
maximum, 1 their sum; ``None``: their maximum)."""
REDUCTION_EFFICIENCY = 0.61
"""The share of the rates of the reduction term (workspace at ``HBM_EFFICIENCY``, gather at ``SM_BYTES_PER_CLK``)
the K split's ordered reduction reaches: its slices wait for each other (fitted)."""
WGMMA_FULL_N = 128
"""The narrowest wgmma (m64nNk16) that runs at the full tensor rate: an N = 64 tile keeps half of it (fitted:
of 64, 80, 96, 112 and 128, the value that fits the timings best; 128x64 tiles measured 1.2-1.3x slower than
the shared-memory bound alone says)."""
FEW_CTAS = 0.12
"""How the loads' HBM rate falls with a grid of fewer CTAs than SMs (``few_ctas``: ``(ctas / SMs)^FEW_CTAS``; fitted
to the swap timings: the module docstring)."""
SWAPPED_EFFICIENCY = 1.4
"""The swapped tile's (``Sm90Config.swap_ab``) tensor efficiency over the unswapped tile's at C^T's shape (fitted
to the swap timings: the module docstring)."""
MAX_STAGES = 8
CANDIDATES = ((128, 256, 2), (256, 128, 2), (128, 224, 2), (128, 192, 2), (128, 160, 2), (128, 128, 2), (128, 64, 2),
              (64, 256, 1), (64, 128, 1), (64, 64, 1))
"""(block_m, block_n, consumers) the cost model weighs. 224 and 160 are the wave-friendly widths (docs/sm90_gemm.md
"Tile widths"): no term of the estimate is new for them (the tile efficiency's shared-memory share is 0.97 of
128x256's at 224, 0.87 at 160), and they win where ``ceil(tiles / SMs)`` tile-times of them are fewer column-waves
than of the 64-multiple widths (M = 3000, N = 3584: 16 x 24 tiles of 224, three waves, not 14 x 24 of 256,
2.55 waves run as three of 256)."""
WAVE_ROWS = ((128, 2), (64, 1))
"""The row tilings (block_m, consumers) ``wave_widths`` fits widths to: 128 rows with two consumer warpgroups, 64 with
one (``CANDIDATES``' two)."""
MAX_WAVES = 4
"""The most waves of tiles ``wave_widths`` fits a width to (``w = 1 .. MAX_WAVES``): past four, a wave more or less is
a quarter of the time or less, and the 64-multiple widths of ``CANDIDATES`` are as close."""
WEIGH_DEEP_WAVES = False
"""Whether ``wave_widths`` fits widths up to ``DEEP_MAX_WAVES`` waves, not ``MAX_WAVES``. Why: at M >= 768 on the H200
(stop 52, ``benchmarks/sm90_power.py``, ``benchmarks/sm90_widen.py``) our kernel's work per clock divided by its tiles'
useful share of the SM slots (the last wave's fill, M's padding) is flat (82-86 %), and the wide-N plans lose 4-10 %
to the tail (3000 x 14336 x 3584: 11 waves of 128x256, useful 0.904; 128x240 fills it to 0.964), widths the four-wave
limit never offers. Off: timed (stop 53, an H100, ``benchmarks/torch_gemm.py --deep-waves off,on``, 48 rows) on / off
1.00 / 1.00 / 1.01 / 1.00x at M = 768 / 1200 / 3000 / 8192: at the power limit a filled last wave buys no time."""
DEEP_MAX_WAVES = 16
"""``WEIGH_DEEP_WAVES``' most waves (the widths that fill 5..16 waves: the 128-row tiles of M = 768-3000 on 4-40k
columns)."""
WAVE_WIDTH_STEP = 8
"""The granularity of the wave-fitting widths: wgmma's N is any multiple of 8 up to 256 (PTX ISA 9.7.17.2), and the
register epilogue and the TMA epilogue's tail block (``gemm_plan.TAIL_SWIZZLE``) take any such width. cuBLAS's
H100 kernels tile the LLM projections by 168, 104, 72, 152 and 216 (multiples of 8, not of 16:
``benchmarks/runs/peer_kernels_h100_2026-12-06f.json``, docs/sm90_gemm.md "Tile widths")."""
WAVE_WIDTH_MIN = 64
"""The narrowest wave-fitting width (``CANDIDATES``' narrowest; below it a wgmma keeps under half the tensor rate,
``WGMMA_FULL_N``)."""


def wave_widths(M: int, N: int, sms: int) -> tuple:
    """The wave-fitting tiles (block_m, block_n, consumers) of (M, N) on ``sms`` SMs, beside ``CANDIDATES``: for each
    row tiling of ``WAVE_ROWS`` and each count of waves ``w = 1 .. MAX_WAVES``, the narrowest ``block_n`` (a multiple
    of ``WAVE_WIDTH_STEP`` in ``WAVE_WIDTH_MIN`` .. ``TMA_BOX_MAX``) whose ``ceil(M / block_m) ceil(N / block_n)``
    tiles fit in ``w sms``: at most ``w sms // ceil(M / block_m)`` column tiles, each ``ceil(N / cols)`` columns
    rounded up (M = 768, N = 3584, 132 SMs: 6 x 22 = 132 tiles of 168 columns, one wave; cuBLAS's ``168x128``).
    Those of ``CANDIDATES`` are left out; the estimate ranks the rest with them."""
    out = []
    for bm, consumers in WAVE_ROWS:
        rows = ceil_div(M, bm)
        for waves in range(1, (DEEP_MAX_WAVES if WEIGH_DEEP_WAVES else MAX_WAVES) + 1):
            cols = waves * sms // rows
            if cols < 1:
                continue
            bn = max(WAVE_WIDTH_MIN, ceil_div(ceil_div(N, cols), WAVE_WIDTH_STEP) * WAVE_WIDTH_STEP)
            tile = (bm, bn, consumers)
            if bn <= TMA_BOX_MAX and tile not in CANDIDATES and tile not in out:
                out.append(tile)
    return tuple(out)


SPLITS = (1, 2, 3, 4, 6, 8)
"""The K splits (``Sm90Config.split_k``) the cost model weighs for every candidate tile."""
MIN_SLICE_TILES = 64
"""The fewest k-tiles a K slice keeps (fitted, coarsely: on the H100, 2026-12-06, docs/sm90_gemm.md "Split-K",
splits of 28-40 k-tile slices, K = 3584-5120, ran 4-40% slower than no split; slices of 75-148 k-tiles of
K = 14336-18944 ran 4-26% faster)."""
WORKSPACE_BYTES = 4
"""An f32 partial sum of the workspace."""


@dataclass(frozen=True)
class Estimate:
    """The estimate's terms, seconds."""

    compute: float
    memory: float
    fill: float
    epilogue: float = 0.0
    reduction: float = 0.0
    zero_fill: float = 0.0

    @property
    def total(self) -> float:
        return overlap(self.compute, self.memory) + self.fill + self.epilogue + self.reduction + self.zero_fill

    def to_json(self) -> dict:
        out = {"us": round(self.total * 1e6, 3), "compute_us": round(self.compute * 1e6, 3),
               "memory_us": round(self.memory * 1e6, 3), "fill_us": round(self.fill * 1e6, 3),
               "epilogue_us": round(self.epilogue * 1e6, 3), "reduction_us": round(self.reduction * 1e6, 3)}
        return {**out, "zero_fill_us": round(self.zero_fill * 1e6, 3)} if self.zero_fill else out


def overlap(compute: float, memory: float) -> float:
    """The body of the estimate: ``(compute^p + memory^p)^(1/p)``, p = ``OVERLAP`` (``None``: their maximum)."""
    return max(compute, memory) if OVERLAP is None else (compute ** OVERLAP + memory ** OVERLAP) ** (1 / OVERLAP)


def efficiency(cfg: Sm90Config, bytes_per: int = 2) -> float:
    """The share of the SM's tensor rate one tile of ``cfg`` keeps (the module docstring)."""
    tensor_clk = cfg.block_m * cfg.block_n * BLOCK_K * 2 / TENSOR_FLOPS_PER_CLK
    reads = cfg.block_m // WGMMA_M * (BLOCK_K // WGMMA_K) * (WGMMA_M + cfg.block_n) * WGMMA_K * bytes_per
    smem_clk = (reads + cfg.stage_bytes(bytes_per)) / SMEM_BYTES_PER_CLK
    share = min(1.0, tensor_clk / smem_clk, cfg.block_n / WGMMA_FULL_N) * TENSOR_EFFICIENCY
    share *= ONE_CONSUMER if cfg.consumers == 1 else 1.0
    return min(1.0, share * SWAPPED_EFFICIENCY) if cfg.swap_ab else share


def estimate(cfg: Sm90Config, M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16",
             groups: int = 1) -> Estimate:
    """The estimate of ``cfg`` on (M, N, K) of ``dtype`` inputs on ``device`` (a ``devices.DeviceSpec``);
    ``groups`` > 1: a grouped GEMM's (``grouped_estimate``), whose weights ``groups N K`` are read once each.
    ``cfg.swap_ab``: the kernel's product C^T, (N, M, K) at ``SWAPPED_EFFICIENCY`` (``efficiency``)."""
    if cfg.swap_ab:
        M, N = N, M
    cm = cfg.cluster_m  # a cluster: tile rows (swapped: columns) and grid in whole clusters, a CTA streams its share
    tiles = cluster_units(ceil_div(M, cfg.block_m), ceil_div(N, cfg.block_n), cm, cfg.swap_ab)  # of the multicast tile
    cap = (cfg.ctas or device.units) // cm * cm
    whole = tiles // cap * cap if cfg.decomposition == "hybrid" else 0  # a hybrid's unsplit tiles: its full waves
    ctas = min(whole + (tiles - whole) * cfg.split_k, cap)
    waves = whole // ctas  # whole tiles per CTA (0 but in a hybrid)
    per_cta = ceil_div((tiles - whole) * cfg.split_k, ctas)  # the other work units (tiles without a split)
    per_tile = ceil_div(tiles, ctas)
    bytes_per, bk = ELEMENT_BYTES[dtype], block_k(dtype)
    k, k_whole = ceil_div(ceil_div(K, bk), cfg.split_k) * bk, ceil_div(K, bk) * bk
    flops_per_clk = TENSOR_FLOPS_PER_CLK * TENSOR_RATE[dtype]
    tile_s = cfg.block_m * cfg.block_n * k * 2 / (flops_per_clk * device.clock_hz * efficiency(cfg))
    moved = (M * K + groups * N * K) * bytes_per + M * N * out_bytes
    if gemm_order.WEIGH_ORDER and groups == 1 and cfg.split_k == 1:  # the order's A and B bytes (gemm_order)
        moved += gemm_order.order_bytes(cfg, M, N, K, ctas, device.l2_bytes, bytes_per) - (M + N) * K * bytes_per
    streamed = cfg.block_m + cfg.block_n - cfg.multicast_rows + max(cfg.shares)  # rows of A and B a CTA pulls from L2
    cta_bytes = per_cta * (streamed * k * bytes_per + cfg.block_m * cfg.block_n * out_bytes)
    compute = per_cta * tile_s
    if waves:  # a hybrid's full waves: whole tiles before the split ones
        compute += waves * tile_s * k_whole / k
        cta_bytes += waves * ((cfg.block_m + cfg.block_n) * k_whole * bytes_per + cfg.block_m * cfg.block_n * out_bytes)
    memory = max(moved / (device.hbm_bytes_s * HBM_EFFICIENCY * few_ctas(ctas, device)),
                 cta_bytes / (SM_BYTES_PER_CLK * device.clock_hz))
    fill = cfg.stage_bytes() * ctas / device.hbm_bytes_s
    storing = min(tiles, ctas) if WEIGH_SPLIT_EPILOGUE and cfg.decomposition == "split-k" else ctas  # C once a tile
    epilogue = per_tile * cfg.block_m * cfg.block_n * out_bytes * storing / (device.hbm_bytes_s * STORE_EFFICIENCY)
    split = (M, N, per_tile) if cfg.decomposition != "hybrid" else (  # a hybrid: only its split tiles' partials
        (tiles - whole) * cfg.block_m, cfg.block_n, ceil_div(tiles - whole, ctas))
    zero = zero_fill(cfg, M, N, k * bytes_per, compute, memory, per_cta + waves, device) if WEIGH_ZERO_FILL else 0.0
    return Estimate(compute, memory, fill, epilogue * (STAGED_EPILOGUE if cfg.epilogue == "tma" else 1.0),
                    reduction(cfg, *split, device), zero)


FILL_BYTES_PER_CLK = 16
"""The rate (bytes per SM clock) at which TMA zero-fills a box's rows past M (``zero_fill``; fitted: the least rms log
error of the torch op's H100 rows of 2026-12-07, ``runs/torch_gemm_partial_h100_2026-12-07c.json``, the ``finecut``
A/B's rows and the ``trim`` A/B's ``off`` rows, each plan rebuilt, that leaves the static 167 and 72 within noise:
``benchmarks/sm90_zero_fill.py``; 14-17 fit about as well)."""
WEIGH_ZERO_FILL = False
"""Whether the estimate weighs the zero fill of a partial tile (``zero_fill``); off: the plans it moves ran on / off
1.00x at M = 200 and 260, 1.01x at 300, 0.99x at 450, 1.00x at 600, 1.01x at 1200 (geo-means of the twelve
projections, rows 0.90-1.15x; H200, 2026-12-07, ``runs/torch_gemm_zerofill_h200_2026-12-07d.md``). What it weighs: the last tile row's A box (the tokens;
swapped, the B role's) runs past M, TMA zero-fills those rows every k-tile, and that costs time. Through the torch op on
an H100 (2026-12-07, ``runs/torch_gemm_partial_h100_2026-12-07c.md``) one plan, one grid, one k-loop ran slower the fewer
rows of its last tile row existed: Phi-3-medium o 128x120 (80 k-tiles) 51.8 us at M = 260 (124 rows of the last 128
zero-filled), 47.3 at 288, 40.2 at 320, 31.2 at 352, 31.3 at 384; per k-tile the partial row's CTAs took about 0.3 us
and 2.7 ns a zero-filled row, hidden under the k-tile's compute below some 32-48 rows. The weights' rows past N (the
last tile column) are not weighed: they cost nothing seen (Qwen2.5-7B QKV 128x112, 96 of them, ran M = 352 and 384 in
21.7 us as estimated without; the static 128x192 tiles at M = 768, 128 of them; counted alike, the torch rows' rms is
13.4 % at its best rate, 9.4 % without them): the weights' box waits on HBM, its fill inside that wait, where the tokens' comes from L2.
Off until the torch op's A/B (``benchmarks/torch_gemm.py --zero-fill off,on``)."""


def zero_rows(cfg: Sm90Config, M: int, N: int) -> int:
    """The rows past the tokens a stage of the last tile row zero-fills (the kernel's roles, ``estimate``'s M and N: the
    A box's rows past M, swapped the B box's past N, C^T's): its box ``block`` rows, or with ``trim_loads`` the least of
    ``gemm_boxes.trim_boxes`` that holds the rows that exist (``loaded_box``); none with ``shift_last`` past one tile
    (the box moved inside the tokens, ``gemm_shift``; where ``gemm_shift.shallow_only``, a ``shallow`` last tile only)."""
    rows, block = (N, cfg.block_n) if cfg.swap_ab else (M, cfg.block_m)
    exist = rows % block
    moved = cfg.shift_last and rows > block and (not SHIFT.shallow_only(cfg) or SHIFT.shallow(exist, block))
    return loaded_box(exist, block, cfg.trim_loads) - exist if exist and not moved else 0


def zero_fill(cfg: Sm90Config, M: int, N: int, row_bytes: int, compute: float, memory: float, units: int,
              device) -> float:
    """The zero fill's time (``WEIGH_ZERO_FILL``): the busiest CTA holds a tile of the last tile row, one of its ``units``
    work units, whose producer takes the longer of its share of ``memory`` and TMA's fill of ``zero_rows`` rows of
    ``row_bytes`` (a unit's K) at ``FILL_BYTES_PER_CLK`` (the fill runs while the loads are in flight: their sum, fitted,
    took the static 167's rms from 6.5 % to 8.4 %); that unit's body (``overlap`` of its share of ``compute`` and of that)
    over a whole unit's."""
    rows = zero_rows(cfg, M, N)
    if not rows:
        return 0.0
    c, m = compute / units, memory / units
    return overlap(c, max(m, rows * row_bytes / (FILL_BYTES_PER_CLK * device.clock_hz))) - overlap(c, m)


def few_ctas(ctas: int, device) -> float:
    """The share of the loads' HBM rate a grid of ``ctas`` persistent CTAs reaches: ``(ctas / SMs)^FEW_CTAS``
    below a full grid (fitted: the module docstring), 1 with every SM streaming."""
    return min(1.0, ctas / device.units) ** FEW_CTAS


def reduction(cfg: Sm90Config, M: int, N: int, per_tile: int, device) -> float:
    """The K split's reduction term (the module docstring), 0 without a split."""
    if cfg.split_k == 1:
        return 0.0
    workspace = 2 * cfg.split_k * M * N * WORKSPACE_BYTES / (device.hbm_bytes_s * HBM_EFFICIENCY)
    gather = per_tile * cfg.split_k * cfg.block_m * cfg.block_n * WORKSPACE_BYTES / (SM_BYTES_PER_CLK * device.clock_hz)
    return (workspace + gather) / REDUCTION_EFFICIENCY


def splits(M: int, N: int, K: int, dtype: str = "bf16", min_slice: int = MIN_SLICE_TILES) -> tuple:
    """The ``SPLITS`` the model weighs for (M, N, K): every slice ``min_slice`` (``MIN_SLICE_TILES``) k-tiles or
    more, every slice with k-tiles of its own, the workspace ``[split_k, M, N]`` within 32-bit offsets."""
    k_tiles = ceil_div(K, block_k(dtype))
    return tuple(s for s in SPLITS if s == 1 or (ceil_div(k_tiles, s) >= min_slice
                                                  and (s - 1) * ceil_div(k_tiles, s) < k_tiles
                                                  and s * M * N < INT32_ELEMENTS))


WEIGH_SPLIT_EPILOGUE = True
"""Whether the estimate and the choice take a K split's (``decomposition="split-k"``) epilogue as the kernel runs it
(``gemm_emit.split_store``): C stored once a tile, by the unit that gathers the tile's partials (``min(tiles, ctas)``
CTAs store, not every CTA: the epilogue term counted each tile ``split_k`` times), and from registers only (every
slice's partial leaves from registers whatever ``epilogue`` says; TMA stores serve the gathering unit's C alone while
their staging buffer costs ring stages: ``ranked`` leaves ``epilogue="tma"`` out of a split). Against the H100's static
timings (``python benchmarks/sm90_fit.py --split-epilogue``: the 167 and the wave sweeps of 2026-12-06) the eight split
tilings timed with both epilogues ran TMA / registers 0.96-1.18x (geo-mean 1.06x; 1.08-1.18x where TMA's staging left
a ring of 3 stages against 4: the 74-99 k-tile slices of the down projections at M = 200 and 768) while the estimate
had TMA 2-6 % faster; the term's count takes the 32 split timings' rms from 7.5 % to 6.7 %. On since the torch op's
A/B on an H100 (2026-12-07, ``benchmarks/torch_gemm.py --ms 400,1200 --split-epilogue off,on``,
``runs/torch_gemm_splitepi_h100_2026-12-07b.md``): the three bucket plans it moved ran 1.14x, 1.17x and 1.33x faster
(Qwen2.5-7B down at M = 400 and 1200, Gemma-2-9B down at 1200), the 21 it left alone 0.95-1.07x (noise); the plans it
moves: docs/sm90_gemm.md "Split-K"."""


WEIGH_HYBRID = False
"""Whether the choice weighs the hybrid decomposition (``decompositions``): no. Timed on the H100 (2026-12-06,
``benchmarks/sm90_sweep.py --ms 3000,768 --top 1``, 24 LLM projections): the best-ranked hybrid beat the model's
first config on 7 shapes by 1-5 % and lost on 17 by up to 34 % (benchmarks/RESULTS.md "sm90"); the model's
terms for it (the split-K reduction's fitted rates on the last wave's tiles) do not yet tell the 7 from the 17
(docs/sm90_gemm.md "Hybrid")."""


SPLIT_IN_ONE_WAVE = True
"""Whether a K split (``decompositions``) may make no more work units than SMs (``tiles x split_k <= SMs``): a split
exists to fill idle SMs, and one of more units than SMs leaves a partial second wave. Measured through the torch op on
an H100 (2026-12-07, ``runs/torch_gemm_swapone_h100_2026-12-07b.md`` / ``torch_gemm_final_h100_2026-12-07b.md``):
Qwen2.5-7B down's 17..32 bucket in 64x32 swapped tiles split 3 ways (56 x 3 = 168 units on 132 SMs) ran 64.6-64.8 us
where 64x64 split 2 ways (112 units) ran 53.3-55.7 (the estimate had them within 1 %); Phi-3-medium down's 33..64 in
64x64 swapped /k2 (160 units) 91.0 us against /k3 unswapped (240 units, 1.8 waves) 70.0. On since the torch op's A/B
on an H100 (2026-12-07, ``benchmarks/torch_gemm.py --ms 20,32,48 --projs down --split-one-wave off,on``,
``runs/torch_gemm_splitwave_h100_2026-12-07b.md``): the five bucket plans it moved ran 1.00-1.39x faster (Qwen2.5-7B
down at M = 20 / 32 1.26-1.28x, Phi-3-medium down at 48 1.39x), 1.00-1.01x cuBLAS after."""


def decompositions(tiles: int, sms: int, allowed: tuple, hybrid: bool | None = None) -> tuple:
    """(split_k, decomposition) pairs the model weighs for a grid of ``tiles`` on ``sms`` SMs (``allowed``: the
    ``splits``): unsplit always; every split of every tile while the tiles leave SMs idle (a split of a full
    grid, for its last wave, measured slower); past a full wave with a partial last one, every split of the last
    wave's tiles alone (``hybrid``: where ``hybrid`` is True, or None and ``WEIGH_HYBRID``)."""
    weigh = WEIGH_HYBRID if hybrid is None else hybrid
    split = tuple((s, "split-k") for s in allowed if s > 1 and (not SPLIT_IN_ONE_WAVE or tiles * s <= sms)) \
        if tiles < sms else ()
    hybrid = tuple((s, "hybrid") for s in allowed if s > 1) if weigh and tiles > sms and tiles % sms else ()
    return ((1, "data-parallel"), *split, *hybrid)


def deepest(block_m: int, block_n: int, consumers: int, smem_bytes: int, k_tiles: int,
            epilogue: str = "registers", epilogue_tile: int = 0) -> int:
    """The most ring stages that fit ``smem_bytes`` beside C's staging buffers (``epilogue="tma"``: the whole
    tile, or two chunks of ``epilogue_tile`` columns, ``Sm90Config.staging_bytes``), at most ``MAX_STAGES``,
    no more than the k-tiles of two tiles, at least 2."""
    cfg = Sm90Config(block_m, block_n, 2, consumers, epilogue=epilogue, epilogue_tile=epilogue_tile)
    room = smem_bytes - BARRIER_BYTES - cfg.staging_bytes()
    return max(2, min(MAX_STAGES, room // cfg.stage_bytes(), max(2, 2 * k_tiles)))


def epilogues(N: int, out_bytes: int, consumers: int) -> tuple:
    """The epilogues the model weighs for a C of ``N`` columns of ``out_bytes`` each: TMA stores need a 16-bit
    C whose rows are whole 16-byte chunks (``gemm_plan.plan``), and were timed with two consumer
    warpgroups only (one consumer keeps its stores from registers until a timing says otherwise)."""
    return ("registers", "tma") if out_bytes == 2 and N % 8 == 0 and consumers == 2 else ("registers",)


WEIGH_CLUSTER = False
"""Whether the choice (``ranked``) weighs clusters of two CTAs (``Sm90Config.cluster_m`` = 2, ``cluster_configs``): not
yet, unswapped or swapped (``swap_configs`` in clusters of two token tiles). The estimate's terms for a cluster
(``estimate``: the tile rows, swapped the tile columns, in pairs, the grid whole clusters, each CTA's L2-to-SM bytes of
the multicast tile its share, ``Sm90Config.shares``: B's, swapped the weights', the kernel's A role) are not fitted to a cluster's timing, and its HBM term already counts A
and B read once (the excess a cluster removes, about 2x the floor at 4096^3 in an ncu profile, is not in it): timed on an H100 with
``benchmarks/sm90_clusters.py`` first (docs/sm90_gemm.md "Clusters")."""


def cluster_configs(cfg: Sm90Config) -> tuple:
    """``cfg`` in a cluster of two (``cluster_m`` = 2) where ``Sm90Config.check`` allows it (data-parallel, each CTA's
    share of the multicast box whole 8-row atoms, ``Sm90Config.shares``; a cluster takes no more shared memory), else
    none."""
    two = attrs.evolve(cfg, cluster_m=2)
    try:
        two.check(10 ** 9)  # the shared memory is cfg's own: only the cluster's rules here
    except ContractError:
        return ()
    return (two,)


def ordered(cfg: Sm90Config, M: int, N: int, K: int, device, dtype: str = "bf16") -> Sm90Config:
    """``cfg`` in its ``gemm_order.best_order`` on ``device``'s grid and L2 where ``gemm_order.WEIGH_ORDER``, else as
    it is (``group_m`` 8, ``raster`` "m")."""
    if not gemm_order.WEIGH_ORDER:
        return cfg
    rows, cols = (N, M) if cfg.swap_ab else (M, N)
    cm = cfg.cluster_m  # the grid of estimate's: whole clusters
    ctas = min(cluster_units(ceil_div(rows, cfg.block_m), ceil_div(cols, cfg.block_n), cm, cfg.swap_ab),
               (cfg.ctas or device.units) // cm * cm)
    return gemm_order.best_order(cfg, rows, cols, K, ctas, device.l2_bytes, ELEMENT_BYTES[dtype])


def ranked(M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16",
           min_slice: int = MIN_SLICE_TILES, hybrid: bool | None = None,
           swap: bool | None = None, cluster: bool | None = None) -> list[tuple[float, Sm90Config]]:
    """Every candidate config (``CANDIDATES`` and the ``wave_widths`` of (M, N); the deepest ring) with every epilogue C allows (``epilogues``) and every K split
    ``decompositions`` weighs (``splits`` with slices of ``min_slice`` k-tiles or more; the hybrid where
    ``hybrid``, default ``WEIGH_HYBRID``), the swapped ones where ``swap`` (default ``WEIGH_SWAP``) and M is at most
    ``TMA_BOX_MAX`` (``swap_configs``), the clustered ones where ``cluster`` (default ``WEIGH_CLUSTER``:
    ``cluster_configs``), and its estimate, best first (ties: the larger tile, then the fewer slices, then the
    unclustered)."""
    out, k_tiles = [], ceil_div(K, block_k(dtype))
    tiles = CANDIDATES + wave_widths(M, N, device.units)
    for (bm, bn, consumers), how in ((c, how) for c in tiles for how in epilogues(N, out_bytes, c[2])):
        for split, way in decompositions(ceil_div(M, bm) * ceil_div(N, bn), device.units, splits(M, N, K, dtype, min_slice),
                                         hybrid):
            if how == "tma" and way == "split-k" and WEIGH_SPLIT_EPILOGUE:
                continue  # a split's partials leave from registers: TMA stores serve only the gathering unit
            stages = deepest(bm, bn, consumers, device.smem_per_unit, ceil_div(k_tiles, split), how)
            cfg = ordered(Sm90Config(bm, bn, stages, consumers, epilogue=how, split_k=split, decomposition=way),
                          M, N, K, device, dtype)
            clustered = cluster_configs(cfg) if (WEIGH_CLUSTER if cluster is None else cluster) else ()
            for c in (cfg, *(ordered(two, M, N, K, device, dtype) for two in clustered)):
                c = planned_loads(c)  # the loads the kernel will run: trimmed where TRIM_LOADS (no zero fill)
                out.append((estimate(c, M, N, K, out_bytes, device, dtype).total, -bm * bn, split, c))
    if (WEIGH_SWAP if swap is None else swap) and M <= TMA_BOX_MAX:
        weigh = WEIGH_CLUSTER if cluster is None else cluster  # the swapped ones in clusters of two token tiles too
        out += [(estimate(c, M, N, K, out_bytes, device, dtype).total, -c.block_m * c.block_n, c.split_k, c)
                for cfg in swap_configs(M, N, K, device, dtype, splits(M, N, K, dtype, min_slice))
                for c in map(planned_loads, (cfg, *(cluster_configs(cfg) if weigh else ())))]
    out.sort(key=lambda x: x[:3])
    return [(t, cfg) for t, _, _, cfg in out]


def grouped_estimate(cfg: Sm90Config, rows: int, groups: int, N: int, K: int, out_bytes: int, device,
                     dtype: str = "bf16") -> Estimate:
    """A grouped GEMM's estimate (``kernels.sm90.grouped_plan``): ``estimate`` of the row tiles ``groups`` groups
    of ``rows`` rows fill (``kernels.gemm.grouped.expected_row_tiles`` each: a group's last tile is half empty on
    average), every group's weights read once. The ``gaps`` walk (``Sm90Config.tile_walk``) counts its launched row
    tiles instead (``Groups.row_tiles``: ``rows / block_m + 1`` a group): its gap units cluster at the groups' edges,
    so the busiest CTA's share is of them all (docs/grouped_gemm.md, "The walk over the row tiles"). A one-consumer
    tile's compute at ``GROUPED_ONE_CONSUMER`` of the dense estimate's rate. With
    ``epilogue="tma"`` only the tiles wholly inside their group store through TMA (``STAGED_EPILOGUE``); a group's
    last tile (one of ``expected_row_tiles``) stores from registers at the full stall."""
    per_group = expected_row_tiles(rows, cfg.block_m)
    walked = per_group if cfg.tile_walk != "gaps" else rows / cfg.block_m + 1
    est = estimate(cfg, math.ceil(groups * walked) * cfg.block_m, N, K, out_bytes, device, dtype, groups)
    if cfg.consumers == 1:
        est = replace(est, compute=est.compute / GROUPED_ONE_CONSUMER)
    if cfg.epilogue != "tma":
        return est
    last = 1 / per_group
    return replace(est, epilogue=est.epilogue / STAGED_EPILOGUE * (last + (1 - last) * STAGED_EPILOGUE))


GROUPED_ONE_CONSUMER = 0.65
"""The share of ``efficiency``'s compute rate a one-consumer tile of the grouped kernel keeps (fitted: the least rms
log error of the estimates within each shape, the per-shape bias removed, over the prefix-walk configs of
``benchmarks/runs/grouped_sm90_walks_h100_2026-12-06g.json``, an H100 of 2026-12-06; 0.60-0.92 rank the same).
At the Qwen3-30B-A3B prefill (128 rows per group) a 64-row one-consumer unit took 0.68-0.76x a 128x256
two-consumer unit's time for half its rows, the dense estimate's 0.64x: 128x256 ran 2 % (gate/up) and 11 % (down)
faster than the 64-row tiles the model had first. The dense fit's ``ONE_CONSUMER`` is left as it is
(docs/grouped_gemm.md, "The estimate against the walks run")."""
GROUPED_WALK = "prefix"
"""The walk over the row tiles the grouped configs take (``Sm90Config.tile_walk``): the prefix walk, whose CTAs share
the units with rows evenly (the ``gaps`` walk gave the busiest CTA 0-13 % more units on the H100 prefill plans of
2026-12-06, up to 23 % on the sweep's other tilings: docs/grouped_gemm.md, "The walk over the row tiles"), where
its words leave room for the tile's two-stage ring (``grouped_walk``). ``"windows"`` (the prefix walk, each group's
units in windows of their own: docs/grouped_gemm.md) is opt-in: timed (stop 53, an
H100, ``gpu_stop45.sh grpbig``) on Mixtral prefill at 0.99x ``_grouped_mm`` against the prefix walk's 0.98 / 1.00x in
the runs around it."""
GROUPED_EPILOGUE_TILES = (0, 64)
"""The ``epilogue_tile`` values the grouped choice weighs with TMA stores (0: the whole tile staged; 64: chunks
of 64 columns through two buffers, which frees ring stages: ``Sm90Config.epilogue_tile``)."""


def grouped_configs(K: int, N: int, out_bytes: int, device, dtype: str = "bf16", groups: int = 1) -> list[Sm90Config]:
    """The configs the grouped kernel may run (``grouped_plan.check_grouped_config``): the ``CANDIDATES`` with each
    epilogue C allows (``epilogues``; TMA stores staged whole or in ``GROUPED_EPILOGUE_TILES`` chunks that divide
    the tile), the deepest ring beside the staging and the prefix walk's words of ``groups`` groups
    (``tile_walk="prefix"``, ``gemm_plan.prefix_bytes``), the cooperative schedule, no K split; tiles of whole
    ``SWIZZLE_COLUMNS`` blocks only (the grouped kernel's TMA epilogue has no tail map, ``grouped_plan``)."""
    k_tiles, out = ceil_div(K, block_k(dtype)), []
    for bm, bn, consumers in (c for c in CANDIDATES if c[1] % SWIZZLE_COLUMNS == 0):
        for how in epilogues(N, out_bytes, consumers):
            for tile in (GROUPED_EPILOGUE_TILES if how == "tma" else (0,)):
                if tile and (bn % tile or tile >= bn):
                    continue
                walk = grouped_walk(Sm90Config(bm, bn, 2, consumers, epilogue=how, epilogue_tile=tile), groups,
                                    device.smem_per_unit)
                stages = deepest(bm, bn, consumers, device.smem_per_unit - prefix_bytes(groups, walk), k_tiles, how,
                                 tile)
                out.append(Sm90Config(bm, bn, stages, consumers, epilogue=how, epilogue_tile=tile, tile_walk=walk))
    return out


def grouped_walk(two_stages: Sm90Config, groups: int, smem_bytes: int) -> str:
    """``GROUPED_WALK``, or ``gaps`` where the prefix walk's words of ``groups`` groups (``gemm_plan.prefix_bytes``)
    leave no room for ``two_stages``' ring of two stages and C's staging (some 25000 groups: the gaps walk keeps
    nothing in shared memory)."""
    try:  # Sm90Config.check's room: the ring beside C's staging and the barriers
        two_stages.check(smem_bytes - prefix_bytes(groups, GROUPED_WALK))
    except ContractError:
        return "gaps"
    return GROUPED_WALK


def grouped_ranked(rows: int, groups: int, N: int, K: int, out_bytes: int, device,
                   dtype: str = "bf16") -> list[tuple[float, Sm90Config]]:
    """Every ``grouped_configs`` config and its ``grouped_estimate`` at ``rows`` rows per group, best first (ties:
    the larger tile, then the deeper ring)."""
    out = [(grouped_estimate(cfg, rows, groups, N, K, out_bytes, device, dtype).total, -cfg.block_m * cfg.block_n,
            -cfg.stages, i, cfg) for i, cfg in enumerate(grouped_configs(K, N, out_bytes, device, dtype, groups))]
    out.sort(key=lambda x: x[:4])
    return [(t, cfg) for t, *_, cfg in out]


def choose_grouped(rows: int, groups: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16",
                   hi: int | None = None) -> Sm90Config:
    """The grouped kernel's tile at ``rows`` rows per group (``grouped_ranked``'s first), or, with ``hi``, for a
    bucket serving ``rows .. hi`` rows per group: the minimax regret over ``range_samples`` (``choose_for_range``'s
    rule; ties: the better estimate at ``hi``, then the deeper ring)."""
    if hi is None or hi <= rows:
        return grouped_ranked(rows, groups, N, K, out_bytes, device, dtype)[0][1]
    samples = range_samples(rows, hi)
    best = {r: grouped_ranked(r, groups, N, K, out_bytes, device, dtype)[0][0] for r in samples}

    def regret(cfg: Sm90Config) -> tuple[float, float, int]:
        worst = max(grouped_estimate(cfg, r, groups, N, K, out_bytes, device, dtype).total / best[r] for r in samples)
        return round(worst, 9), round(grouped_estimate(cfg, hi, groups, N, K, out_bytes, device, dtype).total, 12), -cfg.stages

    return min(grouped_configs(K, N, out_bytes, device, dtype, groups), key=regret)


def choose_config(M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16") -> Sm90Config:
    """The cost model's choice for (M, N, K) of ``dtype`` inputs on ``device``."""
    return ranked(M, N, K, out_bytes, device, dtype)[0][1]


SWAP_AB_ROWS = (64, 128)
"""The rows of N one consumer warpgroup owns in a swapped tile (``Sm90Config.swap_ab``): one or two m64 wgmmas."""


SWAP_SPLIT_ACC_MAX = 96
"""The most f32 accumulators per consumer thread of a swapped tile the choice splits K for: ptxas (CUDA 13.0,
``sm_90a``) spills 172 bytes in the dynamic-M 64x256 swapped split (128 accumulators, the partials' and the
gather's addresses beside them), none at 64x192 (96) nor in the unsplit 64x256."""
WEIGH_SWAP = True
"""Whether the choice (``ranked``) weighs the swapped kernel (``swap_configs``) at M up to ``TMA_BOX_MAX``: yes since
its terms were fitted to the H100's swap timings (the module docstring); past one wgmma N of M no timing says."""
WEIGH_SWAP_DYNAMIC = True
"""Whether ``choose_for_range`` (a dynamic-M bucket's kernel: the torch op's) weighs the swapped kernel: yes, in the
buckets up to ``SWAP_DYNAMIC_MAX_M`` and in one tile of M (``SWAP_M_TILES``), since the torch op's A/B on an H100
(2026-12-07, ``benchmarks/torch_gemm.py --ms 20,48,80,112,160,240 --swap-dynamic off,on``,
``runs/torch_gemm_swapone_h100_2026-12-07b.md``; with the pair store and ``SWAP_PANEL_ADJACENT``): on / off geo-mean
1.10x at M = 20, 0.98x at 48, 1.12x at 80, 1.01x at 112 (the o and QKV rows 1.13-1.28x at 20 and 80; the losses are a
down projection's other K split, 0.77-0.86x), 0.97x at 160 and 0.99x at 240 (the 64x192 / 64x256 one-tile swaps
0.78-0.93x on QKV and gate_up). Before (stop 44 to 49, off): timed
through ``tvm_cdna4.torch.gemm`` on an H100 (2026-12-06, stop 44, ``benchmarks/runs/torch_gemm_swap_widths_small_h100_2026-12-06e.md``),
the buckets' swapped plans ran M = 96 at 0.87x cuBLAS (geo-mean of the twelve projections; 0.93x unswapped the
call before) and M = 200 at 0.73x (0.82x): a bucket's ``block_n`` is chosen over its range, so at the range's top
64x72 takes two tiles of M (the weights streamed twice: 0.57x on the o projections), and the 64x256 kernel at M =
200 ran 1.6x the static 64x200's time (not what the static timings the terms are fitted to say); M = 32 about even
(0.94x, 0.93x). Static M keeps ``WEIGH_SWAP``. Where on, a bucket weighs the swapped tiles of ``swap_widths``: its
largest M in one tile or in up to ``SWAP_M_TILES`` tiles (cuBLAS's 3 x 72 / 2 x 104 at M = 200); untimed, off until
``benchmarks/torch_gemm.py --swap-dynamic off,on`` on a GPU says (docs/sm90_gemm.md "Swap AB")."""


SWAP_PANEL_ADJACENT = True
"""Whether a swapped dynamic-M plan (``range_candidates``' swapped configs) walks its tiles with ``raster="n"``: the
token tiles (C^T's tile columns) of one weight panel on adjacent CTAs (``pid``, ``pid + 1``, ...: ``Sm90Plan.tile_of``), as
every unswapped small-M bucket plan has them (at M <= 8 tile rows, ``group_m`` 8 holds all of a weight panel's row
tiles), not ``group_m`` (8) CTAs apart (``raster="m"``). Why (stop 49, swapmulti; CPU only): the swapped bucket plans of
several token tiles ran 1.16-1.72x their estimate at M = 200 while their SASS a k-tile equals the static plans' (no
run-time M in the loops, no spills) and their modelled DRAM bytes are the same in either order (one wave); Gemma-2-9B
QKV's 193..256 bucket ran 128x128 two consumers unswapped in 28.5 us and swapped in 38.0 (2026-12-07): the same 128 CTAs,
tile, panels and sharing (a weight panel read by 2 CTAs, a token panel by 64), but the weight panel's readers 1 against
8 CTAs apart (and the C^T store, 1-3 us of it). The order leaves a one-token-tile plan's walk as it was (the same tiles
a CTA; docs/sm90_gemm.md "The walk of several token tiles"); untimed: ``benchmarks/torch_gemm.py --swap-dynamic on
--swap-order off,on`` (``bash benchmarks/gpu_stop45.sh swaporder``)."""

SWAP_DYNAMIC_MAX_M = 128
"""The largest bucket top (M) whose dynamic-M plan weighs the swapped kernel where ``WEIGH_SWAP_DYNAMIC`` (the A/B in its
docstring: swapped one-tile buckets won to 1..128 and lost at 129..192 and 193..256); past it only
``WEIGH_SWAP_NARROW``'s parts weigh it (``swap_weighed``)."""

WEIGH_SWAP_NARROW = True
"""Whether the dynamic-M buckets past ``SWAP_DYNAMIC_MAX_M`` up to ``SWAP_NARROW_MAX_M`` are cut into parts of
``SWAP_NARROW_ROWS`` rows where such a part's plan is swapped (``gemm_dynamic.narrowed``; ``swap_weighed``): one
token tile whose wgmma N is the part's top, near every M it serves. Why (stop 53, swap200; CPU only): at M = 200 the
static one-tile swap 64x200 ran 1.04-1.18x the bucket plans on four of five rows (H100, 2026-12-07,
``runs/sm90_peers_m200_h100_2026-12-07b.md``) where the swapped 193..256 bucket (64x256) ran 0.97-0.99x the unswapped
ones at M = 160 / 240; the two kernels' SASS differ in N alone (the same k-loop, 232 registers, no spills, the same
grid; the dynamic epilogue's predicates +121 instructions a thread): wgmma N 256 for 200 tokens and 56 of the token
box's 256 rows zero-filled each k-tile, the estimate 1.14-1.22x the static's. Timed (stop 53, an H100, ``bash
benchmarks/gpu_stop45.sh swap200``: ``benchmarks/torch_gemm.py --ms 160,200,240,256 --projs qkv,o,down --swap-narrow off,on``, 36 rows exact,
``runs/torch_gemm_swapnarrow_h100_2026-12-07e.md``): on / off geo-mean 1.11x at M = 160 (0.96-1.39x), 1.07x at 200
(0.92-1.32x), 0.98x at 240 and 256, where the one row it moved (Phi-3-medium QKV, 64x240 / 64x256 swapped) lost 0.89 /
0.92x: on, to ``SWAP_NARROW_MAX_M``."""

SWAP_NARROW_MAX_M = 208
"""The largest M ``WEIGH_SWAP_NARROW`` cuts into swapped parts: the top of the last part its timing won (193..208; the
parts past it moved one row, which lost: ``WEIGH_SWAP_NARROW``'s docstring)."""

SWAP_NARROW_ROWS = 16
"""The rows of ``WEIGH_SWAP_NARROW``'s parts (cut at multiples of it): a part's wgmma N at most this many columns past
its smallest M (193..208: N 208 at M = 200), a kernel built per part used."""


def swap_weighed(lo: int, hi: int) -> bool:
    """Whether a dynamic-M range ``lo..hi`` weighs the swapped kernel (``range_candidates``): where
    ``WEIGH_SWAP_DYNAMIC``, up to ``SWAP_DYNAMIC_MAX_M``, and past it up to ``SWAP_NARROW_MAX_M`` a range of at most
    ``SWAP_NARROW_ROWS`` rows where ``WEIGH_SWAP_NARROW``."""
    if not WEIGH_SWAP_DYNAMIC or hi > TMA_BOX_MAX:
        return False
    return hi <= SWAP_DYNAMIC_MAX_M or (WEIGH_SWAP_NARROW and hi - lo < SWAP_NARROW_ROWS and hi <= SWAP_NARROW_MAX_M)


SWAP_M_TILES = 1
"""The most column tiles of C^T (tiles of M, ``ceil(M / block_n)``) a swapped dynamic-M plan takes at its bucket's
largest M (``swap_widths``; ``choose_for_range`` with ``WEIGH_SWAP_DYNAMIC``): cuBLAS's H100 kernels run M = 200
swapped in 3 x 72 or 2 x 104 columns of tokens (``128x72``, ``128x104``, ``192x104``:
``benchmarks/runs/peer_kernels_h100_2026-12-06f.json``), and 72 columns take 193..256 in three or four. 1 (since stop
50): every M of the bucket in one tile (the rule of stop 44). Timed through the torch op on an H100 with
``WEIGH_SWAP_DYNAMIC`` on (2026-12-07, with the pair store and ``SWAP_PANEL_ADJACENT``:
``runs/torch_gemm_swapstore_h100_2026-12-07b.md``): the one-tile swapped buckets at M = 96 ran 1.00-1.13x the
unswapped ones (geo 1.04x, 8 rows), the several-tile ones at M = 200 0.70-0.96x (geo 0.87x)."""


def round8(n: int) -> int:
    """``n`` rounded up to whole ``WAVE_WIDTH_STEP`` columns (wgmma's N: PTX ISA 9.7.17.2)."""
    return ceil_div(n, WAVE_WIDTH_STEP) * WAVE_WIDTH_STEP


def swap_widths(lo: int, hi: int) -> tuple[int, ...]:
    """The swapped tiles' widths (``block_n``: columns of M) a dynamic-M bucket of ``lo..hi`` weighs, widest first: the
    one tile of ``hi`` (``round_up(hi, 8)``, at most ``TMA_BOX_MAX``), and for each ``range_samples`` M and ``t`` = 2 ..
    ``SWAP_M_TILES`` tiles of it ``round_up(ceil(M / t), 8)``, each at least ``WAVE_WIDTH_MIN`` (a narrower tile of
    several: 64x72 at M = 96 streamed the weights twice at 0.57x cuBLAS) and taking ``hi`` in at most
    ``SWAP_M_TILES`` tiles (193..256: 256, 104-128 in two, 72-88 in three, 64 in four)."""
    out = {min(round8(hi), TMA_BOX_MAX)}
    for m in range_samples(lo, hi):
        out.update(w for t in range(2, SWAP_M_TILES + 1) if WAVE_WIDTH_MIN <= (w := round8(ceil_div(m, t))) <= TMA_BOX_MAX
                   and ceil_div(hi, w) <= SWAP_M_TILES)
    return tuple(sorted(out, reverse=True))


def swap_configs(M: int, N: int, K: int, device, dtype: str = "bf16", allowed: tuple = (1,),
                 widths: tuple = ()) -> list[Sm90Config]:
    """The swapped configs (``Sm90Config.swap_ab``: ``block_n = round_up(M, 8)`` up to ``TMA_BOX_MAX`` over M, or each
    of ``widths`` (a bucket's ``swap_widths``), ``block_m`` = ``SWAP_AB_ROWS`` rows of N per consumer warpgroup, one or
    two consumers, accumulators within ``ACC_REGS_MAX``, the deepest ring), each with the K splits of ``allowed`` that
    ``decompositions`` weighs for C^T's tiles at M (split-K only; with at most ``SWAP_SPLIT_ACC_MAX`` accumulators)."""
    k_tiles, out = ceil_div(K, block_k(dtype)), []
    for bn in widths or (min(round8(M), TMA_BOX_MAX),):
        for consumers in (1, 2):
            for rows in SWAP_AB_ROWS:
                acc = rows // WGMMA_M * bn // 2
                if acc > ACC_REGS_MAX:
                    continue
                tiles = ceil_div(N, rows * consumers) * ceil_div(M, bn)
                for split, way in decompositions(tiles, device.units, allowed if acc <= SWAP_SPLIT_ACC_MAX else (1,),
                                                 False):
                    stages = deepest(rows * consumers, bn, consumers, device.smem_per_unit, ceil_div(k_tiles, split))
                    out.append(Sm90Config(rows * consumers, bn, stages, consumers, split_k=split, decomposition=way,
                                          swap_ab=True))
    return out


def swap_ab_ranked(M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16") -> list[tuple[float, Sm90Config]]:
    """The unsplit ``swap_configs`` and their estimates, best first (ties: the larger tile): what ``--swap-ab`` and
    ``benchmarks/sm90_sweep.py --swap-ab`` ask for."""
    out = [(estimate(cfg, M, N, K, out_bytes, device, dtype).total, -cfg.block_m, cfg)
           for cfg in swap_configs(M, N, K, device, dtype)]
    out.sort(key=lambda x: x[:2])
    return [(t, cfg) for t, _, cfg in out]


def swap_ab_config(M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16") -> Sm90Config:
    """The best-estimated swapped config (``swap_ab_ranked``)."""
    return swap_ab_ranked(M, N, K, out_bytes, device, dtype)[0][1]


RANGE_SAMPLES = 5
"""The M values ``choose_for_range`` weighs a range of M at: its ends and the points between them spaced
evenly on a log scale."""


def range_samples(lo: int, hi: int) -> tuple[int, ...]:
    """``RANGE_SAMPLES`` values of M from ``lo`` to ``hi`` (both included), evenly spaced on a log scale."""
    steps = RANGE_SAMPLES - 1
    return tuple(sorted({lo, hi, *(round(lo * (hi / lo) ** (i / steps)) for i in range(1, steps))}))


def range_candidates(lo: int, hi: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16",
                     m_max: int | None = None) -> tuple[tuple[int, ...], dict, dict]:
    """What ``choose_for_range`` weighs for ``lo..hi``: its ``range_samples``, each sample's ``ranked`` (the swapped
    configs of one tile of M among them where ``swap_weighed``) and the candidate configs (a dict as an ordered
    set): every unswapped config ranked at a sample whose K split keeps the workspace's offsets 32-bit at ``m_max``
    (default ``hi``; ``splits``), and where ``swap_weighed`` the swapped ones of the bucket's ``swap_widths`` (each
    sample's ``swap_configs`` of them with those splits; ``raster="n"`` where ``SWAP_PANEL_ADJACENT``)."""
    samples, swap = range_samples(lo, hi), swap_weighed(lo, hi)
    rankings = {m: ranked(m, N, K, out_bytes, device, dtype, swap=None if swap else False) for m in samples}
    allowed = set(splits(m_max or hi, N, K, dtype))
    configs = {cfg: None for r in rankings.values() for _, cfg in r if cfg.split_k in allowed and not cfg.swap_ab}
    if swap:
        widths = swap_widths(lo, hi)
        for m in samples:
            swapped = swap_configs(m, N, K, device, dtype, tuple(s for s in splits(m, N, K, dtype) if s in allowed), widths)
            configs.update(dict.fromkeys(planned_loads(attrs.evolve(c, raster="n") if SWAP_PANEL_ADJACENT else c)
                                         for c in swapped))
    return samples, rankings, configs


def choose_for_range(lo: int, hi: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16",
                     m_max: int | None = None) -> Sm90Config:
    """The config one kernel serving every M in ``lo..hi`` runs (a dynamic-M bucket): the one whose worst
    loss against the best config of each M (its estimate over the best estimate, at ``range_samples``) is
    least: the minimax regret over the range, so that no M of the range pays much for sharing the kernel
    (the choice at the range's largest M alone leaves the smaller M with too many idle SMs or a second wave:
    by the model up to 2.5x slower at M = 257 of a 257..1024 bucket). The candidates are ``range_candidates``':
    every unswapped config ``ranked`` weighs at a sample, a K split (split-K or hybrid) only where it keeps its
    workspace's offsets 32-bit at ``m_max`` (the largest M the kernel serves, its workspace's rows: a dynamic
    bucket's; default ``hi``; ``splits``), and where ``WEIGH_SWAP_DYNAMIC`` the swapped tiles of ``swap_widths``
    (``hi`` in one tile, or in up to ``SWAP_M_TILES`` tiles of ``WAVE_WIDTH_MIN`` columns or more). Ties: the
    better estimate at ``hi``."""
    return range_choice(lo, hi, N, K, out_bytes, device, dtype, m_max)[0]


def range_choice(lo: int, hi: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16",
                 m_max: int | None = None) -> tuple[Sm90Config, float]:
    """``choose_for_range``'s config and its worst loss over the range (its estimate over each sample M's best
    estimate, the largest: 1.0 where one config is the best at every sample)."""
    samples, rankings, configs = range_candidates(lo, hi, N, K, out_bytes, device, dtype, m_max)

    def regret(cfg: Sm90Config) -> tuple[float, float]:
        worst = max(estimate(cfg, m, N, K, out_bytes, device, dtype).total / rankings[m][0][0] for m in samples)
        return round(worst, 9), estimate(cfg, hi, N, K, out_bytes, device, dtype).total

    best = min(configs, key=regret)
    return best, regret(best)[0]


__all__ = ["CANDIDATES", "MIN_SLICE_TILES", "RANGE_SAMPLES", "SPLITS", "STAGED_EPILOGUE", "STORE_EFFICIENCY", "TENSOR_EFFICIENCY",
           "TENSOR_RATE", "WEIGH_CLUSTER", "WEIGH_HYBRID", "WEIGH_SPLIT_EPILOGUE", "cluster_configs", "MAX_WAVES", "WEIGH_DEEP_WAVES", "DEEP_MAX_WAVES", "WAVE_ROWS", "WAVE_WIDTH_MIN", "WAVE_WIDTH_STEP", "wave_widths", "Estimate", "choose_config", "choose_for_range", "choose_grouped", "decompositions", "grouped_configs",
           "grouped_estimate", "grouped_ranked", "GROUPED_EPILOGUE_TILES", "GROUPED_ONE_CONSUMER", "deepest", "efficiency", "epilogues", "estimate", "GROUPED_WALK", "grouped_walk",
           "range_candidates", "range_choice", "range_samples", "ranked", "round8", "swap_widths", "SWAP_M_TILES", "SWAP_DYNAMIC_MAX_M", "SWAP_NARROW_MAX_M", "SWAP_NARROW_ROWS", "WEIGH_SWAP_NARROW", "swap_weighed", "SPLIT_IN_ONE_WAVE", "reduction", "splits", "SWAP_AB_ROWS", "swap_ab_config", "swap_ab_ranked",
           "FEW_CTAS", "FILL_BYTES_PER_CLK", "WEIGH_ZERO_FILL", "overlap", "zero_fill", "zero_rows", "SWAP_PANEL_ADJACENT", "SWAPPED_EFFICIENCY", "SWAP_SPLIT_ACC_MAX", "WEIGH_SWAP", "WEIGH_SWAP_DYNAMIC", "few_ctas", "swap_configs"]
