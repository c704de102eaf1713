"""Attention forward on Hopper (FlashAttention-3 class, issue 38): the plan.

The problem, its reference, error bound and kv tiling are the target-neutral ones
(``kernels.attention.problem``: ``AttentionProblem``, ``kv_tiles_for``, the base-2 online softmax); this
module decides how an sm_90a CTA computes them. Pure Python (attrs): no TIRx.

**Work split** (FA3, Shah et al. 2024, "FlashAttention-3", §3.1). A work item is a (query block of
``block_q`` rows, batch x head), in sections of ``section_heads`` batch x heads whose K and V fit
``L2_SECTION_BYTES`` (``work_item``): a section's items run before the next section's, within it the longest
query blocks first (causal: the last block runs the most kv tiles), so that the CTAs running at once read the K
and V of a few heads from L2 rather than of every head from DRAM; one CTA per item, or (``persistent``) one per SM
walking the items ``pid, pid + ctas, ...`` (or by ``Sm90AttentionConfig.walk``: ``WALKS``) with the mbarrier ring
running on from one item into the next. Warpgroup 0 the producer (``setmaxnreg.dec`` to
``REGS``' first count; one thread issues every TMA load), warpgroups 1 .. ``consumers`` the consumers
(``setmaxnreg.inc`` to its second), each owning 64 query rows (one ``wgmma`` M): ``block_q`` = 128 rows with the
default ``CONSUMERS``, 192 with three (``Sm90AttentionConfig.consumers``, D 64: FA3's tile there). The sm90 GEMM's
register targets (two consumers) and its TMA / mbarrier conventions (``kernels.sm90.gemm_plan``, ``gemm_emit``) are
reused as they are.

**Shared memory.** Q (``block_q x D``, loaded once an item by TMA) and a ring of ``stages`` (K tile, V tile) pairs,
each tile ``block_kv x D``. Every tile is stored as ``D / 64`` column blocks of 64 elements (128 bytes a
row: one ``CU_TENSOR_MAP_SWIZZLE_128B`` box each, the widest 128-byte-swizzled box), the blocks one after
another: what TMA writes and what the ``wgmma`` descriptors read (K-major Q and K, M/N-major V).
mbarriers: Q's "full" and "empty" (one arrival per consumer warpgroup once its GEMMs of an item retired: the
next item's Q may land; persistent, once its last ``S = Q K^T`` retired: ``early_q_release``), each stage's "full" (the producer's ``expect_tx`` of K and V's bytes; opt-in
``split_kv_barrier``: K's, V's on a barrier of its own) and "empty" (one arrival per consumer warpgroup once its
``P V`` of the stage retired).

**Tensor maps.** Q, K, V are viewed 3-D, ``(D, S, B x H)`` innermost first, so that a box past a
sequence's end is out of the tensor (TMA fills it with zeros) rather than the next head's rows: the
odd lengths need no copy predicate. GQA: K / V's map is over the ``B x Hkv`` kv heads, a CTA reading
kv head ``h // group``.

**Per consumer warpgroup, per kv tile** (``wgmma.mma_async``, f32 accumulate):

* ``S = Q K^T``: SS-form ``m64n{block_kv}k16``, ``D / 16`` k-steps, both operands K-major in shared
  memory; ``block_kv / 2`` f32 accumulators a thread.
* The online softmax on the accumulator fragment (thread ``32 w + l`` holds rows ``16 w + l / 4`` and
  ``+ 8`` of its 64, keys ``8 c + 2 (l % 4) + {0, 1}``): the row max over the thread's registers and
  the quad (``shfl.xor`` 1, 2), ``p = 2^(s c - m c)`` (``c = scale_log2``), the row sum, ``O *= alpha``
  (``overlap`` / ``pingpong``: the schedules of ``Sm90AttentionConfig``, FA3 §3.1-3.2).
  Masked (element by element) only on the tiles ``kv_full_tiles_for`` leaves: causal's diagonal tiles
  and the tail past ``Skv``; tiles wholly above the diagonal are not run (``kv_tiles_for``).
* ``O += P V``: the S accumulators of key columns ``16 kk .. 16 kk + 15`` are, register for register,
  the RS-form A fragment of k-step ``kk`` (PTX ISA 9.7.17.5.1.1: ``isa.hopper_layout.a_fragment_coords``
  and ``accumulator_coords`` agree), so P is S converted to 16 bits in place of the registers
  (``cvt.rn.{bf16,f16}x2.f32``), never through shared memory; B = the V tile, M/N-major
  (``b_major="mn"``: ``imm-trans-b`` 1), ``m64n{D}k16``, ``block_kv / 16`` k-steps.

**fp8** (e4m3 Q, K, V with per-tensor scales ``SCALES = [sq, sk, sv]``, bf16 O; D 128 and 128-key tiles: one
128-byte swizzled row each). Both GEMMs are e4m3 wgmma (k32); e4m3's B operand has no transposed form, so V is
transposed in shared memory by the producer warpgroup's warps 1-3 (``TRANSPOSERS``: 4 x 4-byte blocks, ``prmt``)
into a third tile of the stage, in the key order of P's A fragment (``attention_emit.fp8_key``): the e4m3 A
fragment of a 32-key k-step holds, per thread, exactly the keys of its S registers, only in another order, so P
is S converted in registers with no move between threads. The scores' factor is ``c sq sk``, P is computed as
``2^(s c - m c + P_SHIFT)`` (``problem.P_SHIFT``), O is ``sv P V / l`` and the LSE subtracts the shift.

**The end.** ``O / l`` stored from the registers (column pairs, rows past ``Sq`` not stored; opt-in
``epilogue="tma"``: staged in the warpgroup's rows of the Q tile and stored by TMA, Q's "empty" arrival after the
stores read them; ``"tma_buffer"``: staged in a buffer of its own, the stores waited for only before the buffer's
next use) and ``LSE = (m c + log2 l) ln 2`` per row by the quad's first thread.
"""

