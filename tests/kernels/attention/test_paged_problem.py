"""The paged decode attention problem (``kernels.attention.paged``): its validators, its reference
against the dense attention reference, the documented clamps of lying device data, its bound."""

import attrs
import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels.attention import paged
from tvm_cdna4.kernels.attention.paged import PagedDecodeProblem
from tvm_cdna4.kernels.attention.problem import reference as dense_reference

SMALL = PagedDecodeProblem(batch=3, heads=4, kv_heads=2, head_dim=64, queries=2, page_size=16, max_pages=5,
                           num_pages=20)


@pytest.mark.parametrize("field, value, match", [
    ("head_dim", 96, r"head_dim: one of \(64, 128\)"), ("queries", 9, "queries.*expected 1..8, found 9"),
    ("page_size", 48, r"page_size: one of \(16, 32, 64, 128\)"), ("kv_heads", 3, "kv_heads divides heads"),
    ("kv_dtype", "fp4", "kv_dtype: one of"), ("q_dtype", "fp8", r"q_dtype: one of \('bf16', 'f16'\)"),
    ("scale", -1.0, "scale: the softmax scale"), ("batch", 0, "batch: a positive int")])
def test_each_field_is_refused_by_name(field, value, match):
    with pytest.raises(ContractError, match=match) as info:
        PagedDecodeProblem(**{**attrs.asdict(SMALL), field: value})
    assert info.value.operand == field


def test_the_shapes_and_the_cache_index_limit():
    assert SMALL.shapes()["K_CACHE"] == (20, 16, 2, 64) and SMALL.shapes()["O"] == (3, 2, 4, 64)
    assert "K_SCALE" not in SMALL.shapes()
    fp8 = PagedDecodeProblem(2, 8, 2, 128, 1, 64, 4, 8, kv_dtype="fp8")
    assert fp8.shapes()["V_SCALE"] == (2,) and fp8.capacity == 256
    with pytest.raises(ContractError, match="32-bit integers"):
        PagedDecodeProblem(1, 8, 8, 128, 1, 128, 1, 2**14)


def _dense(problem, arrays, b):
    """Sequence b's keys gathered by hand, through the dense reference with its causal diagonal."""
    q, k, v = paged.dequantize(problem, arrays)
    L = int(arrays["CONTEXT_LENS"][b])
    pages = arrays["BLOCK_TABLE"][b]
    kk = np.stack([k[pages[j // problem.page_size], j % problem.page_size] for j in range(L)])  # [L, Hkv, D]
    vv = np.stack([v[pages[j // problem.page_size], j % problem.page_size] for j in range(L)])
    qq = q[b].transpose(1, 0, 2)[None]  # [1, H, q, D]
    # query i sees j <= L - q + i: the dense causal mask of q rows aligned to the bottom right
    pad = L - problem.queries
    qpad = np.concatenate([np.zeros((1, problem.heads, pad, problem.head_dim)), qq], axis=2)
    o, lse = dense_reference(qpad, kk.transpose(1, 0, 2)[None], vv.transpose(1, 0, 2)[None], causal=True)
    return o[0, :, pad:].transpose(1, 0, 2), lse[0, :, pad:].T


@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_the_reference_is_dense_attention_through_the_table(kv_dtype):
    problem = PagedDecodeProblem(3, 4, 2, 64, 2, 16, 5, 20, kv_dtype=kv_dtype)
    arrays = paged.random_inputs(problem, seed=3, contexts=[2, 77, 33])
    o, lse = paged.reference(problem, arrays)
    assert o.shape == (3, 2, 4, 64) and lse.shape == (3, 2, 4)
    for b in range(3):
        want_o, want_lse = _dense(problem, arrays, b)
        np.testing.assert_allclose(o[b], want_o, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(lse[b], want_lse, rtol=1e-12)
    assert len({tuple(row[:n]) for row, n in zip(arrays["BLOCK_TABLE"], (1, 5, 3))}) == 3  # distinct pages


def test_lying_data_follows_the_documented_clamps():
    arrays = paged.random_inputs(SMALL, seed=1, contexts=[40, 40, 40])
    o, lse = paged.reference(SMALL, arrays)
    lying = {**arrays, "CONTEXT_LENS": np.array([-5, 10_000, 40], np.int32)}
    lying["BLOCK_TABLE"] = arrays["BLOCK_TABLE"].copy()
    lying["BLOCK_TABLE"][2, 1] = 20  # page 1 of sequence 2 (keys 16..31) outside the cache
    lo, llse = paged.reference(SMALL, lying)
    assert np.all(lo[0] == 0) and np.all(llse[0] == -np.inf)  # negative length: every row empty
    capped = {**arrays, "CONTEXT_LENS": np.array([40, SMALL.capacity, 40], np.int32)}
    np.testing.assert_array_equal(lo[1], paged.reference(SMALL, capped)[0][1])  # clamped to the capacity
    # the missing page's keys are absent: softmax over keys 0..15 and 32..(38 + i) only
    q, k, v = paged.dequantize(SMALL, arrays)
    pages = arrays["BLOCK_TABLE"][2]
    for i in range(2):
        keys = [j for j in range(39 + i) if not 16 <= j < 32]
        kk = np.stack([k[pages[j // 16], j % 16, 1] for j in keys])  # head 3 reads kv head 1
        vv = np.stack([v[pages[j // 16], j % 16, 1] for j in keys])
        s = kk @ q[2, i, 3] * SMALL.softmax_scale
        w = np.exp(s - s.max())
        np.testing.assert_allclose(lo[2, i, 3], w @ vv / w.sum(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(llse[2, i, 3], s.max() + np.log(w.sum()), rtol=1e-12)
    assert not np.allclose(lo[2], o[2])
    assert paged.clamped_contexts(SMALL, [-5, 10_000, 7]) == [0, 80, 7]


def test_a_row_on_missing_pages_only_is_empty_and_compare_wants_it_exact():
    problem = PagedDecodeProblem(1, 2, 1, 64, 4, 16, 2, 4)
    arrays = paged.random_inputs(problem, seed=2, contexts=[18])
    arrays["BLOCK_TABLE"][0, 0] = -1  # keys 0..15 absent: queries 0, 1 (j <= 14, 15) are empty
    o, lse = paged.reference(problem, arrays)
    assert np.all(o[0, :2] == 0) and np.all(lse[0, :2] == -np.inf) and np.all(np.isfinite(lse[0, 2:]))
    assert paged.compare(problem, arrays, o, lse) == (0.0, 0.0)
    bad = lse.copy()
    bad[0, 1] = 0.0
    assert paged.compare(problem, arrays, o, bad)[1] == np.inf
    noisy = o * (1 + 2.0**-12)
    assert 0 < paged.compare(problem, arrays, noisy, lse)[0] < 1


def test_the_bound_charges_fp8_p_when_asked():
    arrays = paged.random_inputs(SMALL, seed=4, contexts=[5, 50, 80])
    default, _ = paged.error_bound(SMALL, arrays)
    fp8, _ = paged.error_bound(SMALL, arrays, p_dtype="fp8")
    assert np.all(fp8 > default)
    assert SMALL.kv_bytes([5, 50, 80]) == 2 * (1 + 4 + 5) * 16 * 2 * 64 * 2
