"""Paged decode attention on Hopper (issue 37): the plan. Pure Python (attrs), no TIRx.

The problem, its reference, the clamps of lying device data, the split-KV partitions (``choose_partition``),
the workspace and the merge (a second kernel, or the last CTA per sequence) are the sm80 kernel's
(``kernels.sm80.paged_decode_plan``: read its docstring first); so is the consumers' math, emitted by the same
macros (``mma.sync.m16n8k16`` on the GQA group x queries rows, the online softmax in base 2, fp8 K and V
widened in registers, the CTA's merge of its warps' states). What differs is how K and V reach shared memory.

**A producer warp and TMA** (``paged_decode_emit``). The CTA is ``warps`` consumer warps and one more warp,
the producer (warp ``warps``: the consumers keep warp ids ``0 .. warps - 1``, so the shared macros address their
rings as sm80's do). The producer's lanes read the block table 32 tiles at a time (lane ``k`` the page of the
``k``-th tile of the chunk, the next chunk's read one chunk ahead: no TMA issue waits on a table read) and its
lane 0 issues, per 16-key tile, the **TMA** loads (``cp.async.bulk.tensor.3d``) of its K and V rows into the
ring of the consumer warp that takes it (tile ``j`` of the CTA: warp ``j % warps``, as sm80's round robin),
completing on that stage's "full" mbarrier (``mbarrier.arrive.expect_tx`` of ``tile_bytes``); a consumer
waits on "full", computes, and releases the stage on its "empty" mbarrier (lane 0's arrival). The producer
writes the tile's page index beside the ring (``PG``, before its arrival: the consumer reads it after the
wait) for the mask. Why: the sm80 kernel's every warp issues its own cp.async ring, ``D * elem / 16 / 2``
16-byte copies per lane per tile plus their address arithmetic and the table reads: at batch 8 (few
resident CTAs, ~9k contexts) and with fp8 KV its loop is issue-bound below the read rate (82-86 % at batch 64
fp8 on the H100). TMA moves a tile with ``2 slices`` instructions of one thread, off the consumers' issue
slots, and the ring's depth is the producer's lead, not registers of the consumers.

**The tensor maps** (encoded by ``main``'s host part at each launch): the cache ``[num_pages, page_size,
Hkv, D]`` as a 3-D tensor ``(D, Hkv, num_pages page_size)`` (innermost first), boxes ``(slice_elems, 1,
16)``: one kv head's 16 rows of a page, ``swizzle_bytes`` of each row (TMA's swizzled boxes are at most
128 bytes wide: a 256-byte bf16 D-128 row is two boxes, ``slices``). A page index outside ``0 .. num_pages
- 1`` loads from the first row past the cache: TMA fills the box with zeros (and the mask drops its keys, as
sm80's). The rows of a page past ``L`` are loaded as they are: K's give scores the mask replaces by
``-inf``, V's are zeroed in shared memory by the consumer of the sequence's last tile (``P = 0`` times a NaN
of a never-written cache row is NaN).

**The swizzle** (``smem_word``): each box lands as 16 rows of ``swizzle_bytes``, 16-byte chunk ``c`` of row
``r`` at chunk ``c ^ (r / (128 / swizzle_bytes)) % (swizzle_bytes / 16)`` (TMA's ``CU_TENSOR_MAP_SWIZZLE_128B``
/ ``64B``, ``isa.hopper_layout.swizzle``), the slices of a tile one after another: the consumers' word reads
(8 rows x 4 words per fragment load) hit 32 distinct banks as sm80's XOR does.

**fp8 pairs widen by one instruction** (``fp8_cvt``): ``cvt.rn.f16x2.e4m3x2`` (PTX ISA 9.7.10.24, sm_89+) turns
an e4m3 pair (a 16-bit register) into f16x2 exactly, where the sm80 kernel moves bits in 4 instructions (``prmt``,
then a mask, a shift and a mask: ``x / 256``): a K word's two pairs are its halves (one ``cvt`` each), a V pair
is gathered from two words by one ``prmt`` first. The values are exact, so the sm80 kernel's ``256`` factors
(``paged_decode_emit.fp8_widen``) are 1 here; Q's ``Q_PRESCALE`` rounding to f16 is unchanged. Why: fp8 KV was
82-86 % of the read rate at batch 64 on the H100 with the bit moves (648 SASS per 4 KiB tile), short of the
issue's 1.7x over bf16.

**No setmaxnreg**: the CTA is ``warps + 1`` warps (5 by default), not whole warpgroups, and its consumers need
~128 registers: the register file does not bound the resident CTAs, shared memory does.
"""

