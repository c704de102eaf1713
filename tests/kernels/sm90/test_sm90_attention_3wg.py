"""Three consumer warpgroups (``Sm90AttentionConfig.consumers=3``: 192 query rows, FA3's tile at D 64) in the sm90
attention forward: the CUDA emulator against the float64 reference within the documented bound (causal and not, GQA,
odd lengths, Sq != Skv, the LSE, persistent CTAs, ping-pong's round robin, the options), the register split, the
plan, the refusals (D 128, fp8, tiles past the registers), the cost model's switch and the CLI."""

import json

import pytest
from hopper_kernels import dropping

from tvm_cdna4.cli import main
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.isa.hopper_layout import SETMAXNREG
from tvm_cdna4.kernels.attention.problem import AttentionProblem
from tvm_cdna4.kernels.sm90 import attention_cost
from tvm_cdna4.kernels.sm90.attention_plan import (CONSUMERS, REGISTER_FILE, REGS, WIDE_HEAD_DIM,
                                                  Sm90AttentionConfig, plan_sm90_attention, registers)
from tvm_cdna4.kernels.sm90.gemm_plan import WARPGROUP, WGMMA_M
from sm90_attention_checks import check_emulated

C = Sm90AttentionConfig
CASES = {
    # 200 queries: two 192-row blocks (the second 8 rows), causal (the first block's 192 rows over two 128-key tiles,
    # both masked: the diagonal crosses them), GQA 2:1, the tail past Skv; the three warpgroups' turns in ping-pong
    "causal, GQA 2:1, 200 tokens, 128 keys, ping-pong": (AttentionProblem(1, 2, 1, 200, 200, 64, causal=True),
                                                         C(128, 2, True, True, True, consumers=3)),
    # one token on one persistent CTA walking 4 items: the ring and Q's barriers (3 arrivals) carried across items
    "one token, causal, GQA 2:1, persistent": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True),
                                                C(64, 2, persistent=True, ctas=1, consumers=3)),
    # Sq < Skv, not causal, plain schedule: rows 70 .. 191 of the block past Sq (TMA zero-fills Q, not stored)
    "70 queries over 130 keys, plain": (AttentionProblem(1, 1, 1, 70, 130, 64), C(64, 2, consumers=3)),
}
SLOW_CASES = {
    "odd lengths 130, causal, GQA 2:1, plain": (AttentionProblem(1, 2, 1, 130, 130, 64, causal=True),
                                                 C(64, 2, consumers=3)),
    # two query blocks (192, 138 rows); 64-key tiles: a block's diagonal crosses three tiles
    "causal, 330 tokens, 64-key tiles, 3 stages, ping-pong": (AttentionProblem(1, 1, 1, 330, 330, 64, causal=True),
                                                              C(64, 3, True, True, True, consumers=3)),
    "more queries than keys, causal, overlap": (AttentionProblem(1, 2, 1, 300, 130, 64, causal=True),
                                                C(128, 2, overlap=True, consumers=3)),
    "40 queries over 3000 keys, causal, ping-pong": (AttentionProblem(1, 1, 1, 40, 3000, 64, causal=True),
                                                     C(128, 3, True, True, True, consumers=3)),
    "f16, GQA 2:1, 250 queries over 120 keys, persistent, 2 CTAs over 4 items, ping-pong": (
        AttentionProblem(1, 2, 1, 250, 120, 64, dtype="f16"),
        C(128, 3, True, True, True, persistent=True, ctas=2, consumers=3)),
    "TMA epilogue, causal, GQA 2:1, 200 tokens (rows past Sq clipped), ping-pong": (
        AttentionProblem(1, 2, 1, 200, 200, 64, causal=True), C(128, 2, True, True, True, epilogue="tma", consumers=3)),
    "O's own buffer and split barriers, causal, 200 tokens, one CTA walking 2 items, ping-pong": (
        AttentionProblem(1, 1, 1, 200, 200, 64, causal=True),
        C(128, 2, True, True, True, persistent=True, ctas=1, split_kv_barrier=True, epilogue="tma_buffer",
          consumers=3)),
}




@pytest.mark.parametrize("name", CASES)
def test_three_consumers_emulated_within_the_bound(name):
    check_emulated(*CASES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_CASES)
