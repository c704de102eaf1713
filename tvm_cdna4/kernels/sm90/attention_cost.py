"""The sm90 attention forward's cost model: an estimate of one config's clocks on a GPU, and the choice over
``CANDIDATES`` (tile, stages, schedule) per shape.

Per kv tile of one CTA (``consumers`` warpgroups of 64 rows each, ``block_q`` rows, ``block_kv`` keys;
``attention_plan``):

- tensor: the two GEMMs, ``4 x block_q x block_kv x D`` flops at ``gemm_cost.TENSOR_FLOPS_PER_CLK`` (the dense
  bf16 / f16 wgmma rate of an SM; fp8 ``TENSOR_RATE`` times it), ``block_kv / WGMMA_FULL_N`` of it for an S wgmma narrower than 128 (the
  GEMM model's observation that a narrow wgmma does not reach the full rate);
- softmax: one ``ex2`` a score, ``block_q x block_kv`` a tile, at ``MUFU_PER_CLK`` (the other FP32 work of the
  softmax issues beside it); masked tiles (the diagonal and the tail) ``MASK_COST`` more;
- exposed: the part of the softmax the schedule leaves outside the tensor cores' time: ``EXPOSED`` by
  (``overlap``, ``pingpong``): both warpgroups issuing freely hide some of one's softmax under the other's
  GEMMs; the intra-warpgroup overlap hides more; ping-pong orders them so that one's softmax runs under the
  other's GEMMs (FA3, Shah et al. 2024, §3.1-3.2; its ablation credits the two with about 15 % at D 128 on
  an H100); three consumer warpgroups (``WEIGH_CONSUMERS``) scale it by ``CONSUMER_EXPOSED``;
- ``TILE_CLOCKS`` fixed clocks a tile (the barrier waits, the wgmma latency before the softmax can start);
- ``RING_CLOCKS`` for each stage the schedule keeps busy beyond the ring's spare ones (``ring_shortfall``: the
  producer's next load waited for; the sweep's 2-stage rings with overlap or ping-pong ran 10-25 % slower than
  without, the 3-stage ring with both the fastest on every shape);
- the tensor rate times ``TENSOR_EFFICIENCY``;
- ``epilogue="tma"`` (O staged in the Q tile and stored by TMA): ``TMA_EPILOGUE_TILE_CLOCKS`` less a tile.

A work item's clocks are its tiles' (``workgroup_tiles``: causal, the tiles below the diagonal). One CTA per
item: ``ITEM_CLOCKS`` more each (the CTA's start, Q's and the first tile's load latency, the O store while
the tensor cores wait), the CTAs spread over the SMs (one each: the ring and Q fill most of the shared
memory) in launch order (``attention_plan.work_item``: sections of heads, longest first in each), each on the SM that frees first. ``persistent``: each CTA walks its items
``pid, pid + ctas, ...`` (or by its ``walk``: ``attention_plan.cta_loads``) with ``PERSISTENT_ITEM_CLOCKS`` each (the next item's loads run under the last
one's O store) and ``ITEM_CLOCKS`` once; the busiest CTA's sum (``item_overlap``: ``ITEM_OVERLAP_CLOCKS`` less an
item, where ``WEIGH_ITEM_OVERLAP``). ``epilogue="tma"`` adds
``TMA_EPILOGUE_ITEM_CLOCKS`` to ``ITEM_CLOCKS`` and ``PERSISTENT_ITEM_CLOCKS`` alike (the bulk store's read of the Q
tile waited for before the CTA retires or Q is released). The fitted values are effective rates, not
measured costs of their parts: eight of them over eight shapes, ``EXPOSED`` of the plain schedule at its cap of
1, ``TILE_CLOCKS`` near 0. ``PERSISTENT_ITEM_CLOCKS``, below ``ITEM_CLOCKS`` since the persistent CTAs release Q at the
last S (the next item's loads under this one's softmax and O store), is fitted apart (its docstring). ``EXPOSED`` and
``FITTED`` are fitted to an
H100's timings of this kernel (``benchmarks/attention_sm90.py --configs sweep``, ``benchmarks/attention_sm90_fit.py``;
the fit's data and error at ``FITTED``); FA3's published ablation was the prior.
"""

