"""The sm80 paged decode attention (``kernels.sm80.paged_decode_*``) in the CUDA emulator: odd contexts, 4
queries, fp8 KV, small pages, and lying device data (the emulator's out-of-bounds checks stay silent; the
output follows ``kernels.attention.paged``'s clamps); the split count's cost model; the plan's refusals."""

import json
import sys

import attrs
import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.sm80 import paged_target
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, choose_partition, plan_paged_decode

from paths import BENCHMARKS



@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
def test_odd_contexts_4_queries_fp8_kv_d128_match_the_reference():
    problem = PagedDecodeProblem(3, 8, 2, 128, 4, 32, 10, 40, kv_dtype="fp8")
    result = attention.validate_paged(problem, "sm80", PagedDecodeConfig(warps=4, stages=3, splits=2), seed=1,
                                      contexts=[1, 77, 300])
    assert result.ok and result.where.startswith("the CUDA emulator") and 0 < result.o_ratio <= 1, result


@pytest.mark.parametrize("q_dtype, kv_dtype", [("bf16", "bf16"), ("f16", "fp8")])
def test_small_pages_and_each_dtype(q_dtype, kv_dtype):
    problem = PagedDecodeProblem(2, 4, 2, 64, 2, 16, 4, 12, kv_dtype=kv_dtype, q_dtype=q_dtype)
    result = attention.validate_paged(problem, "sm80", PagedDecodeConfig(warps=2, stages=2, splits=2), seed=2,
                                      contexts=[5, 40])
    assert result.ok and 0 < result.o_ratio <= 1, result


def test_lying_device_data_stays_in_bounds_and_follows_the_clamps():
    problem = PagedDecodeProblem(3, 4, 2, 64, 2, 16, 4, 12)
    p = plan_paged_decode(problem, PagedDecodeConfig(warps=2, stages=2, splits=2, merge="kernel"))
    arrays = paged.random_inputs(problem, seed=3, contexts=[5, 40, 40])
    arrays["CONTEXT_LENS"][:] = [-3, 1000, 40]  # negative; past the capacity (64)
    arrays["BLOCK_TABLE"][2, 1] = 99  # outside the 12 pages
    arrays["BLOCK_TABLE"][1, 0] = -7
    (o, lse), where = paged_target.execute(p, arrays)  # the emulator raises on any out-of-bounds access
    assert where.startswith("the CUDA emulator")
    assert np.all(np.asarray(o[0], np.float64) == 0) and np.all(lse[0] == -np.inf)  # negative: empty rows
    o_ratio, lse_ratio = paged.compare(problem, arrays, o, lse)
    assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)


def test_the_partition_of_each_h100_row_takes_what_ran_fastest_at_batch_8_and_keeps_the_rest():
    """The 36 rows of the H100's FlashInfer run (``paged_decode_flashinfer_h100_2026-12-06f.json``: the model's
    partition before ``FILL_WAVES``): only the bf16 rows at batch 8 move, 320 -> 512 keys (28.9 against 30.5 us and
    30.4 against 33.1 in ``paged_decode_partitions_h100_2026-12-06f.json``); fp8 at batch 8 keeps 320 / 576."""
    sys.path.append(str(BENCHMARKS))  # after tests/: a benchmark script never shadows a test helper
    from paged_decode import problem_of

    runs = BENCHMARKS / "runs"
    rows = json.loads((runs / "paged_decode_flashinfer_h100_2026-12-06f.json").read_text())["rows"]
    moved = {}
    timed_tiles = PagedDecodeConfig(tile_keys=16)  # the kernels of those runs (fp8's wide tiles came later)
    for r in rows:
        p = plan_paged_decode(problem_of(r, r["contexts"]), timed_tiles, context=max(r["contexts"]), sms=132)
        if p.partition != r["partition"]:
            moved[r["kv_dtype"], r["batch"], r["mean"], r["heads"]] = (r["partition"], p.partition)
    assert len(rows) == 36 and moved == {("bf16", 8, 2048, 32): (320, 512), ("bf16", 8, 2048, 64): (320, 512)}
    timed = json.loads((runs / "paged_decode_partitions_h100_2026-12-06f.json").read_text())["rows"]
    for r in timed:  # every timed partition of the row: the bf16 choice is the fastest, fp8's within 5 % of it
        p = plan_paged_decode(problem_of(r, r["contexts"]), timed_tiles, context=max(r["contexts"]), sms=132)
        us = {int(k): v for k, v in r["forced"].items() if k.isdigit()} | {r["partition"]: r["us"]}
        assert us[p.partition] <= min(us.values()) * (1.0 if r["kv_dtype"] == "bf16" else 1.05), (r["heads"], us)


