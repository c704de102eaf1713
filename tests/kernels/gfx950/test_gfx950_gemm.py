"""gfx950 GEMM schedules: every dtype x layout against numpy through the emulator."""

import numpy as np
import pytest
from gfx950_gemm_kernels import run_gemm

from tvm_cdna4.emulator import compare, emulate
from tvm_cdna4.isa import formats
from tvm_cdna4.isa import CATALOG
from tvm_cdna4.kernels.gfx950.gemm import DTYPES, LAYOUTS, Gfx950GemmConfig, gfx950_gemm, plan_gfx950_gemm
from tvm_cdna4.kernels.gfx950.mx_gemm import (MX_FORMATS, MxGemmConfig, default_mx_config, gfx950_mx_gemm, lds_bytes,
                                                 operand_plan, pack_operands)

SHAPES = [(1, 1, 1), (17, 255, 33), (257, 17, 70)]  # 1, 17, 255, 257 and K below one K tile
DEFAULT_BUILDS = pytest.mark.xdist_group("gfx950-4096")  # tests reading default_build's kernels: one worker


def default_build(dtype, layout):
    """``tvm_cdna4.build`` of the 4096^3 default kernel (dense or MX) through the session's build cache
    (tests/conftest.py): tests that read the same kernel's assembly share one build, whichever
    pytest-xdist worker makes it first; the cost model's plan, as the CLI builds it)."""
    from tvm_cdna4.kernels import gemm

    return gemm.build(gemm.GemmProblem(4096, 4096, 4096, dtype, layout), "gfx950")


# Every dtype x layout once, on one of SHAPES in rotation ((dtype index + layout index) mod 3, a Latin
# square), so that each dtype (element size) and each layout (contiguous dimensions) meets every
# shape; each (dtype, layout, shape) is a kernel of its own, parsed, lowered and emulated.
DTYPE_LAYOUT_CASES = [(dtype, layout, SHAPES[(i + j) % len(SHAPES)])
                      for i, dtype in enumerate(DTYPES) for j, layout in enumerate(LAYOUTS)]


# the mixed layouts (nn, tt) run with TVM_CDNA4_SLOW=1 (suite time): nt and tn take each operand's K-contiguous and
# M/N-contiguous path for every dtype
@pytest.mark.parametrize("dtype, layout, shape", [pytest.param(*c, marks=pytest.mark.slow) if c[1] in ("nn", "tt") else c
                                                  for c in DTYPE_LAYOUT_CASES],
                         ids=[f"{d}-{lay}-{'x'.join(map(str, s))}" for d, lay, s in DTYPE_LAYOUT_CASES])
def test_gemm_dtype_layout_matches_numpy(dtype, layout, shape, rng):
    run_gemm(rng, dtype, layout, shape)


def test_dtype_layout_cases_meet_every_shape():
    """The rotation covers every dtype x layout, every (dtype, shape) and every (layout, shape)."""
    assert {(d, lay) for d, lay, _ in DTYPE_LAYOUT_CASES} == {(d, lay) for d in DTYPES for lay in LAYOUTS}
    assert {(d, s) for d, _, s in DTYPE_LAYOUT_CASES} == {(d, s) for d in DTYPES for s in SHAPES}
    assert {(lay, s) for _, lay, s in DTYPE_LAYOUT_CASES} == {(lay, s) for lay in LAYOUTS for s in SHAPES}


@pytest.mark.parametrize("dtype, out", [("f16", "f16"), ("f16", "bf16"), ("bf16", "bf16"), ("fp8", "f16"), ("f32", "bf16")])
def test_gemm_output_dtypes(dtype, out, rng):
    run_gemm(rng, dtype, "nt", (40, 70, 96), out)


def test_gemm_32x32_mfma_and_batch(rng):
    run_gemm(rng, "bf16", "tn", (65, 70, 100), config=Gfx950GemmConfig(128, 128, 64, "32x32"))
    run_gemm(rng, "i8", "nn", (33, 20, 130), config=Gfx950GemmConfig(64, 64, 64, "32x32"), batch=2)


@pytest.mark.parametrize("dtype, layout, shape, config", [
    ("f16", "nt", (40, 70, 394), None),  # 7 K tiles: two loop iterations of the pipeline and a tail of four
    ("bf8_fp8", "nn", (33, 20, 1000), None),  # 8 K tiles of 128
    ("i8", "tn", (65, 17, 330), Gfx950GemmConfig(64, 64, 64, load_ahead=1)),  # one staging register set
])
def test_gemm_over_many_k_tiles(dtype, layout, shape, config, rng):
    """The fragment pipeline's loop, tails and staging sets (kernels.gfx950.pipeline.fragment_pipeline)."""
    run_gemm(rng, dtype, layout, shape, config=config)


