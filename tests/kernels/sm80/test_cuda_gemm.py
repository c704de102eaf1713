"""CUDA GEMM schedule (tvm_cdna4.kernels.sm80.gemm).

Compile-only tests run everywhere (nvcc/NVRTC compile for sm_80 needs no GPU). Tests marked
``cuda`` (tvm_cdna4.testing) run the kernels and skip cleanly when no CUDA device is reachable.
"""

from __future__ import annotations

import paths
import importlib.util
import itertools
import os
import re
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import nvrtc_shim
from benchmark_modules import benchmark_module
import pytest

from tvm_cdna4.runtime import cuda as runner
from tvm_cdna4.kernels.sm80.gemm import (
    LAYOUTS,
    DecodeConfig,
    GemmConfig,
    Swizzle,
    build,
    cuda_gemm,
    cuda_source,
    default_config,
    make_operands,
    swizzle_elem,
)


ROOT = str(paths.ROOT)
HAVE_GPU, _ = runner.have_cuda_gpu()

SMALL = GemmConfig(block_m=128, block_n=128, block_k=32, warps_m=2, warps_n=2, stages=3)


# ------------------------------------------------------------------------------------------------
# pure Python: swizzle and copy plans
# ------------------------------------------------------------------------------------------------


def _bank_groups(addresses_bytes):
    """16-byte bank groups (of 8) touched by one 8-address phase."""
    return [(a // 16) % 8 for a in addresses_bytes]


@pytest.mark.parametrize("row_elems", [32, 64, 128, 256])
def test_swizzle_is_a_bijection_within_each_tile(row_elems):
    rows = 64
    n = rows * row_elems
    img = sorted(swizzle_elem(x, row_elems) for x in range(n))
    assert img == list(range(n))


@pytest.mark.parametrize("row_elems", [32, 64, 128, 256])
def test_ldmatrix_phase_is_bank_conflict_free(row_elems):
    # one ldmatrix phase: 8 consecutive rows, the same 16-byte column chunk, 16 bytes each
    for r0 in range(0, 64, 8):
        for chunk in range(row_elems // 8):
            addr = [2 * swizzle_elem((r0 + r) * row_elems + chunk * 8, row_elems) for r in range(8)]
            assert len(set(_bank_groups(addr))) == 8, (row_elems, r0, chunk)


@pytest.mark.parametrize("row_elems", [32, 64, 128, 256])
def test_cp_async_store_phase_is_bank_conflict_free(row_elems):
    # 8 consecutive threads store 8 consecutive 16-byte chunks of the (row-major) tile
    chunks = row_elems // 8
    for c0 in range(0, 64 * chunks, 8):
        addr = [2 * swizzle_elem((c // chunks) * row_elems + (c % chunks) * 8, row_elems) for c in range(c0, c0 + 8)]
        assert len(set(_bank_groups(addr))) == 8


def test_compose_layout_matches_reference_swizzle():
    # the one Swizzle: its ComposeLayout (the shared views) is its int map, on elements and on words
    from tvm_tirx.tirx.layout import S, TileLayout

    for row_elems in (32, 128, 256):
        swz = Swizzle.for_row(row_elems)
        lay = swz.layout(TileLayout(S[(16, row_elems)]))
        words = swz.words().layout(TileLayout(S[(16, row_elems // 2)]))
        for r, c in itertools.product(range(16), range(0, row_elems, 4)):
            assert int(lay.apply(r, c)["m"]) == swizzle_elem(r * row_elems + c, row_elems) == swz(r * row_elems + c)
            assert int(words.apply(r, c // 2)["m"]) == swz.words()(r * row_elems // 2 + c // 2)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_copy_plan_covers_each_tile_element_once(layout):
    for cfg in (GemmConfig(), SMALL):
        for op in make_operands(4096, 4096, 4096, layout, cfg):
            seen = np.zeros((op.rows, op.cols), dtype=int)
            for tid in range(cfg.threads):
                for rep in range(op.reps):
                    r, c = op.chunk_coord(tid, rep)
                    seen[r, c : c + op.vec] += 1
            assert (seen == 1).all(), (layout, op.name)


def test_copy_plan_layout_agrees_with_chunk_coordinates():
    from tvm_tirx.tirx.layout import S, TileLayout

    cfg = GemmConfig()
    for op in make_operands(4096, 4096, 4096, "tn", cfg):
        it = op.copy_iters(op.cols)
        lay = TileLayout(S[tuple(e for e, _ in it) : tuple(s for _, s in it)])
        for tid in range(0, cfg.threads, 7):
            for rep in range(op.reps):
                r, c = op.chunk_coord(tid, rep)
                linear = (tid * op.reps + rep) * op.vec
                assert int(lay.apply(linear)["m"]) == r * op.cols + c


def test_vector_width_follows_leading_dimension():
    cfg = SMALL
    assert [op.vec for op in make_operands(64, 64, 64, "nt", cfg)] == [8, 8]
    assert [op.vec for op in make_operands(64, 64, 100, "nt", cfg)] == [4, 4]
    assert [op.vec for op in make_operands(255, 257, 100, "tn", cfg)] == [1, 1]
    assert [op.vec for op in make_operands(66, 64, 64, "tn", cfg)] == [2, 8]


def test_config_checks():
    with pytest.raises(ValueError):
        GemmConfig(block_k=16).check()
    with pytest.raises(ValueError):
        GemmConfig(stages=12, block_k=64).check()
    assert default_config("f16", 4096, 4096) == GemmConfig()
    assert default_config("bf16", 64, 64).block_n == 128
    with pytest.raises(ValueError, match="ctas"):
        GemmConfig(ctas=-1).check()


def test_unroll_and_persistent_rules():
    # the k-loop is unrolled for >= 2 stage groups of k-tiles, in every layout; persistent needs
    # ctas > 0, that unrolled loop and K a whole number of stage groups
    cfg = GemmConfig()  # block_k 64, 4 stages
    assert all(cfg.unrolled_for(4096, layout) for layout in LAYOUTS) and cfg.unrolled_for(512)
    assert not cfg.unrolled_for(448)  # 7 k-tiles: shorter than two stage groups
    p = replace(cfg, ctas=132)
    assert p.persistent_for(4096) and p.persistent_for(512, "tt") and p.persistent_for(4096, "nn")
    assert not p.persistent_for(4096 + 64)  # 65 k-tiles
    assert not cfg.persistent_for(4096)
    assert not replace(p, unroll_stages=False).persistent_for(4096)


def test_long_k_loop_form_is_emitted_as_planned():
    # 12 k-tiles, 3 stages: unrolled (constant stage offsets); 5 k-tiles: rolled. The plan's form per
    # layout is tests/kernels/sm80/test_cuda_plan.py's; nn (ldmatrix.trans for B, plain for A) shows emission follows it
    assert "for ko in range(4)" in cuda_gemm(128, 128, 384, "f16", "nn", "f32", SMALL).script()
    assert "for kt in range(5)" in cuda_gemm(128, 128, 160, "f16", "nn", "f32", SMALL).script()


# ------------------------------------------------------------------------------------------------
# compile-only (no GPU)
# ------------------------------------------------------------------------------------------------

OPS = {
    "cp": re.compile(r"cp\.async\.(cg|ca)\.shared\.global"),
    "ldm": re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16"),
    "ldm_t": re.compile(r"ldmatrix\.sync\.aligned\.m8n8\.x4\.trans\.shared\.b16"),
}


# Every layout with every output dtype, the input dtype alternating so each layout also meets both:
# every pair of the three factors is built. Each assertion below depends on one factor only (the
# mma on the input dtype, ldmatrix .trans on the layout, the store on the output dtype), so the
# other 12 triples of the full 2 x 4 x 3 product would repeat checks already made.
SM80_BUILDS = [(("f16", "bf16")[(i + j) % 2], layout, out)
               for i, layout in enumerate(LAYOUTS) for j, out in enumerate(("f32", "f16", "bf16"))]


@pytest.mark.parametrize("dtype,layout,out", SM80_BUILDS)
def test_compiles_for_sm80_with_expected_instructions(dtype, layout, out):
    # edges in M and N, K not a multiple of the block: masked, zero-filled cp.async
    src = cuda_source(build(200, 136, 72, dtype, layout, out, SMALL, arch="sm_80"))
    ab = "f16" if dtype == "f16" else "bf16"
    assert f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32" in src
    assert OPS["cp"].search(src) and "cp.async.commit_group" in src and "cp.async.wait_group" in src
    # .trans exactly for the operand whose K is not contiguous (A in t*, B in *n)
    want_trans = layout[0] == "t" or layout[1] == "n"
    want_plain = layout[0] == "n" or layout[1] == "t"
    assert bool(OPS["ldm_t"].search(src)) == want_trans
    assert bool(OPS["ldm"].search(src)) == want_plain
    assert "cp.async.cg.shared.global [%0], [%1], 16, %2" in src  # src_size zero-fill at edges
    if out == "f32":
        assert "st.global.v2.f32" in src
    else:
        assert f"cvt.rn.{out}x2.f32" in src and "st.global.b32" in src


def test_odd_leading_dimensions_compile():
    # K, M, N odd: no aligned cp.async exists, the element-copy path is used
    src = cuda_source(build(17, 33, 41, "f16", "tn", "f32", SMALL, arch="sm_80"))
    assert "mma.sync.aligned.m16n8k16" in src and "ldmatrix" in src
    assert "st.global.f32" in src and "st.global.v2" not in src  # odd N: one predicated store per element


@pytest.mark.xdist_group("cuda-4096")  # with the golden test's build
def test_default_big_tile_compiles():
    src = cuda_source(build(4096, 4096, 4096, "f16", "nt", "f32", arch="sm_90"))  # the golden test's build
    assert src.count("mma.sync.aligned.m16n8k16") >= 1
    assert "__launch_bounds__(256)" in src
    # k-loop unrolled by the 4 stages: 16 iterations, no runtime stage index
    assert "ko < 16" in src and "kt & 3" not in src


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.parametrize(
    "layout,M,N,K,out,cfg",
    [
        ("nt", 200, 136, 72, "f16", SMALL),  # an SM80_BUILDS kernel (built once)
        ("tt", 200, 136, 192, "f16", SMALL),  # stage-unrolled k-loop
        pytest.param("tt", 200, 136, 192, "f32", replace(SMALL, ctas=3), marks=pytest.mark.slow),  # persistent
        pytest.param("nt", 256, 256, 384, "bf16", GemmConfig(block_n=128, warps_n=2, stages=3, ctas=2),
                     marks=pytest.mark.slow),  # (slow: the first two rows keep nvcc on the generated code every run)
    ],
)
def test_generated_cuda_compiles_with_nvcc(layout, M, N, K, out, cfg, tmp_path):
    # TIRx only generates the CUDA C; nvcc compiles it to sm_80 machine code here, no spills.
    # TIRx itself compiles with NVRTC, which allocates more registers for the same source (the
    # 4096^3 nt kernel: 255 against nvcc's 230); `benchmarks/cuda_gemm.py --ptxas` reports that build.
    cu = tmp_path / "k.cu"
    cu.write_text(cuda_source(build(M, N, K, "f16", layout, out, cfg, arch="sm_80")))
    r = subprocess.run([NVCC, "-arch=sm_80", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(cu)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    usage = runner.ptxas_usage(r.stderr)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, r.stderr[-3000:]


def test_ptxas_usage_parses_the_report():
    log = ("ptxas info    : Compiling entry function 'main_kernel' for 'sm_90'\n"
           "ptxas         .     480 bytes stack frame, 496 bytes spill stores, 536 bytes spill loads\n"
           "ptxas info    : Used 255 registers, used 1 barriers, 480 bytes cumulative stack size\n")
    assert runner.ptxas_usage(log) == dict(registers=255, spill_stores=496, spill_loads=536)
    assert runner.ptxas_usage("") == dict(registers=None, spill_stores=None, spill_loads=None)


def test_device_compiler_choice(tmp_path):
    # the CUDA C is the same; the choice is recorded in the exported module for its load-time compile
    cfg = replace(SMALL, unroll_stages=False)
    srcs = {c: cuda_source(build(128, 128, 64, "f16", "nt", "f32", cfg, arch="sm_80", compiler=c)) for c in (None, "nvcc")}
    assert srcs[None] == srcs["nvcc"]
    exe = build(128, 128, 64, "f16", "nt", "f32", cfg, arch="sm_80", compiler="nvcc")
    exe.export_library(str(tmp_path / "k.so"))
    assert b'"compiler":"nvcc"' in (tmp_path / "k.so").read_bytes()
    with pytest.raises(ValueError, match="compiler must be 'nvcc' or 'nvrtc'"):
        build(128, 128, 64, "f16", "nt", "f32", cfg, arch="sm_80", compiler="clang")


def _have_nvrtc() -> bool:
    try:
        real = importlib.util.find_spec("cuda.bindings.nvrtc") is not None
    except ModuleNotFoundError:
        real = False
    return nvrtc_shim.find_cuda_root() is not None and (real or nvrtc_shim.find_libnvrtc() is not None)


need_nvrtc = pytest.mark.skipif(not _have_nvrtc(), reason="needs NVRTC (cuda-bindings or the "
                                "nvidia-cuda-nvrtc wheel) and the CUDA headers")


NVRTC_CASES = [("nt", "f16"), ("nn", "bf16"), ("tn", "f16"), ("tt", "f16")]


@pytest.fixture(scope="module")
def nvrtc_logs(tmp_path_factory):
    """NVRTC's compile log of each 4096^3 default kernel of ``NVRTC_CASES`` for sm_90, all in one
    child process (one interpreter and TIRx import for the four)."""
    tmp = tmp_path_factory.mktemp("nvrtc")
    sources = []
    for layout, dtype in NVRTC_CASES:
        cfg = default_config(dtype, 4096, 4096)
        cu = tmp / f"{layout}_{dtype}.cu"  # nt f16 and nn bf16 are the golden test's builds (the session cache)
        cu.write_text(cuda_source(build(4096, 4096, 4096, dtype, layout, "f32", cfg, arch="sm_90")))
        sources.append(str(cu))
    return dict(zip(NVRTC_CASES, nvrtc_shim.compile_logs(sources, "sm_90", ROOT)))


@need_nvrtc
@pytest.mark.slow  # 11 s of NVRTC; nvcc's spill checks of the large kernels run by default
@pytest.mark.xdist_group("cuda-4096")  # nt f16 and nn bf16 with the golden test's builds
@pytest.mark.parametrize("layout,dtype", NVRTC_CASES)
def test_large_default_kernel_does_not_spill_under_nvrtc(layout, dtype, nvrtc_logs):
    """TIRx compiles the CUDA C with NVRTC when the module is loaded; the 4096^3 default (the
    stage-unrolled loop in every layout) must fit its registers there. nvcc's allocation is no
    guide: 230 registers for nt where NVRTC 13.0 needs 255, and the unrolled nn/tn loop with the
    ldmatrix offsets folded into the pointer index, which nvcc fits in 232, spilled ~500 B under
    NVRTC (sm_90) until they became view offsets (``LdmatrixPlan.offset_in_view``)."""
    assert default_config(dtype, 4096, 4096).unrolled_for(4096, layout)
    log = nvrtc_logs[layout, dtype]
    usage = runner.ptxas_usage(log)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, log[-2000:]


def test_symbolic_m_flows_through_emission_and_lowering():
    """The plan fields typed ``Extent`` (M, the grid, the shapes) may be TIR expressions: a masked
    plan with M replaced by a variable emits and lowers with TIRx into a kernel taking ``int m``
    (the planner itself still takes an int M; this is the room the emission leaves)."""
    import attrs
    import tvm_tirx
    from tvm_tirx import ir
    from tvm_tirx.target import Target

    from tvm_cdna4.kernels.sm80.gemm_emit import emit
    from tvm_cdna4.kernels.sm80.gemm_plan import Param, ceil_div, plan
    from tvm_cdna4.tirx_private import shared_cuda_lowering

    p = plan(200, 136, 72, "f16", "nt", "f32", SMALL)
    m = ir.Var("m", "int32")
    tiles = ceil_div(m, SMALL.block_m) * p.grid.grid_n
    q = attrs.evolve(
        p, M=m, a=attrs.evolve(p.a, shape=(m, 72), tile=replace(p.a.tile, grows=m)),
        grid=attrs.evolve(p.grid, grid_m=ceil_div(m, SMALL.block_m), tiles=tiles, ctas=tiles),
        params=(Param("A", (m, 72), p.dtype), p.params[1], Param("C", (m, 136), "float32")))
    with shared_cuda_lowering():
        exe = tvm_tirx.tirx.compile(emit(q), target=Target({"kind": "cuda", "arch": "sm_80"}), pipeline="tirx")
    src = exe.mod.imports[0].inspect_source()
    assert "main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr, int m)" in src
    assert "mma.sync.aligned.m16n8k16" in src and "st.global.v2.f32" in src


def test_persistent_kernel_loops_over_tiles():
    cfg = replace(SMALL, ctas=3)
    src = cuda_source(build(256, 384, 192, "f16", "nt", "f32", cfg, arch="sm_80"))  # 6 tiles on 3 CTAs
    assert "for (int it = 0;" in src and "blockIdx.x" in src
    assert src.count("st.global.v2.f32") == 1  # one epilogue, inside the tile loop


def test_primfunc_is_returned():
    f = cuda_gemm(64, 64, 64, "bf16", "nn", "bf16", SMALL)
    assert "main" in f.script()[:2000] or f is not None


@pytest.mark.skipif(HAVE_GPU, reason="checks the no-GPU message")
def test_cli_without_gpu_exits_nonzero_with_message(gemm_cli):
    # --bench needs the GPU; --validate runs small problems in the CUDA emulator and refuses the rest
    for flag, M in (("--bench", 64), ("--validate", 256)):  # 256^3 is past the emulator's EMULATED_MACS
        r = gemm_cli("--target", "sm80", "--dtype", "f16", "--layout", "nt", "-M", str(M), "-N", "256", "-K", "256", flag)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert r.stderr.startswith("error: ") and "needs an NVIDIA GPU" in r.stderr


def test_cli_sm80_refuses_gfx950_only_options(gemm_cli):
    r = gemm_cli("--target", "sm80", "--dtype", "fp8", "-M", "64", "-N", "64", "-K", "64")
    assert r.returncode == 2 and "--target sm80 supports --dtype f16/bf16" in r.stderr


def test_cli_emit_cuda(gemm_cli):
    r = gemm_cli("--target", "sm80", "--dtype", "bf16", "--layout", "tn", "-M", "96", "-N", "80", "-K", "48", "--emit", "cuda")
    assert r.returncode == 0, r.stderr
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in r.stdout
    assert "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" in r.stdout


# ------------------------------------------------------------------------------------------------
# GPU
# ------------------------------------------------------------------------------------------------

GRID = [(1, 1, 1), (17, 33, 40), (255, 257, 100), (128, 128, 32), (1000, 1000, 1000)]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype,layout", [(d, l) for d in ("f16", "bf16") for l in LAYOUTS])
def test_gpu_matches_numpy(dtype, layout, rng, tmp_path):
    for M, N, K in GRID:
        fn = runner.compile_and_load(M, N, K, dtype, layout, "f32", workdir=str(tmp_path))
        a, b = runner.random_inputs(M, N, K, dtype, layout, rng)
        err, ok = runner.check_output(runner.run_numpy(fn, a, b, M, N, "f32"), runner.reference(a, b, layout), "f32")
        assert ok, (M, N, K, err)


@pytest.mark.cuda
@pytest.mark.parametrize("out", ["f16", "bf16"])
def test_gpu_low_precision_output(out, rng, tmp_path):
    M, N, K = 255, 258, 100
    fn = runner.compile_and_load(M, N, K, "f16", "nn", out, workdir=str(tmp_path))
    a, b = runner.random_inputs(M, N, K, "f16", "nn", rng)
    err, ok = runner.check_output(runner.run_numpy(fn, a, b, M, N, out), runner.reference(a, b, "nn"), out)
    assert ok, err


# decode shapes (issue 24): the planner's small-M tiles and K splits, N and K not multiples of 8 among them
DECODE = [(1, 4096, 4096, "bf16"), (5, 1000, 4099, "bf16"), (33, 4095, 2056, "f16"), (16, 4096, 14336, "bf16")]


@pytest.mark.cuda
@pytest.mark.parametrize("M,N,K,out", DECODE, ids=[f"{m}x{n}x{k}" for m, n, k, _ in DECODE])
def test_gpu_decode_plans_match_numpy(M, N, K, out, rng, tmp_path):
    from tvm_cdna4.kernels.sm80.gemm import choose_config

    cfg = choose_config(M, N, K, "bf16", "nt", out)
    a, b = runner.random_inputs(M, N, K, "bf16", "nt", rng)
    want = runner.reference(a, b, "nt")
    outs = []
    for reduction in ("atomic", "ordered"):
        if isinstance(cfg, DecodeConfig):  # the decode kernel's reductions need a K split: force one
            split = replace(cfg, reduction=reduction, split_k=max(cfg.split_k, 2))
        else:
            split = replace(cfg, reduction=reduction, reduce_vector=cfg.reduce_vector if reduction == "ordered" else 1)
        fn = runner.compile_and_load(M, N, K, "bf16", "nt", out, split, workdir=str(tmp_path))
        outs.append([runner.run_numpy(fn, a, b, M, N, out) for _ in range(2)])
        err, ok = runner.check_output(outs[-1][0], want, out)
        assert ok, (cfg, reduction, err)
    np.testing.assert_array_equal(outs[1][0], outs[1][1])  # the ordered reduction: the same bits every launch


# the ordered split-K reduction by column pairs (reduce_vector=2), N even but not a multiple of the tile,
# K odd or not a multiple of the k-tile
PAIRS = [(5, 1000, 4099, GemmConfig(block_m=16, block_n=64, block_k=64, warps_m=1, warps_n=4, stages=4, split_k=3)),
         (33, 4094, 2056, GemmConfig(block_m=64, block_n=128, block_k=128, warps_m=2, warps_n=4, stages=3, split_k=2))]


@pytest.mark.cuda
@pytest.mark.parametrize("M,N,K,cfg", PAIRS, ids=[f"{m}x{n}x{k}" for m, n, k, _ in PAIRS])
def test_gpu_split_k_ordered_pairs_match_numpy(M, N, K, cfg, rng, tmp_path):
    cfg = replace(cfg, reduction="ordered", reduce_vector=2)
    a, b = runner.random_inputs(M, N, K, "bf16", "nt", rng)
    fn = runner.compile_and_load(M, N, K, "bf16", "nt", "bf16", cfg, workdir=str(tmp_path))
    assert fn.plan.epilogue.reduce.instr == "st.global.v2.f32"
    outs = [runner.run_numpy(fn, a, b, M, N, "bf16") for _ in range(2)]
    err, ok = runner.check_output(outs[0], runner.reference(a, b, "nt"), "bf16")
    assert ok, (cfg, err)
    np.testing.assert_array_equal(outs[0], outs[1])  # deterministic: the same bits every launch


@pytest.mark.cuda
def test_gpu_tune_stores_the_fastest_and_build_reads_it(rng, tmp_path, monkeypatch):
    from tvm_cdna4.kernels.sm80.gemm import tune_candidates, tuned_config

    monkeypatch.setenv("TVM_CDNA4_CACHE_DIR", str(tmp_path / "cache"))
    prob = (64, 1024, 2048, "bf16", "nt", "bf16")
    res = runner.tune_problems([prob], top=3, jobs=3)[prob]
    assert len(res["seconds"]) == 3 and set(res["seconds"]) == set(tune_candidates(*prob, top=3))
    assert res["config"] == min(res["seconds"], key=res["seconds"].get)
    assert tuned_config(*prob, arch=runner.device_arch()) == res["config"]
    fn = runner.compile_and_load(*prob, workdir=str(tmp_path))  # no config: the tuned one
    assert fn.plan.config == res["config"]
    a, b = runner.random_inputs(64, 1024, 2048, "bf16", "nt", rng)
    err, ok = runner.check_output(runner.run_numpy(fn, a, b, 64, 1024, "bf16"), runner.reference(a, b, "nt"), "bf16")
    assert ok, err


def _bench_script():
    return benchmark_module("cuda_gemm")


@pytest.mark.cuda
def test_gpu_seed_ldmatrix_example(tmp_path):
    assert _bench_script().seed_example(print, str(tmp_path))


def test_toggling_ceiling_alternates_operands(tmp_path, rng):
    """The benchmark's toggling mma.sync ceiling (emulated, one block): its four mma per iteration
    alternate between the operands x and x ^ mask, so it must equal the mean of the constant-operand
    loop run on x and on x ^ mask. Operands are small integers and x ^ mask flips one mantissa bit,
    so every product and sum is exact."""
    from tvm_cdna4.emulator import emulate

    path = tmp_path / "ceiling.py"
    path.write_text(_bench_script().CEILING_SRC)
    spec = importlib.util.spec_from_file_location("ceiling", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mt, nt = 2, 2
    nab, nd = 4 * mt + 2 * nt, 4 * mt * nt
    vals = (rng.integers(1, 5, (256, 2 * nab)) * rng.choice([-1, 1], (256, 2 * nab))).astype(np.float16)
    x = vals.view(np.int32)
    masks = np.where(rng.random((256, nab)) < 0.5, 0x02000200, 0x00000200).astype(np.uint32)
    xm = (x.view(np.uint32) ^ masks).view(np.int32)

    def run(toggle, X):
        Y = np.zeros((256, nd), np.float32)
        emulate(mod.ceiling_kernel(1, 1, "float16", mt, nt, toggle), X, Y, target="sm80")
        return Y

    plain, flipped = run(False, x), run(False, xm)
    toggled = run(True, np.concatenate([x, masks.view(np.int32)], axis=1))
    assert not np.array_equal(plain, flipped)
    np.testing.assert_array_equal(toggled, (plain + flipped) / 2)


@pytest.mark.slow  # suite time (an nvcc build of a path the default kernels leave): TVM_CDNA4_SLOW=1
@pytest.mark.parametrize("layout", ["nn"])  # A plain, B through ldmatrix.trans: both view forms
def test_generic_address_path_still_compiles(layout):
    # precompute=False: every address straight from the swizzled ComposeLayout views
    cfg = GemmConfig(block_m=128, block_n=128, block_k=64, warps_m=2, warps_n=2, stages=3, precompute=False)
    src = cuda_source(build(256, 256, 128, "f16", layout, "f32", cfg, arch="sm_80"))
    assert "mma.sync.aligned.m16n8k16" in src and "cp.async.cg.shared.global" in src


def test_cutlass_peer_names_state_their_tiles():
    """The benchmark labels each CUTLASS peer by its export name: every tile in
    benchmarks/cutlass_sm80_peer.cu must be named after the tile, warp tile and stage count it
    instantiates and fit the H200's 227 KiB of shared memory (16-bit operands), and each tile is
    instantiated for every layout and both input dtypes."""
    with open(os.path.join(ROOT, "benchmarks", "cutlass_sm80_peer.cu")) as f:
        src = f.read()
    tiles = re.findall(r"^  X\(dt, lay, (\w+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\)", src, re.MULTILINE)
    assert len(tiles) == len(re.findall(r"^  X\(", src, re.MULTILINE)) >= 2
    for name, *dims in tiles:
        bm, bn, bk, wm, wn, wk, stages = map(int, dims)
        assert name == f"{bm}x{bn}x{bk}_w{wm}x{wn}_s{stages}", name
        assert wk == bk and bm % wm == 0 and bn % wn == 0, name
        assert stages * (bm + bn) * bk * 2 <= 227 * 1024, name
    layouts = re.search(r"^#define PEER_LAYOUTS\(X, dt\) (.*)$", src, re.MULTILINE).group(1)
    assert re.findall(r"PEER_TILES\(X, dt, (\w+)\)", layouts) == list(LAYOUTS)
    dtypes = re.search(r"^#define PEER_ALL\(X\) (.*)$", src, re.MULTILINE).group(1)
    assert re.findall(r"PEER_LAYOUTS\(X, (\w+)\)", dtypes) == ["f16", "bf16"]


def test_peer_table_rows_and_laggards():
    """The benchmark's closing table: per (size, dtype, layout) the best correct run of each
    contender; wrong runs and all-zero inputs do not count; ratios where both ran; the rows below
    1.12x Triton or below CUTLASS are listed after the table."""
    bench = _bench_script()

    def run(who, layout, config, tflops, ok=True, inputs="uniform"):
        return dict(who=who, size=4096, dtype="bf16", layout=layout, inputs=inputs, config=config, tflops=tflops, ok=ok)

    results = [run("ours", "nn", "128x256x64_w2x4_s4", 432.0), run("ours", "nn", "zeros", 480.0, inputs="zeros"),
               run("cutlass_sm80", "nn", "cutlass_bf16_nn_128x256x64_w64x64_s3", 420.0),
               run("cutlass_sm80", "nn", "cutlass_bf16_nn_256x128x64_w64x64_s3", 440.0, ok=False),
               run("cutlass_sm80", "nn", "cutlass_bf16_nn_128x256x32_w64x64_s4", 425.0),
               run("triton_mma_sync", "nn", "128x256x64_w8_s3 [mma.sync]", 400.0),
               run("ours", "nt", "128x256x64_w2x4_s4", 450.0), run("torch", "nt", "torch.matmul", 700.0)]
    rows = bench.peer_table(results)
    assert [(r["layout"], r["ours"], r.get("cutlass_sm80"), r["ours/triton"]) for r in rows] == [
        ("nn", 432.0, 425.0, 432.0 / 400.0), ("nt", 450.0, None, None)]
    assert rows[0]["cutlass_sm80_config"] == "cutlass_bf16_nn_128x256x32_w64x64_s4"
    assert rows[0]["ours/cutlass"] == 432.0 / 425.0 and rows[1]["ours/cutlass"] is None
    lines = bench.table_lines(rows)
    assert lines[2] == ("| 4096^3 | bf16 | nn | 432.0 (128x256x64_w2x4_s4) | 400.0 (128x256x64_w8_s3 [mma.sync]) "
                        "| 425.0 (128x256x32_w64x64_s4) | 1.08 | 1.02 | – |")
    assert lines[-1] == "below 1.12x Triton: 4096^3 bf16 nn (1.08); below CUTLASS: none"


def test_check_output_fails_wrong_results(rng):
    """The verdict validation and the benchmark give every output: a correct f32 product passes, an
    f16-rounded one passes only under the f16 tolerance, and one wrong or unwritten element fails."""
    check = runner.check_output
    a, b = rng.standard_normal((64, 48)), rng.standard_normal((48, 80))
    ref = (a @ b).astype(np.float32)
    assert check(ref.copy(), ref, "float32") == (0.0, True)
    rounded = ref.astype(np.float16).astype(np.float32)
    err, ok = check(rounded, ref, "float16")
    assert ok and 1e-5 < err < 1e-3
    assert not check(rounded, ref, "float32")[1]
    wrong = ref.copy()
    wrong[3, 7] += 0.05 * np.linalg.norm(ref)  # relative error 0.05: above even bf16's 1e-2
    assert not check(wrong, ref, "bfloat16")[1]
    poisoned = ref.copy()
    poisoned[0, 0] = np.nan
    assert check(poisoned, ref, "float32") == (float("inf"), False)
    # the benchmark's --zeros runs: against an all-zero reference only an exactly zero output passes
    zeros = np.zeros_like(ref)
    assert check(zeros.copy(), zeros, "float32") == (0.0, True)
    stray = zeros.copy()
    stray[5, 5] = 1e-6
    assert not check(stray, zeros, "float32")[1]


def test_runtime_dtypes_come_from_the_formats():
    """runtime.cuda's numpy / torch dtypes and tolerances are read from tvm_cdna4.isa.formats, by the
    short name or the TIR name (the format's ``tir``: its numpy dtype's name, torch's spelling too)."""
    import ml_dtypes

    from tvm_cdna4.isa.formats import FORMATS, by_tir

    assert [runner.np_dtype(n) for n in ("f16", "float16", "bf16", "bfloat16", "f32", "float32")] == [
        np.dtype(np.float16)] * 2 + [np.dtype(ml_dtypes.bfloat16)] * 2 + [np.dtype(np.float32)] * 2
    assert all(by_tir(f.tir) is f and by_tir(f.name) is f for f in FORMATS.values())
    assert (FORMATS["bf16"].tir, FORMATS["fp8"].tir) == ("bfloat16", "float8_e4m3fn")
    assert [runner.tolerance(n) for n in ("float32", "f16", "bfloat16")] == [1e-4, 2e-3, 1e-2]
    with pytest.raises(ValueError, match="unknown element format 'half'"):
        runner.np_dtype("half")


def test_runtime_torch_dtypes_come_from_the_formats():
    import ml_dtypes

    torch = pytest.importorskip("torch")
    assert [runner.torch_dtype(n) for n in ("f16", "bfloat16", "f32")] == [torch.float16, torch.bfloat16, torch.float32]
    assert runner.torch_dtype_for(np.zeros(2, ml_dtypes.bfloat16)) == torch.bfloat16
