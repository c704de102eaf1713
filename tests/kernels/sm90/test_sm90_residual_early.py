"""The residual read in the mainloop (``Sm90Config.residual_read="early"``, ``gemm_residual.load_early``): ``global``'s
column-pair loads into registers, a batch after each of the mainloop's last k-tiles' wgmma issue; the schedule of the
batches, the plan's rules, the emitted order (the loads in the mainloop, none in the epilogue) and the kernel in the
CUDA emulator (which checks every access and compares C with the float64 reference)."""

from __future__ import annotations

import re

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.devices import DEVICES
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_residual as R
from tvm_cdna4.kernels.sm90.gemm_plan import RESIDUAL_CHOICE, RESIDUAL_READS, STAGED_RESIDUAL, Sm90Config

H100 = DEVICES["H100"]
ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)
EARLY = dict(residual_read="early")


def _plan(M, N, K, cfg, fusion=Fusion(residual=True), out="bf16"):
    return gemm.plan(GemmProblem(M, N, K, "bf16", "nt", out, fusion), "sm90", cfg, sms=132)


def _validate(problem, cfg, **kw):
    v = gemm.validate(problem, "sm90", cfg, **kw)
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0, v


@pytest.mark.slow  # residual_read="early" was timed and left opt-in (stop 52)
def test_two_consumers_registers_every_step_ragged_m_and_n():
    # two consumers, stores from registers, every fused step; M = 130: the second row tile two rows (the second
    # warpgroup's loads all clamped into C), N = 48 in 32-column tiles: the second half outside C; 10 k-tiles: one
    # word a batch, batches after k-tiles 1..8, none after the last
    problem = GemmProblem(130, 48, 640, "bf16", "nt", "bf16", ALL)
    cfg = Sm90Config(128, 32, 2, 2, ctas=1, activation_form="tanh", **EARLY)
    p = gemm.plan(problem, "sm90", cfg)
    assert (R.held_words(p), R.early_batch(p), R.early_batches(p), R.early_start(p)) == (8, 1, 8, 1)
    assert [R.early_tile(p, b) for b in range(8)] == list(range(1, 9))
    _validate(problem, cfg)


@pytest.mark.slow  # the early read is opt-in (stop 52): suite time
def test_one_consumer_tma_stores_f16_short_mainloop():
    # one consumer, the whole-tile TMA epilogue (an 80-column tile: a 16-column tail block), 5 k-tiles (the last
    # ragged): 20 words in 7 batches of 3, the batches past the mainloop's last k-tile loaded there
    problem = GemmProblem(70, 80, 264, "f16", "nt", "f16", Fusion(residual=True, bias=True))
    cfg = Sm90Config(64, 80, 2, 1, ctas=1, epilogue="tma", **EARLY)
    p = gemm.plan(problem, "sm90", cfg)
    assert (R.held_words(p), R.early_batch(p), R.early_batches(p), R.early_start(p)) == (20, 3, 7, 0)
    assert [R.early_tile(p, b) for b in range(7)] == [0, 1, 2, 3, 4, 4, 4]
    _validate(problem, cfg)


def test_odd_n_loads_each_element_and_stores_from_registers():
    # N = 81: a pair's 4 bytes unaligned, so two 2-byte loads a word, the last column's partner clamped (never stored)
    problem = GemmProblem(77, 81, 320, "bf16", "nt", "bf16", Fusion(residual=True, col_scale=True))
    _validate(problem, Sm90Config(64, 48, 2, 1, ctas=1, **EARLY))


