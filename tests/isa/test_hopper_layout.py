"""isa/hopper_layout.py: the wgmma descriptor's bit fields, the canonical operand layouts (CUTLASS
``make_gmma_desc``), the accumulator and RS A fragment maps (PTX ISA wgmma register fragments)."""

from __future__ import annotations

import numpy as np

from tvm_cdna4.isa import hopper_layout as H


def test_descriptor_fields_round_trip_at_their_bit_positions():
    desc = (0x123 << 0) | (0x2 << 16) | (0x40 << 32) | (1 << 62)
    assert H.decode_descriptor(desc) == {"start": 0x1230, "lbo": 32, "sbo": 1024, "base_offset": 0, "swizzle": 128}
    assert H.decode_descriptor(3 << 62)["swizzle"] == 32 and H.decode_descriptor(2 << 62)["swizzle"] == 64
    assert H.encode_descriptor(0x1230, 32, 1024, 128) == desc


def test_canonical_layouts_match_cutlass():
    # K-major, no swizzle, bf16 (T = 8): ((8,m),(T,2)):((1T,SBO),(1,LBO)) in elements -> bytes
    assert H.operand_offset(9, 11, 2, "K", lbo=128, sbo=256, swizzle_width=0) == 16 + 256 + 3 * 2 + 128
    # K-major, 128B swizzle: rows of 128 B, 8 rows then SBO; K contiguous
    assert H.operand_offset(9, 5, 2, "K", lbo=16, sbo=1024, swizzle_width=128) == 128 + 1024 + 10
    # MN-major, 64B swizzle, fp8 (W/e = 64 elements): ((W/e,m),(8,k)):((1,LBO),(W,SBO))
    assert H.operand_offset(70, 9, 1, "MN", lbo=4096, sbo=512, swizzle_width=64) == 6 + 4096 + 64 + 512
    # MN-major, no swizzle, f16: ((T,m),(8,k)):((1,SBO),(T,LBO))
    assert H.operand_offset(9, 9, 2, "MN", lbo=2048, sbo=128, swizzle_width=0) == 2 + 128 + 16 + 2048


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
        row, kk = H.a_fragment_coords(t, i, e)
        assert sorted(zip(row.ravel(), kk.ravel())) == [(m, j) for m in range(64) for j in range(k)]
    assert H.a_fragment_coords(5, 7, 2) == (1 + 8, 2 + 1 + 8)
