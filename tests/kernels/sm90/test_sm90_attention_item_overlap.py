"""``Sm90AttentionConfig.item_overlap`` (stop 50, attnitem): ping-pong's turns at the overlapped loop's joint issues
only, an item's first S and last P V outside them (FA3's ``warp_scheduler_barrier``), the round robin's first arrival
once a CTA and the row sums under the last P V. The CUDA emulator against the float64 reference within the documented
bound (persistent CTAs walking several items, odd lengths, causal, GQA, D 64 and 128, two and three consumers, the TMA
epilogues), the barriers' placement, the refusal, the cost model's switch, the benchmark's option and the CLI."""

import re

import pytest
from hopper_kernels import dropping

from tvm_cdna4.cli import main
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention.problem import AttentionProblem
from tvm_cdna4.kernels.sm90 import attention_cost
from tvm_cdna4.kernels.sm90.attention_emit import order_barrier
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig, plan_sm90_attention
from sm90_attention_checks import check_emulated

C = Sm90AttentionConfig
EDGES = {"overlap": True, "pingpong": True, "item_overlap": True}
SLOW_CASES = {  # item_overlap was timed and left off (stop 51): its cases run with slow
    # one CTA walking 6 items of 1 and 2 kv tiles (200 queries over 130 keys, causal, GQA 2:1): a warpgroup's next
    # item starts while the other finishes the last; items of one tile have no turn at all
    "one CTA walking 6 items, causal, GQA 2:1, 200 over 130, D 64": (
        AttentionProblem(1, 3, 1, 200, 130, 64, causal=True), C(64, 2, **EDGES, persistent=True, ctas=1)),
    # three consumers: the round robin 0, 1, 2 over items (the last warpgroup's first arrival once a CTA)
    "three consumers, one CTA walking 2 items, causal, 200 tokens": (
        AttentionProblem(1, 1, 1, 200, 200, 64, causal=True), C(128, 2, **EDGES, persistent=True, ctas=1, consumers=3)),
    # one CTA an item: the same edges, one item each
    "grid, causal, GQA 2:1, 70 queries over 200 keys": (AttentionProblem(1, 2, 1, 70, 200, 64, causal=True),
                                                         C(64, 2, **EDGES)),
    # D 128, 2 persistent CTAs over 4 items of 1-2 kv tiles of 128 keys (the default's tile), odd length
    "D 128, causal, GQA 2:1, 250 tokens, 2 persistent CTAs": (
        AttentionProblem(1, 2, 1, 250, 250, 128, causal=True), C(128, 2, **EDGES, persistent=True, ctas=2)),
    "f16, odd lengths 130 over 250, 3 stages, one CTA walking 4 items": (
        AttentionProblem(1, 2, 1, 130, 250, 64, dtype="f16"), C(64, 3, **EDGES, persistent=True, ctas=1)),
    "O's own buffer, D 128, causal, 250 tokens, 2 persistent CTAs": (
        AttentionProblem(1, 2, 1, 250, 250, 128, causal=True),
        C(128, 2, **EDGES, persistent=True, ctas=2, epilogue="tma_buffer")),
    "TMA epilogue (Q's rows), causal, GQA 2:1, 130 tokens, one CTA walking 4 items": (
        AttentionProblem(1, 2, 1, 130, 130, 64, causal=True), C(64, 2, **EDGES, persistent=True, ctas=1, epilogue="tma")),
    "three consumers, 64-key tiles, causal, 330 tokens, one CTA walking 2 items, 3 stages": (
        AttentionProblem(1, 1, 1, 330, 330, 64, causal=True),
        C(64, 3, **EDGES, persistent=True, ctas=1, consumers=3)),
}




@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_CASES)
def test_item_overlap_emulated_within_the_bound(name):
    check_emulated(*SLOW_CASES[name])


def _bars(p):
    """(line, text) of the consumers' named-barrier statements and the line of their items loop."""
    lines = [line.strip() for line in attention.emit(p).script().splitlines()]
    consumer = next(i for i, line in enumerate(lines) if "setmaxnreg" in line and '"inc"' in line)
    bars = [(i, line) for i, line in enumerate(lines) if "T.ptx.bar(" in line and i > consumer]
    items = next(i for i in range(consumer, len(lines)) if re.match(r"for i(_\d+)? in range\(", lines[i]))
    return lines, bars, items


def test_the_turns_are_the_loops_joint_issues_and_the_first_arrival_once_a_cta():
    """item_overlap: four named-barrier statements in the consumers: the last warpgroup's first arrival before the
    items loop, the loop's turn (its own barrier, then the next's), warpgroup 0's sync after the items loop that
    takes the last arrival; the row sums' shuffles between the last P V's issue and its wait. Off: the turns at the
    item's first S and last P V too, the first arrival inside the items loop."""
    problem = AttentionProblem(1, 3, 1, 200, 130, 64, causal=True)
    on = plan_sm90_attention(problem, C(64, 2, **EDGES, persistent=True, ctas=1))
    lines, bars, items = _bars(on)
    first = order_barrier(on)
    assert [text for _, text in bars] == [
        f'T.ptx.bar(T.Cast("uint32", {first}), T.uint32(256), "", "arrive", "")',
        f'T.ptx.bar(T.Cast("uint32", {first} + wg[0]), T.uint32(256), "", "sync", "")',
        f'T.ptx.bar(T.Cast("uint32", {first + 1} - wg[0]), T.uint32(256), "", "arrive", "")',
        f'T.ptx.bar(T.Cast("uint32", {first}), T.uint32(256), "", "sync", "")']
    assert bars[0][0] < items < bars[1][0] and lines[bars[0][0] - 1] == "if wg[0] == 1:"
    assert lines[bars[3][0] - 1] == "if wg[0] == 0:"
    waits = [i for i, line in enumerate(lines) if '"wait_group", "sync"' in line]
    sums = [i for i, line in enumerate(lines) if line.startswith("row[2 + h") and "__shfl_xor_sync" in line]
    last_wait = max(w for w in waits if w < bars[3][0])
    assert len(sums) == 1 and last_wait > sums[0] > max(w for w in waits if w < sums[0])
    off = plan_sm90_attention(problem, C(64, 2, True, True, True, persistent=True, ctas=1))
    lines, bars, items = _bars(off)
    assert len(bars) == 7 and all(i > items for i, _ in bars)


