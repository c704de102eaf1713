"""The shifted last tile row with TMA stores (``Sm90Config(shift_last=True, epilogue="tma")``, ``gemm_shift.SHIFT_TMA``):
the tile whose box starts below its own first row stores its own rows from registers (``gemm_epilogue.store_shifted``),
every other tile through the staging buffer and TMA. Emulator-exact at the shift tests' M with 64- and 128-row tiles
(a tail block, 64-column blocks), every fused step, the residual staged through TMA (``tma``, ``preread``, ``sliced``),
read early or from global memory, chunked stores (``epilogue_tile``), a K split, ping-pong, dynamic M; without the
register path the emulator's race check fails the kernel; the planners' switch and the options."""

from __future__ import annotations

import attrs
import pytest
from sm90_checks import assert_ptxas_assembles_without_spills

from tvm_cdna4.emulator import emulate
from tvm_cdna4.emulator.errors import EmulationError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem, random_inputs
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_plan, gemm_shift, gemm_target
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, plan

ALL = Fusion(row_scale=True, col_scale=True, bias=True, activation="silu", residual=True)
RES = Fusion(residual=True)
EMULATOR = "the CUDA emulator (no GPU runner)"
ONE = Sm90Config(64, 48, 2, 1, epilogue="tma", shift_last=True)
TWO = Sm90Config(128, 48, 2, 2, epilogue="tma", shift_last=True)
WIDE = Sm90Config(128, 112, 2, 2, epilogue="tma", shift_last=True)  # a 64-column block and a 48-column tail


def exact(problem, config):
    v = gemm.validate(problem, "sm90", config)
    return v.ok and v.where == EMULATOR and v.ratio <= 1.0


def script(problem, config):
    return gemm_target.emit(gemm.plan(problem, "sm90", config)).script()


@pytest.mark.parametrize("m", [77] + [pytest.param(m, marks=pytest.mark.slow) for m in (65, 130, 200, 260, 333)])
def test_the_shifted_64_row_tile_stores_its_rows_from_registers(m):
    assert exact(GemmProblem(m, 72, 136, "bf16", "nt", "bf16"), ONE)


@pytest.mark.parametrize("m, config", [(260, WIDE)] + [  # SHIFT_TMA is off: its other cases are slow
    pytest.param(m, c, marks=pytest.mark.slow) for m, c in ((130, TWO), (200, TWO), (333, WIDE))])
def test_the_shifted_128_row_tile_of_two_consumers_is_exact(m, config):
    # at M = 130 the second tile row's first consumer stores nothing, at 200 / 333 both store some rows
    assert exact(GemmProblem(m, 112, 104, "bf16", "nt", "bf16"), config)


@pytest.mark.parametrize("problem, config", [
    # the residual staged through TMA at the shifted origin, read into registers first (preread) or in slices
    (GemmProblem(200, 72, 136, "bf16", "nt", "bf16", ALL), ONE),
    pytest.param(GemmProblem(260, 112, 128, "bf16", "nt", "bf16", ALL), attrs.evolve(WIDE, residual_read="tma"),
                 marks=pytest.mark.slow),  # SHIFT_TMA off (suite time)
    pytest.param(GemmProblem(200, 72, 136, "bf16", "nt", "bf16", RES), attrs.evolve(TWO, residual_read="tma"),
                 marks=pytest.mark.slow),
    pytest.param(GemmProblem(200, 72, 136, "bf16", "nt", "bf16", RES), attrs.evolve(TWO, residual_read="preread"),
                 marks=pytest.mark.slow),
    pytest.param(GemmProblem(200, 72, 256, "bf16", "nt", "bf16", RES), attrs.evolve(TWO, residual_read="sliced"),
                 marks=pytest.mark.slow),
    pytest.param(GemmProblem(200, 72, 136, "bf16", "nt", "bf16", RES), attrs.evolve(TWO, residual_read="early"),
                 marks=pytest.mark.slow),
    pytest.param(GemmProblem(200, 72, 136, "bf16", "nt", "bf16", RES), attrs.evolve(ONE, residual_read="prefetch"),
                 marks=pytest.mark.slow),
    pytest.param(GemmProblem(133, 120, 136, "bf16", "nt", "bf16", ALL), attrs.evolve(WIDE, trim_loads=True),
                 marks=pytest.mark.slow),
])
def test_the_fused_epilogue_and_the_staged_residual_read_the_shifted_rows(problem, config):
    assert exact(problem, config)