from __future__ import annotations

import heapq
import itertools

import attrs

from ...errors import ContractError
from ..attention.problem import AttentionProblem, kv_full_tiles_for, workgroup_tiles
from ..devices import DEVICES
from .attention_plan import (CONSUMER_REGS, CONSUMERS, REGISTER_SLACK, REGS, WALKS,  # noqa: F401
                             Sm90AttentionConfig, cta_loads, deepest, item_weights, registers, section_heads,
                             work_item)  # re-exported: CONSUMER_REGS, REGISTER_SLACK (moved)
from .gemm_cost import TENSOR_FLOPS_PER_CLK, TENSOR_RATE, WGMMA_FULL_N

MUFU_PER_CLK = 16
"""``ex2`` results per SM per clock on compute capability 9.0 (CUDA C++ Programming Guide, "Arithmetic
Instructions" throughput table: base-2 exponential, 16 per clock per multiprocessor)."""
EXPOSED = {(False, False): 1.0, (True, False): 0.96, (True, True): 0.39}
MASK_COST = 7.5
TILE_CLOCKS = 4
RING_CLOCKS = 570
TENSOR_EFFICIENCY = 0.96
ITEM_CLOCKS = 13500
PERSISTENT_ITEM_CLOCKS = 11250
"""A persistent CTA's clocks an item beside ``ITEM_CLOCKS`` once: fitted apart (``benchmarks/attention_sm90_fit.py
--persistent``) to the H100's pairs of the persistent CTAs (Q released at the last S) against one CTA an item, 16
shapes at 2k / 4k tokens (``runs/attention_sm90_options_h100_2026-12-07.json``): rms of the log ratio 3.8 % (5.9 % at
the sweep's fit, 13,700, timed before Q's early release); the first choice within 0.7 % of the fastest timed (geo), 3.1
% before."""
TMA_EPILOGUE_TILE_CLOCKS = {64: -35, 128: 81}
TMA_EPILOGUE_ITEM_CLOCKS = {64: 0, 128: 4090}
FITTED = ("TENSOR_EFFICIENCY", "MASK_COST", "TILE_CLOCKS", "ITEM_CLOCKS", "RING_CLOCKS")
"""The rates ``benchmarks/attention_sm90_fit.py`` fits (beside ``EXPOSED``'s three shares) to the timed configs of
``benchmarks/runs/attention_sm90_sweep_sections_h100_2026-12-06c.json`` (an H100, D 128, 4k and 16k tokens a
sequence (16k tokens a batch), MHA / GQA,
causal or not, 16 configs a shape; clocks at ``DEVICES["H100"]``'s): rms 15 % of ``log(measured / estimate)``; the
first-ranked config is within 1.5 % of the fastest timed on each of the 8 shapes. Held out, the same sweep at D 64
(``runs/attention_sm90_sweep_d64_h100_2026-12-06c.json``, 20-23 configs a shape): the first-ranked config within
1.5 % of the fastest on each of its 8 shapes as well (rms 15 % over both runs' 308 timings)."""
OPTION_RATES = ("SPLIT_BARRIER_CLOCKS", "TMA_EPILOGUE_TILE_CLOCKS", "TMA_EPILOGUE_ITEM_CLOCKS")
"""The kernel options' rates, each keyed by the head dim, fitted apart (``benchmarks/attention_sm90_fit.py --options``:
per option and head dim, least squares of the log time ratio of each config with that option alone over the same
config without it, one CTA per item; a wait's rate held at >= 0, ``NONNEGATIVE`` there) to the H100's ``--configs
options`` runs (``OPTION_RUNS``: D 128 at 4k and 16k tokens a sequence, D 64 at 4k and 16k, both at 2k; MHA / GQA,
causal or not). D 128: the TMA epilogue ran 1-3 % slower at 4k tokens (32 tiles an item) and 2-3 % faster at 16k
(128): 81 clocks less a tile, 4,090 more an item, so it pays past about 50 tiles an item (from 8k keys not causal,
16k causal), each pair of the 4k / 16k run ranked as timed. D 64: 1-6 % slower at 16k, within 1-3 % either way at
2k / 4k: 35 clocks more a tile, nothing an item (the unconstrained fit's saving an item is held at 0): never chosen.
``split_kv_barrier`` (K and V on mbarriers of their own): +27 clocks a tile at D 64 (+2-4 % on the causal pairs, -2
to +1 % not causal), -113 at D 128, both within the noise of one replay median a config: not weighed
(``SPLIT_BARRIER_CLOCKS``, 0, kept for the fit)."""
SPLIT_BARRIER_CLOCKS = {64: 0, 128: 0}
SIMULATED_ITEMS = 8192
"""The most work items whose schedule ``estimate`` simulates (the block scheduler's, or the persistent CTAs' walk:
``cta_loads``); more: their average over the SMs plus the longest, every ``walk`` alike."""
WEIGH_CONSUMERS = True
"""Whether ``candidates`` weighs three consumer warpgroups (``Sm90AttentionConfig.consumers``, 192-row blocks at D
64) beside two: on since ``CONSUMER_EXPOSED[3]`` was fitted (the H100 timed three faster than two on every D 64 shape
of 2k-16k tokens); off, the two-consumer choice of before."""
CONSUMER_EXPOSED = {CONSUMERS: 1.0, 3: 0.85}
"""The factor on ``EXPOSED``'s share of the softmax by consumer warpgroups: with three, each warpgroup's softmax has
two others' GEMMs to run under where two consumers have one (the tensor and ``ex2`` work a tile per row are the
same: only the latency the schedule leaves exposed changes). Three's fitted with ``PINGPONG_LAG[3]``
(``benchmarks/attention_sm90_fit.py --consumers``: the 40 pairs of a three-consumer config and the same with two in
the H100 runs ``CONSUMER_RUNS``, D 64, 2k / 4k / 16k tokens: rms of the log ratio of their times over the model's 5.3
%, 8.4 % at stop 49's priors); with it the first choice is within 2 % of the fastest timed config on most of those
shapes (the fit's printout, docs/sm90_attention.md)."""
PINGPONG_LAG = {CONSUMERS: 1, 3: 1}
"""Ring stages ping-pong holds beyond the overlapped schedule's, by consumer warpgroups (``ring_shortfall``): the
other warpgroups' turns lag the first by less than a tile (two consumers half a tile; three, each turn a third of a
tile's issue, the last two thirds). Three's fitted beside ``CONSUMER_EXPOSED[3]``: 1 fits the H100's pairs better
than stop 49's prior of 2 (the last consumer a turn further, a stage more)."""
CONSUMER_SCHEDULES = {3: ((True, True),)}
"""The schedules ``candidates`` weighs at consumer counts other than ``CONSUMERS`` (others: every one of
``SCHEDULES``): three consumers were timed with ping-pong only; the plain and overlap-only schedules there are
untimed (their ring shortfall a prior)."""

