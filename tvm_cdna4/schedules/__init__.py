"""GEMM schedules written in TVM TIRx.

CUDA (sm_80 class, also runs on sm_90): :func:`cuda_gemm` (cp.async + ldmatrix + mma.sync).
"""

from .cuda_gemm import GemmConfig, build, cuda_gemm, cuda_source, default_config

__all__ = ["GemmConfig", "build", "cuda_gemm", "cuda_source", "default_config"]
