"""A minimal ``cuda.bindings.nvrtc`` over ``libnvrtc`` (ctypes), for tests on machines without
``cuda-bindings``: TIRx's own NVRTC driver (``tvm_tirx.support.nvcc._compile_cuda_nvrtc``) then
runs unchanged, so a test sees the registers and spills of the compiler TIRx really uses.

Only the calls that driver makes are provided, with cuda-bindings' conventions: every call
returns a tuple whose first item is an ``nvrtcResult``.
"""

from __future__ import annotations

import ctypes
import enum
import glob
import importlib.util
import os
import sys
import types


class nvrtcResult(enum.IntEnum):  # noqa: N801 - the cuda-bindings name
    NVRTC_SUCCESS = 0


def _res(rc: int):
    return nvrtcResult.NVRTC_SUCCESS if rc == 0 else int(rc)


def find_libnvrtc() -> str | None:
    """libnvrtc from the ``nvidia-cuda-nvrtc`` wheel, else the CUDA toolkit; None if neither."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations) if spec and spec.submodule_search_locations else []
    patterns = [os.path.join(r, "*", "lib", "libnvrtc.so.*") for r in roots]
    patterns += ["/usr/local/cuda/lib64/libnvrtc.so.*", "/usr/local/cuda-*/lib64/libnvrtc.so.*"]
    for pattern in patterns:
        hits = sorted(p for p in glob.glob(pattern) if "builtins" not in p and "alt" not in p)
        if hits:
            return hits[0]
    return None


def make_module(path: str) -> types.ModuleType:
    # libnvrtc dlopens libnvrtc-builtins from its own directory
    ctypes.CDLL(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*"))[0], mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(path)
    mod = types.ModuleType("cuda.bindings.nvrtc")
    mod.nvrtcResult = nvrtcResult

    def version():
        major, minor = ctypes.c_int(), ctypes.c_int()
        return _res(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))), major.value, minor.value

    def create(src, name, n_headers, headers, include_names):
        prog = ctypes.c_void_p()
        return _res(lib.nvrtcCreateProgram(ctypes.byref(prog), src, name, 0, None, None)), prog

    def compile_program(prog, n, opts):
        arr = (ctypes.c_char_p * n)(*opts)
        return (_res(lib.nvrtcCompileProgram(prog, n, arr)),)

    def size_getter(fn):
        def get(prog):
            size = ctypes.c_size_t()
            return _res(fn(prog, ctypes.byref(size))), size.value
        return get

    def buffer_getter(fn):
        def get(prog, out: bytearray):
            buf = ctypes.create_string_buffer(len(out))
            rc = fn(prog, buf)
            out[:] = buf.raw[: len(out)]
            return (_res(rc),)
        return get

    def destroy(prog):
        return (_res(lib.nvrtcDestroyProgram(ctypes.byref(prog))),)

    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    mod.nvrtcVersion = version
    mod.nvrtcCreateProgram = create
    mod.nvrtcCompileProgram = compile_program
    mod.nvrtcGetProgramLogSize = size_getter(lib.nvrtcGetProgramLogSize)
    mod.nvrtcGetProgramLog = buffer_getter(lib.nvrtcGetProgramLog)
    mod.nvrtcGetCUBINSize = size_getter(lib.nvrtcGetCUBINSize)
    mod.nvrtcGetCUBIN = buffer_getter(lib.nvrtcGetCUBIN)
    mod.nvrtcGetPTXSize = size_getter(lib.nvrtcGetPTXSize)
    mod.nvrtcGetPTX = buffer_getter(lib.nvrtcGetPTX)
    mod.nvrtcDestroyProgram = destroy
    mod.nvrtcGetErrorString = lambda rc: (nvrtcResult.NVRTC_SUCCESS, lib.nvrtcGetErrorString(int(rc)))
    return mod


def install(path: str) -> None:
    """Make ``from cuda.bindings import nvrtc`` return the shim (for this process)."""
    nvrtc = make_module(path)
    cuda = sys.modules.setdefault("cuda", types.ModuleType("cuda"))
    bindings = sys.modules.setdefault("cuda.bindings", types.ModuleType("cuda.bindings"))
    cuda.__path__ = getattr(cuda, "__path__", [])
    bindings.__path__ = getattr(bindings, "__path__", [])
    cuda.bindings = bindings
    bindings.nvrtc = nvrtc
    sys.modules["cuda.bindings.nvrtc"] = nvrtc


def find_cuda_root() -> str | None:
    """A CUDA toolkit root with the headers NVRTC compiles against (TIRx looks for it as CUDA_PATH)."""
    for root in [os.environ.get("CUDA_PATH", ""), "/usr/local/cuda", *sorted(glob.glob("/usr/local/cuda-*"))]:
        if root and os.path.isfile(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    return None


COMPILE_LOG_SCRIPT = """
import json, sys
sys.path[:0] = [{tests!r}, {root!r}]
try:
    from cuda.bindings import nvrtc  # noqa: F401 - the real bindings when installed
except ImportError:
    import nvrtc_shim
    nvrtc_shim.install({lib!r})
from tvm_cdna4.tirx_private import cuda_compile_log
sys.stdout.write(json.dumps([cuda_compile_log(open(src).read(), {arch!r}) for src in {srcs!r}]))
"""


def compile_logs(source_paths: list[str], arch: str, repo_root: str) -> list[str]:
    """TIRx's NVRTC compile of each .cu file, all in one child process (the shim stays out of this
    one; one interpreter and TIRx import for all of them)."""
    import json
    import subprocess

    import child_python

    lib, cuda = find_libnvrtc(), find_cuda_root()
    script = COMPILE_LOG_SCRIPT.format(tests=os.path.dirname(os.path.abspath(__file__)), root=repo_root, lib=lib,
                                       srcs=list(source_paths), arch=arch)
    env = child_python.env(CUDA_PATH=cuda or "")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    if r.returncode:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout)

