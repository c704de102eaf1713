"""isa/hopper_layout.py: the wgmma descriptor's bit fields, the canonical operand layouts (CUTLASS
``make_gmma_desc``), the accumulator and RS A fragment maps (PTX ISA wgmma register fragments)."""

from __future__ import annotations

import numpy as np
import pytest

from tvm_cdna4.isa import hopper_layout as H


def test_descriptor_fields_round_trip_at_their_bit_positions():
    desc = (0x123 << 0) | (0x2 << 16) | (0x40 << 32) | (1 << 62)
    assert H.decode_descriptor(desc) == {"start": 0x1230, "lbo": 32, "sbo": 1024, "base_offset": 0, "swizzle": 128}
    assert H.decode_descriptor(3 << 62)["swizzle"] == 32 and H.decode_descriptor(2 << 62)["swizzle"] == 64
    assert H.encode_descriptor(0x1230, 32, 1024, 128) == desc


def test_canonical_layouts_match_cutlass():
    # K-major, no swizzle, bf16 (T = 8): ((8,m),(T,2)):((1T,SBO),(1,LBO)) in elements -> bytes
    assert H.canonical_offset("k", 0, 128, 256, 9, 11, 16) == 16 + 256 + 3 * 2 + 128
    # K-major, 128B swizzle: rows of 128 B, 8 rows then SBO; K contiguous
    assert H.canonical_offset("k", 128, 16, 1024, 9, 5, 16) == 128 + 1024 + 10
    # MN-major, 64B swizzle, fp8 (W/e = 64 elements): ((W/e,m),(8,k)):((1,LBO),(W,SBO))
    assert H.canonical_offset("mn", 64, 4096, 512, 70, 9, 8) == 6 + 4096 + 64 + 512
    # MN-major, no swizzle, f16: ((T,m),(8,k)):((1,SBO),(T,LBO))
    assert H.canonical_offset("mn", 0, 2048, 128, 9, 9, 16) == 2 + 128 + 16 + 2048


def test_accumulator_owner_inverts_the_fragment_map_over_a_64x256_tile():
    t, r = np.meshgrid(np.arange(128), np.arange(128), indexing="ij")
    row, col = H.accumulator_coords(t, r)
    assert sorted(zip(row.ravel(), col.ravel())) == [(i, j) for i in range(64) for j in range(256)]
    back = H.accumulator_owner(row, col)
    np.testing.assert_array_equal(back[0], t)
    np.testing.assert_array_equal(back[1], r)
    assert H.accumulator_coords(37, 5) == (16 + 1, 8 + 2 + 1)  # warp 1, g 1, t 1: d5 = row g, col 8 + 2t + 1


def test_rs_a_fragment_covers_the_64xk_tile_once():
    for e, k in ((2, 16), (1, 32)):
        t, i = np.meshgrid(np.arange(128), np.arange(16 // e), indexing="ij")
        row, kk = H.a_fragment_coords(t, i, 8 * e)
        assert sorted(zip(row.ravel(), kk.ravel())) == [(m, j) for m in range(64) for j in range(k)]
    assert H.a_fragment_coords(5, 7, 16) == (1 + 8, 2 + 1 + 8)


def test_descriptor_fields_against_hand_computed_values():
    # K-major 128 B swizzle, SBO = 8 rows x 128 B = 1024, LBO unused (16): CUTLASS make_gmma_desc
    d = H.encode_descriptor(0x400, 16, 1024, 128)
    assert d == (0x400 >> 4) | (1 << 16) | (64 << 32) | (1 << 62)
    assert H.decode_descriptor(d) == {"start": 0x400, "lbo": 16, "sbo": 1024, "base_offset": 0, "swizzle": 128}
    assert [H.encode_descriptor(0, 16, 0, s) >> 62 for s in (0, 128, 64, 32)] == [0, 1, 2, 3]
    # K-major no swizzle, compact core matrices: LBO 128 (next 16 K bytes), SBO 256
    assert H.encode_descriptor(0x10, 128, 256, 0) == 1 | (8 << 16) | (16 << 32)
    with pytest.raises(ValueError):
        H.encode_descriptor(8, 16, 0, 0)


def test_canonical_offsets_follow_cutlass_layouts():
    # K-major none ((8,m),(T,2)):((1T,SBO),(1,LBO)), bf16 (T = 8 elements)
    assert H.canonical_offset("k", 0, 128, 256, 9, 8, 16) == 16 + 256 + 128
    # K-major 128 B ((8,m),(T,8)):((8T,SBO),(1,T)): row r at 128 r, k contiguous
    assert H.canonical_offset("k", 128, 16, 1024, 9, 5, 16) == 128 + 1024 + 10
    # MN-major none ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)): SBO steps 16 MN bytes, LBO 8 K rows
    assert H.canonical_offset("mn", 0, 512, 128, 9, 9, 16) == 2 + 128 + 16 + 512
    # MN-major 128 B ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)): LBO steps 128 MN bytes, SBO 8 K rows
    assert H.canonical_offset("mn", 128, 2048, 1024, 65, 9, 16) == 2 + 2048 + 128 + 1024
    assert H.swizzle(0x80 + 0x10, 128) == 0x80 + 0x00 and H.swizzle(0x390, 32) == 0x390 ^ 0x10


def test_descriptor_round_trips_every_swizzle_and_field_extreme():
    rng = np.random.default_rng(0)
    for width in H.SWIZZLE_BYTES:
        for start, lbo, sbo in [*(rng.integers(0, 1 << 14, (20, 3)) * 16).tolist(), [0, 0, 0], [(1 << 18) - 16] * 3]:
            fields = H.decode_descriptor(H.encode_descriptor(start, lbo, sbo, width))
            assert fields == {"start": start, "lbo": lbo, "sbo": sbo, "base_offset": 0, "swizzle": width}
    with pytest.raises(ValueError):
        H.encode_descriptor(0, 16, 1 << 18, 0)  # SBO past 14 bits of 16-byte units
    with pytest.raises(ValueError):
        H.encode_descriptor(0, 16, 0, 16)  # no 16 B swizzle


def test_swizzle_is_its_own_inverse_and_a_permutation_of_each_period():
    addr = np.arange(2048)
    for width in H.SWIZZLE_BYTES:
        out = H.swizzle(addr, width)
        assert (H.swizzle(out, width) == addr).all()
        period = H.swizzle_period(width)
        assert sorted((out[:period]).tolist()) == list(range(period))


def test_canonical_offsets_are_the_same_on_ints_arrays_and_tir_expressions():
    from tvm_tirx.ir import IntImm, Var
    from tvm_tirx.sym import Analyzer

    from tvm_cdna4.patterns.common import substitute

    mn, k = Var("mn", "int32"), Var("k", "int32")
    grid = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    for major, width, bits in (("k", 0, 16), ("k", 128, 8), ("mn", 0, 16), ("mn", 64, 16)):
        expr = H.canonical_offset(major, width, 256, 1024, mn, k, bits)
        table = H.canonical_offset(major, width, 256, 1024, *grid, bits)
        for i, j in ((0, 0), (9, 3), (15, 15)):
            value = Analyzer().simplify(substitute(substitute(expr, mn, IntImm("int32", i)), k, IntImm("int32", j)))
            assert int(value.value) == table[i, j] == H.canonical_offset(major, width, 256, 1024, i, j, bits)