FP8_DTYPES = ("fp8", "bf8", "fp8_bf8", "bf8_fp8")


@pytest.mark.parametrize("layout", ["nt", "nn"])
@pytest.mark.parametrize("dtype", FP8_DTYPES)
def test_fp8_bf8_on_the_scaled_mfma_over_two_k_tiles(dtype, layout, rng):
    """The default fp8/bf8 kernels (16x16x128 scaled MFMA, K tiles of 128) on a shape that is no
    tile multiple and spans two K tiles: cbsz/blgp must pick each operand's format."""
    run_gemm(rng, dtype, layout, (65, 33, 130))


@pytest.mark.parametrize("dtype, layout, shape, config", [
    ("bf8_fp8", "tn", (65, 70, 200), Gfx950GemmConfig(128, 128, 128, "32x32")),
    ("fp8_bf8", "tt", (33, 65, 130), Gfx950GemmConfig(64, 64, 128, "32x32")),
])
def test_fp8_bf8_on_the_scaled_32x32x64_mfma(dtype, layout, shape, config, rng):
    run_gemm(rng, dtype, layout, shape, config=config)


@DEFAULT_BUILDS
@pytest.mark.parametrize("dtype, layout", [("fp8", "nt"), pytest.param("bf8", "nn", marks=pytest.mark.slow),
                                           pytest.param("fp8_bf8", "nt", marks=pytest.mark.slow), ("bf8_fp8", "nn")])
def test_default_fp8_kernels_use_the_scaled_f8f6f4_mfma_with_unit_scales(dtype, layout):
    """Twice the rate of the dense fp8 MFMAs: 32 ``v_mfma_scale_f32_16x16x128_f8f6f4`` per loop
    iteration (two K tiles), formats from cbsz/blgp, the unit scale 0x7F7F7F7F in a register."""
    from tvm_cdna4.report import loop_report, main_loop

    result = default_build(dtype, layout)
    info = result.kernel()
    assert info.scratch_bytes == 0 and info.waves_per_simd() >= 2
    a, b = DTYPES[dtype].formats
    loop = loop_report(result.asm)
    assert loop.mfmas == {f"scale_16x16x128_f8f6f4({a},{b})": 32}
    assert loop.mix["waitcnt"] == 2  # one per K tile (Triton's best fp8: 4 per 64 MFMAs in nt, 6 in nn)
    assert all(line.split()[0] == "v_mfma_scale_f32_16x16x128_f8f6f4"
               for line in main_loop(result.asm) if "mfma" in line.split()[0])
    assert "0x7f7f7f7f" in result.asm.lower()


@DEFAULT_BUILDS
@pytest.mark.llvm("llvm-mca")
@pytest.mark.parametrize("layout", ["nt", "nn"])
def test_default_fp8_kernel_estimate_reaches_90_percent_of_the_fp8_peak(layout):
    from tvm_cdna4.report import kernel_report

    result = default_build("fp8", layout)
    report = kernel_report(result.asm, result.kernel(), DTYPES["fp8"].formats)
    assert report.peak_ops_per_cycle == 2048 and report.est_fraction >= 0.9, report.est_fraction


