"""Running the package's kernels: host-side inputs, references, loading, launching and timing.

- :mod:`tvm_cdna4.runtime.cuda`: the CUDA GEMM on an NVIDIA GPU through PyTorch and the TVM CUDA
  runtime (importing it needs neither).
- :mod:`tvm_cdna4.runtime.hip`: a gfx950 code object on an AMD GPU through ``hip-python``.

This layer sits above the schedules (it builds their kernels) and below the CLI.
"""
