"""The sm90 grouped GEMM (``kernels.sm90.grouped_plan`` / ``grouped_emit``): in the CUDA emulator on small shapes
(empty groups, ragged rows, odd N, the fused per-group epilogue; bad offsets never write outside C), the plan
per bucket of rows per group (the decode buckets keep the sm80 grouped kernel), the refusals, the cost model's
choice, the CLI; on a Hopper GPU through ``tvm_cdna4.torch.grouped_gemm`` against a float64 reference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.gemm.grouped import offsets_of, reference
from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig
from tvm_cdna4.kernels.sm80.gemm_plan import GemmPlan
from tvm_cdna4.kernels.sm90 import gemm_cost
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config
from tvm_cdna4.kernels.sm90.grouped_plan import DECODE_ROWS, Sm90GroupedPlan

EMULATOR = "the CUDA emulator (no GPU runner)"


@pytest.mark.parametrize("problem, config, sizes", [
    # two consumer warpgroups, an empty group, a group across two row tiles, one of 5 rows; 3 k-tiles over 2 stages
    (GemmProblem(None, 40, 136, "bf16", "nt", "f32", groups=4), Sm90Config(128, 64, 2, 2, ctas=2), [9, 0, 130, 5]),
    # one persistent CTA walking every unit (the gap tiles skipped), odd N, f16 C, the fused per-group epilogue
    (GemmProblem(None, 41, 72, "f16", "nt", "f16", Fusion(bias=True, col_scale=True, row_scale=True,
                                                          activation="silu", residual=True), groups=3),
     Sm90Config(64, 64, 2, 1, ctas=1), [0, 50, 17]),
])
def test_the_emulator_validates_sm90_grouped_plans(problem, config, sizes):
    p = gemm.plan(problem, "sm90", config, m=sum(sizes))
    assert isinstance(p, Sm90GroupedPlan) and [q.name for q in p.params[:4]] == ["A", "B", "C", "offsets"]
    v = gemm.validate(problem, "sm90", config, group_rows=sizes)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.parametrize("config, sizes", [
    # TMA stores: group 1's first tile full (both warpgroups' rows by TMA), its second split inside the tile
    # (warpgroup 0's 64 rows by TMA, warpgroup 1's partial rows from registers), an empty group, group 2's one
    # tile full for warpgroup 0 only; the per-group bias through the TMA staging; 64-column chunks
    (Sm90Config(128, 128, 2, 2, epilogue="tma", epilogue_tile=64), [0, 200, 64]),
])
def test_the_emulator_validates_the_grouped_tma_epilogue(config, sizes):
    problem = GemmProblem(None, 128, 64, "bf16", "nt", "bf16", Fusion(bias=True), groups=len(sizes))
    p = gemm.plan(problem, "sm90", config, m=sum(sizes))
    assert p.smem_bytes == config.stages * config.stage_bytes() + config.staging_bytes()
    assert "address_of(mapC)" in gemm.emit(p).script()  # the TMA stores through C's tensor map
    v = gemm.validate(problem, "sm90", config, group_rows=sizes)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


@pytest.mark.parametrize("offsets, rows", [
    ([0, 64, 200, 70], {0: (0, 64), 1: (64, 80)}),  # group 0's tile by TMA; group 1 past T: from registers, to T
    ([0, 90, 100, 100], {0: (0, 80)}),               # group 0 past T: its first tile by TMA, its second clipped at T
    ([0, -70, 40, 80], {2: (40, 80)}),               # negative: group 1 skipped; group 2 partial tiles only
])
def test_bad_offsets_never_write_outside_c_with_tma_stores(offsets, rows):
    """The TMA stores take only a warpgroup's rows wholly inside its group and below T: bad offsets still keep
    every access inside A, B and C (the emulator's bounds check), the rows of groups with rows right."""
    c, want = _bad_offsets_run(offsets, rows, 64, 80, "bf16", Sm90Config(64, 64, 2, 1, epilogue="tma"), 4)
    assert np.array_equal(c, want, equal_nan=True)


def _bad_offsets_run(offsets, rows, N, T, out, config, seed):
    """Three groups (K = 64) of a ``T x N`` C (``out``: bf16 or f32, NaN before the run) in the emulator with
    ``offsets``: C as float32 and what it should hold, the rows ``rows[g] = (lo, hi)`` of A times group g's
    weights rounded to ``out``, NaN elsewhere."""
    import ml_dtypes

    from tvm_cdna4.emulator import emulate

    G, K = 3, 64
    dtype = ml_dtypes.bfloat16 if out == "bf16" else np.float32
    grp = gemm.build(GemmProblem(None, N, K, "bf16", "nt", out, groups=G), "sm90", config)
    rng = np.random.default_rng(seed)
    a = (rng.integers(-4, 5, (T, K)) / 8).astype(ml_dtypes.bfloat16)
    b = (rng.integers(-4, 5, (G, N, K)) / 8).astype(ml_dtypes.bfloat16)
    c = np.full((T, N), np.nan, dtype)
    emulate(grp.primfunc(T), a, b, c, np.asarray(offsets, np.int32), target="sm90")
    want = np.full((T, N), np.nan, np.float32)
    for g, (lo, hi) in rows.items():
        want[lo:hi] = a[lo:hi].astype(np.float64) @ b[g].astype(np.float64).T
    return c.astype(np.float32), want.astype(dtype).astype(np.float32)


@pytest.mark.parametrize("offsets, rows", [
    ([0, 50, 60, 70], {0: (0, 40)}),            # past T: group 0's rows end at T, groups 1 and 2 start past it
    ([0, -70, 40, 40], {}),                     # negative: group 1's first tile starts at row -6 and is skipped
    ([0, 7, 90, 40], {0: (0, 7), 1: (7, 40)}),  # decreasing: group 2 has no rows (90 .. 40)
])
def test_bad_offsets_never_write_outside_c(offsets, rows):
    """The emulator checks every global access against its array: a kernel given bad offsets stays inside
    A, B and C; the rows of the groups that still hold rows are right, every other row is left unwritten."""
    c, want = _bad_offsets_run(offsets, rows, 24, 40, "f32", Sm90Config(64, 64, 2, 1), 3)
    assert np.array_equal(c, want, equal_nan=True)


def test_the_decode_buckets_keep_the_sm80_grouped_kernel():
    problem = GemmProblem(None, 1536, 2048, "bf16", "nt", "bf16", groups=128)
    kinds = {T: type(gemm.plan(problem, "sm90", m=T)) for T in (1, 512, 128 * DECODE_ROWS, 128 * DECODE_ROWS + 1, 16384)}
    assert kinds == {1: GemmPlan, 512: GemmPlan, 2048: GemmPlan, 2049: Sm90GroupedPlan, 16384: Sm90GroupedPlan}
    p = gemm.plan(problem, "sm90", m=16384)  # 128 rows per group
    assert (p.grouping.count, p.grouping.block_m, p.grouping.rows.representative) == (128, p.config.block_m, 128)
    # a config plans every bucket with the sm90 kernel
    assert isinstance(gemm.plan(problem, "sm90", Sm90Config(64, 128, 4, 1), m=8), Sm90GroupedPlan)


def test_the_cost_model_reads_every_groups_weights():
    dev = devices.DEVICES["H100"]
    cfg = Sm90Config(64, 64, 4, 1, tile_walk="prefix")
    est = gemm_cost.grouped_estimate(cfg, 1, 256, 256, 4096, 2, dev)
    # 256 groups of one row: one 64-row tile each (expected_row_tiles, at least one; the prefix walk), A's padded rows, every
    # group's weights [256, 4096] and C read or written once: the memory term
    moved = (256 * 64 * 4096 + 256 * 256 * 4096) * 2 + 256 * 64 * 256 * 2
    assert est.memory == pytest.approx(moved / (dev.hbm_bytes_s * gemm_cost.HBM_EFFICIENCY), rel=1e-12)
    # the many-small-experts prefill (Qwen3-30B-A3B gate/up at 2048 tokens, top-8: 128 rows per group)
    # a 128x256 tile with TMA stores: a one-consumer 64x256 tile keeps GROUPED_ONE_CONSUMER of its compute rate (it
    # measured 409.6 us against 400.3 us on the H100, 2026-12-06, the prefix walk)
    choice = gemm_cost.choose_grouped(128, 128, 1536, 2048, 2, dev)
    assert (choice.block_m, choice.block_n, choice.consumers, choice.epilogue) == (128, 256, 2, "tma")
    assert choice.split_k == 1 and choice.schedule == "cooperative"


def test_the_grouped_estimate_stores_a_groups_last_tile_from_registers():
    dev = devices.DEVICES["H100"]
    reg = Sm90Config(128, 256, 4, 2)
    tma = Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64)
    # 512 rows per group: 4.5 row tiles a group on average (expected_row_tiles), the last from registers
    r = gemm_cost.grouped_estimate(reg, 512, 128, 1536, 2048, 2, dev)
    t = gemm_cost.grouped_estimate(tma, 512, 128, 1536, 2048, 2, dev)
    last = 1 / 4.5
    assert t.epilogue == pytest.approx(r.epilogue * (last + (1 - last) * gemm_cost.STAGED_EPILOGUE), rel=1e-12)
    assert (t.compute, t.memory) == (r.compute, r.memory)
    # TMA stores are weighed only where C allows them (16-bit, N % 8 == 0), staged whole or in 64 columns
    assert {(c.epilogue, c.epilogue_tile) for c in gemm_cost.grouped_configs(2048, 1536, 2, dev)} == {
        ("registers", 0), ("tma", 0), ("tma", 64)}
    assert {c.epilogue for c in gemm_cost.grouped_configs(2048, 1536, 4, dev)} == {"registers"}


