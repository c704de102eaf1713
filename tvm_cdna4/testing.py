"""pytest plugin for kernels written with tvm_cdna4 (registered through ``pytest11``: installing
the package is all a test file needs).

Markers (each skips the test, with a reason that says what is missing):

- ``@pytest.mark.gfx950``: needs an AMD gfx950 GPU through hip-python.
- ``@pytest.mark.cuda`` / ``@pytest.mark.cuda(arch="sm_90")``: needs an NVIDIA GPU visible to TVM
  (with ``arch``: of that compute capability or newer; an ``a``/``f``-suffixed arch exactly).
- ``@pytest.mark.llvm`` / ``@pytest.mark.llvm("ld.lld")``: needs the Debian llvm-22/lld-22 tools
  (``llc``, ``llvm-mca``, ``ld.lld``; or only the ones named), found as ``tvm_cdna4.build`` finds them.

Fixtures:

- ``run_gfx950(kernel, *arrays, **scalars)``: runs a gfx950 kernel on a gfx950 GPU when one is
  visible, otherwise in the CPU emulator (``tvm_cdna4.emulator.emulate``); outputs are written back
  into ``arrays``. ``run_gfx950.backend`` is ``"hardware"`` or ``"emulator"``.
- ``run_cuda(kernel, *arrays)``: likewise for CUDA kernels (a CUDA GPU through TIRx, or the
  emulator's ``sm80`` target).
- ``rng``: a ``numpy.random.Generator`` seeded from the test id (``zlib.crc32`` of the node id, the
  same on every run and machine); a failing test's report shows the seed.

Option ``--cdna4-backend {auto,emulator,hardware}`` (default ``auto``): where ``run_gfx950`` and
``run_cuda`` run; ``hardware`` without the GPU skips the test, saying so.

Detection happens when a marked test or a fixture first needs it, never at collection.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import tempfile
import zlib

import numpy as np
import pytest

BACKENDS = ("auto", "emulator", "hardware")
LLVM_TOOLS = ("llc", "llvm-mca", "ld.lld")
MARKERS = {
    "gfx950": "gfx950: needs an AMD gfx950 GPU through hip-python (skipped without one)",
    "cuda": "cuda(arch=None): needs an NVIDIA GPU, of compute capability arch (e.g. 'sm_90') or newer "
            "when given (skipped without one)",
    "llvm": "llvm(*tools): needs Debian llvm-22/lld-22 tools: llc, llvm-mca, ld.lld, or the tools named "
            "(skipped without them)",
}
_SEED = pytest.StashKey[int]()


# ---- what this machine has -----------------------------------------------------------------------

@functools.cache
def gfx950_missing() -> str | None:
    """None when a gfx950 GPU is visible through hip-python; otherwise why not."""
    if importlib.util.find_spec("hip") is None:
        return "hip-python not installed"
    from .runtime.hip import find_gfx950

    device, found = find_gfx950()
    return None if device is not None else found


@functools.cache
def cuda_arch() -> tuple[str | None, str]:
    """(``sm_XY`` of CUDA device 0 as TVM sees it, or None; what was found)."""
    import tvm_tirx.runtime as rt

    dev = rt.cuda(0)
    if not dev.exist:
        return None, "no CUDA device visible to TVM"
    return "sm_" + str(dev.compute_version).replace(".", ""), str(dev.device_name)


def cuda_missing(arch: str | None = None) -> str | None:
    """None when a CUDA GPU (of ``arch``: see ``arch_satisfies``) is visible; otherwise why not."""
    if arch is not None:
        _parse_arch(arch)
    have, found = cuda_arch()
    if have is None:
        return found
    if arch is not None and not arch_satisfies(have, arch):
        return f"found {have}, {found}"
    return None


def arch_satisfies(have: str, want: str) -> bool:
    """Whether a device of arch ``have`` runs ``want`` code: ``sm_80`` runs on sm_80 and newer,
    an arch-specific ``sm_90a`` / ``sm_100f`` only on its own compute capability."""
    have_cc, _ = _parse_arch(have)
    want_cc, specific = _parse_arch(want)
    return have_cc == want_cc if specific else have_cc >= want_cc


def _parse_arch(arch: str) -> tuple[int, bool]:
    m = re.fullmatch(r"sm_(\d+)([af]?)", str(arch))
    if m is None:
        raise pytest.UsageError(f"cuda marker: arch={arch!r}; expected a CUDA arch such as 'sm_90' or 'sm_90a'")
    return int(m.group(1)), bool(m.group(2))


def llvm_missing(tools=LLVM_TOOLS) -> str | None:
    """None when every LLVM tool in ``tools`` is found (``tvm_cdna4.rocm.build.llvm_tool``)."""
    from .rocm.build import llvm_tool

    missing = [t for t in tools if llvm_tool(t) is None]
    return f"missing: {', '.join(missing)}" if missing else None


def stable_seed(nodeid: str) -> int:
    """The ``rng`` seed of a test: ``zlib.crc32`` of its node id (not ``hash``, which is salted)."""
    return zlib.crc32(nodeid.encode())


# ---- running kernels -----------------------------------------------------------------------------

class KernelRunner:
    """Runs kernels of one target family (``"gfx950"`` or ``"cuda"``) on ``backend``
    (``"hardware"`` or ``"emulator"``); ``arrays`` bind tensor parameters in order, ``scalars``
    scalar parameters by name, outputs are written back into ``arrays``, which are returned."""

    def __init__(self, target: str, backend: str):
        self.target, self.backend = target, backend

    def __call__(self, kernel, *arrays, **scalars):
        if self.backend == "emulator":
            from .emulator import emulate

            return emulate(kernel, *arrays, target="gfx950" if self.target == "gfx950" else "sm80", **scalars)
        if self.target == "gfx950":
            from .runtime.hip import run_on_gfx950

            run_on_gfx950(kernel, *arrays, **scalars)
        else:
            _run_on_cuda(kernel, arrays, scalars)
        return arrays

    def __repr__(self):
        return f"<run_{self.target} on {self.backend}>"


def _run_on_cuda(kernel, arrays, scalars) -> None:
    """Compile ``kernel`` with TIRx for CUDA device 0, run it, copy every array back."""
    import tvm_ffi
    import tvm_tirx
    import tvm_tirx.runtime as rt
    from tvm_tirx.target import Target

    from .emulator import check_argument

    dev, arrays_left, args = rt.cuda(0), list(arrays), []
    for param in kernel.params:
        if hasattr(param.ty, "shape"):
            check_argument(param.name, param.ty, arrays_left[0])
            args.append(rt.tensor(arrays_left.pop(0), dev))
        elif param.name in scalars:
            args.append(scalars[param.name])
        else:
            raise ValueError(f"run_cuda: no value for kernel parameter {param.name}")
    exe = tvm_tirx.tirx.compile(kernel, target=Target({"kind": "cuda", "arch": cuda_arch()[0]}), pipeline="tirx")
    with tempfile.TemporaryDirectory(prefix="tvm_cdna4_") as workdir:
        lib = f"{workdir}/kernel.so"
        exe.export_library(lib)
        tvm_ffi.load_module(lib)[str(kernel.attrs["global_symbol"])](*args)
        dev.sync()
    tensors = [a for a in args if hasattr(a, "numpy")]
    for arr, tensor in zip(arrays, tensors):
        np.copyto(arr, tensor.numpy())


def _runner(request, target: str) -> KernelRunner:
    choice = request.config.getoption("cdna4_backend")
    missing = gfx950_missing() if target == "gfx950" else cuda_missing()
    if choice == "hardware" and missing:
        _skip(f"--cdna4-backend=hardware: {_need(target)} ({missing})")
    return KernelRunner(target, "emulator" if choice == "emulator" or missing else "hardware")


def _skip(reason: str):
    """Skip the running test, reported at the test's own location (as a skip marker is)."""
    raise pytest.skip.Exception(reason, _use_item_location=True)


