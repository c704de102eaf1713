"""The sm90 paged decode attention (``kernels.sm90.paged_decode_*``: a producer warp's TMA loads into the consumer
warps' mbarrier rings) in the CUDA emulator (``target="sm90"``): odd contexts, two TMA boxes per row (bf16 D 128),
the 64-byte swizzle (fp8 D 64), 4 queries, lying device data and never-written (NaN) cache rows past a context;
the plan's layout against TMA's swizzle."""

import json

import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.isa.hopper_layout import swizzle
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, plan_paged_decode
from tvm_cdna4.kernels.sm90 import paged_target
from tvm_cdna4.kernels.sm90.paged_decode_plan import Sm90PagedDecodePlan, plan_paged_decode_sm90

EMULATOR = "the CUDA emulator (no GPU runner)"


@pytest.mark.slow  # suite time: the GPU tests run this shape on hardware; fp8 D 64 runs the pipeline here
def test_bf16_d128_odd_contexts_two_boxes_per_row_match_the_reference():
    # 256-byte rows: two 128-byte-swizzled TMA boxes per tile; 1 key, 77 keys (a page's rows past L), 96 keys
    # over 2 partitions of 2 warps
    problem = PagedDecodeProblem(3, 2, 1, 128, 1, 32, 3, 9)
    config = PagedDecodeConfig(warps=2, stages=2, splits=2)
    p = paged_target.plan(problem, config)
    assert (p.slices, p.swizzle_bytes, p.block_threads, p.tile_bytes) == (2, 128, 96, 2 * 16 * 256)
    result = attention.validate_paged(problem, "sm90", config, seed=1, contexts=[1, 77, 96])
    assert result.ok and result.where == EMULATOR and 0 < result.o_ratio <= 1, result


def test_fp8_kv_d64_four_queries_through_the_64_byte_swizzle():
    problem = PagedDecodeProblem(2, 4, 2, 64, 4, 16, 4, 12, kv_dtype="fp8", q_dtype="f16")
    config = PagedDecodeConfig(warps=2, stages=2, splits=2)
    assert (paged_target.plan(problem, config).swizzle_bytes, paged_target.plan(problem, config).slices) == (64, 1)
    result = attention.validate_paged(problem, "sm90", config, seed=2, contexts=[5, 40])
    assert result.ok and 0 < result.o_ratio <= 1, result


def test_lying_device_data_and_nan_rows_past_the_context():
    # a negative context, one past the capacity, pages outside the cache (TMA loads past the tensor: zeros), and
    # every cache row no sequence reaches NaN (a never-written cache): V's rows past L are zeroed, K's masked
    problem = PagedDecodeProblem(3, 4, 2, 64, 2, 16, 4, 12)
    p = paged_target.plan(problem, PagedDecodeConfig(warps=2, stages=2, splits=2, merge="kernel"))
    arrays = paged.random_inputs(problem, seed=3, contexts=[5, 40, 37])
    arrays["CONTEXT_LENS"][:] = [-3, 1000, 37]
    arrays["BLOCK_TABLE"][2, 1] = 99
    arrays["BLOCK_TABLE"][1, 0] = -7
    seen = np.zeros(problem.num_pages * problem.page_size, bool)
    for b, L in enumerate(paged.clamped_contexts(problem, arrays["CONTEXT_LENS"])):
        for j in range(L):
            page = arrays["BLOCK_TABLE"][b, j // problem.page_size]
            if 0 <= page < problem.num_pages:
                seen[page * problem.page_size + j % problem.page_size] = True
    for name in ("K_CACHE", "V_CACHE"):
        flat = arrays[name].reshape(-1, problem.kv_heads, problem.head_dim)
        flat[~seen] = np.nan
    (o, lse), where = paged_target.execute(p, arrays)
    assert where == EMULATOR and np.isfinite(np.asarray(o, np.float64)).all()
    assert np.all(np.asarray(o[0], np.float64) == 0) and np.all(lse[0] == -np.inf)
    assert max(paged.compare(problem, arrays, o, lse)) <= 1


@pytest.mark.parametrize("head_dim, kv_dtype", [(128, "bf16"), (64, "bf16"), (128, "fp8"), (64, "fp8")])
def test_the_consumers_words_are_where_tma_swizzles_them(head_dim, kv_dtype):
    # smem_word(key, word) * 4 == the TMA box layout: slice after slice of 16 rows of swizzle_bytes, each
    # byte at isa.hopper_layout.swizzle of its linear offset in its slice
    p = paged_target.plan(PagedDecodeProblem(1, 2, 1, head_dim, 1, 16, 1, 1, kv_dtype=kv_dtype))
    sw = p.swizzle_bytes
    for key in range(16):
        for word in range(p.row_words):
            byte = 4 * word
            linear = key * sw + byte % sw
            expected = byte // sw * 16 * sw + int(swizzle(np.int64(linear), sw))
            assert p.smem_word(key, word) * 4 == expected, (key, word)


def test_the_row_shares_sm80s_partition_and_refusals_not_its_merge_weighing():
    problem = PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096)
    p = paged_target.plan(problem, context=32768, sms=132)
    q = plan_paged_decode(problem, context=32768, sms=132)
    assert isinstance(p, Sm90PagedDecodePlan)
    assert (p.partition, p.split_kv) == (q.partition, q.split_kv)
    # the merge: the sm80 row weighs the last CTA's (WEIGH_LAST_CTA: 64 partials, 6.4 us against 6.5), this one keeps
    # the merge kernel unless forced (Sm90PagedDecodePlan.WEIGH_MERGE: no pair of it timed since the merge's lanes)
    assert (p.merge, q.merge) == ("kernel", "last-cta")
    assert paged_target.plan(problem, PagedDecodeConfig(merge="last-cta"), context=32768, sms=132).merge == "last-cta"
    summary = json.loads(p.to_json())
    assert summary["target"] == "sm90" and summary["block_threads"] == p.threads + 32 and summary["tma_slices"] == 2
    assert attention.paged_verb("sm90", "choose")(problem, context=32768, sms=132).partition == q.partition
    from tvm_cdna4.errors import ContractError

    with pytest.raises(ContractError, match="sm90 paged decode: heads / kv_heads x queries") as info:
        paged_target.plan(PagedDecodeProblem(1, 64, 1, 64, 2, 16, 1, 1))
    assert info.value.operand == "queries"


