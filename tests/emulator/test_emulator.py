"""The wavefront emulator: probes against the reference, a GEMM against numpy, seeded bugs."""

import argparse

import numpy as np
import pytest

import rocm_kernels
from tvm_cdna4.emulator import EmulationError, compare, emulate
from tvm_cdna4.isa import DS_READ_TR_OPS, MFMA_OPS, SCALE_FORMAT_CODES, formats, reference
from tvm_cdna4.isa.mfma_table import SCALE_VECTOR_WORDS
from tvm_cdna4.probes import STORAGE, mfma_probe, tr_probe
from tvm_cdna4.kernels.gfx950.gemm import gfx950_gemm


def _values(rng, fmt, n):
    if fmt == "i8":
        return rng.integers(-128, 128, (64, n)).astype(np.int8)
    if fmt == "i32":
        return rng.integers(-(2**20), 2**20, (64, n)).astype(np.int32)
    return rng.normal(size=(64, n)).astype(formats.fmt(fmt).dtype)


def _storage(x, fmt):
    return np.ascontiguousarray(x).view(np.dtype(STORAGE[fmt]))


DENSE = [op for op in MFMA_OPS if op.kind == "mfma"]


@pytest.mark.parametrize("op", DENSE, ids=lambda op: op.name)
def test_emulated_mfma_probe_equals_reference(op, rng):
    mods = {"cbsz": op.modifier("cbsz").hi, "abid": op.modifier("abid").hi, "blgp": op.modifier("blgp").hi}
    a, b, c = _values(rng, op.a_format, op.a_elems), _values(rng, op.b_format, op.b_elems), _values(rng, op.acc_format, op.acc_elems)
    d = np.zeros_like(_storage(c, op.acc_format))
    emulate(mfma_probe(op, **mods), _storage(a, op.a_format), _storage(b, op.b_format), _storage(c, op.acc_format), d)
    np.testing.assert_array_equal(d.view(c.dtype), reference.mfma(op, a, b, c, **mods))


@pytest.mark.parametrize("op", [op for op in MFMA_OPS if op.kind == "mfma_scale"], ids=lambda op: op.name)
@pytest.mark.parametrize("cbsz, blgp", [(0, 1), (2, 4), (3, 0), (4, 4)])
def test_emulated_scaled_mfma_probe_equals_reference(op, cbsz, blgp, rng):
    fa, fb = SCALE_FORMAT_CODES[cbsz], SCALE_FORMAT_CODES[blgp]
    a, b = _values(rng, fa, 32), _values(rng, fb, 32)
    c = rng.normal(size=(64, op.acc_elems)).astype(np.float32)
    sa = rng.integers(118, 136, 64).astype(np.uint32) << np.uint32(8)  # byte 1
    sb = rng.integers(118, 136, 64).astype(np.uint32) << np.uint32(16)  # byte 2
    d = np.zeros_like(c)
    emulate(mfma_probe(op, cbsz=cbsz, blgp=blgp, op_sel_a=1, op_sel_b=2),
            formats.to_words(fa, a), formats.to_words(fb, b), c, sa, sb, d)
    assert formats.to_words(fa, a).shape[1] == SCALE_VECTOR_WORDS[fa]
    want = reference.mfma_scale(op, a, b, c, cbsz=cbsz, blgp=blgp, scale_a=sa, scale_b=sb, op_sel_a=1, op_sel_b=2)
    np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("op", DS_READ_TR_OPS, ids=lambda op: op.name)