WEIGH_ITEM_OVERLAP = False
"""Whether ``candidates`` weighs ``Sm90AttentionConfig.item_overlap`` (each ping-pong config of a persistent grid with
it too) and ``estimate`` takes ``ITEM_OVERLAP_CLOCKS`` off its items: off until the H100's pairs (``benchmarks/
gpu_stop45.sh attnitem``) are fitted; off, the choice of before."""
ITEM_OVERLAP_CLOCKS = 600
"""A persistent CTA's clocks an item that ``item_overlap`` saves (``PERSISTENT_ITEM_CLOCKS`` less it): a prior, not a
fit. Without it, warpgroup 0's first ``S`` of an item waits for the last warpgroup to have issued the item before's
epilogue and the next item's start: the static count at D 128 (docs/sm90_attention.md, "The item's edges"), about
420 instructions a warp with two of them ``ex2`` / ``lg2`` and 34 stores, some 400-700 clocks of idle tensor cores."""

WEIGH_WALKS = False
"""Whether ``candidates`` weighs the persistent grid's other walks (``attention_plan.WALKS``: each persistent config
with ``"zigzag"`` and ``"fold"`` too; ``estimate`` weighs every config's busiest CTA by its walk, ``cta_loads``, up to
``SIMULATED_ITEMS`` items): off until the H100's timings of them (``benchmarks/gpu_stop45.sh attnzigzag``) are in;
off, the choice of before. On, 10 of
the benchmark's 32 shapes (16k tokens at 2k-16k a sequence) move, all causal, to a persistent walk, 1-3 % less
estimated: D 128 MHA 2k from one CTA an item to ``"fold"``, GQA 4k-16k to ``"zigzag"``; D 64 (three consumers) MHA
2k / 4k and GQA 4k-16k to ``"zigzag"``, GQA 2k to ``"fold"`` (a near tie)."""