def test_a_prefill_bucket_is_planned_over_its_range_of_rows():
    """Qwen3-30B-A3B gate/up at 8192 tokens (512 rows per group, the bucket 257..1024): the minimax-regret
    config over the bucket (gemm_dynamic.planned_range) with TMA stores and the sub-tiled staging's fourth
    stage; the choice at 1024 rows alone is another's when the range's small end loses by it."""
    dev = devices.DEVICES["H100"]
    problem = GemmProblem(None, 1536, 2048, "bf16", "nt", "bf16", groups=128)
    p = gemm.plan(problem, "sm90", m=65536)
    assert (p.grouping.rows.lo, p.grouping.rows.hi) == (257, 1024)
    assert p.config == gemm_cost.choose_grouped(257, 128, 1536, 2048, 2, dev, hi=1024)
    assert (p.config.block_m, p.config.block_n, p.config.stages, p.config.epilogue, p.config.epilogue_tile) == (
        128, 256, 4, "tma", 64)
    worst = max(gemm_cost.grouped_estimate(p.config, r, 128, 1536, 2048, 2, dev).total
                / gemm_cost.grouped_ranked(r, 128, 1536, 2048, 2, dev)[0][0] for r in gemm_cost.range_samples(257, 1024))
    assert 1.0 <= worst < 1.1
    # f32 C: registers only (no TMA stores of f32 in the grouped kernel)
    assert gemm.plan(GemmProblem(None, 1536, 2048, "bf16", "nt", "f32", groups=128), "sm90", m=65536).config.epilogue == "registers"


