"""Attention forward on sm80-class GPUs (FlashAttention-2, issue 26 part 2): the plan.

The problem, its reference, error bound and kv tiling are the target-neutral ones
(``attention_problem``: ``AttentionProblem``, ``kv_tiles_for``, online softmax in base 2); this
module decides how an sm_80 CTA computes them. Pure Python (attrs): no TIRx, no gfx950 module.

**Work split.** One CTA per (batch x head, query block of ``block_q`` rows), ``warps`` warps of
``16 m_tiles`` query rows each (``block_q = 16 m_tiles warps``): each warp computes its rows against
the whole kv tile, so no data crosses warps but the K / V tiles in shared memory; a warp's
``m_tiles`` m16 tiles share every K and V fragment it reads (``m_tiles`` 2 halves the ldmatrix traffic
per flop, for twice the accumulators). The CTAs run in groups of ``head_group`` heads, each group's
query blocks longest first (``Sm80AttentionConfig.head_group``, ``l2_head_group``).

**Per warp, per kv tile of ``block_kv`` keys** (``mma.sync.aligned.m16n8k16``, f32 accumulate):

* ``S = Q K^T``: A = the warp's Q rows by ``ldmatrix.x4``, loaded once into ``4 m_tiles D / 16``
  registers and kept there (``q_regs``), or re-read from the Q tile in shared memory at every k-step
  (4 registers per m-tile); B = the K tile by ``ldmatrix.x4`` (two 8-key n-tiles per load; K rows are the
  m16n8k16 B fragment's columns as stored). ``block_kv / 8`` accumulator tiles of 4 f32.
* Online softmax on the accumulators: lane (g = lane / 4, t = lane % 4) holds rows g and g + 8,
  keys ``8 n + 2 t + {0, 1}`` of every n-tile; the row max over the lane's registers, then over the
  quad with ``shfl.xor`` 1 and 2; ``p = 2^(s scale_log2 - m scale_log2)`` (one FMA and one
  ``ex2.approx.ftz``), the row sum kept per lane until the end (one quad reduction).
* ``O += P V``: the score accumulators of n-tiles ``2 kk, 2 kk + 1`` are exactly the m16n8k16 A
  fragment of k-step ``kk`` (rows g / g + 8, keys 2t.. / 2t + 8..), packed by
  ``cvt.rn.{bf16,f16}x2.f32``: P never touches shared memory. B = the V tile read by
  ``ldmatrix.x4.trans`` (V rows are keys, the B fragment wants keys along each register pair).

**Shared memory.** The Q tile (read once) and ``stages`` buffers of (K tile, V tile), each tile
``rows x D`` with the 16-byte chunk ``c`` of row ``r`` stored at chunk ``c ^ (r % 8)`` (the XOR
swizzle): the 8 rows one ldmatrix phase reads, and the 8 chunks of one cp.async phase, fall in 8
different bank groups. cp.async (``.cg``, 16 bytes, zero-filled past the sequence: ``src-size`` 0)
streams the tiles; tile ``j + stages - 1`` is issued at the top of iteration ``j`` (after its one
barrier), before tile ``j``'s MMAs.

**Masking.** Only the kv tiles that hold a key past the sequence (the tail) or, causal, a key above
the query block's first row are masked element by element (a second copy of the loop body); the
tiles wholly above the block's diagonal are not run (``kv_tiles_for``), and in a masked causal tile a
warp whose rows are all above its first key skips it (``kernels.sm80.attention_emit.warp_sees``).

**Layouts.** Q, K, V and O are read and written as ``AttentionProblem.layout`` stores them (``"bhsd"``, or
``"bshd"``: a row ``H D`` elements after the previous one, a head ``D``): only the global addresses of the copies
and of O's stores differ (``kernels.sm80.attention_emit.global_at``), each row still ``D`` contiguous elements.

**Rescale.** ``rescale_slack`` 0: FlashAttention-2's update every tile; ``k`` > 0: O and the row sum keep a
stale row max until some row's new max exceeds it by more than ``k`` in the exponent (a warp vote), so that
every ``p <= 2^k``.
"""

