"""The sm90 attention forward (issue 38) in the CUDA emulator against the float64 reference within the
documented bound (causal, GQA, odd lengths, Sq != Skv, D 64 and 128, LSE), its plan record and refusals,
the ``TARGETS`` row and the CLI."""

import json

import numpy as np
import pytest
from hopper_kernels import dropping

from tvm_cdna4.cli import main
from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import attention
from tvm_cdna4.kernels.attention.problem import AttentionProblem
from tvm_cdna4.kernels.sm90.attention_cost import choose as default_config
from tvm_cdna4.kernels.sm90 import attention_plan
from tvm_cdna4.kernels.sm90.attention_plan import (BLOCK_Q, Sm90AttentionConfig, Sm90AttentionPlan, plan_sm90_attention,
                                                  section_heads, work_item)
from sm90_attention_checks import check_emulated

C = Sm90AttentionConfig
CASES = {
    # one query block of 70 rows over 200 keys: causal (the diagonal tile masked), GQA 2:1, the tail past Skv
    "causal, GQA 2:1, 70 queries over 200 keys, D 64, ping-pong": (AttentionProblem(1, 2, 1, 70, 200, 64, causal=True),
                                                                   C(64, 2, overlap=True, pingpong=True)),
    # one token: a query block of 1 row (TMA zero-fills the others), one key; persistent: one CTA, 4 items (the
    # ring and Q's barriers carried from item to item)
    "one token, causal, GQA 2:1, persistent": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True),
                                                C(64, 2, persistent=True, ctas=1)),
    # D 128 (two 64-column blocks a tile row), the cost model's config (128 keys, 3 stages, ping-pong): one masked tile
    "D 128, MHA, the default config": (AttentionProblem(1, 1, 1, 128, 128, 128), None),
    # the opt-in options, each over one CTA walking 4 one-token items: K and V on their own "full" barriers; O
    # staged in the Q tile and stored by TMA (Q's next load waits for the stores to read it)
    "one token, persistent, split K / V barriers": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True),
                                                     C(64, 2, persistent=True, ctas=1, split_kv_barrier=True)),
    "one token, persistent, TMA epilogue": (AttentionProblem(1, 4, 2, 1, 1, 64, causal=True),
                                             C(64, 2, persistent=True, ctas=1, epilogue="tma")),
    # O staged in a buffer of its own and stored by TMA, the stores waited for before the next item's epilogue; Q
    # released at the item's last S (the overlapped loop's first tile is its last)
    "one token, persistent, ping-pong, O through its own buffer": (
        AttentionProblem(1, 4, 2, 1, 1, 64, causal=True), C(64, 2, True, True, True, persistent=True, ctas=1,
                                                            epilogue="tma_buffer")),
}
SLOW_CASES = {
    "odd lengths 130, causal, GQA 2:1, D 64": (AttentionProblem(1, 2, 1, 130, 130, 64, causal=True), C(64, 2)),
    "odd lengths 130, D 128, f16": (AttentionProblem(1, 1, 1, 130, 130, 128, dtype="f16"), C(64, 2)),
    "more queries than keys, causal": (AttentionProblem(1, 2, 1, 200, 130, 64, causal=True), C(64, 2)),
    # one stage: the producer's load of tile j + 1 waits for both consumers' release of tile j. One CTA: two CTAs
    # of different trip counts in one lockstep batch report a deadlock in the emulator (each alone runs)
    "one stage, causal, 130 keys": (AttentionProblem(1, 1, 1, 128, 130, 64, causal=True), C(64, 1)),
    "three stages, 4 kv tiles": (AttentionProblem(1, 1, 1, 128, 256, 64), C(64, 3)),
    "overlap without ping-pong, causal, 3 tiles": (AttentionProblem(1, 2, 1, 130, 130, 64, causal=True),
                                                   C(64, 2, overlap=True)),
    "persistent, one CTA walking 6 items, ping-pong": (AttentionProblem(1, 3, 1, 200, 130, 64, causal=True),
                                                       C(64, 2, True, True, True, persistent=True, ctas=1)),
    "persistent, 3 CTAs over 4 items, 3 stages": (AttentionProblem(1, 2, 1, 130, 200, 64), C(64, 3, persistent=True, ctas=3)),
    "fp8, causal, GQA 2:1, 130 queries over 300 keys, ping-pong": (
        AttentionProblem(1, 2, 1, 130, 300, 128, causal=True, dtype="fp8"), C(128, 2, True, True, True)),
    "fp8, 200 queries over 130 keys, overlap": (AttentionProblem(1, 2, 2, 200, 130, 128, dtype="fp8"),
                                                 C(128, 2, overlap=True)),
    "fp8, one token, causal, GQA 2:1, persistent": (AttentionProblem(1, 4, 2, 1, 1, 128, causal=True, dtype="fp8"),
                                                     C(128, 2, persistent=True, ctas=1)),
    "D 128, causal, GQA 2:1, 250 tokens, ping-pong, 2 persistent CTAs": (
        AttentionProblem(1, 2, 1, 250, 250, 128, causal=True), C(128, 2, True, True, True, persistent=True, ctas=2)),
    "192-key tiles, causal, 3000 keys": (AttentionProblem(1, 1, 1, 40, 3000, 64, causal=True), C(192, 2, True, True, True)),
    "split K / V barriers, causal, GQA 2:1, 70 queries over 200 keys, ping-pong": (
        AttentionProblem(1, 2, 1, 70, 200, 64, causal=True), C(64, 2, True, True, True, split_kv_barrier=True)),
    "split K / V barriers, fp8 (the transposers wait for V), 200 queries over 130 keys": (
        AttentionProblem(1, 2, 2, 200, 130, 128, dtype="fp8"), C(128, 2, overlap=True, split_kv_barrier=True)),
    "TMA epilogue, causal, GQA 2:1, 70 queries (rows past Sq clipped), plain": (
        AttentionProblem(1, 2, 1, 70, 200, 64, causal=True), C(64, 2, epilogue="tma")),
    "O's own buffer, causal, GQA 2:1, 70 queries (rows past Sq clipped), plain": (
        AttentionProblem(1, 2, 1, 70, 200, 64, causal=True), C(64, 2, epilogue="tma_buffer")),
    "O's own buffer, 130 queries over 200 keys, 3 stages, one CTA walking 4 items": (
        AttentionProblem(1, 2, 1, 130, 200, 64), C(64, 3, persistent=True, ctas=1, epilogue="tma_buffer")),
    "O's own buffer and split barriers, D 128, causal, 250 tokens, ping-pong, 2 persistent CTAs": (
        AttentionProblem(1, 2, 1, 250, 250, 128, causal=True),
        C(128, 2, True, True, True, persistent=True, ctas=2, split_kv_barrier=True, epilogue="tma_buffer")),
    "both options, D 128, causal, 250 tokens, ping-pong, 2 persistent CTAs": (
        AttentionProblem(1, 2, 1, 250, 250, 128, causal=True),
        C(128, 2, True, True, True, persistent=True, ctas=2, split_kv_barrier=True, epilogue="tma")),
}


