"""The sm90 cost model's zero-fill term (``gemm_cost.WEIGH_ZERO_FILL``, off by default): the last tile row's token box
runs past M and TMA zero-fills those rows every k-tile (``zero_rows``, ``zero_fill``, ``FILL_BYTES_PER_CLK``), against
the torch op's H100 rows of 2026-12-07 (``benchmarks/runs/torch_gemm_partial_h100_2026-12-07c.json``: one plan at M =
256..384, slower the fewer rows of its last tile row exist; ``benchmarks/sm90_zero_fill.py``)."""

from __future__ import annotations

import json
import math

import attrs
import paths
import pytest

from tvm_cdna4.kernels import devices
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_shift
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, loaded_box, trim_boxes

PARTIAL = paths.RUNS / "torch_gemm_partial_h100_2026-12-07c.json"
H100 = attrs.evolve(devices.DEVICES["H100"],  # as the runs' driver read it
                    hbm_bytes_s=json.loads(PARTIAL.read_text())["meta"]["planned"]["hbm_bytes_s"])


@pytest.fixture
def weigh(monkeypatch):
    monkeypatch.setattr(gemm_cost, "WEIGH_ZERO_FILL", True)
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", False)  # the lever as its A/B ran it: TMA-store plans unshifted


def partial(model: str, proj: str) -> dict:
    """{M: (config, N, K, measured us)} of one projection of the partial run, M 260..384 (one plan)."""
    rows = json.loads(PARTIAL.read_text())["rows"]
    return {r["M"]: (eval(r["plan"].split(" ", 1)[1], {"Sm90Config": Sm90Config}), r["N"], r["K"], r["ours_graph_us"])
            for r in rows if (r["model"], r["proj"]) == (model, proj) and r["M"] > 256}


def us(cfg, M, N, K) -> float:
    return gemm_cost.estimate(cfg, M, N, K, 2, H100).total * 1e6


def test_the_rows_past_m_of_the_token_box_and_the_trimmed_box():
    cfg = Sm90Config(128, 120, 6, 2)
    assert [gemm_cost.zero_rows(cfg, M, 5120) for M in (260, 288, 320, 352, 384)] == [124, 96, 64, 32, 0]
    assert gemm_cost.zero_rows(cfg, 384, 5000) == 0  # the weights' rows past N are not weighed
    swapped = Sm90Config(128, 128, 4, 2, swap_ab=True)  # the kernel's roles: C^T, the tokens in B's box
    assert gemm_cost.zero_rows(swapped, 3584, 100) == 28 and gemm_cost.zero_rows(swapped, 3500, 128) == 0
    trimmed = attrs.evolve(cfg, trim_loads=True)  # the least of trim_boxes holding the rows that exist
    assert trim_boxes(128) == (8, 16, 32, 64)
    assert [gemm_cost.zero_rows(trimmed, M, 5120) for M in (260, 300, 320, 352)] == [4, 20, 0, 32]
    assert loaded_box(44, 128, True) == 64 and loaded_box(44, 128, False) == 128 and loaded_box(100, 128, True) == 128


def test_off_by_default_and_the_estimate_unchanged():
    assert gemm_cost.WEIGH_ZERO_FILL is False
    cfg, N, K, _ = partial("phi-3-medium", "o")[260]
    est = gemm_cost.estimate(cfg, 260, N, K, 2, H100)
    assert est.zero_fill == 0.0 and "zero_fill_us" not in est.to_json()
    assert est.total == pytest.approx(gemm_cost.overlap(est.compute, est.memory) + est.fill + est.epilogue)
    assert us(cfg, 260, N, K) == pytest.approx(34.89, abs=0.01)  # the measured 51.8 us: 0.67x


def rms(rows) -> float:
    logs = [math.log(t / us(cfg, M, N, K)) for M, (cfg, N, K, t) in rows.items()]
    return math.sqrt(sum(x * x for x in logs) / len(logs))


def test_the_term_follows_the_partial_rows(monkeypatch):
    for model, proj in (("phi-3-medium", "o"), ("qwen2.5-7b", "qkv"), ("qwen2.5-7b", "o")):
        rows = partial(model, proj)
        off = rms(rows)
        monkeypatch.setattr(gemm_cost, "WEIGH_ZERO_FILL", True)
        est = {M: us(cfg, M, N, K) for M, (cfg, N, K, _) in rows.items()}
        # slower the fewer rows exist, to the whole tile row's estimate where the fill hides under the k-tile
        assert est[260] > est[288] > est[384] and est[352] == pytest.approx(est[384], rel=0.01)
        assert rms(rows) < 0.13 and rms(rows) < 0.6 * off  # 12.5 / 9.4 / 7.7 % (off 23.4 / 20.6 / 23.4 %)
        monkeypatch.setattr(gemm_cost, "WEIGH_ZERO_FILL", False)
    monkeypatch.setattr(gemm_cost, "WEIGH_ZERO_FILL", True)
    cfg, N, K, measured = partial("phi-3-medium", "o")[260]
    est = gemm_cost.estimate(cfg, 260, N, K, 2, H100)
    assert est.to_json()["zero_fill_us"] == pytest.approx(11.1, abs=0.1) and measured == pytest.approx(51.8, abs=0.1)
    assert est.total * 1e6 == pytest.approx(46.0, abs=0.1)  # 34.9 off