def test_the_partition_fills_the_gpu_and_bounds_each_ctas_keys():
    one = PagedDecodeProblem(1, 32, 8, 128, 1, 16, 2048, 4096)
    assert choose_partition(one, 32768, 132, 4, 4) == 256  # 2 waves of 4 resident: 128 partitions x 8 kv heads
    assert choose_partition(one, 32768, 132, 4, 2) == 512  # of 2 (bf16 D 128's 100 KB): 64 partitions
    big = PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096)
    assert choose_partition(big, 32768, 132, 4, 2) == 512  # 256 KiB of K and V per CTA, whatever the lengths
    fp8 = PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096, kv_dtype="fp8")
    assert choose_partition(fp8, 32768, 132, 4, 4) == 1024  # the same bytes, twice the keys
    small = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 295, 4096)
    assert choose_partition(small, 4712, 132, 4, 4) == 320  # fill: 2 waves of 4 resident CTAs, 17 partitions
    assert choose_partition(small, 4712, 132, 4, 2) == 512  # 2 waves of 2: 9 partitions, cut to 256 KiB
    q4 = PagedDecodeProblem(64, 32, 8, 128, 4, 16, 2048, 4096)
    assert choose_partition(q4, 32768, 132, 4, 2) == 576  # 16 rows: the partial amortized (16 x its 16.6 KB)
    p = plan_paged_decode(big, context=32768, sms=132)
    summary = json.loads(p.to_json())
    assert summary["split_kv"] == p.split_kv == 64 and summary["ctas"] == 64 * 8 * 64 and p.slots == p.ctas
    assert summary["partition"] == 512


def test_empty_partitions_exit_and_a_short_hint_loses_no_key():
    # the grid sized for 64 keys (partition 32): sequence 0's partitions past its 5 keys write nothing (their
    # slots stay NaN) and the merge never reads them; sequence 1's 100 keys go to the grid's last CTA
    problem = PagedDecodeProblem(2, 4, 2, 64, 1, 16, 7, 14)
    p = plan_paged_decode(problem, PagedDecodeConfig(warps=2, stages=2, splits=2, merge="kernel"), context=64)
    assert (p.partition, p.split_kv) == (32, 2)
    arrays = paged.random_inputs(problem, seed=4, contexts=[5, 100])
    from tvm_cdna4.emulator import emulate

    out = {**arrays, **paged.output_arrays(problem), **paged_target.workspace(p)}
    main, merge = paged_target.emit(p)
    emulate(main, *(out[q.name] for q in p.params), target="sm80")
    assert np.isnan(out["WM"][1]).all() and np.isnan(out["WM"][3]).all()  # (b 0, kv heads 0 / 1, partition 1)
    assert np.isfinite(out["WM"][[0, 2, 4, 5, 6, 7]]).all()
    emulate(merge, *(out[q.name] for q in p.merge_params), target="sm80")
    assert np.isfinite(np.asarray(out["O"], np.float64)).all()
    assert max(paged.compare(problem, arrays, out["O"], out["LSE"])) <= 1


