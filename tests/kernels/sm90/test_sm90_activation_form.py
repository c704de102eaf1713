"""silu / gelu in the tanh form (``Sm90Config.activation_form="tanh"``: one ``tanh.approx.f32`` an element
instead of ``ex2.approx`` and a reciprocal): the formula against the reference, the family's error bound
admitting ``tanh.approx``'s documented error for 16-bit outputs only, the emulator's worst-case ``tanhf``, the
plan's rule and the cost model's choice."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm import epilogue as e
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

X = np.linspace(-40.0, 40.0, 80001)


def tanh_ops(tanh):
    return SimpleNamespace(max=np.maximum, exp2=None, const=np.float64, f32=None, tanh=tanh)


@pytest.mark.parametrize("act", ["silu", "gelu"])
def test_the_tanh_form_is_the_reference_formula(act):
    with np.errstate(over="ignore"):
        want = e.activation(act, X, e._numpy_ops(np.float64))
    got = e.activation(act, X, tanh_ops(np.tanh))
    assert np.max(np.abs(got - want) / np.maximum(np.abs(X), 1.0)) < 1e-14


@pytest.mark.parametrize("act", ["silu", "gelu"])
def test_the_bound_admits_tanh_approx_for_16_bit_outputs_only(act):
    # tanh.approx's worst case (its largest relative error, toward zero: the emulator's tanhf) on every x: within
    # the bound of a bf16 / f16 C, beyond an f32 C's (where 1 + tanh cancels, the error is |x| / 2 of it)
    got = e.activation(act, X, tanh_ops(lambda w: np.tanh(w) * (1.0 - e.TANH_APPROX_ERROR)))
    fusion = Fusion(activation=act)
    for out in ("bf16", "f16"):
        ratio, ok = e.check(got, X[None, :], fusion, {}, out, approx_tanh=True)
        assert ok and ratio > 0.5, (out, ratio)  # the tanh term is most of the bound somewhere
        # a kernel that does not use the tanh form keeps the tight bound: the same outputs fail it
        assert not e.check(got, X[None, :], fusion, {}, out)[1]
    ratio, ok = e.check(got, X[None, :], fusion, {}, "f32", approx_tanh=True)
    assert not ok and ratio > 10


def test_the_emulator_validates_the_tanh_form_with_tanh_approx_s_worst_error():
    # gelu into f16 (the tighter 16-bit bound); silu into bf16 runs in test_sm90_residual_tma.py
    problem = GemmProblem(70, 64, 72, "bf16", "nt", "f16", Fusion(bias=True, activation="gelu"))
    v = gemm.validate(problem, "sm90", Sm90Config(64, 64, 2, 1, ctas=1, activation_form="tanh"))
    assert v.ok and v.where == "the CUDA emulator (no GPU runner)" and v.ratio <= 1.0
    assert gemm.plan(problem, "sm90", Sm90Config(64, 64, 2, 1, activation_form="tanh")).approx_tanh
    assert not gemm.plan(problem, "sm90", Sm90Config(64, 64, 2, 1, activation_form="ex2")).approx_tanh


def test_the_kernel_calls_tanhf_and_no_exponential():
    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.kernels.sm90 import gemm_emit

    problem = GemmProblem(64, 64, 64, "bf16", "nt", "bf16", Fusion(activation="silu"))
    text = device_function(gemm_emit.emit(gemm.plan(problem, "sm90", Sm90Config(64, 64, 2, 1, activation_form="tanh"))),
                           "sm90").script()
    # one tanhf per accumulator (64 x 64 over a warpgroup's 128 threads), which NVRTC's --use_fast_math makes
    # tanh.approx.f32 (checked with nvcc 13 by hand: 128 tanh.approx.f32, no ex2 / div, at 128x256)
    assert text.count('T.call_pure_extern("tanhf"') == 64 * 64 // 128 and "exp2" not in text


def test_the_cost_model_takes_the_tanh_form_for_a_16_bit_c_and_f32_refuses_it():
    def form(out, act):
        return gemm.plan(GemmProblem(4096, 4096, 4096, "bf16", "nt", out, Fusion(activation=act)), "sm90",
                         sms=132).config.activation_form
    assert form("bf16", "gelu") == form("f16", "silu") == "tanh"
    assert form("f32", "silu") == form("bf16", "relu") == form("bf16", None) == "ex2"
    with pytest.raises(ContractError, match="activation_form: tanh.approx's error is within a 16-bit C's bound") as x:
        gemm.plan(GemmProblem(64, 64, 64, "bf16", "nt", "f32", Fusion(activation="silu")), "sm90",
                  Sm90Config(64, 64, 2, 1, activation_form="tanh"))
    assert x.value.operand == "activation_form" and x.value.check == "parameters"
    with pytest.raises(ContractError, match="config activation_form: how silu and gelu are evaluated"):
        Sm90Config(64, 64, 2, 1, activation_form="erf").check(227 * 1024)
