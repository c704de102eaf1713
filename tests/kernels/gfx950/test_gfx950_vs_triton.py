"""The static analysis shared by our kernels and Triton's (tvm_cdna4.report.kernel_report)
and benchmarks/gfx950_vs_triton.py: main-loop detection, MFMA pricing from the catalog, the
dtype's peak, the estimate formula; the Triton path only where Triton is installed."""

import paths
import os

import pytest
from benchmark_modules import benchmark_module

import tvm_cdna4
from tvm_cdna4.rocm.build import llvm_tool
from tvm_cdna4.kernels.gfx950.gemm import gfx950_gemm
from tvm_cdna4.report import (KernelReport, LoopReport, format_report, kernel_report, main_loop,
                                        mfma_use, peak_ops_per_cycle)

ROOT = str(paths.ROOT)
needs_mca = pytest.mark.skipif(llvm_tool("llvm-mca") is None, reason="Debian llvm-22 (llvm-mca) not installed")

# A prologue with more MFMAs than the loop (no branch back), then a loop of 4 f16 MFMAs
HAND_ASM = """\t.text
\t.amdgcn_target "amdgcn-amd-amdhsa--gfx950"
\t.globl\tk
k:
\ts_mov_b32 s0, 0
""" + "\tv_mfma_f32_16x16x32_f16 v[0:3], v[4:7], v[8:11], v[0:3]\n" * 6 + """.LBB0_1:
\tds_read_b128 v[4:7], v12
\ts_waitcnt lgkmcnt(0)
\tv_mfma_f32_16x16x32_f16 v[0:3], v[4:7], v[8:11], v[0:3]
\tv_mfma_f32_16x16x32_f16 v[16:19], v[4:7], v[8:11], v[16:19]
\tbuffer_load_dwordx4 v12, s[8:11], 0 offen lds
\tv_mfma_f32_16x16x32_f16 v[20:23], v[4:7], v[8:11], v[20:23]
\tv_mfma_f32_16x16x32_f16 v[24:27], v[4:7], v[8:11], v[24:27]
\ts_add_i32 s0, s0, 1
\ts_cmp_lt_i32 s0, 8
\ts_cbranch_scc1 .LBB0_1
\ts_endpgm
\t.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .group_segment_fixed_size: 1024
    .max_flat_workgroup_size: 512
    .name:           k
    .private_segment_fixed_size: 0
    .sgpr_count:     16
    .vgpr_count:     160
...
\t.end_amdgpu_metadata
"""


def test_main_loop_is_the_block_that_branches_back_not_the_one_with_most_mfmas():
    body = main_loop(HAND_ASM)
    assert [line.split()[0] for line in body][:2] == ["ds_read_b128", "s_waitcnt"]
    assert sum(line.split()[0].startswith("v_mfma") for line in body) == 4
    assert body[-1].split() == ["s_cbranch_scc1", ".LBB0_1"]


def test_kernel_report_of_hand_written_loop():
    report = kernel_report(HAND_ASM)
    loop = report.loop
    assert loop.mfmas == {"16x16x32_f16": 4}
    assert (loop.mfma_ops, loop.mfma_bound_cycles) == (4 * 16384, 4 * 16)
    assert loop.mix["global_lds"] == 1 and "global" not in loop.mix  # buffer_load ... lds goes straight to LDS
    assert (loop.mix["waitcnt"], loop.mix["lds_read"], loop.mix["salu"]) == (1, 1, 3)
    assert report.formats == ("f16", "f16") and report.peak_ops_per_cycle == 1024
    # 160 VGPRs: 512 // 160 = 3 waves per SIMD; 8 waves per workgroup (512 threads) and 1 KiB LDS do not limit
    assert report.waves_per_simd == 3 and report.info.lds_bytes == 1024


