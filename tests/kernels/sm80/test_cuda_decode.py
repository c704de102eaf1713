"""The decode GEMM (``cuda_decode_plan`` / ``cuda_decode_emit``, issue 24): its plan, its cost model and
its emulated results on odd shapes (M = 1, 5, 7, 9, 16; N and K not multiples of 8 or of the K span;
split and unsplit, both reductions), and on the GPU when one is present."""

from __future__ import annotations

import paths
import json
import os
import sys
from dataclasses import replace

import numpy as np
import pytest

ROOT = str(paths.ROOT)
sys.path.append(os.path.join(ROOT, "benchmarks"))  # after tests/: a benchmark script never shadows a test helper

import cuda_crosscheck as xc  # noqa: E402

from tvm_cdna4.emulator import emulate  # noqa: E402
from tvm_cdna4.runtime import cuda as runner  # noqa: E402
from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm  # noqa: E402
from tvm_cdna4.kernels.sm80.decode_plan import (  # noqa: E402
    DecodeConfig,
    DecodePlan,
    choose_kernel,
    config_from_dict,
    decode_candidates,
    decode_estimate,
    plan_decode,
)
from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig, GemmPlan  # noqa: E402


def _emulate(M, N, K, cfg, dt="bf16", ot="bf16", seed=0, data="ints"):
    """Emulate a decode plan with its workspace and tickets (zero before); C from NaN."""
    p = plan_decode(M, N, K, dt, "nt", ot, cfg)
    rng = np.random.default_rng(seed)
    if data == "ints":
        a, b = xc._ints(rng, (M, K), runner.np_dtype(dt)), xc._ints(rng, (N, K), runner.np_dtype(dt))
    else:
        a, b = runner.random_inputs(M, N, K, dt, "nt", rng)
    c = np.full((M, N), np.nan, runner.np_dtype(ot))
    extra = [np.zeros(q.shape, np.float32 if q.dtype == "float32" else np.uint32) for q in p.params[3:]]
    emulate(cuda_gemm.cuda_gemm(M, N, K, dt, "nt", ot, cfg), a, b, c, *extra, target="sm80")
    if p.k_splits > 1:
        assert not extra[1].any(), "every row block's ticket is reset by its last CTA"
        if cfg.reduction == "atomic":
            assert not extra[0].any(), "the atomic workspace is cleared by each row block's last CTA"
    return p, a, b, c


# (M, N, K, dtype, out dtype, config): the cp.async pipeline (K % 8 == 0) with a masked last
# iteration, rows past N, tokens past 8 and 16; element loads for K % 8 != 0; splits of both kinds
DECODE_CASES = [  # line_copy=False: each lane copies its own fragment chunks
    (1, 40, 256, "bf16", "bf16", DecodeConfig(warps=2, row_tiles=1, unroll=2, line_copy=False)),
    (5, 37, 200, "f16", "f32", DecodeConfig(warps=2, row_tiles=2, unroll=2, stages=3, line_copy=False)),
    (7, 70, 200, "bf16", "bf16", DecodeConfig(warps=4, row_tiles=1, unroll=1, split_k=3, line_copy=False)),
    (16, 40, 520, "bf16", "f16", DecodeConfig(warps=2, row_tiles=1, unroll=2, split_k=2, reduction="ordered",
                                              line_copy=False)),
    (16, 33, 101, "bf16", "bf16", DecodeConfig(warps=2, row_tiles=2, unroll=1)),
    (9, 17, 77, "f16", "f16", DecodeConfig(warps=2, row_tiles=1, unroll=1, split_k=2, reduction="ordered")),
    # line_copy (the default): whole-line copies into XOR-swizzled slots, __syncwarp around the reads;
    # unroll 4 (16 chunks a row) and a 6-stage pipeline, as the planner's candidates have them
    (5, 37, 200, "bf16", "f32", DecodeConfig(warps=2, row_tiles=2, unroll=2)),
    (16, 24, 520, "f16", "bf16", DecodeConfig(warps=2, row_tiles=2, unroll=1, split_k=2)),
    (5, 37, 600, "bf16", "bf16", DecodeConfig(warps=2, row_tiles=1, unroll=4, stages=6)),
]


@pytest.mark.parametrize("M,N,K,dt,ot,cfg", DECODE_CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in DECODE_CASES])
def test_decode_exact_on_small_integers(M, N, K, dt, ot, cfg):
    # small-integer data: every product and partial sum is exact, so the K permutation, the warps'
    # shared-memory sum and the split-K reduction must all give the numpy product bit for bit
    p, a, b, c = _emulate(M, N, K, cfg, dt, ot, seed=M + N + K)
    assert p.pipelined == (K % 8 == 0) and p.vector == (8 if K % 8 == 0 else 1)
    assert p.line_copy == (cfg.line_copy and K % 8 == 0)  # element loads (K % 8 != 0) have no stages to copy
    want = runner.reference(a, b, "nt").astype(runner.np_dtype(ot))
    assert xc.first_difference(c, want) is None, xc.first_difference(c, want)


