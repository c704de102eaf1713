"""tvm_cdna4: AMD CDNA4 (gfx950) tile patterns, GEMM schedules and a wavefront emulator for TVM TIRx."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import ContractError  # noqa: E402
from .isa import CATALOG, lookup  # noqa: E402
from .patterns import register  # noqa: E402

register()  # T.rocm / T.amdgcn, ROCm scopes and build hooks (also run by the tvm_tirx entry point)

from .rocm.build import BuildResult, KernelInfo, build  # noqa: E402

__all__ = ["CATALOG", "BuildResult", "ContractError", "KernelInfo", "__version__", "build", "lookup", "register"]
