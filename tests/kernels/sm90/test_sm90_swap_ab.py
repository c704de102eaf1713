"""The sm90 GEMM's swapped plan (``Sm90Config.swap_ab``: C^T = B A^T, the small M as wgmma's N): off by default
and never the cost model's choice, planned over C^T, validated in the CUDA emulator at odd small M with and
without the fused epilogue, refused where it does not run, and on the CLI as ``--swap-ab``."""

from __future__ import annotations

import json

import pytest

from tvm_cdna4.cli import main
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_emit, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan as make_plan

H200 = devices.DEVICES["H200"]
EMULATOR = "the CUDA emulator (no GPU runner)"
ALL = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)


def test_off_by_default_and_weighed_by_the_cost_model_up_to_one_wgmma_n_of_m():
    assert Sm90Config().swap_ab is False
    for M in (17, 32, 96, 200, 768):
        assert not any(cfg.swap_ab for _, cfg in gemm_cost.ranked(M, 37888, 3584, 2, H200, swap=False))
        assert any(cfg.swap_ab for _, cfg in gemm_cost.ranked(M, 37888, 3584, 2, H200)) == (M <= 256)
    assert not gemm.plan(GemmProblem(768, 4096, 4096, "bf16", "nt", "bf16"), "sm90").config.swap_ab


def test_the_plan_tiles_c_transposed_with_m_as_wgmma_n():
    # M = 200 (issue 36's shape): the weights' 37888 rows in 128-row tiles, M whole as wgmma's N = 200
    p = gemm.plan(GemmProblem(200, 37888, 3584, "bf16", "nt", "bf16"), "sm90", Sm90Config(128, 200, 5, 2, swap_ab=True))
    assert p.config.swap_ab and (p.tiles_m, p.tiles_n, p.ctas) == (296, 1, H200.units)
    assert [(q.name, q.shape) for q in p.params] == [("A", (200, 3584)), ("B", (37888, 3584)), ("C", (200, 37888))]
    assert gemm_emit.wgmma_instr(p) == "wgmma.mma_async.sync.aligned.m64n200k16.f32.bf16.bf16"
    source = gemm_emit.signature_source(p)
    # the kernel's A role is B (boxes of 128 rows), its B role A (boxes of 200 rows); C through no tensor map
    assert source.index("mapB = ") < source.index("mapA = ") and "(mapB, mapA,)" in source
    assert "3584, 37888, 7168, 64, 128, 1, 1" in source and "3584, 200, 7168, 64, 200, 1, 1" in source


def test_the_estimate_is_the_unswapped_estimate_of_c_transposed_at_the_swapped_tiles_efficiency():
    swapped, plain = Sm90Config(64, 200, 5, 1, swap_ab=True), Sm90Config(64, 200, 5, 1)
    ours, theirs = gemm_cost.estimate(swapped, 200, 37888, 3584, 2, H200), gemm_cost.estimate(plain, 37888, 200, 3584, 2, H200)
    assert gemm_cost.efficiency(swapped) == pytest.approx(gemm_cost.efficiency(plain) * gemm_cost.SWAPPED_EFFICIENCY)
    assert ours.compute == pytest.approx(theirs.compute / gemm_cost.SWAPPED_EFFICIENCY)
    assert (ours.memory, ours.fill, ours.epilogue) == (theirs.memory, theirs.fill, theirs.epilogue)
    assert gemm_cost.efficiency(Sm90Config(128, 200, 5, 2, swap_ab=True)) == 1.0  # at most the tensor rate


@pytest.mark.parametrize("M, block_n, tiles", [(5, 8, {(64, 1), (128, 1), (128, 2), (256, 2)}),
                                                (200, 200, {(64, 1), (128, 2)}), (300, 256, {(64, 1), (128, 2)})])
