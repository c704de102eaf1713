"""The CUDA fused epilogue (issue 25): ``GemmPlan.fusion`` / ``DecodePlan.fusion``, the kernels' inputs
after C, the build keywords, the runtime and the CLI; the emulated kernels (odd shapes, masked edges:
the emulator reports any read out of range) against ``kernels.gemm.epilogue.reference`` within
``error_bound`` on ``runtime.cuda.grid_inputs`` (the product exact, so only the epilogue's own
rounding is measured). On the GPU: the validated table of ``benchmarks/epilogue_overhead.py``."""

from __future__ import annotations

from paths import TESTS
import json
import os
import sys
from dataclasses import replace

import numpy as np
import pytest

sys.path.insert(0, str(TESTS))

from benchmark_modules import benchmark_module  # noqa: E402

from tvm_cdna4 import cli  # noqa: E402
from tvm_cdna4.emulator import emulate  # noqa: E402
from tvm_cdna4.runtime import cuda as runner  # noqa: E402
from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm  # noqa: E402
from tvm_cdna4.kernels.sm80.decode_plan import DecodeConfig, plan_decode  # noqa: E402
from tvm_cdna4.kernels.sm80.gemm import GemmConfig, build_key, config_json, emit_any  # noqa: E402
from tvm_cdna4.kernels.sm80.gemm_plan import plan  # noqa: E402
from tvm_cdna4.kernels.gemm.epilogue import PARAM_ORDER, Fusion  # noqa: E402

TINY = GemmConfig(block_m=16, block_n=32, block_k=32, warps_m=1, warps_n=2, stages=2)
"""A small tile (16 x 32, 2 warps) that keeps the emulated kernels cheap: M = 33 crosses two row edges."""
ALL = Fusion(bias=True, activation="gelu", residual=True, row_scale=True, col_scale=True)
SPLIT = replace(TINY, split_k=3, reduction="ordered", reduce_vector=2)


def _emulate(p, seed: int, uninitialized: str = "error"):
    """Emulate plan ``p`` (either kernel) on grid inputs and random epilogue inputs, the split-K
    workspace and tickets zero (the tickets zero again after); (largest error / bound, whether within
    it)."""
    rng = np.random.default_rng(seed)
    out = p.epilogue.out_dtype if hasattr(p, "epilogue") else p.out_dtype
    dtype = "f16" if p.dtype == "float16" else "bf16"
    a, b = runner.grid_inputs(p.M, p.N, p.K, dtype, p.layout, rng)
    inputs = runner.fused_inputs(p.fusion, p.M, p.N, out, rng)
    c = np.full((p.M, p.N), np.nan, runner.np_dtype(out))
    work = [np.zeros(q.shape, np.float32 if q.dtype == "float32" else np.uint32)
            for q in p.params if q.name in runner.WORKSPACE]
    emulate(emit_any(p), a, b, c, *runner.epilogue_args(p.fusion, inputs), *work, target="sm80",
            uninitialized=uninitialized)
    if work:
        assert not work[1].any(), "every tile's ticket is reset by its last CTA"
    return runner.check_fused(c, a, b, p.layout, p.fusion, inputs, out)


# ---- the plans ----------------------------------------------------------------------------------