def test_the_plan_refuses_by_name():
    with pytest.raises(ContractError, match="query rows per kv head") as info:
        plan_paged_decode(PagedDecodeProblem(1, 64, 1, 64, 2, 16, 1, 1))
    assert info.value.operand == "queries"
    with pytest.raises(ContractError, match="config warps") as info:
        PagedDecodeConfig(warps=0)
    with pytest.raises(ContractError, match="context") as info:
        plan_paged_decode(PagedDecodeProblem(1, 8, 8, 64, 1, 16, 1, 1), context=0)
    with pytest.raises(ValueError, match=r"paged decode attention target: expected one of \('gfx950', 'sm80', 'sm90'\)"):
        attention.paged_verb("sm70", "plan")


def test_many_partitions_merge_in_batches():
    # 32-key partitions: the 300-key sequence's 10 partials merge over the merge kernel's 8 lanes in shares of 2
    # (lanes 5-7 hold none: max -inf, factor 0 in the shuffles); the 5-key one's 1 (lane 0 alone)
    problem = PagedDecodeProblem(2, 4, 2, 64, 1, 16, 19, 24)
    config = PagedDecodeConfig(partition=32, warps=2, stages=2)
    assert attention.paged_verb("sm80", "plan")(problem, config).split_kv == 10
    result = attention.validate_paged(problem, "sm80", config, seed=6, contexts=[5, 300])
    assert result.ok and 0 < result.o_ratio <= 1, result


def test_one_warp_writes_every_rows_partial():
    # 64 query rows (16 heads of one kv head x 4 queries) over a 32-thread CTA: the row maxima and sums too
    problem = PagedDecodeProblem(1, 16, 1, 64, 4, 16, 2, 2)
    result = attention.validate_paged(problem, "sm80", PagedDecodeConfig(warps=1, stages=2), seed=7, contexts=[20])
    assert result.ok and 0 < result.o_ratio <= 1, result


@pytest.mark.parametrize("factor", [3e5, 1e-4])
def test_fp8_kv_with_a_bf16_q_beyond_f16s_range(factor):
    # fp8 KV runs f16 MMAs: a bf16 Q of |q| ~ 1e6 (past f16's 65504) or ~ 3e-4 goes through Q_PRESCALE intact
    problem = PagedDecodeProblem(1, 4, 2, 64, 1, 16, 2, 2, kv_dtype="fp8")
    p = plan_paged_decode(problem, PagedDecodeConfig(warps=2, stages=2))
    assert p.mma_type == "f16" and p.q_factor == 2.0**-8
    arrays = paged.random_inputs(problem, seed=8, contexts=[24])
    arrays["Q"] = (arrays["Q"].astype(np.float32) * factor).astype(arrays["Q"].dtype)
    (o, lse), _ = paged_target.execute(p, arrays)
    o_ratio, lse_ratio = paged.compare(problem, arrays, o, lse)
    assert o_ratio <= 1 and lse_ratio <= 1, (o_ratio, lse_ratio)


def test_a_forced_partition_and_its_refusals():
    problem = PagedDecodeProblem(2, 8, 2, 64, 1, 16, 64, 128)
    p = plan_paged_decode(problem, PagedDecodeConfig(partition=96, warps=2))
    assert (p.partition, p.split_kv, p.ctas) == (96, 11, 2 * 2 * 11)  # ceil(1024 / 96)
    for bad in (0, 40, True):
        with pytest.raises(ContractError, match="partition") as info:
            PagedDecodeConfig(partition=bad)
        assert info.value.operand == "partition"
    with pytest.raises(ContractError, match="splits or partition"):
        PagedDecodeConfig(splits=2, partition=64)


def _emulate_main(p, arrays, out):
    from tvm_cdna4.emulator import emulate

    main, merge = paged_target.emit(p)
    assert merge is None and p.merge_params == () and p.merge_ctas == 0
    emulate(main, *(out[q.name] for q in p.params), target="sm80")