def test_the_fill_at_fill_bytes_per_clk_in_the_producer_time(weigh):
    cfg = Sm90Config(128, 120, 6, 2)  # Phi-3-medium o at M = 260: one tile a CTA, 80 k-tiles of 128-byte rows
    est = gemm_cost.estimate(cfg, 260, 5120, 5120, 2, H100)
    fill = 124 * 5120 * 2 / (gemm_cost.FILL_BYTES_PER_CLK * H100.clock_hz)
    assert est.zero_fill == pytest.approx(gemm_cost.overlap(est.compute, max(est.memory, fill))
                                          - gemm_cost.overlap(est.compute, est.memory))
    assert gemm_cost.estimate(cfg, 384, 5120, 5120, 2, H100).zero_fill == 0.0  # a bucket top: whole tiles


def test_the_bucket_plans_it_changes(weigh):
    from tvm_cdna4.kernels.sm90.gemm_dynamic import dynamic_buckets

    # Qwen2.5-7B QKV: 257..384 in one 128x112 plan (33.6 us measured at 260, 21.7 at 384) is cut at 320
    buckets = [(b.lo, b.hi) for b in dynamic_buckets(4608, 3584, "bf16", "bf16", devices.DEVICES["H100"])]
    assert (257, 320) in buckets and (321, 384) in buckets



def test_a_swapped_estimate_weighs_the_token_box_in_the_b_role(weigh):
    # estimate takes the problem's (M, N) and swaps them to the kernel's roles before zero_fill: the tokens (M) fill
    # the B box of block_n rows; the weights' rows past a block_m tile are not weighed
    swapped = Sm90Config(128, 128, 4, 2, swap_ab=True)
    assert gemm_cost.estimate(swapped, 8, 3584, 3584, 2, H100).zero_fill > 0  # 120 token rows of 128 zero-filled
    assert gemm_cost.estimate(swapped, 128, 3500, 3584, 2, H100).zero_fill == 0.0  # 3500 % 128: the weights' rows
    unswapped = attrs.evolve(swapped, swap_ab=False)  # the tokens in the A box, the weights in B's
    assert gemm_cost.estimate(unswapped, 3500, 8, 3584, 2, H100).zero_fill > 0
    assert gemm_cost.estimate(unswapped, 3584, 8, 3584, 2, H100).zero_fill == 0.0


def test_loaded_box_is_the_rows_the_trimmed_load_arms():
    # the cost model's loaded_box (Python ints) and the emitter's loaded_rows (the expression "full" is armed with) are
    # one rule written twice: they agree on every count of existing rows of the tiles' heights
    from tvm_tirx.sym import Analyzer

    from tvm_cdna4.kernels.sm90.gemm_emit import loaded_rows

    simplify = Analyzer().simplify
    for block in (104, 128):
        for exist in range(1, block + 1):
            assert int(simplify(loaded_rows(0, exist, block))) == loaded_box(exist, block, True), (block, exist)


def test_with_trimmed_loads_the_candidates_are_the_trimmed_configs_and_weigh_their_own_fill(weigh, monkeypatch):
    # TRIM_LOADS on: the configs the model compares are the ones the kernel runs (planned_loads), so a partial tile
    # row is charged the trimmed box's few rows, not the whole tile's (stop 52; before, plan_bucket trimmed only the
    # choice, made among untrimmed configs)
    from tvm_cdna4.kernels.sm90 import gemm_plan

    untrimmed = gemm_cost.ranked(260, 5120, 5120, 2, H100)
    monkeypatch.setattr(gemm_plan, "TRIM_LOADS", True)
    trimmed = gemm_cost.ranked(260, 5120, 5120, 2, H100)
    assert all(c.trim_loads == (c.cluster_m == 1) for _, c in trimmed)
    assert any(c.trim_loads for _, c in trimmed)
    fill = {attrs.evolve(c, trim_loads=False): gemm_cost.estimate(c, 260, 5120, 5120, 2, H100).zero_fill
            for _, c in trimmed}
    before = {c: gemm_cost.estimate(c, 260, 5120, 5120, 2, H100).zero_fill for _, c in untrimmed}
    assert all(fill[c] <= before[c] for c in before) and any(fill[c] < before[c] for c in before)
    _, _, configs = gemm_cost.range_candidates(257, 320, 4608, 3584, 2, H100)
    assert all(c.trim_loads for c in configs if c.cluster_m == 1)

