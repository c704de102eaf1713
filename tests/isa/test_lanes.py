"""Lane maps: bijections, inverses, and the seed's layout tables transcribed literally."""

import itertools

import numpy as np
import pytest

from tvm_cdna4.isa import CATALOG, MFMA_OPS, lanes

L = np.arange(64)


def _grid(cols):
    return np.meshgrid(L, np.arange(cols), indexing="ij")


@pytest.mark.parametrize("op", MFMA_OPS, ids=lambda op: op.name)
def test_owner_maps_are_bijections_with_inverses(op):
    for cols, owner, inverse, extent in (
        (op.a_elems, lanes.a_owner, lanes.a_lane, (op.blocks, op.m, op.k)),
        (op.b_elems, lanes.b_owner, lanes.b_lane, (op.blocks, op.n, op.k)),
        (op.acc_elems, lanes.acc_owner, lanes.acc_lane, (op.blocks, op.m, op.n)),
    ):
        lane, e = _grid(cols)
        coords = owner(op, lane, e)
        flat = np.ravel_multi_index([np.asarray(c).ravel() for c in coords], extent)
        assert sorted(flat.tolist()) == list(range(int(np.prod(extent)))), owner.__name__
        back_lane, back_e = inverse(op, *coords)
        assert (back_lane == lane).all() and (back_e == e).all(), inverse.__name__


def _acc_lookup(op):
    """{(block, row, col): (lane, reg)} via the owner map."""
    lane, reg = _grid(op.acc_elems)
    b, i, j = lanes.acc_owner(op, lane, reg)
    return {(int(x), int(y), int(z)): (int(p), int(q)) for x, y, z, p, q in zip(*(a.ravel() for a in (b, i, j, lane, reg)))}


# Seed, "32x32 layout": rows -> (lanes, accVGPRs) for block 0; block 1 adds 16.
SEED_32X32 = [((0, 3), (0, 31), (0, 3)), ((4, 7), (32, 63), (0, 3)), ((8, 11), (0, 31), (4, 7)),
              ((12, 15), (32, 63), (4, 7)), ((16, 19), (0, 31), (8, 11)), ((20, 23), (32, 63), (8, 11)),
              ((24, 27), (0, 31), (12, 15)), ((28, 31), (32, 63), (12, 15))]
# Seed, "16x16 layout": rows -> lanes; accVGPR = row % 4 + 4*block.
SEED_16X16 = [((0, 3), (0, 15)), ((4, 7), (16, 31)), ((8, 11), (32, 47)), ((12, 15), (48, 63))]
# Seed, "16x16 FP64 layout": rows -> (lanes, pair index per row in order)
SEED_16X16_F64 = [((0, 4, 8, 12), (0, 15)), ((1, 5, 9, 13), (16, 31)), ((2, 6, 10, 14), (32, 47)), ((3, 7, 11, 15), (48, 63))]


@pytest.mark.parametrize("name", ["mfma_f32_32x32x1f32", "mfma_f32_32x32x4f16", "mfma_f32_32x32x16_f16", "mfma_i32_32x32x32_i8"])
def test_seed_32x32_table(name):
    op = CATALOG[name]
    table = _acc_lookup(op)
    for b in range(op.blocks):
        for (r0, r1), (l0, l1), (g0, g1) in SEED_32X32:
            for i in range(r0, r1 + 1):
                for j in range(32):
                    assert table[(b, i, j)] == (l0 + j, g0 + (i - r0) + 16 * b)
                    assert l1 - l0 == 31 and g1 - g0 == 3


@pytest.mark.parametrize("name", ["mfma_f32_16x16x1f32", "mfma_f32_16x16x4bf16_1k", "mfma_f32_16x16x32_f16", "mfma_i32_16x16x64_i8"])
def test_seed_16x16_table(name):
    op = CATALOG[name]
    table = _acc_lookup(op)
    for b in range(op.blocks):
        for (r0, r1), (l0, _) in SEED_16X16:
            for i in range(r0, r1 + 1):
                for j in range(16):
                    assert table[(b, i, j)] == (l0 + j, i % 4 + 4 * b)


@pytest.mark.parametrize("name", ["mfma_f32_4x4x1f32", "mfma_f32_4x4x4f16", "mfma_f32_4x4x4bf16_1k", "mfma_i32_4x4x4i8"])
def test_seed_4x4_table(name):
    # "each group of 4 consecutive lanes (4b .. 4b+3) holds block b; accVGPRs 0-3 are the rows"
    table = _acc_lookup(CATALOG[name])
    for b, i, j in itertools.product(range(16), range(4), range(4)):
        assert table[(b, i, j)] == (4 * b + j, i)


def test_seed_16x16_f64_table():
    table = _acc_lookup(CATALOG["mfma_f64_16x16x4f64"])
    for rows, (l0, _) in SEED_16X16_F64:
        for pair, i in enumerate(rows):
            for j in range(16):
                assert table[(0, i, j)] == (l0 + j, pair)


def test_seed_4x4_f64_table():
    # row 0: blocks 0-3 in lanes 0-3, 4-7, 8-11, 12-15; rows 1-3 repeat at lane offsets 16, 32, 48
    table = _acc_lookup(CATALOG["mfma_f64_4x4x4f64"])
    for b, i, j in itertools.product(range(4), range(4), range(4)):
        assert table[(b, i, j)] == (16 * i + 4 * b + j, 0)


def test_seed_16x16x32_f16_fragments():
    # Seed example load_a/load_b: row = lane % 16, k = 8*(lane // 16) + e; store_c inverse layout.
    op = CATALOG["mfma_f32_16x16x32_f16"]
    lane, e = _grid(8)
    assert all((x == y).all() for x, y in zip(lanes.a_owner(op, lane, e), (0 * lane, lane % 16, 8 * (lane // 16) + e)))
    assert all((x == y).all() for x, y in zip(lanes.b_owner(op, lane, e), (0 * lane, lane % 16, 8 * (lane // 16) + e)))
    lane, g = _grid(4)
    assert all((x == y).all() for x, y in zip(lanes.acc_owner(op, lane, g), (0 * lane, 4 * (lane // 16) + g % 4, lane % 16)))


def test_wide_k_32x32_maps():
    # cdna4-facts: 32x32x16 f16: A = A[L%32][8*(L/32)+j]
    op = CATALOG["mfma_f32_32x32x16_f16"]
    lane, e = _grid(8)
    _, row, k = lanes.a_owner(op, lane, e)
    assert (row == lane % 32).all() and (k == 8 * (lane // 32) + e).all()


@pytest.mark.parametrize(
    "pattern, expect",
    [
        (0, lambda l: l),
        (1, lambda l: l % 32),
        (2, lambda l: 32 + l % 32),
        (3, lambda l: (l + 16) % 64),
        (4, lambda l: l % 16),
        (5, lambda l: 16 + l % 16),
        (6, lambda l: 32 + l % 16),
        (7, lambda l: 48 + l % 16),
    ],
)
def test_blgp_patterns(pattern, expect):
    assert [int(x) for x in lanes.blgp_source_lane(pattern, L)] == [expect(int(x)) for x in L]


def test_cbsz_abid_groups():
    # 16 blocks, cbsz=2 (groups of 4), abid=1: blocks 0-3 use block 1, 4-7 use 5, ...
    assert lanes.a_source_block(2, 1, np.arange(16)).tolist() == [1] * 4 + [5] * 4 + [9] * 4 + [13] * 4
    assert lanes.a_source_block(0, 0, np.arange(4)).tolist() == [0, 1, 2, 3]
    assert lanes.a_source_block(4, 15, np.arange(16)).tolist() == [15] * 16