def _check(problem, config):
    return check_emulated(problem, config, lse=False)  # some of these cases' LSE rounds exactly




@pytest.mark.parametrize("name", CASES)
def test_emulated_attention_is_within_the_documented_bound(name):
    _check(*CASES[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW_CASES)
def test_more_emulated_shapes_within_the_bound(name):
    _check(*SLOW_CASES[name])


def test_the_ring_stage_and_phase_are_carried_counters():
    """The ring's stage and phase are carried across tiles and items (``attention_emit.RING``, ``advance``): 3 stages
    leave no modulo or division by 3 of a ring position in the CUDA C (each was a multiply-high, a shift and a
    multiply-subtract a use); where a wgmma operand's region starts at the stage, it is clamped (``operand_stage``:
    the wgmma pattern refuses the bare counter, tests/patterns/test_wgmma.py)."""
    problem, config = AttentionProblem(1, 2, 1, 130, 200, 64), C(64, 3, persistent=True, ctas=1)
    source = attention.build(problem, "sm90", config).source
    assert "min(ring" in source and not any(f"{op} 3)" in source for op in ("%", "/"))


@pytest.mark.parametrize("q_blocks, heads_total, section", [(16, 128, 32), (3, 6, 4), (5, 7, 1), (1, 2, 2), (4, 10, 10)])
def test_work_items_cover_every_block_once_in_l2_sections_longest_first(q_blocks, heads_total, section):
    items = [work_item(u, q_blocks, heads_total, section) for u in range(q_blocks * heads_total)]
    assert sorted(items) == [(bh, qb) for bh in range(heads_total) for qb in range(q_blocks)]
    for start in range(0, heads_total, section):  # a section's items are consecutive, longest query block first
        width = min(section, heads_total - start)
        run = items[start * q_blocks:(start + width) * q_blocks]
        assert {bh for bh, _ in run} == set(range(start, start + width))
        assert [qb for _, qb in run] == sorted((qb for _, qb in run), reverse=True)


def test_the_tir_work_item_is_the_python_one():
    """The kernel's item (``T.min`` / ``truncdiv`` / ``truncmod`` on a TIR variable) equals the cost model's."""
    from tvm_tirx.ir import IntImm
    from tvm_tirx.script import tirx as T
    from tvm_tirx.sym import Analyzer

    for k in range(18):
        expr = work_item(IntImm("int32", k), 3, 6, 4, (T.min, T.truncdiv, T.truncmod))
        assert tuple(int(Analyzer().simplify(e)) for e in expr) == work_item(k, 3, 6, 4)


def test_l2_sections():
    """Causal: the batch x heads whose K and V fit 32 MiB (kv heads a power of two, GQA's query heads with each);
    not causal: one kv head's query heads (its query blocks run together)."""
    # one kv head at 2k keys, D 128, bf16: 1 MiB of K and V -> 32 kv heads, x 4 query heads each
    assert section_heads(AttentionProblem(8, 32, 8, 2048, 2048, 128, causal=True)) == 32 * 4
    assert section_heads(AttentionProblem(1, 16, 16, 16384, 16384, 128, causal=True)) == 4  # 8 MiB each
    assert section_heads(AttentionProblem(1, 16, 16, 3 * 16384, 3 * 16384, 128, causal=True)) == 1  # 24 MiB: one
    assert section_heads(AttentionProblem(1, 2, 1, 300, 300, 64, causal=True)) == 2  # every batch x head
    assert section_heads(AttentionProblem(8, 32, 8, 2048, 2048, 128)) == 4


@pytest.mark.slow
def test_emulated_attention_over_a_short_last_section(monkeypatch):
    """Sections of 4 batch x heads over 6 (the last one of 2), persistent: the kernel's items are every one once."""
    monkeypatch.setattr(attention_plan, "L2_SECTION_BYTES", 2 * 2 * 130 * 64 * 2)  # two kv heads' K and V
    problem = AttentionProblem(3, 2, 1, 130, 130, 64, causal=True)
    assert section_heads(problem) == 4
    _check(problem, C(64, 2, True, True, True, persistent=True, ctas=5))


def test_the_plan_record():
    p = plan_sm90_attention(AttentionProblem(2, 32, 8, 4096, 4000, 128, causal=True), C(128, 2))
    assert isinstance(p, Sm90AttentionPlan) and attention.target_of(p) == "sm90"
    assert (p.threads, p.block_q, p.q_blocks, p.ctas, p.kv_tiles) == (384, BLOCK_Q, 32, 32 * 64, 32)
    assert (p.wgmma_s, p.wgmma_o) == ("m64n128k16.f32.bf16.bf16", "m64n128k16.f32.bf16.bf16")
    # Q (128 x 128) and two stages of K, V (128 x 128 each), 2 bytes an element
    assert p.smem_bytes == 2 * 128 * (128 + 2 * 2 * 128) and p.kv_bytes == 2 * 128 * 128 * 2
    assert p.barriers == 6 and p.stage_offset(1, 1) == 128 * 128 * 4 and p.items == p.ctas
    assert [q.name for q in p.params] == ["Q", "K", "V", "O", "LSE"] and p.params[1].shape == (2, 8, 4000, 128)
    with pytest.raises(AttributeError):
        p.config = C()  # frozen
    assert json.loads(p.to_json())["target"] == "sm90" and p.summary()["grid"] == p.ctas
    d64 = attention.plan(AttentionProblem(1, 4, 4, 8192, 8192, 64), "sm90")  # the cost model's: 192 keys, 3 stages
    assert (d64.wgmma_s, d64.wgmma_o) == ("m64n192k16.f32.bf16.bf16", "m64n64k16.f32.bf16.bf16")
    assert d64.smem_bytes == 2 * 64 * (128 + 2 * 3 * 192)


@pytest.mark.parametrize("problem, config", [
    # fitted to an H100's sweep (attention_cost.FITTED): at D 128 the 3-stage ring of 128-key tiles with overlap and
    # ping-pong, causal or not (FA3's 176 keys at D 128 fit only 2 stages here: 12-17 % slower); D 64 192 keys
    # (3 stages fit); one key: the least padded tile. The TMA epilogue (OPTION_RATES, fitted to the options run) where
    # an item has many tiles: 16k keys, not 2k. Persistent CTAs (PERSISTENT_ITEM_CLOCKS, fitted to their pairs) where
    # the model finds them paying (not at 32k causal or D 64 8k causal: a static round robin of uneven items). D 64
    # at 8k, 32 heads: three consumer warpgroups (CONSUMER_EXPOSED[3], fitted), 128 keys (their registers)
    (AttentionProblem(1, 16, 16, 16384, 16384, 128), C(128, 3, True, True, True, persistent=True, epilogue="tma")),
    (AttentionProblem(8, 16, 4, 2048, 2048, 128, causal=True), C(128, 3, True, True, True, persistent=True)),
    (AttentionProblem(2, 32, 8, 8192, 8192, 64, causal=True), C(128, 3, True, True, True, consumers=3)),
    (AttentionProblem(1, 16, 4, 32768, 32768, 128, causal=True), C(128, 3, True, True, True, epilogue="tma")),
    (AttentionProblem(1, 8, 8, 1, 1, 128), C(64, 3, True, True, True)),
    (AttentionProblem(1, 16, 16, 16384, 16384, 128, dtype="fp8"), C(128, 3, True, True, True, persistent=True)),  # fp8: registers
])
def test_the_cost_model_chooses_tiles_stages_and_the_schedule(problem, config):
    from tvm_cdna4.kernels.sm90 import attention_cost

    assert default_config(problem) == config == attention.choose(problem, "sm90")
    assert all(attention_cost.registers(problem, c) <= 232 for c in attention_cost.candidates(problem, 227 * 1024))
    plain, overlapped, pingpong = (attention_cost.estimate(problem, C(128, 3, True, o, p))
                                   for o, p in ((False, False), (True, False), (True, True)))
    assert plain > overlapped > pingpong


def test_the_tma_epilogue_is_weighed_by_its_fitted_rates():
    # per tile faster, per item slower (attention_cost.OPTION_RATES): it pays past TMA_EPILOGUE_ITEM_CLOCKS /
    # TMA_EPILOGUE_TILE_CLOCKS tiles an item at D 128 (50: between 4k keys of 128 and 8k) and not below
    from tvm_cdna4.kernels.sm90 import attention_cost as cost

    def gain(seq):
        p = AttentionProblem(1, 16, 16, seq, seq, 128)
        return cost.estimate(p, C(128, 3, True, True, True)) - cost.estimate(p, C(128, 3, True, True, True, epilogue="tma"))
    assert max(gain(2048), gain(4096)) < 0 < gain(8192) < gain(16384)
    assert all(c.epilogue == "registers" for c in cost.candidates(AttentionProblem(1, 1, 1, 64, 64, 128, dtype="fp8"),
                                                                    227 * 1024))
    import os

    from benchmark_modules import benchmark_module

    fit = benchmark_module("attention_sm90_fit")
    rates, before, after = fit.fit_options(fit.load([os.path.join(os.path.dirname(fit.__file__), r)
                                                     for r in fit.OPTION_RUNS]))
    assert after < before
    for hd in (64, 128):  # each head dim's rates are its own pairs' (D 64: a wait held at 0, fit.NONNEGATIVE)
        assert abs(rates["TMA_EPILOGUE_TILE_CLOCKS"][hd] - cost.TMA_EPILOGUE_TILE_CLOCKS[hd]) < 10
        assert abs(rates["TMA_EPILOGUE_ITEM_CLOCKS"][hd] - cost.TMA_EPILOGUE_ITEM_CLOCKS[hd]) < 100
    assert cost.TMA_EPILOGUE_ITEM_CLOCKS[64] == 0 and cost.TMA_EPILOGUE_TILE_CLOCKS[64] < 0


def test_at_head_dim_64_the_register_epilogue_is_chosen_as_its_timed_pairs_say():
    # the H100's D 64 pairs (2k, 4k, 16k tokens, one CTA per item, no split barrier): the TMA epilogue 1-6 % slower
    # at 16k, within 1-3 % either way at 2k / 4k, no faster over all of them; the model never picks it at D 64
    import math
    import os

    import attrs
    from benchmark_modules import benchmark_module

    from tvm_cdna4.kernels.sm90 import attention_cost as cost

    fit = benchmark_module("attention_sm90_fit")
    data = fit.load([os.path.join(os.path.dirname(fit.__file__), r) for r in fit.OPTION_RUNS])
    times = {(p, c): t for p, c, t in data}
    logs = [math.log(t / times[p, attrs.evolve(c, epilogue="registers")]) for p, c, t in data
            if p.head_dim == 64 and not c.persistent and not c.split_kv_barrier and c.epilogue == "tma"]
    assert len(logs) == 12 and sum(logs) > 0
    for seq in (2048, 8192, 32768):
        for causal in (False, True):
            assert cost.choose(AttentionProblem(max(1, 16384 // seq), 32, 8, seq, seq, 64, causal=causal)).epilogue == "registers"


def test_the_tma_epilogue_rates_rank_each_timed_pair_as_the_h100_did():
    # the fitted run's own pairs (one CTA per item, no split barrier): the model's faster epilogue is the timed one
    # (review: fitted over the split barrier's pairs too, the rates had the TMA epilogue winning at 4 x 4096 not
    # causal, timed 1.1 % and 2.7 % slower; each option is now fitted to its own pairs, fit.OPTION_GROUPS)
    import os

    import attrs
    from benchmark_modules import benchmark_module

    from tvm_cdna4.kernels.sm90 import attention_cost as cost

    fit = benchmark_module("attention_sm90_fit")
    data = fit.load([os.path.join(os.path.dirname(fit.__file__), fit.OPTION_RUNS[0])])
    times = {(p, c): t for p, c, t in data}
    wrong = []
    for p, c, t in data:
        if c.persistent or c.split_kv_barrier or c.epilogue != "tma":
            continue
        base = attrs.evolve(c, epilogue="registers")
        if (t < times[p, base]) != (cost.estimate(p, c) < cost.estimate(p, base)):
            wrong.append((p.seq_q, p.kv_heads, p.causal, round(t / times[p, base], 3)))
    assert wrong == []


@pytest.mark.parametrize("problem, config, operand", [
    (AttentionProblem(1, 1, 1, 64, 64, 64, dtype="fp8"), None, "head_dim"),  # fp8: D 128 (one 128-byte row)
    (AttentionProblem(1, 1, 1, 64, 64, 128, dtype="fp8"), C(64, 2), "block_kv"),  # fp8: 128-key tiles
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(72, 2), "block_kv"),
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(512, 2), "block_kv"),
    (AttentionProblem(1, 1, 1, 64, 64, 128), C(256, 2), "stages"),  # 32 + 256 KB of shared memory
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(64, 0), "stages"),
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(64, 2, pingpong=True), "pingpong"),
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(64, 2, ctas=4), "ctas"),  # a grid size without persistent=True
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(64, 2, epilogue="smem"), "epilogue"),
    (AttentionProblem(1, 1, 1, 64, 64, 128, dtype="fp8"), C(128, 2, epilogue="tma"), "epilogue"),  # Q: half O's bytes
    (AttentionProblem(1, 1, 1, 64, 64, 128, dtype="fp8"), C(128, 2, epilogue="tma_buffer"), "epilogue"),
    # D 128: Q, 3 stages of 128 keys and O's 32 KiB buffer are 257 KiB
    (AttentionProblem(1, 1, 1, 64, 64, 128), C(128, 3, epilogue="tma_buffer"), "stages"),
    (AttentionProblem(1, 1, 1, 64, 64, 64), C(64, 2, split_kv_barrier=1), "split_kv_barrier"),
])
def test_refusals_name_the_operand(problem, config, operand):
    with pytest.raises(ContractError) as err:
        attention.plan(problem, "sm90", config)
    assert err.value.operand == operand