from __future__ import annotations

import re

import attrs

from ..common import PlanRecord, check_config
from ..devices import DEVICES

from ...isa.formats import fmt
from ..attention.problem import AttentionProblem, check_layout, workgroup_tiles
from ..gemm import offsets
from .gemm_config import DTYPES as STORAGE  # the 16-bit dtypes mma.sync m16n8k16 takes, TIR's names
from .gemm_config import LDMATRIX, LDMATRIX_TRANS, MMA
from ..gemm.dynamic_m import ceil_div
from ..gemm.epilogue import Param

WARP_ROWS = 16  # query rows per warp: the m16n8k16 M
CHUNK = 8  # elements of a 16-byte chunk (16-bit data)
SM80_SMEM_BYTES = 227 * 1024  # dynamic shared memory a CTA may opt into on sm_90 (H200); sm_80: 163 KiB
SM80_REGISTERS = 65536  # 32-bit registers per SM
MAX_THREADS_PER_SM = 2048
COPY = "cp.async.cg.shared.global"
SYNCS = ("cta", "mbarrier")
MBARRIER_BYTES = 8
PACK = "cvt.rn.{t}x2.f32"
MAX_RESCALE_SLACK = 15  # p <= 2^15: f16's largest power of two (its largest finite is 65504)


def _is_int(value) -> bool:
    """A plain int (not a bool, float or string)."""
    return isinstance(value, int) and not isinstance(value, bool)