@pytest.mark.parametrize("line,label,formats,cycles,ops", [
    ("v_mfma_f32_16x16x32_f16 v[0:3], v[4:7], v[8:11], v[0:3]", "16x16x32_f16", ("f16", "f16"), 16, 16384),
    ("v_mfma_f32_16x16x32_fp8_fp8 v[0:3], v[4:5], v[6:7], v[0:3]", "16x16x32_fp8_fp8", ("fp8", "fp8"), 16, 16384),
    ("v_mfma_i32_16x16x64_i8 v[0:3], v[4:7], v[8:11], v[0:3]", "16x16x64_i8", ("i8", "i8"), 16, 32768),
    # the unscaled f8f6f4 (Triton's fp8 dot): priced as the scaled instruction; cbsz:1 = A in bf8
    ("v_mfma_f32_16x16x128_f8f6f4 a[0:3], a[4:11], a[12:19], a[0:3] cbsz:1", "16x16x128_f8f6f4(bf8,fp8)",
     ("bf8", "fp8"), 32, 65536),
    ("v_mfma_scale_f32_16x16x128_f8f6f4 v[0:3], v[4:7], v[8:11], v[0:3], v12, v13 op_sel_hi:[0,0,0] cbsz:4 blgp:4",
     "scale_16x16x128_f8f6f4(fp4,fp4)", ("fp4", "fp4"), 16, 65536),
    # fp8 x fp4: the slower operand's cycles
    ("v_mfma_scale_f32_32x32x64_f8f6f4 v[0:15], v[16:23], v[24:27], v[0:15], v12, v13 blgp:4",
     "scale_32x32x64_f8f6f4(fp8,fp4)", ("fp8", "fp4"), 64, 131072),
])
def test_mfma_use_prices_by_the_catalog(line, label, formats, cycles, ops):
    use = mfma_use(line)
    assert (use.label, use.formats, use.cycles, use.op.ops) == (label, formats, cycles, ops)


def test_mfma_use_refuses_an_mfma_outside_the_catalog():
    with pytest.raises(ValueError, match="v_mfma_f32_64x64x1_f16"):
        mfma_use("v_mfma_f32_64x64x1_f16 v[0:3], v[4:7], v[8:11], v[0:3]")


@pytest.mark.parametrize("formats,rate,scaled", [
    (("f16", "f16"), 1024, False), (("bf16", "bf16"), 1024, False), (("i8", "i8"), 2048, False),
    (("fp8", "fp8"), 2048, True), (("fp8", "bf8"), 2048, True), (("bf8", "bf8"), 2048, True),
    (("fp6", "fp6"), 4096, True), (("fp4", "fp4"), 4096, True), (("fp8", "fp4"), 2048, True),
])
def test_dtype_peak_is_the_best_catalog_rate(formats, rate, scaled):
    peak, name = peak_ops_per_cycle(*formats)
    assert peak == rate
    assert name.startswith("mfma_scale_") == scaled
    if formats == ("fp8", "fp8"):  # ties go to the smaller shape
        assert name == "mfma_scale_f32_16x16x128_f8f6f4"


def test_estimate_formula_on_known_numbers():
    # 64 16x16x32 MFMAs (16 catalog cycles each); llvm-mca: 284 cycles, 256 of them MFMA (4 each)
    loop = LoopReport(200, {"mfma": 64}, 1024, 284.0, 256.0, mfmas={"16x16x32_f16": 64}, mfma_ops=64 * 16384)
    assert loop.idle_cycles == 28 and loop.estimate_cycles == 1024 + 28
    info = kernel_report(HAND_ASM).info
    f16 = KernelReport(info, loop, 2, ("f16", "f16"), 1024.0, "mfma_f32_16x16x32_f16")
    assert f16.est_fraction == pytest.approx(64 * 16384 / 1052 / 1024)  # 97.3 %
    # the same loop against the fp8 peak (fp8 operands on a 1024-rate MFMA): half of it
    fp8 = KernelReport(info, loop, 2, ("fp8", "fp8"), 2048.0, "mfma_scale_f32_16x16x128_f8f6f4")
    assert fp8.est_fraction == pytest.approx(0.4867, abs=1e-4)
    # no llvm-mca figures, no estimate
    assert KernelReport(info, LoopReport(200, {}, 1024, None, None), 2, ("f16", "f16"), 1024.0, "").est_fraction is None


