"""Math calls on gfx950 (issue 35): what TIRx lowers ``T.exp`` & co. to runs in the emulator with the
dtype's rounding; what gfx950 cannot compile (libm calls ld.lld cannot link, float64 functions
LLVM's AMDGPU backend has no lowering for) is refused at build, naming what to write instead; a call
the emulator does not know is one sentence."""

import traceback

import ml_dtypes
import numpy as np
import pytest

import emulator_api_kernels as K
from tvm_cdna4 import ContractError, build
from tvm_cdna4.emulator import emulate
from tvm_cdna4.emulator import EmulationUnsupported

X = np.concatenate([np.linspace(-6, 6, 60), [0.0, -0.0, 1e-40, 88.0]])  # a denormal, exp's f32 edge
POSITIVE = np.concatenate([np.geomspace(1e-30, 1e30, 60), [1e-40, 1.0, 2.0, 0.5]])
Y = np.linspace(-3, 3, 64)

# name -> (numpy in float64, inputs): the emulator computes these in float64 and rounds once to the dtype
EXACT = {
    "exp": (np.exp, X), "exp2": (np.exp2, X), "log": (np.log, POSITIVE), "log2": (np.log2, POSITIVE),
    "log10": (np.log10, POSITIVE), "sqrt": (np.sqrt, POSITIVE), "sin": (np.sin, X), "cos": (np.cos, X),
    "fabs": (np.abs, X), "floor": (np.floor, X), "ceil": (np.ceil, X), "trunc": (np.trunc, X),
    "round": (np.rint, X + 0.5), "nearbyint": (np.rint, X + 0.5),
}


def _run(name, a, b=None, dtype="float32", args=1):
    npd = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    a = np.asarray(a).astype(npd)
    b = np.zeros(64, npd) if b is None else np.asarray(b).astype(npd)
    c = np.full(64, np.nan, npd)
    emulate(K.math_call(name, args, dtype), a, b, c)
    return a, b, c


@pytest.mark.parametrize("name", sorted(EXACT))
def test_f32_math_is_float64_rounded_once(name):
    fn, x = EXACT[name]
    a, _, c = _run(name, x)
    with np.errstate(all="ignore"):
        want = fn(a.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("name", ["exp", "exp2", "log", "sqrt", "sin"])
def test_f16_math_rounds_to_f16(name):
    fn = EXACT[name][0]
    a, _, c = _run(name, np.geomspace(1e-3, 1e3, 64) if name in ("log", "sqrt") else np.linspace(-8, 8, 64),
                   dtype="float16")
    with np.errstate(all="ignore"):
        want = fn(a.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(c, want)


def test_f64_exp_and_sqrt_run_in_float64():
    a, _, c = _run("exp", X, dtype="float64")
    np.testing.assert_array_equal(c, np.exp(a))
    a, _, c = _run("sqrt", POSITIVE, dtype="float64")
    np.testing.assert_array_equal(c, np.sqrt(a))


def test_bf16_exp_goes_through_f32():
    a, _, c = _run("exp", np.linspace(-4, 4, 64), dtype="bfloat16")
    want = np.exp(a.astype(np.float32).astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(c, want)


def test_pow():
    a, b, c = _run("pow", np.linspace(0.1, 4, 64), Y, args=2)
    np.testing.assert_array_equal(c, np.power(a.astype(np.float64), b.astype(np.float64)).astype(np.float32))


@pytest.mark.parametrize("name, fn", [
    ("tanh", np.tanh), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("rsqrt", lambda x: 1 / np.sqrt(x)),
    ("erf", None),
])
def test_functions_tirx_expands_run_too(name, fn):
    """TIRx writes these with exp / sqrt / a polynomial (llvm.fmuladd): the emulator runs that expansion."""
    import math

    x = POSITIVE[:60] if name == "rsqrt" else np.linspace(-4, 4, 64)
    a, _, c = _run(name, np.resize(x, 64))
    ref = np.vectorize(math.erf)(a.astype(np.float64)) if fn is None else fn(a.astype(np.float64))
    np.testing.assert_allclose(c, ref, rtol=4e-6, atol=2e-7)


def test_isnan_isinf_isfinite():
    x = np.array([0.0, np.inf, -np.inf, np.nan, 1.0] * 13, np.float32)[:64]
    for name, fn in (("isnan", np.isnan), ("isinf", np.isinf), ("isfinite", np.isfinite)):
        _, _, c = _run(name, x)
        np.testing.assert_array_equal(c, fn(x).astype(np.float32))


@pytest.mark.parametrize("name, args, instead", [
    ("log1p", 1, r"T.log\(1 \+ x\)"), ("atan", 1, r"no gfx950 lowering"), ("tan", 1, r"T.sin\(x\) / T.cos\(x\)"),
    ("sinh", 1, r"\(T.exp\(x\) - T.exp\(-x\)\) / 2"), ("atan2", 2, r"no gfx950 lowering"),
    ("fmod", 2, r"x - T.trunc\(x / y\) \* y"), ("exp10", 1, r"T.exp2\(x \* 3.321928"),
])
def test_libm_only_functions_are_refused_at_build(name, args, instead):
    with pytest.raises(ContractError, match=rf"^T.{name} .*gfx950.*{instead}") as err:
        build(K.math_call(name, args))
    assert err.value.check == "math call"
    with pytest.raises(ContractError, match=rf"^T.{name} "):  # and before the emulator runs it
        _run(name, X, args=args)


@pytest.mark.parametrize("name, args", [("log", 1), ("sin", 1), ("cos", 1), ("pow", 2), ("log2", 1)])
def test_float64_functions_without_an_amdgpu_lowering_are_refused(name, args):
    """LLVM's AMDGPU backend lowers these only for f16/f32: for f64 it fails (sin, cos, pow abort the
    process) or leaves the result uncomputed (log)."""
    with pytest.raises(ContractError, match=rf"^T.{name} on float64 .*float32"):
        build(K.math_call(name, args, "float64"))


def test_a_warpgroup_index_of_a_launch_thread_kernel_names_the_launch_config():
    """TIRx resolves ``T.cuda.thread_in_warpgroup()`` only under a ``T.cuda.LaunchConfig``; a kernel of
    ``T.launch_thread`` s reaches the emulator with the call unresolved, and the sentence says why."""
    from tvm_tirx.script import tirx as T

    @T.function
    def kernel(D: T.Tensor((128,), "int32")):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            D[tx] = T.cuda.thread_in_warpgroup()

    with pytest.raises(EmulationUnsupported) as err:
        emulate(kernel, np.zeros(128, np.int32), target="sm90")
    assert str(err.value) == (
        "emulate: the call tirx.cuda.thread_in_warpgroup (T.cuda.thread_in_warpgroup()) is not emulated (TIRx "
        "resolves it only in a kernel launched through a T.cuda.LaunchConfig: T.device_entry(launch=T.cuda."
        "LaunchConfig(grid=..., block=...))); docs/emulator.md lists the calls the emulator runs")


def test_an_unknown_call_is_one_sentence():
    a, c = np.ones(64, np.float32), np.zeros(64, np.float32)
    with pytest.raises(EmulationUnsupported) as err:
        emulate(K.extern_call(), a, c)
    text = str(err.value)
    assert "\n" not in text and text.startswith("emulate: the call my_device_function (")
    assert text.endswith(" is not emulated; docs/emulator.md lists the calls the emulator runs")
    assert isinstance(err.value, NotImplementedError)
    assert len(traceback.extract_tb(err.value.__traceback__)) <= 3
