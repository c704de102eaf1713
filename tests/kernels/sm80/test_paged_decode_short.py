"""The last-CTA merge's rounds (``PagedDecodeConfig.merge_batch``, issue 37 at short contexts): the partials an item
loads a round, the items a thread a pass (``paged_decode_plan.last_round``), exact in the CUDA emulator; the default
kernels' code unchanged (``test_paged_decode_wide.py``'s goldens)."""

import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.sm80 import paged_target
from tvm_cdna4.kernels.sm80.paged_decode_plan import (LAST_LOADS, MAX_MERGE_BATCH, MERGE_BATCH, MERGE_PASS,
                                                      PagedDecodeConfig, plan_paged_decode)


def _emulate_main(p, arrays, out):
    from tvm_cdna4.emulator import emulate

    main, merge = paged_target.emit(p)
    assert merge is None
    emulate(main, *(out[q.name] for q in p.params), target="sm80")


@pytest.mark.parametrize("merge_batch, rows, passes", [
    pytest.param(*c, marks=pytest.mark.slow) for c in ((3, 16, 2), (16, 2, 1), (2, 2, 1), (16, 16, 4))])  # merge_batch: opt-in
def test_the_last_cta_merge_in_forced_rounds_matches_the_reference(merge_batch, rows, passes):
    # 32-key partitions: 160 keys (5 partials: one round of 16, three of 2, two of 3), 5 keys (one partial, no ticket),
    # 0 keys (O = 0, LSE = -inf); rows 16 (4 queries x group 4): 512 (row, dim pair) items over 64 threads
    queries = rows // 2 if rows > 2 else 1
    problem = PagedDecodeProblem(3, 2 * (rows // queries), 2, 64, queries, 16, 19, 24)
    p = plan_paged_decode(problem, PagedDecodeConfig(partition=32, warps=2, stages=2, merge="last-cta",
                                                     merge_batch=merge_batch))
    assert (p.rows, p.last_batch, p.merge_passes) == (rows, merge_batch, passes)
    assert p.last_batch * p.last_pass <= max(LAST_LOADS, merge_batch)
    out = {**paged.output_arrays(problem), **paged_target.workspace(p)}
    for seed in (11, 12):  # two calls: the tickets left zeroed
        arrays = paged.random_inputs(problem, seed=seed, contexts=[160, 5, 0])
        out.update(arrays)
        out["O"][:] = np.nan
        _emulate_main(p, arrays, out)
        assert (out["TICKETS"] == 0).all()
        assert np.all(np.asarray(out["O"][2], np.float64) == 0) and np.all(out["LSE"][2] == -np.inf)
        o_ratio, lse_ratio = paged.compare(problem, arrays, o=out["O"], lse=out["LSE"])
        assert o_ratio <= 1 and lse_ratio <= 1, (seed, o_ratio, lse_ratio)


def test_the_short_row_takes_one_round_of_its_ten_partials():
    # batch 8 / the 1.8k draw (hint 4712): 512 keys, 10 partials; the default last-CTA merge takes 3 rounds of 4
    ctx = dict(page_size=16, max_pages=295, num_pages=914)
    for heads, nb, items, passes in ((32, 16, 2, 1), (64, 16, 2, 2), (64, 8, 4, 1)):
        problem = PagedDecodeProblem(8, heads, 8, 128, 1, **ctx)
        default = plan_paged_decode(problem, PagedDecodeConfig(merge="last-cta"), context=4712, sms=132)
        assert (default.split_kv, default.last_batch, default.last_pass) == (10, MERGE_BATCH, MERGE_PASS)
        p = plan_paged_decode(problem, PagedDecodeConfig(merge="last-cta", merge_batch=nb), context=4712, sms=132)
        assert (p.split_kv, p.last_batch, p.last_pass, p.merge_passes) == (10, nb, items, passes)


def test_merge_batch_is_refused_out_of_range_and_with_the_merge_kernel():
    for bad in (0, MAX_MERGE_BATCH + 1, True, 4.0):
        with pytest.raises(ContractError) as info:
            PagedDecodeConfig(merge="last-cta", merge_batch=bad)
        assert info.value.operand == "merge_batch"
    problem = PagedDecodeProblem(16, 32, 8, 128, 1, 16, 1856, 914)
    for merge in ("kernel", None):  # None: choose_merge's, the kernel here (58 partials at batch 16)
        with pytest.raises(ContractError) as info:
            plan_paged_decode(problem, PagedDecodeConfig(merge=merge, merge_batch=16), context=29696, sms=132)
        assert info.value.operand == "merge_batch" and info.value.expected == "merge='last-cta'"
