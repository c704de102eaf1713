"""Paged decode attention on sm80-class GPUs (issue 37): the plan. Pure Python (attrs), no TIRx.

The problem, its reference and the clamps of lying device data are ``kernels.attention.paged``'s;
this module decides how the CUDA kernels (``paged_decode_emit``) compute them.

**Split-KV ("flash-decoding") over fixed-size partitions, two kernels.** ``main``: grid ``batch x
kv_heads x split_kv`` CTAs of ``warps`` warps, ``split_kv = ceil(context / partition)``. CTA ``s`` of a
(sequence, kv head) takes the keys ``s partition .. (s + 1) partition - 1`` of that sequence, cut to its
length ``L`` (the last CTA of the grid also takes every key past the grid, so a hint shorter than a
sequence loses nothing); a CTA whose partition starts at or past ``L`` exits at once (no load, no
write). Its warps take the partition's kv tiles (of ``TILE_KEYS`` = 16 keys, inside one page:
``page_size >= 16``) round robin, each warp an independent online-softmax state over **all** ``rows =
group x queries`` query rows of the kv head (row ``r``: query ``r // group``, head ``kv_head * group +
r % group``), so that one load of a K / V tile serves the whole GQA group and every speculative query.
At the end the CTA merges its warps' states in shared memory (by their maxima, as below) and writes one
partial state (unnormalized O, row max in base-2 units, row sum) to the workspace slot ``(b Hkv + g)
split_kv + s`` (``WO``, ``WM``, ``WL``). ``merge``: one thread per (sequence x kv head, row, 2 dims)
combines the partials of the partitions its sequence has (``min(split_kv, ceil(L / partition))``: the
empty ones never written, never read), ``MERGE_BATCH`` at a time (their loads in flight together, an
online merge across batches), by their maxima (``O = sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M)
l_s``, ``LSE = (M + log2 l) ln 2``; a row no partial saw: ``O = 0``, ``LSE = -inf``) and writes O and LSE.

**Why fixed partitions** (not "each sequence's tiles cut into ``splits`` ranges"): the host does not
know the contexts, and a batch's contexts are uneven. Ranges per sequence make a CTA's work
proportional to its sequence's length: at batch 64 one split per sequence, and a 32k-key sequence's CTA
runs ~10x longer than a 3k one's: the last CTAs' tail dominates. Fixed partitions (vLLM's paged
attention v2, flash-decoding) make every CTA's work at most ``partition`` keys whatever the lengths: the
grid is many short CTAs, the SMs take them as they free, the tail is one partition's time.

**Per warp, per tile** (``mma.sync.aligned.m16n8k16``, f32 accumulate, of ``mma_type``: the query dtype,
f16 with fp8 KV):
* the tile's K and V rows (16 keys x D of one kv head, rows of one page: ``Hkv D`` elements apart in
  the cache) stream into the warp's own ``stages``-deep ring in shared memory by ``cp.async`` 16-byte
  chunks (``.cg``; the warp's 32 lanes copy, ``cp.async.wait_group`` + ``__syncwarp`` hand them over:
  no CTA barrier in the loop), the 16-byte chunk ``c`` of row ``k`` stored at ``c ^ (k % swizzle)``; the
  tiles' pages sit in a register ring (``stages + 1`` of them), each read from the block table two
  iterations before its copy, so no copy's address waits on the table (page 16: a new page every tile);
  a CTA starts with Q's copy, its warps' first pages and first ``stages - 1`` tiles all in flight at once;
* ``S = Q K^T``: A = Q's fragments (registers for the whole kernel, read once from shared memory), B =
  K words read from shared memory; fp8 K: the word ``K[key][4t .. 4t + 3]`` feeds both halves of a
  k16 step (Q's dims permuted the same way: the sum is unchanged), each fp8 pair widened to f16 in
  registers by moving bits (``prmt`` puts the two bytes in the high bytes of the halves, then
  ``(v & 0x80008000) | (v >> 1 & 0x3F803F80)``: ``(b & 0x7f) << 7 | (b & 0x80) << 8`` per byte, ``x /
  256`` exactly, subnormals included; 4 instructions a pair, no conversion; sm_89+: one ``cvt``, below), so **fp8 KV runs f16 MMAs whatever Q's
  dtype** (``mma_type``): a bf16 Q is rounded once to f16 after ``Q_PRESCALE`` (``2^-8``, exact: f16 holds
  bf16's 8 significant bits for ``|q|`` in ``2^-6 .. 2^24``; below, f16's subnormal steps of ``2^-16``
  in ``q``), and P packs as f16 (finer than bf16 on ``0 .. 1``); ``256``, ``1 / Q_PRESCALE`` and the
  per-head scales fold into f32 factors (``K_SCALE 256 / Q_PRESCALE`` into the score scale, ``V_SCALE
  256`` into O at the end). Why: the first H100 run had fp8 at 9-53 % of the read rate, no faster than
  bf16; its loop was instruction-bound (~1500 PTX instructions per 16-key tile, 128 f16 -> f32
  conversions per lane for a bf16 MMA, V's bytes picked one load each). Now (nvcc 13, sm_80, ptxas -v:
  no spills) the loop is 648 SASS instructions per fp8 tile (4 KiB) and 552 per bf16 tile (8 KiB), 32
  HMMA each (the conditional rescale included): at most ~160 and ~140 issue cycles (4 schedulers) of the
  ~340 and ~680 an SM has per tile at its share of ~3 TB/s, so both should be memory-bound and a 32-key
  fp8 tile (halving the per-tile softmax) is not needed (the GPU run is the check);
* the mask (every tile: key ``j`` of row ``r`` counts iff ``j <= L - q + r // group`` and its page
  index is inside the cache), the online softmax in base 2 (a row with no key yet keeps max ``-inf``
  and adds nothing; O and the sum are rescaled only where a row's max grew), ``O += P V`` with P
  packed from the score accumulators and V's B words from word loads, each load serving ``4 / elem
  bytes`` d-tiles (d-tile ``dn``'s column ``n`` is dim ``o_dim``: the dims permuted, undone where O is
  stored).

**fp8 on sm_89+** (``choose_cvt``, ``PagedDecodeConfig.fp8_cvt``): where the kernel is built for an arch with
``cvt.rn.f16x2.e4m3x2`` (PTX ISA 9.7.10.24, sm_89+: H100, H200, L40), a K pair widens by that one instruction and a
V pair by a ``prmt`` and it (the sm90 kernel's ``widen``), exact values: no ``256`` in the factors. ptxas 13.0
(sm_90a), batch 8, 32/8 heads, D 128: the main kernel's PTX 1825 -> 1674 instructions, the loop's 32 pairs of K and
32 of V three instructions each fewer. The arch is ``plan(arch=)``, the build's, default the present GPU's
(``kernels.devices.planned``); on sm_80 the bits move as above.

**The register cap** (``choose_min_ctas``, ``PagedDecodeConfig.min_ctas``; taken only when forced:
``WEIGH_REGISTER_CAP``, the H100 ran it slower): main's ``__launch_bounds__(threads, n)``, ``n`` the CTAs the
shared memory holds, at most what the register file holds at ``state_registers +
REG_HEADROOM`` a thread; none where the cap would not bind (``MAX_REGISTERS``). Little's law: an fp8 tile is half a
bf16 tile's bytes, so at the same stages an SM needs more resident warps for the same bytes in flight, and the
ncu run had the fp8 kernel latency-bound (0.42 eligible warps per scheduler, DRAM 74 %) at 3 CTAs per SM: ptxas
gave it 156 registers where its 53 KB of shared memory hold 4 CTAs. Capped for 4 it takes 128, no spill (with or
without ``fp8_cvt``). The bf16 D 128 kernel's 100 KB hold 2 CTAs: no cap, its code unchanged; bf16 D 64 (50 KB):
4, ptxas 116 -> 114 registers, 4 CTAs either way. 32-key fp8 tiles: below (wide tiles).

**Wide tiles** (``PagedDecodeConfig.tile_keys``, ``choose_tile_keys``; ``WIDE_FP8``): ``WIDE_TILE_KEYS`` = 32 keys a
tile, two 16-key halves (each inside one page: on 16-key pages a tile's halves have a page each, ``tile_pages``),
copied, scored (four n8 tiles) and multiplied into O (two k16 steps) as two 16-key tiles are, but masked, reduced
(max, ``shfl``, the conditional rescale), waited for and bookkept once; the score factor (fp8: ``K_SCALE``) is read
once a CTA into a register where the 16-key kernel re-reads it under every score's mask (ptxas keeps that load in
the loop, behind a branch per score). The count that chose it (nvcc 13.0, sm_90a, fp8 with ``cvt``, batch 64,
32/8 heads, D 128, the loop's SASS on its common path: no rescale taken): **16-key tiles 426 instructions per 4
KiB tile (852 per 8 KiB, 5 LDG, 12 branches), wide tiles 683 per 8 KiB (2 LDG, 4 branches): 20 % fewer per KV
byte** (bf16, 16-key: 473 per 8 KiB); 32 HMMA per 16 keys either way; ptxas 155 -> 167 registers (3 stages), 157
at 2 stages, no spill. A wide stage is 8 KiB of fp8 K and V, a bf16 tile's: at 3 stages the rings are 100 KB (2 CTAs
per SM, as bf16), at 2 stages, the wide tiles' default (``WIDE_FP8_STAGES``: the H100 timed it fastest), 68 KB (3 CTAs,
the 16-key fp8 kernel's, with its bytes in flight).
The sm90 kernel keeps 16-key tiles (its producer's TMA boxes; ``WIDE_TILES``), and so do 16-bit caches.

**Lying device data** (``kernels.attention.paged``): ``L`` is clamped to ``0 .. capacity`` in the
kernel; the CTA reads ``BLOCK_TABLE[b, p]`` only for ``p < ceil(L / page_size)``; a page index outside
``0 .. num_pages - 1`` copies nothing (``src-size`` 0 from page 0: zeros) and its keys are masked.

**The partition** (``choose_partition``; a cost model from the device, no host synchronization: the
grid is sized by ``context``, a caller's hint of the longest context, or ``capacity``): the largest of

* ``fill``: the keys that give ``FILL_WAVES`` waves of ``resident`` CTAs per SM (``resident_ctas``: what the
  shared memory holds) over ``sms`` SMs and ``batch x kv_heads`` sequences of ``context`` keys (enough CTAs to
  fill the GPU at a small batch), cut to ``max_keys``:
  the keys of ``MAX_PARTITION_BYTES`` of K and V (a short CTA: a small tail at a large batch);
* ``min_keys``: ``MIN_TILES_PER_WARP`` tiles per warp (the cp.async ring fills), and K and V bytes at
  least ``AMORTIZE`` x the partial's (written, then read back by the merge: ``2 rows (D + 2) 4``);

rounded up to ``TILE_KEYS x warps`` (every warp the same tiles). ``PagedDecodeConfig.partition``
forces the keys, ``splits`` a count (``forced_partition``: the hint's tiles over ``splits``, rounded up to
whole warps' tiles).

**The balanced partition** (``PagedDecodeConfig.balance``, off by default: ``BALANCE``; ``PagedDecodePlan.balance``):
the host sizes the grid from a hint, so at a small batch of uneven contexts most of its CTAs are empty and the
non-empty ones run in several waves (batch 8, 32/8 heads, the 9.4k draw: 512 keys, 1208 non-empty of 3008 CTAs, 4.6
waves of 264; the 15k draw 1912, 7.2 waves). FlashInfer 0.6.6's tensor-core decode (its prefill kernel on the GQA
group, ``PrefillPlan``: ``2 sms`` CTA slots, the least KV chunk whose chunks fit them, from the lengths it reads on
the host) runs one wave: 264 CTAs of 2560 keys (9.4k) and 4272 (15k). Balanced, every CTA computes that partition on
the device from ``CONTEXT_LENS`` (clamped), in closed form (``balance_tiles``: the batch's tiles over
``balance_divisor`` = CTA slots per kv head less the batch, whole warps' tiles, at least the plan's partition), and
the merge (kernel or last CTA) the same: the grid and the workspace stay the plan's (the partition only grows, so
no sequence has more partitions than the grid), no host synchronization. Where one wave holds no CTA per sequence
(``balance_divisor`` < 1) or past ``MAX_BALANCE_BATCH`` sequences it is refused. The estimate
(``paged_decode_estimate``) at batch 8: 84.8 -> 81.8 us (9.4k, 32/8; 3072 keys, 224 CTAs), 88.4 -> 85.5 (64/8),
135.0 -> 124.3 (15k, 4800 keys, 224 CTAs), 140.9 -> 130.2; FlashInfer's exact chunk gives the same estimates. ``partition_seconds``
does not see the empty CTAs (each holds a slot for its length's load): in the default launch order the
balanced grid has 2739 of them before its last non-empty CTA, partition-major (``SPLIT_MAJOR``) 248 (9.4k) and 64
(15k), so the GPU step times the two together too. ``paged_decode_estimate.plan_seconds`` now counts them
(``EMPTY_CTA_S``), and ``paged_decode_rule`` weighs both switches by it (``WEIGH_BALANCE``, on).

**The merge** (``PagedDecodePlan.merge``, ``choose_merge`` unless ``PagedDecodeConfig.merge`` forces it):
``"kernel"``, the ``merge`` launch above; or ``"last-cta"``, one launch: after its partial, a CTA fences
(``fence.acq_rel.gpu``), draws a ticket of its (sequence, kv head) (``atom.global.add.u32`` on ``TICKETS[b
Hkv + g]``, a counter zeroed at allocation), and the CTA that draws the last (``n - 1``, ``n`` the
sequence's non-empty partitions; ``n = 1``: no atomic) fences again, merges the ``n`` partials as the merge
kernel does (``ld.global.cg``, ``MERGE_PASS`` (row, dim pair) items per thread at a time), writes O and LSE
and resets the counter to 0: every call leaves it zeroed (CUDA-graph replays included; the GEMM's split-K
tickets, ``kernels.sm80.gemm_emit_epilogue.split_epilogue``, and the gfx950 paged kernel do the same). A
sequence of no key (``L = 0``): its partition-0 CTA writes ``O = 0``, ``LSE = -inf`` alone.

Which (``merge_seconds``, a model in seconds, fitted to the (merge kernel, last CTA) pairs of ``MERGE_RUNS``; journal
"Stop 56: pagedmerge"): the merge kernel costs ``LAUNCH_S`` (a second launch in a CUDA graph: small) plus
``MERGE_CTA_S`` per CTA of it (``merge_kernel_ctas``: ``MERGE_LANES`` lanes per (row, dim pair) item) per SM, so it
grows with batch x kv heads x rows; the last-CTA merge costs ``PARTIAL_S`` per partial of its sequence per pass
(``ceil(rows D / 2 / (threads MERGE_PASS))``: 1 at 8 rows, 4 at 32). The form before (tickets per wave of CTAs, rounds
of ``MERGE_BATCH`` partials, a 3 us launch) ranked 5 of the runs' 24 pairs outside the noise (1 %) wrong: the
tickets cost nothing measurable (batch 32 / 2k, 15 waves of tickets: the last CTA 2.2 % faster), a batch of 32
saves more by one launch than one of 8 at the same rounds (4 partials: 2.0-2.9 us against 0.45-0.6), and the
rounds are not the last CTA's cost (``merge_batch=16``, one round for 3-5, ran no faster) where the partials are
(batch 8: 1.4-2.4 % faster at 10 partials, 1.4-5.4 % slower at 12-24). Refitted, all 24 are ranked right (12 more
within the noise). Batch 8, 32/8 heads, one query: kernel 1.08 us, the last CTA 0.1 us a partial: one launch up to
10 partitions; batch 32: 3.4 us, up to 34. With the balanced partition the plan weighs ``merge_partials`` (the
partitions of the longest sequence of a stand-in batch: 9 at batch 8, bf16, the 23.8k hint, for 47 unbalanced).
The fit spans batch 8-32, one query, up to 60 partitions; beyond it (batch 64, 4 queries) an H100 ran the choice
within 0.7 % of the faster merge forced on all 15 rows of ``gpu_stop45.sh pagedmerge`` (stop 56,
``benchmarks/runs/paged_decode_pagedmerge_h100_2026-12-08.md``). One partition (``split_kv`` 1): the last-CTA merge always, even while
``WEIGH_LAST_CTA`` is off (one launch: what an eager call of a small problem costs on the host, issue 37 item 5).
"""