@needs_mca
def test_our_f16_default_kernel_through_the_shared_analysis():
    result = tvm_cdna4.build(gfx950_gemm(4096, 4096, 4096, "f16", "nt"))
    report = kernel_report(result.asm, result.kernel())
    assert report.loop.mfmas == {"16x16x32_f16": 64}  # two K tiles of 32 MFMAs per wave
    assert report.loop.mca_mfma_cycles == 256  # llvm-mca's 4 cycles per MFMA: replaced by the catalog's 16
    assert report.waves_per_simd == 2 and report.info.scratch_bytes == 0
    assert 0.9 <= report.est_fraction <= 1.0
    # the CLI's --report prints the same estimate
    assert f"estimate (single wave, static): {100 * report.est_fraction:.0f}% of the f16xf16 peak (1024 " \
        in format_report(result, "f16 nt")


def _bench():
    return benchmark_module("gfx950_vs_triton")


def test_triton_specialisation_matches_the_jit():
    bench = _bench()

    class Fn:
        arg_names = ["a_ptr", "M", "K", "stride_ak", "BLOCK"]

    signature, consts, attrs_ = bench.specialise(Fn, {"a_ptr": "fp16"}, {"M": 4096, "K": 100, "stride_ak": 1},
                                                 {"BLOCK": 64})
    assert signature == {"a_ptr": "*fp16", "M": "i32", "K": "i32", "stride_ak": "constexpr", "BLOCK": "constexpr"}
    assert consts == {"BLOCK": 64, "stride_ak": 1}
    assert attrs_ == {(0,): [["tt.divisibility", 16], ["tt.pointer_range", 32]], (1,): [["tt.divisibility", 16]]}


def test_triton_tutorial_matmul_through_the_same_analysis():
    pytest.importorskip("triton")
    bench = _bench()
    row = bench.triton_row("f16", "nt", 4096, bench.TritonConfig(128, 128, 64, 4, 16))
    assert row.error is None, row.error
    report = row.report
    assert set(report.loop.mfmas) == {"16x16x32_f16"}
    assert report.loop.mix.get("global_lds", 0) > 0  # Triton loads global -> LDS directly on gfx950
    assert report.info.lds_bytes > 0  # its dynamic LDS size, not the metadata's 0
    assert report.formats == ("f16", "f16") and report.waves_per_simd >= 1
    if llvm_tool("llvm-mca") is not None:
        assert 0 < report.est_fraction <= 1


def test_results_section_is_replaced_in_place_and_hand_notes_stay(tmp_path):
    bench = _bench()
    path = tmp_path / "RESULTS.md"
    path.write_text("# Results\n\n## Other\n\nkeep\n")
    old = f"{bench.RESULTS_HEADING} (2026-12-01)\n\nold table\n"
    bench.write_results(old, str(path))
    path.write_text(path.read_text() + "\n### Notes\n\nhand-written\n\n## Later\n")
    bench.write_results(old.replace("old", "new"), str(path))
    text = path.read_text()
    assert "new table" in text and "old table" not in text
    assert text.index("## Other") < text.index("new table") < text.index("### Notes") < text.index("## Later")


def test_rows_read_back_from_the_json_file_are_the_rows_written():
    """``--ours-only`` reuses Triton's rows of an earlier run: every field survives the round trip."""
    bench = _bench()
    data, rows = bench.read_json(str(paths.RUNS / "gfx950_vs_triton.json"), 4096)
    assert len(rows) == len(data["rows"]) and any(r.kernel == "Triton" and r.report for r in rows)
    for row, written in zip(rows, data["rows"]):
        assert row.as_dict() == written