def test_the_swapped_configs_pad_m_to_8_and_keep_the_accumulators(M, block_n, tiles):
    ranked = gemm_cost.swap_ab_ranked(M, 4096, 4096, 2, H200)
    assert all(cfg.swap_ab and cfg.block_n == block_n for _, cfg in ranked)
    assert {(cfg.block_m, cfg.consumers) for _, cfg in ranked} == tiles  # 128 rows x 200: 200 accumulators, > 128
    assert [t for t, _ in ranked] == sorted(t for t, _ in ranked) and gemm_cost.swap_ab_config(
        M, 4096, 4096, 2, H200) == ranked[0][1]


@pytest.mark.parametrize("problem, config", [
    # M = 5: wgmma n8, one consumer, f32 C, N and K not multiples of 64
    (GemmProblem(5, 100, 136, "bf16", "nt", "f32"), Sm90Config(64, 8, 2, 1, swap_ab=True)),
    # M = 77 (n80), every fused step: row_scale per m (a column of C^T), col_scale and bias per n (a row), the
    # activation, the residual C[m, n]
    (GemmProblem(77, 100, 136, "bf16", "nt", "bf16", ALL), Sm90Config(64, 80, 2, 1, swap_ab=True)),
    # M = 200 whole as n200, two consumers of 64 rows of N each
    (GemmProblem(200, 72, 136, "bf16", "nt", "bf16"), Sm90Config(128, 200, 2, 2, swap_ab=True)),
    # ping-pong: one CTA, two tiles of N alternating between the consumers; odd N and M, f32 C
    (GemmProblem(37, 150, 128, "bf16", "nt", "f32"), Sm90Config(128, 40, 2, 2, ctas=1, schedule="pingpong",
                                                                 swap_ab=True)),
    # fp8 (e4m3, k32): the swap is the operands' roles only
    (GemmProblem(21, 70, 256, "fp8", "nt", "bf16", Fusion(bias=True, activation="gelu")),
     Sm90Config(64, 24, 2, 1, swap_ab=True)),
])
def test_the_emulator_validates_swapped_plans(problem, config):
    v = gemm.validate(problem, "sm90", config)
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


def test_the_swapped_c_is_the_unswapped_c_bit_for_bit():
    # the same products summed in the same k order: only the operands' roles and C's store differ
    problem = GemmProblem(13, 72, 136, "bf16", "nt", "f32", Fusion(bias=True, row_scale=True))
    data = random_inputs(problem, 3)
    ours, _ = gemm_target.execute(gemm.plan(problem, "sm90", Sm90Config(64, 16, 2, 1, swap_ab=True)), data)
    theirs, _ = gemm_target.execute(gemm.plan(problem, "sm90", Sm90Config(64, 72, 2, 1)), data)
    assert (ours == theirs).all() and data.ratio(ours) <= 1.0


@pytest.mark.parametrize("config", [Sm90Config(128, 64, 2, 2, epilogue="tma", swap_ab=True),
                                    Sm90Config(128, 64, 2, 2, epilogue="tma", residual_read="tma", swap_ab=True),
                                    Sm90Config(128, 64, 2, 2, split_k=2, decomposition="hybrid", swap_ab=True)])
def test_what_the_swapped_kernel_does_not_run_is_refused_naming_swap_ab(config):
    with pytest.raises(ContractError, match="config swap_ab:") as e:
        gemm.plan(GemmProblem(77, 256, 4096, "bf16", "nt", "bf16"), "sm90", config)
    assert e.value.operand == "swap_ab" and e.value.check == "parameters"


def test_the_grouped_kernel_refuses_swap_ab():
    from tvm_cdna4.kernels.sm90.grouped_plan import plan_grouped

    cfg = Sm90Config(128, 64, 2, 2, swap_ab=True)
    with pytest.raises(ContractError, match="grouped GEMM config swap_ab") as e:
        plan_grouped(MBucket(17, 64), 4, 256, 128, "bf16", "bf16", cfg, H200.units, H200.smem_per_unit)
    assert e.value.operand == "swap_ab"
    assert make_plan(MBucket(17, 64), 256, 128, "bf16", "nt", "bf16", cfg, H200.units, H200.smem_per_unit).config.swap_ab