TILES = (64, 128, 176, 192)
SCHEDULES = ((False, False), (True, False), (True, True))
WEIGHED_EPILOGUES = ("registers", "tma")
"""The ``attention_plan.EPILOGUES`` of every tile and schedule ``candidates`` weighs (where the planner takes it:
not fp8). Not ``"tma_buffer"`` (O's own buffer): untimed, it has no rates."""


def candidates(problem: AttentionProblem, smem_bytes: int):
    """The configs ``choose`` weighs: every tile of ``TILES``, schedule of ``SCHEDULES``, grid (one CTA per item,
    persistent) and epilogue of ``WEIGHED_EPILOGUES`` with the deepest ring that fits (2 or 3 stages) and registers
    within the consumers' cap (``attention_plan.REGS``); three consumer warpgroups too where ``WEIGH_CONSUMERS``, with
    ``CONSUMER_SCHEDULES``' schedules only."""
    out = []
    for consumers in REGS if WEIGH_CONSUMERS else (CONSUMERS,):
        for kv in TILES:
            stages = min(3, deepest(problem, kv, smem_bytes, consumers=consumers))
            if stages < 2:
                continue
            schedules = CONSUMER_SCHEDULES.get(consumers, SCHEDULES)
            for (overlap, pingpong), persistent, epilogue in itertools.product(schedules, (False, True),
                                                                                WEIGHED_EPILOGUES):
                c = Sm90AttentionConfig(kv, stages, overlap=overlap, pingpong=pingpong, persistent=persistent,
                                        epilogue=epilogue, consumers=consumers)
                if registers(problem, c) <= REGS[consumers][1] and fits(problem, c, smem_bytes):
                    out.append(c)
                    if WEIGH_ITEM_OVERLAP and pingpong and persistent:
                        out.append(attrs.evolve(c, item_overlap=True))
                    if WEIGH_WALKS and persistent:
                        out += [attrs.evolve(c, walk=w) for w in WALKS[1:]]
    return out


def fits(problem: AttentionProblem, config: Sm90AttentionConfig, smem_bytes: int) -> bool:
    """Whether the planner takes ``config`` (``Sm90AttentionConfig.check``: shared memory, fp8's tile)."""
    try:
        config.check(problem, smem_bytes)
    except ContractError:
        return False
    return True


def tile_clocks(problem: AttentionProblem, config: Sm90AttentionConfig, masked: bool = False) -> float:
    """SM clocks of one kv tile of a CTA (the module docstring)."""
    kv = config.block_kv
    rate = TENSOR_FLOPS_PER_CLK * TENSOR_RATE[problem.dtype] * min(1.0, kv / WGMMA_FULL_N) * TENSOR_EFFICIENCY
    tensor = 4 * config.block_q * kv * problem.head_dim / rate
    softmax = config.block_q * kv / MUFU_PER_CLK * (1 + (MASK_COST if masked else 0))
    exposed = EXPOSED[(config.overlap, config.pingpong)] * CONSUMER_EXPOSED[config.consumers]
    return (tensor + exposed * softmax + TILE_CLOCKS
            + RING_CLOCKS * ring_shortfall(config) - SPLIT_BARRIER_CLOCKS[problem.head_dim] * config.split_kv_barrier
            - TMA_EPILOGUE_TILE_CLOCKS[problem.head_dim] * (config.epilogue == "tma"))