# Every MX element width x layout once, on shapes that are no tile multiples (M/N below, between and
# above one 128 tile; K from one 32-block to three 128-wide K tiles, block_k 256 on some, global loads one
# K tile ahead on one); where M or N is the contiguous dimension, some rows are whole 16-byte chunks
# (buffer loads) and some are not. The two formats of one width (mxfp8/mxbf8, mxfp6/mxbf6) build the
# same kernel but for the scaled MFMA's format code (cbsz = blgp: A and B share the format, so no layout
# can swap them) and the emulator's decode of that code: mxbf8 and mxbf6 run once each (tt with loads
# one tile ahead: both operands through ds_read_tr; nt with block_k 256: both through wide reads), the
# other width's layouts on mxfp8 / mxfp6 (tests/kernels/gfx950/test_gfx950_mx_golden.py pins all 20 kernels' code).
# The four heaviest run with TVM_CDNA4_SLOW=1 (their code is pinned by the golden test on every run).
_K128, _K256, _AHEAD1 = MxGemmConfig(), MxGemmConfig(block_k=256), MxGemmConfig(load_ahead=1)
MX_CASES = [
    # (the default run keeps each format's first layouts; suite time: the rest under TVM_CDNA4_SLOW=1)
    ("mxfp8", "nt", (1, 17, 32), _K128), pytest.param("mxfp8", "nn", (70, 96, 96), _K128, marks=pytest.mark.slow),
    pytest.param("mxfp8", "tn", (65, 33, 288), _K256, marks=pytest.mark.slow), pytest.param("mxfp8", "tt", (33, 70, 160), _K128, marks=pytest.mark.slow),
    ("mxbf8", "tt", (65, 96, 256), _AHEAD1),
    ("mxfp6", "nt", (130, 33, 256), _K128), ("mxfp6", "nn", (33, 70, 96), _K128),
    pytest.param("mxfp6", "tn", (64, 33, 288), _K128, marks=pytest.mark.slow),
    pytest.param("mxfp6", "tt", (70, 65, 160), _K256, marks=pytest.mark.slow),
    ("mxbf6", "nt", (33, 70, 160), _K256),
    ("mxfp4", "nt", (255, 33, 256), _K128), pytest.param("mxfp4", "nn", (70, 96, 160), _K128, marks=pytest.mark.slow),
    ("mxfp4", "tn", (33, 70, 96), _K128),
    pytest.param("mxfp4", "tt", (130, 65, 288), _K256, marks=pytest.mark.slow),
]


def test_mx_cases_meet_every_width_and_layout():
    """Each MX format runs, and each element width meets every layout (MX_CASES)."""
    widths = {d: formats.fmt(MX_FORMATS[d]).bits for d in MX_FORMATS}
    cases = [c.values if hasattr(c, "values") else c for c in MX_CASES]
    assert {d for d, *_ in cases} == set(MX_FORMATS)
    assert {(widths[d], lay) for d, lay, *_ in cases} == {(w, lay) for w in widths.values() for lay in LAYOUTS}


@pytest.mark.parametrize("dtype, layout, shape, config", MX_CASES,
                         ids=[f"{d}-{lay}-{'x'.join(map(str, s))}-bk{c.block_k}" + "-ahead1" * (c.load_ahead == 1)
                              for d, lay, s, c in (c.values if hasattr(c, "values") else c for c in MX_CASES)])