def test_the_fp8_plan():
    """fp8: e4m3 wgmma (k32) for both GEMMs, a third tile a stage (V transposed by the producer warpgroup's warps
    1-3, with its own "transposed" barrier), bf16 O, the scales as the last parameter."""
    p = attention.plan(AttentionProblem(2, 16, 4, 4096, 4096, 128, causal=True, dtype="fp8"), "sm90")
    assert (p.config.block_kv, p.columns, p.k_step, p.elem_bytes, p.p_shift) == (128, 128, 32, 1, 8)
    assert (p.wgmma_s, p.wgmma_o) == ("m64n128k32.f32.e4m3.e4m3", "m64n128k32.f32.e4m3.e4m3")
    assert [(q.name, q.dtype) for q in p.params] == [("Q", "float8_e4m3fn"), ("K", "float8_e4m3fn"),
                                                     ("V", "float8_e4m3fn"), ("O", "bfloat16"), ("LSE", "float32"),
                                                     ("SCALES", "float32")]
    s = p.config.stages
    assert p.barriers == 2 + 3 * s and p.smem_bytes == 128 * 128 * (1 + 3 * s) and p.kv_bytes == 2 * 128 * 128
    text = attention.emit(p).script()
    assert text.count('T.ptx.prmt(') == 8 and "m64n128k32.f32.e4m3.e4m3" in text and '("b_major", "mn")' not in text


