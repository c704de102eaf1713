"""bf16 / fp8 tensors as users write them (issue 23, deliverable 1): ``bfloat16`` / ``float8_e4m3fn``
globals, LDS tiles, register buffers and views feed ``ds_read_tr`` and the MFMAs exactly on every
route (``tvm_cdna4.rocm.storage`` keeps them as 16/8-bit storage and turns copies into bit moves),
mixed with the integer bit-storage spelling in any combination; a float8 conversion is refused."""

import re

import ml_dtypes
import numpy as np
import pytest
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

import tvm_cdna4
from tvm_cdna4 import ContractError
from tvm_cdna4.emulator import emulate
from tvm_cdna4.isa import CATALOG, lanes, reference
from tvm_cdna4.patterns.layouts import mfma_fragment
from tvm_cdna4.rocm import storage

BF16 = ("ds_read_tr16_b64_v4bf16", "mfma_f32_32x32x16_bf16", "bfloat16", "int16")
FP8 = ("ds_read_tr8_b64_v2i32", "mfma_scale_f32_16x16x128_f8f6f4", "float8_e4m3fn", "uint8")
ROCM = Target({"kind": "rocm", "mcpu": "gfx950"})


@T.macro
def _dense_mfma(name, Df, Af, Bf, ls, M, K):
    T.rocm.tile.apply(T.amdgcn[name], Df, Af, Bf, T.float32(0), scope="wave")


