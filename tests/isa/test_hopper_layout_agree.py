"""The pattern's (isa.wgmma_table) and the emulator's (isa.hopper_layout) layout formulas agree."""
import itertools
import numpy as np
from tvm_cdna4.isa import hopper_layout as H
from tvm_cdna4.isa import wgmma_table as W


def test_owner_maps_agree():
    t = np.arange(128)[:, None]
    for n in W.N_DOMAIN:
        r = np.arange(n // 2)[None]
        a, b = W.acc_owner(t, r), H.accumulator_coords(t, r)
        assert (a[0] == b[0]).all() and (a[1] == b[1]).all(), n
    for atype in W.KIND:
        kind = W.KIND[atype]
        e = np.arange(64 * kind.k // 128)[None]
        a, b = W.a_owner(kind, t, e), H.a_fragment_coords(t, e, kind.bits // 8)
        assert (a[0] == b[0]).all() and (a[1] == b[1]).all(), atype


def test_descriptors_and_swizzle_agree():
    rng = np.random.default_rng(0)
    for s in W.SWIZZLE_BYTES:
        for start, lbo, sbo in (rng.integers(0, 1 << 14, 3) * 16).reshape(-1, 3).tolist() + [[0, 0, 0], [(1 << 18) - 16] * 3]:
            d = W.encode_descriptor(start, lbo, sbo, s)
            assert d == H.encode_descriptor(start, lbo, sbo, s)
            assert W.descriptor_fields(d) == H.decode_descriptor(d)
        addr = np.arange(1 << 13)
        assert (W.swizzle_address(addr, s) == H.swizzle(addr, s)).all()
    for d in rng.integers(0, 1 << 63, 200, dtype=np.uint64).tolist():
        assert W.descriptor_fields(d) == H.decode_descriptor(d)


def test_canonical_offsets_agree():
    for bits, major, s in itertools.product((8, 16), ("k", "mn"), W.SWIZZLE_BYTES):
        mn, k = np.meshgrid(np.arange(256), np.arange(64), indexing="ij")
        lbo, sbo = 4096, 1024 * 3
        a = W.canonical_offset(major, s, lbo, sbo, mn, k, bits)
        b = H.operand_offset(mn, k, bits // 8, major.upper(), lbo, sbo, s)
        assert (a == b).all(), (bits, major, s)