@attrs.frozen
class Sm80AttentionConfig:
    """The sm80 kernel's choices: ``block_kv`` keys per K / V tile (a multiple of 16), ``warps``
    (``16 m_tiles`` query rows each: ``block_q = 16 m_tiles warps``), ``stages`` K / V buffers in
    shared memory (2 or more: tile ``j + stages - 1`` loads while tile ``j`` computes), ``m_tiles``
    m16 tiles per warp (1 or 2), ``q_regs`` (Q fragments kept in registers, else re-read per k-step),
    ``overlap`` (two score buffers: tile ``j + 1``'s ``S`` MMAs issued before tile ``j``'s softmax, which
    needs ``stages >= 3``), ``skew`` (the upper half of the warps runs one phase behind: tile ``j - 1``'s
    softmax and ``P V`` before tile ``j``'s ``S``, so that on each SM sub-partition, which holds warps ``w`` and
    ``w + 4``, one warp's softmax falls under the other's MMAs; a tile's buffer is then read for two
    iterations: ``stages >= 3``, ``stages - 2`` tiles in flight), whether causal skips the tiles above the
    diagonal, ``sync`` how warps hand the K / V buffers over: ``"cta"`` one ``__syncthreads`` per tile, or
    ``"mbarrier"`` a "full" and an "empty" mbarrier per buffer (``Sm80AttentionPlan.mbarriers``; sm_90 for
    TIRx's ``mbarrier.try_wait``; stages >= 3, no overlap or skew; not a candidate: the default takes it as the
    causal sm_90 twin, ``decoupled``),
    ``rescale_slack`` (0: every tile rescales O and the row sum to the new row max, FlashAttention-2's
    update; ``k`` > 0: a warp keeps its rows' stale maxima, and skips the ``O *= alpha`` multiplies, while
    no row's max grew by more than ``2^k`` in ``p``'s scale, so ``p <= 2^k``: exact in the same error
    bound, since O and the sum share the stale max (``__any_sync`` decides per warp, a branch)),
    ``head_group`` (the CTA order, ``Sm80AttentionPlan.head_group``: groups of that many batch x heads run
    one after the other, each group's query blocks longest first with its heads innermost, so that the
    blocks running at once share a few heads' K / V through L2; None: ``l2_head_group``'s choice; 1: one
    head's blocks after the other; ``batch x heads``: every head's last block first, the order before)."""

    block_kv: int = 64
    warps: int = 8
    stages: int = 2
    m_tiles: int = 1
    q_regs: bool = True
    overlap: bool = False
    skip_masked: bool = True
    skew: bool = False
    sync: str = "cta"
    rescale_slack: int = 0
    head_group: int | None = None

    def __attrs_post_init__(self):
        check_config(self, (Sm80AttentionConfig,), "sm80 attention config")
        self._check_sync()
        if not (_is_int(self.rescale_slack) and 0 <= self.rescale_slack <= MAX_RESCALE_SLACK):
            raise ValueError(f"attention rescale_slack: expected 0 (always rescale) to {MAX_RESCALE_SLACK} (p <= "
                             f"2^{MAX_RESCALE_SLACK}, within f16 P's range), found {self.rescale_slack!r}")
        if self.block_kv % 16 or not 16 <= self.block_kv <= 256:
            raise ValueError(f"attention block_kv: whole 16-key MMA steps, 16 to 256; found {self.block_kv}")
        if self.warps not in (1, 2, 4, 8):
            raise ValueError(f"attention warps: expected 1, 2, 4 or 8 (16 query rows each), found {self.warps}")
        if not 2 <= self.stages <= 4:
            raise ValueError(f"attention stages: expected 2 to 4 K / V buffers, found {self.stages}")
        if self.overlap and self.stages < 3:
            raise ValueError("attention overlap: tile j + 1's K is read while tile j's V is, and tile j + 2 loads: "
                             f"expected stages >= 3, found {self.stages}")
        if self.skew and (self.stages < 3 or self.overlap or self.warps < 2):
            raise ValueError("attention skew: tile j - 1's V is read while tile j's K is, by the lagging warps: "
                             f"expected stages >= 3, no overlap and 2 or more warps, found {self}")
        if self.head_group is not None and not (_is_int(self.head_group) and self.head_group >= 1):
            raise ValueError("attention head_group: expected None or 1 or more heads per group (an int), found "
                             f"{self.head_group!r}")
        if self.m_tiles not in (1, 2):
            raise ValueError(f"attention m_tiles: expected 1 or 2 m16 tiles per warp, found {self.m_tiles}")

    def _check_sync(self):
        if self.sync not in SYNCS:
            raise ValueError(f"attention sync: expected one of {SYNCS}, found {self.sync!r}")
        if self.sync == "mbarrier" and (self.stages < 3 or self.overlap or self.skew):
            raise ValueError("attention sync='mbarrier': tile j + stages - 1 is copied after tile j's MMAs, into tile "
                             "j - 1's buffer, so that a warp may run a tile ahead: expected stages >= 3, no overlap, no "
                             f"skew, found {self}")

    @property
    def mbarrier(self) -> bool:
        """``sync == "mbarrier"``."""
        return self.sync == "mbarrier"

    @property
    def warp_rows(self) -> int:
        return WARP_ROWS * self.m_tiles

    @property
    def block_q(self) -> int:
        return self.warp_rows * self.warps

    @property
    def lead(self) -> int:
        """kv tiles in flight ahead of the one computed: ``stages - 1``, one fewer with ``skew``."""
        return self.stages - 1 - int(self.skew)