def test_decode_random_data_within_reassociation_tolerance():
    # arbitrary data: warps and slices add f32 partials, a reassociation of the sum; bounded by
    # (K / 16 + warps + splits) * 2^-24 * sum |a b| per element, and the ordered split is deterministic
    M, N, K = 3, 24, 384
    cfg = DecodeConfig(warps=2, row_tiles=1, unroll=1, split_k=3, reduction="ordered")
    p, a, b, c = _emulate(M, N, K, cfg, "f16", "f32", seed=4, data="random")
    exact = runner.reference(a, b, "nt")
    bound = (K / 16 + 2 + 3) * 2.0**-24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T)
    assert (np.abs(c - exact) <= bound).all()
    np.testing.assert_array_equal(c, _emulate(M, N, K, cfg, "f16", "f32", seed=4, data="random")[3])


def test_plan_records_the_grid_and_loop():
    p = plan_decode(16, 1000, 4104, "bf16", "nt", "bf16", DecodeConfig(warps=8, row_tiles=2, unroll=2, split_k=4))
    assert p.token_tiles == 2 and p.config.block_rows == 32 and p.row_blocks == 32  # ceil(1000 / 32)
    assert p.loop.span == 64 and p.loop.iters == 65 and p.loop.full == 64  # 4104 = 64 x 64 + 8
    assert p.loop.slice_iters == 17 and p.k_splits == 4 and p.ctas == 128 and p.loop.per_warp == 3
    assert [q.name for q in p.params] == ["A", "B", "C", "W", "S"] and p.params[4].shape == (32,)
    assert p.smem_bytes == 8 * 3 * 32 * 16 * 2 * (2 * 2 + 2) and p.pipelined  # warps x stages x lanes x 16 B x chunks
    # slices that would be empty are dropped: 3 iterations cannot take 8 slices
    q = plan_decode(1, 64, 192, "bf16", "nt", "bf16", DecodeConfig(warps=1, unroll=2, split_k=8))
    assert q.loop.iters == 3 and q.k_splits == 3 and q.token_tiles == 1
    with pytest.raises(ValueError, match="M <= 32"):  # a ContractError (tests/kernels/sm80/test_cuda_decode32.py)
        plan_decode(33, 64, 64)
    with pytest.raises(ValueError, match="shared memory"):
        DecodeConfig(warps=16, row_tiles=4, unroll=8).check()


def test_planner_picks_the_decode_kernel_by_the_cost_model():
    # M <= 16 nt (decode_plan.DECODE_WEIGHED_M): the decode kernel where its estimate beats the tile GEMM's; never for
    # other layouts, M > 16 (WEIGH_WIDE_DECODE off) or when K is not 16-byte aligned and the element loads make it slow
    assert isinstance(choose_kernel(16, 4096, 14336, "bf16", "nt", "bf16"), DecodeConfig)
    assert isinstance(choose_kernel(1, 8192, 28672, "bf16", "nt", "bf16"), DecodeConfig)
    assert isinstance(choose_kernel(16, 4096, 4096, "bf16", "tn", "bf16"), GemmConfig)
    assert isinstance(choose_kernel(64, 4096, 4096, "bf16", "nt", "bf16"), GemmConfig)
    assert isinstance(choose_kernel(5, 1000, 4099, "bf16", "nt", "bf16"), GemmConfig)
    assert isinstance(cuda_gemm.plan(16, 4096, 14336, "bf16", "nt", "bf16"), DecodePlan)
    assert isinstance(cuda_gemm.plan(64, 4096, 4096, "bf16", "nt", "bf16"), GemmPlan)


def test_cost_model_follows_the_sm_count():
    # fewer SMs: fewer row blocks fill the GPU, so the chosen split shrinks (or stays), never grows
    M, N, K = 16, 4096, 14336
    splits = []
    for sms in (16, 132, 528):
        best = min(decode_candidates(M, N, K), key=lambda c: decode_estimate(M, N, K, c, 2, cuda_gemm.Device(sms=sms)).time_s)
        splits.append(best.split_k * 16 * best.row_tiles / (best.row_tiles * 16))
    assert splits[0] <= splits[1] <= splits[2]
    est = decode_estimate(M, N, K, DecodeConfig(), 2)
    assert est.ctas == 128 and est.waves == 1 and 0 < est.roofline_fraction <= 1


def test_emit_config_and_tuning_cache_round_trip():
    d = json.loads(cuda_gemm.config_json(16, 4096, 14336, "bf16", "nt", "bf16"))
    assert d["kind"] == "decode" and d["block_m"] % 16 == 0 and d["split_k"] >= 1 and d["launched_ctas"] > 0
    cfg = config_from_dict({k: d[k] for k in ("kind", "warps", "row_tiles", "unroll", "split_k", "reduction", "stages")})
    assert isinstance(cfg, DecodeConfig) and cfg.as_dict()["kind"] == "decode"
    tile = json.loads(cuda_gemm.config_json(64, 4096, 4096, "bf16", "nt", "bf16"))
    assert tile["kind"] == "tile" and config_from_dict(
        {k: tile[k] for k in GemmConfig().as_dict()}) == GemmConfig(**{k: tile[k] for k in GemmConfig().as_dict()})


