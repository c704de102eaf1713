"""On a real gfx950 GPU: build the code object, launch, compare with numpy. The ``gfx950`` marker
(tvm_cdna4.testing) skips them without one."""

import numpy as np
import pytest
from tvm_tirx.script import tirx as T

import tvm_cdna4
from tvm_cdna4.emulator import compare
from tvm_cdna4.probes import mfma_probe
from tvm_cdna4.runtime.hip import kernel_args, pack_args
from tvm_cdna4.kernels.gfx950.gemm import gfx950_gemm


def test_kernel_argument_layout_from_metadata():
    # runs everywhere: the launcher's argument packing reads the same metadata the loader uses
    args = kernel_args(tvm_cdna4.build(gfx950_gemm(64, 64, 64)).asm)
    assert [(size) for _, _, size in args] == [8, 8, 8]
    assert [off for _, off, _ in args] == [0, 8, 16]


def scale_kernel():
    @T.function
    def kernel(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), scale: T.float32):
        with T.device_entry():
            bx = T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 128)
            B[tx] = A[tx] * scale

    return kernel


def test_launch_extents_of_the_kernel_and_of_its_device_function():
    # runs everywhere: the grid and workgroup run_on_gfx950 launches (rocm.launch, the one walk the
    # emulator and the whole-kernel rules read too)
    from tvm_cdna4.emulator import device_function
    from tvm_cdna4.rocm.launch import LaunchExtents, launch_extents

    kernel = gfx950_gemm(300, 200, 64)
    want = LaunchExtents(grid={"x": 6}, block={"x": 256})  # ceil(300 / 128) * ceil(200 / 128) tiles
    assert launch_extents(kernel.body) == want == launch_extents(device_function(kernel).body)
    assert want.constant("run_on_gfx950") == ({"x": 6}, {"x": 256})
    with pytest.raises(ValueError, match=r"^emulate: the launch extent of blockIdx.x is not a constant$"):
        LaunchExtents(grid={"x": None}, block={"x": 64}).constant("emulate")


def test_kernel_arguments_pack_pointers_and_scalars():
    # runs everywhere: run_on_gfx950 (and so run_gfx950) passes scalar parameters by name
    layout = kernel_args(tvm_cdna4.build(scale_kernel()).asm)
    assert layout == [("A", 0, 8), ("B", 8, 8), ("scale", 16, 4)]
    values = {"A": (1).to_bytes(8, "little"), "B": (2).to_bytes(8, "little"), "scale": np.float32(1.5).tobytes()}
    assert pack_args(layout, values) == values["A"] + values["B"] + values["scale"]
    with pytest.raises(ValueError, match="no value for kernel parameter scale"):
        pack_args(layout, {"A": values["A"], "B": values["B"]})


@pytest.mark.gfx950
@pytest.mark.parametrize("shape", [(257, 255, 130), (256, 192, 320)], ids=["edges", "buffer-loads"])
@pytest.mark.parametrize("dtype, layout", [("f16", "nn"), ("bf16", "tn"), ("fp8", "nt"), ("i8", "tt")])
def test_gemm_on_gfx950(dtype, layout, shape):
    from gfx950_gemm_kernels import gemm_inputs

    from tvm_cdna4.runtime.hip import run_on_gfx950
    from tvm_cdna4.kernels.gfx950.gemm import DTYPES

    rng = np.random.default_rng(0)
    M, N, K = shape
    a, b = gemm_inputs(rng, dtype, M, N, K)
    A = np.ascontiguousarray(a.T) if layout[0] == "t" else a
    B = np.ascontiguousarray(b.T) if layout[1] == "t" else b
    out = DTYPES[dtype].outs[0]
    C = np.zeros((M, N), np.int32 if out == "i32" else np.float32)
    run_on_gfx950(gfx950_gemm(M, N, K, dtype, layout), A, B, C)
    compare("C", C, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2)


@pytest.mark.gfx950
@pytest.mark.parametrize("layout", ["nt", "nn", "tn", "tt"])
@pytest.mark.parametrize("dtype", ["mxfp8", "mxbf8", "mxfp6", "mxbf6", "mxfp4"])
def test_mx_gemm_on_gfx950(dtype, layout):
    """Every layout: the M/N-contiguous operands through ds_read_tr8/tr6/tr4 on the hardware."""
    from tvm_cdna4.isa import formats
    from tvm_cdna4.runtime.hip import run_on_gfx950
    from tvm_cdna4.kernels.gfx950.mx_gemm import MX_FORMATS, gfx950_mx_gemm, pack_operands

    rng = np.random.default_rng(0)
    M, N, K, fmt = 200, 136, 384, MX_FORMATS[dtype]
    a = rng.normal(size=(M, K)).astype(formats.fmt(fmt).dtype)
    b = rng.normal(size=(K, N)).astype(formats.fmt(fmt).dtype)
    sa, sb = (rng.integers(122, 133, (n, K // 32)).astype(np.uint8) for n in (M, N))
    C = np.zeros((M, N), np.float32)
    run_on_gfx950(gfx950_mx_gemm(M, N, K, dtype, layout), *pack_operands(a, b, fmt, layout), sa, sb, C)
    a64 = a.astype(np.float64) * np.exp2(np.repeat(sa - 127.0, 32, axis=1))
    b64 = b.astype(np.float64) * np.exp2(np.repeat(sb - 127.0, 32, axis=1)).T
    compare("C", C, a64 @ b64, rtol=1e-5, atol=1e-5 * (np.abs(a64) @ np.abs(b64)))


@pytest.mark.gfx950
def test_probe_on_gfx950():
    from tvm_cdna4.isa import CATALOG, reference
    from tvm_cdna4.runtime.hip import run_on_gfx950

    op = CATALOG["mfma_f32_16x16x32_f16"]
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(64, 8)).astype(np.float16), rng.normal(size=(64, 8)).astype(np.float16)
    c, d = rng.normal(size=(64, 4)).astype(np.float32), np.zeros((64, 4), np.float32)
    run_on_gfx950(mfma_probe(op), a, b, c, d)
    np.testing.assert_allclose(d, reference.mfma(op, a, b, c), rtol=1e-5, atol=1e-5)
