"""The pytest plugin ``tvm_cdna4.testing``: test files in a temporary directory outside the repository,
run by pytest with nothing but the installed package (the ``pytest11`` entry point)."""

import zlib

import child_python
import numpy as np
import pytest

from tvm_cdna4 import testing

pytest_plugins = ["pytester"]

GFX950_KERNEL = '''
import numpy as np
import pytest
from tvm_tirx.script import tirx as T


def double():
    @T.function
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), scale: T.float32):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            B[tx] = A[tx] * scale

    return kernel
'''

USER_TEST = GFX950_KERNEL + '''

def test_double(run_gfx950):
    a = np.arange(128, dtype=np.float32)
    b = np.zeros_like(a)
    run_gfx950(double(), a, b, scale=2.0)
    np.testing.assert_array_equal(b, 2 * a)
    print("backend:", run_gfx950.backend)


@pytest.mark.gfx950
def test_double_on_hardware(run_gfx950):
    a = np.arange(128, dtype=np.float32)
    b = np.zeros_like(a)
    run_gfx950(double(), a, b, scale=3.0)
    np.testing.assert_array_equal(b, 3 * a)
'''


@pytest.mark.skipif(testing.gfx950_missing() is None, reason="shows the run without a gfx950 GPU")
def test_user_file_outside_the_repo_runs_in_the_emulator_and_skips_hardware(pytester, monkeypatch):
    """Must show: a user's test file, in a temporary directory outside the repository, using only
    ``run_gfx950`` and the ``gfx950`` marker. A fresh pytest process: no conftest, no -p."""
    pytester.makepyfile(test_user=USER_TEST)
    monkeypatch.setenv("PYTHONPATH", child_python.env()["PYTHONPATH"])
    result = pytester.runpytest_subprocess("-rs", "-s", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "*backend: emulator*",
        f"SKIPPED [[]1[]] test_user.py:*: needs an AMD gfx950 GPU through hip-python ({testing.gfx950_missing()})",
    ])


def test_hardware_backend_without_gpu_skips_with_reason(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest("-rs", "--cdna4-backend=hardware")
    if testing.gfx950_missing() is None:
        result.assert_outcomes(passed=2)
    else:
        result.assert_outcomes(skipped=2)
        result.stdout.fnmatch_lines(["*--cdna4-backend=hardware: needs an AMD gfx950 GPU through hip-python (*)"])


def test_emulator_backend_is_forced_by_the_option(pytester):
    pytester.makepyfile(test_user=GFX950_KERNEL + '''
def test_backend(run_gfx950):
    assert run_gfx950.backend == "emulator"
''')
    pytester.runpytest("--cdna4-backend=emulator").assert_outcomes(passed=1)


def test_backend_option_refuses_unknown_values(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest("--cdna4-backend=gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--cdna4-backend: invalid choice: 'gpu'*"])


def test_run_cuda_emulates_without_a_cuda_gpu(pytester, monkeypatch):
    pytester.makepyfile(test_cuda='''
import numpy as np
from tvm_tirx.script import tirx as T


def shuffle():
    @T.function
    def kernel(X: T.Tensor((64,), "int32"), Out: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        Out[tid] = T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), X[tid], 1, 32)

    return kernel


def test_shuffle(run_cuda):
    x = np.arange(64, dtype=np.int32)
    out = np.zeros_like(x)
    run_cuda(shuffle(), x, out)
    np.testing.assert_array_equal(out, x ^ 1)
    assert run_cuda.backend == ("emulator" if NO_GPU else "hardware")
'''.replace("NO_GPU", repr(testing.cuda_missing() is not None)))
    # a fresh process: an in-process run would drop the emulator modules it imports first (torch hidden
    # where no GPU needs it: child_python)
    if testing.cuda_missing() is not None:
        monkeypatch.setenv("PYTHONPATH", child_python.env()["PYTHONPATH"])
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_markers_skip_with_what_is_missing(pytester):
    pytester.makepyfile(test_marks='''
import pytest

@pytest.mark.cuda
def test_any_cuda():
    pass

@pytest.mark.cuda(arch="sm_90a")
def test_hopper():
    pass

@pytest.mark.llvm("llc", "no-such-llvm-tool")
def test_tools():
    pass

@pytest.mark.llvm("llc")
def test_llc():
    pass
''')
    result = pytester.runpytest("-rs", "--strict-markers")
    lines = ["SKIPPED [[]1[]] test_marks.py:11: needs Debian llvm-22/lld-22 tools (missing: no-such-llvm-tool)"]
    if testing.cuda_missing() is not None:
        why = testing.cuda_missing()
        lines = [f"SKIPPED [[]1[]] test_marks.py:3: needs an NVIDIA GPU ({why})",
                 f"SKIPPED [[]1[]] test_marks.py:7: needs an NVIDIA sm_90a GPU ({why})", *lines]
    result.stdout.fnmatch_lines(lines, consecutive=False)
    llc = testing.llvm_missing(("llc",)) is None
    cuda = testing.cuda_missing() is None
    result.assert_outcomes(passed=llc + cuda + (testing.cuda_missing("sm_90a") is None),
                           skipped=(not llc) + 1 + 2 * (not cuda))


def test_cuda_marker_refuses_a_malformed_arch(pytester):
    pytester.makepyfile(test_arch='''
import pytest

@pytest.mark.cuda(arch="hopper")
def test_x():
    pass
''')
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*cuda marker: arch='hopper'; expected a CUDA arch such as 'sm_90' or 'sm_90a'*"])


@pytest.mark.parametrize("have, want, ok", [("sm_90", "sm_80", True), ("sm_80", "sm_90", False),
                                             ("sm_90", "sm_90a", True), ("sm_100", "sm_90a", False)])
def test_arch_satisfies(have, want, ok):
    assert testing.arch_satisfies(have, want) is ok


def test_rng_is_seeded_from_the_test_id_and_the_seed_is_shown_on_failure(pytester):
    pytester.makepyfile(test_seed='''
import numpy as np

def test_fails(rng):
    print("first draw", rng.integers(1 << 30))
    assert False

def test_passes(rng):
    pass
''')
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, passed=1)
    seed = zlib.crc32(b"test_seed.py::test_fails")
    result.stdout.fnmatch_lines([
        f"first draw {np.random.default_rng(seed).integers(1 << 30)}",
        "*- rng seed -*",
        f"np.random.default_rng({seed})  # zlib.crc32('test_seed.py::test_fails')",
    ], consecutive=False)
    result.stdout.no_fnmatch_line(f"*default_rng({zlib.crc32(b'test_seed.py::test_passes')})*")


def test_rng_fixture_here_uses_the_plugin(rng, request):
    assert rng.integers(1 << 30) == np.random.default_rng(zlib.crc32(request.node.nodeid.encode())).integers(1 << 30)