def test_fp8_pairs_widen_by_one_cvt_and_a_bf16_q_beyond_f16s_range_stays_exact():
    # sm_89+'s cvt.rn.f16x2.e4m3x2 gives exact values (no x / 256, no bit moves): a bf16 Q of |q| ~ 1e6 still goes
    # through Q_PRESCALE into f16 and the scores' factor
    problem = PagedDecodeProblem(1, 4, 2, 64, 1, 16, 2, 2, kv_dtype="fp8")
    p = paged_target.plan(problem, PagedDecodeConfig(warps=2, stages=2))
    assert p.fp8_cvt and p.cvt and p.q_factor == 2.0**-8  # the record says what the kernel does
    with pytest.raises(ContractError, match="fp8_cvt"):
        plan_paged_decode_sm90(p.problem, PagedDecodeConfig(fp8_cvt=False))
    arrays = paged.random_inputs(problem, seed=8, contexts=[24])
    arrays["Q"] = (arrays["Q"].astype(np.float32) * 3e5).astype(arrays["Q"].dtype)
    (o, lse), _ = paged_target.execute(p, arrays)
    assert max(paged.compare(problem, arrays, o, lse)) <= 1
    script = paged_target.emit(p)[0].script()
    assert "e4m3x2" in script and str(0x3F803F80) not in script  # sm80's bit-moving mask is absent


def test_the_last_cta_merge_with_and_without_tickets():
    # one partition: the plan's last-CTA merge (one launch, no ticket); forced over 2 partitions of 32 keys: 40 keys
    # draw tickets (the consumers' named barrier orders them; the producer warp takes no part), 5 keys merge alone,
    # 0 keys get O = 0, LSE = -inf from the first CTA
    problem = PagedDecodeProblem(3, 4, 2, 64, 1, 16, 4, 12)
    one = paged_target.plan(problem)
    assert one.split_kv == 1 and one.merge == "last-cta" and one.merge_params == ()
    p = paged_target.plan(problem, PagedDecodeConfig(warps=2, stages=2, partition=32, merge="last-cta"))
    assert p.split_kv == 2 and p.params[-3].name == "TICKETS"
    arrays = paged.random_inputs(problem, seed=9, contexts=[40, 5, 0])
    (o, lse), where = paged_target.execute(p, arrays)
    assert where == EMULATOR and np.all(lse[2] == -np.inf) and not np.asarray(o[2], np.float64).any()
    assert max(paged.compare(problem, arrays, o, lse)) <= 1
