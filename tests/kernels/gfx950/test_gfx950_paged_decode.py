"""The gfx950 paged decode attention (issue 37): the plan, the V row order against the MFMA's lane
maps, the kernel in the CPU wavefront emulator against the float64 reference (fp8 KV, 4 queries, odd
contexts; lying device data inside the buffers), the split cost model and the static estimate."""

import numpy as np
import pytest

from tvm_cdna4.isa import CATALOG, lanes
from tvm_cdna4.kernels.attention import PAGED_TARGETS, paged_verb, validate_paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem, compare, random_inputs
from tvm_cdna4.kernels.gfx950.paged_decode_cost import choose_splits, paged_estimate
from tvm_cdna4.kernels.gfx950.paged_decode_plan import PagedDecodeConfig, head_dim_of, plan_gfx950_paged_decode, v_lds_row


def _problem(**kw):
    base = dict(batch=3, heads=4, kv_heads=1, head_dim=64, queries=4, page_size=32, max_pages=10, num_pages=40,
                kv_dtype="fp8")
    return PagedDecodeProblem(**{**base, **kw})


def test_the_plan_of_gqa_32_8_and_the_row_tiles():
    p = plan_gfx950_paged_decode(PagedDecodeProblem(8, 32, 8, 128, 1, 16, 256, 4096))
    assert (p.mfma, p.tr, p.storage, p.kv_storage) == ("mfma_f32_16x16x32_bf16", "ds_read_tr16_b64_v4bf16", "int16",
                                                       "int16")
    assert (p.rows, p.row_tiles, p.row_blocks, p.k_steps, p.pv_steps, p.kv_blocks, p.d_tiles) == (4, 1, 1, 4, 1, 2, 8)
    assert (p.tile_pages, p.v_chunks, p.lds_row, p.tile_bytes()) == (2, 8, 136, 16384)
    assert p.splits == choose_splits(p.problem, 32, 1) and p.groups == 8 * 8 * p.splits
    assert [q.name for q in p.params][-3:] == ["WORK_O", "WORK_LSE", "TICKETS"]
    # 64/8 x 8 queries: 64 rows, four 16-row tiles; 64/1 x 8: 512 rows in 8 row blocks of 64
    assert plan_gfx950_paged_decode(PagedDecodeProblem(1, 64, 8, 128, 8, 16, 4, 8)).row_tiles == 4
    assert plan_gfx950_paged_decode(PagedDecodeProblem(1, 64, 1, 128, 8, 16, 4, 8)).row_blocks == 8
    with pytest.raises(ValueError, match="expected q_dtype bf16 with kv_dtype fp8, found f16"):
        plan_gfx950_paged_decode(_problem(q_dtype="f16"))
    with pytest.raises(ValueError, match="expected kv_dtype bf16 or fp8, found f16"):
        plan_gfx950_paged_decode(_problem(kv_dtype="f16"))
    with pytest.raises(ValueError, match="block_kv: one of"):
        PagedDecodeConfig(block_kv=48)
    assert "gfx950" in PAGED_TARGETS