def test_three_consumers_more_shapes_within_the_bound(name):
    check_emulated(*SLOW_CASES[name])


def test_the_register_split_fills_the_register_file_within_setmaxnreg():
    for consumers, (producer, consumer) in REGS.items():
        assert WARPGROUP * (producer + consumers * consumer) <= REGISTER_FILE
        assert all(r in SETMAXNREG for r in (producer, consumer))
    assert WARPGROUP * (REGS[3][0] + 3 * REGS[3][1]) == REGISTER_FILE  # FA3's 32 / 160


def test_the_plan_of_three_consumers():
    problem = AttentionProblem(2, 4, 2, 1000, 1000, 64, causal=True)
    p = attention.plan(problem, "sm90", C(128, 3, True, True, True, consumers=3))
    assert (p.consumers, p.block_q, p.threads, p.q_blocks, p.kv_tiles) == (3, 192, 512, 6, 8)
    assert (p.producer_regs, p.consumer_regs) == REGS[3] == (32, 160)
    # Q 192 x 64 and 3 stages of (K, V) 128 x 64, bf16
    assert p.smem_bytes == 2 * 64 * (192 + 3 * 2 * 128)
    two = attention.plan(problem, "sm90", C(128, 3, True, True, True))
    assert (two.consumers, two.block_q, two.threads, two.q_blocks) == (CONSUMERS, 128, 384, 8)
    assert (two.producer_regs, two.consumer_regs) == REGS[CONSUMERS]
    script = attention.emit(p).script()
    # setmaxnreg to the split, Q's box of 192 rows, 3 arrivals on each stage's (in a loop) and Q's "empty" barriers
    assert 'T.ptx.setmaxnreg(T.int32(32), "dec"' in script and 'T.ptx.setmaxnreg(T.int32(160), "inc"' in script
    assert "64, 1000, 8, 128, 128000, 64, 192, 1, 1, 1, 1" in script  # Q's map: boxes of 64 columns x 192 rows
    assert script.count('T.uint32(3), "init"') == 2 and script.count('T.uint32(2), "init"') == 0


def test_the_round_robin_turns_use_barriers_past_the_epilogues():
    """Ping-pong over three warpgroups: warpgroup ``wg`` waits on ``4 + wg`` (the TMA epilogue's named barriers are 1,
    2, 3), hands over to ``wg + 1`` (the last to 0), the last warpgroup's arrival lets warpgroup 0 start, and its own
    last turn hands over nothing (each barrier's arrivals match its waits)."""
    p = attention.plan(AttentionProblem(1, 1, 1, 150, 200, 64, causal=True), "sm90",
                       C(64, 2, True, True, True, consumers=3))
    bars = [line.strip() for line in attention.emit(p).script().splitlines() if "T.ptx.bar(" in line]
    assert bars[0] == 'T.ptx.bar(T.Cast("uint32", 4), T.uint32(256), "", "arrive", "")'
    assert bars[1] == 'T.ptx.bar(T.Cast("uint32", 4 + wg[0]), T.uint32(256), "", "sync", "")'
    assert ('T.ptx.bar(T.Cast("uint32", 4 + T.if_then_else(wg[0] == 2, 0, wg[0] + 1)), T.uint32(256), "", "arrive", '
            '"")') in bars
    assert bars[-1] == 'T.ptx.bar(T.Cast("uint32", 4 + wg[0] + 1), T.uint32(256), "", "arrive", "")'


def test_a_dropped_turn_is_a_deadlock_the_emulator_reports():
    from tvm_cdna4.emulator import EmulationError, emulate
    from tvm_cdna4.kernels.attention.problem import output_arrays, random_inputs

    problem = AttentionProblem(1, 1, 1, 150, 200, 64, causal=True)
    p = attention.plan(problem, "sm90", C(64, 2, True, True, True, consumers=3))
    arrays = {**random_inputs(problem, 0), **output_arrays(problem)}
    with pytest.raises(EmulationError, match="deadlock on barrier"):  # the last warpgroup's first arrival dropped
        emulate(dropping(attention.emit(p), "tirx.ptx.bar_arrive", 1), *(arrays[q.name] for q in p.params),
                target="sm90")