def _need(target: str, arch: str | None = None) -> str:
    if target == "gfx950":
        return "needs an AMD gfx950 GPU through hip-python"
    if arch is None:
        return "needs an NVIDIA GPU"
    return f"needs an NVIDIA {arch} GPU" if _parse_arch(arch)[1] else f"needs an NVIDIA GPU of {arch} or newer"


# ---- pytest hooks and fixtures -------------------------------------------------------------------

def pytest_addoption(parser):
    group = parser.getgroup("tvm_cdna4")
    group.addoption("--cdna4-backend", choices=BACKENDS, default="auto",
                    help="where run_gfx950 / run_cuda run kernels: auto (the GPU when one is visible, "
                         "else the CPU emulator), emulator, or hardware (skip without the GPU)")


def pytest_configure(config):
    for line in MARKERS.values():
        config.addinivalue_line("markers", line)


def pytest_runtest_setup(item):
    if item.get_closest_marker("gfx950") is not None and (why := gfx950_missing()):
        _skip(f"{_need('gfx950')} ({why})")
    if (cuda := item.get_closest_marker("cuda")) is not None:
        arch = cuda.kwargs.get("arch")
        if why := cuda_missing(arch):
            _skip(f"{_need('cuda', arch)} ({why})")
    if (llvm := item.get_closest_marker("llvm")) is not None and (why := llvm_missing(llvm.args or LLVM_TOOLS)):
        _skip(f"needs Debian llvm-22/lld-22 tools ({why})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    seed = item.stash.get(_SEED, None)
    if seed is not None and report.failed:
        report.sections.append(("rng seed", f"np.random.default_rng({seed})  # zlib.crc32({item.nodeid!r})"))


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A numpy Generator seeded from the test id; the seed is shown when the test fails."""
    seed = stable_seed(request.node.nodeid)
    request.node.stash[_SEED] = seed
    request.node.user_properties.append(("rng seed", seed))
    return np.random.default_rng(seed)


@pytest.fixture
def run_gfx950(request) -> KernelRunner:
    """``run_gfx950(kernel, *arrays, **scalars)``: on a gfx950 GPU when visible, else emulated."""
    return _runner(request, "gfx950")


@pytest.fixture
def run_cuda(request) -> KernelRunner:
    """``run_cuda(kernel, *arrays)``: on a CUDA GPU when visible, else emulated (target sm80)."""
    return _runner(request, "cuda")
