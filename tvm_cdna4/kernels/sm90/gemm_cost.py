"""The sm90 GEMM's cost model: an estimate of one config's time on a GPU, and the choice over candidates.

For a ``Sm90Config`` on problem (M, N, K) and a ``devices.DeviceSpec`` (the SM count, clock, HBM
bandwidth: ``kernels.devices``, never written here), the estimate in seconds is

    max(compute, memory) + fill + epilogue

- compute: the persistent grid's busiest CTA, ``ceil(tiles / ctas)`` tiles, each ``block_m x block_n x
  k_tiles*64`` multiply-adds at ``TENSOR_FLOPS_PER_CLK`` flops per SM clock times the tile's
  efficiency: ``TENSOR_EFFICIENCY`` (issue and synchronization, fitted) times the share of the
  tensor rate that shared memory keeps up with: per k-tile the tensor cores need ``block_m block_n 64 2
  / TENSOR_FLOPS_PER_CLK`` clocks while shared memory, at ``SMEM_BYTES_PER_CLK``, takes the TMA's writes
  of both tiles and every wgmma's reads (each m64nNk16 reads its ``(64 + N) x 16`` elements), and one
  consumer warpgroup (no second one to hide its epilogue and waits) at ``ONE_CONSUMER`` of that;
- memory: A and B read once and C written once (the grouped tile order keeps the panels of one group
  in L2) at the HBM bandwidth, or the busiest CTA's own bytes at ``SM_BYTES_PER_CLK`` when fewer
  CTAs than SMs stream (small M);
- fill: the first stage of every CTA before its first wgmma (the ring's latency);
- epilogue: the consumers store each tile's C from registers while the tensor cores wait, and every
  CTA reaches its epilogue at about the same time: the busiest CTA's tiles' C bytes, times the CTAs,
  at ``STORE_EFFICIENCY`` of the HBM bandwidth; with ``epilogue="tma"`` (the consumers write C into a
  shared staging buffer and go on while TMA stores drain it) ``STAGED_EPILOGUE`` of that.

With a K split (``split_k`` = S > 1; ``gemm_plan``'s docstring) the work units are the tiles times S, each
``ceil(k_tiles / S)`` k-tiles: compute and the busiest CTA's streamed bytes count its units, the C epilogue
its share of the tiles (``ceil(tiles / ctas)``, whoever gathers them), and a fourth term is added:

- reduction: the workspace traffic, every slice's f32 partial of C written and read back (``S M N 4`` bytes
  twice, as ``reduction="ordered"`` moves them; the chooser builds only ordered splits) at the HBM bandwidth, plus the tile's gather by one warpgroup's SM
  (``ceil(tiles / ctas)`` tiles of ``S block_m block_n 4`` bytes) at ``SM_BYTES_PER_CLK``: the last unit of
  a tile waits for it (assumed: no timing has tested the term yet).

The choice weighs ``SPLITS`` for every candidate tile whose tiles leave SMs idle (fewer tiles than SMs; a
split of a full grid, for its last wave, measured slower), those that leave every slice ``MIN_SLICE_TILES``
k-tiles and keep the workspace's offsets 32-bit.

Rates marked *fitted* were fitted to the 13 timings of ``benchmarks/sm90_gemm.py`` on an H100 SXM
(2026-12-06; docs/sm90_gemm.md: 4096^3 at four tilings and the Llama-3-8B set, 41 us to 1.5 ms; the
estimate with the H100's ``DeviceSpec`` is within 3.9% rms of them, 10% at worst), ``STAGED_EPILOGUE``
to the 10 timings of the TMA epilogue (``--study``, the same card and day: 4.5% rms, 8% at worst); those marked
*assumed* are first estimates no timing has tested yet (small M). The sm80 target's ``Device`` holds its
fitted rates the same way. The choice is over ``CANDIDATES`` with the deepest ring that fits the SM's
shared memory (at most ``MAX_STAGES``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..common import ceil_div
from .gemm_plan import BARRIER_BYTES, BLOCK_K, ELEMENT_BYTES, INT32_ELEMENTS, WGMMA_K, WGMMA_M, Sm90Config, block_k

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
SM_BYTES_PER_CLK = 64
"""What one SM pulls from L2/HBM per clock (assumed; bounds a small grid's streaming)."""
TENSOR_EFFICIENCY = 0.75
"""The share of the tensor rate (at the datasheet clock) a two-consumer tile keeps (fitted: the module
docstring)."""
STORE_EFFICIENCY = 0.35
"""The share of the HBM bandwidth the epilogue's stores reach when every CTA stores its tile at once
(fitted: 9 GB/s per SM; direct 4-byte stores from registers, not overlapped with the next tile)."""
STAGED_EPILOGUE = 0.16
"""The share of that stall the TMA epilogue keeps (fitted: the consumers convert and write C into shared
memory, bank-conflict free, and wait only for the previous tile's stores, long drained)."""
ONE_CONSUMER = 0.85
"""The share of that a single consumer warpgroup keeps (assumed: nothing overlaps its epilogue)."""
MAX_STAGES = 8
CANDIDATES = ((128, 256, 2), (256, 128, 2), (128, 192, 2), (128, 128, 2), (128, 64, 2), (64, 256, 1),
              (64, 128, 1), (64, 64, 1))
"""(block_m, block_n, consumers) the cost model weighs."""
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

    @property
    def total(self) -> float:
        return max(self.compute, self.memory) + self.fill + self.epilogue + self.reduction

    def to_json(self) -> dict:
        return {"us": round(self.total * 1e6, 3), "compute_us": round(self.compute * 1e6, 3),
                "memory_us": round(self.memory * 1e6, 3), "fill_us": round(self.fill * 1e6, 3),
                "epilogue_us": round(self.epilogue * 1e6, 3), "reduction_us": round(self.reduction * 1e6, 3)}


def efficiency(cfg: Sm90Config, bytes_per: int = 2) -> float:
    """The share of the SM's tensor rate one tile of ``cfg`` keeps (the module docstring)."""
    tensor_clk = cfg.block_m * cfg.block_n * BLOCK_K * 2 / TENSOR_FLOPS_PER_CLK
    reads = cfg.block_m // WGMMA_M * (BLOCK_K // WGMMA_K) * (WGMMA_M + cfg.block_n) * WGMMA_K * bytes_per
    smem_clk = (reads + cfg.stage_bytes(bytes_per)) / SMEM_BYTES_PER_CLK
    share = min(1.0, tensor_clk / smem_clk) * TENSOR_EFFICIENCY
    return share * (ONE_CONSUMER if cfg.consumers == 1 else 1.0)


def estimate(cfg: Sm90Config, M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16") -> Estimate:
    """The estimate of ``cfg`` on (M, N, K) of ``dtype`` inputs on ``device`` (a ``devices.DeviceSpec``)."""
    tiles = ceil_div(M, cfg.block_m) * ceil_div(N, cfg.block_n)
    ctas = min(tiles * cfg.split_k, cfg.ctas or device.units)
    per_cta = ceil_div(tiles * cfg.split_k, ctas)  # work units (tiles without a split)
    per_tile = ceil_div(tiles, ctas)
    bytes_per, bk = ELEMENT_BYTES[dtype], block_k(dtype)
    k = ceil_div(ceil_div(K, bk), cfg.split_k) * bk
    flops_per_clk = TENSOR_FLOPS_PER_CLK * TENSOR_RATE[dtype]
    tile_s = cfg.block_m * cfg.block_n * k * 2 / (flops_per_clk * device.clock_hz * efficiency(cfg))
    moved = (M * K + N * K) * bytes_per + M * N * out_bytes
    cta_bytes = per_cta * ((cfg.block_m + cfg.block_n) * k * bytes_per + cfg.block_m * cfg.block_n * out_bytes)
    memory = max(moved / device.hbm_bytes_s, cta_bytes / (SM_BYTES_PER_CLK * device.clock_hz))
    fill = cfg.stage_bytes() * ctas / device.hbm_bytes_s
    epilogue = per_tile * cfg.block_m * cfg.block_n * out_bytes * ctas / (device.hbm_bytes_s * STORE_EFFICIENCY)
    return Estimate(per_cta * tile_s, memory, fill, epilogue * (STAGED_EPILOGUE if cfg.epilogue == "tma" else 1.0),
                    reduction(cfg, M, N, per_tile, device))


def reduction(cfg: Sm90Config, M: int, N: int, per_tile: int, device) -> float:
    """The K split's reduction term (the module docstring), 0 without a split."""
    if cfg.split_k == 1:
        return 0.0
    workspace = 2 * cfg.split_k * M * N * WORKSPACE_BYTES / device.hbm_bytes_s
    gather = per_tile * cfg.split_k * cfg.block_m * cfg.block_n * WORKSPACE_BYTES / (SM_BYTES_PER_CLK * device.clock_hz)
    return workspace + gather


def splits(M: int, N: int, K: int, dtype: str = "bf16") -> tuple:
    """The ``SPLITS`` the model weighs for (M, N, K): every slice ``MIN_SLICE_TILES`` k-tiles or more, every
    slice with k-tiles of its own, the workspace ``[split_k, M, N]`` within 32-bit offsets."""
    k_tiles = ceil_div(K, block_k(dtype))
    return tuple(s for s in SPLITS if s == 1 or (ceil_div(k_tiles, s) >= MIN_SLICE_TILES
                                                  and (s - 1) * ceil_div(k_tiles, s) < k_tiles
                                                  and s * M * N < INT32_ELEMENTS))


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


def ranked(M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16") -> list[tuple[float, Sm90Config]]:
    """Every candidate config (deepest ring) with every epilogue C allows (``epilogues``) and, where its tiles
    are fewer than the SMs, every K split (``splits``), and its estimate, best first (ties: the larger tile, then the fewer slices)."""
    out, k_tiles = [], ceil_div(K, block_k(dtype))
    for (bm, bn, consumers), how in ((c, how) for c in CANDIDATES for how in epilogues(N, out_bytes, c[2])):
        for split in splits(M, N, K, dtype) if ceil_div(M, bm) * ceil_div(N, bn) < device.units else (1,):
            stages = deepest(bm, bn, consumers, device.smem_per_unit, ceil_div(k_tiles, split), how)
            cfg = Sm90Config(bm, bn, stages, consumers, epilogue=how, split_k=split)
            out.append((estimate(cfg, M, N, K, out_bytes, device, dtype).total, -bm * bn, split, cfg))
    out.sort(key=lambda x: x[:3])
    return [(t, cfg) for t, _, _, cfg in out]


def choose_config(M: int, N: int, K: int, out_bytes: int, device, dtype: str = "bf16") -> Sm90Config:
    """The cost model's choice for (M, N, K) of ``dtype`` inputs on ``device``."""
    return ranked(M, N, K, out_bytes, device, dtype)[0][1]


__all__ = ["CANDIDATES", "MIN_SLICE_TILES", "SPLITS", "STAGED_EPILOGUE", "STORE_EFFICIENCY", "TENSOR_EFFICIENCY", "TENSOR_RATE", "Estimate", "choose_config",
           "deepest", "efficiency", "epilogues", "estimate", "ranked", "reduction", "splits"]
