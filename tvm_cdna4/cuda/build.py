"""The CUDA build, beside ``rocm/build.py``: a TIRx PrimFunc compiled for an NVIDIA arch, exported,
and kept in the on-disk build cache (``tvm_cdna4.cache``).

``cached_build(kind, key, make, arch, compiler, config)``: the ``CudaBuild`` (the generated CUDA C,
the exported TIRx library, the device module's backend config) of ``make()``'s PrimFunc, read from the
cache under ``key`` (``kernels.common.cache_key``: the whole plan record, the sources' digest, the arch
and the compiler) or compiled with ``compile_blobs`` and stored. Every CUDA kernel of the package (the
sm80 GEMMs, the decode GEMM, the sm80 attention) builds through it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

COMPILERS = ("nvcc", "nvrtc")


@dataclass(frozen=True)
class CudaBuild:
    """A compiled CUDA kernel: the generated CUDA C and the exported TIRx library (host code plus the
    CUDA module, which the loading machine compiles with the chosen device compiler)."""

    source: str
    library: bytes
    config: object = None
    """The config built (the planner's or the tuned choice when the build got none)."""
    device_config: str = ""
    """The device module's backend config (JSON), which its loader passes to the device compiler
    with ``source`` (``runtime.cuda.precompile`` compiles the pair ahead of the load)."""

    def export_library(self, path) -> str:
        """Write the library for ``tvm_ffi.load_module`` (see ``runtime.cuda.load_kernel``)."""
        with open(path, "wb") as f:
            f.write(self.library)
        return str(path)


def check_compiler(compiler) -> None:
    """The device compiler: None (TIRx's default, NVRTC) or one of ``COMPILERS``."""
    if compiler is not None and compiler not in COMPILERS:
        raise ValueError(f"compiler must be 'nvcc' or 'nvrtc' (or None for TIRx's default), got {compiler!r}")


def compile_blobs(func, arch: str, compiler: str | None = None) -> dict[str, bytes]:
    """Run TIRx on ``func`` for ``arch``: the CUDA source, the exported library and the device
    module's backend config, as cache blobs."""
    import tvm_tirx
    from tvm_tirx.target import Target

    from ..tirx_private import cuda_device_group, shared_cuda_lowering
    from .wgmma_check import check_accumulators

    check_accumulators(func)
    attrs = {"kind": "cuda", "arch": arch}
    if compiler is not None:
        attrs["backend_config"] = {"cuda": {"compiler": compiler}}
    with shared_cuda_lowering():
        exe = tvm_tirx.tirx.compile(func, target=Target(attrs), pipeline="tirx")
    with tempfile.TemporaryDirectory(prefix="tvm_cdna4_cuda_") as tmp:
        path = os.path.join(tmp, "kernel.so")
        exe.export_library(path)
        with open(path, "rb") as f:
            library = f.read()
    source, device_config = cuda_device_group(exe)
    return {"source": source.encode(), "library": library, "device_config": device_config.encode()}


def cached_build(kind: str, key: dict, make_blobs, config=None, enabled: bool = True) -> CudaBuild:
    """``make_blobs()`` (``compile_blobs`` of the kernel) through the build cache
    (``cache.cached(kind, key, ...)``; a damaged entry is a miss) as a ``CudaBuild``."""
    from ..cache import cached

    blobs = cached(kind, key, make_blobs, enabled=enabled, required=("source", "library"))
    return CudaBuild(source=blobs["source"].decode(), library=blobs["library"], config=config,
                     device_config=blobs.get("device_config", b"").decode())


__all__ = ["COMPILERS", "CudaBuild", "cached_build", "check_compiler", "compile_blobs"]