from __future__ import annotations

import operator

import attrs

from ...errors import ContractError
from ..attention.problem import (OUT_DTYPES, P_SHIFT, SCALED, AttentionProblem, check_indexing, work_item,  # noqa: F401
                                 workgroup_tiles)
from ..common import Param, PlanRecord, ceil_div, check_config
from ..devices import DEVICES
from .gemm_plan import (CONSUMER_REGS, DTYPES, ELEMENT_BYTES, PRODUCER_REGS, ROW_BYTES, TMA_BOX_MAX, WARPGROUP,
                        WGMMA_M, WGMMA_TYPES, wgmma_k)

CONSUMERS = 2
"""Consumer warpgroups per CTA by default (``Sm90AttentionConfig.consumers``), ``WGMMA_M`` query rows each: FA3's
128-row blocks at D 128 (``hopper/tile_size.h``, ``tile_size_fwd_sm90``). At D 64 FA3 runs three (192 rows:
``WIDE_HEAD_DIM``), an option here."""
BLOCK_Q = CONSUMERS * WGMMA_M
"""The query rows of the default block (``Sm90AttentionPlan.block_q``: ``consumers x WGMMA_M``)."""
REGS = {CONSUMERS: (PRODUCER_REGS, CONSUMER_REGS), 3: (32, 160)}
"""``setmaxnreg`` targets (producer warpgroup, each consumer warpgroup) by the consumer warpgroups a CTA runs (the
keys: ``Sm90AttentionConfig.consumers``' values): two, the sm90 GEMM's pair; three, FA3's with three MMA warpgroups
(``hopper/flash_fwd_kernel_sm90.h``' ``LoadRegisterRequirement`` / ``MmaRegisterRequirement``), the SM's whole
``REGISTER_FILE`` over 512 threads."""
REGISTER_FILE = DEVICES["H200"].regs_per_unit
"""32-bit registers of an SM (``kernels.devices``; the same on every compute capability 9.0 card): the bound on
``WARPGROUP x (producer + consumers x consumer)`` registers of ``REGS``, each a count ``setmaxnreg`` takes
(``isa.hopper_layout.SETMAXNREG``)."""
WIDE_HEAD_DIM = 64
"""The largest head dim more than ``CONSUMERS`` consumer warpgroups run (FA3's ``tile_size_fwd_sm90``: 192-row
blocks at head dim <= 64, 128 rows above; a D 128 O fragment, ``D / 2`` registers, leaves too few of three
consumers' cap for S and P)."""
REGISTER_SLACK = 32
"""Registers a consumer thread needs beside its S, P and O fragments (addresses, the row state, loop counters):
``registers``' estimate."""
COLUMNS = 64
"""Elements of one 128-byte swizzled row of 16-bit data: a tile's column block, TMA's box width
(``Sm90AttentionPlan.columns``: 128 for fp8)."""
BARRIER_BYTES = 1024
"""Shared memory kept beside the tiles for the static mbarriers (``kernels.sm90.gemm_plan``'s slack)."""
STORAGE = {k: DTYPES[k] for k in ("bf16", "f16", "fp8")}
"""The input dtypes this kernel takes (wgmma ``.bf16`` / ``.f16`` / ``.e4m3``)."""
SMEM_DTYPES = {"bf16": DTYPES["bf16"], "f16": DTYPES["f16"], "fp8": "uint8"}
"""The shared memory's element type: the inputs', bytes for fp8 (the wgmma views of it are ``.e4m3``: the
pattern takes ``uint8`` for it)."""
FP8_HEAD_DIM = FP8_BLOCK_KV = ROW_BYTES
"""fp8: D and ``block_kv`` are one 128-byte swizzled row (Q and K rows; the transposed V tile's rows of keys)."""
TRANSPOSERS = 3
"""fp8: the producer warpgroup's warps 1-3 transpose V (warp 0's first thread issues the TMA loads)."""
PACK = "cvt.rn.{t}x2.f32"
EPILOGUES = ("registers", "tma", "tma_buffer")
"""``Sm90AttentionConfig.epilogue``: how O is stored."""
STAGED_EPILOGUES = ("tma", "tma_buffer")
"""The epilogues that stage O in shared memory and store it by TMA (O's tensor map)."""
L2_SECTION_BYTES = 32 * 1024 * 1024
"""The K and V bytes of the batch x heads of one section of work items (``section_heads``): FlashAttention-3's
tile scheduler's ``size_l2`` (``hopper/tile_scheduler.hpp``: 32 MB for K and V of an H100's 50 MB L2). Measured
without sections (item ``u``: batch x head ``u % heads_total``): D 128, 8 x 2k tokens, 16 heads: 2.2 GB read
from DRAM (K and V once per query block), L2 hit rate 8 %, DRAM 86 % busy: a memory-bound 358 TFLOP/s."""


