"""The sm90 GEMM's shifted last tile row (``Sm90Config.shift_last``, ``gemm_shift``): the tile row that runs past the
tokens loads its whole box at ``M - block`` (no zero fill), computes those rows and stores only its own. Emulator-exact
at M = 65..333 with 64- and 128-row tiles, one and two consumers, odd N and K, every fused step (the residual and the
scales read at the shifted rows), swapped (a K split's even origin), split-K ordered and atomic (the atomics fail
without the mask), ping-pong, hybrid, dynamic M; the fallback below one tile, the contract and the planners' flag."""

from __future__ import annotations

import attrs
import pytest
from sm90_checks import assert_ptxas_assembles_without_spills

from tvm_cdna4.emulator import emulate
from tvm_cdna4.emulator.errors import EmulationError
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_emit, gemm_plan, gemm_shift, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan
from tvm_cdna4.kernels.sm90.grouped_plan import check_grouped_config

ALL = Fusion(row_scale=True, col_scale=True, bias=True, activation="silu", residual=True)
EMULATOR = "the CUDA emulator (no GPU runner)"
ONE = Sm90Config(64, 48, 2, 1, shift_last=True)
TWO = Sm90Config(128, 48, 2, 2, shift_last=True)
SWAP_SPLIT = Sm90Config(64, 40, 2, 1, swap_ab=True, split_k=2, shift_last=True)


def exact(problem, config):
    v = gemm.validate(problem, "sm90", config)
    return v.ok and v.where == EMULATOR and v.ratio <= 1.0


def script(problem, config):
    return gemm_target.emit(gemm.plan(problem, "sm90", config)).script()


@pytest.mark.parametrize("m", [65, 200] + [pytest.param(m, marks=pytest.mark.slow) for m in (77, 96, 130, 260, 333)])
def test_the_shifted_64_row_tile_is_exact(m):
    # the last tile row 1, 13, 32, 2, 8, 4, 13 rows deep: its box at M - 64, every row of it inside A
    assert exact(GemmProblem(m, 72, 136, "bf16", "nt", "bf16"), ONE)


@pytest.mark.parametrize("m", [130, 260] + [pytest.param(m, marks=pytest.mark.slow) for m in (200, 333)])
def test_the_shifted_128_row_tile_of_two_consumers_is_exact(m):
    # each consumer's 64 rows from the origin: at M = 130 the second tile row's first consumer stores nothing
    assert exact(GemmProblem(m, 75, 136, "bf16", "nt", "f32"), TWO)


@pytest.mark.parametrize("problem, config", [
    # every fused step read at the origin's rows: row_scale and the residual by row, bias and col_scale by column
    (GemmProblem(200, 72, 136, "bf16", "nt", "bf16", ALL), ONE),
    (GemmProblem(130, 75, 136, "bf16", "nt", "bf16", ALL), ONE),  # odd N: element stores
    pytest.param(GemmProblem(260, 72, 136, "bf16", "nt", "bf16", ALL), TWO, marks=pytest.mark.slow),  # 2 consumers:
    pytest.param(GemmProblem(200, 72, 136, "bf16", "nt", "bf16", Fusion(residual=True)),  # the 128-row tile's tests
                 attrs.evolve(TWO, residual_read="early"), marks=pytest.mark.slow),  # opt-in reads: slow
    pytest.param(GemmProblem(200, 72, 136, "bf16", "nt", "bf16", Fusion(residual=True)),
                 attrs.evolve(ONE, residual_read="prefetch"), marks=pytest.mark.slow),
    (GemmProblem(130, 80, 208, "fp8", "nt", "bf16", Fusion(row_scale=True, col_scale=True)), Sm90Config(64, 40, 2, 1, shift_last=True)),
    pytest.param(GemmProblem(133, 75, 136, "bf16", "nt", "bf16", ALL), attrs.evolve(ONE, trim_loads=True),
                 marks=pytest.mark.slow),  # N's last tile trimmed (TRIM_LOADS off)
])
def test_the_fused_epilogue_reads_its_inputs_at_the_shifted_rows(problem, config):
    assert exact(problem, config)


