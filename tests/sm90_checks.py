"""Shared checks of the sm90 kernels' CUDA source (CPU: nvcc, no GPU)."""

import shutil
import subprocess

import pytest


def assert_ptxas_assembles_without_spills(plans, tmp_path) -> None:
    """Each plan's CUDA source (``gemm_target.build_plan(p, cache=False).source``) assembled for sm_90a by nvcc with
    ``-Xptxas -v``: no error, no wgmma serialization warning (C7508), no spill stores; skipped without nvcc."""
    from tvm_cdna4.kernels.sm90 import gemm_target

    nvcc = shutil.which("nvcc") or shutil.which("/usr/local/cuda/bin/nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: nothing assembles the CUDA source here")
    for i, p in enumerate(plans):
        (tmp_path / f"k{i}.cu").write_text(gemm_target.build_plan(p, cache=False).source)
        done = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-c", "-Xptxas", "-v", f"k{i}.cu", "-o",
                               f"k{i}.o"], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "C7508" not in done.stderr and "0 bytes spill stores" in done.stderr, (i, done.stderr[-2000:])
