"""CUDA beside ROCm: the CUDA build (``cuda.build``) of the package's TIRx kernels."""
