"""The balanced partition (``PagedDecodeConfig.balance``, ``paged_decode_plan.balance_tiles``): the kernel widens its
partition on the device from ``CONTEXT_LENS`` so that the non-empty CTAs fit one wave (FlashInfer's tensor-core
decode's rule, in closed form). In the CUDA emulator: the partials written are exactly the balanced partitions',
the merge kernel and the last-CTA merge read those and match the reference; a short hint and lying lengths keep
the clamps; the switch is off by default and its refusals name the rule."""

import attrs
import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.devices import planned
from tvm_cdna4.kernels.gemm.dynamic_m import ceil_div
from tvm_cdna4.kernels.sm80 import paged_decode_plan as plan_mod
from tvm_cdna4.kernels.sm80 import paged_target
from tvm_cdna4.kernels.sm80.paged_decode_plan import (PagedDecodeConfig, balance_divisor, balance_tiles,
                                                       plan_paged_decode, resident_ctas)

PROBLEM = PagedDecodeProblem(3, 4, 2, 64, 1, 16, 20, 40)  # capacity 320 keys


def _run(p, arrays):
    from tvm_cdna4.emulator import emulate

    out = {**arrays, **paged.output_arrays(p.problem), **paged_target.workspace(p)}
    main, merge = paged_target.emit(p)
    emulate(main, *(out[q.name] for q in p.params), target="sm80")
    if merge is not None:
        emulate(merge, *(out[q.name] for q in p.merge_params), target="sm80")
    return out


def _balanced(merge, context=None, split_major=False):
    # 32-key static partitions (2 warps x 16); divisor 2: contexts 5 / 300 / 90 are 1 + 19 + 6 = 26 tiles, so the
    # device takes ceil(26 / 4) x 2 = 14 tiles (224 keys): 1 + 2 + 1 partitions a kv head, 4 <= divisor + batch
    config = PagedDecodeConfig(partition=32, warps=2, stages=2, merge=merge, split_major=split_major)
    p = plan_paged_decode(PROBLEM, config, context=context)
    assert p.split_major == split_major
    return attrs.evolve(p, balance=2)


@pytest.mark.parametrize("merge, split_major", [pytest.param("kernel", False, marks=pytest.mark.slow),
                                                pytest.param("last-cta", False, marks=pytest.mark.slow),
                                                pytest.param("kernel", True, marks=pytest.mark.slow),
                                                ("last-cta", True)])  # balance is off (stop 53: 2-4 % at batch 8)
def test_the_balanced_partition_writes_one_wave_of_partials_and_matches_the_reference(merge, split_major):
    p = _balanced(merge, split_major=split_major)
    contexts = [5, 300, 90]
    assert balance_tiles(p.part_tiles, contexts, 16, 2, 2) == 14 and p.split_kv == 10
    arrays = paged.random_inputs(PROBLEM, seed=5, contexts=contexts)
    out = _run(p, arrays)
    written = {i for i in range(p.slots) if np.isfinite(out["WM"][i]).all()}
    parts = [ceil_div(L, 14 * 16) for L in contexts]  # 1, 2, 1: of the static partition's 1, 10, 3
    assert written == {(b * 2 + g) * 10 + s for b in range(3) for g in range(2) for s in range(parts[b])}
    if merge == "last-cta":
        assert (out["TICKETS"] == 0).all()
    assert max(paged.compare(PROBLEM, arrays, out["O"], out["LSE"])) <= 1


def test_a_short_hint_and_lying_lengths_keep_the_clamps_balanced():
    # the grid sized for a 64-key hint (2 partitions of 32); a negative length is 0 keys, one past the capacity the
    # capacity, in the sum too: 0 + 19 + 20 tiles, 20-tile partitions; the hint's 2 partitions hold every key
    p = _balanced("kernel", context=64)
    assert p.split_kv == 2
    arrays = paged.random_inputs(PROBLEM, seed=6, contexts=[5, 300, 90])
    arrays["CONTEXT_LENS"][:] = [-4, 300, 5000]
    out = _run(p, arrays)
    assert np.all(np.asarray(out["O"][0], np.float64) == 0) and np.all(out["LSE"][0] == -np.inf)
    assert max(paged.compare(PROBLEM, arrays, out["O"], out["LSE"])) <= 1


