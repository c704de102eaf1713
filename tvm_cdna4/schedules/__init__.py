"""GEMM schedules written in TVM TIRx.

- gfx950 (CDNA4 patterns): :func:`gfx950_gemm` (MFMA + ds_read_tr, every dense dtype) and
  :func:`gfx950_mx_gemm` (MX block-scaled formats through the scaled MFMA).
- CUDA (sm_80 class, also runs on sm_90): :func:`cuda_gemm` (cp.async + ldmatrix + mma.sync), and the
  attention forward :func:`sm80_attention` / :func:`build_sm80_attention` (``attention_sm80``).
- Attention forward, both targets: :mod:`.attention` (``attention.plan / emit / build / validate``).

The names load on first use, so the CUDA schedule imports without the gfx950 patterns (the GPU
machine's benchmark runs it from a bare TIRx install).
"""

from __future__ import annotations

import importlib

_WHERE = {
    "GemmConfig": "cuda_gemm", "build": "cuda_gemm", "cuda_gemm": "cuda_gemm", "cuda_source": "cuda_gemm",
    "default_config": "cuda_gemm",
    "build_sm80_attention": "attention_sm80", "sm80_attention": "attention_sm80",
    "Gfx950GemmConfig": "gfx950_gemm", "gfx950_gemm": "gfx950_gemm",
    "MxGemmConfig": "gfx950_mx_gemm", "gfx950_mx_gemm": "gfx950_mx_gemm",
    "AttentionConfig": "attention_plan", "AttentionProblem": "attention_plan",
}
_MODULES = ("attention",)  # submodules named as they are


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    if name in _MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted((*_WHERE, *_MODULES))