@attrs.frozen
class Sm80AttentionPlan(PlanRecord, family="attention"):
    """Everything ``attention_sm80_emit`` reads (module docstring)."""

    problem: AttentionProblem
    config: Sm80AttentionConfig
    storage: str  # TIR dtype of Q, K, V, O
    mma_instr: str
    ldmatrix: str  # Q and K fragments
    ldmatrix_trans: str  # V fragments
    copy_instr: str
    pack_instr: str  # two f32 -> one b32 of 16-bit values (P, O)
    q_blocks: int
    heads_total: int  # batch x heads: CTAs per query block
    kv_tiles: int  # kv tiles of the whole key sequence
    smem_bytes: int
    registers: int  # estimated registers per thread (``registers_estimate``)
    params: tuple[Param, ...]
    head_group: int  # batch x heads per group of the CTA order (a divisor of heads_total; config.head_group)
    offsets64: tuple[str, ...] = ()
    """The tensors of 2^31 elements or more (``kernels.gemm.offsets``: every index of the kernel is clamped
    into its tensor or guarded), indexed with 64-bit offsets (their leading indices ``int64``); () for
    every smaller problem, whose code is 32-bit."""

    @property
    def threads(self) -> int:
        return 32 * self.config.warps

    @property
    def ctas(self) -> int:
        return self.q_blocks * self.heads_total

    @property
    def chunks(self) -> int:
        """16-byte chunks of a tile row (head dim / 8)."""
        return self.problem.head_dim // CHUNK

    @property
    def k_steps(self) -> int:
        """16-wide head-dim steps of ``S = Q K^T`` (the Q fragment registers / 4)."""
        return self.problem.head_dim // 16

    @property
    def d_tiles(self) -> int:
        """8-wide head-dim n-tiles of ``O`` (its accumulators / 4)."""
        return self.problem.head_dim // 8

    @property
    def n_tiles(self) -> int:
        """8-key n-tiles of ``S`` (its accumulators / 4)."""
        return self.config.block_kv // 8

    @property
    def s_regs(self) -> int:
        """Registers of one score buffer (``overlap``: two)."""
        return 4 * self.config.m_tiles * self.n_tiles

    @property
    def tile_elems(self) -> int:
        """Elements of one K (or V) tile in shared memory."""
        return self.config.block_kv * self.problem.head_dim

    @property
    def q_elems(self) -> int:
        return self.config.block_q * self.problem.head_dim

    def stage_offset(self, stage, which: int):
        """Element offset of the K (``which`` 0) or V (1) tile of buffer ``stage`` (after the Q tile)."""
        return self.q_elems + (2 * stage + which) * self.tile_elems

    @property
    def mbarriers(self) -> dict[str, tuple[int, int]]:
        """``sync="mbarrier"``: per kind, (index of buffer 0's barrier in the barrier array, arrivals per
        phase). "full" (index ``s``): one ``cp.async.mbarrier.arrive.noinc`` per thread after its copies of
        the tile; "empty" (index ``stages + s``): one arrive per warp (lane 0, after ``__syncwarp``) after
        its last ``ldmatrix`` of the buffer. Tile ``t`` uses buffer ``t % stages`` in its use
        ``u = t // stages``: its "full" phase ``u`` (wait on parity ``u % 2``), and its copies wait for
        "empty" phase ``u - 1`` (parity ``(u + 1) % 2``: at once for ``u = 0``). Empty for ``"cta"``."""
        if self.config.sync != "mbarrier":
            return {}
        return {"full": (0, self.threads), "empty": (self.config.stages, self.config.warps)}

    def mbarrier_elem(self, index):
        """16-bit element offset in the dynamic shared memory of mbarrier ``index`` (``mbarriers``): the
        barriers' 8-byte words follow the K / V buffers."""
        return (self.smem_bytes - 2 * self.config.stages * MBARRIER_BYTES) // 2 + MBARRIER_BYTES // 2 * index

    def copy_reps(self, rows: int) -> int:
        """cp.async chunks per thread of a ``rows x D`` tile."""
        return rows * self.chunks // self.threads


def swizzle(row, chunk):
    """The stored chunk of 16-byte chunk ``chunk`` of tile row ``row`` (an int or a TIR expression)."""
    return chunk ^ (row % 8)


