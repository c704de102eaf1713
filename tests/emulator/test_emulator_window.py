"""A launch restricted to some workgroups (``emulate(..., workgroups=...)``) and tensors held in part
(``emulator.Window``): how the sm80 GEMM's last CTA of a problem with 2^31-element operands is
emulated (tests/kernels/sm80/test_cuda_offsets64.py) without the whole tensors in memory."""

from __future__ import annotations

import numpy as np
import pytest
from tvm_tirx.script import tirx as T

from tvm_cdna4.emulator import EmulationError, Window, emulate

CTAS, THREADS = 8, 32
SIZE = CTAS * THREADS


@T.function
def scale_kernel(A: T.Tensor((SIZE,), "float32"), C: T.Tensor((SIZE,), "float32"), R: T.Tensor((CTAS,), "float32")):
    # C[i] = 2 A[i] through a plain load and a ptx store; R[cta] += A[i] by atomics
    T.device_entry(launch=T.cuda.LaunchConfig(grid=CTAS, block=THREADS))
    pid = T.cuda.block_idx("x")
    tid = T.cuda.thread_idx("x")
    v = T.alloc_tensor(ty_args=[T.Tensor((1,), "float32", scope="local", layout="default")])
    T.ptx["ld.global.cg.f32"](v[0], A.ptr_to([pid * THREADS + tid]))
    T.ptx["st.global.f32"](C.ptr_to([pid * THREADS + tid]), v[0] * T.float32(2))
    T.ptx["red.global.add.f32"](R.ptr_to([pid]), A[pid * THREADS + tid])


def _inputs():
    a = np.arange(SIZE, dtype=np.float32)
    return a, np.full(SIZE, np.nan, np.float32), np.zeros(CTAS, np.float32)


def test_a_restricted_launch_runs_only_its_workgroups():
    a, c, r = _inputs()
    emulate(scale_kernel, a, c, r, target="sm80", workgroups=[5, 2])
    ran = np.zeros(SIZE, bool)
    ran[2 * THREADS:3 * THREADS] = ran[5 * THREADS:6 * THREADS] = True
    np.testing.assert_array_equal(c[ran], 2 * a[ran])
    assert np.isnan(c[~ran]).all()
    np.testing.assert_array_equal(r, [a[w * THREADS:(w + 1) * THREADS].sum() if w in (2, 5) else 0 for w in range(CTAS)])


def test_windows_hold_what_the_workgroups_touch():
    a, c, r = _inputs()
    lo, hi = 6 * THREADS, SIZE  # the last two workgroups' elements
    a_part, c_part = a[lo:hi].copy(), c[lo:hi].copy()
    emulate(scale_kernel, Window((SIZE,), np.float32, lo, a_part), Window((SIZE,), np.float32, lo, c_part),
            Window((CTAS,), np.float32, 6, r[6:].copy()), target="sm80", workgroups=[6, 7])
    np.testing.assert_array_equal(c_part, 2 * a[lo:hi])


def test_an_access_outside_the_part_held_names_it():
    a, c, r = _inputs()
    window = Window((SIZE,), np.float32, 6 * THREADS, a[6 * THREADS:].copy())
    with pytest.raises(EmulationError, match=r"'A': bytes \[640, 644\) are outside the part of it the emulator holds "
                                             r"\(bytes \[768, 1024\) of 1024"):
        emulate(scale_kernel, window, c, r, target="sm80", workgroups=[5])


@pytest.mark.parametrize("workgroups", [[8], [-1], [], [1.5]])
def test_workgroups_outside_the_launch_are_refused(workgroups):
    with pytest.raises(ValueError, match=r"workgroups: expected linear workgroup indices in 0\.\.7"):
        emulate(scale_kernel, *_inputs(), target="sm80", workgroups=workgroups)


def test_a_window_must_fit_its_tensor_and_dtype():
    with pytest.raises(ValueError, match=r"elements \[250, 260\) are not inside the 256 elements"):
        Window((SIZE,), np.float32, 250, np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="C-contiguous numpy array of dtype float32"):
        Window((SIZE,), np.float32, 0, np.zeros(10, np.float64))
    with pytest.raises(ValueError, match=r"parameter A: expected dtype float32; found float16"):
        emulate(scale_kernel, Window((SIZE,), np.float16, 0, np.zeros(10, np.float16)), *_inputs()[1:], target="sm80")
