"""The attention plan (issue 26 stage 2): the target-neutral problem, its float64 reference, the
gfx950 plan's fields and the V row permutation that makes the transposing read feed the score
registers' key order."""

import math

import numpy as np
import pytest

from tvm_cdna4.isa import CATALOG, lanes
from tvm_cdna4.kernels.gfx950.attention_plan import (AttentionConfig, AttentionProblem, dequantize, error_bound,
                                                kv_full_tiles_for, kv_tiles_for, plan_gfx950_attention, random_inputs,
                                                reference, v_lds_key, v_lds_row)
from tvm_cdna4.kernels.gemm.epilogue import LOG2E


def test_the_plan_of_an_odd_gqa_problem():
    p = plan_gfx950_attention(AttentionProblem(2, 8, 2, 130, 257, 128, causal=True))
    assert (p.mfma, p.tr, p.storage, p.waves, p.threads) == ("mfma_f32_32x32x16_bf16", "ds_read_tr16_b64_v4bf16",
                                                             "int16", 4, 256)
    assert (p.grid.tiles, p.grid.batch, p.grid.groups) == ((2, 1), 16, 32)
    assert (p.kv_tiles, p.kv_tail, p.q_tail, p.lds_row, p.chunks) == (5, 1, 2, 136, 4)
    assert (p.d_tiles, p.k_steps, p.kv_blocks) == (4, 8, 2)
    assert [(x.name, x.shape, x.dtype) for x in p.params] == [
        ("Q", (2, 8, 130, 128), "int16"), ("K", (2, 2, 257, 128), "int16"), ("V", (2, 2, 257, 128), "int16"),
        ("O", (2, 8, 130, 128), "int16"), ("LSE", (2, 8, 130), "float32")]
    assert p.epilogue.ops == ("bf16_rne",) and p.p_convert.ops == ("bf16_rna",)  # O to even, P to nearest (one add)
    assert p.problem.kv_head(7) == 1 and p.problem.kv_head(3) == 0 and math.isclose(p.problem.scale_log2, LOG2E / math.sqrt(128))
    # causal: block 0 (rows 0-127) runs 2 tiles of 64 keys, block 1 (rows 128, 129) 3; without skipping, all 5
    assert [kv_tiles_for(p.problem, 128, 64, q0) for q0 in (0, 128)] == [2, 3]
    assert kv_tiles_for(p.problem, 128, 64, 0, skip_masked=False) == 5
    # unmasked: none of block 0 (its first row sees key 0 only), two of block 1 (keys 0-127 <= row 128)
    assert [kv_full_tiles_for(p.problem, 128, 64, q0) for q0 in (0, 128)] == [0, 2] and p.masked_tiles
    assert kv_full_tiles_for(AttentionProblem(1, 1, 1, 8, 257, 64), 64, 64, 0) == 4  # non-causal: the tail is masked
    # direct-to-LDS: K in 2 stages, V in 3 (deferred, landing); a 64-row tile of 17 x 16-byte chunks with its
    # 16-byte pad per row is 17 loads of 1 KiB exactly; without the options one stage each
    assert (p.k_stages, p.v_stages, p.dma.loads, p.dma.dma_bytes, p.stage_rows) == (2, 3, 17, 17408, 64)
    q = plan_gfx950_attention(p.problem, AttentionConfig(lds_dma=False, defer_pv=False))
    assert (q.k_stages, q.v_stages, q.stage_rows) == (1, 1, 64)
    r = plan_gfx950_attention(AttentionProblem(1, 1, 1, 8, 8, 64), AttentionConfig(64, 32))  # 4.5 loads: 36 rows
    assert (r.dma.loads, r.stage_rows) == (5, 36)
    # the masked loop: block 1 of p runs tiles 2 (diagonal) to 4 (tail) masked; 50 causal queries in blocks of
    # 32 over 64-key tiles see one tile each, run first (deferred P V): no block enters the loop
    assert p.masked_loop and q.masked_loop and not r.masked_loop  # r: one tile, the tail, run first
    one = plan_gfx950_attention(AttentionProblem(1, 1, 1, 50, 150, 64, causal=True), AttentionConfig(32, 64))
    assert one.masked_tiles and not one.masked_loop
    assert plan_gfx950_attention(one.problem, AttentionConfig(32, 64, defer_pv=False)).masked_loop  # tile 0 is in it


