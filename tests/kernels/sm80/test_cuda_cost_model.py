"""The CUDA cost models against the H200 measurements they were fitted to (benchmarks/cost_model_fit.py
over benchmarks/runs/cuda_small_m_sweep_h200_2026-12-01.json: 400 tilings at M = 64 / 128 on the Llama-3
projections, each validated and timed on the GPU; the second run's reductions set and tuned
candidates; and the sweep of 2026-12-02, benchmarks/runs/llm_linear_flush_probe_h200_2026-12-02.json: the
decode kernel's configs and small tiles at M = 1 / 16, wider tiles and deeper pipelines at M = 64 /
128, which the tile model was refitted to and the decode model fitted to)."""

from __future__ import annotations

import paths
import os
import sys

ROOT = str(paths.ROOT)
sys.path.append(os.path.join(ROOT, "benchmarks"))  # after tests/: a benchmark script never shadows a test helper

import cost_model_fit as fit  # noqa: E402

SWEEP = str(paths.RUNS / "cuda_small_m_sweep_h200_2026-12-01.json")
REDUCTIONS = str(paths.RUNS / "cuda_small_m_reductions_h200_2026-12-01.json")
LLM = str(paths.RUNS / "llm_linear_m64_128_h200_2026-12-01.json")
PROBE = str(paths.RUNS / "llm_linear_flush_probe_h200_2026-12-02.json")


def test_the_model_ranks_the_measured_tilings_as_the_gpu_does():
    rows = fit.load_rows(SWEEP)
    assert len(rows) == 400 and {r["M"] for r in rows} == {64, 128}
    s = fit.summary(fit.evaluate(rows))
    assert s["shapes"] == 16
    # the model's pick measured within 5 % of the best tiling on (nearly) every shape (16 of 16 when it was
    # fitted to this sweep alone; 14 since the refit pooled with the 2026-12-02 sweep)
    assert s["within_5pct"] >= 14 and s["worst_ratio"] < 1.11 and s["mean_rho"] > 0.8


def test_the_model_ranks_every_measured_tiling_of_both_runs():
    # pooled: the sweep, the split-K reductions set and the tuned candidates of the llm_linear run
    # (the pair reduction's rate, pairs_s, fitted here): the pick within 5 % on 13 of 16 shapes
    rows = fit.load_rows(SWEEP, REDUCTIONS, LLM)
    assert len(rows) == 608
    s = fit.summary(fit.evaluate(rows))
    assert s["within_5pct"] >= 13 and s["mean_pick_ratio"] < 1.03 and s["worst_ratio"] < 1.2


def test_the_refitted_model_ranks_the_wider_tiles_and_deeper_pipelines():
    # the 2026-12-02 sweep at M = 64 / 128 (245 configs: 128x256 tiles split 2-6 ways, 4-stage 128-deep
    # k-tiles, the tuning's candidates), which the tile model was refitted to with the runs above
    rows = [r for r in fit.load_rows(PROBE) if r["M"] >= 64]
    assert len(rows) == 245
    s = fit.summary(fit.evaluate(rows))
    assert s["within_5pct"] >= 15 and s["mean_pick_ratio"] < 1.02 and s["worst_ratio"] < 1.1


def test_the_models_pick_the_kernel_at_decode_sizes():
    # M = 1 / 16: decode configs and small tiles measured side by side; the pick over both kinds (decode
    # model against tile model) within 5 % of the fastest on 15 of 16 shapes, and the decode model's
    # estimates within 6 % of the measurements on average (|log|)
    rows = [r for r in fit.load_rows(PROBE) if r["M"] <= 16]
    assert {r["config"].get("kind") for r in rows} == {"decode", None}
    s = fit.summary(fit.evaluate(rows))
    assert s["within_5pct"] >= 15 and s["mean_pick_ratio"] < 1.03 and s["worst_ratio"] < 1.08
    assert fit.decode_error(rows) < 0.06


def test_the_model_before_the_fit_ranked_them_worse():
    # the sweep recorded the old model's estimate of every tiling (est_us): its picks were far off
    rows = fit.load_rows(SWEEP)
    shapes = {}
    for r in rows:
        shapes.setdefault((r["name"], r["M"]), []).append(r)
    ratios = [min(rs, key=lambda r: r["est_us"])["us"] / min(r["us"] for r in rs) for rs in shapes.values()]
    assert sum(x <= 1.05 for x in ratios) <= 4 and max(ratios) > 1.5


def test_fit_helpers():
    assert abs(fit.spearman([1, 2, 3, 4], [10, 20, 30, 40]) - 1.0) < 1e-12
    assert abs(fit.spearman([1, 2, 3, 4], [4, 3, 2, 1]) + 1.0) < 1e-12
    assert fit._ranks([5.0, 1.0, 5.0]) == [1.5, 0.0, 1.5]
