"""Reference semantics: A@B+C per block through the owner maps, and the documented modifiers."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_cdna4.isa import CATALOG, MFMA_OPS, SCALE_FORMAT_CODES, formats, reference

DENSE = [op for op in MFMA_OPS if op.kind == "mfma"]
SCALED = [op for op in MFMA_OPS if op.kind == "mfma_scale"]


def _tiles(rng, op):
    if op.acc_format == "i32":
        a = rng.integers(-128, 128, (op.blocks, op.m, op.k)).astype(np.int8)
        b = rng.integers(-128, 128, (op.blocks, op.k, op.n)).astype(np.int8)
        c = rng.integers(-(2**20), 2**20, (op.blocks, op.m, op.n)).astype(np.int32)
    else:
        a = rng.normal(size=(op.blocks, op.m, op.k)).astype(formats.fmt(op.a_format).dtype)
        b = rng.normal(size=(op.blocks, op.k, op.n)).astype(formats.fmt(op.b_format).dtype)
        c = rng.normal(size=(op.blocks, op.m, op.n)).astype(formats.fmt(op.acc_format).dtype)
    return a, b, c


def _run(op, a, b, c, **mods):
    d = reference.mfma(op, reference.scatter_a(op, a), reference.scatter_b(op, b), reference.scatter_acc(op, c), **mods)
    return reference.gather_acc(op, d)


def _assert_close(op, got, want):
    if op.acc_format == "i32":
        np.testing.assert_array_equal(got, want.astype(np.int64).astype(np.int32))
    else:
        tol = 1e-12 if op.acc_format == "f64" else 2e-6
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * op.k)


def _f64(x):
    return np.asarray(x).astype(np.float64)


@pytest.mark.parametrize("op", DENSE, ids=lambda op: op.name)
def test_mfma_is_a_times_b_plus_c_per_block(op, rng):
    a, b, c = _tiles(rng, op)
    _assert_close(op, _run(op, a, b, c), _f64(a) @ _f64(b) + _f64(c))


def test_int8_accumulator_wraps_like_int32():
    op = CATALOG["mfma_i32_16x16x64_i8"]
    a = np.full((1, 16, 64), -128, np.int8)
    b = np.full((1, 64, 16), -128, np.int8)
    c = np.full((1, 16, 16), 2**31 - 1, np.int32)
    got = _run(op, a, b, c)
    assert got[0, 0, 0] == np.int32(np.int64(2**31 - 1 + 64 * 16384) - 2**32)


@pytest.mark.parametrize("name", ["mfma_f32_4x4x4f16", "mfma_f32_16x16x1f32", "mfma_i32_32x32x4i8", "mfma_f32_16x16x4bf16_1k"])
def test_cbsz_abid_broadcast_a(name, rng):
    op = CATALOG[name]
    a, b, c = _tiles(rng, op)
    for cbsz in range(op.modifier("cbsz").hi + 1):
        group = 2**cbsz
        for abid in range(group):
            want = np.stack([_f64(a[(blk // group) * group + abid]) @ _f64(b[blk]) + _f64(c[blk]) for blk in range(op.blocks)])
            _assert_close(op, _run(op, a, b, c, cbsz=cbsz, abid=abid), want)


@pytest.mark.parametrize("name", ["mfma_f32_32x32x8f16", "mfma_f32_16x16x32_bf16", "mfma_f32_4x4x1f32", "mfma_i32_16x16x64_i8"])
@pytest.mark.parametrize("blgp", range(8))
def test_blgp_permutes_b_lanes(name, blgp, rng):
    op = CATALOG[name]
    a, b, c = _tiles(rng, op)
    lanes_b = reference.scatter_b(op, b)
    # documented patterns, as the lane each lane reads B from
    src = {0: lambda l: l, 1: lambda l: l % 32, 2: lambda l: l % 32 + 32, 3: lambda l: (l + 16) % 64}.get(
        blgp, lambda l: l % 16 + 16 * (blgp - 4)
    )(np.arange(64))
    b_eff = reference.gather_b(op, lanes_b[src])
    want = np.stack([_f64(a[k]) @ _f64(b_eff[k]) + _f64(c[k]) for k in range(op.blocks)])
    _assert_close(op, _run(op, a, b, c, blgp=blgp), want)


@pytest.mark.parametrize("name", ["mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64"])
@pytest.mark.parametrize("neg", range(8))
def test_fp64_blgp_negates(name, neg, rng):
    op = CATALOG[name]
    a, b, c = _tiles(rng, op)
    sa, sb, sc = (-1.0 if neg & 1 else 1.0), (-1.0 if neg & 2 else 1.0), (-1.0 if neg & 4 else 1.0)
    _assert_close(op, _run(op, a, b, c, blgp=neg), (sa * a) @ (sb * b) + sc * c)


def test_operand_shape_errors_name_the_operand():
    op = CATALOG["mfma_f32_16x16x32_f16"]
    with pytest.raises(ValueError, match=r"operand B must have shape \(64, 8\); found \(64, 4\)"):
        reference.mfma(op, np.zeros((64, 8)), np.zeros((64, 4)), np.zeros((64, 4)))


# ---- scaled MFMA -------------------------------------------------------------------------

def _mx(rng, fmt, shape):
    return rng.normal(scale=2.0, size=shape).astype(formats.fmt(fmt).dtype)


@pytest.mark.parametrize("op", SCALED, ids=lambda op: op.name)
@pytest.mark.parametrize("cbsz", range(5))
@pytest.mark.parametrize("blgp", range(5))
def test_mfma_scale_all_format_pairs(op, cbsz, blgp, rng):
    fa, fb = SCALE_FORMAT_CODES[cbsz], SCALE_FORMAT_CODES[blgp]
    kb = op.k // 32
    a, b = _mx(rng, fa, (1, op.m, op.k)), _mx(rng, fb, (1, op.k, op.n))
    c = rng.normal(size=(1, op.m, op.n)).astype(np.float32)
    ea = rng.integers(120, 135, (op.m, kb))  # E8M0 exponent per (row, 32-K block)
    eb = rng.integers(120, 135, (kb, op.n))
    op_sel_a, op_sel_b = int(rng.integers(4)), int(rng.integers(4))
    # each lane's scale register: its (row, K block) exponent at byte op_sel, noise elsewhere
    lane = np.arange(64)
    row, kblk = lane % op.m, lane // op.m
    noise = rng.integers(0, 2**32, 64, dtype=np.uint64)
    def reg(exps, sel):
        mask = np.uint64(0xFF << (8 * sel))
        return ((noise & ~mask) | (exps.astype(np.uint64) << np.uint64(8 * sel))).astype(np.uint32)
    sa, sb = reg(ea[row, kblk], op_sel_a), reg(eb[kblk, row], op_sel_b)
    d = reference.mfma_scale(op, reference.scatter_a(op, a), reference.scatter_b(op, b), reference.scatter_acc(op, c),
                             cbsz=cbsz, blgp=blgp, scale_a=sa, scale_b=sb, op_sel_a=op_sel_a, op_sel_b=op_sel_b)
    a_scaled = _f64(a[0]) * np.exp2(np.repeat(ea, 32, axis=1) - 127.0)
    b_scaled = _f64(b[0]) * np.exp2(np.repeat(eb, 32, axis=0) - 127.0)
    np.testing.assert_allclose(reference.gather_acc(op, d)[0], a_scaled @ b_scaled + c[0], rtol=2e-6, atol=1e-5)


def test_mfma_scale_e8m0_nan_propagates():
    op = CATALOG["mfma_scale_f32_16x16x128_f8f6f4"]
    a = np.ones((64, 32), ml_dtypes.float8_e4m3fn)
    d = reference.mfma_scale(op, a, a, np.zeros((64, 4), np.float32), cbsz=0, blgp=0,
                             scale_a=np.full(64, 0xFF, np.uint32), scale_b=np.full(64, 127, np.uint32))
    assert np.isnan(d).all()


def test_words_roundtrip_through_mfma(rng):
    op = CATALOG["mfma_f32_32x32x16_bf16"]
    a, b, c = _tiles(rng, op)
    sa, sb, sc = reference.scatter_a(op, a), reference.scatter_b(op, b), reference.scatter_acc(op, c)
    words = reference.mfma_words(op, formats.to_words("bf16", sa), formats.to_words("bf16", sb), formats.to_words("f32", sc))
    assert words.shape == (64, 16) and words.dtype == np.uint32
    np.testing.assert_array_equal(formats.from_words("f32", words, 16), reference.mfma(op, sa, sb, sc))


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["f16", "bf16", "fp8", "bf8", "fp6", "bf6", "fp4", "i8", "f32", "f64"]),
       n=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_format_words_roundtrip(name, n, seed):
    f = formats.fmt(name)
    codes = np.random.default_rng(seed).integers(0, 2 ** min(f.bits, 32), size=(3, n), dtype=np.uint64)
    values = formats._from_codes(f, codes)
    back = formats.from_words(name, formats.to_words(name, values), n)
    np.testing.assert_array_equal(formats._codes(f, back), codes)


def test_fp6_packing_is_little_endian_bits():
    # element e occupies bits [6e, 6e+6): 0b000001 at e=5 -> bit 30 of word 0; e=6 -> bit 36 = word 1 bit 4
    vals = np.zeros((1, 32), ml_dtypes.float6_e2m3fn)
    one_code = formats._from_codes(formats.fmt("fp6"), np.array([1], np.uint64))
    vals[0, 5] = one_code[0]
    vals[0, 6] = one_code[0]
    words = formats.to_words("fp6", vals)
    assert words.shape == (1, 6)
    assert int(words[0, 0]) == 1 << 30 and int(words[0, 1]) == 1 << 4