@pytest.mark.slow  # the early read was timed and left opt-in (stop 52)
def test_a_dynamic_m_bucket_at_run_time_ms():
    # M a run-time value of the bucket 65..192 (two consumers, 48-column tiles): the loads' rows clamped at the
    # run-time M (77: the second warpgroup's rows 64.. of 128 partly past it; 130: the second row tile's two rows)
    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.kernels.gemm import random_inputs
    from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
    from tvm_cdna4.kernels.sm90.gemm_emit import emit
    from tvm_cdna4.kernels.sm90.gemm_plan import plan

    fusion = Fusion(residual=True, activation="silu", row_scale=True)
    p = plan(MBucket(65, 192), 48, 384, "bf16", "nt", "bf16", Sm90Config(128, 48, 2, 2, ctas=1, **EARLY), H100.units,
             H100.smem_per_unit, fusion)
    assert p.dynamic_m == MBucket(65, 192) and R.early_batches(p) == 6
    f = emit(p)
    for m in (77, 130):
        data = random_inputs(GemmProblem(m, 48, 384, "bf16", "nt", "bf16", fusion), seed=m)
        c = data.output()
        emulate(f, *data.arguments(p.params, c), target="sm90")
        assert data.ratio(c) <= 1.0, m


@pytest.mark.parametrize("M, N, K, cfg", [
    pytest.param(130, 64, 256, Sm90Config(128, 64, 2, 2, ctas=1, schedule="pingpong", epilogue="tma", **EARLY),
                 marks=pytest.mark.slow),  # opt-in: suite time
    pytest.param(70, 128, 448, Sm90Config(64, 128, 2, 1, ctas=1, epilogue="tma", epilogue_tile=64, **EARLY),
                 marks=pytest.mark.slow),  # the early read is opt-in (stop 52)
])
def test_ping_pong_and_chunked_tma_stores(M, N, K, cfg):
    # ping-pong: a consumer's 128 rows, 32 words, its loads in its own mainloop while the other stores; 64-column chunks
    # of the TMA epilogue: chunk q's words at held_index(mi, tile_j(q, j), h)
    _validate(GemmProblem(M, N, K, "bf16", "nt", "bf16", ALL), cfg)



@pytest.mark.parametrize("M, N, K, cfg, units, k_tiles", [
    # ping-pong, 9 tiles on one CTA: each consumer's held words reused tile after tile (tiles 0, 2, .. and 1, 3, ..)
    pytest.param(300, 96, 128, Sm90Config(128, 32, 2, 2, ctas=1, schedule="pingpong", **EARLY), 9, 2,
                 marks=pytest.mark.slow),
    # a one-k-tile mainloop (every batch after k-tile 0) on 2 persistent CTAs of 3 tiles each
    (190, 96, 40, Sm90Config(64, 32, 2, 1, ctas=2, **EARLY), 9, 1),
    # clusters of two tile rows over 3 of them: the fourth tile row lies wholly past M (its loads clamped into C)
    pytest.param(150, 64, 256, Sm90Config(64, 64, 2, 1, ctas=4, cluster_m=2, **EARLY), 4, 4, marks=pytest.mark.slow),
])
def test_persistent_tiles_one_k_tile_and_a_cluster_past_m(M, N, K, cfg, units, k_tiles):
    problem = GemmProblem(M, N, K, "bf16", "nt", "bf16", Fusion(residual=True, bias=True))
    p = gemm.plan(problem, "sm90", cfg)
    assert (p.units, p.slice_tiles, R.early_tile(p, R.early_batches(p) - 1)) == (units, k_tiles, k_tiles - 1)
    _validate(problem, cfg)

def test_the_loads_sit_in_the_mainloop_and_the_epilogue_reads_registers():
    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.kernels.sm90 import gemm_emit

    p = _plan(130, 80, 768, Sm90Config(128, 80, 2, 2, ctas=1, epilogue="tma", **EARLY))
    text = device_function(gemm_emit.emit(p), "sm90").script()
    retire = text.index('T.ptx.wgmma(T.int32(0), "wait_group", "sync", "aligned", "")')
    loads = [m.start() for m in re.finditer(r"T\.ptx\.ld\(held\[\d+\], T\.address_of\(residual\[", text)]
    assert len(loads) == R.held_words(p) == 20 and max(loads) < retire  # every word loaded before the retirement
    assert text.index('T.ptx.wgmma(T.int32(1), "wait_group", "sync", "aligned", "")') < min(loads)
    batches = re.findall(r"if kt_1 == (\d+):", text[:retire])
    assert batches == [str(R.early_tile(p, b)) for b in range(R.early_batches(p))] == [str(k) for k in range(4, 11)]
    epilogue = text[retire:]
    assert "residual[" not in epilogue and epilogue.count("word[1] = held[") == 20  # registers only
    # 12 k-tiles: batches after k-tiles 4..10, then EARLY_LEAD k-tiles without one
    assert R.early_start(p) + R.early_batches(p) + R.EARLY_LEAD == p.slice_tiles