@pytest.mark.slow
@pytest.mark.parametrize("config", [
    Sm90Config(128, 128, 2, 2, epilogue="tma", epilogue_tile=64, shift_last=True),  # two chunks, two buffers
    pytest.param(attrs.evolve(ONE, split_k=2, decomposition="split-k"), marks=pytest.mark.slow),
    pytest.param(attrs.evolve(TWO, split_k=2, decomposition="split-k", reduction="atomic"), marks=pytest.mark.slow),
    Sm90Config(64, 48, 2, 2, ctas=2, schedule="pingpong", epilogue="tma", shift_last=True),
])
def test_chunks_a_k_split_and_pingpong_shift_exactly(config):  # SHIFT_TMA is off: slow
    assert exact(GemmProblem(200, 136, 128, "bf16", "nt", "bf16", Fusion(bias=True)), config)


@pytest.mark.slow  # SHIFT_TMA is off (untimed)
def test_the_shifted_tile_s_tma_box_store_would_rewrite_the_previous_tile_row(monkeypatch):
    # storing every tile with TMA (its box at the shifted origin): the previous tile row's rows of C written twice
    problem = GemmProblem(200, 72, 136, "bf16", "nt", "bf16")
    assert exact(problem, TWO)
    monkeypatch.setattr(gemm_shift, "first_token", lambda p, m0, n0: None)  # store_tma's first: the TMA path
    with pytest.raises(EmulationError, match="race on global 'C'"):
        gemm.validate(problem, "sm90", TWO)