def test_the_options_barriers_and_stores():
    """split_kv_barrier: each stage's V on its own "full" barrier after the others (K's bytes on the stage's, V's on
    its own); epilogue="tma": a fourth tensor map (O's, boxes of 64 rows) and one 3-D TMA store per 64-column block;
    neither option on: neither in the script."""
    problem = AttentionProblem(1, 2, 1, 70, 200, 128)
    plain = attention.plan(problem, "sm90", C(64, 3))
    split = attention.plan(problem, "sm90", C(64, 3, split_kv_barrier=True))
    fp8 = attention.plan(AttentionProblem(1, 2, 1, 70, 200, 128, dtype="fp8"), "sm90", C(128, 2, split_kv_barrier=True))
    assert (plain.barriers, plain.v_full(2)) == (8, 3) and (split.barriers, split.v_full(2)) == (11, 10)
    assert (fp8.barriers, fp8.v_full(1)) == (2 + 3 * 2 + 2, 9) and split.tile_bytes == 64 * 128 * 2 == split.kv_bytes // 2
    text = attention.emit(split).script()
    assert text.count("expect_tx") == 3 and text.count(f"T.uint32({split.tile_bytes})") == 2
    tma = attention.emit(attention.plan(problem, "sm90", C(64, 3, epilogue="tma"))).script()
    # one store (in a loop over D 128's two column blocks), O's map of 64-row boxes, no st of O from the registers
    assert tma.count('"tensor", "3d", "global", "shared::cta", "tile", "bulk_group"') == 1
    assert "mapO, T.address_of(O[0, 0, 0, 0]), 128, 70, 2, 256, 17920, 64, 64, 1" in tma and "T.ptx.st(T.address_of(O[" not in tma
    default = attention.emit(plain).script()
    assert "mapO" not in default and "bulk_group" not in default and default.count("expect_tx") == 2
    assert "T.ptx.st(T.address_of(O[" in default


def test_fp8_keys_follow_the_a_fragment():
    """The e4m3 A fragment's key positions hold S's keys in ``fp8_key``'s order: a bijection on each 32-key step,
    and thread t's positions 4t..4t+3 (16 + 4t..) are exactly the keys of its S registers (2t, 2t + 1, 8 + 2t,
    9 + 2t; + 16)."""
    from tvm_cdna4.isa.hopper_layout import a_fragment_coords, accumulator_coords
    from tvm_cdna4.kernels.sm90.attention_emit import fp8_key, fp8_source

    assert sorted(fp8_key(k) for k in range(32)) == list(range(32))
    for t in range(128):
        for q in range(16):
            row, k = a_fragment_coords(t, q, 8)
            srow, key = accumulator_coords(t, fp8_source(q))
            assert (row, fp8_key(k)) == (srow, key)


