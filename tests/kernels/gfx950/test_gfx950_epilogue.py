"""The fused epilogue on gfx950 (``Fusion`` in the plans' ``Epilogue``, ``kernels.gfx950.emit.epilogue_value``):
plans, parameters, refusals, the cost model's bytes, and emulated kernels on small odd shapes checked
against ``kernels.gemm.epilogue.reference`` within ``kernels.gemm.epilogue.error_bound``.

The emulated cases run ``benchmarks/gfx950_epilogue_table.py``'s ``run_case`` (exact small-integer
operands: the accumulator is the exact product, so only the epilogue's error is measured); that
script's table covers every op set x dtype x layout (benchmarks/journal/2026-12.md), these a subset."""

import json

import numpy as np
import pytest
from benchmark_modules import benchmark_module

import tvm_cdna4
from tvm_cdna4.cli import main
from tvm_cdna4.kernels.gemm.epilogue import Fusion
from tvm_cdna4.kernels.gfx950.gemm_cost import work_of
from tvm_cdna4.kernels.gfx950.gemm import Gfx950GemmConfig, cache_key, gfx950_gemm, plan, plan_gfx950_gemm
from tvm_cdna4.kernels.gfx950.gemm_plan import plan_for

ALL_GELU = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)
SMALL = Gfx950GemmConfig(32, 64, 64)


@pytest.fixture(scope="module")
def table():
    return benchmark_module("gfx950_epilogue_table")


# ------------------------------------------------------------------------------------ plans (no build)

def test_fused_plan_orders_its_params_and_steps():
    p = plan_gfx950_gemm(33, 40, 72, "bf16", "nt", "bf16", fusion=ALL_GELU)
    assert [q.name for q in p.params] == ["A", "B", "C", "row_scale", "col_scale", "bias", "residual"]
    assert p.params[-1].shape == (33, 40) and p.params[-1].dtype == "int16"  # C's shape and storage
    assert p.epilogue.ops == ("fuse", "bf16_rne") and p.fusion == ALL_GELU
    split = plan_gfx950_gemm(7, 40, 512, "f16", "nn", "f16", SMALL, k_splits=2, fusion=Fusion(bias=True))
    assert split.epilogue.ops == ("reduce", "fuse", "cast")
    assert [q.name for q in split.params] == ["A", "B", "C", "bias", "W", "S"]  # the workspace last


def test_fused_f32_split_reduces_through_the_workspace():
    # an f32 C would take the partial products by atomics; the fused steps need the whole sum first
    plain = plan_gfx950_gemm(7, 40, 512, "f16", "nn", "f32", SMALL, k_splits=2)
    fused = plan_gfx950_gemm(7, 40, 512, "f16", "nn", "f32", SMALL, k_splits=2, fusion=Fusion(activation="relu"))
    assert plain.epilogue.ops == ("atomic_add",)
    assert fused.epilogue.ops == ("reduce", "fuse") and fused.epilogue.reduction == "atomic"


def test_empty_fusion_is_the_plain_plan_and_a_fusion_changes_the_key():
    plain = plan_gfx950_gemm(33, 40, 72, "f16", "nn", "f32", SMALL)
    assert plan_gfx950_gemm(33, 40, 72, "f16", "nn", "f32", SMALL, fusion=Fusion()) == plain
    fused = plan_gfx950_gemm(33, 40, 72, "f16", "nn", "f32", SMALL, fusion=Fusion(bias=True))
    assert cache_key(fused) != cache_key(plain)
    mx = plan(33, 40, 96, "mxfp4", "nt", fusion=Fusion(row_scale=True, col_scale=True))
    assert [q.name for q in mx.params] == ["A", "B", "SA", "SB", "C", "row_scale", "col_scale"]


@pytest.mark.parametrize("dtype, batch, match", [("i8", 0, "f32 accumulators"), ("f64", 0, "f32 accumulators"),
                                                 ("f16", 2, "batch axis")])
def test_fusion_refuses_what_it_cannot_compute(dtype, batch, match):
    with pytest.raises(ValueError, match=match):
        plan_gfx950_gemm(33, 40, 128, dtype, "nn", batch=batch, fusion=Fusion(bias=True))


def test_the_estimate_counts_the_fused_inputs():
    M, N, K = 16, 4096, 4096
    plain = work_of(plan_gfx950_gemm(M, N, K, "bf16", "nt", "bf16"))
    fused = work_of(plan_gfx950_gemm(M, N, K, "bf16", "nt", "bf16", fusion=ALL_GELU))
    assert fused.fused_bytes == 4 * M + 4 * N + 4 * N + 2 * M * N  # row, column scales, bias, bf16 residual
    assert fused.operand_bytes - plain.operand_bytes == fused.fused_bytes
    assert plan_for(M, N, K, "bf16", "nt", "bf16", fusion=ALL_GELU).fusion == ALL_GELU


# ------------------------------------------------------------------------------------ emulated kernels

@pytest.mark.parametrize("dtype, layout, out, fusion, M", [
    ("f16", "nn", "f32", ALL_GELU, 33),
    ("bf16", "tn", "bf16", Fusion(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True), 7),
    ("fp8", "nt", "bf16", Fusion(row_scale=True, col_scale=True), 1),  # the fp8 inference recipe
    ("bf8_fp8", "tt", "f16", Fusion(activation="relu", residual=True), 33),
    ("f32", "nt", "f32", Fusion(bias=True), 7),
], ids=["f16 nn all gelu", "bf16 tn all silu M7", "fp8 scales bf16 M1", "bf8_fp8 tt relu residual f16", "f32 bias"])
def test_fused_kernel_matches_the_reference(table, dtype, layout, out, fusion, M):
    case = table.run_case(dtype, layout, out, fusion, (M, 40, 72))
    assert case.passed, case
    assert case.max_error > 0 or out == "f32"  # a 16-bit output rounds somewhere: the check can see errors


def test_split_k_ordered_applies_the_fusion_once_after_the_reduction(table):
    cfg = Gfx950GemmConfig(32, 64, 64, reduction="ordered")
    case = table.run_case("bf16", "nt", "f32", ALL_GELU, (7, 40, 200), cfg, k_splits=3)
    assert case.passed, case


def test_fused_split_kernel_passes_the_whole_kernel_checks_and_uses_v_exp():
    cfg = Gfx950GemmConfig(32, 64, 64, reduction="ordered")
    asm = tvm_cdna4.build(gfx950_gemm(7, 40, 200, "bf16", "nt", "bf16", cfg, k_splits=3, activation="silu",
                                      bias=True)).asm
    # one hardware exponential per accumulator element of the wave (RM x RN x 4 = 8), no range reduction
    assert asm.count("v_exp_f32") == 8 and "v_ldexp_f32" not in asm


def test_cli_validates_and_shows_the_fusion(capsys):
    args = ["gemm", "--target", "gfx950", "--dtype", "f16", "-M", "7", "-N", "40", "-K", "72", "--block", "32x64x64",
            "--bias", "--activation", "gelu", "--row-scale", "--col-scale", "--validate", "--emit", "config"]
    assert main(args) == 0
    out = capsys.readouterr().out
    config = json.loads(out.splitlines()[0])
    assert config["epilogue"] == ["fuse"] and config["fusion"]["steps"] == "acc * row_scale * col_scale + bias -> gelu"
    assert "kernels.gemm.epilogue.error_bound" in out and out.rstrip().endswith("PASS")
    assert np.isfinite(float(out.split("relative error ")[1].split()[0]))