@pytest.mark.parametrize("problem, config", [
    # swapped: the token tiles are the B role's 40 / 48 rows, C^T's columns; origin 37 and 152
    (GemmProblem(77, 150, 136, "bf16", "nt", "bf16", ALL), Sm90Config(64, 40, 2, 1, swap_ab=True, shift_last=True)),
    (GemmProblem(200, 75, 136, "bf16", "nt", "f32"), Sm90Config(64, 48, 2, 1, swap_ab=True, shift_last=True)),
    # a swapped K split: pairs of tokens in the workspace at an even M (origin 38), elements at an odd one (37)
    pytest.param(GemmProblem(78, 150, 256, "bf16", "nt", "f32"),
                 Sm90Config(64, 40, 2, 1, swap_ab=True, split_k=2, shift_last=True), marks=pytest.mark.slow),
    (GemmProblem(77, 150, 256, "bf16", "nt", "f32"), Sm90Config(64, 40, 2, 1, swap_ab=True, split_k=2, shift_last=True)),
])
def test_the_swapped_kernel_shifts_its_last_token_tile(problem, config):
    assert exact(problem, config)


@pytest.mark.parametrize("config", [
    pytest.param(Sm90Config(64, 48, 2, 1, split_k=2, shift_last=True), marks=pytest.mark.slow),
    pytest.param(Sm90Config(64, 48, 2, 1, split_k=2, reduction="atomic", shift_last=True), marks=pytest.mark.slow),
    pytest.param(Sm90Config(128, 48, 2, 2, split_k=2, shift_last=True), marks=pytest.mark.slow),
    pytest.param(Sm90Config(64, 48, 2, 1, split_k=2, decomposition="hybrid", ctas=4, shift_last=True),
                 marks=pytest.mark.slow),
    Sm90Config(64, 48, 2, 2, ctas=2, schedule="pingpong", shift_last=True),
])
def test_split_k_hybrid_and_pingpong_shift_exactly(config):
    assert exact(GemmProblem(200, 75, 256, "bf16", "nt", "f32"), config)


@pytest.mark.parametrize("config, where", [(ONE, "C"), pytest.param(attrs.evolve(ONE, split_k=2, decomposition="split-k",
                                                                         reduction="atomic"), "W", marks=pytest.mark.slow)])
def test_without_the_mask_two_tile_rows_write_the_same_rows(monkeypatch, config, where):
    # the mask keeps each row one tile row's: unmasked, the shifted tile stores the previous tile row's rows of C again
    # (the emulator's race check), and a K split's atomics add its partials of them onto the previous tile row's sums
    problem = GemmProblem(200, 72, 256, "bf16", "nt", "f32")
    assert exact(problem, config)
    monkeypatch.setattr(gemm_shift, "kept", lambda p, token, first, ok, and_: ok)
    with pytest.raises(EmulationError, match=f"race on global '{where}'"):
        gemm.validate(problem, "sm90", config)


@pytest.mark.parametrize("config", [pytest.param(attrs.evolve(ONE, stages=3), marks=pytest.mark.slow), TWO])
def test_a_dynamic_m_kernel_shifts_at_run_time(config):
    # the origin min(tile * block, max(M - block, 0)) and the mask at the run-time M: at 40 (below a 64- or 128-row
    # tile: the tile's own origin), 130, 200, 256 (a whole last tile)
    p = plan(MBucket(33, 256), 72, 136, "bf16", "nt", "bf16", config, 132, 232448)
    assert gemm_shift.shifts(p)
    for m in (40, 130, 200, 256):
        data = random_inputs(GemmProblem(m, 72, 136, "bf16", "nt", "bf16"), m)
        c = data.output()
        emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


@pytest.mark.slow  # 20 s in the emulator (three M through one swapped split kernel)
def test_a_dynamic_swapped_split_takes_an_even_origin_at_an_odd_m():
    # the workspace's token pairs at the bucket's even largest M: at M = 77 the origin 29 rounds up to 30 (8-byte
    # aligned pairs; one row past M); at 40 (one 40-row tile, exact) and 200 (origin 160)
    p = plan(MBucket(33, 200), 150, 256, "bf16", "nt", "f32", SWAP_SPLIT, 132, 232448)
    assert gemm_shift.shifts(p) and gemm_emit.shift_align(p) == 2
    for m in (40, 77, 200):
        data = random_inputs(GemmProblem(m, 150, 256, "bf16", "nt", "f32"), m)
        c = data.output()
        emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