@pytest.mark.slow  # emulator-heavy; the default plans' last-CTA merges run in the GPU tests
def test_the_last_cta_merges_in_one_launch_and_leaves_the_tickets_zeroed_over_two_calls():
    # 32-key partitions: 160 keys (5 partials, tickets 0..4, the 5th merges: batches of 4 and 1), 5 keys (one partial: no ticket),
    # 0 keys (no partial: partition 0 writes O = 0, LSE = -inf); two calls through one workspace
    problem = PagedDecodeProblem(3, 4, 2, 64, 1, 16, 19, 24)
    p = plan_paged_decode(problem, PagedDecodeConfig(partition=32, warps=2, stages=2, merge="last-cta"))
    assert p.merge == "last-cta" and p.params[-3].name == "TICKETS" and p.params[-3].shape == (6,)
    out = {**paged.output_arrays(problem), **paged_target.workspace(p)}
    assert (out["TICKETS"] == 0).all() and out["TICKETS"].dtype == np.uint32
    for seed in (9, 10):
        arrays = paged.random_inputs(problem, seed=seed, contexts=[160, 5, 0])
        out.update(arrays)
        out["O"][:] = np.nan
        _emulate_main(p, arrays, out)
        assert (out["TICKETS"] == 0).all()  # the last CTA reset every counter it drew on
        assert np.isnan(out["WM"][2 * 10 + 1]).all() and np.isnan(out["WM"][2 * 2 * 10]).all()  # empty: unwritten
        assert np.all(np.asarray(out["O"][2], np.float64) == 0) and np.all(out["LSE"][2] == -np.inf)
        o_ratio, lse_ratio = paged.compare(problem, arrays, out["O"], out["LSE"])
        assert o_ratio <= 1 and lse_ratio <= 1, (seed, o_ratio, lse_ratio)


@pytest.mark.slow  # emulator-heavy; the default plans' last-CTA merges run in the GPU tests
def test_the_last_cta_merge_keeps_the_lying_data_clamps():
    problem = PagedDecodeProblem(3, 8, 2, 64, 4, 16, 4, 12)  # 16 rows x 32 dim pairs: 2 passes of 2 warps
    p = plan_paged_decode(problem, PagedDecodeConfig(warps=2, stages=2, splits=2, merge="last-cta"))
    assert p.merge_passes == 2
    arrays = paged.random_inputs(problem, seed=3, contexts=[5, 40, 40])
    arrays["CONTEXT_LENS"][:] = [-3, 1000, 40]
    arrays["BLOCK_TABLE"][2, 1] = 99
    arrays["BLOCK_TABLE"][1, 0] = -7
    (o, lse), where = paged_target.execute(p, arrays)
    assert where.startswith("the CUDA emulator")
    assert np.all(np.asarray(o[0], np.float64) == 0) and np.all(lse[0] == -np.inf)
    assert max(paged.compare(problem, arrays, o, lse)) <= 1


