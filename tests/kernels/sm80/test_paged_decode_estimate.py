"""The paged decode estimate (``kernels.sm80.paged_decode_estimate``) against every bf16 H100 timing whose partition is
known (``FIT_RUNS``), and the partition choice it checks: the batch-8 rows take the partition that ran fastest."""

import json
import math

import attrs
import pytest

from tvm_cdna4.kernels.devices import DEVICES, planned
from tvm_cdna4.kernels.sm80 import paged_decode_estimate as est
from tvm_cdna4.kernels.sm80.paged_decode_plan import PagedDecodeConfig, plan_paged_decode

from paths import BENCHMARKS
from tests.benchmark_modules import benchmark_module

H100 = DEVICES["H100"]


def timings():
    """``(run, row, partition, us)`` of every bf16 timing of ``FIT_RUNS`` (the model's partition and each forced)."""
    out = []
    for name in est.FIT_RUNS:
        for r in json.loads((BENCHMARKS / "runs" / name).read_text())["rows"]:
            if r["kv_dtype"] != "bf16":
                continue
            out.append((name, r, r["partition"], r["us"]))
            out += [(name, r, int(k), v) for k, v in r.get("forced", {}).items() if k.isdigit()]
    return out


def problem(r):
    return benchmark_module("paged_decode").problem_of(r, r["contexts"])


def test_the_estimate_fits_every_bf16_timing_of_the_runs():
    """38 timings (18 + 12 + 8), rms 2.8 % of the measured time, worst -5.6 / +6.2 %; the partition-blind estimate
    (the bytes at the same read rate plus its own least-squares fixed time, 10.9 us: what the rule implies, one time
    whatever the partition) is off by 3.5 % rms, -8.5 / +9.6 % worst."""
    errors, blind, measured = [], [], []
    for _name, r, partition, us in timings():
        p = problem(r)
        t = est.partition_seconds(p, partition, r["contexts"], resident=2, device=H100) * 1e6
        errors.append(t / us - 1)
        share = est.READ_SHARE - est.ROW_SHARE_LOSS * max(0, p.group - est.BASE_ROWS)
        blind.append(p.kv_bytes(r["contexts"]) / (share * H100.hbm_bytes_s) * 1e6)
        measured.append(us)
    fixed = sum((u - b) / u / u for b, u in zip(blind, measured)) / sum(1 / u / u for u in measured)
    blind = [(fixed + b) / u - 1 for b, u in zip(blind, measured)]
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    rms_blind = math.sqrt(sum(e * e for e in blind) / len(blind))
    assert len(errors) == 38 and 10.5 < fixed < 11.5
    assert 0.027 < rms < 0.029 and -0.057 < min(errors) and max(errors) < 0.063, (rms, errors)
    assert 0.034 < rms_blind < 0.036 and min(blind) < -0.08 and max(blind) > 0.09, (rms_blind, blind)


def test_the_estimate_ranks_the_forced_partitions_at_batch_8_as_they_ran():
    """Batch 8, 1.8k (564..4712), bf16, forced 128..512 keys: 512 ran fastest at both GQAs (28.9 / 30.4 us: 256
    non-empty CTAs, one wave of 264 slots), and the estimate's fastest is 512 too; 320 / 384 (400 / 336 CTAs, two
    waves) are ranked behind 512 by 0.6-2.6 us as they ran 1.6-2.8 us behind."""
    rows = json.loads((BENCHMARKS / "runs" / est.FIT_RUNS[1]).read_text())["rows"]
    for r in (r for r in rows if r["kv_dtype"] == "bf16"):
        p = problem(r)
        us = {int(k): v for k, v in r["forced"].items() if k.isdigit()} | {r["partition"]: r["us"]}
        t = {k: est.partition_seconds(p, k, r["contexts"], resident=2, device=H100) * 1e6 for k in us}
        assert min(us, key=us.get) == min(t, key=t.get) == 512, (us, t)
        assert len(est.cta_bytes(p, 512, r["contexts"])) == 256 and len(est.cta_bytes(p, 320, r["contexts"])) == 400
        for k in (320, 384):
            assert 0.5 < t[k] - t[512] < 2.7 and 1.5 < us[k] - us[512] < 2.9, (k, t, us)


def test_the_batch_8_bf16_rows_take_512_keys_and_the_batch_32_64_rows_keep_theirs():
    """The model's choice on the FlashInfer run's 36 rows, as ``paged_decode.py`` plans them (the hint: the longest
    context): bf16 takes 512 keys on every row (the batch-8 1.8k rows moved 320 -> 512 with ``FILL_WAVES``; the rest
    sit at ``MAX_PARTITION_BYTES``); the run's batch-32 / 64 rows (1.03-1.16x FlashInfer) keep their partition."""
    rows = json.loads((BENCHMARKS / "runs" / est.FIT_RUNS[0]).read_text())["rows"]
    for r in rows:
        p = plan_paged_decode(problem(r), PagedDecodeConfig(tile_keys=16), context=max(r["contexts"]), sms=132)
        if r["kv_dtype"] == "bf16":
            assert p.partition == 512, r
        if r["batch"] > 8:
            assert p.partition == r["partition"], r