def test_mx_gemm_matches_numpy(dtype, layout, shape, config, rng):
    M, N, K = shape
    fmt = MX_FORMATS[dtype]
    a = rng.normal(size=(M, K)).astype(formats.fmt(fmt).dtype)
    b = rng.normal(size=(K, N)).astype(formats.fmt(fmt).dtype)
    sa = rng.integers(122, 133, (M, K // 32)).astype(np.uint8)
    sb = rng.integers(122, 133, (N, K // 32)).astype(np.uint8)
    C = np.full((M, N), np.nan, np.float32)
    emulate(gfx950_mx_gemm(M, N, K, dtype, layout, config), *pack_operands(a, b, fmt, layout), sa, sb, C)
    scale_a = np.exp2(np.repeat(sa.astype(np.float64) - 127, 32, axis=1))
    scale_b = np.exp2(np.repeat(sb.astype(np.float64) - 127, 32, axis=1)).T
    compare("C", C, (a.astype(np.float64) * scale_a) @ (b.astype(np.float64) * scale_b), rtol=1e-5, atol=1e-4)


def test_plan_of_the_default_f16_nn_kernel():
    """The plan is data: tile, MFMA, repeats, LDS stages, chunks and reads without building."""
    from tvm_cdna4.isa.llvm_helpers import SCHED_MFMA

    plan = plan_gfx950_gemm(4096, 4096, 4096, "f16", "nn")
    assert (plan.mfma, plan.block, plan.warp_tile, plan.repeats) == ("mfma_f32_16x16x32_f16", (128, 128, 64), (64, 64), (4, 4, 2))
    assert (plan.grid.tiles, plan.groups, plan.k_steps, plan.vec, plan.format_codes) == ((32, 32), 1024, 64, 8, None)
    # A (M x K) is K-contiguous: 16-byte reads, one per fragment; B (K x N) is N-contiguous: ds_read_tr16, two
    assert (plan.a.mn_contiguous, plan.a.lds_shape, plan.a.chunks, plan.a.transpose_read, plan.a.reads) == (
        False, (128, 64 + 8), 4, None, 4 * 2)
    assert (plan.b.mn_contiguous, plan.b.lds_shape, plan.b.chunks, plan.b.transpose_read, plan.b.reads) == (
        True, (64, 128 + 8), 4, "ds_read_tr16_b64_v4f16", 4 * 2 * 2)
    assert sum(n for mask, n in plan.interleave if mask == SCHED_MFMA) == plan.mfmas_per_tile == 32


def test_plan_of_fp8_bf8_uses_the_scaled_mfma_format_codes_and_one_k_step():
    plan = plan_gfx950_gemm(100, 100, 300, "fp8_bf8", "tn", config=Gfx950GemmConfig(64, 64, 128, "32x32"))
    assert (plan.mfma, plan.repeats, plan.format_codes, plan.k_steps) == ("mfma_scale_f32_32x32x64_f8f6f4", (1, 1, 2), (0, 1), 3)
    assert plan.a.transpose_read == "ds_read_tr8_b64_v2i32" and plan.b.transpose_read == "ds_read_tr8_b64_v2i32"
    assert plan_gfx950_gemm(64, 64, 64, "f32", "tn").a.transpose_read is None  # no 32-bit transposing read
def test_mx_storage_packs_along_the_contiguous_dimension(rng):
    """An M/N-contiguous operand packs along M/N (fp4: two N values per byte, N even in the low
    nibble), the packing ds_read_tr4 reads; a K-contiguous one packs along K."""
    b = rng.normal(size=(64, 8)).astype(formats.fmt("fp4").dtype)  # K x N
    a = rng.normal(size=(8, 64)).astype(formats.fmt("fp4").dtype)  # M x K
    A_nt, B_nn = pack_operands(a, b, "fp4", "nn")
    codes = formats._codes(formats.fmt("fp4"), b)
    assert B_nn.shape == (64, 1) and (B_nn[:, 0] == (codes << (4 * np.arange(8, dtype=np.uint64))).sum(1)).all()
    _, B_nt = pack_operands(a, b, "fp4", "nt")
    assert B_nt.shape == (8, 8) and (formats.from_words("fp4", B_nt, 64) == b.T).all()
    assert (formats.from_words("fp4", A_nt, 64) == a).all()


@pytest.mark.parametrize("fmt, tr, slot, unit", [("fp8", "ds_read_tr8_b64_v2i32", 8, 4),
                                                 ("fp6", "ds_read_tr6_b96_v3i32", 16, 3),
                                                 ("fp4", "ds_read_tr4_b64_v2i32", 8, 4)])
def test_mx_operand_plan_of_an_mn_contiguous_operand(fmt, tr, slot, unit):
    """The M/N-contiguous B of a 128 x 128 x 128 tile: K rows in LDS, one ds_read_tr chunk per slot
    (tr6: 12 bytes in 16, its LDS alignment), whole units per thread."""
    plan = operand_plan("B", False, 4096, 4096, 128, 128, fmt, 16)
    bits = formats.fmt(fmt).bits
    assert (plan.tr, plan.slot_bytes, plan.unit_words, plan.lds_dtype) == (tr, slot, unit, "uint8")
    assert (plan.rows, plan.row_words, plan.tile_words) == (4096, 4096 * bits // 32, 128 * bits // 32)
    assert plan.units * 256 * plan.unit_words == 128 * plan.tile_words
    assert plan.lds_row == 128 // CATALOG[tr].elements * slot + 16
    assert plan.reads == 32 // CATALOG[tr].elements  # ds_read_tr calls per 32 K positions of a lane


@DEFAULT_BUILDS
@pytest.mark.parametrize("dtype, layout, mnemonic, count", [("mxfp8", "tt", "ds_read_b64_tr_b8", 32),
                                                            ("mxfp6", "nn", "ds_read_b96_tr_b6", 16),
                                                            ("mxfp4", "tn", "ds_read_b64_tr_b4", 32)])
def test_mx_transposed_operands_use_ds_read_tr(dtype, layout, mnemonic, count):
    """Per loop iteration (two K tiles) and wave: 4 fragments of each M/N-contiguous operand per
    tile, 4 tr8 or 2 tr6/tr4 calls per fragment; the 32 scaled MFMAs; the pipeline's one wait per
    tile and nothing else; register copies only for the odd half of each tr6 fragment (3 moves);
    no scratch, two waves per SIMD."""
    from tvm_cdna4.report import main_loop

    result = default_build(dtype, layout)
    info = result.kernel()
    assert info.scratch_bytes == 0 and info.lds_bytes == lds_bytes(dtype, layout, default_mx_config(dtype, layout))
    assert info.waves_per_simd(4) >= 2, info.vgprs
    loop = [line.split()[0] for line in main_loop(result.asm)]
    assert loop.count("v_mfma_scale_f32_16x16x128_f8f6f4") == 32 and loop.count(mnemonic) == count
    assert loop.count("s_waitcnt") == 2
    assert sum(m.startswith("v_mov_b32") for m in loop) == (count // 2 * 3 if mnemonic == "ds_read_b96_tr_b6" else 0)


@pytest.mark.parametrize("kwargs, rule", [
    (dict(dtype="f17"), r"dtype 'f17' is not supported"),
    (dict(layout="nx"), r"layout 'nx'"),
    (dict(dtype="i8", out_dtype="f16"), r"output 'f16' for i8"),
    (dict(config=Gfx950GemmConfig(80, 128, 64)), r"does not tile 2 x 2 waves"),
])
def test_gemm_argument_errors(kwargs, rule):
    with pytest.raises(ValueError, match=rule):
        gfx950_gemm(64, 64, 64, **kwargs)


def test_mxfp4_default_k_tile_is_256_where_two_workgroups_fit_the_lds():
    assert default_mx_config("mxfp4", "nt").block_k == 256 and lds_bytes("mxfp4", "nt", MxGemmConfig(block_k=256)) == 77888
    assert default_mx_config("mxfp4", "nn").block_k == 128  # its padded tr4 rows need more: one workgroup per CU
    assert default_mx_config("mxfp8", "nt").block_k == 128
    # 8-bit A through ds_read_tr8: loads one tile ahead (one staging register set) to stay within 256 VGPRs
    assert [default_mx_config("mxbf8", layout).load_ahead for layout in ("nt", "nn", "tn", "tt")] == [2, 2, 1, 1]


def test_mx_gemm_argument_errors():
    with pytest.raises(ValueError, match="multiple of 32"):
        gfx950_mx_gemm(16, 16, 40)
    with pytest.raises(ValueError, match="layout 'nx'"):
        gfx950_mx_gemm(16, 16, 64, layout="nx")
    with pytest.raises(ValueError, match="block_k 128 or 256"):
        gfx950_mx_gemm(16, 16, 64, config=MxGemmConfig(block_k=64))


@DEFAULT_BUILDS
@pytest.mark.parametrize("dtype", ["f16", "fp8", "i8"])
def test_default_config_resources(dtype):
    info = default_build(dtype, "nn").kernel()
    assert info.scratch_bytes == 0 and info.vgpr_spills == 0
    assert info.waves_per_simd() >= 2


@DEFAULT_BUILDS
def test_main_loop_buffer_loads_without_address_arithmetic_and_interleaved_mfmas():
    from tvm_cdna4.report import classify, main_loop

    body = [line.split()[0] for line in main_loop(default_build("f16", "nn").asm)]
    mix = {kind: sum(classify(m) == kind for m in body) for kind in ("mfma", "global", "valu", "waitcnt")}
    assert mix["mfma"] == 64  # two K tiles of 32 MFMAs per wave
    # the fragment pipeline's one wait per K tile and none of LLVM's (Triton's best f16 nn: 7 per 128 MFMAs)
    assert mix["waitcnt"] == 2
    assert mix["global"] == 16 and all(m == "buffer_load_dwordx4" for m in body if classify(m) == "global")
    assert mix["valu"] == 0  # no 64-bit address arithmetic, no stage-offset arithmetic
    mfma = [classify(m) == "mfma" for m in body]
    gaps = sum(a and not b for a, b in zip(mfma, mfma[1:]))  # MFMAs followed by other instructions
    assert gaps >= 24, f"MFMAs clustered: only {gaps} of 64 are followed by a non-MFMA instruction"


@DEFAULT_BUILDS
@pytest.mark.llvm("llvm-mca")
@pytest.mark.parametrize("dtype,layout", [("f16", "nn"), ("bf16", "tn")])
def test_static_report_mfma_pipe_share_of_default_f16_bf16_kernels(dtype, layout):
    from tvm_cdna4.report import loop_report

    loop = loop_report(default_build(dtype, layout).asm)
    assert loop.mca_mfma_cycles == 256  # 64 MFMAs at 4 cycles each in llvm-mca's gfx950 model
    assert loop.mfma_share >= 0.85, f"{loop.mca_cycles} cycles per iteration"