def test_the_128x256_tile_spreads_64_words_over_eight_k_tiles():
    p = _plan(4096, 4096, 4096, Sm90Config(128, 256, 3, 2, epilogue="tma", **EARLY))
    assert (R.held_words(p), R.early_batch(p), R.early_batches(p)) == (64, 8, R.EARLY_TILES)
    assert R.early_tile(p, 0) == 64 - R.EARLY_LEAD - R.EARLY_TILES and R.early_tile(p, 7) == 62
    assert R.held_place(p, 63) == (0, 31, 1) and all(R.held_index(p, *R.held_place(p, k)) == k for k in range(64))
    assert p.smem_bytes == _plan(4096, 4096, 4096, Sm90Config(128, 256, 3, 2, epilogue="tma")).smem_bytes
    assert "early" in RESIDUAL_READS and "early" not in STAGED_RESIDUAL and RESIDUAL_CHOICE == "global"


def test_a_split_k_early_read_is_refused_naming_the_field():
    cfg = Sm90Config(128, 128, 4, 2, split_k=2, decomposition="split-k", **EARLY)
    with pytest.raises(ContractError, match="config residual_read: how a fused residual is read") as e:
        cfg.check(H100.smem_per_unit)
    assert e.value.operand == "residual_read" and e.value.check == "parameters"
    assert e.value.found == "residual_read='early', epilogue='registers', epilogue_tile=0, schedule='cooperative', split_k=2"


@pytest.mark.parametrize("problem, cfg, operand, match", [
    (GemmProblem(64, 64, 64, "bf16", "nt", "f32", Fusion(residual=True)), Sm90Config(64, 64, 2, 1, **EARLY),
     "residual_read", "'early' holds a 16-bit C's residual pairs"),
    (GemmProblem(64, 64, 64, "bf16", "nt", "bf16", Fusion(bias=True)), Sm90Config(64, 64, 2, 1, **EARLY),
     "residual_read", "'early' loads the fused residual"),
    (GemmProblem(64, 64, 64, "bf16", "nt", "bf16", Fusion(residual=True)), Sm90Config(64, 64, 2, 1, swap_ab=True, **EARLY),
     "swap_ab", "the swapped kernel stores C"),
])
def test_an_early_read_the_problem_does_not_allow_is_refused(problem, cfg, operand, match):
    with pytest.raises(ContractError, match=match) as e:
        gemm.plan(problem, "sm90", cfg)
    assert e.value.operand == operand


def test_the_epilogue_benchmark_times_the_early_read():
    # benchmarks/sm90_gemm.py --epilogue: the early read beside the others, with the whole-tile and the 64-column
    # staging, and in the ping-pong variant; its GPU validation set holds an early case
    import sys

    from paths import TESTS
    sys.path.insert(0, str(TESTS))
    from benchmark_modules import benchmark_module

    bench = benchmark_module("sm90_gemm")
    jobs = {job[0][1]: job for job in bench.epilogue_jobs()}
    assert {"residual (early)", "all five (early)", "residual (early, tma/64, s4)", "all five (early, tma/64, s4)",
            "all five (pp 128x128 s5, early)"} <= set(jobs)
    assert jobs["all five (early)"][2] == ("choice", {"residual_read": "early"})
    assert any(cfg is not None and cfg.residual_read == "early" for *_, cfg in bench.validate_cases())