@pytest.mark.parametrize("problem, config, operand", [
    (GemmProblem(None, 64, 64, "bf16", "nn", "f32", groups=2), None, "layout"),
    (GemmProblem(None, 64, 60, "bf16", "nt", "f32", groups=2), None, "K"),
    (GemmProblem(None, 64, 64, "bf16", "nt", "f32", groups=2), Sm90Config(128, 64, 2, 2, epilogue="tma"), "epilogue"),
    (GemmProblem(None, 60, 64, "bf16", "nt", "bf16", groups=2), Sm90Config(128, 64, 2, 2, epilogue="tma"), "epilogue"),
    (GemmProblem(None, 64, 64, "bf16", "nt", "bf16", groups=2), Sm90Config(128, 64, 2, 2, split_k=2), "split_k"),
    (GemmProblem(None, 64, 64, "bf16", "nt", "bf16", groups=2), Sm90Config(128, 64, 2, 2, schedule="pingpong"),
     "schedule"),
    # another target's config: the shared check (kernels.common.check_config), not a TypeError of DecodeConfig.check
    (GemmProblem(None, 64, 64, "bf16", "nt", "bf16", groups=2), DecodeConfig(), "config"),
])
def test_refusals_name_the_operand(problem, config, operand):
    with pytest.raises(ContractError) as e:
        gemm.plan(problem, "sm90", config, m=100)
    assert e.value.operand == operand


def test_the_cli_plans_the_sm90_grouped_kernel(gemm_cli):
    run = gemm_cli("--target", "sm90", "--groups", "300,0,1,77", "-N", "4096", "-K", "4096", "--dtype", "bf16",
                   "--emit", "config")
    assert run.returncode == 0, run.stderr
    config = json.loads(run.stdout)
    assert (config["kernel"], config["groups"], config["rows_per_group"], config["T"]) == (
        "tma-wgmma-grouped", 4, [65, 128], 378)
    run = gemm_cli("--target", "sm90", "--groups", "3,4", "-N", "4096", "-K", "4096", "--dtype", "bf16",
                   "--emit", "config")
    assert run.returncode == 0, run.stderr
    config = json.loads(run.stdout)  # a decode bucket: the sm80 grouped kernel's plan
    assert "tma-wgmma" not in config.get("kernel", "") and config["rows_per_group"] == [1, 16], config


# ---------------------------------------------------------------------------------------- on a Hopper GPU

GPU_SIZES = (0, 1, 129, 7, 0, 300, 16, 33, 2000, 0)  # empty groups, one row, odd sizes, one large group