def section_heads(problem: AttentionProblem) -> int:
    """The batch x heads of one section of work items. Causal: the most whose K and V fit ``L2_SECTION_BYTES``, a
    power of two of kv heads (at least one) times the query heads sharing each (GQA), at most every batch x head
    (FA3's longest-processing-time-first scheduler: the long query blocks of the section first, spread over its
    heads). Not causal (every query block the same length): the query heads of one kv head, so that a kv head's
    query blocks run together (FA3's static persistent scheduler runs a head's query blocks together; here, with
    GQA, the query heads of the kv head alternate within each block)."""
    group = problem.heads // problem.kv_heads
    if not problem.causal:
        return group
    kv_bytes = 2 * problem.seq_kv * problem.head_dim * ELEMENT_BYTES[problem.dtype]
    fit = max(1, L2_SECTION_BYTES // kv_bytes)
    return min(1 << (fit.bit_length() - 1), problem.batch * problem.kv_heads) * group


WALKS = ("round_robin", "zigzag", "fold")
"""``Sm90AttentionConfig.walk``: how persistent CTAs take the work items (``work_item``'s order: sections of batch x
heads, the longest query blocks first within each), in rounds of ``ctas`` walk positions (``walk_item``):
``"round_robin"``, CTA ``pid`` position ``pid`` of every round, the position the item; ``"zigzag"``, the
boustrophedon, ``pid`` in the even rounds and ``ctas - 1 - pid`` in the odd ones (a round's longest item then the next
round's shortest: balanced where the order is longest first throughout, not where sections of several rounds each
start long again); ``"fold"``, positions taken two at a time (``2 pid, 2 pid + 1`` of a round of ``2 ctas``) over each
section's list folded (``fold_item``: its longest, its shortest, its second longest, ...), so that every CTA runs
pairs of a long query block and a short one of one section (causal: about equal pairs). Each CTA's kv tiles:
``cta_loads``."""
PY_OPS = (min, operator.floordiv, operator.mod)
"""(min, div, mod) of ints: ``work_item``'s, ``fold_item``'s and ``walk_item``'s ``ops`` in Python."""


def walk_position(pid, i, ctas: int, walk: str, ops=PY_OPS):
    """The walk position of persistent CTA ``pid``'s ``i``-th item by ``walk`` (``WALKS``): ints or TIR expressions
    (``ops``: ``T.min``, ``T.truncdiv``, ``T.truncmod``; ``pid`` and ``i`` are never negative)."""
    _, div, mod = ops
    if walk == "zigzag":
        return i * ctas + pid + mod(i, 2) * (ctas - 1 - 2 * pid)
    if walk == "fold":
        return 2 * (pid + div(i, 2) * ctas) + mod(i, 2)
    return pid + i * ctas


def walk_items(pid, items: int, ctas: int, walk: str):
    """The work items CTA ``pid`` of ``ctas`` walks by ``walk`` (``walk_position`` below ``items``; an int or TIR
    expression): each of its positions of a round below ``items`` (by ``"zigzag"``, the last round's first CTAs where
    it is even, its last where it is odd)."""
    if walk == "fold":
        return (items - 1 - 2 * pid) // (2 * ctas) + (items - 2 - 2 * pid) // (2 * ctas) + 2
    mirrored = walk == "zigzag" and items // ctas % 2 == 1
    return (items - 1 - (ctas - 1 - pid if mirrored else pid)) // ctas + 1


def fold_item(v, q_blocks: int, heads_total: int, section: int, ops=PY_OPS):
    """The work item (``work_item``'s index) at position ``v`` of the ``"fold"`` walk: within each section's
    ``width x q_blocks`` items (``work_item``), position ``2 k`` its item ``k`` and ``2 k + 1`` its item ``width x
    q_blocks - 1 - k`` (a permutation of the section)."""
    minimum, div, mod = ops
    per = section * q_blocks
    first = div(v, per) * section
    width = section if heads_total % section == 0 else minimum(section, heads_total - first)
    r = mod(v, per)
    k = div(r, 2)
    return v - r + k + mod(r, 2) * (width * q_blocks - 1 - 2 * k)


def walk_item(pid, i, ctas: int, walk: str, q_blocks: int, heads_total: int, section: int, ops=PY_OPS):
    """The work item (``work_item``'s index) persistent CTA ``pid`` runs ``i``-th by ``walk``: its ``walk_position``,
    through ``fold_item`` for ``"fold"``."""
    v = walk_position(pid, i, ctas, walk, ops)
    return fold_item(v, q_blocks, heads_total, section, ops) if walk == "fold" else v


def cta_loads(problem: AttentionProblem, per_block, ctas: int, walk: str) -> list:
    """Each of ``ctas`` persistent CTAs' sum of ``per_block`` (a weight a query block: kv tiles, clocks) over the
    items it walks by ``walk`` (``walk_item``), in its order of items; ``max`` over ``sum / ctas``: the busiest CTA's
    excess."""
    weights, q_blocks, heads = item_weights(problem, per_block), len(per_block), problem.batch * problem.heads
    section = section_heads(problem)
    return [sum(weights[walk_item(pid, i, ctas, walk, q_blocks, heads, section)]
                for i in range(walk_items(pid, len(weights), ctas, walk))) for pid in range(ctas)]


def item_weights(problem: AttentionProblem, per_block) -> list:
    """``per_block`` (a weight a query block: kv tiles, clocks) of each work item, in ``work_item``'s order."""
    heads, section = problem.batch * problem.heads, section_heads(problem)
    return [per_block[work_item(u, len(per_block), heads, section)[1]] for u in range(len(per_block) * heads)]


@attrs.frozen
class Sm90AttentionConfig:
    """The sm90 attention kernel's choices: ``block_kv`` keys per K / V tile (a multiple of 16, at most
    ``TMA_BOX_MAX``: the S wgmma's N), ``stages`` (K, V) pairs in the ring, ``skip_masked`` (causal:
    skip the kv tiles wholly above a query block's diagonal), the schedule (``overlap``, ``pingpong``)."""

    block_kv: int = 128
    stages: int = 2
    skip_masked: bool = True
    overlap: bool = False
    """FA3's intra-warpgroup overlap: tile ``j``'s ``S`` issued before tile ``j - 1``'s ``P V``, so that tile ``j``'s
    softmax runs while that ``P V`` is in the tensor cores (P of ``j - 1`` and S of ``j`` live at once)."""
    pingpong: bool = False
    """FA3's ping-pong (needs ``overlap``): the consumer warpgroups issue their GEMMs in turns, a round robin over
    ``consumers`` (named barriers ``attention_emit.order_barrier + wg``), so that one's softmax runs under the others'
    GEMMs."""
    persistent: bool = False
    """One CTA per SM (``ctas``: at most that many), each walking the work items (query block, batch x head)
    ``pid, pid + ctas, ...`` (``work_item``'s order; ``walk``: other orders), the ring continuing from one item into
    the next: the producer loads
    the next item's Q and K / V while the consumers store the last one's O. False: one CTA per item."""
    ctas: int = 0
    """``persistent``: the CTAs (0: one per SM)."""
    split_kv_barrier: bool = False
    """A stage's K and V tiles each on their own "full" mbarrier (the producer's ``expect_tx`` of each tile's bytes
    on its own; FA3's ``pipeline_k`` / ``pipeline_v``): tile ``j``'s ``S = Q K^T`` waits only for K(j), its ``P V``
    (fp8: V's transpose) for V(j). False: one barrier for both (``expect_tx`` of K and V's bytes)."""
    epilogue: str = "registers"
    """How O leaves: ``"registers"`` (each thread's column pairs stored to global memory, rows past ``Sq`` not
    stored), ``"tma"`` (each consumer warpgroup's 64 rows of O into its own rows of the Q tile once its GEMMs
    retired, then TMA stores, clipped at ``Sq``; Q's "empty" arrival once the stores have read them) or
    ``"tma_buffer"`` (O into a buffer of its own after the ring, ``block_q x D``, then TMA stores nobody waits for
    but the next item's epilogue, before it writes the buffer again, and the CTA's end; Q released as with
    ``"registers"``). 16-bit inputs only: fp8's Q tile is half O's bytes."""
    consumers: int = CONSUMERS
    """Consumer warpgroups (``REGS``' keys), ``WGMMA_M`` query rows each: a query block of ``block_q`` rows. Three
    (FA3's 192-row blocks at D 64): each K / V tile serves 192 rows, so that a tile's fixed costs (barriers, the
    producer's issue, the softmax's latency) spread over half as much work again; ``setmaxnreg`` caps the consumers
    at ``REGS[3]``. 16-bit inputs at head dim <= ``WIDE_HEAD_DIM``, with ``block_kv`` whose ``registers`` fit."""

    item_overlap: bool = False
    """Ping-pong's round robin at the loop's joint issues only (FA3's ``warp_scheduler_barrier``, ``hopper/
    mainloop_fwd_sm90_tma_gmma_ws.hpp``): an item's first ``S`` and last ``P V`` issued outside the turns, the first
    turn's arrival once a CTA (not once an item), the row sums (``attention_epilogue.row_total``) taken while the last
    ``P V`` runs. A warpgroup then starts its next item (its first ``S`` and softmax) under the others' last ``P V`` and
    epilogue; False: each item's first turn waits for the last warpgroup to have finished the item before (its
    epilogue and item start). Needs ``pingpong``."""
    walk: str = "round_robin"
    """``persistent``: the order the CTAs take the work items in (``WALKS``: ``"round_robin"``, ``pid, pid + ctas,
    ...``; ``"zigzag"``; ``"fold"``, a long and a short query block of a section in turn); each CTA's kv tiles:
    ``cta_loads``."""
    exps_before_pv_wait: int = 0
    """The overlapped loop's ``P V`` wait placed after the ``n``-th exp of a tile (softmax's order: the first row's
    ``block_kv / 4``, then the second's; FA3's SASS issues 13-19 there at D 128). 0: where ptxas puts it, ahead of
    every exp (the bf16 pack of P, which writes registers the in-flight RS wgmma reads, follows a full wait; ptxas
    hoists the wait to interleave the packs with the exps). ``n``: thread 0 of each consumer warpgroup stores the
    ``n``-th exp to a shared word of its own nobody reads (``Sm90AttentionPlan.sink``) just before the wait; ptxas
    keeps a shared store ahead of a later wgmma wait, so the wait follows that exp (FA3's K release does so by accident:
    its address register is an S register the exps free). Needs ``overlap``; 1 .. ``block_kv / 2``."""

    @property
    def block_q(self) -> int:
        """The query rows of a work item: ``consumers x WGMMA_M``."""
        return self.consumers * WGMMA_M

    def check(self, problem: AttentionProblem, smem_bytes: int) -> None:
        """A ContractError naming the field that breaks a rule of the kernel or of the SM's shared memory."""
        def bad(field, rule, expected, found):
            raise ContractError(f"sm90 attention config {field}: {rule}", operand=field, check="parameters",
                                expected=expected, found=found)
        if not isinstance(self.block_kv, int) or self.block_kv % 16 or not 16 <= self.block_kv <= TMA_BOX_MAX:
            bad("block_kv", "whole 16-key wgmma k-steps, at most one TMA box of rows", "16, 32, ..., 256", self.block_kv)
        if not isinstance(self.stages, int) or self.stages < 1:
            bad("stages", "at least one (K, V) stage", ">= 1", self.stages)
        if not isinstance(self.ctas, int) or self.ctas < 0 or (self.ctas and not self.persistent):
            bad("ctas", "the persistent grid's CTAs", "0 (one per SM), or a count with persistent=True",
                (self.persistent, self.ctas))
        if problem.dtype in SCALED and (problem.head_dim != FP8_HEAD_DIM or self.block_kv != FP8_BLOCK_KV):
            bad("head_dim" if problem.head_dim != FP8_HEAD_DIM else "block_kv", "fp8 runs D 128 and 128-key tiles (one "
                "128-byte swizzled row: Q and K, and V transposed)", f"head_dim {FP8_HEAD_DIM}, block_kv {FP8_BLOCK_KV}",
                (problem.head_dim, self.block_kv))
        if self.epilogue not in EPILOGUES:
            bad("epilogue", "O stored from the registers, or by TMA through the Q tile or its own buffer", EPILOGUES,
                repr(self.epilogue))
        if self.epilogue in STAGED_EPILOGUES and problem.dtype in SCALED:
            bad("epilogue", "the TMA epilogues store O by a map of the inputs' 16-bit rows: fp8's are 8-bit",
                "epilogue='registers' with fp8", self.epilogue)
        if not isinstance(self.split_kv_barrier, bool):
            bad("split_kv_barrier", "one \"full\" mbarrier per tile or per stage", (False, True), self.split_kv_barrier)
        if self.pingpong and not self.overlap:
            bad("pingpong", "the warpgroups take turns at the overlapped loop's GEMM issues", "overlap=True with "
                "pingpong=True", (self.overlap, self.pingpong))
        if not isinstance(self.item_overlap, bool) or (self.item_overlap and not self.pingpong):
            bad("item_overlap", "the item's first S and last P V outside ping-pong's turns (the turns there are none "
                "without it)", "item_overlap=True with pingpong=True (and overlap=True)",
                (self.pingpong, self.item_overlap))
        if self.walk not in WALKS or (self.walk != WALKS[0] and not self.persistent):
            bad("walk", "the order persistent CTAs take the work items in (one CTA an item has none)",
                f"one of {WALKS}, other than {WALKS[0]!r} only with persistent=True", (self.persistent, self.walk))
        exps = self.exps_before_pv_wait
        if type(exps) is not int or not 0 <= exps <= self.block_kv // 2 or (exps and not self.overlap):
            bad("exps_before_pv_wait", "the P V wait after that many of a tile's exps (a thread's block_kv / 2), in "
                "the overlapped loop (the one with a P V in flight over the softmax)",
                f"0, or 1 .. {self.block_kv // 2} with overlap=True", (self.overlap, exps))
        self.check_consumers(problem, bad)
        need = smem_for(problem, self)
        if need > smem_bytes:
            room = deepest(problem, self.block_kv, smem_bytes, self.epilogue, self.consumers)
            bad("stages", "Q, the (K, V) stages and O's buffer (epilogue='tma_buffer') within the SM's shared memory",
                f"<= {smem_bytes} bytes: stages <= {room} of "
                f"{self.block_kv} keys with epilogue={self.epilogue!r}", f"{need} bytes ({self.stages} stages)")


    def check_consumers(self, problem: AttentionProblem, bad) -> None:
        """``consumers``: a count of ``REGS``; more than ``CONSUMERS`` only at head dim <= ``WIDE_HEAD_DIM`` (so not
        fp8, D 128) and where a consumer thread's ``registers`` fit ``REGS``' cap."""
        if type(self.consumers) is not int or self.consumers not in REGS:
            bad("consumers", "consumer warpgroups of WGMMA_M query rows each", tuple(REGS), self.consumers)
        if self.consumers == CONSUMERS:
            return
        if problem.head_dim > WIDE_HEAD_DIM:
            bad("consumers", f"{self.consumers} consumer warpgroups ({self.block_q} query rows) run head dim <= "
                f"{WIDE_HEAD_DIM} only (FA3's 192-row blocks; fp8 runs D 128)",
                f"consumers={CONSUMERS} at head_dim {problem.head_dim} ({problem.dtype})", self.consumers)
        cap = REGS[self.consumers][1]
        if registers(problem, self) > cap:
            bad("consumers", f"{self.consumers} consumer warpgroups: a thread's S, P, O and slack within setmaxnreg's "
                f"{cap} registers", f"block_kv <= {widest_tile(problem, cap)} with consumers={self.consumers}",
                f"block_kv {self.block_kv}: {registers(problem, self)} registers")


def registers(problem: AttentionProblem, config: Sm90AttentionConfig) -> int:
    """A consumer thread's registers, estimated: S (``block_kv / 2``), P (``block_kv / 4`` words, fp8 half), O
    (``D / 2``) and ``REGISTER_SLACK``."""
    p_words = config.block_kv * ELEMENT_BYTES[problem.dtype] // 8
    return config.block_kv // 2 + p_words + problem.head_dim // 2 + REGISTER_SLACK


def widest_tile(problem: AttentionProblem, cap: int) -> int:
    """The widest ``block_kv`` (a multiple of 16) whose ``registers`` fit ``cap`` (0: none)."""
    fit = [kv for kv in range(16, TMA_BOX_MAX + 1, 16)
           if registers(problem, Sm90AttentionConfig(kv)) <= cap]
    return max(fit, default=0)


def tiles_per_stage(dtype: str) -> int:
    """Tiles a ring stage holds: K and V; fp8 also V transposed (wgmma's e4m3 B operand is K-major only)."""
    return 3 if dtype in SCALED else 2


def smem_for(problem: AttentionProblem, config: Sm90AttentionConfig) -> int:
    """Dynamic shared memory: the Q tile, ``stages`` stages of ``tiles_per_stage`` tiles and (``epilogue=
    "tma_buffer"``) O's buffer of Q's size, plus the barriers' slack. bf16 / f16, ``BLOCK_Q`` 128: Q and O's buffer
    16 KiB each at D 64, 32 KiB at D 128; a stage ``4 block_kv D`` bytes. Of the H100's 227 KiB, D 128 with 3
    stages of 128 keys leaves 2 KiB (no buffer: ``"tma_buffer"`` runs 2 stages there), D 64 with 3 stages of 192
    keys 66 KiB (the buffer, and room for a second Q)."""
    per = tiles_per_stage(problem.dtype) * config.stages * config.block_kv
    o = config.block_q if config.epilogue == "tma_buffer" else 0
    return ELEMENT_BYTES[problem.dtype] * problem.head_dim * (config.block_q + per + o) + BARRIER_BYTES


@attrs.frozen
class Sm90AttentionPlan(PlanRecord, family="attention"):
    """Everything ``kernels.sm90.attention_emit`` reads (module docstring)."""

    problem: AttentionProblem
    config: Sm90AttentionConfig
    storage: str  # TIR dtype of Q, K, V, O
    wgmma_s: str  # S = Q K^T (SS)
    wgmma_o: str  # O += P V (RS)
    pack_instr: str
    q_blocks: int
    heads_total: int  # batch x heads: work items per query block
    kv_tiles: int
    smem_bytes: int
    params: tuple[Param, ...]
    ctas: int
    """The grid: one CTA per work item, or (``persistent``) at most one per SM."""
    section_heads: int
    """The batch x heads of a section of work items (``section_heads``, ``work_item``)."""

    @property
    def threads(self) -> int:
        return WARPGROUP * (1 + self.consumers)

    @property
    def consumers(self) -> int:
        """Consumer warpgroups (``Sm90AttentionConfig.consumers``)."""
        return self.config.consumers

    @property
    def producer_regs(self) -> int:
        """The producer warpgroup's ``setmaxnreg.dec`` target (``REGS``)."""
        return REGS[self.consumers][0]

    @property
    def consumer_regs(self) -> int:
        """The consumer warpgroups' ``setmaxnreg.inc`` target (``REGS``)."""
        return REGS[self.consumers][1]

    @property
    def items(self) -> int:
        """Work items: (query block, batch x head) pairs, ordered by ``work_item``."""
        return self.q_blocks * self.heads_total

    def items_of(self, pid):
        """The work items CTA ``pid`` walks (``walk_items``: ``pid, pid + ctas, ...`` below ``items`` by the round
        robin; an int or TIR expression)."""
        return walk_items(pid, self.items, self.ctas, self.config.walk)

    def item_index(self, pid, i, ops=PY_OPS):
        """The work item (``work_item``'s index) CTA ``pid`` runs ``i``-th (``walk_item``; ``ops``: ``walk_item``'s)."""
        return walk_item(pid, i, self.ctas, self.config.walk, self.q_blocks, self.heads_total, self.section_heads, ops)

    @property
    def block_q(self) -> int:
        return self.config.block_q

    @property
    def fp8(self) -> bool:
        return self.problem.dtype in SCALED

    @property
    def elem_bytes(self) -> int:
        return ELEMENT_BYTES[self.problem.dtype]

    @property
    def smem_dtype(self) -> str:
        return SMEM_DTYPES[self.problem.dtype]

    @property
    def columns(self) -> int:
        """Elements of one 128-byte swizzled row: a tile's column block, TMA's box width (64 16-bit, 128 fp8)."""
        return ROW_BYTES // self.elem_bytes

    @property
    def k_step(self) -> int:
        """One wgmma's K in elements (16 16-bit, 32 fp8: ``gemm_plan.wgmma_k``)."""
        return wgmma_k(self.problem.dtype)

    @property
    def p_shift(self) -> int:
        """log2 of the factor P is computed with (``problem.P_SHIFT``: fp8 8)."""
        return P_SHIFT[self.problem.dtype]

    @property
    def d_blocks(self) -> int:
        """The column blocks of a tile row (``D / columns``)."""
        return self.problem.head_dim // self.columns

    @property
    def tile_elems(self) -> int:
        """Elements of one K (or V) tile."""
        return self.config.block_kv * self.problem.head_dim

    @property
    def q_elems(self) -> int:
        return self.block_q * self.problem.head_dim

    @property
    def o_buffer(self) -> int:
        """Element offset of O's buffer (``epilogue="tma_buffer"``): after the ring, laid out as the Q tile."""
        return self.stage_offset(self.config.stages, 0)

    @property
    def early_q_release(self) -> bool:
        """Whether each consumer warpgroup releases Q (its "empty" arrival) once the item's last ``S = Q K^T``
        retired, before its last ``P V`` and its epilogue: persistent CTAs, unless Q's tile stages O
        (``epilogue="tma"``), so that the next item's Q load runs under them. One CTA an item: after its GEMMs
        (nothing waits for it)."""
        return self.config.persistent and self.config.epilogue != "tma"

    @property
    def tiles_before_q(self) -> int:
        """The kv tiles of an item the producer loads before it waits for Q's "empty" barrier: with
        ``epilogue="tma"`` the first ring-full (Q waits for the last item's O store); with ``early_q_release``
        ``stages - 2`` (those stages were released before the last item's last S retired: the producer then waits
        for Q, not for the last item's last ``P V``); else 0 (Q first). fp8: 0 (its transposers' one loop)."""
        if self.fp8:
            return 0
        if self.config.epilogue == "tma":
            return self.config.stages
        return max(0, self.config.stages - 2) if self.early_q_release else 0

    def stage_offset(self, stage, which: int):
        """Element offset of the K (``which`` 0), V (1) or, fp8, transposed V (2) tile of stage ``stage`` (after
        the Q tile)."""
        return self.q_elems + (tiles_per_stage(self.problem.dtype) * stage + which) * self.tile_elems

    @property
    def barriers(self) -> int:
        """mbarriers: Q's "full" (0), each stage's "full" (``1 + s``; ``split_kv_barrier``: K's) and "empty"
        (``1 + stages + s``), Q's "empty" (``1 + 2 stages``: one arrival per consumer warpgroup once its GEMMs of an
        item retired; ``early_q_release``: its last S; ``epilogue="tma"``: once its O stores read the Q tile); fp8, each stage's "transposed"
        (``2 + 2 stages + s``: one arrival per transposing thread once V^T is written); ``split_kv_barrier``, each
        stage's V "full" after them (``v_full``); ``exps_before_pv_wait``, a slot a consumer warpgroup (``sink``), not
        barriers."""
        c = self.config
        return (2 + (3 if self.fp8 else 2) * c.stages + (c.stages if c.split_kv_barrier else 0)
                + (self.consumers if c.exps_before_pv_wait else 0))

    @property
    def sink(self) -> int:
        """``exps_before_pv_wait``: the first of the slots after the mbarriers (``barriers``' last ``consumers``), one a
        consumer warpgroup, whose word the store that holds the ``P V`` wait back writes; nothing reads them."""
        return self.barriers - self.consumers

    def v_full(self, s):
        """The mbarrier V's tile of stage ``s`` completes on: the stage's "full" one (``1 + s``), or with
        ``split_kv_barrier`` its own, after the others (an int or a TIR expression)."""
        if not self.config.split_kv_barrier:
            return 1 + s
        return 2 + (3 if self.fp8 else 2) * self.config.stages + s

    @property
    def tile_bytes(self) -> int:
        """Bytes of one K (or V) tile's TMA loads."""
        return self.tile_elems * self.elem_bytes

    @property
    def kv_bytes(self) -> int:
        """Bytes one stage's TMA loads bring (K and V)."""
        return 2 * self.tile_bytes


def plan_sm90_attention(problem: AttentionProblem, config: Sm90AttentionConfig,
                        smem_bytes: int | None = None, sms: int | None = None) -> Sm90AttentionPlan:
    """The plan of ``problem`` with ``config`` (``attention_target.plan``: the cost model's, ``attention_cost.choose``,
    when given none). A ContractError for a dtype the kernel does not take (``STORAGE``) or a config that breaks its
    rules. ``sms``: the SMs a persistent grid fills (the H200's by default)."""

    if problem.dtype not in STORAGE:
        raise ContractError("sm90 attention dtype: the kernel runs bf16, f16 and fp8 (e4m3) Q, K, V", operand="dtype",
                            check="dtype", expected=tuple(STORAGE), found=problem.dtype)
    check_indexing(problem)
    smem = smem_bytes or DEVICES["H200"].smem_per_unit
    check_config(config, (Sm90AttentionConfig,), "sm90 attention config")
    config.check(problem, smem)
    shapes = problem.shapes()
    storage = STORAGE[problem.dtype]
    dtypes = {"Q": storage, "K": storage, "V": storage, "O": DTYPES[OUT_DTYPES[problem.dtype]], "LSE": "float32",
              "SCALES": "float32"}
    params = tuple(Param(name, shape, dtypes[name]) for name, shape in shapes.items())
    t, k = WGMMA_TYPES[problem.dtype], wgmma_k(problem.dtype)
    q_blocks, heads_total = ceil_div(problem.seq_q, config.block_q), problem.batch * problem.heads
    items = q_blocks * heads_total
    ctas = min(items, config.ctas or sms or DEVICES["H200"].units) if config.persistent else items
    return Sm90AttentionPlan(
        problem, config, storage, f"m{WGMMA_M}n{config.block_kv}k{k}.f32.{t}.{t}",
        f"m{WGMMA_M}n{problem.head_dim}k{k}.f32.{t}.{t}", PACK.format(t=OUT_DTYPES[problem.dtype]), q_blocks, heads_total,
        ceil_div(problem.seq_kv, config.block_kv), smem_for(problem, config) - BARRIER_BYTES, params, ctas,
        section_heads(problem))


def deepest(problem: AttentionProblem, block_kv: int, smem_bytes: int, epilogue: str = "registers",
            consumers: int = CONSUMERS) -> int:
    """The most stages of ``block_kv`` keys that fit ``smem_bytes`` beside Q of ``consumers x WGMMA_M`` rows (and O's
    buffer: ``epilogue="tma_buffer"``; ``smem_for``)."""
    one = smem_for(problem, Sm90AttentionConfig(block_kv, 1, epilogue=epilogue, consumers=consumers))
    per = smem_for(problem, Sm90AttentionConfig(block_kv, 2, epilogue=epilogue, consumers=consumers)) - one
    return 1 + (smem_bytes - one) // per


def estimate_tiles(problem: AttentionProblem, config: Sm90AttentionConfig) -> int:
    """The kv tiles all CTAs run (causal: fewer, ``workgroup_tiles``)."""
    tiles = workgroup_tiles(problem, config.block_q, config.block_kv, config.skip_masked)
    return sum(tiles) * problem.batch * problem.heads


__all__ = ["BLOCK_Q", "COLUMNS", "CONSUMERS", "CONSUMER_REGS", "EPILOGUES", "REGISTER_FILE", "REGISTER_SLACK", "REGS",
           "WIDE_HEAD_DIM", "registers", "widest_tile", "STAGED_EPILOGUES", "FP8_BLOCK_KV", "FP8_HEAD_DIM", "L2_SECTION_BYTES", "PRODUCER_REGS",
           "SMEM_DTYPES", "STORAGE", "Sm90AttentionConfig", "Sm90AttentionPlan", "TRANSPOSERS", "deepest", "estimate_tiles",
           "plan_sm90_attention", "section_heads", "smem_for", "tiles_per_stage", "work_item", "PY_OPS", "WALKS",
           "cta_loads", "fold_item", "item_weights", "walk_item", "walk_items", "walk_position"]