def test_the_cli_plans_and_validates_with_swap_ab(capsys):
    flags = "--target sm90 --dtype bf16 --out-dtype bf16 -M 200 -N 37888 -K 3584 --swap-ab --emit config".split()
    assert main(["gemm", *flags]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert cfg["swap_ab"] is True and cfg["block_n"] == 200
    assert Sm90Config(**cfg) == gemm_cost.swap_ab_config(200, 37888, 3584, 2, devices.planned("sm80"))
    assert main(["gemm", "--target", "sm90", "-M", "200", "-N", "37888", "-K", "3584", "--swap-ab", "--block",
                 "64x200x64", "--warps", "1x1", "--emit", "config"]) == 0
    cfg = json.loads(capsys.readouterr().out)["config"]
    assert (cfg["block_m"], cfg["block_n"], cfg["consumers"], cfg["swap_ab"]) == (64, 200, 1, True)
    assert main(["gemm", "--target", "sm80", "-M", "77", "-N", "72", "-K", "128", "--swap-ab", "--emit", "config"]) == 2
    assert "--swap-ab is an sm90 option" in capsys.readouterr().err
    assert main(["gemm", "--target", "sm90", "--dynamic-m", "-M", "77", "-N", "72", "-K", "128", "--swap-ab",
                 "--emit", "config"]) == 2
    assert "--swap-ab cannot be given" in capsys.readouterr().err



def test_the_tile_options_without_swap_ab_tile_c_unswapped():
    # --block is M x N of C unless --swap-ab asks for the swapped kernel (whose block tiles C^T): the cost model's
    # first choice at M = 32 is swapped (and split) since it weighs swap AB, and the options must not inherit that
    problem = GemmProblem(32, 3584, 18944, "bf16", "nt", "bf16")
    assert gemm_cost.choose_config(32, 3584, 18944, 2, devices.planned("sm80")).swap_ab
    for options in (dict(block="128x128"), dict(stages=4), dict(group_m=4)):
        cfg = gemm.config_from_options(problem, "sm90", **options)
        assert not cfg.swap_ab, options
    cfg = gemm.config_from_options(problem, "sm90", block="128x128")
    assert (cfg.block_m, cfg.block_n) == (128, 128)
    assert gemm.config_from_options(problem, "sm90", swap_ab=True, stages=4).swap_ab

@pytest.mark.slow
def test_ptxas_assembles_the_swapped_m200_kernel_with_every_fused_step_without_spills(tmp_path):
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    p = gemm.plan(GemmProblem(200, 37888, 3584, "bf16", "nt", "bf16", ALL), "sm90", Sm90Config(128, 200, 5, 2, swap_ab=True))
    (tmp_path / "k.cu").write_text(gemm_target.build_plan(p, cache=False).source)
    done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", "k.cu", "-o", "k.o"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "C7508" not in done.stderr and "0 bytes spill stores" in done.stderr


def test_the_gemm_benchmark_s_tma_rows_plan_the_unswapped_choice():
    # benchmarks/sm90_gemm.py's "tma" jobs (the choice with TMA stores): at M <= 256 the model's first choice is
    # swapped, which stores from registers only, so the row would have been a ContractError in the GPU run's table
    from benchmark_modules import benchmark_module

    bench = benchmark_module("sm90_gemm")
    rows = [(bench._problem(*args), cfg) for _, args, cfg in bench.jobs(quick=False) if cfg == "tma"]
    assert any(problem.M <= 256 for problem, _ in rows)  # the check shape M = 77
    for problem, cfg in rows:
        p = gemm.plan(problem, "sm90", bench.job_config(problem, cfg))
        assert p.config.epilogue == "tma" and not p.config.swap_ab
    small = bench._problem(77, 200, 520, "bf16", "bf16")
    assert bench.job_config(small, "tile").swap_ab  # "tile": the model's choice as it is