def test_the_v_row_order_gives_ds_read_tr16_the_keys_of_the_score_registers():
    """B element e of lane l (K position b_owner.k of a 32-key step) is P of score register e % 4 of
    16-key block e // 4; the operand-form tr16 read of natural LDS row k must find that key."""
    op = CATALOG["mfma_f32_16x16x32_bf16"]
    assert sorted(v_lds_row(k) for k in range(64)) == list(range(64))
    for lane in range(64):
        for e in range(op.b_elems):
            key = 16 * (e // 4) + lanes.acc_owner(op, lane, e % 4).row
            assert lanes.acc_owner(op, lane, e % 4).col == lanes.b_owner(op, lane, e).col  # the lane's row
            assert v_lds_row(key) == lanes.b_owner(op, lane, e).k
    # Q and K: lane group g of steps 2i, 2i + 1 covers 16 contiguous head-dim elements
    assert [head_dim_of(kk, 1, e) for kk in (2, 3) for e in (0, 7)] == [80, 87, 88, 95]


def test_fp8_kv_four_queries_odd_contexts_in_the_emulator():
    v = validate_paged(_problem(), "gfx950", contexts=[1, 77, 300], config=PagedDecodeConfig(splits=3))
    assert v.where == "the CPU wavefront emulator"
    assert v.o_ratio <= 1 and v.lse_ratio <= 1


def test_lying_device_data_stays_inside_the_buffers_and_is_clamped():
    """A negative length, a length past the capacity, page indices below 0 and past the cache, with
    16-key pages (two per 32-key tile): the emulator's out-of-bounds checks pass and the result is the
    reference's (the problem's clamps)."""
    problem = _problem(kv_dtype="bf16", batch=4, heads=8, kv_heads=2, queries=2, page_size=16, max_pages=5,
                       num_pages=9)
    arrays = random_inputs(problem, 3, [40, -7, 1000, 50])
    arrays["BLOCK_TABLE"][0, 1] = -5
    arrays["BLOCK_TABLE"][2, 3] = 9
    arrays["BLOCK_TABLE"][3, :] = 2**31 - 1
    p = paged_verb("gfx950", "plan")(problem, PagedDecodeConfig(splits=2))
    (o, lse), _ = paged_verb("gfx950", "execute")(p, arrays)
    o_ratio, lse_ratio = compare(problem, arrays, o, lse)
    assert o_ratio <= 1 and lse_ratio <= 1
    assert np.all(np.asarray(o[1], np.float64) == 0) and np.all(lse[1] == -np.inf)  # L < 0: empty rows
    assert np.all(lse[3] == -np.inf)  # every page absent


def test_the_split_count_and_the_estimate_at_batch_8_context_4k():
    problem = PagedDecodeProblem(8, 32, 8, 128, 1, 16, 256, 4096)
    p = plan_gfx950_paged_decode(problem, context=4096)
    est = paged_estimate(p, [4096] * 8)
    assert p.splits > 1 and est.hbm_fraction >= 0.85
    one = paged_estimate(plan_gfx950_paged_decode(problem, PagedDecodeConfig(splits=1)), [4096] * 8)
    assert one.hbm_fraction < est.hbm_fraction  # 64 waves cannot draw the HBM rate
    assert choose_splits(problem, 32, 1, context=64) == 1  # 2 tiles: no split


def test_the_cli_emits_the_gfx950_config_and_refuses_bench(capsys):
    import json

    from tvm_cdna4.cli import main

    base = ["attention", "--target", "gfx950", "--kv-cache", "paged", "--context", "4096,4096,4096,4096,4096,4096,4096,"
            "4096", "--seq", "1", "--heads", "32", "--kv-heads", "8"]
    assert main(base + ["--emit", "config"]) == 0
    config = json.loads(capsys.readouterr().out)
    assert (config["target"], config["split_kv"], config["mfma"]) == ("gfx950", 16, "mfma_f32_16x16x32_bf16")
    assert main(base + ["--bench"]) == 2
    assert "--bench needs a gfx950 GPU" in capsys.readouterr().err


def test_the_loop_scans_take_the_first_or_the_last_branch_back():
    """report.main_loop ends a loop at its first branch back, whole_loop at its last (the blocks laid out
    after it, a conditional part of the body); the span with the most MFMAs wins; one reaching s_endpgm is
    not a loop."""
    from tvm_cdna4.report import main_loop, whole_loop

    asm = "\n".join([
        ".LBB0_1:", "\tv_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]", "\ts_cbranch_scc1 .LBB0_1",
        "\tbuffer_load_dwordx4 v[12:15], v16, s[0:3], 0 offen", "\ts_branch .LBB0_1",
        ".LBB0_2:", "\tv_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]",
        "\tv_mfma_f32_16x16x32_bf16 v[0:3], v[4:7], v[8:11], v[0:3]", "\ts_endpgm", "\ts_branch .LBB0_2"])
    assert [ln.split()[0] for ln in main_loop(asm)] == ["v_mfma_f32_16x16x32_bf16", "s_cbranch_scc1"]
    assert [ln.split()[0] for ln in whole_loop(asm)] == ["v_mfma_f32_16x16x32_bf16", "s_cbranch_scc1",
                                                         "buffer_load_dwordx4", "s_branch"]