@pytest.mark.parametrize("config", [pytest.param(c, marks=pytest.mark.slow) for c in (TWO, attrs.evolve(TWO, residual_read="tma"))])
def test_a_dynamic_m_kernel_picks_the_store_at_run_time(config):
    fusion = RES if config.residual_read == "tma" else Fusion()
    p = plan(MBucket(33, 256), 72, 136, "bf16", "nt", "bf16", config, 132, 232448, fusion=fusion)
    assert gemm_shift.shifts(p)
    for m in (40, 130, 200, 256):
        data = random_inputs(GemmProblem(m, 72, 136, "bf16", "nt", "bf16", fusion), m)
        c = data.output()
        emulate(gemm_target.emit(p), *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


@pytest.mark.parametrize("m", [128, 256, 40])
def test_whole_tiles_or_fewer_tokens_than_a_tile_keep_the_tma_kernel(m):
    problem = GemmProblem(m, 72, 136, "bf16", "nt", "bf16")
    assert script(problem, TWO) == script(problem, attrs.evolve(TWO, shift_last=False))


def test_the_switch_gives_tma_configs_the_shift_and_the_options_keep_it(monkeypatch):
    tma = Sm90Config(128, 112, 4, 2, epilogue="tma")
    problem = GemmProblem(260, 4608, 3584, "bf16", "nt", "bf16")
    assert gemm_shift.SHIFT_TMA == gemm_shift.HALF  # the default since stop 56's shiftdepth run
    assert gemm_shift.allows(1, "tma") is True  # a bool, not the setting (a config field takes it: sm90_gemm.py)
    assert gemm_plan.planned_loads(tma).shift_last  # planned; shifted only where shallow (the HALF tests below)
    assert gemm.config_from_options(problem, "sm90", block="128x112", epilogue="tma").shift_last
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", False)
    assert not gemm_plan.planned_loads(tma).shift_last
    assert not gemm.config_from_options(problem, "sm90", block="128x112", epilogue="tma").shift_last
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", True)
    assert gemm_plan.planned_loads(tma).shift_last
    assert not gemm_plan.planned_loads(attrs.evolve(tma, cluster_m=2)).shift_last
    assert gemm.config_from_options(problem, "sm90", block="128x112", epilogue="tma").shift_last
    monkeypatch.setattr(gemm_shift, "SHIFT_LAST", False)
    assert not gemm_plan.planned_loads(tma).shift_last


@pytest.mark.parametrize("switch, flag, name, problem, config, label", [
    ("shift_last", "SHIFT_LAST", "shift", GemmProblem(200, 3584, 3584, "bf16", "nt", "bf16"),
     Sm90Config(64, 112, 8, 1, shift_last=True), "64x112 shift"),
    ("shift_tma", "SHIFT_TMA", "shifttma", GemmProblem(260, 4608, 3584, "bf16", "nt", "bf16"),
     attrs.evolve(WIDE, stages=4), "128x112 tma shift"),
])
def test_torch_gemm_s_shift_switches_set_their_flag_and_label_the_plan(monkeypatch, switch, flag, name, problem, config,
                                                                     label):
    from benchmark_modules import benchmark_module

    bench = benchmark_module("torch_gemm")
    assert bench.switch_module(switch) is gemm_shift and bench.SWITCHES[switch] == (flag, name)
    monkeypatch.setattr(gemm_shift, flag, False)
    bench.set_switches({switch: "on"})
    assert getattr(gemm_shift, flag) is True
    assert bench.plan_label(gemm.plan(problem, "sm90", config)) == label


@pytest.mark.slow
@pytest.mark.parametrize("setting", [True, gemm_shift.HALF])
def test_nvcc_assembles_shifted_tma_kernels_for_sm_90a_without_spills(tmp_path, monkeypatch, setting):
    # the bucket plans the switch shifts (Qwen2.5-7B QKV 128x112 at 257..384) and one with every fused step and the
    # residual staged through TMA: the register store of the shifted tile adds no spill (HALF: nor its run-time pick)
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", setting)
    plans = [plan(MBucket(257, 384), 4608, 3584, "bf16", "nt", "bf16", Sm90Config(128, 112, 4, 2, epilogue="tma", shift_last=True),
                  132, 232448),
             plan(MBucket(257, 384), 8192, 3584, "bf16", "nt", "bf16",
                  Sm90Config(128, 192, 3, 2, epilogue="tma", residual_read="tma", shift_last=True), 132, 232448, fusion=ALL)]
    assert_ptxas_assembles_without_spills(plans, tmp_path)


# gemm_shift.HALF (SHIFT_TMA "half"): a TMA-store plan shifts its last token tile only where it holds <= block // 2 rows


def test_half_shifts_a_static_tma_plan_only_where_its_last_tile_is_shallow(monkeypatch):
    deep, shallow = GemmProblem(200, 72, 136, "bf16", "nt", "bf16"), GemmProblem(170, 72, 136, "bf16", "nt", "bf16")
    reg = Sm90Config(128, 48, 2, 2, shift_last=True)
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", True)
    on = {m: script(m, TWO) for m in (deep, shallow)}
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", gemm_shift.HALF)
    assert not gemm_shift.shifts(gemm.plan(deep, "sm90", TWO))  # 72 rows of 128: the box stays at row 128, TMA stores
    assert script(deep, TWO) == script(deep, attrs.evolve(TWO, shift_last=False)) != on[deep]
    assert gemm_shift.shifts(gemm.plan(shallow, "sm90", TWO)) and script(shallow, TWO) == on[shallow]  # 42 rows
    assert gemm_shift.shifts(gemm.plan(deep, "sm90", reg))  # the register epilogue shifts at any depth
    assert script(deep, reg) != script(deep, attrs.evolve(reg, shift_last=False))
    assert exact(deep, TWO) and exact(shallow, TWO)


@pytest.mark.slow  # SHIFT_TMA off (suite time)
def test_half_picks_the_shift_of_a_dynamic_tma_plan_at_run_time(monkeypatch):
    # the residual staged through TMA read at the tile's origin: shifted (register store) at 170, not at 200 (TMA store)
    config = attrs.evolve(TWO, residual_read="tma")
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", True)
    on = gemm_target.emit(plan(MBucket(33, 256), 72, 136, "bf16", "nt", "bf16", config, 132, 232448, fusion=RES)).script()
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", gemm_shift.HALF)
    p = plan(MBucket(33, 256), 72, 136, "bf16", "nt", "bf16", config, 132, 232448, fusion=RES)
    kernel = gemm_target.emit(p)
    assert kernel.script() != on and "if_then_else" in kernel.script()
    for m in (170, 200):
        data = random_inputs(GemmProblem(m, 72, 136, "bf16", "nt", "bf16", RES), m)
        c = data.output()
        emulate(kernel, *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


def test_half_is_a_plan_field_so_the_build_cache_keys_it(monkeypatch):
    # the flag is read when planning, not when emitting: the on and half plans of one dynamic TMA config differ in
    # their record (common.cache_key), so neither build cache serves one's kernel for the other
    from tvm_cdna4.kernels.common import cache_key

    def planned(setting):
        monkeypatch.setattr(gemm_shift, "SHIFT_TMA", setting)
        return plan(MBucket(33, 256), 72, 136, "bf16", "nt", "bf16", TWO, 132, 232448)

    on, half = planned(True), planned(gemm_shift.HALF)
    assert (on.shallow_shift, half.shallow_shift) == (False, True)
    assert cache_key("sm90", on, "d") != cache_key("sm90", half, "d")
    assert "if_then_else" in gemm_target.emit(half).script()  # emitted under SHIFT_TMA = HALF still set
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", True)
    assert "if_then_else" in gemm_target.emit(half).script()  # and under another setting: the plan decides


def test_half_counts_the_deep_tma_tile_s_zero_fill_in_the_cost_model(monkeypatch):
    from tvm_cdna4.kernels.sm90.gemm_cost import zero_rows

    tma, reg = Sm90Config(128, 112, 4, 2, epilogue="tma", shift_last=True), Sm90Config(128, 112, 4, 2, shift_last=True)
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", True)
    assert zero_rows(tma, 333, 4608) == 0
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", gemm_shift.HALF)
    assert (zero_rows(tma, 333, 4608), zero_rows(tma, 300, 4608), zero_rows(reg, 333, 4608)) == (128 - 77, 0, 0)


def test_torch_gemm_s_half_setting_and_its_three_way_table(monkeypatch):
    from benchmark_modules import benchmark_module

    bench = benchmark_module("torch_gemm")
    monkeypatch.setattr(gemm_shift, "SHIFT_TMA", False)
    bench.set_switches({"shift_tma": "half"})
    assert gemm_shift.SHIFT_TMA == gemm_shift.HALF
    with pytest.raises(SystemExit, match="half"):
        bench.set_switches({"shift_last": "half"})
    settings = ["off", "on", "half"]
    row = dict(model="m", proj="qkv", M=333, N=1, K=1, cublas_us=10.0, ok=True, speed_on=1.25, on_over_off=0.5,
               **{f"plan_{s}": s for s in settings}, **{f"ours_{s}_us": 10.0 for s in settings},
               **{f"speedup_{s}": 1.0 for s in settings})
    lines = bench.ab_lines([row], settings)
    assert lines[0].count("|") == lines[1].count("|") == lines[2].count("|") == 19
    assert "| on/off speed | half/off speed |" in lines[0] and "| 1.25x | 0.50x |" in lines[2]