def _gpu_inputs(sizes, N, K, seed=0):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.empty((sum(sizes), K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    w = torch.empty((len(sizes), N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1, generator=gen)
    return x, w, torch.tensor(offsets_of(sizes), dtype=torch.int32, device="cuda")


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("N, K", [(200, 392), (1536, 2048)])
def test_torch_grouped_gemm_runs_the_sm90_kernel_exactly(N, K):
    """Prefill (T / G above DECODE_ROWS: the sm90 kernel) and decode (the sm80 grouped kernel) counts against the
    float64 reference, within bf16's rounding of C; the kernel cache names sm90."""
    import torch

    tt = pytest.importorskip("tvm_cdna4.torch")
    assert tt.cuda_target(torch.device("cuda"))[1] == "sm90"
    for sizes in (GPU_SIZES, (1, 0, 3, 2, 0, 1, 0, 4, 2, 1)):
        x, w, off = _gpu_inputs(sizes, N, K)
        y = tt.grouped_gemm(x, w, off)
        want = reference(x.float().cpu().numpy(), w.float().cpu().numpy(), off.cpu().numpy(), "nt")
        err = np.abs(y.float().cpu().numpy() - want).max() / max(1.0, np.abs(want).max())
        assert err < 2 ** -7, (sizes, err)
    assert any(k[-1] == "sm90" and k[0] == "grouped" for k in tt.kernel_cache())


@pytest.mark.cuda(arch="sm_90a")
def test_torch_grouped_gemm_sm90_per_group_epilogue_graph_and_compile():
    import torch

    tt = pytest.importorskip("tvm_cdna4.torch")
    x, w, off = _gpu_inputs(GPU_SIZES, 256, 512, seed=1)
    bias = torch.randn((w.shape[0], 256), device="cuda")
    y = tt.grouped_gemm(x, w, off, bias=bias, activation="silu", out_dtype=torch.float32)
    rows = torch.repeat_interleave(torch.arange(w.shape[0], device="cuda"), off.diff())
    acc = torch.from_numpy(reference(x.float().cpu().numpy(), w.float().cpu().numpy(), off.cpu().numpy(), "nt"))
    want = torch.nn.functional.silu(acc.cuda().float() + bias[rows])
    assert torch.allclose(y, want, rtol=1e-3, atol=1e-3)
    out = torch.empty_like(y)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        tt.grouped_gemm(x, w, off, bias=bias, activation="silu", out_dtype=torch.float32, out=out)
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, y)
    compiled = torch.compile(lambda a, b, o: tt.grouped_gemm(a, b, o), fullgraph=True)
    assert torch.equal(compiled(x, w, off), tt.grouped_gemm(x, w, off))


def test_the_sweep_times_the_models_first_configs_and_the_baselines():
    """benchmarks/grouped_sm90_sweep.py (torch_grouped_sm90.py --sweep): per prefill shape, the cost model's first
    three, the bucket's plan, the best register-store config and the first with group_m doubled, each once."""
    import sys

    from paths import TESTS

    sys.path.insert(0, str(TESTS))
    from benchmark_modules import benchmark_module

    sweep = benchmark_module("grouped_sm90_sweep")
    dev = devices.DEVICES["H100"]
    plans = sweep.configs(128, 1536, 2048, 65536, 3)  # Qwen3-30B-A3B gate/up at 8192 tokens: 512 rows per group
    ranked = [cfg for _, cfg in gemm_cost.grouped_ranked(512, 128, 1536, 2048, 2, dev)]
    assert [cfg for _, cfg in plans[:3]] == ranked[:3]
    assert len({cfg for _, cfg in plans}) == len(plans)
    why = dict((w, cfg) for w, cfg in plans)
    assert why["best registers"].epilogue == "registers" and why["best registers"] == next(
        c for c in ranked if c.epilogue == "registers")
    assert why["model #1 group_m x2"].group_m == 2 * ranked[0].group_m
    assert gemm.plan(GemmProblem(None, 1536, 2048, "bf16", "nt", "bf16", groups=128), "sm90", m=65536).config in (
        cfg for _, cfg in plans)


def test_the_benchmarks_write_their_results_through_one_helper(tmp_path, capsys):
    """torch_gemm.write_results: NAME.json (meta, rows) and NAME.md (the table, also printed), the one writer of
    the dense, fp8 and grouped benchmarks."""
    import sys

    from paths import TESTS

    sys.path.insert(0, str(TESTS))
    from benchmark_modules import benchmark_module

    write = benchmark_module("torch_gemm").write_results
    assert all(benchmark_module(name).write_results is write
               for name in ("torch_fp8_gemm", "grouped_sm90_sweep", "torch_grouped_sm90"))
    write(str(tmp_path), "bench", {"device": "H100"}, [{"M": 1, "ok": True}], ["| M |", "|---|", "| 1 |"])
    assert json.loads((tmp_path / "bench.json").read_text()) == {"meta": {"device": "H100"}, "rows": [{"M": 1, "ok": True}]}
    assert (tmp_path / "bench.md").read_text() == "| M |\n|---|\n| 1 |\n"
    assert capsys.readouterr().out == "| M |\n|---|\n| 1 |\n"


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("config", [Sm90Config(128, 256, 3, 2, epilogue="tma"),
                                    Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64),
                                    Sm90Config(128, 128, 4, 2, epilogue="tma", group_m=16),
                                    Sm90Config(128, 256, 4, 2, epilogue="tma", epilogue_tile=64, tile_walk="prefix"),
                                    Sm90Config(64, 256, 5, 1, tile_walk="prefix")])
def test_the_grouped_tma_epilogue_on_a_hopper_gpu(config):
    """TMA stores for the warpgroups inside a group, register stores for each group's last tile (ragged sizes,
    empty groups, a 2000-row group), bf16 C, against the float64 reference; on both walks (``tile_walk``)."""
    import torch

    from tvm_cdna4.runtime.cuda import DynamicKernel

    N, K = 512, 256
    x, w, off = _gpu_inputs(GPU_SIZES, N, K, seed=2)
    grp = gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16", groups=len(GPU_SIZES)), "sm90", config)
    y = torch.full((x.shape[0], N), float("nan"), dtype=torch.bfloat16, device="cuda")
    DynamicKernel(grp, device=x.device).launch(x, w, y, off)
    want = reference(x.float().cpu().numpy(), w.float().cpu().numpy(), off.cpu().numpy(), "nt")
    got = y.float().cpu().numpy()
    assert np.isfinite(got).all()
    assert np.abs(got - want).max() / max(1.0, np.abs(want).max()) < 2 ** -7


def test_decode_buckets_split_k_only_where_never_predicted_slower():
    """The decode bucket's plan (``choose_decode``, the expected active groups ``min(G, T)``): a K split replaces
    the unsplit plan only where the model predicts it no slower at every total T of the bucket. Mixtral's down
    projection (8 groups, K = 14336) would win 1.3-1.8x at T = 1 (one active group: 64 CTAs) but lose 3-10 % from
    T = 4 on: it stays unsplit; two groups of N = 2048, K = 8192 (at most 2 active groups at every T) split K;
    Qwen3's (128 groups, K = 768) does not. The split plan's workspace is sized for T <= 16 G."""
    from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
    from tvm_cdna4.kernels.sm80.gemm_cost import (active_groups, choose_config, choose_decode, decode_estimate,
                                                  decode_points, device_model)
    from tvm_cdna4.kernels.sm90.grouped_plan import plan_bucket

    h100 = devices.DEVICES["H100"]
    assert [active_groups(8, t) for t in (0, 2, 8, 128)] == [1, 2, 8, 8]
    assert decode_points(MBucket(1, 16), 8) == (1, 2, 4, 8, 16, 32, 64, 128)
    dev = device_model(h100)
    assert dev.sms == 132 and dev.hbm_bytes_s == pytest.approx(4.0e12 * 3.35 / 4.8)
    mixtral = plan_bucket(MBucket(1, 16), 8, 4096, 14336, "bf16", "bf16", h100)
    qwen = plan_bucket(MBucket(1, 16), 128, 2048, 768, "bf16", "bf16", h100)
    two = plan_bucket(MBucket(1, 16), 2, 2048, 8192, "bf16", "bf16", h100)
    assert mixtral.grid.k_splits == 1 and qwen.grid.k_splits == 1 and two.grid.k_splits > 1
    assert two.dynamic_m == MBucket(1, 32) and two.params[-2].shape[1:] == (32, 2048)
    first = choose_config(MBucket(1, 16).representative, 2048, 8192, "bf16", "nt", "bf16", dev.sms, 2)
    chosen = choose_decode(MBucket(1, 16), 2048, 8192, "bf16", "nt", "bf16", dev, 2)
    assert chosen == two.config and first.split_k == 1
    ratio = [decode_estimate(t, 2048, 8192, first, 2, dev, 2).time_s / decode_estimate(t, 2048, 8192, chosen, 2, dev, 2).time_s
             for t in decode_points(MBucket(1, 16), 2)]
    assert min(ratio) >= 1.0 and max(ratio) > 1.2