def test_the_switch_is_off_by_default_and_sized_by_the_wave():
    assert plan_mod.BALANCE is False and plan_paged_decode(PROBLEM).balance == 0
    big = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 1487, 10000)
    p = plan_paged_decode(big, PagedDecodeConfig(balance=True), sms=132)
    slots = resident_ctas(p, planned("sm80")) * 132
    assert p.balance == balance_divisor(big, slots) == slots // 8 - 8 == 25  # bf16 D 128: 2 CTAs an SM
    # the H200 run's batch-8 / 9.4k contexts: 47 static partitions of 512 keys -> 3072, 224 non-empty CTAs (<= 264)
    contexts = [2611, 3812, 3929, 4696, 7479, 8581, 20409, 23784]
    pt = balance_tiles(p.part_tiles, contexts, 16, 4, p.balance)
    assert pt * 16 == 3072 and 8 * sum(ceil_div(L, pt * 16) for L in contexts) == 224
    with pytest.raises(ContractError, match="balance") as info:
        plan_paged_decode(PagedDecodeProblem(64, 32, 8, 128, 1, 16, 64, 4096), PagedDecodeConfig(balance=True))
    assert info.value.operand == "balance"
    with pytest.raises(ContractError, match="balance"):
        PagedDecodeConfig(balance=1)
    with pytest.raises(ContractError) as info:  # 16 x 16 = 256 CTAs fit 264 slots, but 264 // 16 - 16 = 0: refused
        plan_paged_decode(PagedDecodeProblem(16, 32, 16, 128, 1, 16, 64, 4096), PagedDecodeConfig(balance=True),
                          sms=132)
    assert info.value.expected.startswith("batch < 264 CTA slots // kv_heads = 16 ") and "16" in info.value.found


def test_the_sm90_kernel_takes_the_balanced_partition_and_the_partition_major_order_too():
    from tvm_cdna4.kernels.sm90 import paged_target as sm90

    problem = PagedDecodeProblem(3, 4, 2, 64, 1, 16, 20, 40, kv_dtype="fp8", q_dtype="f16")
    config = PagedDecodeConfig(partition=32, warps=2, stages=2, merge="kernel", split_major=True)
    p = attrs.evolve(sm90.plan(problem, config), balance=2)
    arrays = paged.random_inputs(problem, seed=7, contexts=[5, 300, 90])
    (o, lse), where = sm90.execute(p, arrays)
    assert where.startswith("the CUDA emulator")
    assert max(paged.compare(problem, arrays, o, lse)) <= 1


@pytest.mark.parametrize("merge", ["kernel", pytest.param("last-cta", marks=pytest.mark.slow)])
def test_partition_major_launch_order_alone_writes_the_same_partials(merge):
    # no balance: the static 32-key partitions (1 + 10 + 3 of them a kv head), the CTAs launched partition-major
    config = PagedDecodeConfig(partition=32, warps=2, stages=2, merge=merge, split_major=True)
    p = plan_paged_decode(PROBLEM, config)
    assert p.split_major and not p.balance and plan_mod.SPLIT_MAJOR is False
    assert plan_paged_decode(PROBLEM, attrs.evolve(config, split_major=None)).split_major is False
    from tvm_cdna4.kernels.sm80.paged_decode_emit import cta_bh, cta_split

    order = [(cta_bh(p, pid), cta_split(p, pid)) for pid in range(p.ctas)]  # (bh, partition) by launch order
    assert order[:7] == [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (0, 1)]
    assert sorted(order) == [(bh, s) for bh in range(6) for s in range(10)]  # each CTA once
    contexts = [5, 300, 90]
    arrays = paged.random_inputs(PROBLEM, seed=9, contexts=contexts)
    out = _run(p, arrays)
    written = {i for i in range(p.slots) if np.isfinite(out["WM"][i]).all()}
    parts = [ceil_div(L, 32) for L in contexts]
    assert written == {(b * 2 + g) * 10 + s for b in range(3) for g in range(2) for s in range(parts[b])}
    assert max(paged.compare(PROBLEM, arrays, out["O"], out["LSE"])) <= 1


@pytest.mark.parametrize("merge, split_major", [("kernel", True)] + [
    pytest.param(m, s, marks=pytest.mark.slow) for m, s in (("last-cta", False), ("last-cta", True))])
def test_lying_lengths_and_pages_keep_the_clamps_and_the_written_partials_balanced(merge, split_major):
    # issue 37's lying device data where the balanced partition splits sequences: lengths -4 / 300 / 5000 are 0 / 19 /
    # 20 tiles (clamped, in the sum too), divisor 4: ceil(39 / 8) x 2 = 10-tile partitions, 0 / 2 / 2 a kv head of
    # the grid's 10; pages outside the cache (99, -7) inside the keys read; every access in bounds (the emulator)
    p = attrs.evolve(_balanced(merge, split_major=split_major), balance=4)
    arrays = paged.random_inputs(PROBLEM, seed=11, contexts=[5, 300, 90])
    arrays["CONTEXT_LENS"][:] = [-4, 300, 5000]
    arrays["BLOCK_TABLE"][1, 12] = 99  # the second partition of sequence 1 (keys 160..)
    arrays["BLOCK_TABLE"][2, 3] = -7
    assert balance_tiles(p.part_tiles, [0, 300, 320], 16, 2, 4) == 10
    out = _run(p, arrays)
    written = {i for i in range(p.slots) if np.isfinite(out["WM"][i]).all()}
    assert written == {(b * 2 + g) * 10 + s for b in (1, 2) for g in range(2) for s in range(2)}
    if merge == "last-cta":
        assert (out["TICKETS"] == 0).all()
    assert np.all(np.asarray(out["O"][0], np.float64) == 0) and np.all(out["LSE"][0] == -np.inf)
    assert max(paged.compare(PROBLEM, arrays, out["O"], out["LSE"])) <= 1
