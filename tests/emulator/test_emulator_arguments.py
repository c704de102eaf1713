"""emulate's arguments (issue 35): every bad argument is one ValueError sentence naming it, before
anything runs; the arrays' shapes agree with the scalars given by keyword."""

import numpy as np
import pytest

import emulator_api_kernels as K
from cuda_seed_example import matrix_kernel
from tvm_cdna4.emulator import emulate


def _copy_args():
    return np.arange(64, dtype=np.float32), np.zeros(64, np.float32)


@pytest.mark.parametrize("kernel, found", [(None, "NoneType"), ("kernel", "str"), (3, "int")])
def test_kernel_must_be_a_tirx_function(kernel, found):
    with pytest.raises(ValueError, match=rf"^emulate: kernel: expected a TIRx function \(@T.function\); found "
                                         rf"{found}$"):
        emulate(kernel, *_copy_args())


@pytest.mark.parametrize("value, found", [("8192", "'8192'"), (2.5, "2.5"), (True, "True"), (0, "0")])
def test_max_threads_per_batch_must_be_a_positive_int(value, found):
    with pytest.raises(ValueError, match=rf"^emulate: max_threads_per_batch: expected a positive int; found {found}$"):
        emulate(K.scaled_copy(), *_copy_args(), n=1, max_threads_per_batch=value)


@pytest.mark.parametrize("target", ["sm80", "gfx950"])
def test_stats_must_be_a_dict(target):
    args = (matrix_kernel(), np.zeros((16, 4, 2), np.uint32), np.zeros((32, 12), np.uint32)) if target == "sm80" \
        else (K.scaled_copy(), *_copy_args())
    with pytest.raises(ValueError, match=r"^emulate: stats: expected a dict \(it receives the access counts\) or None; "
                                         r"found list$"):
        emulate(*args, target=target, stats=[], **({} if target == "sm80" else {"n": 1}))


@pytest.mark.parametrize("target", [5, ["gfx950"]])
def test_target_must_be_a_name(target):
    with pytest.raises(ValueError, match=r"^emulate: target .* is not supported; expected one of "
                                         r"\['gfx950', 'sm80', 'sm90'\]$"):
        emulate(K.scaled_copy(), *_copy_args(), n=1, target=target)


def test_a_read_only_output_names_its_parameter():
    a, out = _copy_args()
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"^emulate: parameter Out: the kernel stores to it, but its array is "
                                         r"read-only \(flags.writeable is False\); pass a writable array$"):
        emulate(K.scaled_copy(), a, out, n=2)
    a.flags.writeable = False  # a read-only input is fine
    out = np.zeros(64, np.float32)
    emulate(K.scaled_copy(), a, out, n=2)
    np.testing.assert_array_equal(out, 2 * np.arange(64, dtype=np.float32))


def test_a_shape_variable_given_by_keyword_must_match_the_arrays():
    a, out = np.ones((17, 4), np.float32), np.zeros((17, 4), np.float32)
    with pytest.raises(ValueError, match=r"^emulate: parameter A: expected an array of shape \(5, 4\) for M = 5 "
                                         r"\(given by keyword\); found shape \(17, 4\)$"):
        emulate(K.dynamic_rows(), a, out, M=5)
    assert not out.any()
    emulate(K.dynamic_rows(), a, out, M=17)  # agreeing with the arrays: fine
    np.testing.assert_array_equal(out, 2.0)


def test_unknown_keyword_scalars_are_refused():
    with pytest.raises(ValueError, match=r"^emulate: unknown keyword argument q \(the kernel's scalar parameters: "
                                         r"n\)$"):
        emulate(K.scaled_copy(), *_copy_args(), n=1, q=3)
    with pytest.raises(ValueError, match=r"^emulate: unknown keyword arguments N, q \(the kernel's scalar parameters: "
                                         r"none; shape variables: M\)$"):
        emulate(K.dynamic_rows(), np.ones((3, 4), np.float32), np.zeros((3, 4), np.float32), q=1, N=2)


def test_a_tensor_parameter_given_by_keyword_is_refused():
    with pytest.raises(ValueError, match=r"^emulate: parameter Out is a tensor; pass its array positionally, in "
                                         r"parameter order$"):
        emulate(K.scaled_copy(), np.zeros(64, np.float32), n=1, Out=np.zeros(64, np.float32))


def test_missing_arguments_are_named():
    with pytest.raises(ValueError, match=r"^emulate: no array for parameter Out \(1 array for the 2 tensor parameters "
                                         r"A, Out\)$"):
        emulate(K.scaled_copy(), np.zeros(64, np.float32), n=1)
    with pytest.raises(ValueError, match=r"^emulate: no value for scalar parameter n; pass it by keyword, n=value$"):
        emulate(K.scaled_copy(), *_copy_args())


@pytest.mark.parametrize("value, found", [(2.5, "2.5"), ("2", "'2'"), (None, "None"), (True, "True")])
def test_an_integer_scalar_needs_an_int(value, found):
    with pytest.raises(ValueError, match=rf"^emulate: scalar parameter n: expected an int \(int32\); found {found}$"):
        emulate(K.scaled_copy(), *_copy_args(), n=value)


def test_an_integer_scalar_out_of_range_is_refused():
    with pytest.raises(ValueError, match=r"^emulate: scalar parameter n: expected an int32 value; found 4294967296$"):
        emulate(K.scaled_copy(), *_copy_args(), n=2**32)


def test_float_group_offsets_are_refused():
    """An int32 tensor takes integer arrays of 4-byte elements only: float32 offsets would be read as
    their bit patterns."""
    out = np.zeros(64, np.int32)
    with pytest.raises(ValueError, match=r"^emulate: parameter offsets: expected dtype int32; found float32$"):
        emulate(K.gather_offsets(), np.array([0, 5, 9, 12], np.float32), out)
    emulate(K.gather_offsets(), np.array([0, 5, 9, 12], np.uint32), out)  # bit patterns of the same size: fine
    np.testing.assert_array_equal(out, np.tile([0, 5, 9, 12], 16))