def test_plans_carry_the_fusion_and_its_inputs():
    p = plan(33, 40, 200, "f16", "nt", "bf16", SPLIT, fusion=ALL)
    assert p.fusion == ALL and [q.name for q in p.params] == ["A", "B", "C", *PARAM_ORDER, "W", "S"]
    assert [q.shape for q in p.params[3:7]] == [(33,), (40,), (40,), (33, 40)]
    assert p.params[6].dtype == "bfloat16"  # the residual in C's dtype
    assert [op.kind for op in p.epilogue.ops] == ["reduce", "fuse", "convert"]
    assert p.epilogue.fuse.instr == "ex2.approx.ftz.f32"
    assert plan(33, 40, 72, "f16", "nt", "f32", TINY, fusion=Fusion(bias=True)).epilogue.fuse.instr == "fma.rn.f32"
    plain = plan(33, 40, 72, "f16", "nt", "f32", TINY)
    assert plain == plan(33, 40, 72, "f16", "nt", "f32", TINY, fusion=Fusion()) and plain.epilogue.fuse is None
    relu = plan(33, 40, 72, "f16", "nt", "f32", TINY, fusion=Fusion(activation="relu"))
    assert [q.name for q in relu.params] == ["A", "B", "C"] and relu.epilogue.fuse.instr == "max.f32"
    assert build_key(plain) != build_key(relu)  # the cache key follows the plan record
    # the residual's L2 prefetch, PREFETCH_AHEAD k-tiles before the loop's end (a short loop: its start)
    assert (p.epilogue.prefetch, p.epilogue.prefetch_at) == ("prefetch.global.L2", 0)
    big = plan(4096, 4096, 4096, "bf16", "nt", "bf16", fusion=ALL)
    assert big.epilogue.prefetch_at == big.kloop.k_tiles - 8 and plain.epilogue.prefetch == relu.epilogue.prefetch == ""
    d = plan_decode(5, 100, 136, "bf16", "nt", "f16", DecodeConfig(split_k=2), Fusion(col_scale=True, residual=True))
    assert [q.name for q in d.params] == ["A", "B", "C", "col_scale", "residual", "W", "S"]
    assert d.params[4].dtype == "float16" and d.fusion.residual


def test_check_bounds_cancellation_and_rejects_a_wrong_epilogue():
    from tvm_cdna4.kernels.gemm.epilogue import check

    f = Fusion(bias=True, residual=True, row_scale=True)
    acc = np.array([[1.2345678, -3.0], [0.5, 2.0]])
    inputs = dict(row_scale=np.float32([1.5, 0.75]), bias=np.float32([-1.8518517, 2.9]),
                  residual=np.float32([[0.0, 0.125], [-0.375, 1.0]]))
    f32 = np.float32(acc) * inputs["row_scale"][:, None] + inputs["bias"] + inputs["residual"]  # f32, cancelling
    assert check(f32, acc, f, inputs, "f32")[1]
    assert not check(f32 + inputs["bias"], acc, f, inputs, "f32")[1]  # the bias twice (per K slice, say)
    assert check(np.where(f32 > 0, np.nan, f32), acc, f, inputs, "f32") == (float("inf"), False)


def test_config_json_lists_the_fusion():
    for M in (5, 33):  # the decode kernel and the tile GEMM
        d = json.loads(config_json(M, 100, 136, "bf16", "nt", "bf16", fusion=Fusion(bias=True, activation="silu")))
        assert d["fusion"]["bias"] and d["fusion"]["activation"] == "silu" and d["epilogue"] == "acc + bias -> silu"
    assert json.loads(config_json(33, 100, 136, "bf16", "nt", "bf16"))["epilogue"] == "none"


def test_bad_epilogue_inputs_are_refused():
    with pytest.raises(ValueError, match="activation 'tanh'"):
        cuda_gemm.build(64, 64, 64, "f16", "nt", "f32", activation="tanh")
    with pytest.raises(ValueError, match="not both"):
        cuda_gemm.cuda_gemm(64, 64, 64, bias=True, fusion=Fusion(residual=True))
    with pytest.raises(TypeError, match="kernels.gemm.epilogue.Fusion"):
        plan(64, 64, 64, fusion={"bias": True})
    fused = plan(33, 40, 72, "f16", "nt", "f32", TINY, fusion=Fusion(bias=True, residual=True))
    with pytest.raises(ValueError, match=r"reads \['bias', 'residual'\]: missing \['residual'\], not read \['row_scale'\]"):
        runner.epilogue_args(fused.fusion, {"bias": 0, "row_scale": 0})
    calls = []
    kernel = runner.Kernel(lambda *a: calls.append(a), fused)
    assert kernel.inputs == ("A", "B", "C", "bias", "residual")
    with pytest.raises(TypeError, match=r"takes 5 tensors \(A, B, C, bias, residual\), got 3"):
        kernel(1, 2, 3)
    arrays = [np.full(2, float(i), np.float32) for i in range(5)]  # A, B, C, bias, residual (DLPack from numpy)
    runner.Launcher(kernel, *arrays[:3], {"residual": arrays[4], "bias": arrays[3]})()
    assert [float(np.from_dlpack(t)[0]) for t in calls[0]] == [0, 1, 2, 3, 4]  # PARAM_ORDER, whatever the dict order