def registers_estimate(head_dim: int, config: Sm80AttentionConfig) -> int:
    """Registers per thread, estimated: per m-tile the Q fragments ``D / 4`` (``q_regs``; else 4), the O
    accumulators ``D / 2`` and ``3 block_kv / 4`` for the scores, their exponentials and P; 48 for
    addresses, row state and temporaries. Fitted to ptxas 13.0 (sm_90, ``--use_fast_math``) on nine
    configs at D 64 and 128 within -17 .. +8 (docs/attention.md). ``skew``: 8 more per m-tile (the lagging
    warps' scores live across the barrier; ptxas 13.0 at D 128: 255, 230 and 255 registers for 128 keys, 64
    keys, and 32 keys with two m-tiles, no spills). ``rescale_slack``: 9 fewer per m-tile (no alpha per row
    live through the O update; ptxas 13.0, D 128, two m-tiles at 64 keys, Q re-read: 108 bytes of spills
    without, 24 with, 4 with 3 stages and mbarriers). ptxas caps a thread at 255 (``MAX_REGISTERS``) and
    spills the rest; ``REGISTER_LIMIT`` says how far past that a plan may go."""
    q = head_dim // 4 if config.q_regs else 4
    scores = 3 * config.block_kv // 4 + (config.block_kv // 2 if config.overlap else 0)
    lazy = 9 if config.rescale_slack else 0
    return config.m_tiles * (q + head_dim // 2 + scores + (8 if config.skew else 0) - lazy) + 48


MAX_REGISTERS = 255  # registers a thread may hold (sm_80 .. sm_90); ptxas spills past them
REGISTER_LIMIT = 264
"""The largest ``registers_estimate`` a plan takes: ptxas 13.0 (sm_90, D 128) spilled at most 56 bytes per
thread at the estimates up to 262 (two m-tiles at 64 keys with ``rescale_slack``: none non-causal, 24-56
bytes causal, where the masked loop is a second copy of the body), 108 at 280 and 44 at 288."""


def check_tiles(problem: AttentionProblem, config: Sm80AttentionConfig) -> None:
    """Refuse a config whose copies do not split evenly or whose buffers or registers do not fit."""
    chunks = problem.head_dim // CHUNK
    threads = 32 * config.warps
    for what, rows in (("kv tile", config.block_kv), ("query block", config.block_q)):
        if (rows * chunks) % threads:
            raise ValueError(f"attention: a {rows}x{problem.head_dim} {what} is {rows * chunks} 16-byte chunks, not a "
                             f"whole number per thread of {threads}; use more keys or fewer warps")
    smem = smem_bytes(problem, config)
    if smem > SM80_SMEM_BYTES:
        raise ValueError(f"attention: {smem} bytes of shared memory (Q + {config.stages} K/V buffers) exceed "
                         f"{SM80_SMEM_BYTES}; use fewer stages or keys")
    if registers_estimate(problem.head_dim, config) > REGISTER_LIMIT:
        raise ValueError(f"attention: {config} at head dim {problem.head_dim} needs about "
                         f"{registers_estimate(problem.head_dim, config)} registers per thread (limit {REGISTER_LIMIT}: "
                         f"{MAX_REGISTERS} and a few spilled)")


def smem_bytes(problem: AttentionProblem, config: Sm80AttentionConfig) -> int:
    """Dynamic shared memory (Q and the K / V buffers) plus, ``sync="mbarrier"``, the barriers' words."""
    barriers = 2 * config.stages * MBARRIER_BYTES if config.sync == "mbarrier" else 0
    return 2 * problem.head_dim * (config.block_q + 2 * config.stages * config.block_kv) + barriers


def plan_sm80_attention(problem: AttentionProblem, config: Sm80AttentionConfig | None = None,
                        sms: int | None = None, arch: str = "sm_80") -> Sm80AttentionPlan:
    """The plan of ``problem`` with ``config`` (default: ``default_config``, the cost model's choice
    for ``sms`` multiprocessors and ``arch``). ValueError for a dtype the kernel does not take (``STORAGE``: bf16,
    f16; fp8 attention is gfx950's, on its f8f6f4 MFMA)."""
    if problem.dtype not in STORAGE:
        raise ValueError(f"sm80 attention dtype: expected one of {tuple(sorted(STORAGE))}, found {problem.dtype!r} (mma.sync "
                         f"m16n8k16 takes 16-bit inputs; fp8 attention runs on --target gfx950)")
    check_layout(problem, "sm80")  # both layouts (``READS_BSHD``)
    check_extents(problem)
    if arch_number(arch) < 80:  # cp.async, ldmatrix and mma.sync m16n8k16 are sm_80's
        raise ValueError(f"sm80 attention arch: expected a CUDA arch sm_80 or newer, such as 'sm_80' or 'sm_90a', "
                         f"found {arch!r}")
    check_config(config, (Sm80AttentionConfig,), "sm80 attention config")  # the types (another target's config)
    config = config or default_config(problem, sms or H200_SMS, arch)
    check_tiles(problem, config)
    shapes = problem.shapes()
    storage = STORAGE[problem.dtype]
    params = tuple(Param(name, shapes[name], storage if name != "LSE" else "float32")
                   for name in ("Q", "K", "V", "O", "LSE"))
    q_blocks = ceil_div(problem.seq_q, config.block_q)
    return Sm80AttentionPlan(
        problem, config, storage, MMA.format(t=problem.dtype), LDMATRIX, LDMATRIX_TRANS, COPY,
        PACK.format(t=problem.dtype), q_blocks, problem.batch * problem.heads,
        ceil_div(problem.seq_kv, config.block_kv), smem_bytes(problem, config),
        registers_estimate(problem.head_dim, config), params, resolve_head_group(problem, config),
        attention_offsets(params, q_blocks * problem.batch * problem.heads))


def check_extents(problem: AttentionProblem) -> None:
    """Every extent of every tensor below 2^31 (the kernel's shapes and row indices are ``int``), checked
    before the cost model weighs configs: a ``ContractError`` naming the tensor otherwise
    (``kernels.gemm.offsets.check_extent``)."""
    for name, shape in problem.shapes().items():
        for axis, extent in enumerate(shape):
            offsets.check_extent("sm80 attention", name, f"dimension {axis}", extent)


def attention_offsets(params, ctas: int) -> tuple[str, ...]:
    """``Sm80AttentionPlan.offsets64``: the tensors of 2^31 elements or more (every index of the kernel is
    clamped into its tensor or guarded); a ``ContractError`` for 2^31 CTAs or more."""
    offsets.check_extent("sm80 attention", "O", "the CTAs (query blocks x batch x heads)", ctas)
    return offsets.offsets64({q.name: (q.shape, ()) for q in params})


L2_BYTES = DEVICES["H200"].l2_bytes
"""The H100 / H200 SXM's L2 (``kernels.devices``: NVIDIA H100 Tensor Core GPU Architecture whitepaper, 50 MB on
the GH100 as shipped)."""


def resolve_head_group(problem: AttentionProblem, config: Sm80AttentionConfig) -> int:
    """The largest divisor of ``batch x heads`` not above ``config.head_group`` (None: ``l2_head_group``)."""
    total = problem.batch * problem.heads
    want = l2_head_group(problem) if config.head_group is None else config.head_group
    return max(d for d in range(1, min(want, total) + 1) if total % d == 0)


def l2_head_group(problem: AttentionProblem) -> int:
    """Heads per group of the CTA order. Non-causal, 1: a head's query blocks all run the same kv tiles,
    so consecutive blocks started together read each K / V tile from L2 at about the same time. Causal, as
    many heads as keep their K / V (``2 seq_kv D`` elements each, counted per query head) within half the L2
    (``L2_BYTES``), at least one: the blocks differ in length, and a larger group runs more of the longest
    ones first. Measured on the H200 (benchmarks/journal/2026-12.md, "Two m-tiles"; 64 keys, two m-tiles, 8
    warps): non-causal, one head per group 383-395 TFLOP/s, this rule's causal groups of 8 / 4 / 2 heads
    371-377, every head's blocks interleaved 357-380; causal, this rule 352-391, one head 341-380, every
    head 335-382 (4k-16k tokens)."""
    if not problem.causal:
        return 1
    per_head = 2 * problem.seq_kv * problem.head_dim * fmt(problem.dtype).bits // 8
    return max(1, L2_BYTES // 2 // per_head)


# ------------------------------------------------------------------------------------ the cost model

H200_SMS = DEVICES["H200"].units  # the default GPU's SMs (kernels.devices; the present GPU's: devices.planned)
MMA_FLOPS_PER_CLOCK = 2257
"""Dense m16n8k16 bf16 / f16 flops per SM per clock of mma.sync: the ~590 TFLOP/s the H200 measured on
mma.sync GEMMs over 132 SMs at 1.98 GHz."""
SMEM_BYTES_PER_CLOCK = 128
"""Shared-memory bytes an SM delivers per clock (32 banks x 4 bytes): ldmatrix's rate."""
SOFTMAX_CLOCKS_PER_SCORE = 0.14
"""SM clocks per score of the softmax (FFMA, ex2, max, sum, O rescale, conversion) not hidden under the
MMAs, and ``TILE_CLOCKS`` fixed clocks per kv tile of a CTA (the barrier, the wait, the loop; shared by
the resident CTAs), ``LAZY_SOFTMAX`` the softmax's share left with ``rescale_slack`` (no O rescale on most
tiles): fitted to the 120 kernels of two H200 calls (benchmarks/runs/attention_h200_{lazy,m2}_2026-12-02.json:
D 128, 16k tokens, causal and not; rms error of the model's TFLOP/s 5.8 %). ``overlap`` measured no better
than its plain 128-key counterpart (attention_h200_final_2026-12-02.json), nor ``skew`` (-4 .. +6 %
against its plain twin, attention_h200_skew_2026-12-02.json), so the model gives them nothing and
``CANDIDATES`` leave out ``skew``."""
TILE_CLOCKS = 250
LAZY_SOFTMAX = 0.9


CANDIDATES = tuple(Sm80AttentionConfig(kv, w, s, m, q, o) for m, q, o in ((1, True, False), (1, True, True), (2, True, False),
                                                                      (2, False, False))
                   for w in (4, 8) for kv in (32, 64, 128) for s in (2, 3) if s == 3 or not o) + tuple(
    Sm80AttentionConfig(kv, 8, s, 2, False, rescale_slack=8) for kv in (64, 48, 32) for s in (2, 3))
"""The configs ``default_config`` ranks. Two m-tiles with Q re-read and ``rescale_slack`` (which lets 64-key
tiles fit) only at 8 warps: at 4 warps (two CTAs per SM) they measured 2-8 % slower in 5 of the 6 timed
shapes (benchmarks/runs/attention_h200_lazy_2026-12-02.json), which the model does not see. ``sync="mbarrier"``
(sm_90 only) is not a candidate: the default must build for sm_80."""


def occupancy(problem: AttentionProblem, config: Sm80AttentionConfig) -> int:
    """CTAs resident per SM: the least of the shared-memory, register and thread limits."""
    threads = 32 * config.warps
    regs = min(MAX_REGISTERS, registers_estimate(problem.head_dim, config))
    return max(0, min(SM80_SMEM_BYTES // smem_bytes(problem, config), SM80_REGISTERS // (regs * threads),
                      MAX_THREADS_PER_SM // threads))


def tile_clocks(problem: AttentionProblem, config: Sm80AttentionConfig, resident: int) -> float:
    """SM clocks per kv tile of one CTA, ``resident`` CTAs sharing the SM: per score the larger of the
    tensor cores (``4 D`` flops) and ldmatrix (each warp reads the whole K and V tile, and its Q rows
    again without ``q_regs``: ``(2 block_kv + rows) D 2 / (rows block_kv)`` bytes per score) plus the
    softmax (``LAZY_SOFTMAX`` of it with ``rescale_slack``), and ``TILE_CLOCKS`` shared by the resident
    CTAs. The CTA order (``head_group``) and the causal warps' skipped diagonal tiles are not modelled."""
    D, bq, bkv, rows = problem.head_dim, config.block_q, config.block_kv, config.warp_rows
    mma = 4.0 * D / MMA_FLOPS_PER_CLOCK
    smem = (2 * bkv + (0 if config.q_regs else rows)) * D * 2 / (rows * bkv) / SMEM_BYTES_PER_CLOCK
    softmax = SOFTMAX_CLOCKS_PER_SCORE * (LAZY_SOFTMAX if config.rescale_slack else 1.0)
    return bq * bkv * (max(mma, smem) + softmax) + TILE_CLOCKS / resident


def estimate(problem: AttentionProblem, config: Sm80AttentionConfig, sms: int = H200_SMS) -> float:
    """Model clocks of the whole launch: the CTAs' kv tiles (causal: the tiles each query block runs,
    ``kv_tiles_for``) spread over ``sms x occupancy`` slots longest first, the makespan being the larger
    of the average load and the longest CTA; inf where the config does not fit."""
    try:
        check_tiles(problem, config)
    except ValueError:
        return float("inf")
    resident = occupancy(problem, config)
    if resident == 0:
        return float("inf")
    tiles = workgroup_tiles(problem, config.block_q, config.block_kv, config.skip_masked)
    per_tile = tile_clocks(problem, config, resident) * resident  # the SM shares its clocks among `resident` CTAs
    total = sum(tiles) * problem.batch * problem.heads
    slots = sms * resident
    return per_tile * max(total / slots, max(tiles))


def default_config(problem: AttentionProblem, sms: int = H200_SMS, arch: str = "sm_80") -> Sm80AttentionConfig:
    """The candidate (``CANDIDATES``) with the least ``estimate`` (ties: the first listed); causal on sm_90
    or later, its ``decoupled`` twin."""
    best = min(CANDIDATES, key=lambda c: estimate(problem, c, sms))
    return decoupled(problem, best) if problem.causal and arch_number(arch) >= 90 else best


def decoupled(problem: AttentionProblem, config: Sm80AttentionConfig) -> Sm80AttentionConfig:
    """``config`` with ``sync="mbarrier"`` (3 stages or more) if it has two m-tiles and the twin fits, else
    ``config``. Why causal: there the warps of a block skip different diagonal warp-tiles (``warp_sees``), so their work
    per tile differs, and one ``__syncthreads`` per tile makes every warp wait for the slowest; the
    per-buffer mbarriers let the others run ahead. Non-causal warps do equal work. Measured on the H200
    (benchmarks/journal/2026-12.md, "Issue 26 on the H200, continued", the verification call; the default tile):
    causal +2.5 / +2.9 / +4.8 % at 16k / 8k / 4k tokens, non-causal -2.6 .. +1.3 %. Why two m-tiles: the
    one-m-tile twins measured -2 .. -10 % causal (benchmarks/runs/attention_h200_mbarrier_2026-12-02.json: 128
    and 64 keys, 8 warps), the two-m-tile one at 32 keys +3 .. +5 %."""
    if config.m_tiles != 2:
        return config
    twin = attrs.evolve(config, sync="mbarrier", stages=max(3, config.stages), overlap=False, skew=False)
    try:
        check_tiles(problem, twin)
    except ValueError:
        return config
    return twin


def arch_number(arch: str) -> int:
    """The compute capability of a CUDA arch name ``sm_XY`` with an optional letter as an int (``"sm_90a"`` ->
    90); 0 if it is not one."""
    match = re.fullmatch(r"sm_(\d+)[a-z]?", arch) if isinstance(arch, str) else None
    return int(match.group(1)) if match else 0


__all__ = ["CANDIDATES", "H200_SMS", "arch_number", "decoupled", "Sm80AttentionConfig", "Sm80AttentionPlan", "WARP_ROWS", "default_config",
           "estimate", "occupancy", "plan_sm80_attention", "registers_estimate", "swizzle", "tile_clocks"]