def test_emulated_ds_read_tr_probe_is_the_tile_transpose(op, rng):
    sub_byte = op.element_bits < 8
    if sub_byte:
        fmt = "fp4" if op.element_bits == 4 else "fp6"
        tile = formats._from_codes(formats.fmt(fmt), rng.integers(0, 2**op.element_bits, (4, 16, 16), dtype=np.uint64))
        src = formats.to_words(fmt, tile.reshape(64, 16)).view(np.uint8).reshape(-1)  # row (g, i): one chunk
        d = np.zeros((64, op.load_bits // 32), np.uint32)
        emulate(tr_probe(op), src, d)
        # lane 16g + c holds column c of group g, rows 0..15
        want = formats.to_words(fmt, tile.transpose(0, 2, 1).reshape(64, 16))
        np.testing.assert_array_equal(d, want)
    else:
        dt = np.float16 if op.element_bits == 16 and op.result_format == "f16" else (np.int16 if op.element_bits == 16 else np.uint8)
        tile = rng.integers(0, 100, (4, op.elements, 16)).astype(dt)
        d = np.zeros((64, op.elements), dt)
        emulate(tr_probe(op), tile.reshape(-1).copy(), d)
        np.testing.assert_array_equal(d, tile.transpose(0, 2, 1).reshape(64, op.elements))


@pytest.mark.parametrize("shape", [(64, 64, 32), (1, 1, 1), (17, 33, 40), (70, 130, 20), (128, 96, 100)])
def test_emulated_gfx950_gemm_matches_numpy(shape, rng):
    M, N, K = shape
    a = rng.normal(size=(M, K)).astype(np.float16)
    b = rng.normal(size=(K, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    emulate(gfx950_gemm(M, N, K), a, b, c)
    compare("C", c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_gemm_cli_validate_passes(capsys):
    from tvm_cdna4.cli import gemm_gfx950 as gfx950_cli

    args = argparse.Namespace(dtype="f16", layout="nn", out_dtype="f32", M=33, N=40, K=70, emit=None, report=False,
                              validate=True, seed=0)
    assert gfx950_cli.run(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "PASS" and "relative error" in out[0]


# ---- seeded bugs: each is caught with a precise report ----------------------------------------

def test_removed_barrier_is_a_race():
    a, b = np.arange(128, dtype=np.float32), np.zeros(128, np.float32)
    emulate(rocm_kernels.lds_exchange(), a, b)
    np.testing.assert_array_equal(b, np.roll(a, -64))
    with pytest.raises(EmulationError, match=r"race on LDS 'S' byte 256: written by wave 1 and read by wave 0 with no barrier") as err:
        emulate(rocm_kernels.lds_exchange(barrier=False), a, b)
    assert (err.value.workgroup, err.value.wave, err.value.lane) == (0, 0, 0)


def test_off_by_one_lds_index_is_out_of_bounds():
    with pytest.raises(EmulationError, match=r"out-of-bounds shared access to 'S': bytes \[512, 516\) of 512") as err:
        emulate(rocm_kernels.lds_exchange(offset=1), np.ones(128, np.float32), np.zeros(128, np.float32))
    assert (err.value.wave, err.value.lane) == (0, 63)


def test_barrier_skipped_by_a_wave():
    with pytest.raises(EmulationError, match=r"barrier not reached by all waves of the workgroup \(wave 1 skips it\)"):
        emulate(rocm_kernels.lds_exchange(skip_barrier_in_wave1=True), np.ones(128, np.float32), np.zeros(128, np.float32))


def test_wrong_lane_map_through_raw_intrinsics_is_reported_by_the_comparison(rng):
    a = rng.normal(size=(16, 32)).astype(np.float16)
    b = rng.normal(size=(32, 16)).astype(np.float16)
    d = np.zeros((16, 16), np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64)
    emulate(rocm_kernels.raw_mfma(), a, b, d)
    compare("D", d, want, rtol=1e-5, atol=1e-5)
    emulate(rocm_kernels.raw_mfma(transpose_a=True), a, b, d)
    with pytest.raises(AssertionError, match=r"D: \d+ of 256 elements wrong; first D\[0, 0\] = "):
        compare("D", d, want, rtol=1e-5, atol=1e-5)


def test_partially_active_wave_at_an_mfma(monkeypatch):
    from tvm_cdna4.errors import ContractError
    from tvm_cdna4.rocm import analysis

    args = np.ones((16, 32), np.float16), np.ones((32, 16), np.float16), np.zeros((16, 16), np.float32)
    with pytest.raises(ContractError, match=r"llvm.amdgcn.mfma.f32.16x16x32.f16: a wave-collective instruction runs under `if tx < 32:`"):
        emulate(rocm_kernels.raw_mfma(half_wave=True), *args)
    monkeypatch.setattr(analysis, "check_kernel", lambda func, target: None)  # the emulator's own check, past the static rule
    with pytest.raises(EmulationError, match=r"wave-collective v_mfma_f32_16x16x32_f16 executed with 32 of 64 lanes active") as err:
        emulate(rocm_kernels.raw_mfma(half_wave=True), *args)
    assert err.value.lane == 32


def test_misaligned_ds_read_tr_address(rng):
    x = rng.normal(size=256).astype(np.float16)
    d = np.zeros((64, 4), np.float16)
    emulate(rocm_kernels.raw_ds_read_tr(), x, d)
    np.testing.assert_array_equal(d, x.reshape(4, 4, 16).transpose(0, 2, 1).reshape(64, 4))
    with pytest.raises(EmulationError, match=r"ds_read_b64_tr_b16: LDS address 2 is not 8-byte aligned") as err:
        emulate(rocm_kernels.raw_ds_read_tr(byte_offset=2), x, d)
    assert (err.value.wave, err.value.lane) == (0, 0)


def test_read_of_never_written_lds():
    with pytest.raises(EmulationError, match=r"read of LDS 'S' byte \d+, never written"):
        emulate(rocm_kernels.uninitialized_lds(), np.zeros(64, np.float32))


def test_out_of_bounds_global_access():
    with pytest.raises(EmulationError, match=r"out-of-bounds global access to 'B': bytes \[256, 260\) of 256") as err:
        emulate(rocm_kernels.global_off_by_one(), np.ones(64, np.float32), np.zeros(64, np.float32))
    assert (err.value.wave, err.value.lane) == (0, 63)


def test_the_documented_exponential_emulates_and_compiles_to_v_exp_f32():
    """docs/emulator.md, "Exponentials (gfx950)": e^x as the hardware exp2 of x * log2(e)."""
    import tvm_cdna4

    x = np.linspace(-20, 20, 64).astype(np.float32)
    y = np.zeros(64, np.float32)
    emulate(rocm_kernels.natural_exp(), x, y)
    np.testing.assert_allclose(y, np.exp(x.astype(np.float64)), rtol=2e-6)  # about |x| * 2^-24 from the product
    asm = tvm_cdna4.build(rocm_kernels.natural_exp()).asm
    assert asm.count("v_exp_f32") == 1