def test_cli_emits_the_fused_plan_and_validates_it_in_the_emulator_without_a_gpu(capsys):
    flags = ["gemm", "--target", "sm80", "--dtype", "bf16", "-M", "5", "-N", "100", "-K", "136", "--out-dtype", "bf16",
             "--bias", "--activation", "silu", "--residual", "--row-scale", "--col-scale"]
    assert cli.main([*flags, "--emit", "config"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "decode" and d["epilogue"] == "acc * row_scale * col_scale + bias -> silu + residual"
    assert cli.main([*flags, "--emit", "tir"]) == 0
    assert "residual: T.Tensor((5, 100), T.bfloat16))" in capsys.readouterr().out
    if not runner.have_cuda_gpu()[0]:  # a small problem: the CUDA emulator (what kernels.gemm.validate runs)
        assert cli.main([*flags, "--validate"]) == 0
        out = capsys.readouterr().out
        assert "on the CUDA emulator" in out and out.rstrip().endswith("PASS")


# ---- emulated kernels ------------------------------------------------------------------------------

# each step alone on the tile GEMM (nt, M and N crossing the tile edges), the output dtypes in turn
ALONE = [("row_scale", "f32"), ("col_scale", "f16"), ("bias", "bf16"), ("relu", "f32"), ("silu", "f16"),
         ("gelu", "bf16"), ("residual", "f16")]


@pytest.mark.parametrize("step,out", ALONE)
def test_each_step_alone_within_its_bound(step, out):
    fusion = Fusion(activation=step) if step in ("relu", "silu", "gelu") else Fusion(**{step: True})
    err, ok = _emulate(plan(33, 40, 72, "f16", "nt", out, TINY, fusion=fusion), seed=len(step))
    assert ok, err


def test_all_steps_on_odd_n_layout_tn():
    # odd N: the element-wise stores (a cvt each), every input clamped at both edges
    err, ok = _emulate(plan(33, 41, 72, "bf16", "tn", "f16", TINY, fusion=ALL), seed=3)
    assert ok, err


def test_the_residual_through_shared_memory():
    """``GemmConfig.residual_stage`` -> ``Epilogue.residual_rows``: at 4096^3 two parts of 64 rows, copied
    at k-tiles 61 and 62 into the stages freed there; not without the option (the planner's default), for
    the persistent kernel, tiles crossing C's edge, f32 C or a K split. In the emulator: two parts (64-row
    tiles of two warp rows, 3 stages), every fused step, exact products."""
    on = GemmConfig(residual_stage=True)
    big = plan(4096, 4096, 4096, "bf16", "nt", "bf16", on, fusion=ALL).epilogue
    assert (big.residual_rows, big.residual_first, big.residual_pitch) == (64, 61, 264)
    for p in (plan(4096, 4096, 4096, "bf16", "nt", "bf16", fusion=ALL),
              plan(4096, 4096, 4096, "bf16", "nt", "bf16", replace(on, ctas=132), fusion=ALL),
              plan(4000, 4096, 4096, "bf16", "nt", "bf16", on, fusion=ALL),
              plan(128, 128, 192, "bf16", "nt", "f32", on, fusion=ALL),
              plan(64, 64, 256, "f16", "nt", "f16", replace(SPLIT, residual_stage=True), fusion=ALL),
              plan(4096, 4096, 4096, "bf16", "nt", "bf16", on, fusion=Fusion(bias=True))):
        assert p.epilogue.residual_rows == 0
    cfg = GemmConfig(block_m=64, block_n=64, block_k=32, warps_m=2, warps_n=2, stages=3, residual_stage=True)
    p = plan(128, 128, 192, "bf16", "nt", "bf16", cfg, fusion=ALL)
    assert (p.epilogue.residual_rows, p.epilogue.residual_first, p.epilogue.residual_pitch) == (32, 4, 72)
    err, ok = _emulate(p, seed=11)
    assert ok, err


def test_split_k_ordered_applies_the_fusion_once_after_the_reduction():
    # the last CTA of each tile applies it (applied per slice, the bias would be added three times)
    err, ok = _emulate(plan(33, 40, 200, "f16", "nt", "f32", SPLIT, fusion=ALL), seed=4, uninitialized="allow")
    assert ok, err


@pytest.mark.parametrize("K,cfg,fusion,out", [
    (136, DecodeConfig(warps=4, split_k=2, reduction="ordered"), ALL, "bf16"),  # the pipeline, split-K
    (130, DecodeConfig(warps=2), Fusion(bias=True, activation="silu", residual=True), "f32"),  # element loads
])
def test_decode_kernel_with_fusion(K, cfg, fusion, out):
    err, ok = _emulate(plan_decode(5, 100, K, "bf16", "nt", out, cfg, fusion), seed=K)
    assert ok, err


# ---- the benchmark (benchmarks/epilogue_overhead.py) --------------------------------------------------


def test_benchmark_tables_without_a_gpu(tmp_path):
    bench = benchmark_module("epilogue_overhead")
    cases = bench.table_cases()
    steps = [c for c in cases if (c["M"], c["N"], c["K"]) == bench.TABLE_SHAPE]
    assert len(steps) == len(bench.TABLE_FUSIONS) * 2 * 4 and {c["layout"] for c in steps} == {"nn", "nt", "tn", "tt"}
    row = dict(name="4096^3", M=4096, N=4096, K=4096, config=dict(block_m=128, block_n=256, split_k=1),
               us={"plain": 300.0, "all": 309.0, "bias+gelu": 297.0})
    assert bench.overhead_lines([row])[2] == "| 4096^3 | 4096x4096x4096 | 128x256 / 1 | 300.0 | 309.0 (+3.0 %) | 297.0 (-1.0 %) |"
    row = dict(cases[0], config=dict(kind="decode", row_tiles=2, split_k=1), error=0.5, ok=True)
    assert bench.validate_lines([row])[2] == "| row_scale | f16 | nn | 129x250x200 | decode 32r / 1 | 0.500 | OK |"
    if not runner.have_cuda_gpu()[0]:
        assert bench.main(["--out", str(tmp_path)]) == 2


# ---- on the GPU ------------------------------------------------------------------------------------


@pytest.mark.cuda
def test_gpu_validated_table():
    # every fusion x {f16, bf16} x {nn, nt, tn, tt} at an odd shape, and the decode shapes
    bench = benchmark_module("epilogue_overhead")
    # a few build workers: this test may run in one of several xdist workers (8 x 15 spawned builders broke
    # the process pool on the H200, 2026-12-02; benchmarks/epilogue_overhead.py --validate-table uses them all)
    rows = bench.validate_table(runner.device_arch(), max(1, min(4, (os.cpu_count() or 2) // 4)), print)
    assert len(rows) == len(bench.table_cases())
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


@pytest.mark.cuda
@pytest.mark.parametrize("shape", [("-M", "77", "-N", "130", "-K", "264"), ("-M", "16", "-N", "4095", "-K", "2056")])
def test_gpu_cli_validates_a_fused_kernel(shape, capsys):
    # kernels.gemm.validate with runtime.cuda.run_gemm through the CLI: the tile GEMM and the decode kernel
    args = ["gemm", "--target", "sm80", "--dtype", "bf16", "--out-dtype", "bf16", *shape, "--bias", "--activation",
            "silu", "--residual", "--row-scale", "--col-scale", "--validate"]
    assert cli.main(args) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert out.rstrip().endswith("PASS") and "on the NVIDIA GPU" in out, out