from __future__ import annotations

import attrs

from ...errors import ContractError
from ..attention.paged import PagedDecodeProblem
from ..common import check_config
from ..sm80.paged_decode_plan import TILE_KEYS, PagedDecodeConfig, PagedDecodePlan, plan_paged_decode

SWIZZLE_MAX = 128  # bytes: TMA's widest swizzled box row (CU_TENSOR_MAP_SWIZZLE_128B, CUDA driver API)
TABLE_CHUNK = 32  # tiles whose pages the producer warp's lanes read at once (one per lane)


@attrs.frozen
class Sm90PagedDecodePlan(PagedDecodePlan):
    """The sm80 plan's fields and layout, with the producer warp's and the TMA boxes' (module docstring)."""

    WIDE_TILES = False  # the producer issues TILE_KEYS-key tiles (the TMA boxes): sm80's wide tiles are refused
    WEIGH_MERGE = False  # the merge kernel unless forced: no pair timed since the merge kernel's lanes (choose_merge)

    @property
    def swizzle_bytes(self) -> int:
        """A TMA box row's bytes: the K / V row's, at most ``SWIZZLE_MAX`` (64: fp8 D 64)."""
        return min(SWIZZLE_MAX, self.problem.head_dim * self.elem_bytes)

    @property
    def slices(self) -> int:
        """TMA boxes per K (V) tile: a row's bytes over ``swizzle_bytes``."""
        return self.problem.head_dim * self.elem_bytes // self.swizzle_bytes

    @property
    def slice_elems(self) -> int:
        return self.swizzle_bytes // self.elem_bytes

    @property
    def slice_words(self) -> int:
        return self.swizzle_bytes // 4

    def smem_word(self, key, word):
        """Word ``word`` of row ``key`` of a tile: slice ``word / slice_words`` (16 rows each), the 16-byte chunk
        XOR the TMA swizzle's row bits (module docstring)."""
        sw = self.slice_words
        within = word % sw
        xor = (key // (SWIZZLE_MAX // self.swizzle_bytes)) % (self.swizzle_bytes // 16)
        return word // sw * (TILE_KEYS * sw) + key * sw + ((within // 4) ^ xor) * 4 + word % 4

    @property
    def fp8_cvt(self) -> bool:
        """fp8 pairs widen by ``cvt.rn.f16x2.e4m3x2`` (sm_89+; module docstring)."""
        return True

    @property
    def register_model(self) -> bool:
        """No register cap unless ``PagedDecodeConfig.min_ctas`` forces one (the sm80 plan's ``register_model``)."""
        return False

    @property
    def q_wait_groups(self) -> int:
        """Q is the consumers' only cp.async group."""
        return 0

    @property
    def block_threads(self) -> int:
        """The consumer warps and the producer warp."""
        return self.threads + 32

    @property
    def tile_bytes(self) -> int:
        """A tile's K and V bytes: what its "full" mbarrier expects (TMA counts zero-filled bytes too)."""
        return 2 * TILE_KEYS * self.problem.head_dim * self.elem_bytes

    def full_barrier(self, warp, stage):
        return warp * self.config.stages + stage

    def empty_barrier(self, warp, stage):
        return (self.config.warps + warp) * self.config.stages + stage

    @property
    def barriers(self) -> int:
        return 2 * self.config.warps * self.config.stages


def plan_paged_decode_sm90(problem: PagedDecodeProblem, config: PagedDecodeConfig | None = None,
                           context: int | None = None, sms: int | None = None,
                           arch: str | None = None) -> Sm90PagedDecodePlan:
    """The plan of ``problem`` (the sm80 planner's partition, merge and checks: ``plan_paged_decode``, for
    ``sm_90a``: fp8 pairs always widen by ``cvt``, so ``fp8_cvt=False`` is refused); ``arch``, the build's
    (``sm_90`` or ``sm_90a``, or None), is taken as ``sm_90a``, what this row is built for."""
    check_config(config, (PagedDecodeConfig,), "sm90 paged decode config")  # before fp8_cvt is read
    if config is not None and config.fp8_cvt is False:
        raise ContractError("sm90 paged decode fp8_cvt: this row always widens fp8 pairs by cvt.rn.f16x2.e4m3x2",
                            operand="fp8_cvt", check="parameters", expected="None or True", found="False")
    return plan_paged_decode(problem, config, context, sms, target="sm90", record=Sm90PagedDecodePlan, arch="sm_90a")


__all__ = ["SWIZZLE_MAX", "TABLE_CHUNK", "Sm90PagedDecodePlan", "plan_paged_decode_sm90"]
