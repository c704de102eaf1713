"""Whole-kernel rules as IR analyses (tvm_cdna4.rocm.analysis): lane dependence through lets,
buffers and nested control flow; wave-uniform branches accepted; waves against the wave axis."""

import numpy as np
import pytest

import analysis_kernels as K
import tvm_cdna4
from tvm_cdna4.emulator import emulate
from tvm_cdna4.errors import ContractError

MFMA = "mfma_f32_16x16x32_f16"

REFUSED = {
    "let-bound condition": (K.let_bound_condition, r"runs under `if half:`, which is lane-varying \(it depends on threadIdx.x `tx`\)"),
    "register buffer": (K.buffer_condition, r"runs under `if flag\[0\] == 0:`, which is lane-varying \(it reads `flag`, which holds lane-varying data"),
    "LDS buffer": (K.shared_buffer_condition, r"runs under `if S\[5\] < 3:`, which is lane-varying \(it reads `S`, which holds lane-varying data"),
    "loop bound in a uniform branch": (K.nested_loop_bound, r"runs under `for i in range\(0, tx % 4\):`, which is lane-varying"),
    "loop variable against a let": (K.nested_loop_variable, r"runs under `if i == quarter:`, which is lane-varying \(it depends on threadIdx.x `tx`\)"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_lane_varying_control_is_refused(case):
    make, where = REFUSED[case]
    with pytest.raises(ContractError, match=rf"^{MFMA}: a wave-collective instruction {where}.*all 64 lanes of a wave must execute it") as info:
        tvm_cdna4.build(make())
    assert (info.value.check, info.value.opcode) == ("wave-uniform control", MFMA)


def test_the_emulator_runs_the_same_rule():
    with pytest.raises(ContractError, match=r"runs under `if half:`"):
        emulate(K.let_bound_condition(), np.zeros((64, 4), np.float32))


# wave-uniform branches: accepted, and the waves that branch in compute 32 = sum over K of 1 * 1
@pytest.mark.parametrize("make, threads, scalars, computing", [
    (K.wave_id_branch, 128, {}, {0}),
    (K.thread_index_over_64_branch, 256, {}, {1, 3}),
    (K.kernel_argument_branch, 64, {"n": 4}, {0, 0}),  # iterations 1 and 3: 2 x 32
    (K.boolean_and_branch, 128, {}, {1}),  # `cond & True`: the integer `x & 1` rewrite must not apply
], ids=["wave_id", "tx // 64 and tx >> 6", "kernel argument and loop variable", "boolean &"])
def test_wave_uniform_control_is_accepted(make, threads, scalars, computing):
    kernel = make(threads)
    assert "v_mfma_f32_16x16x32_f16" in tvm_cdna4.build(kernel).asm
    d = np.full((threads, 4), -1, np.float32)
    emulate(kernel, d, **scalars)
    per_wave = [float(np.unique(d[w * 64:(w + 1) * 64])[0]) for w in range(threads // 64)]
    want = [64.0 if scalars else 32.0 if w in computing else 0.0 for w in range(threads // 64)]
    assert per_wave == want


@pytest.mark.parametrize("threads, axis", [(128, 4), (64, 2), (256, 2), (192, 4)])
def test_workgroup_waves_must_equal_the_wave_axis(threads, axis):
    with pytest.raises(ContractError, match=rf"^{MFMA}: operand Df\[0:{axis}, 0, 0, 0:16, 0:16\]: scope='workgroup' launches "
                       rf"{threads} threads \({threads // 64} waves\), but the operand has a wave axis of {axis}: .*; "
                       rf"expected {axis * 64} threads, found {threads}\. Suggestion: launch {axis * 64} threads") as info:
        tvm_cdna4.build(K.workgroup_waves(threads, axis))
    assert info.value.check == "wave count"


def test_matching_waves_build():
    assert "v_mfma_f32_16x16x32_f16" in tvm_cdna4.build(K.workgroup_waves(256, 4)).asm
