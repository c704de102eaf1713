"""fp8 (e4m3) on sm90: 128-element K tiles through TMA, ``wgmma`` m64nNk32 e4m3 x e4m3, the per-token x
per-channel scales in the fused epilogue; validated in the CUDA emulator; the refusals (K % 16) and the
cost model's doubled tensor rate."""

from __future__ import annotations

import pytest

from tvm_cdna4.errors import ContractError
from tvm_cdna4.kernels import devices, gemm
from tvm_cdna4.kernels.gemm import GemmProblem
from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.sm90 import gemm_cost
from tvm_cdna4.kernels.sm90.gemm_emit import signature_source, wgmma_instr
from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, Sm90Plan

SCALES = Fusion(row_scale=True, col_scale=True)
EMULATOR = "the CUDA emulator (no GPU runner)"


def test_the_emulator_validates_an_fp8_plan_with_the_scales_fused():
    # odd M and N, K = 400: four 128-element k-tiles (the last one 16 wide, its box's rest zero-filled), more
    # k-tiles than stages, two consumers, bf16 C with per-token x per-channel f32 scales
    problem = GemmProblem(67, 69, 400, "fp8", "nt", "bf16", SCALES)
    v = gemm.validate(problem, "sm90", Sm90Config(128, 64, 2, 2))
    assert v.ok and v.where == EMULATOR and v.ratio <= 1.0


def test_the_emulator_validates_a_dynamic_m_fp8_plan_below_sixteen_rows():
    # the bucket 1..16 of fp8 is the sm90 kernel's (the decode kernel has no fp8), f32 C
    problem = GemmProblem(None, 24, 272, "fp8", "nt", "f32", SCALES)
    p = gemm.plan(problem, "sm90", m=5)
    assert isinstance(p, Sm90Plan) and p.dynamic_m == MBucket(1, 16) and p.k_tiles == 3
    v = gemm.validate(problem, "sm90", m=5)
    assert v.ok and v.where == EMULATOR


def test_the_fp8_kernel_reads_128_element_k_tiles_with_wgmma_k32():
    p = gemm.plan(GemmProblem(768, 4096, 4096, "fp8", "nt", "bf16", SCALES), "sm90")
    assert isinstance(p, Sm90Plan) and p.block_k == 128 and p.k_tiles == 32
    assert wgmma_instr(p) == f"wgmma.mma_async.sync.aligned.m64n{p.config.block_n}k32.f32.e4m3.e4m3"
    src = signature_source(p)  # A's map: K = 4096 one-byte elements a row, boxes block_m x 128
    assert f"A.ptr_to([0, 0]), 4096, 768, 4096, 128, {p.config.block_m}, 1, 1, descriptor_dtype='float8_e4m3fn'" in src
    assert [q.dtype for q in p.params[:4]] == ["float8_e4m3fn", "float8_e4m3fn", "bfloat16", "float32"]


@pytest.mark.parametrize("K", [72, 264, 4104])
def test_fp8_k_not_a_multiple_of_16_is_refused_naming_k(K):
    with pytest.raises(ContractError, match=r"K % 16 == 0") as err:
        gemm.plan(GemmProblem(64, 64, K, "fp8", "nt", "bf16"), "sm90")
    assert err.value.operand == "K" and err.value.check == "alignment"
    assert gemm.plan(GemmProblem(64, 64, K, "bf16", "nt", "bf16"), "sm90").K == K  # 16 bytes of bf16: K % 8


def test_the_cost_model_runs_fp8_at_twice_the_tensor_rate():
    h100 = devices.DEVICES["H100"]
    cfg = Sm90Config(128, 256, 4, 2)
    bf16, fp8 = (gemm_cost.estimate(cfg, 8192, 8192, 8192, 2, h100, dtype) for dtype in ("bf16", "fp8"))
    assert fp8.compute == pytest.approx(bf16.compute / 2)
    assert fp8.memory < bf16.memory  # one byte an input element
    # the K splits count fp8's k-tiles: K = 14336 is 224 bf16 k-tiles (slices of 112 or 75 allowed) but 112 fp8
    # ones (a split would leave slices of 56 < MIN_SLICE_TILES)
    assert gemm_cost.splits(128, 4096, 14336, "bf16") == (1, 2, 3)
    assert gemm_cost.splits(128, 4096, 14336, "fp8") == (1,)