from __future__ import annotations

import attrs

from ..attention.paged import PagedDecodeProblem
from ..common import PlanRecord, check_config
from ..devices import planned
from ..gemm.dynamic_m import ceil_div
from ..gemm.epilogue import Param
from ...errors import ContractError
from .attention_plan import MAX_REGISTERS, MAX_THREADS_PER_SM, arch_number
from .gemm_config import DTYPES, MMA
from .paged_decode_grid import (  # noqa: F401 (re-exported: the merge model lives below the estimate)
    LAUNCH_S, MERGE_CTA_S, MERGE_LANES, MERGE_PASS, MERGE_RUNS, MERGE_THREADS, PARTIAL_S, RESIDENT_CTAS, balance_divisor,
    balance_tiles, last_merge_passes, merge_kernel_ctas, merge_seconds, resident_ctas)
from .paged_decode_pdl import choose_pdl
from .paged_decode_rule import balance_by_rule, standin_contexts

TILE_KEYS = 16  # keys per tile: one k16 step of P V, two n8 tiles of S
WIDE_TILE_KEYS = 32  # a wide tile (PagedDecodeConfig.tile_keys): two k16 steps, four n8 tiles, one softmax step
TILE_KEY_CHOICES = (TILE_KEYS, WIDE_TILE_KEYS)
CHUNK_BYTES = 16  # cp.async
MAX_ROWS = 64  # group x queries: 4 m16 tiles of accumulators per warp
FILL_WAVES = 2
"""Waves of resident CTAs (``resident_ctas``: what the shared memory holds per SM) the partition gives at the hint
(``choose_partition``'s ``fill``). Fitted to the H100's batch-8 rows (``benchmarks/runs/
paged_decode_partitions_h100_2026-12-06f.log``): before, 8 CTAs per SM whatever the residency, i.e. 2 waves of the
fp8 (53 KB) and bf16 D 64 (50 KB) kernels' 4 resident CTAs but 4 waves of the bf16 D 128 kernel's 2 (100 KB):
320 keys, where 512 ran 5-9 % faster (28.9 against 30.5 us, 30.4 against 33.1; the same config timed twice that
day within 2 %)."""
MIN_TILES_PER_WARP = 4  # 64 keys: the pipeline fills
AMORTIZE = 16  # a partition's K and V bytes over its partial's (written and read back)
MAX_PARTITION_BYTES = 256 * 1024  # K and V of one kv head per CTA: ~20 us at a resident CTA's HBM share
MERGES = ("last-cta", "kernel")  # PagedDecodePlan.merge (module docstring)
MERGE_BATCH = 4  # partials a merge thread loads at once (one round trip of latency per batch)
MAX_MERGE_BATCH = 16  # PagedDecodeConfig.merge_batch at most: a last-CTA merge round's partials an item
LAST_LOADS = 32  # a forced merge_batch's partials in flight a thread (merge_batch x items): 128 f32 of loads
PACK = "cvt.rn.{t}x2.f32"
Q_PRESCALE = 2.0**-8  # a bf16 Q's factor before its f16 rounding, fp8 KV (module docstring)
COPY = "cp.async.cg.shared.global"
STORAGE = {**DTYPES, "fp8": "uint8"}  # the kernel's parameter dtypes (fp8 caches as their bytes)
CVT_ARCH = 89  # cvt.rn.f16x2.e4m3x2: PTX ISA 9.7.10.24, "requires sm_89 or higher"
REG_GRANULE = 8  # registers per thread are allocated in warps of 256 (CUDA occupancy calculator: 8 a thread)
REG_HEADROOM = 16
"""Registers a thread needs past its kernel-wide state (``PagedDecodePlan.state_registers``) for the loop's
temporaries: ptxas 13.0 (sm_90a) on the fp8 kernel, 4 warps, 3 stages, one m-tile, capped by ``min_ctas``: D 128
(state 112) no spill at 128 registers, 144 bytes at 96; D 64 (state 64) no spill at 80."""