def test_problem_and_config_errors_name_the_field():
    for kwargs, match in ((dict(kv_heads=3), "kv_heads must divide heads"), (dict(head_dim=96), "head_dim"),
                          (dict(dtype="bf8"), "dtype: expected one of"), (dict(seq_q=0), "seq_q"),
                          (dict(scale=-1.0), "scale"), (dict(scale=True), "scale: expected a positive finite number")):
        with pytest.raises(ValueError, match=match):
            AttentionProblem(**{**dict(batch=1, heads=4, kv_heads=2, seq_q=8, seq_kv=8, head_dim=64), **kwargs})
    # LDS: K 2 + V 3 stages of 128 rows x (128 + 8) bf16 = 174080 B, over gfx950's 160 KiB (it built, then
    # could not launch); the staged loads (one stage each) fit
    with pytest.raises(ValueError, match=r"attention: 174080 bytes of LDS .* exceed gfx950's 163840"):
        plan_gfx950_attention(AttentionProblem(1, 1, 1, 256, 256, 128), AttentionConfig(128, 128))
    fits = plan_gfx950_attention(AttentionProblem(1, 1, 1, 256, 256, 128), AttentionConfig(128, 128, lds_dma=False))
    assert fits.lds_bytes == (1 + 2) * 128 * 136 * 2
    with pytest.raises(ValueError, match="32-bit integers"):  # not TIRx's int32 literal check deep in the build
        plan_gfx950_attention(AttentionProblem(32, 64, 64, 8192, 8192, 128))
    assert plan_gfx950_attention(AttentionProblem(16, 64, 64, 8192, 8192, 128)).kv_tiles == 128  # 2^30: builds
    for kwargs, match in ((dict(block_q=48), "block_q"), (dict(block_kv=16), "block_kv"), (dict(lds_pad=8), "lds_pad")):
        with pytest.raises(ValueError, match=match):
            AttentionConfig(**kwargs)


