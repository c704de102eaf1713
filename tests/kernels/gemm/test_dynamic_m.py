"""Dynamic M (``kernels.gemm.dynamic_m``): the bucket table, the per-bucket plans (the static planner's
choice at the representative M, masked along M, the workspace sized for the bucket), the plan
records, the emulator on odd M across the buckets of both targets (one build per bucket, shared by
the module), the CLI; on an NVIDIA GPU (``cuda`` marker) every odd M from 1 to 8191."""

from __future__ import annotations

from paths import ROOT, TESTS
import json

import numpy as np
import pytest

from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm

from tvm_cdna4.kernels.gfx950 import gemm as gfx950_gemm
from tvm_cdna4.kernels.gemm.dynamic_m import BUCKET_EDGES, DynamicGemm, MBucket, buckets, m_limit

ODD_M = (1, 7, 17, 33, 100, 129, 300)  # six buckets; 1 and 7 share the first
CUDA_NK = (40, 392)  # K: a tail, and a k-tile per stage of the tiles the planner picks (16x64x128, 4 stages)
GFX_NK = (40, 128)


def test_the_bucket_table():
    table = buckets(m_limit(4096, 4096))
    assert [(b.lo, b.hi) for b in table] == [(1, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 1024),
                                             (1025, 4096), (4097, (2**31 - 1) // 4096)]
    assert len(table) <= 8 and [b.hi for b in table[:-1]] == list(BUCKET_EDGES)
    assert [b.representative for b in table] == [16, 32, 64, 128, 256, 1024, 4096, 8192]
    assert [(b.lo, b.hi) for b in buckets(100)] == [(1, 16), (17, 32), (33, 64), (65, 100)]
    with pytest.raises(ValueError, match="1 <= lo <= hi"):
        MBucket(5, 4)


def test_dispatch_builds_each_bucket_once_on_first_use():
    built = []
    dyn = DynamicGemm("test", buckets(5000), lambda b: ("plan", b), lambda p: built.append(p) or len(built))
    assert dyn.kernel_for(5) == 1 and dyn.kernel_for(16) == 1 and dyn.kernel_for(17) == 2 and dyn.kernel_for(3) == 1
    assert built == [("plan", MBucket(1, 16)), ("plan", MBucket(17, 32))]
    assert dyn.built() == (MBucket(1, 16), MBucket(17, 32))
    assert dyn.bucket(4097) == MBucket(4097, 5000) and dyn.bucket(4096) == MBucket(1025, 4096)
    for bad, err in ((0, ValueError), (5001, ValueError), (2.0, TypeError)):
        with pytest.raises(err, match="M"):
            dyn.bucket(bad)


def test_cuda_bucket_plans_are_the_static_choice_masked_along_m():
    from tvm_cdna4.kernels.sm80.decode_plan import DecodePlan
    from tvm_cdna4.kernels.sm80.gemm_plan import plan_record

    dyn = cuda_gemm.build_dynamic(1024, 4096, "bf16", "nt", "bf16")
    kinds = set()
    for b in dyn.buckets:
        p = dyn.plan(b.lo)
        assert p.dynamic_m == b and p.M.name == "M" and p.config == cuda_gemm.choose_config(
            b.representative, 1024, 4096, "bf16", "nt", "bf16")
        record = plan_record(p)
        assert record["M"] == "M" and record["dynamic_m"] == {"lo": b.lo, "hi": b.hi}
        json.dumps(cuda_gemm.build_key(p))  # the cache key is data
        if isinstance(p, DecodePlan):
            kinds.add("decode")
            assert p.token_tiles == 2 and p.params[0].shape[0].same_as(p.M)
            continue
        kinds.add("split" if p.config.split_k > 1 else "tile")
        # every load and store along M: A's rows clamped (K divides the k-tiles), the stores masked,
        # a split's reduction without branches
        assert p.a.copy.rows_clamped and not p.a.copy.masked and p.epilogue.masked
        assert p.config.split_k == 1 or p.epilogue.reduce.branch_free
        assert p.params[0].shape[0].same_as(p.M) and p.params[2].shape[0].same_as(p.M)
        if p.config.split_k > 1:  # the workspace and tickets serve the bucket's largest M
            w, s = p.params[3], p.params[4]
            assert w.shape[1] == b.hi and s.shape[0] == -(-b.hi // p.config.block_m) * p.grid.grid_n
    assert kinds == {"decode", "split", "tile"}
    key = cuda_gemm.build_key(dyn.plan(300))
    assert key != cuda_gemm.build_key(dyn.plan(2000))  # same tile, another bucket: another entry
    static = cuda_gemm.plan(1024, 1024, 4096, "bf16", "nt", "bf16", dyn.plan(300).config)
    assert static.dynamic_m is None and not static.a.copy.masked and plan_record(static)["M"] == 1024
    assert not static.a.copy.rows_clamped  # a static M keeps its pinned code (the golden digests)


def test_gfx950_bucket_plans_are_the_static_choice():
    from tvm_cdna4.kernels.gfx950.gemm_plan import plan_for

    dyn = gfx950_gemm.build_dynamic(1024, 4096, "bf16", "nt", "bf16")
    assert dyn.limit == m_limit(4096 * 2, 1024)
    splits = set()
    for b in dyn.buckets:
        p, chosen = dyn.plan(b.lo), plan_for(b.representative, 1024, 4096, "bf16", "nt", "bf16")
        assert (p.dynamic_m, p.config, p.grid.k_splits) == (b, chosen.config, chosen.grid.k_splits)
        assert p.params[0].shape[0].same_as(p.M) and p.params[2].shape[0].same_as(p.M)
        json.dumps(gfx950_gemm.cache_key(p))
        splits.add(p.grid.k_splits)
        if "reduce" in p.epilogue.ops:  # the workspace serves the bucket's largest M
            assert p.epilogue.params[0].shape == (p.epilogue.slices * b.hi * 1024,)
    assert max(splits) > 1


@pytest.mark.parametrize("build,args,match", [
    (cuda_gemm.build_dynamic, (64, 64, "f16", "tn"), "A stored \\[M, K\\]"),
    (gfx950_gemm.build_dynamic, (64, 64, "f16", "tt"), "A stored \\[M, K\\]"),
    (gfx950_gemm.build_dynamic, (64, 64, "mxfp4", "nt"), "dense dtypes"),
])
def test_dynamic_m_refusals(build, args, match):
    with pytest.raises(ValueError, match=match):
        build(*args)
    with pytest.raises(ValueError, match="no config"):
        cuda_gemm.build(None, 64, 64, config=cuda_gemm.GemmConfig())


@pytest.fixture(scope="module")
def dynamic():
    """The two dynamic-M GEMMs the emulator runs, built per bucket on first use and shared by the tests:
    ``{target: (DynamicGemm, (N, K), input dtype, output dtype, relative tolerance)}``."""
    import ml_dtypes

    return {"sm80": (cuda_gemm.build_dynamic(*CUDA_NK, "f16", "nt", "f16"), CUDA_NK, np.float16, np.float16, 2**-10),
            "gfx950": (gfx950_gemm.build_dynamic(*GFX_NK, "bf16", "nt", "f32"), GFX_NK, ml_dtypes.bfloat16,
                       np.float32, 1e-5)}


@pytest.mark.parametrize("target", ["sm80", "gfx950"])
@pytest.mark.parametrize("M", [pytest.param(m, marks=pytest.mark.slow) if m in (7, 129, 300) else m for m in ODD_M])  # suite time
def test_dynamic_m_in_the_emulator(dynamic, target, M):
    from tvm_cdna4.emulator import compare, emulate

    dyn, (N, K), dtype, out_dtype, tol = dynamic[target]
    rng = np.random.default_rng(M)
    a, b = rng.uniform(-1, 1, (M, K)).astype(dtype), rng.uniform(-1, 1, (N, K)).astype(dtype)
    p = dyn.plan(M)
    adds = "atomic_add" in getattr(getattr(p, "epilogue", None), "ops", ())  # a gfx950 split-K plan adds into a zeroed f32 C
    c = np.zeros((M, N), out_dtype) if adds else np.full((M, N), np.nan, out_dtype)
    work = [np.zeros(q.shape, q.dtype) for q in (p.params[3:] if target == "sm80" else p.epilogue.params)]
    emulate(dyn.primfunc(M), a, b, c, *work, target=target)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    compare("C", c, a64 @ b64.T, rtol=tol, atol=tol * (np.abs(a64) @ np.abs(b64).T))


@pytest.mark.slow  # suite time (CI within 5 min on 2 cores): run with TVM_CDNA4_SLOW=1
def test_dynamic_cuda_source_compiles(dynamic, tmp_path):
    """The kernel takes ``int M`` and divides by it only through ``truncdiv`` (``kernels.gemm.dynamic_m.ceil_div``): a
    floor division of unknown sign lowers to let-bound remainders, which CUDA codegen printed inside
    address expressions (``&( int rmod_3 = ...``), C that NVRTC rejects. With NVRTC here (the
    ``nvidia-cuda-nvrtc`` wheel and a CUDA toolkit's headers), it compiles."""
    import os
    import sys

    from tvm_cdna4.runtime import cuda as runner

    dyn = dynamic["sm80"][0]
    source = cuda_gemm.cuda_source(dyn.kernel_for(33))
    assert "int M)" in source and "rmod" not in source and "rdiv" not in source
    sys.path.insert(0, str(TESTS))
    import nvrtc_shim

    if nvrtc_shim.find_libnvrtc() is None or nvrtc_shim.find_cuda_root() is None:
        pytest.skip("NVRTC (pip install nvidia-cuda-nvrtc==13.0.88) and a CUDA toolkit's headers are not here")
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    usage = runner.ptxas_usage(nvrtc_shim.compile_logs([str(cu)], "sm_90", str(ROOT))[0])
    assert usage["registers"] and usage["spill_stores"] == 0


def test_the_emulator_binds_m_from_the_shapes(dynamic):
    from tvm_cdna4.emulator import emulate

    dyn, (N, K), *_ = dynamic["gfx950"]
    a, b = np.zeros((5, K), np.int16), np.zeros((N, K), np.int16)
    with pytest.raises(ValueError, match=r"parameter C: dimension 0 is M = 5 \(from A\); found 6"):
        emulate(dyn.primfunc(5), a, b, np.zeros((6, N), np.float32))


@pytest.mark.parametrize("target,extra", [("sm80", []), ("gfx950", ["--dtype", "bf16"])])
def test_cli_dynamic_m_config_and_refusals(gemm_cli, target, extra):
    run = gemm_cli("--target", target, "--dynamic-m", "-M", "100", "-N", "4096", "-K", "4096", *extra,
                   "--emit", "config")
    assert run.returncode == 0, run.stderr
    config = json.loads(run.stdout)
    assert config["m_bucket"] == [65, 128] and config["planned_at_m"] == 128
    assert config["buckets"][:4] == ["1-16", "17-32", "33-64", "65-128"]  # every bucket, both targets
    run = gemm_cli("--target", target, "--dynamic-m", "-M", "100", "--layout", "tn", "--emit", "config")
    assert run.returncode == 2 and "A stored [M, K]" in run.stderr
    run = gemm_cli("--target", target, "--dynamic-m", "--block", "64x64x64", "--emit", "config")
    assert run.returncode == 2 and "--block cannot be given" in run.stderr


# ---------------------------------------------------------------------------------------- on the GPU

SWEEP = [((1024, 4096), "nt", "bf16", "bf16"), ((768, 1024), "nn", "f16", "f32")]


@pytest.mark.cuda
@pytest.mark.parametrize("shape,layout,dtype,out_dtype", SWEEP)
def test_every_odd_m_up_to_8192_on_the_gpu(shape, layout, dtype, out_dtype):
    """Every odd M from 1 to 8191 through the dispatch table (the first shape's buckets take the
    decode kernel, split-K tiles, small tiles and the big tile), each against the f32 product of the
    same rows: one reference for all, one host read at the end."""
    import torch

    from tvm_cdna4.runtime import cuda as runner

    N, K = shape
    dyn = runner.DynamicKernel(cuda_gemm.build_dynamic(N, K, dtype, layout, out_dtype, runner.device_arch()))
    tdt, odt = runner.torch_dtype(dtype), runner.torch_dtype(out_dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.empty((8192, K), dtype=tdt, device="cuda").uniform_(-1, 1, generator=gen)
    b = torch.empty((N, K) if layout == "nt" else (K, N), dtype=tdt, device="cuda").uniform_(-1, 1, generator=gen)
    ref = a.float() @ (b.float().T if layout == "nt" else b.float())
    errors = torch.zeros(4096, device="cuda")
    for i, M in enumerate(range(1, 8192, 2)):
        c = torch.full((M, N), float("nan"), dtype=odt, device="cuda")
        dyn.launch(a[:M], b, c)
        errors[i] = torch.linalg.norm(c.float() - ref[:M]) / torch.linalg.norm(ref[:M])
    errors = errors.cpu().numpy()
    bad = np.flatnonzero(~(errors <= runner.tolerance(out_dtype)))
    assert bad.size == 0, f"odd M {[2 * i + 1 for i in bad[:10]]} wrong (relative errors {errors[bad[:10]]})"
    assert dyn.dynamic.built() == dyn.dynamic.buckets  # one build per bucket, whatever the M


@pytest.mark.parametrize("target", ["sm80", "gfx950"])
def test_dynamic_m_with_the_fused_epilogue_in_the_emulator(target):
    """The epilogue's per-row inputs (``row_scale`` [M], ``residual`` [M, N]) take the symbolic M too."""
    import ml_dtypes

    from tvm_cdna4.emulator import compare, emulate
    from tvm_cdna4.kernels.gemm import epilogue

    M, fusion = 37, epilogue.Fusion(bias=True, activation="silu", residual=True, row_scale=True)
    if target == "sm80":
        (N, K), dtype = CUDA_NK, np.float16
        dyn = cuda_gemm.build_dynamic(N, K, "f16", "nt", "f32", fusion=fusion)
    else:
        (N, K), dtype = GFX_NK, ml_dtypes.bfloat16
        dyn = gfx950_gemm.build_dynamic(N, K, "bf16", "nt", "f32", fusion=fusion)
    p = dyn.plan(M)
    assert [q.name for q in p.params][:6] == ["A", "B", "C", "row_scale", "bias", "residual"]
    assert p.params[3].shape[0].same_as(p.M) and p.params[5].shape[0].same_as(p.M)
    rng = np.random.default_rng(M)
    a, b = rng.uniform(-1, 1, (M, K)).astype(dtype), rng.uniform(-1, 1, (N, K)).astype(dtype)
    c, inputs = np.zeros((M, N), np.float32), epilogue.random_inputs(fusion, M, N, rng, np.float32)
    work = [np.zeros(q.shape, q.dtype) for q in p.params if q.name in ("W", "S")]
    emulate(dyn.primfunc(M), a, b, c, *(inputs[n] for n in fusion.inputs()), *work, target=target)
    acc = a.astype(np.float64) @ b.astype(np.float64).T
    compare("C", c, epilogue.reference(acc, fusion, inputs), rtol=1e-4, atol=1e-4)


# (N, reduction): column pairs (ordered) and single elements of an odd N (atomic, the clearing stores)
CLAMPED = [(40, "ordered"), (37, "atomic")]


@pytest.mark.parametrize("N,reduction", CLAMPED)
def test_dynamic_clamped_rows_and_branch_free_split_k_in_the_emulator(N, reduction):
    """K divides the k-tiles: A's copies clamp their rows past M to the last (``CopyPlan.rows_clamped``,
    no predicate in the k-loop), and the split-K reduction has no branch (``EpilogueOp.branch_free``:
    predicated workspace stores, gather loads at clamped rows and columns). M = 37 ends inside the third
    16-row tile; exact on small integers, and the emulator's bounds checks see every clamped address."""
    from tvm_cdna4.emulator import emulate
    from tvm_cdna4.runtime import cuda as runner
    from tvm_cdna4.kernels.sm80.gemm_emit import emit
    from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig, plan

    cfg = GemmConfig(block_m=16, block_n=32, block_k=32, warps_m=1, warps_n=2, stages=2, split_k=2,
                     reduction=reduction, reduce_vector=2 if reduction == "ordered" else 1)
    p = plan(MBucket(17, 64), N, 128, "f16", "nt", "f32", cfg)
    assert p.a.copy.rows_clamped and not p.a.copy.masked and p.b.copy.masked == (N % 32 != 0)
    assert p.epilogue.reduce.branch_free and p.epilogue.reduce.vector == (2 if N % 2 == 0 else 1)
    static = plan(37, N, 128, "f16", "nt", "f32", cfg)
    assert not static.a.copy.rows_clamped and static.a.copy.masked and not static.epilogue.reduce.branch_free
    M, rng = 37, np.random.default_rng(N)
    a, b = runner.grid_inputs(M, N, 128, "f16", "nt", rng)
    c = np.full((M, N), np.nan, np.float32)
    work = [np.zeros(q.shape, np.float32 if q.dtype == "float32" else np.uint32) for q in p.params[3:]]
    emulate(emit(p), a, b, c, *work, target="sm80")
    assert np.array_equal(c, (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.float32))
    assert not work[1].any()  # every tile's ticket reset by its last CTA
    if reduction == "atomic":
        assert not work[0].any()  # the gather cleared the workspace inside C (and wrote nothing outside)
