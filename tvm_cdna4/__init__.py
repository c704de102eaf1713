"""tvm_cdna4: AMD CDNA4 (gfx950) tile patterns, GEMM schedules and a wavefront emulator for TVM TIRx."""

from __future__ import annotations

__version__ = "0.1.0"

from .isa import CATALOG, lookup  # noqa: E402

__all__ = ["CATALOG", "__version__", "lookup"]