def test_tune_times_decode_candidates_and_caches_the_winner(tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_CDNA4_CACHE_DIR", str(tmp_path))
    M, N, K = 16, 4096, 4096
    seen = []

    def timer(cfg):  # a fake GPU: the decode configs are "fast", the one with 4 warps fastest
        seen.append(cfg)
        return 1.0 if isinstance(cfg, GemmConfig) else (0.5 if cfg.warps == 4 else 0.7)

    best = cuda_gemm.tune_config(M, N, K, "bf16", "nt", "bf16", timer=timer, top=40)
    assert isinstance(best, DecodeConfig) and best.warps == 4 and any(isinstance(c, GemmConfig) for c in seen)
    assert cuda_gemm.tuned_config(M, N, K, "bf16", "nt", "bf16") == best


@pytest.mark.cuda
@pytest.mark.parametrize("M,N,K", [(1, 4096, 4096), (5, 1000, 4104), (16, 4095, 2056), (16, 4096, 14336)])
def test_gpu_decode_matches_numpy(M, N, K, rng, tmp_path):
    # the planner's decode config and the ordered reduction (the same bits every launch)
    cfg = choose_kernel(M, N, K, "bf16", "nt", "bf16")
    cfg = cfg if isinstance(cfg, DecodeConfig) else DecodeConfig(warps=4, split_k=2)
    a, b = runner.random_inputs(M, N, K, "bf16", "nt", rng)
    want = runner.reference(a, b, "nt")
    for c in (cfg, replace(cfg, split_k=max(2, cfg.split_k), reduction="ordered")):
        fn = runner.compile_and_load(M, N, K, "bf16", "nt", "bf16", c, workdir=str(tmp_path))
        outs = [runner.run_numpy(fn, a, b, M, N, "bf16") for _ in range(2)]
        err, ok = runner.check_output(outs[0], want, "bf16")
        assert ok, (c, err)
        if c.reduction == "ordered":
            np.testing.assert_array_equal(outs[0], outs[1])


def test_cli_emit_config_names_the_kernel_kind(capsys):
    # the planner's decode choice; a tile option (--block) asks for the tile GEMM; --stages reaches both
    from tvm_cdna4.cli import main

    from tvm_cdna4.kernels.sm80.gemm_plan import choose_config as choose_tile

    base = ["gemm", "--target", "sm80", "--dtype", "bf16", "--layout", "nt", "-M", "16", "-N", "4096", "-K", "14336",
            "--out-dtype", "bf16", "--emit", "config"]
    # --block replaces the tile planner's block shape and keeps its other fields (its pipeline depth)
    tile_stages = choose_tile(16, 4096, 14336, "bf16", "nt", "bf16").stages
    for extra, kind, stages in (([], "decode", 3), (["--block", "16x64x64"], "tile", tile_stages),
                                (["--stages", "4"], "decode", 4)):
        capsys.readouterr()
        assert main([*base, *extra]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["kind"] == kind and d["stages"] == stages and d["split_k"] >= 1 and "block_m" in d


@pytest.mark.parametrize("line_copy,unroll", [(False, 2), (True, 1), (True, 2), (True, 4)])
def test_stage_reads_and_line_copies_are_bank_conflict_free(line_copy, unroll):
    # every ld.shared.v4 of a stage (lane (g, t) reads its chunk of slot s, unroll u) and, with
    # line_copy, every cp.async store phase (lane l writes chunk l + 32 i) uses each bank once per phase
    from tvm_cdna4.emulator.banks import lanes_per_phase, phases_and_conflicts
    from tvm_cdna4.kernels.sm80.decode_emit import chunk_offset, line_offset

    p = plan_decode(16, 64, 1024, "bf16", "nt", "bf16", DecodeConfig(warps=2, row_tiles=2, unroll=unroll, line_copy=line_copy))
    cols = 4 * unroll  # chunks a row of a line-copy slot
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    phase = lane // lanes_per_phase(16)
    slots = 2 * p.config.row_tiles + p.token_tiles
    for stage in range(p.config.stages):
        for s in range(slots):
            for u in range(p.config.unroll):
                if line_copy:
                    reads = np.array([line_offset(p, stage, s, int(gi), int(ti) + 4 * u) for gi, ti in zip(g, t)])
                    c = lane + 32 * u
                    writes = np.array([line_offset(p, stage, s, int(ci) // cols, int(ci) % cols) for ci in c])
                    assert phases_and_conflicts(phase, 2 * writes, 16) == (4, 0)
                else:
                    reads = chunk_offset(p, stage, u, s) + 8 * lane
                assert phases_and_conflicts(phase, 2 * reads, 16) == (4, 0), (stage, s, u)
