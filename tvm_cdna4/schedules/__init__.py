"""GEMM schedules written in TVM TIRx.

- gfx950 (CDNA4 patterns): :func:`gfx950_gemm` (MFMA + ds_read_tr, every dense dtype) and
  :func:`gfx950_mx_gemm` (MX block-scaled formats through the scaled MFMA).
- CUDA (sm_80 class, also runs on sm_90): :func:`cuda_gemm` (cp.async + ldmatrix + mma.sync).
"""

from .cuda_gemm import GemmConfig, build, cuda_gemm, cuda_source, default_config
from .gfx950_gemm import Gfx950GemmConfig, gfx950_gemm
from .gfx950_mx_gemm import MxGemmConfig, gfx950_mx_gemm

__all__ = ["GemmConfig", "Gfx950GemmConfig", "MxGemmConfig", "build", "cuda_gemm", "cuda_source", "default_config",
           "gfx950_gemm", "gfx950_mx_gemm"]