def test_the_merge_model_weighs_the_last_ctas_partials_against_the_merge_kernels_ctas(monkeypatch):
    # merge_seconds (refitted, stop 56): last CTA 0.1 us a partial a pass; merge kernel 0.3 us + 0.1 us per its CTA per SM
    from tvm_cdna4.kernels.sm80 import paged_decode_plan
    from tvm_cdna4.kernels.sm80.paged_decode_plan import choose_merge, merge_kernel_ctas, merge_seconds
    from tvm_cdna4.kernels.sm90.paged_decode_plan import plan_paged_decode_sm90

    small = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 295, 4096)
    p = plan_paged_decode(small, context=4712, sms=132)
    assert (p.split_kv, p.merge, p.merge_ctas) == (10, "last-cta", 0)  # 512 keys: 10 partials, one launch
    assert p.params[-3].name == "TICKETS" and p.merge_params == ()
    assert merge_kernel_ctas(small) == 1024  # 8 x 8 x 4 rows x 64 dim pairs x 8 lanes / 128 threads
    cost = merge_seconds(small, 10, 4, 132)
    assert cost["last-cta"] == pytest.approx(1.0e-6) and cost["kernel"] == pytest.approx(0.3e-6 + 0.1e-6 * 1024 / 132)
    assert choose_merge(small, 11, 4, 132) == "kernel"  # batch 8: one launch up to 10 partials
    b32 = attrs.evolve(small, batch=32)
    assert choose_merge(b32, 34, 4, 132) == "last-cta" and choose_merge(b32, 35, 4, 132) == "kernel"
    q4 = PagedDecodeProblem(8, 64, 8, 128, 4, 16, 295, 4096)  # 32 rows: 4 passes in the last CTA, 8x the merge CTAs
    assert merge_seconds(q4, 5, 4, 132)["last-cta"] == pytest.approx(2.0e-6) and merge_kernel_ctas(q4) == 8192
    assert plan_paged_decode_sm90(small, context=4712, sms=132).merge == "kernel"  # the sm90 row does not weigh it
    monkeypatch.setattr(paged_decode_plan, "WEIGH_LAST_CTA", False)
    assert plan_paged_decode(small, context=4712, sms=132).merge == "kernel"  # off: the merge kernel, as before
    big = PagedDecodeProblem(64, 32, 8, 128, 1, 16, 2048, 4096)
    forced = plan_paged_decode(big, PagedDecodeConfig(merge="last-cta"), context=32768, sms=132)
    assert forced.merge == "last-cta" and forced.workspace_bytes() == plan_paged_decode(
        big, context=32768, sms=132).workspace_bytes() + 4 * 64 * 8
    with pytest.raises(ContractError, match="config merge") as info:
        PagedDecodeConfig(merge="atomic")
    assert info.value.operand == "merge" and info.value.expected.startswith("one of ('last-cta', 'kernel')")


def test_the_balanced_plan_weighs_the_partials_of_its_device_partition():
    # batch 8, 32/8, bf16, a 23.8k hint: 47 partitions of 512 keys, balanced by rule (divisor 25); its stand-in
    # batches' longest sequence has at most 9 partitions: the last CTA (0.9 us) against the merge kernel (1.08 us)
    from tvm_cdna4.kernels.sm80.paged_decode_plan import merge_partials

    problem = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 1487, 8 * 1487)
    p = plan_paged_decode(problem, sms=132)
    assert (p.split_kv, p.balance, p.split_major, merge_partials(p), p.merge) == (47, 25, True, 9, "last-cta")
    unbalanced = plan_paged_decode(problem, PagedDecodeConfig(balance=False), sms=132)
    assert (merge_partials(unbalanced), unbalanced.merge) == (47, "kernel")


def test_one_partition_is_one_launch_whatever_the_weighing(monkeypatch):
    # split_kv 1 (the dispatch benchmark's 64 keys): the last-CTA merge, no ticket drawn, no merge kernel to launch,
    # while WEIGH_LAST_CTA is off; two partitions keep the merge kernel; a forced merge stays forced
    from tvm_cdna4.kernels.sm80 import paged_decode_plan
    from tvm_cdna4.kernels.sm80.paged_decode_plan import choose_merge

    monkeypatch.setattr(paged_decode_plan, "WEIGH_LAST_CTA", False)
    one = PagedDecodeProblem(1, 8, 8, 64, 1, 16, 4, 4)
    p = plan_paged_decode(one)
    assert (p.split_kv, p.merge, p.merge_params, p.merge_ctas) == (1, "last-cta", (), 0)
    assert [q.name for q in p.params[-3:]] == ["TICKETS", "O", "LSE"]
    assert choose_merge(one, 1, 4, 132) == "last-cta" and choose_merge(one, 2, 4, 132) == "kernel"
    assert plan_paged_decode(one, PagedDecodeConfig(merge="kernel")).merge == "kernel"
    assert plan_paged_decode(one, context=64, sms=132).merge == "last-cta"
    assert plan_paged_decode(one, PagedDecodeConfig(partition=32)).merge == "kernel"  # two partitions