@pytest.mark.parametrize("problem, config, words", [
    (AttentionProblem(1, 1, 1, 128, 128, 128), C(64, 2, consumers=3), "head dim <= 64"),
    (AttentionProblem(1, 1, 1, 128, 128, 128, dtype="fp8"), C(128, 2, consumers=3), "fp8 runs D 128"),
    (AttentionProblem(1, 1, 1, 128, 128, 64), C(192, 2, consumers=3), "block_kv <= 128 with consumers=3"),
    (AttentionProblem(1, 1, 1, 128, 128, 64), C(64, 2, consumers=4), "consumer warpgroups"),
    (AttentionProblem(1, 1, 1, 128, 128, 64), C(64, 2, consumers=True), "expected an int, found True"),
])
def test_three_consumers_are_refused_where_they_do_not_fit(problem, config, words):
    with pytest.raises(ContractError, match=words) as err:
        plan_sm90_attention(problem, config)
    assert err.value.operand == "consumers"


def test_the_register_estimate_bounds_three_consumers_to_128_keys_at_d64():
    problem = AttentionProblem(1, 1, 1, 128, 128, WIDE_HEAD_DIM)
    assert registers(problem, C(128, consumers=3)) <= REGS[3][1] < registers(problem, C(144, consumers=3))


def test_the_cost_model_weighs_three_consumers_with_ping_pong_at_d64_only(monkeypatch):
    smem = 232448
    d64 = AttentionProblem(8, 16, 16, 2048, 2048, 64, causal=True)
    d128 = AttentionProblem(8, 16, 16, 2048, 2048, 128, causal=True)
    assert attention_cost.WEIGH_CONSUMERS
    three = [c for c in attention_cost.candidates(d64, smem) if c.consumers == 3]
    # the tiles their registers fit, the schedule they were timed with (attention_cost.CONSUMER_SCHEDULES)
    assert {c.block_kv for c in three} == {64, 128} and {(c.overlap, c.pingpong) for c in three} == {(True, True)}
    assert all(c.consumers == CONSUMERS for c in attention_cost.candidates(d128, smem))
    monkeypatch.setattr(attention_cost, "WEIGH_CONSUMERS", False)
    assert {c.consumers for c in attention_cost.candidates(d64, smem)} == {CONSUMERS}
    # the term: the same tile's clocks with three consumers, 1.5x the rows, the exposed softmax at its factor; their
    # ping-pong holds as many ring stages as two consumers' (PINGPONG_LAG, fitted: stop 49's prior had one more)
    two, wide = C(128, 3, True, True, True), C(128, 3, True, True, True, consumers=3)
    tensor_and_softmax = attention_cost.tile_clocks(d64, two) - attention_cost.TILE_CLOCKS
    assert attention_cost.tile_clocks(d64, wide) < 1.5 * tensor_and_softmax + attention_cost.TILE_CLOCKS
    assert attention_cost.ring_shortfall(wide) == attention_cost.ring_shortfall(two) == 1


H100_CHOICES = [
    # the H100's fastest timed config (runs/attention_sm90_3wg*_h100_2026-12-07b.json, each config's geometric mean
    # over the runs): three consumers, 128 keys, ping-pong, 3 stages, where the model's grid / persistent choice is
    # the fastest timed (two consumers' default of before: 6-18 % slower on these)
    (AttentionProblem(8, 32, 32, 2048, 2048, 64), True),
    (AttentionProblem(8, 32, 32, 2048, 2048, 64, causal=True), True),
    (AttentionProblem(8, 32, 8, 2048, 2048, 64, causal=True), True),
    (AttentionProblem(4, 32, 32, 4096, 4096, 64, causal=True), False),
    (AttentionProblem(1, 32, 8, 16384, 16384, 64, causal=True), False),
]