def test_reference_is_softmax_attention_with_causal_gqa_and_lse():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((1, 4, 5, 64)), rng.standard_normal((1, 2, 7, 64)), rng.standard_normal((1, 2, 7, 64))
    o, lse = reference(q, k, v, causal=True, scale=0.3)
    for h in range(4):
        for i in range(5):
            s = 0.3 * k[0, h // 2, : i + 1] @ q[0, h, i]
            np.testing.assert_allclose(lse[0, h, i], np.log(np.exp(s).sum()))
            np.testing.assert_allclose(o[0, h, i], np.exp(s - lse[0, h, i]) @ v[0, h // 2, : i + 1])
    problem = AttentionProblem(1, 4, 2, 5, 7, 64, causal=True)
    assert problem.visible_pairs() == 4 * (1 + 2 + 3 + 4 + 5) and problem.flops() == 4 * 64 * 60
    assert AttentionProblem(1, 1, 1, 9, 4, 64, causal=True).visible_pairs() == 10 + 5 * 4


def test_the_v_row_permutation_gives_ds_read_tr_the_keys_of_the_score_registers():
    op = CATALOG["mfma_f32_32x32x16_bf16"]
    assert sorted(v_lds_row(k) for k in range(64)) == list(range(64))
    assert all(v_lds_row(v_lds_row(k)) == k for k in range(64))
    for lane in range(64):
        for step in range(2):  # MFMA K step of a 32-key block; B element e = score register 8 step + e
            for e in range(op.b_elems):
                natural = 16 * step + lanes.b_owner(op, lane, e).k  # the LDS row the operand form reads
                assert v_lds_row(natural) == lanes.acc_owner(op, lane, 8 * step + e).row


def test_the_fp8_plan_scaled_mfma_tr8_bf16_output_and_scales():
    p = plan_gfx950_attention(AttentionProblem(1, 4, 2, 130, 257, 128, causal=True, dtype="fp8"))
    assert (p.mfma, p.tr, p.storage, p.scaled, p.p_shift) == ("mfma_scale_f32_32x32x64_f8f6f4", "ds_read_tr8_b64_v2i32",
                                                             "uint8", True, 8)
    assert (p.k_steps, p.pv_steps, p.kv_blocks, p.d_tiles, p.lds_row, p.chunks) == (2, 1, 2, 4, 144, 2)
    assert [(x.name, x.dtype) for x in p.params] == [("Q", "uint8"), ("K", "uint8"), ("V", "uint8"), ("O", "int16"),
                                                     ("LSE", "float32"), ("SCALES", "float32")]
    assert p.epilogue.ops == ("bf16_rne",) and p.problem.out_dtype == "bf16"
    assert (p.p_convert, p.p_group, p.esize) == (None, 4, 1)  # P packed by v_cvt_pk_fp8_f32, four per register
    assert (p.dma.cols, p.dma.loads, p.stage_rows) == (8, 9, 64)  # 128-byte rows + 16 pad: 9 KiB in 1 KiB loads
    assert plan_gfx950_attention(AttentionProblem(1, 1, 1, 8, 8, 64)).p_convert.ops == ("bf16_rna",)
    with pytest.raises(ValueError, match="a fp8 P V step takes 64 keys; expected a multiple of 64, found 96"):
        plan_gfx950_attention(p.problem, AttentionConfig(128, 96))


def test_the_8_bit_v_row_order_gives_ds_read_tr8_the_keys_of_the_score_registers():
    """The f8f6f4 MFMA's 64-key step: B element e of lane half h is K position 32 h + e, which the
    P operand fills from score register e of the step's two 32-key blocks; the operand-form tr8 read
    of V^T (A, the same K order) must find that key's V row at the natural row."""
    op = CATALOG["mfma_scale_f32_32x32x64_f8f6f4"]
    assert sorted(v_lds_row(k, 8) for k in range(64)) == list(range(64))
    assert any(v_lds_row(v_lds_row(k, 8), 8) != k for k in range(64))  # not an involution: the direction matters
    assert all(v_lds_key(v_lds_row(k, b), b) == k for b in (8, 16) for k in range(128))  # the DMA's inverse
    for lane in range(64):
        for e in range(op.b_elems):
            natural = lanes.b_owner(op, lane, e).k
            assert lanes.a_owner(op, lane, e).k == natural
            key = 32 * (e // op.acc_elems) + lanes.acc_owner(op, lane, e % op.acc_elems).row
            assert v_lds_row(key, 8) == natural


def test_fp8_inputs_dequantize_exactly_and_the_bound_charges_p_rounding():
    problem = AttentionProblem(1, 2, 1, 5, 9, 64, causal=True, dtype="fp8")
    arrays = random_inputs(problem, seed=2)
    assert [a.dtype.name for a in arrays.values()] == ["float8_e4m3fn"] * 3 + ["float32"]
    q, k, v = dequantize(problem, arrays)
    for x, name, s in zip((q, k, v), "QKV", arrays["SCALES"]):
        assert np.abs(arrays[name].astype(np.float64)).max() == 448  # the per-tensor scale spans e4m3's range
        np.testing.assert_array_equal(x / float(s), arrays[name].astype(np.float64))  # exact
    o_fp8, lse_fp8 = error_bound(q, k, v, True, None, "fp8")
    o_bf16, lse_bf16 = error_bound(q, k, v, True, None, "bf16")
    np.testing.assert_array_equal(lse_fp8, lse_bf16)
    o, _ = reference(q, k, v, True)
    terms, _ = reference(q, k, np.abs(v), True)
    sum_v = np.stack([[np.abs(v[0, 0, : i + 1]).sum(0) for i in range(5)]] * 2)[None]
    np.testing.assert_allclose(o_fp8, 2.0**-8 * np.abs(o) + (2.0**-4 + 2.0**-16) * terms + 2.0**-18 * sum_v, rtol=1e-12)
