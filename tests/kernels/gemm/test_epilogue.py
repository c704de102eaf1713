"""The fused epilogue's one definition (``kernels.gemm.epilogue``): formulas, inputs, parameters."""

import math

import numpy as np
import pytest

from tvm_cdna4.kernels.gemm.epilogue import ACTIVATIONS, PARAM_ORDER, Fusion, fusion_of, random_inputs, reference, tolerance


def _independent(name, x):
    """The activations as textbooks write them (float64)."""
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "silu":
        return x / (1.0 + np.exp(-x))
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_formula_matches_the_textbook(name):
    x = np.concatenate([np.linspace(-30, 30, 2001), [0.0, -0.0, 1e-30, -1e-30]])
    got = reference(x[None, :], Fusion(activation=name), {})[0]
    np.testing.assert_allclose(got, _independent(name, x), rtol=1e-12, atol=1e-15)


def test_order_of_the_steps():
    rng = np.random.default_rng(0)
    M, N = 5, 7
    acc = rng.standard_normal((M, N))
    f = Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True)
    inp = random_inputs(f, M, N, rng)
    want = acc * inp["row_scale"][:, None] * inp["col_scale"][None, :] + inp["bias"][None, :]
    want = _independent("silu", want) + inp["residual"]
    np.testing.assert_allclose(reference(acc, f, inp), want, rtol=1e-12)


def test_params_follow_the_order_and_shapes():
    f = Fusion(bias=True, residual=True, row_scale=True, col_scale=True)
    ps = f.params(33, 100, "bfloat16")
    assert tuple(p.name for p in ps) == PARAM_ORDER
    assert {p.name: (p.shape, p.dtype) for p in ps} == {
        "row_scale": ((33,), "float32"), "col_scale": ((100,), "float32"), "bias": ((100,), "float32"),
        "residual": ((33, 100), "bfloat16")}
    assert Fusion().params(1, 2, "float32") == ()
    assert Fusion(bias=True).inputs() == ("bias",)


def test_keywords_and_record_agree():
    assert fusion_of(bias=True, activation="gelu") == Fusion(bias=True, activation="gelu")
    assert fusion_of(fusion=Fusion(residual=True)) == Fusion(residual=True)
    with pytest.raises(ValueError, match="not both"):
        fusion_of(bias=True, fusion=Fusion(residual=True))
    with pytest.raises(ValueError, match="activation 'tanh'"):
        Fusion(activation="tanh")
    assert Fusion().empty and Fusion().describe() == "none"
    assert Fusion(bias=True, activation="relu", row_scale=True).describe() == "acc * row_scale + bias -> relu"


def test_tolerance_grows_with_the_output_rounding():
    assert tolerance(Fusion(), "f32")[0] < tolerance(Fusion(), "f16")[0] < tolerance(Fusion(), "bf16")[0]
    assert tolerance(Fusion(activation="gelu"), "bfloat16")[1] > 0