@pytest.mark.parametrize("problem, persistent", H100_CHOICES)
def test_the_cost_model_chooses_three_consumers_where_the_h100_timed_them_fastest(problem, persistent):
    from tvm_cdna4.kernels.devices import DEVICES

    h100 = DEVICES["H100"]
    chosen = attention_cost.choose(problem, h100.units, h100.smem_per_unit)
    assert chosen == C(128, 3, True, True, True, persistent=persistent, consumers=3)
    # D 128 (the same tokens, 16 heads): two consumers, the plan of before (the golden digests pin its code)
    d128 = AttentionProblem(problem.batch, 16, 16 * problem.kv_heads // 32, problem.seq_q, problem.seq_kv, 128,
                            causal=problem.causal)
    assert attention_cost.choose(d128, h100.units, h100.smem_per_unit).consumers == CONSUMERS


def test_the_consumer_terms_are_the_fit_of_the_h100_pairs():
    # benchmarks/attention_sm90_fit.py --consumers over fit.CONSUMER_RUNS: the 40 pairs of three consumers against two
    # at the same 128-key tile; the best (factor, lag) is attention_cost's and fits them better than stop 49's priors
    import os

    from benchmark_modules import benchmark_module

    fit = benchmark_module("attention_sm90_fit")
    runs = [os.path.join(os.path.dirname(fit.__file__), r) for r in fit.CONSUMER_RUNS]
    pairs = [pair for run in runs for pair in fit.consumer_pairs(fit.load([run]))]
    assert len(pairs) == 40 and {c.block_kv for _, c, *_ in pairs} == {128}
    rms_prior, fits = fit.fit_consumers(pairs)
    lag = min(fits, key=lambda k: fits[k][1])
    assert (fits[lag][0], lag) == (attention_cost.CONSUMER_EXPOSED[3], attention_cost.PINGPONG_LAG[3])
    assert fits[lag][1] < 0.055 < max(rms for _, rms in fits.values()) < 0.08 < rms_prior
    rows = fit.consumer_choices(fit.load(runs), True)
    assert len(rows) == 12 and all(chosen.consumers == 3 for _, chosen, *_ in rows)
    assert sum(loss <= fit.CONSUMER_TOLERANCE for *_, loss in rows) == 9 and max(loss for *_, loss in rows) < 1.05
    before = fit.consumer_choices(fit.load(runs), False)
    assert min(loss for *_, loss in before) > 1.05


@pytest.mark.slow  # the emulated cases cover the kernel (suite time)
def test_the_cli_runs_three_consumers(capsys):
    args = ["attention", "--target", "sm90", "--seq", "130", "--heads", "2", "--kv-heads", "1", "--head-dim", "64",
            "--causal", "--consumers", "3"]
    assert main([*args, "--emit", "config"]) == 0
    out = json.loads(capsys.readouterr().out)
    # the model's 192-key tile narrowed to what three consumers' registers fit
    assert (out["config"]["consumers"], out["block_q"], out["threads"], out["config"]["block_kv"]) == (3, 192, 512, 128)
    assert main([*args, "--validate"]) == 0
    assert "PASS" in capsys.readouterr().out
    assert main(["attention", "--target", "sm90", "--seq", "130", "--head-dim", "128", "--consumers", "3",
                 "--emit", "config"]) == 2
    assert capsys.readouterr().err.startswith("error: --consumers 3: ")


def test_three_consumer_rows_are_one_wgmma_m_each():
    assert C(consumers=3).block_q == 3 * WGMMA_M and C().block_q == CONSUMERS * WGMMA_M


def test_the_benchmark_times_two_consumers_beside_the_three_consumer_default():
    # benchmarks/attention_sm90.py --configs consumers with three consumers the default: the same tile with two (the
    # A/B of the count) and the model's first two-consumer config (192 keys at 16k), each on the grid and persistent
    from benchmark_modules import benchmark_module

    bench = benchmark_module("attention_sm90")
    problem = AttentionProblem(1, 32, 8, 16384, 16384, 64)
    default = attention.choose(problem, "sm90")
    configs = bench.consumer_configs(problem, default)
    assert default.consumers == 3 and default not in configs
    assert {(c.consumers, c.block_kv, c.persistent) for c in configs + [default]} == {
        (n, kv, g) for n, kv in ((3, 128), (3, 64), (2, 128), (2, 192)) for g in (False, True)}
    assert bench.consumer_configs(AttentionProblem(1, 16, 16, 4096, 4096, 128), C()) == []
