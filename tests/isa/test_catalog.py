"""The catalog's records agree with AMD's HIP documentation and with themselves."""

import pytest

import hip_builtins
from tvm_cdna4.isa import CATALOG, DS_READ_TR_OPS, MFMA_OPS, SOURCES, lookup, scaled_intrinsic


def test_counts_and_unique_names():
    assert len(MFMA_OPS) == 38 and len(DS_READ_TR_OPS) == 6 and len(CATALOG) == 44
    assert len({op.llvm_intrinsic for op in MFMA_OPS}) == 38
    assert len({op.builtin for op in CATALOG.values()}) == 44


def test_every_documented_builtin_is_catalogued_in_page_order():
    assert [op.builtin for op in MFMA_OPS] == list(hip_builtins.MFMA_BUILTINS)
    assert [op.builtin for op in DS_READ_TR_OPS] == list(hip_builtins.DS_READ_TR_BUILTINS)


@pytest.mark.parametrize("op", MFMA_OPS, ids=lambda op: op.name)
def test_mfma_shape_bookkeeping(op):
    # ops column of the seed's throughput table = 2*M*N*K*blocks
    assert op.ops == 2 * op.m * op.n * op.k * op.blocks
    assert 64 * op.a_elems == op.blocks * op.m * op.k
    assert 64 * op.b_elems == op.blocks * op.k * op.n
    assert 64 * op.acc_elems == op.blocks * op.m * op.n
    assert op.name == op.builtin.removeprefix("__builtin_amdgcn_")
    assert op.mnemonic.startswith("v_mfma_")
    if op.blocks > 1:
        assert op.mnemonic.endswith(f"_{op.blocks}b_{op.a_format}")
    assert set(op.sources) <= set(SOURCES)


def test_seed_throughput_rows():
    # a few rows read straight off the seed's table
    assert (CATALOG["mfma_f32_16x16x32_f16"].ops, CATALOG["mfma_f32_16x16x32_f16"].cycles) == (16384, 16)
    assert (CATALOG["mfma_f64_4x4x4f64"].ops, CATALOG["mfma_f64_4x4x4f64"].cycles) == (512, 32)
    assert (CATALOG["mfma_i32_32x32x32_i8"].ops, CATALOG["mfma_i32_32x32x32_i8"].cycles) == (65536, 32)
    scaled = CATALOG["mfma_scale_f32_32x32x64_f8f6f4"]
    assert dict(scaled.cycles_by_format) == {"fp8": 64, "bf8": 64, "fp6": 32, "bf6": 32, "fp4": 32}
    assert dict(CATALOG["mfma_scale_f32_16x16x128_f8f6f4"].cycles_by_format)["fp4"] == 16


def test_modifier_ranges_follow_the_seed():
    assert CATALOG["mfma_f32_4x4x1f32"].modifier("cbsz").hi == 4
    assert CATALOG["mfma_f32_4x4x1f32"].modifier("abid").hi == 15
    assert CATALOG["mfma_f32_16x16x4f16"].modifier("cbsz").hi == 2
    assert CATALOG["mfma_f32_16x16x4f16"].modifier("abid").hi == 3
    assert CATALOG["mfma_f32_32x32x1f32"].modifier("abid").hi == 1
    assert CATALOG["mfma_f32_16x16x32_f16"].modifier("cbsz").hi == 0
    assert CATALOG["mfma_f32_16x16x32_fp8_bf8"].modifier("blgp").hi == 0  # "Must be 0" in the seed
    assert CATALOG["mfma_i32_16x16x32_i8"].modifier("blgp").hi == 0
    assert CATALOG["mfma_f64_16x16x4f64"].blgp_role == "negate"
    assert CATALOG["mfma_scale_f32_16x16x128_f8f6f4"].blgp_role == "format"


@pytest.mark.parametrize(
    "kwargs, rule",
    [
        ({"cbsz": 1}, r"cbsz=1 is illegal; expected an integer in \[0, 0\]"),
        ({"blgp": 8}, r"blgp=8 is illegal"),
        ({"abid": -1}, r"abid=-1 is illegal"),
        ({"op_sel_a": 0}, r"unknown modifier 'op_sel_a'"),
    ],
)
def test_modifier_errors_name_the_modifier(kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        CATALOG["mfma_f32_16x16x32_f16"].check_modifiers(**kwargs)


def test_abid_must_fit_the_broadcast_group():
    op = CATALOG["mfma_f32_4x4x4f16"]
    op.check_modifiers(cbsz=2, abid=3)
    with pytest.raises(ValueError, match="abid=4 needs cbsz >= 3"):
        op.check_modifiers(cbsz=2, abid=4)


def test_lookup_by_every_spelling():
    op = CATALOG["mfma_f32_32x32x1f32"]
    assert lookup("mfma_f32_32x32x1f32") is op
    assert lookup("__builtin_amdgcn_mfma_f32_32x32x1f32") is op
    assert lookup("v_mfma_f32_32x32x1_2b_f32") is op
    assert lookup("ds_read_b64_tr_b8") is CATALOG["ds_read_tr8_b64_v2i32"]
    with pytest.raises(KeyError, match="ambiguous"):
        lookup("ds_read_b64_tr_b16")
    with pytest.raises(KeyError, match="did you mean"):
        lookup("mfma_f32_16x16x32_f16x")


@pytest.mark.parametrize("op", MFMA_OPS, ids=lambda op: op.name)
def test_names_are_the_builtin_tail_and_old_short_names_suggest_them(op):
    assert op.name.startswith("mfma_") and op.builtin == f"__builtin_amdgcn_{op.name}"
    short = op.name.removeprefix("mfma_")
    with pytest.raises(KeyError, match=f"did you mean '{op.name}'"):
        lookup(short)


def test_scaled_intrinsic_overloads():
    op = CATALOG["mfma_scale_f32_16x16x128_f8f6f4"]
    assert op.llvm_intrinsic == "llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v8i32.v8i32"
    assert scaled_intrinsic(op, "fp4", "fp6") == "llvm.amdgcn.mfma.scale.f32.16x16x128.f8f6f4.v4i32.v6i32"


def test_ds_read_tr_records():
    by = {op.name: op for op in DS_READ_TR_OPS}
    assert by["ds_read_tr6_b96_v3i32"].lds_alignment == 16  # rocRoller, stricter than the seed's 12
    assert {op.lds_alignment for op in DS_READ_TR_OPS if op.load_bits == 64} == {8}
    for op in DS_READ_TR_OPS:
        assert op.elements * op.element_bits == op.load_bits
        assert op.llvm_intrinsic.startswith("llvm.amdgcn.ds.read.tr")
        assert op.k_split_mfma in CATALOG