def test_validate_beyond_the_emulated_pairs_asks_for_a_gpu():
    with pytest.raises(ValueError, match="needs an NVIDIA Hopper GPU"):
        attention.validate(AttentionProblem(1, 1, 1, 257, 257, 64), "sm90")  # 66049 pairs


def test_the_cli_plans_and_emits_sm90(capsys):
    assert main(["attention", "--target", "sm90", "--seq", "3000", "--heads", "8", "--kv-heads", "2", "--causal",
                 "--emit", "config"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["target"] == "sm90" and record["config"]["block_kv"] == 128 and record["grid"] == 24 * 8
    assert record["config"]["pingpong"] and record["kernel"] == "tma-wgmma-warp-specialized"
    assert main(["attention", "--target", "sm90", "--seq", "64", "--emit", "asm"]) == 2
    assert "--emit asm is for --target gfx950; sm90 emits cuda" in capsys.readouterr().err
    assert main(["attention", "--target", "sm90", "--seq", "64", "--arch", "sm_80", "--emit", "config"]) == 2


def test_the_cli_validates_sm90_without_a_gpu(capsys):
    from tvm_cdna4.runtime import cuda

    if cuda.have_cuda_gpu()[0]:
        pytest.skip("a GPU is present: --validate runs on it")
    assert main(["attention", "--target", "sm90", "--seq", "1", "--seq-kv", "70", "--heads", "2", "--kv-heads", "1",
                 "--head-dim", "64", "--block-kv", "64", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "validated sm90 bf16 attention B=1 H=2 Hkv=1 Sq=1 Skv=70 D=64 on the CUDA emulator" in out
    assert out.strip().endswith("PASS")


def test_the_cli_validates_sm90_in_the_emulator_beside_a_non_hopper_gpu_and_takes_sm_90a_on_hopper(capsys,
                                                                                                   monkeypatch):
    # an A100 present: --target sm90 --validate runs in the CUDA emulator (the sm90 kernel runs on sm_90 only);
    # an H100 present: --arch sm_90a (the kernel's build arch) is the GPU's own, not a refusal
    from types import SimpleNamespace

    from tvm_cdna4.cli import attention as cli_attention

    monkeypatch.setattr(cli_attention, "present_arch", lambda: "sm_80")
    assert main(["attention", "--target", "sm90", "--seq", "1", "--seq-kv", "70", "--heads", "2", "--kv-heads", "1",
                 "--head-dim", "64", "--block-kv", "64", "--validate"]) == 0
    assert "on the CUDA emulator" in capsys.readouterr().out
    args = SimpleNamespace(validate=True, bench=False, block_q=None, block_kv=None, arch="sm_90a")
    assert cli_attention._gpu_refusal(args, "sm_90") is None
    assert "the GPU here is sm_80" in cli_attention._gpu_refusal(args, "sm_80")


def test_the_emitted_kernel_uses_the_checked_wgmma_forms():
    """Both GEMMs are pattern applications (S: SS, Q and K in shared memory; O: RS, P in registers, V
    M/N-major) and every global read is a TMA load (no ld.global of Q, K, V)."""
    p = plan_sm90_attention(AttentionProblem(1, 2, 1, 170, 200, 64, causal=True), C(64, 2))
    text = attention.emit(p).script()
    # two GEMMs in each of the two loops (the unmasked tiles, then the masked ones)
    assert text.count("T.cuda.sm90.tile.apply(") == 4 and text.count('("b_major", "mn")') == 2
    assert text.count('"tensor", "3d"') == 3 and "setmaxnreg" in text
    assert np.prod(p.params[0].shape) == 170 * 2 * 64


@pytest.mark.parametrize("nth, config, words", [
    # the consumers' wait on Q's "full" barrier: the S wgmma reads Q while its TMA load is in flight
    (3, C(64, 2), "while an asynchronous copy into it is still in flight"),
    # the producer's wait on Q's "empty" barrier (one CTA walking two items): item 1's Q load lands while item 0's
    # S wgmmas read Q
    pytest.param(1, C(64, 2, persistent=True, ctas=1), "while an asynchronous copy into it is still in flight",
                 marks=pytest.mark.slow),
    # the producer's wait on a stage's "empty" barrier: tile 2 re-arms stage 0's "full" barrier still pending
    pytest.param(2, C(64, 2), "arrivals pending", marks=pytest.mark.slow),
    # split_kv_barrier: the consumers' wait on V's own "full" barrier (the 5th: Q's empty, a stage's empty, Q's
    # full, K's full, V's): the P V wgmma reads V while its TMA load is in flight
    (5, C(64, 2, split_kv_barrier=True), "while an asynchronous copy into it is still in flight"),
])
def test_a_dropped_wait_is_reported(nth, config, words):
    from tvm_cdna4.emulator import EmulationError, emulate
    from tvm_cdna4.kernels.attention.problem import output_arrays, random_inputs

    problem = AttentionProblem(1, 2, 1, 64, 200, 64)
    p = attention.plan(problem, "sm90", config)
    arrays = {**random_inputs(problem, 0), **output_arrays(problem)}
    with pytest.raises(EmulationError, match=words):
        emulate(dropping(attention.emit(p), "tirx.cuda.mbarrier_wait", nth), *(arrays[q.name] for q in p.params),
                target="sm90")



@pytest.mark.parametrize("problem, config, reader", [
    # fp8: the producer's warps 1-3 write V^T with st.shared, fence, arrive on the stage's "transposed" barrier; the
    # P V wgmma reads V^T through its descriptor
    (AttentionProblem(1, 1, 1, 64, 130, 128, dtype="fp8"), None, "wgmma.mma_async reading a descriptor operand"),
    # the TMA epilogue: the consumers write O, fence, sync; the elected thread's TMA store reads it
    (AttentionProblem(1, 2, 1, 70, 200, 64), C(64, 2, epilogue="tma"), "the TMA store cp.async.bulk.tensor reading"),
])
def test_a_dropped_proxy_fence_is_reported(problem, config, reader):
    from tvm_cdna4.emulator import EmulationError, emulate
    from tvm_cdna4.kernels.attention.problem import output_arrays, random_inputs

    p = attention.plan(problem, "sm90", config)
    arrays = {**random_inputs(problem, 0), **output_arrays(problem)}
    with pytest.raises(EmulationError, match=r"written by the generic proxy \(wave \d+ lane \d+ of workgroup \d+\) "
                                             rf"and read by the async proxy \({reader}.* with no fence.proxy.async"):
        emulate(dropping(attention.emit(p), "tirx.ptx.fence_proxy", 1), *(arrays[q.name] for q in p.params),
                target="sm90")

def test_a_ring_counter_the_clamp_keeps_in_bounds_is_still_reported():
    # operand_stage clamps the stage only where a wgmma operand's region starts at it: a wrong counter is not hidden.
    # The consumers' stage made to wrap one tile late (``advance``'s compares against stages - 1 moved to stages: their
    # third tile's stage is 2, clamped to 1 for K and V, but its barriers are the next stage's) reads a stage the
    # producer refills: the emulator reports the race
    import tvm_ffi
    from tvm_tirx.script import tirx as T
    from tvm_tirx.tirx import EQ

    from tvm_cdna4.emulator import EmulationError, emulate
    from tvm_cdna4.kernels.attention.problem import output_arrays, random_inputs

    problem = AttentionProblem(1, 1, 1, 128, 330, 64)
    p = attention.plan(problem, "sm90", C(64, 2))
    seen = []

    def late(eq):  # the producer's one advance first in program order, then the consumers' two loops'
        if not str(eq).startswith("ring[0] == "):
            return eq
        seen.append(eq.b.value)
        return eq if len(seen) <= 2 else EQ(eq.a, T.uint32(eq.b.value + 1))

    func = tvm_ffi.structural_map(attention.emit(p), (EQ, late), order="post")
    assert seen == [1] * 6 and func.script().count("ring_1[0] == T.uint32(2)") == 4
    arrays = {**random_inputs(problem, 0), **output_arrays(problem)}
    with pytest.raises(EmulationError, match="race on shared 'SMH'"):
        emulate(func, *(arrays[q.name] for q in p.params), target="sm90")


@pytest.mark.slow  # a benchmark script's shapes (suite time)
def test_the_benchmark_covers_the_issues_shapes():
    """benchmarks/attention_sm90.py: bf16, D 64 and 128, 2k-32k tokens a sequence, MHA and GQA, causal and not
    (40 shapes, each planned by the cost model), and a sweep of every schedule."""
    from benchmark_modules import benchmark_module

    bench = benchmark_module("attention_sm90")
    shapes = bench.problems()
    assert len(shapes) == 40 and {p.head_dim for p in shapes} == {64, 128} and {p.causal for p in shapes} == {False, True}
    assert {p.seq_q for p in shapes} == {2048, 4096, 8192, 16384, 32768} and all(p.batch * p.seq_q >= 16384 for p in shapes)
    assert {p.heads // p.kv_heads for p in shapes} == {1, 4} and {p.dtype for p in shapes} == {"bf16"}
    assert all(attention.plan(p, "sm90").config.pingpong for p in shapes)
    fp8 = bench.problems(fp8=True)  # --fp8: the D 128 shapes in e4m3
    assert len(fp8) == 20 and {(p.dtype, p.head_dim) for p in fp8} == {("fp8", 128)}
    assert all(attention.plan(p, "sm90").config.block_kv == 128 for p in fp8)
    assert {(c.overlap, c.pingpong, c.persistent) for c in bench.SWEEP} == {
        (False, False, False), (True, False, False), (True, True, False), (True, True, True)}
    # the kernel options on the D 128 default, and --configs options
    assert {(c.split_kv_barrier, c.epilogue) for c in bench.SWEEP if c.persistent and c.block_kv == 128} == {
        (False, "registers"), (True, "registers"), (False, "tma"), (True, "tma")}
    d128 = shapes[-1]
    default = attention.choose(d128, "sm90")
    every = bench.option_configs(d128, default)
    # item_overlap: test_sm90_attention_item_overlap.py; walk: test_sm90_attention_walk.py
    options = [c for c in every if not c.item_overlap and c.walk == "round_robin" and c.block_kv == default.block_kv
               and not c.exps_before_pv_wait]
    # the P V wait held behind the 8th / 16th exp (stop 52, attnlat2), grid and persistent
    assert sorted((c.persistent, c.exps_before_pv_wait) for c in every if c.exps_before_pv_wait) == [
        (False, 8), (False, 16), (True, 8), (True, 16)]
    # FlashAttention-3's 176-key tile (stop 52, fa3sass), grid and persistent, with and without split barriers
    assert {(c.persistent, c.split_kv_barrier) for c in every if c.block_kv == 176} == {
        (g, s) for g in (False, True) for s in (False, True)} and default.block_kv == 128
    assert [(c.persistent, c.epilogue, c.walk) for c in every if c.walk != "round_robin"] == [
        (True, "registers", "zigzag"), (True, "registers", "fold")]
    assert [(c.persistent, c.epilogue) for c in every if c.item_overlap] == [(False, "registers"), (True, "registers")]
    assert default.epilogue == "tma" and len(options) == 9 and {(c.persistent, c.split_kv_barrier, c.epilogue)
                                                                for c in options} == {
        (g, s, e) for g in (False, True) for s in (False, True) for e in ("registers", "tma")} - {(False, False, "tma")} | {
        (False, False, "tma_buffer"), (True, False, "tma_buffer")}
    # O's own buffer past D 128's 3-stage ring: 2 stages; --options names a subset (the grids without options too)
    assert {c.stages for c in options if c.epilogue == "tma_buffer"} == {2} and {c.stages for c in options} == {2, 3}
    assert [(c.persistent, c.epilogue) for c in bench.option_configs(d128, default, ["tma-buffer"])] == [
        (False, "registers"), (False, "tma_buffer"), (True, "registers"), (True, "tma_buffer")]
    assert len([c for c in bench.option_configs(fp8[0], attention.choose(fp8[0], "sm90"))
                if not (c.item_overlap or c.exps_before_pv_wait) and c.walk == "round_robin"]) == 3  # fp8: no TMA store


@pytest.mark.slow  # about 20 s: four TIRx builds and NVRTC
def test_the_largest_configs_do_not_spill_under_nvrtc(tmp_path, capsys):
    """TIRx compiles the CUDA C with NVRTC when the module is loaded (the torch op's path): the cost model's
    widest tiles (176 keys at D 128, 192 at D 64, ping-pong, persistent) fit the consumers' registers there, and
    fp8's V transpose the producer warpgroup's 40 (its loop not unrolled: unrolled, it spilled 160 bytes); ``--emit
    cuda`` prints that source."""
    import nvrtc_shim
    import paths

    from tvm_cdna4.runtime.cuda import ptxas_usage

    if nvrtc_shim.find_libnvrtc() is None or nvrtc_shim.find_cuda_root() is None:
        pytest.skip("needs NVRTC and the CUDA headers")
    sources = []
    for args in (["--head-dim", "128", "--heads", "16"], ["--head-dim", "64", "--heads", "32", "--causal"],
                 ["--head-dim", "128", "--heads", "16", "--causal", "--block-kv", "128"],
                 ["--head-dim", "128", "--heads", "16", "--causal", "--dtype", "fp8"]):
        assert main(["attention", "--target", "sm90", "--seq", "2048", "--batch", "8", *args, "--emit", "cuda"]) == 0
        path = tmp_path / f"{len(sources)}.cu"
        path.write_text(capsys.readouterr().out)
        sources.append(str(path))
    for log in nvrtc_shim.compile_logs(sources, "sm_90a", str(paths.ROOT)):
        usage = ptxas_usage(log)
        assert usage["registers"] > 0 and usage["spill_stores"] == 0 and usage["spill_loads"] == 0, log[-2000:]


def test_the_tma_epilogue_orders_fence_store_read_wait_and_q_release():
    """O's generic writes are fenced for the async proxy before the TMA store (the emulator checks it too:
    test_a_dropped_proxy_fence_is_reported), and Q's "empty" arrival comes only after the store has read the
    shared memory (``wait_group.read``); the CTA waits for the writes before it ends."""
    p = plan_sm90_attention(AttentionProblem(1, 2, 1, 70, 200, 64), C(64, 2, epilogue="tma"))
    lines = attention.emit(p).script().splitlines()

    first = _finder(lines)

    fence = first('T.ptx.fence("proxy", "async"')
    store = first("T.address_of(mapO)", fence)
    commit = first('"bulk", "commit_group"', store)
    read = first('"wait_group", "read"', commit)
    release = first(f"MB[{1 + 2 * p.config.stages}]", read)
    assert fence < store < commit < read < release
    assert first('"bulk", "wait_group", "", ""', release) > release


def _finder(lines):
    """``first(text, after=0)``: the index of the first line from ``after`` that holds ``text``."""
    return lambda text, after=0: next(i for i in range(after, len(lines)) if text in lines[i])


def _script_lines(problem, config):
    from tvm_cdna4.kernels.sm90.attention_emit import emit_sm90_attention

    return emit_sm90_attention(plan_sm90_attention(problem, config)).script().splitlines()


def test_the_tma_epilogues_producer_loads_the_next_items_first_ring_full_before_it_waits_for_q():
    # epilogue="tma" (Q's tile stages O: Q is released once the stores read it): the next item's first ring-full of
    # K / V (the stages' "empty" waits, a loop of 3) is issued before the wait on Q's "empty" barrier (MB[1 + 2
    # stages]), under the last item's P V and O store (FA3's producer order); one CTA an item with the register
    # epilogue keeps the one-loop order (nothing to wait for), so default configs' code is unchanged
    lines = [line.strip() for line in _script_lines(AttentionProblem(1, 2, 1, 130, 200, 64),
                                                    C(64, 3, persistent=True, ctas=3, epilogue="tma"))
             if "mbarrier_wait" in line or "for j" in line]
    assert "range(3)" in lines[0] and "MB[4 + s" in lines[1] and "MB[7]" in lines[2]
    one_cta_an_item = [line for line in _script_lines(AttentionProblem(1, 2, 1, 130, 200, 64), C(64, 3))
                       if "mbarrier_wait" in line]
    assert "MB[7]" in one_cta_an_item[0]


def test_the_option_rates_cover_every_head_dim():
    # each option's rates are keyed by the head dim (fitted apart): a head dim without its rates is a KeyError in
    # the estimate, so every HEAD_DIMS entry has one
    from tvm_cdna4.kernels.attention.problem import HEAD_DIMS
    from tvm_cdna4.kernels.sm90 import attention_cost as cost

    assert all(set(getattr(cost, name)) == set(HEAD_DIMS) for name in cost.OPTION_RATES)


@pytest.mark.parametrize("overlap", [False, True])
def test_a_persistent_consumer_releases_q_once_its_last_s_retired(overlap):
    """Q's "empty" arrival (MB[7]: 1 + 2 stages) comes right after the wait that retires the item's last S (in the
    overlapped loop ``wait_group 1``: that tile's P V may still run), before the item's last P V is issued and
    before O is stored; nothing arrives on it after the last P V. One CTA an item arrives after its GEMMs."""
    problem = AttentionProblem(1, 2, 1, 130, 200, 64)
    lines = _script_lines(problem, C(64, 3, overlap, overlap, overlap, persistent=True, ctas=3))
    releases = [i for i, line in enumerate(lines) if "MB[7]" in line and '"arrive"' in line]
    waits = [i for i, line in enumerate(lines) if '"wait_group", "sync"' in line]
    pv = [i for i, line in enumerate(lines) if '("b_major", "mn")' in line]
    # two: plain, in the loops over the unmasked and the masked tiles; overlap, after the first tile's S (dead here:
    # for items of one tile) and in the loop
    assert len(releases) == 2
    for r in releases:
        wait = max(w for w in waits if w < r)
        assert (lines[wait].count("T.int32(1)") if overlap and r == releases[-1] else lines[wait].count("T.int32(0)"))
        assert not any(wait < a < r for a in pv)  # nothing issued between the S's retirement and Q's release
        assert "== 3" in lines[r - 2] or "== 1" in lines[r - 2] or "T.bool(False)" in lines[r - 2]
    assert releases[-1] < pv[-1] and "O[" not in "".join(lines[releases[-1]:pv[-1]])
    one_cta_an_item = _script_lines(problem, C(64, 3, overlap, overlap, overlap))
    releases = [i for i, line in enumerate(one_cta_an_item) if "MB[7]" in line and '"arrive"' in line]
    assert len(releases) == 1 and releases[0] > max(i for i, line in enumerate(one_cta_an_item) if "b_major" in line)


def test_the_tiles_a_producer_loads_before_q():
    """``tiles_before_q``: Q released at the last S, the stages the last item freed before it (all but two) first;
    the TMA epilogue (Q stages O) a ring-full; one CTA an item and fp8 none (Q first)."""
    d64, fp8 = AttentionProblem(1, 2, 1, 130, 200, 64), AttentionProblem(1, 2, 1, 130, 200, 128, dtype="fp8")
    got = {(stages, persistent, epilogue): plan_sm90_attention(d64, C(64, stages, persistent=persistent,
                                                                      epilogue=epilogue)).tiles_before_q
           for stages in (2, 3, 4) for persistent in (False, True) for epilogue in ("registers", "tma", "tma_buffer")}
    assert got == {(s, g, e): (s if e == "tma" else s - 2 if g else 0) for s, g, e in got}
    assert plan_sm90_attention(fp8, C(128, 2, persistent=True)).tiles_before_q == 0
    lines = [line for line in _script_lines(d64, C(64, 3, persistent=True, ctas=3)) if "mbarrier_wait" in line
             or "for j" in line]
    assert "range(1)" in lines[0] and "MB[4 + s" in lines[1] and "MB[7]" in lines[2]  # one tile, then Q
    lines = [line for line in _script_lines(d64, C(64, 2, persistent=True, ctas=3)) if "mbarrier_wait" in line]
    assert "MB[5]" in lines[0]  # two stages: Q first


def test_the_buffered_epilogue_waits_for_the_last_store_only_before_writing_the_buffer():
    """epilogue="tma_buffer": the storing thread's ``wait_group.read`` (the last item's stores read the buffer) and
    the named barrier come before O's writes into the buffer; the writes are fenced for the async proxy before the
    stores, which are committed and not waited for in the item; the CTA waits for them before it ends. The buffer
    follows the ring: Q (8192 elements) and 3 stages of 2 x 4096."""
    p = plan_sm90_attention(AttentionProblem(1, 2, 1, 130, 200, 64), C(64, 3, persistent=True, ctas=3,
                                                                        epilogue="tma_buffer"))
    assert p.o_buffer == 8192 + 3 * 2 * 4096 and p.smem_bytes == 2 * (p.o_buffer + 8192)
    lines = _script_lines(p.problem, p.config)

    first = _finder(lines)

    read = first('"wait_group", "read"')
    barrier = first('"sync"', read)
    write = first("SW_1[", barrier)
    fence = first('T.ptx.fence("proxy", "async"', write)
    store = first("T.address_of(mapO)", fence)
    commit = first('"bulk", "commit_group"', store)
    assert read < barrier < write < fence < store < commit and f"SMH[{p.o_buffer} + " in lines[store]
    final = first('"bulk", "wait_group", "", ""', commit)
    assert not any('"wait_group"' in line or "MB[7]" in line for line in lines[commit + 1:final])


def test_the_persistent_item_rate_is_the_fit_of_its_timed_pairs():
    # the H100's persistent / one-CTA-an-item pairs with Q released at the last S (fit.PERSISTENT_RUNS): the rate in
    # attention_cost is the grid search's, it fits the pairs better than the sweep's 13,700 (timed before the early
    # release), and the first choice lands nearer the fastest config timed on those shapes
    from benchmark_modules import benchmark_module

    from tvm_cdna4.kernels.sm90 import attention_cost as cost

    fit = benchmark_module("attention_sm90_fit")
    import os

    data = fit.load([os.path.join(os.path.dirname(fit.__file__), r) for r in fit.PERSISTENT_RUNS])
    assert len(list(fit.persistent_pairs(data))) == 32
    best, rms_now, rms_best, loss_now, loss_best = fit.fit_persistent(data)
    assert best == cost.PERSISTENT_ITEM_CLOCKS < cost.ITEM_CLOCKS and rms_best < 0.04 and loss_best < 1.01
    cost_before = cost.PERSISTENT_ITEM_CLOCKS
    try:  # the sweep's rate, fitted before Q's early release: its first choices land further from the fastest
        cost.PERSISTENT_ITEM_CLOCKS = 13700
        assert fit.choice_loss(data) > 1.02
    finally:
        cost.PERSISTENT_ITEM_CLOCKS = cost_before


def test_the_row_max_tree_takes_every_chain():
    # attention_emit.tree_max: the chains' partial maxima combined pairwise, each one once (4: (p0 p1) (p2 p3), as
    # the goldens pin); max_chains: MAX_CHAINS, fewer where a row has fewer scores a thread (block_kv / 4)
    import re

    from tvm_tirx.ir import Var

    from tvm_cdna4.kernels.sm90 import attention_emit as emit

    for count in (1, 2, 3, 4, 5, 8):
        text = str(emit.tree_max([Var(f"p{q}", "float32") for q in range(count)], count))
        assert sorted(re.findall(r"\bp\d+\b", text)) == sorted(f"p{q}" for q in range(count))
    assert str(emit.tree_max([Var(f"p{q}", "float32") for q in range(4)], 4)).count("fmaxf") == 3
    assert [emit.max_chains(plan_sm90_attention(AttentionProblem(1, 2, 1, 70, 70, 64), C(k, 2)))
            for k in (16, 32, 128)] == [min(emit.MAX_CHAINS, 4), min(emit.MAX_CHAINS, 8), min(emit.MAX_CHAINS, 32)]


@pytest.mark.parametrize("chains, block_kv", [(3, 64), (8, 16)])
def test_the_emulated_attention_at_another_chain_count(monkeypatch, chains, block_kv):
    # MAX_CHAINS is a tuning constant, read at emit time (max_chains): 3 chains (an odd tree) over 64 keys, 8 capped
    # at 16 keys' 4 scores a row a thread, keep the values (the 4-leaf tree was hard-coded: 3 would read part[3]
    # past its chains, 8 drop chains 4-7 from the max)
    from tvm_cdna4.kernels.sm90 import attention_emit

    monkeypatch.setattr(attention_emit, "MAX_CHAINS", chains)
    _check(AttentionProblem(1, 2, 1, 70, 90, 64, causal=True), C(block_kv, 2, overlap=True, pingpong=True))