def test_a_ctas_bytes_follow_the_partition_and_the_grids_last_takes_the_rest():
    r = json.loads((BENCHMARKS / "runs" / est.FIT_RUNS[1]).read_text())["rows"][0]
    p = problem(r)
    work = est.cta_bytes(p, 512, [1000, 0, 513], context=512)  # a hint short of 1000: its one CTA takes all
    assert work == [1000 * 512] * 8 + [513 * 512] * 8
    work = est.cta_bytes(p, 512, [1000, 0, 513])
    assert work == [512 * 512, 488 * 512] * 8 + [512 * 512, 1 * 512] * 8  # (sequence, kv head, partition) order
    assert est.stream_seconds([100, 100], 1, 100.0, cta_rate=100.0, start=1.0) == 4.0  # one slot: two in turn
    assert est.stream_seconds([100, 100], 2, 100.0, cta_rate=100.0, start=1.0) == 3.0  # sharing the rate


def test_the_benchmark_carries_the_estimate_at_the_models_partition_and_each_forced_one():
    """Each with its plan's merge (``merge_term``): at this row (batch 8, 1.8k, longest 4712) the model's 512 keys
    and the balanced kernel's 640 merge 10 / 8 partials in the last CTA, 1.0 / 0.8 us, where the merge kernel (which
    ``FIXED_S`` counts) costs 0.3 + 0.1 x 1024 CTAs / 132 SMs = 1.08 us; 320 keys (15 partials) keep the kernel."""
    import argparse

    estimates = benchmark_module("paged_decode").estimates

    r = json.loads((BENCHMARKS / "runs" / est.FIT_RUNS[1]).read_text())["rows"][0]  # bf16, batch 8, 1.8k, 32/8
    p = problem(r)
    out = estimates(p, r["contexts"], argparse.Namespace(target="sm80", partitions=[320, 512], configs=[]))
    assert list(out) == ["model", "320", "512"] and out["model"] == out["512"]  # the plan's 512 keys
    kernel = 0.3 + 0.1 * 1024 / planned("sm80").units  # the planner's SMs (132)
    streamed = est.partition_seconds(p, 512, r["contexts"], p.capacity, 2) * 1e6
    assert out["512"] == pytest.approx(streamed + 1.0 - kernel)
    assert out["320"] == est.partition_seconds(p, 320, r["contexts"], p.capacity, 2) * 1e6  # the merge kernel
    balanced = estimates(p, r["contexts"], argparse.Namespace(target="sm80", partitions=[], configs=["balance=true"]))
    wide = est.partition_seconds(p, 640, r["contexts"], p.capacity, 2) * 1e6  # the balanced kernel's 640 keys
    assert list(balanced) == ["model", "balanced"] and balanced["balanced"] == pytest.approx(wide + 0.8 - kernel)
    assert out["320"] > out["512"] > est.FIXED_S * 1e6


def test_a_last_cta_plans_estimate_saves_the_merge_kernel_less_its_partials():
    """``plan_seconds`` follows the plan's merge (``merge_term``): ``FIXED_S`` counts the merge kernel (every plan of
    ``FIT_RUNS`` merged in it), a last-CTA plan trades it for its partials. Batch 8, 1.8k (longest 4712), 512 keys:
    10 partials, 1.0 us, against 0.3 + 0.1 x 1024 / 132 = 1.08 us; balanced (640 keys on the device): 8, 0.8 us; one
    partition: the kernel's whole term saved, no partial merged."""
    r = json.loads((BENCHMARKS / "runs" / est.FIT_RUNS[1]).read_text())["rows"][0]
    p, contexts = problem(r), r["contexts"]
    kernel = (0.3 + 0.1 * 1024 / 132) * 1e-6
    for config, partials in ((PagedDecodeConfig(balance=False), 10), (PagedDecodeConfig(balance=True), 8)):
        last = plan_paged_decode(p, config, sms=132)
        forced = plan_paged_decode(p, attrs.evolve(config, merge="kernel"), sms=132)
        assert (last.merge, forced.merge) == ("last-cta", "kernel") and est.merge_term(forced, contexts) == 0.0
        assert est.merge_term(last, contexts) == pytest.approx(partials * 0.1e-6 - kernel)
        assert est.plan_seconds(last, contexts, H100) - est.plan_seconds(forced, contexts, H100) == pytest.approx(
            partials * 0.1e-6 - kernel)
    one = plan_paged_decode(p, PagedDecodeConfig(splits=1, balance=False), sms=132)
    assert one.merge == "last-cta" and est.merge_term(one, contexts) == pytest.approx(-kernel)