def test_the_last_box_starts_at_m_minus_the_tile_and_every_box_lies_inside_a():
    p = gemm.plan(GemmProblem(200, 72, 136, "bf16", "nt", "bf16"), "sm90", ONE)
    assert "T.min(m0, 136)" in gemm_target.emit(p).script()  # the A load's row: 200 - 64
    for tile in range(p.tiles_m):
        first = gemm_shift.origin(p, tile * 64, max, min)
        assert 0 <= first and first + 64 <= 200 and first == min(tile * 64, 136)
    # a static swapped split's workspace is M wide: pairs only at an even M, whose origin M - block_n is even too
    assert gemm_shift.origin(gemm.plan(GemmProblem(78, 150, 256, "bf16", "nt", "f32"), "sm90", SWAP_SPLIT), 40, max, min,
                             2) == 38
    assert gemm_emit.shift_align(gemm.plan(GemmProblem(77, 150, 256, "bf16", "nt", "f32"), "sm90", SWAP_SPLIT)) == 1


@pytest.mark.parametrize("m, config", [(65, TWO), (77, TWO), (96, TWO), (128, ONE), (256, TWO), (40, ONE)])
def test_no_tile_past_the_tokens_or_fewer_tokens_than_a_tile_keep_today_s_kernel(m, config):
    # M below one tile (its box cannot lie inside A) or a multiple of the tile: the script byte-identical
    problem = GemmProblem(m, 72, 136, "bf16", "nt", "bf16")
    assert script(problem, config) == script(problem, attrs.evolve(config, shift_last=False))


def test_clusters_and_the_grouped_kernel_refuse_shift_last():
    # TMA stores take it (test_sm90_shift_tma.py): the shifted tile stores from registers
    attrs.evolve(TWO, epilogue="tma").check(232448)
    with pytest.raises(ContractError) as e:
        attrs.evolve(TWO, cluster_m=2).check(232448)
    assert e.value.operand == "shift_last" and "cluster_m=2" in str(e.value)
    with pytest.raises(ContractError) as e:
        check_grouped_config(attrs.evolve(TWO, shift_last=True))
    assert e.value.operand == "shift_last"


def test_the_flag_gives_the_register_epilogue_s_configs_shift_last_and_no_zero_fill(monkeypatch):
    H100 = devices.DEVICES["H100"]
    plain = Sm90Config(64, 112, 8, 1)
    assert gemm_cost.zero_rows(plain, 200, 3584) == 56
    assert gemm_cost.zero_rows(attrs.evolve(plain, shift_last=True), 200, 3584) == 0
    assert gemm_cost.zero_rows(attrs.evolve(plain, shift_last=True), 40, 3584) == 24  # below one tile: filled
    assert gemm_shift.SHIFT_LAST is True  # on since the shiftbox A/B (stop 53)
    monkeypatch.setattr(gemm_shift, "SHIFT_LAST", False)
    assert gemm_plan.planned_loads(plain) == plain
    monkeypatch.setattr(gemm_shift, "SHIFT_LAST", True)
    assert gemm_plan.planned_loads(plain).shift_last
    assert gemm_plan.planned_loads(attrs.evolve(plain, epilogue="tma")).shift_last  # SHIFT_TMA (HALF since stop 56)
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", False)
    assert not gemm_plan.planned_loads(attrs.evolve(plain, epilogue="tma")).shift_last
    ranked = gemm_cost.ranked(200, 3584, 18944, 2, H100)
    assert all(c.shift_last == (c.epilogue == "registers" and c.cluster_m == 1) for _, c in ranked)


@pytest.mark.slow
def test_nvcc_assembles_shifted_kernels_for_sm_90a_without_spills(tmp_path):
    # the issue-36 shape (Qwen2.5-7B down at M = 200, 64x112, eight stages) and a dynamic two-consumer kernel with
    # every fused step: the origin's min and the mask add no spill
    plans = [gemm.plan(GemmProblem(200, 3584, 18944, "bf16", "nt", "bf16"), "sm90", Sm90Config(64, 112, 8, 1, shift_last=True)),
             plan(MBucket(129, 384), 3584, 4096, "bf16", "nt", "bf16", Sm90Config(128, 224, 4, 2, shift_last=True), 132, 232448,
                  fusion=ALL)]
    assert_ptxas_assembles_without_spills(plans, tmp_path)


def test_options_that_name_tma_stores_or_a_cluster_drop_the_planned_shift(monkeypatch):
    monkeypatch.setattr(gemm_shift, "SHIFT_LAST", True)
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", False)  # TMA stores shift too where it is on (test_sm90_shift_tma.py)
    problem = GemmProblem(200, 3584, 3584, "bf16", "nt", "bf16")
    assert gemm.config_from_options(problem, "sm90", block="64x112", stages=8).shift_last
    assert not gemm.config_from_options(problem, "sm90", block="128x112", epilogue="tma").shift_last
    assert not gemm.config_from_options(problem, "sm90", block="128x112", cluster_m=2).shift_last
