"""tvm_cdna4: AMD CDNA4 (gfx950) tile patterns, GEMM schedules and a wavefront emulator for TVM TIRx.

Importing the package is cheap: the catalog (numpy, ml_dtypes) and TIRx are imported on first use of ``build``/``register`` (or when the
program imports ``tvm_tirx``, whose ``tvm_tirx.backends`` entry point registers ``T.rocm`` /
``T.amdgcn``), so the pytest plugin (``tvm_cdna4.testing``) costs other test sessions nothing.
With TIRx's autoload off (``TVM_TIRX_DEVICE_BACKEND_AUTOLOAD=0``) call ``tvm_cdna4.register()``
before writing ``T.rocm`` / ``T.amdgcn``.
"""

from __future__ import annotations

import sys

__version__ = "0.1.0"

from .errors import ContractError  # noqa: E402

_BUILD_NAMES = ("BuildResult", "KernelInfo", "build")
_CATALOG_NAMES = ("CATALOG", "lookup")  # the catalog imports numpy and ml_dtypes: on first use too


def register():
    """``T.rocm`` / ``T.amdgcn``, the ROCm scopes and the build hooks (idempotent; ``rocm.build.register``)."""
    from .rocm.build import register as _register

    return _register()


def backend_entry_point():
    """``tvm_tirx.backends`` entry point (called at ``import tvm_tirx``)."""
    register()


def __getattr__(name: str):
    if name in _CATALOG_NAMES:
        from . import isa

        return getattr(isa, name)
    if name in _BUILD_NAMES:
        from .rocm import build as _build

        _build.register()
        return getattr(_build, name)
    raise AttributeError(f"module 'tvm_cdna4' has no attribute {name!r}")


if "tvm_tirx" in sys.modules:  # TIRx already loaded (its entry point may be disabled): register now
    register()

__all__ = ["CATALOG", "BuildResult", "ContractError", "KernelInfo", "__version__", "backend_entry_point", "build", "lookup",
           "register"]
