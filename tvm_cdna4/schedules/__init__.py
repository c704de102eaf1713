"""Deprecated: the kernels moved to :mod:`tvm_cdna4.kernels` in 0.2.0 (CHANGELOG.md).

Each old module ``tvm_cdna4.schedules.X`` is an alias of its new home (``tvm_cdna4._deprecated``),
with a ``DeprecationWarning`` naming it; the package's lazy names below likewise. Removed in 0.3.0.
"""

from __future__ import annotations

import importlib
import warnings

_WHERE = {
    "GemmConfig": "kernels.sm80.gemm", "build": "kernels.sm80.gemm", "cuda_gemm": "kernels.sm80.gemm",
    "cuda_source": "kernels.sm80.gemm", "default_config": "kernels.sm80.gemm",
    "build_sm80_attention": "kernels.sm80.attention", "sm80_attention": "kernels.sm80.attention",
    "Gfx950GemmConfig": "kernels.gfx950.gemm", "gfx950_gemm": "kernels.gfx950.gemm",
    "MxGemmConfig": "kernels.gfx950.mx_gemm", "gfx950_mx_gemm": "kernels.gfx950.mx_gemm",
    "AttentionConfig": "kernels.gfx950.attention_plan", "AttentionProblem": "kernels.attention.problem",
}


def __getattr__(name: str):
    if name in _WHERE:
        new = f"tvm_cdna4.{_WHERE[name]}"
        warnings.warn(f"tvm_cdna4.schedules.{name} is deprecated: use {new}.{name} (removed in tvm_cdna4 0.3.0)",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)
    try:
        return importlib.import_module(f".{name}", __name__)
    except ModuleNotFoundError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


__all__ = sorted(_WHERE)
