"""The error bounds of PTX's approximate math instructions that kernels emit and the CUDA emulator models
(pure data: the fused epilogue's error bound, ``kernels.gemm.epilogue``, reads them without TIRx)."""

from __future__ import annotations

TANH_APPROX_ERROR = 2.0 ** -10.987
"""The largest relative error of ``tanh.approx.f32`` over its whole range (PTX ISA 9.7.3.22, tanh: "Max relative
error: 2^-10.987"; subnormal results are flushed to zero)."""

__all__ = ["TANH_APPROX_ERROR"]