@attrs.frozen
class PagedDecodeConfig:
    """The kernel's tuning: ``warps`` per CTA, ``stages`` of each warp's cp.async ring; ``splits``: the
    partitions of a hint-long sequence, or ``partition``: the keys per CTA (a multiple of ``TILE_KEYS``);
    neither: ``choose_partition``'s."""

    warps: int = 4
    stages: int | None = None  # each warp's ring depth; None: choose_stages (STAGES, WIDE_FP8_STAGES for wide tiles)
    splits: int | None = None
    partition: int | None = None
    merge: str | None = None  # "last-cta" or "kernel" (module docstring); None: choose_merge's
    fp8_cvt: bool | None = None  # fp8 pairs widen by cvt.rn.f16x2.e4m3x2 (sm_89+); None: where the arch has it
    min_ctas: int | None = None  # the register cap's CTAs per SM (__launch_bounds__); 0 / None: none (WEIGH_REGISTER_CAP)
    tile_keys: int | None = None  # keys per kv tile: TILE_KEYS or WIDE_TILE_KEYS (module docstring); None: choose_tile_keys
    balance: bool | None = None  # the partition widened on the device to one wave (balance_tiles); None: BALANCE
    split_major: bool | None = None  # CTAs launched partition-major (PagedDecodePlan.split_major); None: SPLIT_MAJOR
    merge_batch: int | None = None  # the last-CTA merge's partials a round (PagedDecodePlan.last_batch); None: MERGE_BATCH
    inflight: bool | None = None  # fp8 wide tiles: warps and stages by choose_inflight_ring; None: INFLIGHT
    pdl: bool | None = None  # each launch a programmatic dependent (paged_decode_pdl); None: paged_decode_pdl.PDL

    def __attrs_post_init__(self):
        for name, low, high in (("warps", 1, 8), ("stages", 2, 8)):
            value = getattr(self, name)
            if value is None and name == "stages":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ContractError(f"paged decode config {name}: out of range", operand=name, check="parameters",
                                    expected=f"an int in {low}..{high}", found=repr(value))
        if self.splits is not None and (isinstance(self.splits, bool) or not isinstance(self.splits, int)
                                        or self.splits < 1):
            raise ContractError("paged decode config splits: a positive int or None", operand="splits",
                                check="parameters", expected=">= 1", found=repr(self.splits))
        if self.partition is not None and (isinstance(self.partition, bool) or not isinstance(self.partition, int)
                                           or self.partition < TILE_KEYS or self.partition % TILE_KEYS):
            raise ContractError("paged decode config partition: keys per CTA, whole tiles", operand="partition",
                                check="parameters", expected=f"a positive multiple of {TILE_KEYS}",
                                found=repr(self.partition))
        if self.fp8_cvt is not None and not isinstance(self.fp8_cvt, bool):
            raise ContractError("paged decode config fp8_cvt: a bool or None", operand="fp8_cvt", check="parameters",
                                expected="True, False or None", found=repr(self.fp8_cvt))
        if self.min_ctas is not None and (isinstance(self.min_ctas, bool) or not isinstance(self.min_ctas, int)
                                          or not 0 <= self.min_ctas <= MAX_THREADS_PER_SM // 32):
            raise ContractError("paged decode config min_ctas: the CTAs per SM the registers are capped for",
                                operand="min_ctas", check="parameters",
                                expected=f"an int in 0..{MAX_THREADS_PER_SM // 32} or None", found=repr(self.min_ctas))
        if self.tile_keys is not None and (type(self.tile_keys) is not int or self.tile_keys not in TILE_KEY_CHOICES):
            raise ContractError("paged decode config tile_keys: the keys of one kv tile", operand="tile_keys",
                                check="parameters", expected=f"one of {TILE_KEY_CHOICES} or None",
                                found=repr(self.tile_keys))
        for name in ("balance", "split_major", "inflight", "pdl"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise ContractError(f"paged decode config {name}: a bool or None", operand=name, check="parameters",
                                    expected="True, False or None", found=repr(getattr(self, name)))
        if self.merge_batch is not None and (type(self.merge_batch) is not int
                                             or not 1 <= self.merge_batch <= MAX_MERGE_BATCH):
            raise ContractError("paged decode config merge_batch: the last-CTA merge's partials a round",
                                operand="merge_batch", check="parameters",
                                expected=f"an int in 1..{MAX_MERGE_BATCH} or None", found=repr(self.merge_batch))
        if self.merge is not None and self.merge not in MERGES:
            raise ContractError("paged decode config merge: where the partials merge", operand="merge",
                                check="parameters", expected=f"one of {MERGES} or None", found=repr(self.merge))
        if self.splits is not None and self.partition is not None:
            raise ContractError("paged decode config: splits or partition, not both", operand="partition",
                                check="parameters", expected="one of them (or neither)",
                                found=f"splits={self.splits}, partition={self.partition}")


@attrs.frozen
class PagedDecodePlan(PlanRecord, family="paged"):
    """Everything ``paged_decode_emit`` reads (module docstring)."""

    WIDE_TILES = True  # whether the emitter takes wide tiles (tile_keys WIDE_TILE_KEYS): choose_tile_keys
    WEIGH_MERGE = True  # whether choose_merge weighs the last-CTA merge for this kernel (WEIGH_LAST_CTA)

    problem: PagedDecodeProblem
    config: PagedDecodeConfig
    split_kv: int  # partitions per (sequence, kv head): ceil(context / partition)
    partition: int  # keys per CTA (a multiple of TILE_KEYS x warps)
    context: int  # the longest context the grid was sized for
    sms: int
    mma_instr: str  # of mma_type
    pack_instr: str  # P: two f32 -> a b32 of mma_type
    out_pack: str  # O (the merge): two f32 -> a b32 of the query dtype
    params: tuple[Param, ...]  # main's
    merge_params: tuple[Param, ...]  # the merge kernel's (none with merge "last-cta")
    merge: str = "kernel"  # where the partials merge: "last-cta" (main's last CTA per sequence, kv head) or "kernel"
    cvt: bool = False  # fp8 pairs widen by cvt.rn.f16x2.e4m3x2 (fp8_cvt)
    min_ctas: int = 0  # main's __launch_bounds__ CTAs per SM (0: none; forced, or choose_min_ctas' if WEIGH_REGISTER_CAP)
    tile_keys: int = TILE_KEYS  # keys per kv tile (TILE_KEYS, or WIDE_TILE_KEYS: choose_tile_keys)
    balance: int = 0  # the balanced partition's divisor (balance_divisor; 0: off, the partition fixed at plan time)
    split_major: bool = False  # CTA pid = split x batch x kv_heads + bh (False: bh x split_kv + split; SPLIT_MAJOR)
    last_batch: int = MERGE_BATCH  # the last-CTA merge's partials an item a round (config.merge_batch)
    last_pass: int = MERGE_PASS  # the last-CTA merge's (row, dim pair) items a thread a pass (last_round)
    pdl: bool = False  # each launch a programmatic dependent of the kernel before it (paged_decode_pdl)

    @property
    def rows(self) -> int:
        return self.problem.group * self.problem.queries

    @property
    def m_tiles(self) -> int:
        return ceil_div(self.rows, 16)

    @property
    def mma_type(self) -> str:
        """The MMAs' 16-bit type: the query dtype, f16 with fp8 KV (module docstring)."""
        return "f16" if self.problem.kv_dtype == "fp8" else self.problem.q_dtype

    @property
    def q_factor(self) -> float:
        """What Q is multiplied by before its MMA type (``Q_PRESCALE`` where a bf16 Q becomes f16)."""
        return Q_PRESCALE if self.mma_type != self.problem.q_dtype else 1.0

    @property
    def elem_bytes(self) -> int:
        return 1 if self.problem.kv_dtype == "fp8" else 2

    @property
    def row_words(self) -> int:
        """32-bit words of one K / V row in shared memory."""
        return self.problem.head_dim * self.elem_bytes // 4

    @property
    def chunks(self) -> int:
        """16-byte chunks of one K / V row."""
        return self.problem.head_dim * self.elem_bytes // CHUNK_BYTES

    @property
    def swizzle(self) -> int:
        """The chunk XOR's period (rows): 8 bank groups, or the row's chunks where fewer."""
        return min(8, self.chunks)

    @property
    def halves(self) -> int:
        """The tile's 16-key halves (k16 steps of P V): 1, or 2 for a wide tile."""
        return self.tile_keys // TILE_KEYS

    @property
    def tile_pages(self) -> int:
        """The cache pages one tile's keys span (a wide tile on 16-key pages: 2, one per half)."""
        return ceil_div(self.tile_keys, self.problem.page_size)

    @property
    def tile_words(self) -> int:
        return self.tile_keys * self.row_words

    @property
    def q_words(self) -> int:
        """Q's rows in shared memory (16-bit, ``16 m_tiles x D``), before the warps' rings."""
        return 16 * self.m_tiles * self.problem.head_dim // 2

    def smem_word(self, key, word):
        """The shared-memory word of word ``word`` of a tile's K / V row ``key`` (16-byte chunks XOR ``key %
        swizzle``)."""
        return key * self.row_words + ((word // 4) ^ (key % self.swizzle)) * 4 + word % 4

    @property
    def fp8_cvt(self) -> bool:
        """Whether fp8 pairs widen by one ``cvt.rn.f16x2.e4m3x2`` (sm_89+, exact values) instead of by moving
        their bits (``x / 256``, 4 instructions a pair: the module docstring): the plan's ``cvt``, chosen where the
        arch has the instruction (``plan_paged_decode``)."""
        return self.cvt

    @property
    def register_model(self) -> bool:
        """Whether ``choose_min_ctas`` caps this kernel's registers (``REG_HEADROOM`` is fitted to it); the sm90
        kernel's (a producer warp besides) is not fitted: ``PagedDecodeConfig.min_ctas`` forces a cap there."""
        return True

    @property
    def state_registers(self) -> int:
        """A thread's kernel-wide registers: Q's fragments (``4 m D / 16``), O (``4 m D / 8``), the scores (``8
        m`` a 16-key half), P (``4 m`` a half) and the rows' max and sum (``4 m``)."""
        m, D = self.m_tiles, self.problem.head_dim
        return m * (D // 4 + D // 2 + 12 * self.halves + 4)

    @property
    def q_wait_groups(self) -> int:
        """The cp.async groups that may still fly once Q's has landed: the warps' first ``stages - 1`` tiles'."""
        return self.config.stages - 1

    @property
    def block_threads(self) -> int:
        """The CTA's threads: its warps (every one a consumer of its own tiles)."""
        return self.threads

    def ring_word(self, warp, stage, which: int):
        """First word of warp ``warp``'s K (``which`` 0) or V (1) tile of ``stage``."""
        return self.q_words + ((warp * self.config.stages + stage) * 2 + which) * self.tile_words

    @property
    def part_tiles(self) -> int:
        return self.partition // self.tile_keys

    @property
    def o_word(self) -> int:
        """The CTA's merge in shared memory (after the loop, over Q and the rings): the warps' row maxima
        (``warps x rows`` f32 from word 0), then O (``rows x D`` f32), then the row sums (``rows``)."""
        return self.config.warps * self.rows

    @property
    def l_word(self) -> int:
        return self.o_word + self.rows * self.problem.head_dim

    @property
    def smem_bytes(self) -> int:
        ring = self.q_words + self.config.warps * self.config.stages * 2 * self.tile_words
        return 4 * max(ring, self.l_word + self.rows)

    @property
    def slots(self) -> int:
        """Workspace partials: one per (sequence, kv head, partition)."""
        return self.problem.batch * self.problem.kv_heads * self.split_kv

    @property
    def ctas(self) -> int:
        return self.problem.batch * self.problem.kv_heads * self.split_kv

    @property
    def threads(self) -> int:
        return 32 * self.config.warps

    @property
    def merge_threads(self) -> int:
        return MERGE_THREADS

    @property
    def merge_ctas(self) -> int:
        """The merge kernel's CTAs (0 with the last-CTA merge: no merge launch)."""
        return 0 if self.merge == "last-cta" else merge_kernel_ctas(self.problem)

    @property
    def last_cta(self) -> bool:
        """The last-CTA merge (one launch): main takes ``TICKETS`` and writes O and LSE."""
        return self.merge == "last-cta"

    @property
    def merge_items(self) -> int:
        """The (row, dim pair) items a (sequence, kv head)'s merge takes: ``rows`` x ``head_dim / 2``."""
        return self.rows * (self.problem.head_dim // 2)

    @property
    def merge_passes(self) -> int:
        """The last-CTA merge's passes: ``last_pass`` (row, dim pair) items per thread each."""
        return last_merge_passes(self.problem, self.config.warps, self.last_pass)

    def workspace_bytes(self) -> int:
        """The partials' bytes, and the tickets' (4 bytes per sequence x kv head) with the last-CTA merge."""
        tickets = 4 * self.problem.batch * self.problem.kv_heads if self.merge == "last-cta" else 0
        return 4 * self.slots * self.rows * (self.problem.head_dim + 2) + tickets


def choose_partition(problem: PagedDecodeProblem, context: int, sms: int, warps: int, resident: int,
                     tile_keys: int = TILE_KEYS) -> int:
    """The keys per CTA (module docstring): ``FILL_WAVES`` waves of ``resident`` CTAs on each of ``sms`` SMs at
    ``context`` keys, at most ``MAX_PARTITION_BYTES`` of K and V, at least what amortizes the partial and fills the
    ring (whole ``tile_keys`` tiles of each warp)."""
    step = tile_keys * warps
    key_bytes = 2 * problem.head_dim * (1 if problem.kv_dtype == "fp8" else 2)  # K and V of one kv head
    partial_bytes = 2 * problem.group * problem.queries * (problem.head_dim + 2) * 4
    min_keys = max(MIN_TILES_PER_WARP * step, ceil_div(AMORTIZE * partial_bytes, key_bytes))
    parts = ceil_div(FILL_WAVES * resident * sms, problem.batch * problem.kv_heads)
    fill = min(ceil_div(max(context, 1), parts), MAX_PARTITION_BYTES // key_bytes)
    return ceil_div(max(fill, min_keys), step) * step


def choose_min_ctas(p: PagedDecodePlan, device) -> int:
    """The CTAs per SM main's registers are capped for (``__launch_bounds__(threads, n)``): as many as the shared
    memory holds (``device.smem_per_unit // smem_bytes``) and the register file holds at ``state_registers +
    REG_HEADROOM`` a thread; 0 (no cap) where that cap would be ``MAX_REGISTERS`` or more (it binds nothing). The
    plan takes it only where ``WEIGH_REGISTER_CAP`` (off: timed slower on the H100). The reasoning it was built on:
    an uncapped ptxas gave the fp8 kernel (D 128, 4 warps) 156 registers, 3 CTAs per SM where its 53 KB of shared
    memory hold 4, and ncu had it latency-bound (0.42 eligible warps per scheduler); capped for 4 it takes 128, no
    spill. The bf16 kernel's 100 KB hold 2: no cap (its code unchanged)."""
    threads = p.block_threads
    need = ceil_div(p.state_registers + REG_HEADROOM, REG_GRANULE) * REG_GRANULE
    n = min(device.smem_per_unit // p.smem_bytes, device.regs_per_unit // (threads * need),
            MAX_THREADS_PER_SM // threads)
    cap = device.regs_per_unit // (threads * max(n, 1)) // REG_GRANULE * REG_GRANULE
    return n if n >= 1 and cap < MAX_REGISTERS else 0


def merge_partials(plan: PagedDecodePlan) -> int:
    """The partitions per sequence the merge choice weighs: ``split_kv``; with the balanced partition (computed on
    the device) the most that the longest sequence of a stand-in batch at the hint has
    (``paged_decode_rule.standin_contexts``, ``balance_tiles``)."""
    if not plan.balance:
        return plan.split_kv
    tiles = (plan.tile_keys * balance_tiles(plan.part_tiles, lengths, plan.tile_keys, plan.config.warps, plan.balance)
             for lengths in standin_contexts(plan.problem, plan.context).values())
    return min(plan.split_kv, max(ceil_div(plan.context, keys) for keys in tiles))


def merged(plan: PagedDecodePlan) -> PagedDecodePlan:
    """``plan`` with its merge placed (``place_merge``): ``config.merge``, else ``choose_merge``'s at
    ``merge_partials`` (the class's ``WEIGH_MERGE``)."""
    where = plan.config.merge or choose_merge(plan.problem, merge_partials(plan), plan.config.warps, plan.sms,
                                              plan.WEIGH_MERGE)
    return place_merge(plan, where)


def place_merge(plan: PagedDecodePlan, where: str) -> PagedDecodePlan:
    """``plan`` (its parameters the merge kernel's) with the merge ``where``: the last CTA's takes ``TICKETS`` and
    writes O and LSE in main, no merge kernel."""
    if where == "kernel":
        return plan
    tickets = Param("TICKETS", (plan.problem.batch * plan.problem.kv_heads,), "uint32")
    return attrs.evolve(plan, params=plan.params + (tickets,) + plan.merge_params[-2:], merge_params=(), merge=where)


WEIGH_REGISTER_CAP = False
"""Whether a plan without ``min_ctas`` takes ``choose_min_ctas``' cap: no. Timed on the H100 (2026-12-06, commit
after h-pagedfp8, ``benchmarks/paged_decode.py --configs fp8_cvt=false:min_ctas=0,min_ctas=0,fp8_cvt=false``;
``benchmarks/runs/paged_decode_fp8_h100_2026-12-06c.log``): the fp8 kernel capped for 4 CTAs at 128 registers
ran slower than uncapped at 3 CTAs on all four fp8 rows (batch 8 / 64, 2k / 8k contexts): by 4-26 % with the cvt
widening, 1-18 % with the bit moves; the cvt widening alone was 1-9 % faster than the bit moves. ``PagedDecodeConfig(min_ctas=n)``
still forces a cap."""

WIDE_FP8 = True
"""Whether an fp8 plan without ``tile_keys`` takes wide tiles (``choose_tile_keys``): yes, by the SASS count (the
module docstring: 20 % fewer instructions per KV byte) and the H100's timing at ``WIDE_FP8_STAGES``."""

STAGES = 3
"""A warp's ring depth where the plan chooses it (``choose_stages``): three 16-key tiles in flight."""
WIDE_FP8_STAGES = 2
"""The ring depth of the wide fp8 tiles (``choose_stages``): two stages of 8 KiB. Timed on the H100 (2026-12-06,
``benchmarks/paged_decode.py --configs tile_keys=16,tile_keys=32:stages=2``,
``benchmarks/runs/paged_decode_wide_h100_2026-12-06f.log``): wide tiles at 3 stages (100 KB of rings, 2 CTAs per
SM) ran as the 16-key kernel (within 1 % on 6 of 8 fp8 rows, 4 % slower on the two batch-8 / 9.4k rows); at 2
stages (68 KB, 3 CTAs) 0.2-1.3 % faster at batch 64 and 2.6-7.8 % faster at batch 8 than either, on all 8 rows."""

WEIGH_LAST_CTA = True
"""Whether the choice weighs the last-CTA merge (``choose_merge``; one partition takes it anyway): yes, since stop 56
(``merge_seconds`` refitted to ``MERGE_RUNS``: the module docstring). Before: off (the H100 run of 2026-12-06, before
the merge kernel's lanes: 7 % faster at batch 8 / 9.4k, within +-2 % elsewhere, the old constants unfitted).
``PagedDecodeConfig(merge=...)`` forces either; the sm90 row keeps the merge kernel (``PagedDecodePlan.WEIGH_MERGE``)."""


def choose_merge(problem: PagedDecodeProblem, partials: int, warps: int, sms: int, weigh: bool = True) -> str:
    """The cheaper merge of ``merge_seconds`` (a tie: one launch), the merge kernel while ``WEIGH_LAST_CTA`` or
    ``weigh`` is off; one partition: the last-CTA merge whatever they say (no ticket, no rounds: main writes O and
    LSE, one launch instead of two)."""
    if partials == 1:
        return "last-cta"
    if not (WEIGH_LAST_CTA and weigh):
        return "kernel"
    cost = merge_seconds(problem, partials, warps, sms)
    return min(MERGES, key=lambda m: cost[m])


def forced_partition(context: int, splits: int, warps: int, tile_keys: int = TILE_KEYS) -> int:
    """The partition of ``splits`` forced partitions of a ``context``-key sequence (whole tiles, every warp alike)."""
    return ceil_div(ceil_div(ceil_div(max(context, 1), tile_keys), splits), warps) * warps * tile_keys


def choose_tile_keys(problem: PagedDecodeProblem, config: PagedDecodeConfig, record, target: str) -> int:
    """The keys of a kv tile: ``config.tile_keys``, else ``WIDE_TILE_KEYS`` for fp8 KV where ``WIDE_FP8`` (the module
    docstring's SASS counts), else ``TILE_KEYS``; a plan record without wide tiles (``WIDE_TILES`` False: the sm90
    kernel's producer issues 16-key tiles) refuses a forced wide one."""
    if config.tile_keys not in (None, TILE_KEYS) and not record.WIDE_TILES:
        raise ContractError(f"{target} paged decode tile_keys: this kernel's tiles are {TILE_KEYS} keys",
                            operand="tile_keys", check="parameters", expected=f"None or {TILE_KEYS}",
                            found=config.tile_keys)
    if config.tile_keys is not None:
        return config.tile_keys
    return WIDE_TILE_KEYS if record.WIDE_TILES and WIDE_FP8 and problem.kv_dtype == "fp8" else TILE_KEYS


def choose_stages(config: PagedDecodeConfig, tile_keys: int) -> int:
    """``config.stages``, else ``WIDE_FP8_STAGES`` for wide tiles (fp8's) and ``STAGES`` for 16-key ones."""
    if config.stages is not None:
        return config.stages
    return WIDE_FP8_STAGES if tile_keys == WIDE_TILE_KEYS else STAGES


INFLIGHT = False
"""Whether an fp8 plan without ``PagedDecodeConfig.inflight`` takes ``choose_inflight_ring``'s warps and stages: no.
Timed (stop 53, an H100, ``benchmarks/gpu_stop45.sh fp8eff``, 8 fp8 rows at batch 8 / 32, 2k / 8k): 1.3-32 % slower
than the default ring on every row, as were 3 stages (0.9-11 %) and 2 warps x 4 stages; the fp8 kernel is not short
of loads in flight. Why it was tried (journal "Stop 53: fp8eff"): at batch 64 the
H200 read the fp8 cache at 88-89 % of its read rate where bf16 read at 103-105 % (no tail there: 16k CTAs), and the
wide fp8 kernel keeps fewer bytes in flight an SM (``inflight_bytes``: 3 CTAs x 4 warps x 1 tile of 8 KiB, 96 KiB)
than bf16's (2 x 4 x 2 tiles, 128 KiB): a 2-stage ring waits for tile ``i`` with nothing else in flight, then
issues ``i + 1``."""
INFLIGHT_MIN_WARPS = 8  # the warps an SM must keep (the bf16 D 128 kernel's: 2 CTAs x 4) in choose_inflight_ring
INFLIGHT_WARPS = (2, 4)  # choose_inflight_ring's candidates: warps a CTA (1 warp: a CTA start and Q load per 32 keys) ...
INFLIGHT_STAGES = (2, 3, 4, 5, 6)  # ... and ring depths


def inflight_bytes(p: PagedDecodePlan, device) -> int:
    """The K and V bytes an SM keeps in flight while its warps compute: ``stages - 1`` tiles a warp (the ring's
    copies issued ahead of the tile it computes) x its warps x ``resident_ctas``."""
    return resident_ctas(p, device) * p.config.warps * (p.config.stages - 1) * 2 * p.tile_words * 4


def choose_inflight_ring(probe: PagedDecodePlan, device) -> tuple[int, int]:
    """The (warps, stages) of ``INFLIGHT_WARPS`` x ``INFLIGHT_STAGES`` with the most ``inflight_bytes`` among those
    that keep ``INFLIGHT_MIN_WARPS`` warps an SM (their issue hides the loop's latencies), then the most warps,
    the most CTAs (shorter partitions: a shorter tail), the fewest stages. fp8, D 128 (8 KiB tiles): 2 warps x 3
    stages, 4 CTAs of 52 KB, 128 KiB an SM (bf16's; 4 warps x 3 stages holds as much in 2 CTAs)."""
    best = None
    for w in INFLIGHT_WARPS:
        for s in INFLIGHT_STAGES:
            p = attrs.evolve(probe, config=attrs.evolve(probe.config, warps=w, stages=s))
            held = resident_ctas(p, device) * w
            if p.smem_bytes <= device.smem_per_unit and held >= INFLIGHT_MIN_WARPS:
                key = (inflight_bytes(p, device), held, resident_ctas(p, device), -s)
                best = max(best or (key, (w, s)), (key, (w, s)))
    return best[1]


def check_inflight(problem: PagedDecodeProblem, config: PagedDecodeConfig, keys: int, target: str) -> bool:
    """Whether the plan takes ``choose_inflight_ring``: ``config.inflight``, else ``INFLIGHT``, for fp8 wide tiles
    only; forced for a 16-bit cache, 16-key tiles (the sm90 kernel's) or beside a forced ``stages`` or ``warps``:
    refused."""
    if not (INFLIGHT if config.inflight is None else config.inflight):
        return False
    if config.inflight and (problem.kv_dtype != "fp8" or keys != WIDE_TILE_KEYS):
        raise ContractError(f"{target} paged decode inflight: the fp8 wide tiles' ring", operand="inflight",
                            check="parameters", expected=f"kv_dtype fp8 with tile_keys {WIDE_TILE_KEYS}",
                            found=f"kv_dtype {problem.kv_dtype}, tile_keys {keys}")
    if config.inflight and (config.stages is not None or config.warps != PagedDecodeConfig().warps):
        raise ContractError(f"{target} paged decode inflight: it chooses the warps and stages", operand="inflight",
                            check="parameters", expected="warps and stages left to the plan",
                            found=f"warps {config.warps}, stages {config.stages}")
    return problem.kv_dtype == "fp8" and keys == WIDE_TILE_KEYS


BALANCE = False
"""Whether a plan without ``PagedDecodeConfig.balance`` widens its partition on the device (``balance_tiles``): no.
Timed (stop 53, an H100, ``gpu_stop45.sh pagedb8``, two runs): with ``SPLIT_MAJOR`` 2-4 % faster at batch 8 and 9.4k /
15k, 1-4 % slower at 1.8k; the choice needs the lengths, which the host does not read: ``paged_decode_rule.WEIGH_BALANCE``
(off) weighs it by the estimate over stand-in batches of the hint."""
SPLIT_MAJOR = False
"""Whether a plan without ``PagedDecodeConfig.split_major`` launches its CTAs partition-major (``pid = split x batch x
kv_heads + b kv_heads + g``): no (alone within 1 % of the default at batch 8; with ``BALANCE``: its docstring). Partition-major, every sequence's
first partitions come first and the empty CTAs (partitions past a sequence's length) last, where bh-major (``pid = (b
kv_heads + g) split_kv + split``) puts each sequence's empty ones between the next sequences' partitions: a CTA that
exits at once still holds its slot for its length's load (the 9.4k draw at 512 keys: 1800 of 3008 CTAs empty;
balanced, 2784), and a non-empty CTA late in the order starts only after those before it drained."""
MAX_BALANCE_BATCH = 32  # the balanced partition sums every sequence's length in each CTA (one load each)


def check_balance(problem: PagedDecodeProblem, config: PagedDecodeConfig, slots: int, target: str) -> int:
    """The plan's ``balance`` (``balance_divisor``, or 0: off): ``config.balance``, else ``BALANCE``; forced where
    one wave cannot hold a CTA per sequence and kv head or the batch passes ``MAX_BALANCE_BATCH``: refused."""
    if not (BALANCE if config.balance is None else config.balance):
        return 0
    divisor = balance_divisor(problem, slots)
    if divisor < 1 or problem.batch > MAX_BALANCE_BATCH:
        raise ContractError(f"{target} paged decode balance: one wave of CTAs over every sequence and kv head",
                            operand="balance", check="shape",
                            expected=f"batch < {slots} CTA slots // kv_heads = {slots // problem.kv_heads} "
                                     f"(balance_divisor >= 1), batch <= {MAX_BALANCE_BATCH}",
                            found=f"batch {problem.batch}, kv_heads {problem.kv_heads}")
    return divisor


def last_round(plan: PagedDecodePlan, target: str) -> PagedDecodePlan:
    """``config.merge_batch``'s last-CTA merge: ``merge_batch`` partials an item a round, and as
    many (row, dim pair) items a thread as one pass needs, at most ``MERGE_PASS`` and ``LAST_LOADS // merge_batch``
    (its loads in flight together); with the merge kernel: refused."""
    if plan.merge != "last-cta":
        raise ContractError(f"{target} paged decode merge_batch: the last-CTA merge's rounds", operand="merge_batch",
                            check="parameters", expected="merge='last-cta'", found=f"merge={plan.merge!r}")
    nb = plan.config.merge_batch
    items = ceil_div(plan.merge_items, plan.threads)
    return attrs.evolve(plan, last_batch=nb, last_pass=max(1, min(MERGE_PASS, items, LAST_LOADS // nb)))


def check_context(problem: PagedDecodeProblem, context) -> int:
    if context is None:
        return problem.capacity
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ContractError("paged decode context: the longest context's hint is a positive int", operand="context",
                            check="parameters", expected=">= 1", found=repr(context))
    return min(context, problem.capacity)


def choose_cvt(problem: PagedDecodeProblem, config: PagedDecodeConfig, arch: str, target: str) -> bool:
    """Whether fp8 pairs widen by ``cvt.rn.f16x2.e4m3x2``: ``config.fp8_cvt``, else wherever ``arch`` has it (sm_89+:
    one instruction a K pair, two a V pair, where moving the bits takes five); never for a 16-bit cache."""
    has = arch_number(arch) >= CVT_ARCH
    if config.fp8_cvt and not has:
        raise ContractError(f"{target} paged decode: fp8_cvt needs cvt.rn.f16x2.e4m3x2", operand="fp8_cvt",
                            check="parameters", expected=f"an arch of sm_{CVT_ARCH} or newer", found=arch)
    return problem.kv_dtype == "fp8" and (has if config.fp8_cvt is None else config.fp8_cvt)


def plan_paged_decode(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None, context: int | None = None,
                      sms: int | None = None, target: str = "sm80", record=PagedDecodePlan,
                      arch: str | None = None) -> PagedDecodePlan:
    """The plan of ``problem`` (``config`` None: the default, its partition by ``choose_partition`` for
    ``context``, default the capacity, on ``sms`` SMs, default ``kernels.devices.planned("sm80")``: the NVIDIA
    GPU, and ``arch``, the arch it is compiled for, default that GPU's: ``choose_cvt``); ``target`` names the
    kernel in errors, ``record`` is its plan's class (the sm90 kernel's extends this one). The module flags it
    reads: ``paged_decode_rule.PLAN_FLAGS`` (``WEIGH_BALANCE``'s rule: ``balance_by_rule``)."""
    check_config(config, (PagedDecodeConfig,), f"{target} paged decode config")
    config = config or PagedDecodeConfig()
    if problem.group * problem.queries > MAX_ROWS:
        raise ContractError(f"{target} paged decode: heads / kv_heads x queries query rows per kv head",
                            operand="queries", check="shape", expected=f"at most {MAX_ROWS}",
                            found=problem.group * problem.queries)
    context = check_context(problem, context)
    sms = sms or planned("sm80").units
    mma_type = "f16" if problem.kv_dtype == "fp8" else problem.q_dtype
    instrs = (MMA.format(t=mma_type), PACK.format(t=mma_type), PACK.format(t=problem.q_dtype))
    keys = choose_tile_keys(problem, config, record, target)
    inflight = check_inflight(problem, config, keys, target)
    config = attrs.evolve(config, stages=choose_stages(config, keys))  # the plan's config holds the stages chosen
    if inflight:  # the plan's config holds the warps and stages chosen
        probe = record(problem, config, 1, keys * config.warps, context, sms, *instrs, (), (), "kernel", tile_keys=keys)
        warps, stages = choose_inflight_ring(probe, planned("sm80"))
        config = attrs.evolve(config, warps=warps, stages=stages)
    if config.partition and config.partition % keys:
        raise ContractError(f"{target} paged decode partition: keys per CTA, whole tiles", operand="partition",
                            check="parameters", expected=f"a multiple of tile_keys={keys}", found=config.partition)
    if config.partition or config.splits:
        partition = config.partition or forced_partition(context, config.splits, config.warps, keys)
    else:  # the kernel's shared memory (no partition in it) sets the CTAs resident per SM
        probe = record(problem, config, 1, keys * config.warps, context, sms, *instrs, (), (), "kernel", tile_keys=keys)
        partition = choose_partition(problem, context, sms, config.warps, resident_ctas(probe, planned("sm80")), keys)
    splits = ceil_div(context, partition)
    shapes, dtypes = problem.shapes(), problem.dtypes()
    storage = {name: STORAGE.get(d, {"i32": "int32", "f32": "float32"}.get(d)) for name, d in dtypes.items()}
    names = ("Q", "K_CACHE", "V_CACHE", "BLOCK_TABLE", "CONTEXT_LENS") + (("K_SCALE", "V_SCALE") if problem.scaled
                                                                           else ())
    rows = problem.group * problem.queries
    slots = problem.batch * problem.kv_heads * splits
    work = (Param("WO", (slots, rows, problem.head_dim), "float32"), Param("WM", (slots, rows), "float32"),
            Param("WL", (slots, rows), "float32"))
    params = tuple(Param(n, shapes[n], storage[n]) for n in names) + work
    outputs = (Param("O", shapes["O"], storage["O"]), Param("LSE", shapes["LSE"], "float32"))
    merge = (params[4],) + work + outputs  # the merge kernel's; place_merge moves them for the last CTA's
    plan = record(problem, config, splits, partition, context, sms, *instrs, params, merge, "kernel",
                  choose_cvt(problem, config, arch or planned("sm80").arch, target), tile_keys=keys)
    if plan.smem_bytes > planned("sm80").smem_per_unit:
        raise ContractError(f"{target} paged decode: the warps' rings exceed the shared memory", operand="stages",
                            check="shape", expected=f"at most {planned('sm80').smem_per_unit} bytes",
                            found=plan.smem_bytes)
    balance = check_balance(problem, config, resident_ctas(plan, planned("sm80")) * sms, target)
    plan = attrs.evolve(plan, balance=balance) if balance else plan
    if SPLIT_MAJOR if config.split_major is None else config.split_major:
        plan = attrs.evolve(plan, split_major=True)
    if not balance and config.balance is None and not BALANCE and problem.batch <= MAX_BALANCE_BATCH:
        plan = balance_by_rule(plan, config, resident_ctas(plan, planned("sm80")) * sms, planned("sm80"), merged)
    plan = merged(plan)
    plan = last_round(plan, target) if config.merge_batch is not None else plan
    plan = attrs.evolve(plan, pdl=True) if choose_pdl(config, arch or planned("sm80").arch, target) else plan
    ctas = config.min_ctas if config.min_ctas is not None else (
        choose_min_ctas(plan, planned("sm80")) if plan.register_model and WEIGH_REGISTER_CAP else 0)
    return attrs.evolve(plan, min_ctas=ctas) if ctas else plan


__all__ = ["AMORTIZE", "CVT_ARCH", "INFLIGHT", "INFLIGHT_MIN_WARPS", "INFLIGHT_STAGES", "INFLIGHT_WARPS", "REG_HEADROOM", "WEIGH_LAST_CTA", "WEIGH_REGISTER_CAP", "BALANCE", "MAX_BALANCE_BATCH", "SPLIT_MAJOR", "FILL_WAVES", "MAX_PARTITION_BYTES", "MAX_ROWS", "MERGES", "MERGE_BATCH", "MERGE_CTA_S", "MERGE_PASS", "MERGE_RUNS", "MERGE_THREADS", "LAUNCH_S", "PARTIAL_S", "MAX_MERGE_BATCH", "LAST_LOADS",
           "MIN_TILES_PER_WARP", "Q_PRESCALE", "RESIDENT_CTAS", "TILE_KEYS", "TILE_KEY_CHOICES", "WIDE_FP8", "WIDE_TILE_KEYS",
           "STAGES", "WIDE_FP8_STAGES", "PagedDecodeConfig", "PagedDecodePlan", "balance_divisor", "balance_tiles",
           "check_balance", "check_inflight", "choose_cvt", "choose_inflight_ring", "inflight_bytes", "choose_merge", "choose_min_ctas",
           "choose_partition", "choose_stages", "choose_tile_keys",
           "forced_partition", "last_round", "merge_kernel_ctas", "merge_partials", "merge_seconds", "merged", "place_merge", "plan_paged_decode",
           "resident_ctas"]
