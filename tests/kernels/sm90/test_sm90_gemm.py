"""The sm90 GEMM target (``tvm_cdna4.kernels.sm90``): the plan record, the cost model's choices, the
refusals, the emitted kernel (wgmma, TMA, mbarriers, setmaxnreg), the ``TARGETS`` row and the CLI.

Compile-only checks run everywhere (TIRx lowers for ``sm_90a`` without a GPU; ``ptxas`` assembles the
source where nvcc is present); tests marked ``cuda(arch="sm_90a")`` validate on a Hopper GPU."""

from __future__ import annotations

import json
import math
import paths
import shutil
import subprocess

import attrs
import pytest

from tvm_cdna4.cli import main
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, Sm90Plan

H200 = devices.DEVICES["H200"]


def bf16(M, N=4096, K=4096, out="bf16"):
    return GemmProblem(M, N, K, "bf16", "nt", out)


def test_the_row_and_its_aliases():
    row = gemm.TARGETS["sm90"]
    assert row.module == "tvm_cdna4.kernels.sm90.gemm_target" and row.aliases == ("sm_90", "sm_90a")
    assert gemm.code("sm90") == {"cuda": "source"}


@pytest.mark.parametrize("M, N, K, tile, epilogue, split", [
    (1, 4096, 4096, (64, 64, 1), "registers", 1),  # decode rows: the most CTAs streaming the weights
    (77, 4096, 14336, (64, 128, 1), "registers", 2),  # 32 tiles, a long K: two K slices of 112 k-tiles
    (200, 3584, 18944, (128, 224, 2), "registers", 4),  # Qwen2.5-7B's down: 16 x 2 tiles of 224 in 4 slices, 128 units
    # (a split's C leaves from registers: gemm_cost.WEIGH_SPLIT_EPILOGUE)
    (768, 14336, 4096, (128, 224, 2), "tma", 1),   # 384 tiles of 224 in 3 waves (of 256: 336, 2.55 waves), TMA stores
    (4096, 4096, 4096, (128, 256, 2), "tma", 1),   # large M: the tile shared memory keeps up with
    (8192, 4096, 14336, (128, 256, 2), "tma", 1),
    (8192, 4100, 4096, (256, 128, 2), "registers", 1),  # C rows not whole 16-byte chunks: no TMA stores
])
def test_the_cost_model_picks_the_tile_by_m(M, N, K, tile, epilogue, split):
    cfg = gemm_cost.ranked(M, N, K, 2, H200, swap=False)[0][1]  # the unswapped tile (swapped: test_sm90_swap_dynamic)
    assert (cfg.block_m, cfg.block_n, cfg.consumers, cfg.epilogue, cfg.split_k) == (*tile, epilogue, split)
    assert cfg.stages == gemm_cost.deepest(*tile, H200.smem_per_unit, -(-(-(-K // 64)) // split), epilogue)
    assert cfg.stages == (3 if epilogue == "tma" else 4) or tile != (128, 256, 2)
    ranked = gemm_cost.ranked(M, N, K, 2, H200)
    assert ranked[0][1] == cfg or (M <= 256 and ranked[0][1].swap_ab)
    assert all(a <= b for (a, _), (b, _) in zip(ranked, ranked[1:]))


def test_the_split_k_term_and_the_splits_weighed(monkeypatch):
    monkeypatch.setattr(gemm_cost, "WEIGH_SPLIT_EPILOGUE", False)  # every slice's epilogue (the flag's: test_sm90_split_epilogue)
    # M = 200, N = 3584, K = 18944 (296 k-tiles): 28 tiles of 128x256 fill 28 of the 132 SMs unsplit
    one, four = Sm90Config(128, 256, 3, 2, epilogue="tma"), Sm90Config(128, 256, 3, 2, epilogue="tma", split_k=4)
    a, b = (gemm_cost.estimate(c, 200, 3584, 18944, 2, H200) for c in (one, four))
    assert a.reduction == 0 and b.compute == pytest.approx(a.compute * 74 / 296)  # 112 units, 74 k-tiles each
    workspace = 2 * 4 * 200 * 3584 * 4 / (H200.hbm_bytes_s * gemm_cost.HBM_EFFICIENCY)
    gather = 4 * 128 * 256 * 4 / (gemm_cost.SM_BYTES_PER_CLK * H200.clock_hz)
    assert b.reduction == pytest.approx((workspace + gather) / gemm_cost.REDUCTION_EFFICIENCY) and b.total < a.total
    assert b.epilogue == pytest.approx(a.epilogue * 112 / 28)  # every CTA's epilogue time, 112 CTAs
    # slices of at least MIN_SLICE_TILES k-tiles, each with its own, the workspace within 32-bit offsets
    assert gemm_cost.splits(200, 3584, 18944) == (1, 2, 3, 4)  # 296 k-tiles: slices of 64 at least
    assert gemm_cost.splits(200, 3584, 8192) == (1, 2) and gemm_cost.splits(200, 3584, 4096) == (1,)
    assert gemm_cost.splits(2**20, 1024, 18944) == (1,)  # [2, M, N] past 32-bit offsets
    # a grid that fills the SMs is never split whole (measured slower, docs/sm90_gemm.md); only its last wave is
    # (hybrid, once weighed: gemm_cost.WEIGH_HYBRID), and only past a full wave with a partial last one
    monkeypatch.setattr(gemm_cost, "WEIGH_HYBRID", True)
    ranked = gemm_cost.ranked(1024, 5120, 17920, 2, H200)
    assert all(c.decomposition != "split-k" for _, c in ranked if c.block_n >= 128)
    assert {c.decomposition for _, c in ranked if (c.block_m, c.block_n) == (128, 128)} == {"data-parallel", "hybrid"}


def test_the_estimate_terms():
    cfg = Sm90Config(128, 256, 4, 2)
    est = gemm_cost.estimate(cfg, 4096, 4096, 4096, 2, H200)
    # 512 tiles over 132 SMs: 4 tiles on the busiest CTA; shared memory keeps up with 128x256 exactly
    assert gemm_cost.efficiency(cfg) == pytest.approx(gemm_cost.TENSOR_EFFICIENCY)
    tile = 128 * 256 * 4096 * 2 / (4096 * H200.clock_hz * gemm_cost.TENSOR_EFFICIENCY)
    assert est.compute == pytest.approx(4 * tile)
    # the busiest CTA streams its 4 tiles' A and B panels and writes their C from L2
    streamed = 4 * ((128 + 256) * 4096 * 2 + 128 * 256 * 2) / (gemm_cost.SM_BYTES_PER_CLK * H200.clock_hz)
    assert streamed > (2 * 4096 * 4096 * 2 + 4096 * 4096 * 2) / (H200.hbm_bytes_s * gemm_cost.HBM_EFFICIENCY)
    assert est.memory == pytest.approx(streamed) and est.memory < est.compute
    # every CTA stores its 4 tiles' C (bf16) at once, at the fitted share of the HBM bandwidth
    assert est.epilogue == pytest.approx(4 * 128 * 256 * 2 * H200.units / (H200.hbm_bytes_s * gemm_cost.STORE_EFFICIENCY))
    p = gemm_cost.OVERLAP  # compute and memory overlap partly: between their maximum and their sum
    body = (est.compute ** p + est.memory ** p) ** (1 / p)
    assert max(est.compute, est.memory) < body < est.compute + est.memory
    assert est.total == pytest.approx(body + est.fill + est.epilogue)
    # a narrower tile needs more shared-memory bandwidth per flop; an N = 64 wgmma runs at half the rate
    assert gemm_cost.efficiency(Sm90Config(128, 128, 4, 2)) < gemm_cost.efficiency(cfg)
    assert gemm_cost.efficiency(Sm90Config(128, 64, 4, 2)) <= gemm_cost.TENSOR_EFFICIENCY * 64 / gemm_cost.WGMMA_FULL_N


H100_TIMINGS = [  # benchmarks/sm90_gemm.py on an H100 SXM, 2026-12-06 (docs/sm90_gemm.md): M, N, K, tile, stages, us
    (4096, 4096, 4096, 128, 256, 4, 196.7), (4096, 4096, 4096, 128, 256, 3, 199.2),
    (4096, 4096, 4096, 128, 128, 6, 252.8), (4096, 4096, 4096, 128, 192, 5, 246.5),
    (768, 4096, 4096, 128, 192, 5, 41.7), (768, 14336, 4096, 128, 256, 4, 151.0), (768, 4096, 14336, 128, 192, 5, 119.5),
    (3000, 4096, 4096, 128, 256, 4, 151.7), (3000, 14336, 4096, 128, 256, 4, 554.0),
    (3000, 4096, 14336, 128, 256, 4, 473.8), (8192, 4096, 4096, 128, 256, 4, 415.3),
    (8192, 14336, 4096, 128, 256, 4, 1456.6), (8192, 4096, 14336, 128, 256, 4, 1308.5),
]


SWEEP = paths.RUNS / "sm90_sweep_h100_2026-12-06.json"


def h100_timings():
    """(config, M, N, K, us) of every H100 timing the model's rates were fitted to: the 13 and 10 timings above
    and the 144 of ``benchmarks/sm90_sweep.py`` (M = 96 / 200 / 768 / 3000 on twelve LLM projections, the top 3
    configs of the model then in force each)."""
    rows = json.loads(SWEEP.read_text())["rows"]
    out = [(Sm90Config(**r["config"]), r["M"], r["N"], r["K"], r["us"]) for r in rows if r.get("ok")]
    out += [(Sm90Config(bm, bn, stages, 2), M, N, K, us) for M, N, K, bm, bn, stages, us in H100_TIMINGS]
    return out + [(Sm90Config(128, 256, 3, 2, epilogue="tma"), M, N, K, us) for M, N, K, us in H100_TMA_TIMINGS]


def test_the_estimate_fits_the_h100_timings_and_ranks_what_was_measured():
    h100, data = devices.DEVICES["H100"], h100_timings()
    assert len(data) == 167
    logs = [math.log(us * 1e-6 / gemm_cost.estimate(cfg, M, N, K, 2, h100).total) for cfg, M, N, K, us in data]
    assert math.sqrt(sum(x * x for x in logs) / len(logs)) < 0.07 and max(map(abs, logs)) < 0.2
    # of each swept shape's three timed configs, the one the model ranks first is within 15% of the fastest
    shapes = {}
    for cfg, M, N, K, us in data[:144]:
        shapes.setdefault((M, N, K), []).append((gemm_cost.estimate(cfg, M, N, K, 2, h100).total, us))
    losses = [min(runs)[1] / min(us for _, us in runs) for runs in shapes.values()]
    assert len(losses) == 48 and max(losses) < 1.15 and math.exp(sum(map(math.log, losses)) / 48) < 1.015
    # and it ranks the 4096^3 tilings as measured: 128x256 first, by more than 15%
    square = {bn: us for M, N, K, bm, bn, stages, us in H100_TIMINGS[:4] if stages != 3}
    est = {bn: gemm_cost.estimate(Sm90Config(128, bn, 4, 2), 4096, 4096, 4096, 2, h100).total for bn in square}
    assert min(est, key=est.get) == min(square, key=square.get) == 256
    assert min(est[128], est[192]) > 1.15 * est[256]


H100_TMA_TIMINGS = [  # benchmarks/sm90_gemm.py --study on an H100 SXM, 2026-12-06: 128x256, 3 stages, epilogue="tma"
    (4096, 4096, 4096, 179.1), (768, 4096, 4096, 46.6), (768, 14336, 4096, 138.2), (768, 4096, 14336, 142.7),
    (3000, 4096, 4096, 135.5), (3000, 14336, 4096, 510.8), (3000, 4096, 14336, 499.1), (8192, 4096, 4096, 365.3),
    (8192, 14336, 4096, 1255.0), (8192, 4096, 14336, 1346.0),
]


def test_the_tma_epilogue_keeps_a_share_of_the_register_epilogue_s_stall():
    h100 = devices.DEVICES["H100"]
    tma, registers = Sm90Config(128, 256, 3, 2, epilogue="tma"), Sm90Config(128, 256, 3, 2)
    # the stall it keeps is STAGED_EPILOGUE of the stores from registers; the rest of the estimate is the same
    a, b = gemm_cost.estimate(tma, 4096, 4096, 4096, 2, h100), gemm_cost.estimate(registers, 4096, 4096, 4096, 2, h100)
    assert a.epilogue == pytest.approx(gemm_cost.STAGED_EPILOGUE * b.epilogue) and a.compute == b.compute
    assert gemm_cost.epilogues(4096, 2, 2) == ("registers", "tma")
    assert gemm_cost.epilogues(4096, 4, 2) == gemm_cost.epilogues(4100, 2, 2) == gemm_cost.epilogues(4096, 2, 1) == (
        "registers",)


def test_the_plan_is_a_frozen_record_whose_json_is_the_summary():
    p = gemm.plan(bf16(333, 200, 136), "sm90", Sm90Config(64, 64, 3, 1))
    assert isinstance(p, Sm90Plan) and gemm.target_of(p) == "sm90"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        p.M = 1
    s = json.loads(p.to_json())
    assert s["tiles"] == [6, 4] and s["grid"] == 24 and s["threads"] == 256 and s["k_tiles"] == 3
    assert s["smem_bytes"] == 3 * (64 + 64) * 64 * 2 and s["config"]["stages"] == 3
    assert [q.name for q in p.params] == ["A", "B", "C"] and p.params[1].shape == (200, 136)
    assert p.to_record()["config"] == attrs.asdict(p.config)
    # the persistent grid is capped by the tiles and by the SMs
    assert gemm.plan(bf16(4096), "sm90", Sm90Config(128, 256, 4, 2)).ctas == H200.units
    # the grouped tile order visits every tile once
    q = gemm.plan(bf16(1000, 1000, 64), "sm90", Sm90Config(128, 128, 2, 2, group_m=3))
    seen = [q.tile_of(t, lambda a, b: a // b, lambda a, b: a % b, min) for t in range(q.tiles)]
    assert sorted(seen) == [(m, n) for m in range(q.tiles_m) for n in range(q.tiles_n)]
    assert seen[:4] == [(0, 0), (1, 0), (2, 0), (0, 1)]


@pytest.mark.parametrize("problem, operand, check", [
    (bf16(8, 64, 4095), "K", "alignment"),                           # TMA's 16-byte global stride
    (GemmProblem(8, 64, 64, "bf16", "tn"), "layout", "layout"),
    (GemmProblem(8, 64, 64, "bf8", "nt"), "dtype", "dtype"),              # e5m2: not planned (fp8 is e4m3)
    (GemmProblem(8, 64, 64, "bf16", "nt", "i32"), "out_dtype", "dtype"),
    (GemmProblem(None, 64, 64, "bf16", "nn"), "layout", "layout"),  # dynamic M: the same refusals
    (GemmProblem(None, 64, 60, "bf16", "nt"), "K", "alignment"),
    (GemmProblem(None, 64, 64, "fp8", "nt", "bf16", groups=4), "dtype", "dtype"),  # grouped: f16 / bf16 only
    (GemmProblem(None, 64, 64, "bf16", "nn", groups=4), "layout", "layout"),
    (bf16(65536, 32768, 64), "C", "shape"),                           # 2^31 elements: int32 offsets
])
def test_a_problem_sm90_does_not_run_is_refused_naming_the_operand(problem, operand, check):
    with pytest.raises(ContractError) as e:
        gemm.plan(problem, "sm90")
    assert e.value.operand == operand and e.value.check == check


@pytest.mark.parametrize("cfg, field", [
    (Sm90Config(128, 256, 4, 3), "consumers"),
    (Sm90Config(96, 128, 4, 1), "block_m"),
    (Sm90Config(128, 260, 4, 2), "block_n"),
    (Sm90Config(128, 256, 4, 1), "block_m x block_n"),   # 256 f32 accumulators per thread
    (Sm90Config(128, 256, 5, 2), "stages"),              # 5 x 48 KiB > 227 KiB
])
def test_a_config_that_breaks_a_rule_is_refused_naming_the_field(cfg, field):
    with pytest.raises(ContractError, match=f"config {field}:") as e:
        gemm.plan(bf16(256), "sm90", cfg)
    assert e.value.operand == field


def test_the_fused_epilogues_inputs_follow_c_in_param_order():
    fusion = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)
    p = gemm.plan(GemmProblem(77, 200, 264, "bf16", "nt", "bf16", fusion), "sm90")
    assert [q.name for q in p.params] == ["A", "B", "C", "row_scale", "col_scale", "bias", "residual"]
    assert [q.shape for q in p.params[3:]] == [(77,), (200,), (200,), (77, 200)]
    assert p.params[-1].dtype == "bfloat16" and p.fusion == fusion
    assert json.loads(p.to_json())["fusion"]["steps"] == "acc * row_scale * col_scale + bias -> silu + residual"


def test_validate_without_a_gpu_runner_runs_the_cuda_emulator():
    v = gemm.validate(bf16(17, 64, 64), "sm90", Sm90Config(64, 64, 2, 1))
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)"


def test_the_decode_kernel_keeps_m_up_to_16():
    from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, DecodePlan

    assert gemm_target.DECODE_KEEPS
    small, large = bf16(16, 4096, 4096), bf16(17, 4096, 4096)
    assert isinstance(gemm.choose(small, "sm90"), DecodeConfig) and isinstance(gemm.choose(large, "sm90"), Sm90Config)
    p = gemm.plan(small, "sm90")
    assert isinstance(p, DecodePlan) and json.loads(p.to_json())["kind"] == "decode"
    # a Sm90Config plans the sm90 kernel at any M, and so do the tile options
    assert isinstance(gemm.plan(small, "sm90", Sm90Config(64, 64, 4, 1)), Sm90Plan)
    assert isinstance(gemm.config_from_options(small, "sm90", block="64x128x64"), Sm90Config)
    # the decode kernel's plan runs where sm80 runs it: without a GPU, in the CUDA emulator
    v = gemm.validate(GemmProblem(3, 40, 64, "bf16", "nt", "bf16"), "sm90")
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)"


def test_the_cli_prints_the_plan_and_reads_the_tile_options(capsys):
    flags = "--dtype bf16 --layout nt --out-dtype bf16 -M 768 -N 14336 -K 4096".split()
    assert main(["gemm", "--target", "sm90", *flags, "--emit", "config"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(gemm.plan(bf16(768, 14336, 4096), "sm90").to_json())
    assert main(["gemm", "--target", "sm_90a", *flags, "--block", "64x128x64", "--warps", "1x1", "--emit",
                 "config"]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert (cfg["block_m"], cfg["block_n"], cfg["consumers"]) == (64, 128, 1)
    assert cfg["stages"] == gemm_cost.deepest(64, 128, 1, devices.planned("sm80").smem_per_unit, 64)
    with pytest.raises(ValueError, match="the sm90 K tile of bf16 is 64"):
        gemm.config_from_options(bf16(768), "sm90", block="128x128x32")


@pytest.fixture(scope="module")
def small_plan():
    return gemm.plan(GemmProblem(33, 40, 72, "bf16", "nt", "f32"), "sm90", Sm90Config(64, 64, 2, 1))


@pytest.fixture(scope="module")
def tma_plan():
    return gemm.plan(GemmProblem(77, 200, 264, "bf16", "nt", "bf16", Fusion(bias=True, activation="silu")), "sm90",
                     Sm90Config(128, 64, 4, 2, epilogue="tma"))


def test_the_tma_epilogue_is_planned_for_16_bit_c_in_whole_chunks(tma_plan):
    assert tma_plan.smem_bytes == 4 * (128 + 64) * 64 * 2 + 128 * 64 * 2 and tma_plan.staging == 4 * 192 * 64
    with pytest.raises(ContractError, match="config epilogue: TMA stores of a 16-bit C") as e:
        gemm.plan(bf16(77, 200, 264, out="f32"), "sm90", Sm90Config(128, 64, 4, 2, epilogue="tma"))
    assert e.value.found == "f32 C, N = 200"
    with pytest.raises(ContractError, match="config epilogue"):
        gemm.plan(bf16(77, 204, 264), "sm90", Sm90Config(128, 64, 4, 2, epilogue="tma"))
    # the staging buffer takes a ring stage: 128x256 fits 3 stages beside it, not 4
    with pytest.raises(ContractError, match="config stages"):
        gemm.plan(bf16(4096), "sm90", Sm90Config(128, 256, 4, 2, epilogue="tma"))
    with pytest.raises(ContractError, match="config epilogue: how the consumers write C"):
        gemm.plan(bf16(4096), "sm90", Sm90Config(128, 256, 3, 2, epilogue="smem"))


def test_the_tma_epilogue_stages_a_tile_of_partial_64_column_blocks():
    # found by random configs on the sm90 fuzz draw's problems: block_n 8, 16 or 72 once staged each row in 128
    # bytes past the buffer (an out-of-bounds shared store in the emulator) and stored block_n // 64 blocks (none,
    # or not the last 8 columns); refused then, now staged with a tail block of block_n % 64 columns
    # (Sm90Config.tail_columns: 16 columns 32-byte swizzled, 8 unswizzled) and stored through C's tail map
    for block_n in (8, 16):  # no whole block: the tail alone (72, 104, 168: test_sm90_wave_widths.py)
        cfg = Sm90Config(64, block_n, 2, 1, epilogue="tma")
        assert cfg.tail_columns == block_n % 64 and cfg.tail_swizzle == (32 if block_n == 16 else 0)
        assert gemm.validate(GemmProblem(65, 32, 120, "f16", "nt", "bf16"), "sm90", cfg).ok
    for block_n in (8, 72):  # the stores from registers take any multiple of 8
        assert gemm.validate(GemmProblem(65, 32, 120, "f16", "nt", "bf16"), "sm90", Sm90Config(64, block_n, 2, 1)).ok


def test_the_tma_epilogue_stages_c_in_shared_memory_and_stores_it_with_tma(tma_plan):
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    source = build_plan(tma_plan, cache=False).source
    for word in ("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group", "cp.async.bulk.commit_group",
                 "cp.async.bulk.wait_group.read 0", "fence.proxy.async.shared::cta", "bar.sync",
                 "const __grid_constant__ CUtensorMap mapC"):
        assert word in source, word
    assert "st.global" not in source  # no store from registers: C goes through the staging buffer
    body = source[source.rindex("main_kernel("):]
    assert body.count("tile_bulk_group(") == 1  # one TMA store per 64-column block of the 64-column tile


@pytest.fixture(scope="module")
def pingpong_plan():
    return gemm.plan(GemmProblem(300, 200, 264, "bf16", "nt", "bf16", Fusion(bias=True)), "sm90",
                     Sm90Config(128, 64, 4, 2, ctas=5, schedule="pingpong", epilogue="tma"))  # 12 tiles on 5 CTAs


def test_the_pingpong_schedule_gives_each_consumer_whole_tiles(pingpong_plan):
    cfg = pingpong_plan.config
    assert cfg.rows == 128 and cfg.staging_bytes() == 2 * 128 * 64 * 2  # a staging buffer per consumer
    assert pingpong_plan.smem_bytes == 4 * (128 + 64) * 64 * 2 + 2 * 128 * 64 * 2
    assert Sm90Config(128, 128, 4, 2).rows == 64
    Sm90Config(64, 256, 4, 2, schedule="pingpong").check(232448)  # 64 rows: one wgmma per consumer and k16
    with pytest.raises(ContractError, match="config schedule") as e:
        Sm90Config(64, 64, 4, 1, schedule="pingpong").check(232448)
    assert e.value.operand == "schedule"
    with pytest.raises(ContractError, match="config block_m x block_n"):  # 128x256 per consumer: 256 accumulators
        Sm90Config(128, 256, 3, 2, schedule="pingpong").check(232448)


def test_the_pingpong_kernel_orders_the_mainloops_with_named_barriers(pingpong_plan):
    from tvm_cdna4.kernels.sm90.gemm_emit import ORDER_BARRIER
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    body = build_plan(pingpong_plan, cache=False).source
    body = body[body.rindex("main_kernel("):]
    # consumer wg waits on barrier ORDER_BARRIER + wg, the other arrives on it: 256 threads, both warpgroups
    assert body.count("bar_sync_count_sync(((uint)((((int)threadIdx.x) >> 7) + 2)), (uint)256)") == 1
    assert body.count("bar_arrive_arrive(((uint)(5 - (((int)threadIdx.x) >> 7))), (uint)256)") == 1
    assert ORDER_BARRIER == 3
    # each stage is released by one warpgroup; each wgmma covers 64 of the consumer's 128 rows
    assert "MB_ptr[4]))), (uint)1)" in body
    assert body.count("m64n64k16_f32_bf16_bf16_1_1_0_0(") == 8


@pytest.fixture(scope="module")
def fused_plan():
    return gemm.plan(GemmProblem(33, 40, 72, "bf16", "nt", "bf16", Fusion(bias=True, activation="gelu", residual=True)),
                     "sm90", Sm90Config(64, 64, 2, 1))


def test_the_emitted_kernel_is_warp_specialized_tma_and_wgmma(small_plan):
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    source = build_plan(small_plan, cache=False).source
    for word in ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                 "mbarrier.arrive.expect_tx.shared.b64", "mbarrier.try_wait.parity", "setmaxnreg.dec.sync.aligned.u32 40",
                 "setmaxnreg.inc.sync.aligned.u32 232", "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
                 "wgmma.commit_group", "wgmma.wait_group", "st.global.v2.f32", "__launch_bounds__(256, 1)",
                 "const __grid_constant__ CUtensorMap mapA, const __grid_constant__ CUtensorMap mapB"):
        assert word in source, word
    # one wgmma per k16 step of the 64-wide K tile; two TMA loads per stage
    body = source[source.index("main_kernel(float"):]
    assert body.count("m64n64k16_f32_bf16_bf16_1_1_0_0(") == 4 and body.count("complete_tx__bytes(") == 2
    # the host encodes both tensor maps: 128-byte swizzle, K innermost
    script = gemm.emit(small_plan).script()
    assert script.count("tensormap_encode_tiled") == 2 and "swizzle=3" in script.replace(" ", "")


def test_the_fused_epilogue_is_applied_before_the_store(fused_plan):
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    source = build_plan(fused_plan, cache=False).source
    assert "exp2f(" in source and "bias_ptr[" in source and "residual_ptr[" in source
    assert "nv_bfloat16* __restrict__ residual_ptr" in source and "cvt.rn.bf16x2.f32" in source


@pytest.mark.parametrize("which", [pytest.param("small_plan", marks=pytest.mark.slow),
                                   pytest.param("fused_plan", marks=pytest.mark.slow), "tma_plan",
                                   pytest.param("pingpong_plan", marks=pytest.mark.slow)])  # suite time: tma_plan's ptxas
def test_ptxas_assembles_the_kernel_with_setmaxnreg_in_effect(which, request, tmp_path):
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan

    plan = request.getfixturevalue(which)
    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    (tmp_path / "k.cu").write_text(build_plan(plan).source)
    done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", "k.cu", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "C7508" not in done.stderr  # setmaxnreg ignored: the kernel would have no register cap at entry
    assert "0 bytes spill stores" in done.stderr


@pytest.mark.cuda(arch="sm_90a")
@pytest.mark.parametrize("M, N, K, out, fusion", [
    (1, 256, 512, "bf16", Fusion()), (77, 200, 520, "f32", Fusion()), (333, 77, 64, "bf16", Fusion()),
    (512, 1024, 1024, "f16", Fusion()),
    (77, 200, 264, "bf16", Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)),
    (130, 77, 136, "f32", Fusion(bias=True, activation="silu")),
])
def test_validates_on_a_hopper_gpu(M, N, K, out, fusion):
    from tvm_cdna4.runtime.cuda import run_gemm

    dtype = "f16" if out == "f16" else "bf16"
    v = gemm.validate(GemmProblem(M, N, K, dtype, "nt", out, fusion), "sm90", run=run_gemm)
    assert v.ok and v.where == "the NVIDIA GPU"


@pytest.mark.parametrize("flags, words", [
    ("--tune", "--tune is an sm80 option (it times candidate tilings on an NVIDIA GPU); sm90 runs its planner's"),
    ("--reduction ordered --emit config", "--reduction ordered: the sm90 K split and its reduction are Sm90Config fields"),
    ("--report", "--report is the gfx950 static report; on sm90 use --bench on an NVIDIA GPU"),
    ("--emit asm", "--emit asm is for --target gfx950; sm90 emits cuda, tir or config"),
])
def test_the_cli_refuses_what_sm90_does_not_do(flags, words, capsys):
    assert main(["gemm", "--target", "sm_90", "--dtype", "bf16", "-M", "64", "-N", "64", "-K", "64",
                 *flags.split()]) == 2
    assert words in capsys.readouterr().err


def test_the_cli_builds_for_sm_90a_without_an_action(capsys):
    assert main(["gemm", "--target", "sm90", "--dtype", "bf16", "-M", "64", "-N", "64", "-K", "64", "--no-cache"]) == 0
    assert "built sm90 nt bf16->f32 64x64x64 for sm_90a" in capsys.readouterr().out


def test_the_gpu_runner_builds_each_cuda_targets_plan():
    from tvm_cdna4.kernels.sm80.gemm import build_plan as sm80_build
    from tvm_cdna4.kernels.sm90.gemm_target import build_plan as sm90_build
    from tvm_cdna4.runtime.cuda import plan_builder

    assert plan_builder(gemm.plan(bf16(64, 64, 64), "sm90")) is sm90_build
    assert plan_builder(gemm.plan(bf16(64, 64, 64), "sm80")) is sm80_build  # through kernels.gemm.TARGETS


def test_a_build_is_keyed_by_the_plan_and_built_for_sm_90a(monkeypatch, small_plan):
    from tvm_cdna4.kernels.sm90 import gemm_target

    keys = []
    monkeypatch.setattr(gemm_target, "cached_build", lambda kind, key, make, config, cache: keys.append((kind, key)))
    gemm_target.build_plan(small_plan, "sm_90")  # what runtime.cuda.device_arch reads off an H100
    gemm_target.build_plan(attrs.evolve(small_plan, config=attrs.evolve(small_plan.config, group_m=4)))
    (kind, first), (_, second) = keys
    assert kind == "cuda-gemm-sm90" and first["target"] == "sm90" and first["arch"] == "sm_90a"
    assert first["fields"]["config"]["group_m"] == 8 and second["fields"]["config"]["group_m"] == 4
    assert first["schedule"] == second["schedule"] == gemm_target.schedule_digest()


@pytest.mark.parametrize("target", ["gemm_target", "attention_target"])
def test_the_build_cache_digest_covers_every_sm90_module_the_kernel_is_emitted_from(target):
    # SOURCES keys the build cache: a module of kernels/sm90 that an emitting module imports (transitively) and SOURCES
    # leaves out would serve a stale kernel after an edit (gemm_store.py, the swapped C^T store moved out of
    # gemm_emit.py in stop 48, and gemm_residual.py were outside the GEMM's digest)
    import ast
    import importlib
    import pathlib

    module = importlib.import_module(f"tvm_cdna4.kernels.sm90.{target}")
    here = pathlib.Path(module.__file__).parent
    todo, seen = list(module.SOURCES), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((here / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:  # from .x import y; from . import x
                todo += [f"{node.module}.py"] if node.module else [f"{a.name}.py" for a in node.names]
    emitted = {n for n in seen if not n.endswith(("_cost.py", "_order.py", "_dynamic.py"))}
    assert emitted <= set(module.SOURCES), sorted(emitted - set(module.SOURCES))


@pytest.mark.parametrize("target", ["gemm_target", "attention_target"])
@pytest.mark.parametrize("edited", ["patterns/wgmma_shared.py", "probes_wgmma.py", "isa/hopper_layout.py",
                                    "kernels/sm90/gemm_store.py"])
def test_an_edit_outside_kernels_sm90_the_kernel_is_emitted_from_rebuilds(monkeypatch, target, edited):
    # the digest keyed only kernels/sm90's SOURCES: an edit to the wgmma patterns (wgmma_shared's hoist fix of stop
    # 48), the probes' layouts or the ISA tables served a kernel cached before it (gemm_target.SHARED_SOURCES)
    import importlib
    import pathlib

    import tvm_cdna4
    from tvm_cdna4 import cache

    module = importlib.import_module(f"tvm_cdna4.kernels.sm90.{target}")
    monkeypatch.setattr(cache, "_DIGESTS", {})
    before = module.schedule_digest()
    path, real = pathlib.Path(tvm_cdna4.__file__).parent / edited, pathlib.Path.read_bytes
    monkeypatch.setattr(pathlib.Path, "read_bytes", lambda self: real(self) + (b"# edited\n" if self == path else b""))
    monkeypatch.setattr(cache, "_DIGESTS", {})
    assert module.schedule_digest() != before


def test_a_split_in_one_wave_makes_no_more_units_than_sms(monkeypatch):
    # 56 tiles (Qwen2.5-7B down's 3584 rows in 64-row swapped tiles) on 132 SMs: splits of 2 (112 units) and, with the
    # switch off, 3 and 4 (168 / 224 units: a partial second wave); on, only those of one wave
    assert gemm_cost.SPLIT_IN_ONE_WAVE is True  # on since the A/B of 2026-12-07 (runs/torch_gemm_splitwave_h100_*)
    assert [s for s, _ in gemm_cost.decompositions(56, 132, (1, 2, 3, 4))] == [1, 2]
    assert [s for s, _ in gemm_cost.decompositions(44, 132, (1, 2, 3, 4))] == [1, 2, 3]
    h100 = devices.DEVICES["H100"]
    cfg = gemm_cost.choose_for_range(17, 32, 3584, 18944, 2, h100)
    assert cfg.swap_ab and cfg.split_k * -(-3584 // cfg.block_m) <= h100.units
    monkeypatch.setattr(gemm_cost, "SPLIT_IN_ONE_WAVE", False)
    assert [s for s, _ in gemm_cost.decompositions(56, 132, (1, 2, 3, 4))] == [1, 2, 3, 4]