@pytest.mark.slow  # WEIGH_ITEM_OVERLAP off (suite time)
def test_a_dropped_last_sync_leaves_the_first_arrival_pending_and_the_emulator_reports_it():
    """The round robin's arrivals match its waits over the CTA, not over each item: without warpgroup 0's sync after
    its items, the last warpgroup's last arrival is left pending at the kernel's end."""
    from tvm_cdna4.emulator import EmulationError, emulate
    from tvm_cdna4.kernels.attention.problem import output_arrays, random_inputs

    problem = AttentionProblem(1, 2, 1, 130, 130, 64, causal=True)
    p = plan_sm90_attention(problem, C(64, 2, **EDGES, persistent=True, ctas=1))
    arrays = {**random_inputs(problem, 0), **output_arrays(problem)}
    func = attention.emit(p)
    with pytest.raises(EmulationError, match="end of kernel"):
        emulate(dropping(func, "tirx.ptx.bar_sync_count", 2), *(arrays[q.name] for q in p.params), target="sm90")


@pytest.mark.parametrize("config", [C(64, 2, item_overlap=True), C(64, 2, overlap=True, item_overlap=True),
                                    C(64, 2, True, True, True, item_overlap=1)])
def test_item_overlap_needs_pingpong(config):  # item_overlap=1: refused as no bool first (kernels.common.check_config)
    with pytest.raises(ContractError, match="pingpong=True|expected True or False, found 1") as err:
        plan_sm90_attention(AttentionProblem(1, 1, 1, 64, 64, 64), config)
    assert err.value.operand == "item_overlap"


def test_the_cost_model_weighs_item_overlap_only_where_switched_on(monkeypatch):
    """Off (the default): no candidate has it, the choice is the one of before. On: each ping-pong config of a
    persistent grid beside itself with it, ``ITEM_OVERLAP_CLOCKS`` less an item of the busiest CTA."""
    import attrs

    problem = AttentionProblem(8, 16, 16, 2048, 2048, 128, causal=True)
    off = attention_cost.candidates(problem, 232448)
    before = attention_cost.choose(problem)
    assert not any(c.item_overlap for c in off) and not before.item_overlap
    monkeypatch.setattr(attention_cost, "WEIGH_ITEM_OVERLAP", True)
    on = attention_cost.candidates(problem, 232448)
    assert [c for c in on if not c.item_overlap] == off
    assert [c for c in on if c.item_overlap] == [attrs.evolve(c, item_overlap=True) for c in off
                                                 if c.pingpong and c.persistent]
    base = C(128, 3, True, True, True, persistent=True, ctas=132)
    saved = attention_cost.estimate(problem, base) - attention_cost.estimate(problem, attrs.evolve(base, item_overlap=True))
    items = -(-problem.batch * problem.heads * 16 // 132)  # the busiest CTA's items (16 query blocks a head)
    assert saved == pytest.approx(attention_cost.ITEM_OVERLAP_CLOCKS * items)
    # where the persistent ping-pong config was chosen (8 x 2k tokens, not causal), it is chosen with item_overlap
    flat = AttentionProblem(8, 16, 16, 2048, 2048, 128)
    monkeypatch.setattr(attention_cost, "WEIGH_ITEM_OVERLAP", False)
    chosen = attention_cost.choose(flat)
    monkeypatch.setattr(attention_cost, "WEIGH_ITEM_OVERLAP", True)
    assert chosen.persistent and chosen.pingpong and attention_cost.choose(flat) == attrs.evolve(chosen, item_overlap=True)


def test_the_benchmark_times_item_overlap_off_and_on():
    from benchmark_modules import benchmark_module

    bench = benchmark_module("attention_sm90")
    problem = AttentionProblem(8, 16, 16, 2048, 2048, 128, causal=True)
    default = attention.choose(problem, "sm90")
    got = bench.option_configs(problem, default, ["item-overlap"])
    assert {(c.persistent, c.item_overlap) for c in got} | {(default.persistent, False)} == {
        (g, o) for g in (False, True) for o in (False, True)}
    assert "item-overlap" in bench.config_label(got[-1], default) and default not in got
    d64 = AttentionProblem(8, 32, 32, 2048, 2048, 64, causal=True)
    assert any(c.item_overlap and c.consumers == 3 for c in bench.option_configs(d64, attention.choose(d64, "sm90"),
                                                                                 ["item-overlap"]))


def test_the_cli_sets_item_overlap(capsys):
    import json

    args = ["attention", "--target", "sm90", "--seq", "130", "--heads", "2", "--head-dim", "64", "--causal"]
    assert main(args + ["--item-overlap", "--persistent", "--emit", "config"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["item_overlap"] is True
    assert main(args + ["--no-item-overlap", "--emit", "config"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["item_overlap"] is False
