"""Emulator checks added for issue 14 (finding 7): arguments against the kernel's parameters, and
LDS writes read by another wave across a barrier that the writer reached with the write in flight."""

import ml_dtypes
import numpy as np
import pytest

import rocm_kernels
from cuda_seed_example import matrix_kernel
from tvm_cdna4.emulator import EmulationError, emulate
from tvm_cdna4.isa import CATALOG, reference
from tvm_cdna4.probes import mfma_probe


def _raw_mfma_args(**overrides):
    args = dict(A=np.ones((16, 32), np.float16), B=np.ones((32, 16), np.float16), D=np.zeros((16, 16), np.float32))
    return list((args | overrides).values())


@pytest.mark.parametrize("overrides, rule", [
    (dict(A=np.ones((16, 32), np.float32)), r"parameter A: expected dtype float16; found float32"),
    (dict(D=np.zeros((16, 16), np.float64)), r"parameter D: expected dtype float32; found float64"),
    (dict(A=np.ones((32, 16), np.float16)), r"parameter A: expected an array of shape \(16, 32\); found shape \(32, 16\)"),
    (dict(B=np.ones(512, np.float16)), r"parameter B: expected an array of shape \(32, 16\); found shape \(512,\)"),
    (dict(A=np.ones((32, 16), np.float16).T), r"parameter A needs a C-contiguous array"),
])
def test_emulate_checks_arguments_against_the_signature(overrides, rule):
    with pytest.raises(ValueError, match=rule):
        emulate(rocm_kernels.raw_mfma(), *_raw_mfma_args(**overrides))


def test_correct_arguments_still_run():
    a, b, d = _raw_mfma_args()
    emulate(rocm_kernels.raw_mfma(), a, b, d)
    np.testing.assert_array_equal(d, np.full((16, 16), 32, np.float32))


def test_bf16_parameter_takes_ml_dtypes_bfloat16():
    a = np.linspace(-3, 3, 64).astype(ml_dtypes.bfloat16)
    b = np.zeros(64, np.float32)
    emulate(rocm_kernels.widen_bf16(), a, b)
    np.testing.assert_array_equal(b, a.astype(np.float32))
    with pytest.raises(ValueError, match=r"parameter A: expected dtype bfloat16 \(numpy: ml_dtypes.bfloat16\); found float16"):
        emulate(rocm_kernels.widen_bf16(), a.astype(np.float16), b)


def test_integer_parameter_takes_bit_patterns_of_its_element_size(rng):
    """int16 storage of bf16 data (the GEMM's convention) passes as it is; a wider array does not."""
    op = CATALOG["mfma_f32_16x16x32_bf16"]
    a, b = (rng.normal(size=(64, 8)).astype(ml_dtypes.bfloat16) for _ in range(2))
    c, d = rng.normal(size=(64, 4)).astype(np.float32), np.zeros((64, 4), np.float32)
    emulate(mfma_probe(op), a, b, c, d)
    np.testing.assert_array_equal(d, reference.mfma(op, a, b, c))
    with pytest.raises(ValueError, match=r"parameter A: expected dtype int16; found float32"):
        emulate(mfma_probe(op), a.astype(np.float32), b, c, d)


def test_sm80_arguments_are_checked_too():
    with pytest.raises(ValueError, match=r"parameter A: expected dtype uint32; found float64"):
        emulate(matrix_kernel(), np.zeros((16, 4, 2)), np.zeros((32, 12), np.uint32), target="sm80")
    with pytest.raises(ValueError, match=r"parameter Out: expected an array of shape \(32, 12\); found shape \(12, 32\)"):
        emulate(matrix_kernel(), np.zeros((16, 4, 2), np.uint32), np.zeros((12, 32), np.uint32), target="sm80")


@pytest.mark.parametrize("wait, after", [(None, False), (1, False), (0, True)])
def test_lds_write_in_flight_at_a_bare_barrier_is_reported(wait, after):
    a = np.arange(128, dtype=np.float32)
    with pytest.raises(EmulationError, match=r"LDS 'S' byte \d+: written by wave 1 and read by wave 0 after a barrier, "
                                             r"but wave 1 reached the barrier with that write still in flight"):
        emulate(rocm_kernels.lds_exchange_s_barrier(wait, after), a, np.zeros(128, np.float32))


def test_lds_wait_before_a_bare_barrier_publishes_the_writes():
    a = np.arange(128, dtype=np.float32)
    b = np.zeros(128, np.float32)
    emulate(rocm_kernels.lds_exchange_s_barrier(0), a, b)
    np.testing.assert_array_equal(b, np.roll(a, -64))
    b[:] = 0
    emulate(rocm_kernels.lds_exchange(), a, b)  # T.rocm.workgroup_barrier() waits, then barriers
    np.testing.assert_array_equal(b, np.roll(a, -64))