@T.macro
def _scaled_mfma(name, Df, Af, Bf, ls, M, K):
    rs = T.alloc_tensor(ty_args=[T.Tensor((1,), "uint32", scope="local")])
    rs[0] = T.uint32(0x7F7F7F7F)  # E8M0 127: unit scales
    Sf = T.decl_tensor(rs.ptr_to([0]), ty_args=[T.Tensor((1, 1, M, K // 32), "uint32", scope="local", layout=ls)])
    T.rocm.tile.apply(T.amdgcn[name], Df, Af, Bf, T.float32(0), Sf, Sf, scope="wave", cbsz=0, blgp=0, op_sel_a=0,
                      op_sel_b=0)


def tr_gemm(tr_name, mfma_name, g, lds, reg, view):
    """D = A^T B of one MFMA: A (K, M) and B (K, N) globals of dtype ``g`` -> LDS tiles of ``lds``
    -> ds_read_tr operand form into register buffers of ``reg`` viewed as ``view`` fragments -> the
    MFMA (scaled: fp8 element tiles, unit scales); ``D[lane]`` gets the lane's accumulators."""
    op = CATALOG[mfma_name]
    scaled = op.kind == "mfma_scale"
    M, N, K = op.m, op.n, op.k
    la1, na = mfma_fragment(op, "A", byte_tiles=scaled)
    lb1, nb = mfma_fragment(op, "B", byte_tiles=scaled)
    la, _ = mfma_fragment(op, "A", (1, 1), byte_tiles=scaled)
    lb, _ = mfma_fragment(op, "B", (1, 1), byte_tiles=scaled)
    ld, nd = mfma_fragment(op, "D", (1, 1))
    ls, _ = mfma_fragment(op, "scale_a", (1, 1)) if scaled else (None, 0)
    row = lambda n: T.TileLayout(T.S[(K, n) : (n, 1)])  # noqa: E731
    step = _scaled_mfma if scaled else _dense_mfma

    @T.function
    def kernel(A: T.Tensor((K, M), g), B: T.Tensor((K, N), g), D: T.Tensor((64, nd), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            SA = T.alloc_tensor(ty_args=[T.Tensor((K, M), lds, scope="shared", align=16, layout=row(M))])
            SB = T.alloc_tensor(ty_args=[T.Tensor((K, N), lds, scope="shared", align=16, layout=row(N))])
            for q in T.serial(K * M // 64):
                SA[(q * 64 + tx) // M, (q * 64 + tx) % M] = A[(q * 64 + tx) // M, (q * 64 + tx) % M]
            for q in T.serial(K * N // 64):
                SB[(q * 64 + tx) // N, (q * 64 + tx) % N] = B[(q * 64 + tx) // N, (q * 64 + tx) % N]
            T.rocm.workgroup_barrier()
            ra = T.alloc_tensor(ty_args=[T.Tensor((na,), reg, scope="local", align=16)])
            rb = T.alloc_tensor(ty_args=[T.Tensor((nb,), reg, scope="local", align=16)])
            rd = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local")])
            Af1 = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((M, K), view, scope="local", layout=la1)])
            Bf1 = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((N, K), view, scope="local", layout=lb1)])
            T.rocm.tile.apply(T.amdgcn[tr_name], Af1, SA, scope="wave", mfma=mfma_name, operand="A")
            T.rocm.tile.apply(T.amdgcn[tr_name], Bf1, SB, scope="wave", mfma=mfma_name, operand="B")
            Af = T.decl_tensor(ra.ptr_to([0]), ty_args=[T.Tensor((1, 1, M, K), view, scope="local", layout=la)])
            Bf = T.decl_tensor(rb.ptr_to([0]), ty_args=[T.Tensor((1, 1, N, K), view, scope="local", layout=lb)])
            Df = T.decl_tensor(rd.ptr_to([0]), ty_args=[T.Tensor((1, 1, M, N), "float32", scope="local", layout=ld)])
            step(mfma_name, Df, Af, Bf, ls, M, K)
            for r in T.unroll(nd):
                D[tx, r] = rd[r]

    return kernel


def _want(mfma_name, a, b):
    """The reference accumulators of ``tr_gemm`` for A (K, M), B (K, N)."""
    op = CATALOG[mfma_name]
    lane = np.arange(64)[:, None]
    ea, eb = lanes.a_owner(op, lane, np.arange(op.a_elems)), lanes.b_owner(op, lane, np.arange(op.b_elems))
    ra, rb = a[ea.k, ea.row], b[eb.k, eb.col]
    c = np.zeros((64, op.acc_elems), np.float32)
    if op.kind == "mfma_scale":
        unit = np.full(64, 0x7F7F7F7F, np.uint32)
        return reference.mfma_scale(op, ra, rb, c, cbsz=0, blgp=0, scale_a=unit, scale_b=unit)
    return reference.mfma(op, ra, rb, c)


def _data(case, rng):
    op = CATALOG[case[1]]
    np_dtype = getattr(ml_dtypes, case[2])
    return (rng.normal(size=(op.k, op.m)).astype(np_dtype), rng.normal(size=(op.k, op.n)).astype(np_dtype))


def _spellings(own, bits):
    """(globals, LDS, registers, views): the natural spelling, the integer one, and mixes of both."""
    return [(own, own, own, own), (bits, bits, bits, bits), (own, bits, bits, bits), (bits, own, own, own),
            (own, own, own, bits), (own, own, bits, own), (own, bits, own, bits)]


@pytest.mark.parametrize("case", [BF16, FP8], ids=["bf16", "fp8"])
def test_every_spelling_is_exact_in_the_emulator(case, rng):
    tr, mfma, own, bits = case
    a, b = _data(case, rng)
    want = _want(mfma, a, b)
    assert np.abs(want).sum() > 0
    for dtypes in _spellings(own, bits):
        d = np.zeros_like(want)
        g = dtypes[0]
        emulate(tr_gemm(tr, mfma, *dtypes), a.view(g) if g == bits else a, b.view(g) if g == bits else b, d)
        np.testing.assert_array_equal(d, want, err_msg=str(dtypes))


@pytest.mark.parametrize("case", [BF16, FP8], ids=["bf16", "fp8"])
def test_the_natural_spelling_compiles_on_both_routes(case):
    tr, mfma, own, _ = case
    kernel = tr_gemm(tr, mfma, own, own, own, own)
    asm = tvm_cdna4.build(kernel).asm
    assert ("v_mfma_f32_32x32x16_bf16" if own == "bfloat16" else "v_mfma_scale_f32_16x16x128_f8f6f4") in asm
    assert "ds_read_b64_tr_b16" in asm if own == "bfloat16" else "ds_read_b64_tr_b8" in asm
    device = tvm_tirx.tirx.compile(kernel, target=ROCM).mod.imports[0]
    assert device.inspect_source("asm").count("v_mfma") == asm.count("v_mfma")


def test_the_integer_spelling_is_left_as_written():
    kernel = tr_gemm(*BF16[:2], "int16", "int16", "int16", "int16")
    from tvm_cdna4.tirx_private import lowered_device_modules

    func = next(iter(next(iter(lowered_device_modules(kernel, ROCM).values())).functions.values()))
    assert "reinterpret" not in str(func).split("tvm_cdna4_workgroup_barrier")[0]  # the copies stay integer copies


def _bf16_lds_kernel():
    """A bfloat16 LDS tile: row 0 gets float32 values rounded to bf16, row 1 a bfloat16 global's
    elements (bit moves); read back to bfloat16, float32 and int16 globals."""

    @T.function
    def kernel(A: T.Tensor((64,), "float32"), X: T.Tensor((64,), "bfloat16"), B: T.Tensor((64,), "bfloat16"),
               C: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "bfloat16"), Z: T.Tensor((64,), "int16")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((2, 64), "bfloat16", scope="shared", align=16)])
            S[0, tx] = T.Cast("bfloat16", A[tx] * T.float32(3))
            S[1, tx] = X[tx]
            T.rocm.workgroup_barrier()
            B[tx] = S[0, 63 - tx]
            C[tx] = T.Cast("float32", S[0, tx]) * T.float32(2)
            Y[tx] = S[1, 63 - tx]
            Z[tx] = S[1, tx]

    return kernel


def test_bf16_lds_tiles_round_computed_values_and_move_copied_bits(rng):
    a = rng.normal(size=64).astype(np.float32)
    a[:3] = [np.inf, -0.0, 1.00390625]
    x = rng.normal(size=64).astype(ml_dtypes.bfloat16)
    x[:3] = [np.nan, -0.0, np.inf]
    b, y = np.zeros(64, ml_dtypes.bfloat16), np.zeros(64, ml_dtypes.bfloat16)
    c, z = np.zeros(64, np.float32), np.zeros(64, np.int16)
    emulate(_bf16_lds_kernel(), a, x, b, c, y, z)
    want = (a * 3).astype(ml_dtypes.bfloat16)  # round to nearest even, like numpy
    np.testing.assert_array_equal(b.view(np.int16), want[::-1].view(np.int16))
    np.testing.assert_array_equal(c, want.astype(np.float32) * 2)
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.view(np.int16), x[::-1].view(np.int16))
    np.testing.assert_array_equal(z, x.view(np.int16))


def test_a_float8_conversion_is_refused_naming_the_tensor_and_statement():
    @T.function
    def kernel(A: T.Tensor((64,), "float8_e4m3fn"), C: T.Tensor((64,), "float32")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((64,), "float8_e4m3fn", scope="shared", align=16)])
            S[tx] = A[tx]
            T.rocm.workgroup_barrier()
            C[tx] = T.Cast("float32", S[tx])

    for compile_ in (lambda k: emulate(k, np.zeros(64, ml_dtypes.float8_e4m3fn), np.zeros(64, np.float32)),
                     tvm_cdna4.build, lambda k: tvm_tirx.tirx.compile(k, target=ROCM)):
        with pytest.raises(ContractError) as err:
            compile_(kernel)
        assert str(err.value).startswith("operand S: `C[tx] = T.Cast(\"float32\", S[tx])` computes with "
                                         "float8_e4m3fn values (a conversion float8_e4m3fn -> float32)")


def test_modules_that_do_not_use_the_package_are_lowered_by_the_original_pipeline(monkeypatch):
    from tvm_tirx.tirx.compilation_pipeline import PIPELINE_MAP, default_tir_pipeline, tirx_pipeline

    tvm_cdna4.register()
    assert (PIPELINE_MAP["tirx"].wraps, PIPELINE_MAP["default"].wraps) == (tirx_pipeline, default_tir_pipeline)

    @T.function
    def plain(A: T.Tensor((64,), "bfloat16"), B: T.Tensor((64,), "bfloat16")):
        with T.device_entry():
            T.launch_thread("blockIdx.x", 1)
            tx = T.launch_thread("threadIdx.x", 64)
            S = T.alloc_tensor(ty_args=[T.Tensor((64,), "bfloat16", scope="shared")])
            S[tx] = A[tx]
            B[tx] = S[tx]

    def llvm_ir(pipeline):  # TBAA type names carry object addresses: masked
        text = tvm_tirx.tirx.compile(plain, target=ROCM, pipeline=pipeline).mod.imports[0].inspect_source("llvm")
        return re.sub(r'!"0x[0-9a-f]+"', "!ADDR", text)

    ours = [llvm_ir("tirx"), llvm_ir("default")]
    monkeypatch.setitem(PIPELINE_MAP, "tirx", tirx_pipeline)
    monkeypatch.setitem(PIPELINE_MAP, "default", default_tir_pipeline)
    assert ours == [llvm_ir("tirx"), llvm_ir("default")]
    assert "float" in ours[0]  # TIRx's own widening of the bf16 LDS tile, untouched


def test_a_float8_dtype_that_names_another_format_is_refused():
    """cbsz=0 selects fp8 (E4M3): float8_e5m2 element tiles do not fit; uint8 bits of either do."""
    tr, mfma, _, _ = FP8
    with pytest.raises(ContractError, match=r"operand A: dtype float8_e5m2 does not fit fp8 elements \(cbsz=0\)"):
        tvm_cdna4.build(tr_gemm(tr, mfma, "float8_e5m2", "float8_e5m2", "float8_e5m2", "float8_e5m2"))