def ring_shortfall(config: Sm90AttentionConfig) -> int:
    """Ring stages the schedule holds beyond what ``stages`` leaves for the producer's next load: the tile being
    consumed, one more with ``overlap`` (tile ``j``'s V under tile ``j + 1``'s S), ``PINGPONG_LAG`` more with
    ``pingpong`` (the other warpgroups behind), against ``stages - 1`` (0 or less: the next load is never waited
    for)."""
    behind = PINGPONG_LAG[config.consumers] if config.pingpong else 0
    return max(0, 1 + config.overlap + behind - (config.stages - 1))


def estimate(problem: AttentionProblem, config: Sm90AttentionConfig, sms: int | None = None) -> float:
    """Model clocks of the whole launch (the module docstring)."""
    sms = sms or DEVICES["H200"].units
    kv = config.block_kv
    plain, masked = tile_clocks(problem, config), tile_clocks(problem, config, True)
    per_block = []
    block_q = config.block_q
    for qb, t in enumerate(workgroup_tiles(problem, block_q, kv, config.skip_masked)):
        full = min(t, kv_full_tiles_for(problem, block_q, kv, qb * block_q))
        per_block.append(full * plain + (t - full) * masked)
    heads = problem.batch * problem.heads
    more = TMA_EPILOGUE_ITEM_CLOCKS[problem.head_dim] if config.epilogue == "tma" else 0
    item, persistent_item = ITEM_CLOCKS + more, PERSISTENT_ITEM_CLOCKS + more
    if WEIGH_ITEM_OVERLAP and config.item_overlap:
        persistent_item -= ITEM_OVERLAP_CLOCKS
    if len(per_block) * heads > SIMULATED_ITEMS:  # many short items: the average (the schedule's tail is small)
        extra = persistent_item if config.persistent else item
        return (sum(per_block) + extra * len(per_block)) * heads / sms + max(per_block) + ITEM_CLOCKS
    if not config.persistent:  # the block scheduler: each CTA, in launch order, on the SM that frees first
        free = [0.0] * sms
        for clocks in item_weights(problem, per_block):
            heapq.heapreplace(free, free[0] + clocks + item)
        return max(free)
    ctas = min(len(per_block) * heads, config.ctas or sms)
    return ITEM_CLOCKS + max(cta_loads(problem, [c + persistent_item for c in per_block], ctas, config.walk))


def choose(problem: AttentionProblem, sms: int | None = None, smem_bytes: int | None = None) -> Sm90AttentionConfig:
    """The candidate with the least ``estimate`` (ties: the first listed)."""
    smem = smem_bytes or DEVICES["H200"].smem_per_unit
    found = candidates(problem, smem)
    if not found:  # the planner's refusal of the problem (fp8 at D 64, say), naming its rule
        Sm90AttentionConfig().check(problem, smem)
    return min(found, key=lambda c: estimate(problem, c, sms))


__all__ = ["ITEM_OVERLAP_CLOCKS", "WEIGH_ITEM_OVERLAP", "WEIGH_WALKS", "CONSUMER_EXPOSED", "CONSUMER_SCHEDULES", "PINGPONG_LAG", "WEIGH_CONSUMERS", "WEIGHED_EPILOGUES", "EXPOSED", "FITTED", "ITEM_CLOCKS", "MASK_COST", "OPTION_RATES", "PERSISTENT_ITEM_CLOCKS",
           "MUFU_PER_CLK", "RING_CLOCKS", "SCHEDULES", "SPLIT_BARRIER_CLOCKS", "TENSOR_EFFICIENCY", "TILES",
           "TILE_CLOCKS", "TMA_EPILOGUE_ITEM_CLOCKS", "TMA_EPILOGUE_TILE_CLOCKS", "candidates", "choose",
           "estimate", "registers", "ring_shortfall", "tile_clocks"]
