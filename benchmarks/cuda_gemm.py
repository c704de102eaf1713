"""CUDA GEMM: validate and benchmark the TIRx Ampere-class kernel against Triton (mma.sync) and torch.

One run on one GPU does everything the device budget allows:

    python3 benchmarks/cuda_gemm.py --validate --seed --bench --out $OUT

* ``--validate``: every input dtype x layout (x output dtype on part of the grid) against a float64
  numpy reference on random data, over a shape grid with non-multiples of the tile; C is poisoned
  with NaN first, so an unwritten element fails.
* ``--seed``: the ldmatrix example of the TIRx seed page (two x2 ldmatrix per warp into slots
  0, 2, 8, 10), compared element by element.
* ``--bench``: TFLOP/s at 4096^3 and 8192^3 (``--sizes``) of our kernel (each ``--configs``
  entry), Triton's tutorial matmul with ``DISABLE_MMA_V3=1`` (its mma.sync path; the script sets
  it before importing Triton) and ``torch.matmul`` (cuBLAS), all timed by each ``--timing``
  method of ``runtime.cuda.bench_ms`` (default ``flush,warm``: median of event-timed calls with the
  L2 flushed before each, and back-to-back without a flush; the first is the headline figure).
  ``sustain`` adds a steady-state figure: back-to-back calls for ``--sustain-s`` seconds while
  ``nvidia-smi`` samples the SM clock and board power (the H200 runs into its power cap).
  Every contender's output is poisoned first and checked against the f32 product of the inputs
  (``runtime.cuda.tolerance`` of its output dtype); a wrong one is logged WRONG and fails the run.
  ``--inputs normal`` draws N(0, 1) operands instead of U(-1, 1) (power depends on the data).
  The run ends with the peer table (``peer_table``): per size x dtype x layout ours, Triton's
  autotuned pick, CUTLASS's best tile, ours/Triton and ours/CUTLASS, and the rows that trail.
  ``benchmarks/h200_layouts.sh`` is the one-call run over every layout and dtype.
* ``--ceiling`` / ``--ceiling-occupancy``: a register-only mma.sync loop, same clocks.
* ``--cutlass SO``: also time CUTLASS 2.x's Ampere GEMMs (sm80 mma.sync, the same instruction set
  as ours) built from ``benchmarks/cutlass_sm80_peer.cu``: the kernels it exports for each
  ``--dtypes`` x ``--layouts`` case (f16/bf16, every layout, f32 out; see that file).
* ``--build-only ARCH --kernels DIR``: compile the kernels here (no GPU); ``--kernels DIR`` on the
  GPU machine then loads them instead of compiling (the 4096^3 kernel takes ~1 min to build).

Kernels are compiled in parallel worker processes (``--jobs``) and run through
``export_library`` + ``tvm_ffi.load_module``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import functools
import importlib
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import time

from gpu_clocks import sustained_chunks

os.environ.setdefault("DISABLE_MMA_V3", "1")  # Triton: Ampere mma.sync path, no wgmma

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "benchmarks", "runs")  # raw outputs of the runs kept in git


def _sched():
    """tvm_cdna4/schedules/cuda_gemm and tvm_cdna4/runtime/cuda: the package's import is light (no gfx950 patterns),
    so this runs on the GPU machine from the work tree with only TIRx installed."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    gemm = importlib.import_module("tvm_cdna4.kernels.sm80.gemm")
    runner = importlib.import_module("tvm_cdna4.runtime.cuda")
    return gemm, runner


VALIDATE_SHAPES = [(1, 1, 1), (17, 33, 40), (255, 257, 100), (128, 128, 32), (1000, 1000, 1000), (384, 512, 264)]
OUT_SHAPES = [(255, 257, 100), (1000, 1000, 1000)]  # extra f16/bf16-output checks

_BASE = dict(mma_order="row", sync_after_mma=False, split_loads=False, precompute=False, unroll_stages=False)  # v1


def _tile(bm, bn, bk, wm, wn, st, **kw):
    return dict(block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=wn, stages=st, **kw)


CONFIGS = {
    "128x256x64_w2x4_s4": _tile(128, 256, 64, 2, 4, 4),
    "128x256x64_w2x4_s3": _tile(128, 256, 64, 2, 4, 3),
    "256x128x64_w4x2_s3": _tile(256, 128, 64, 4, 2, 3),
    "256x128x64_w4x2_s4": _tile(256, 128, 64, 4, 2, 4),
    "128x256x32_w2x4_s4": _tile(128, 256, 32, 2, 4, 4),
    "128x256x32_w2x4_s3": _tile(128, 256, 32, 2, 4, 3),
    "256x128x32_w4x2_s4": _tile(256, 128, 32, 4, 2, 4),
    "128x128x32_w2x2_s4": _tile(128, 128, 32, 2, 2, 4),
    "128x128x64_w2x2_s3": _tile(128, 128, 64, 2, 2, 3),
    # 16 warps of 64x32 (32x64) warp tiles: 4 warps per scheduler at <= 128 registers (8-32 B of
    # spills); measured 252-283 TFLOP/s against 447 for the default (benchmarks/journal/2026-12.md, 2026-11-30)
    "256x128x32_w4x4_s4": _tile(256, 128, 32, 4, 4, 4),
    "256x128x32_w4x4_s3": _tile(256, 128, 32, 4, 4, 3),
    "128x256x32_w4x4_s4": _tile(128, 256, 32, 4, 4, 4),
    "256x128x64_w4x4_s3": _tile(256, 128, 64, 4, 4, 3),
    # persistent: one CTA per SM of the H200, the pipeline running on across tiles
    "128x256x64_w2x4_s4_p132": _tile(128, 256, 64, 2, 4, 4, ctas=132),
    # the same kernel compiled at load by nvcc instead of TIRx's default NVRTC
    "128x256x64_w2x4_s4_nvcc": _tile(128, 256, 64, 2, 4, 4, compiler="nvcc"),
    # ablations against the first measured version (v1 = _BASE), on the 128x256x64 4-stage tile
    "128x256x64_w2x4_s4_v1": _tile(128, 256, 64, 2, 4, 4, **_BASE),
    "128x256x64_w2x4_s4_noprecompute": _tile(128, 256, 64, 2, 4, 4, precompute=False),
    "128x256x64_w2x4_s4_nounroll": _tile(128, 256, 64, 2, 4, 4, unroll_stages=False),
    "128x256x64_w2x4_s4_row": _tile(128, 256, 64, 2, 4, 4, mma_order="row"),
    "128x256x64_w2x4_s4_syncfirst": _tile(128, 256, 64, 2, 4, 4, sync_after_mma=False),
    "128x256x64_w2x4_s4_nosplit": _tile(128, 256, 64, 2, 4, 4, split_loads=False),
    "128x256x64_w2x4_s4_g4": _tile(128, 256, 64, 2, 4, 4, group_m=4),
    "128x256x64_w2x4_s4_g16": _tile(128, 256, 64, 2, 4, 4, group_m=16),
    "128x256x128_w2x4_s2": _tile(128, 256, 128, 2, 4, 2),
    "256x128x128_w4x2_s2": _tile(256, 128, 128, 4, 2, 2),
}


# ------------------------------------------------------------------------------------------------
# compile workers
# ------------------------------------------------------------------------------------------------


def _build_job(job):
    """Worker: build one kernel and export it. Returns (key, path, seconds, error, ptxas info)."""
    key, M, N, K, dtype, layout, out, cfg, arch, workdir = job
    t = time.time()
    try:
        gemm, _ = _sched()
        cfg = dict(cfg or {})
        compiler = cfg.pop("compiler", None)  # a build option, not part of the tiling
        config = gemm.GemmConfig(**cfg) if cfg else None
        exe = gemm.build(M, N, K, dtype, layout, out, config, arch=arch, compiler=compiler)
        path = os.path.join(workdir, key + ".so")
        exe.export_library(path)
        src_path = os.path.join(workdir, key + ".cu")
        with open(src_path, "w") as f:
            f.write(gemm.cuda_source(exe))
        return key, path, time.time() - t, None
    except Exception as e:  # report, don't crash the run
        import traceback

        return key, None, time.time() - t, f"{type(e).__name__}: {e}\n{traceback.format_exc()[-1500:]}"


def build_all(jobs, njobs, log, prebuilt=""):
    """Build every job in parallel; a job whose ``<key>.so`` is in ``prebuilt`` is taken from there
    (kernels compiled earlier with ``--build-only`` for the same arch and the same source)."""
    results = {}
    todo = []
    for job in jobs:
        path = os.path.join(prebuilt, job[0] + ".so") if prebuilt else ""
        if path and os.path.exists(path):
            results[job[0]] = (path, None)
        else:
            todo.append(job)
    if len(todo) < len(jobs):
        log(f"prebuilt: {len(jobs) - len(todo)} of {len(jobs)} kernels from {prebuilt}")
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=njobs, mp_context=ctx) as pool:
        for key, path, secs, err in pool.map(_build_job, todo):
            results[key] = (path, err)
            if err:
                log(f"BUILD FAIL {key}: {err}")
    return results


# ------------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------------


def _validate_jobs(arch, workdir):
    gemm, _ = _sched()
    jobs, cases = [], []
    for dtype in ("f16", "bf16"):
        for layout in gemm.LAYOUTS:
            for M, N, K in VALIDATE_SHAPES:
                outs = ["f32"] + ([dtype] if (M, N, K) in OUT_SHAPES else [])
                if (M, N, K) == (255, 257, 100):
                    outs = ["f32", "f16", "bf16"]
                for out in outs:
                    key = f"v_{dtype}_{layout}_{out}_{M}x{N}x{K}"
                    jobs.append((key, M, N, K, dtype, layout, out, None, arch, workdir))
                    cases.append((key, M, N, K, dtype, layout, out))
    # the other tile configs, with edges, one K-contiguous and one transposed layout
    for name in ("128x256x64_w2x4_s4", "128x256x64_w2x4_s4_p132", "128x256x32_w2x4_s4", "128x128x32_w2x2_s4",
                 "256x128x64_w4x2_s3", "128x256x64_w2x4_s4_v1"):
        for layout in gemm.LAYOUTS if name == "128x256x64_w2x4_s4" else ("nt", "tn"):
            M, N, K = 1000, 1000, 1000
            key = f"v_cfg{name}_f16_{layout}_f32_{M}x{N}x{K}"
            jobs.append((key, M, N, K, "f16", layout, "f32", CONFIGS[name], arch, workdir))
            cases.append((key, M, N, K, "f16", layout, "f32"))
    return jobs, cases


def validate(args, log, workdir, arch):
    import numpy as np

    gemm, runner = _sched()
    jobs, cases = _validate_jobs(arch, workdir)
    t = time.time()
    built = build_all(jobs, args.jobs, log, args.kernels)
    log(f"validation: built {len(jobs)} kernels in {time.time() - t:.1f} s")
    rng = np.random.default_rng(20261129)
    failures = 0
    rows = []
    for key, M, N, K, dtype, layout, out in cases:
        path, err = built[key]
        if err:
            failures += 1
            rows.append((key, "BUILD-FAIL", float("nan")))
            continue
        fn = runner.load_kernel(path)
        a, b = runner.random_inputs(M, N, K, dtype, layout, rng)
        ref = runner.reference(a, b, layout)
        c = runner.run_numpy(fn, a, b, M, N, out)
        e, ok = runner.check_output(c, ref, out)
        # run a second time on fresh data: a moving error is a race
        a2, b2 = runner.random_inputs(M, N, K, dtype, layout, rng)
        e2, ok2 = runner.check_output(runner.run_numpy(fn, a2, b2, M, N, out), runner.reference(a2, b2, layout), out)
        ok = ok and ok2
        failures += not ok
        rows.append((key, "ok" if ok else "FAIL", max(e, e2)))
        log(f"{'ok  ' if ok else 'FAIL'} {key:48s} rel_err={max(e, e2):.2e} (tol {runner.tolerance(out):.0e})")
    log(f"validation: {len(cases) - failures}/{len(cases)} passed")
    return failures, rows


# ------------------------------------------------------------------------------------------------
# the seed page's ldmatrix example
# ------------------------------------------------------------------------------------------------


def seed_example(log, workdir):
    """The seed page's ldmatrix example, unchanged but for ``tvm`` -> ``tvm_tirx`` names."""
    import numpy as np
    import tvm_ffi
    import tvm_tirx

    tests = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import cuda_seed_example  # the seed page's example, shared with the tests

    compiled = tvm_tirx.tirx.compile(cuda_seed_example.matrix_kernel(), target="cuda", pipeline="tirx")
    so = os.path.join(workdir, "seed.so")
    compiled.export_library(so)
    m = tvm_ffi.load_module(so)
    try:
        fn = m["kernel"]
    except Exception:
        fn = m["main"]
    x = np.arange(128, dtype="uint32").reshape(16, 4, 2)
    dev = tvm_tirx.cuda()
    out = tvm_tirx.runtime.tensor(np.zeros((32, 12), dtype="uint32"), dev)
    fn(tvm_tirx.runtime.tensor(x, dev), out)
    got = out.numpy()
    expected = np.full((32, 12), 4294966519, dtype="uint32")
    for lane in range(32):
        for k in range(2):
            for matrix in range(2):
                expected[lane, 8 * k + 2 * matrix] = x[2 * (lane // 4) + matrix, lane % 4, k]
    ok = np.array_equal(got, expected)
    log(f"seed ldmatrix example: {'ok' if ok else 'FAIL'}")
    return ok


# ------------------------------------------------------------------------------------------------
# mma.sync register-only ceiling (same run, same clocks)
# ------------------------------------------------------------------------------------------------

CEILING_SRC = '''
from tvm_tirx.script import tirx as T
from tvm_tirx.backend.cuda.axis import laneid
from tvm_tirx.tirx.layout import S, TileLayout


def ceiling_kernel(blocks, iters, dtype, mt=2, nt=4, toggle=False):
    # toggle: after every mma each fragment register is XORed with its own mask (X's last na + nb
    # columns), so the operands change from one mma to the next as a GEMM's do
    ab = "f16" if dtype == "float16" else "bf16"
    op = f"mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32"
    # mt x nt independent m16n8 accumulators per warp; A: mt 16x16 tiles, B: nt 16x8 tiles
    acc_l = TileLayout(S[(mt, nt, 2, 8, 4, 2) : (4 * nt, 4, 2, 4 @ laneid, 1 @ laneid, 1)])
    a_l = TileLayout(S[(mt, 2, 8, 2, 4) : (4, 1, 4 @ laneid, 2, 1 @ laneid)])
    b_l = TileLayout(S[(nt, 8, 2, 4) : (2, 4 @ laneid, 1, 1 @ laneid)])
    na, nb, nd = 4 * mt, 2 * nt, 4 * mt * nt

    nx = 2 * (na + nb) if toggle else na + nb

    @T.function
    def main(X: T.Tensor((blocks * 256, nx), "int32"), Y: T.Tensor((blocks * 256, nd), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=blocks, block=256))
        tid = T.cuda.thread_idx("x")
        g = T.cuda.block_idx("x") * 256 + tid
        acc = T.alloc_tensor(ty_args=[T.Tensor((nd,), "float32", scope="local", layout="default")])
        af = T.alloc_tensor(ty_args=[T.Tensor((na,), "uint32", scope="local", layout="default")])
        bf = T.alloc_tensor(ty_args=[T.Tensor((nb,), "uint32", scope="local", layout="default")])
        for i in T.unroll(nd):
            acc[i] = T.float32(0)
        # one input column per fragment register: no value is shared between fragments, so ptxas
        # needs no register copies to form the mma operand pairs
        for i in T.unroll(na):
            af[i] = T.cast(X[g, i], "uint32")
        for i in T.unroll(nb):
            bf[i] = T.cast(X[g, na + i], "uint32")
        mk = T.alloc_tensor(ty_args=[T.Tensor((na + nb,), "uint32", scope="local", layout="default")])
        if toggle:
            for i in T.unroll(na + nb):
                mk[i] = T.cast(X[g, na + nb + i], "uint32")
        d = T.decl_tensor(acc.ptr_to([0]), ty_args=[T.Tensor((mt, nt, 16, 8), "float32", scope="local", layout=acc_l)])
        a = T.decl_tensor(af.ptr_to([0]), ty_args=[T.Tensor((mt, 1, 16, 8), "uint32", scope="local", layout=a_l)])
        b = T.decl_tensor(bf.ptr_to([0]), ty_args=[T.Tensor((nt, 1, 8, 8), "uint32", scope="local", layout=b_l)])
        for it in range(iters):
            for u in T.unroll(4):
                T.cuda.tile.apply(T.ptx[op], d, a, b, d, scope="warp")
                if toggle:
                    for i in T.unroll(na):
                        af[i] = af[i] ^ mk[i]
                    for i in T.unroll(nb):
                        bf[i] = bf[i] ^ mk[na + i]
        for i in T.unroll(nd):
            Y[g, i] = acc[i]

    return main
'''


def sustained(fn, seconds: float = 2.0) -> dict:
    """Steady state of back-to-back ``fn()`` calls for ``seconds``: the median ms per call over
    ~20 ms event-timed chunks, and the median SM clock (MHz) and board power (W) that
    ``nvidia-smi`` samples every 20 ms meanwhile (``gpu_clocks``); the first half of the run is warm-up."""
    import numpy as np

    _, runner = _sched()
    per_chunk = max(1, int(20.0 / runner.estimate_ms(fn, 3)))
    chunks, steady = sustained_chunks(fn, per_chunk, seconds)
    return dict(ms=1e3 * float(np.median(chunks[len(chunks) // 2:])), **steady)


def time_methods(fn, methods, args) -> tuple[dict, dict]:
    """``{method: ms}`` for each timing method, and the sustained run's clock/power (or {})."""
    _, runner = _sched()
    times, sus = {}, {}
    for m in methods:
        if m == "sustain":
            sus = sustained(fn, args.sustain_s)
            times[m] = sus["ms"]
        else:
            times[m] = runner.bench_ms(fn, args.warmup, args.rep, m)
    return times, sus


def mma_ceiling(log, workdir, arch, args, dtype="f16", blocks_per_sm=4, mt=2, nt=4, toggle=False):
    """mma.sync m16n8k16 issue ceiling: ``mt * nt`` independent accumulators per warp, 8 warps per
    block, ``blocks_per_sm`` blocks per SM, registers only (no shared/global traffic in the loop).
    Timed like the GEMMs. Defaults: 32 warps per SM, 8 accumulators; the GEMM's own occupancy and
    ILP is ``blocks_per_sm=1, mt=4, nt=8``. ``toggle``: the operands are uniform(-1, 1) values and
    change after every mma (each register XORed with a random sign-and-mantissa mask), so the
    tensor cores switch as many bits as on GEMM data; the constant-operand loop draws less power."""
    import torch
    import tvm_ffi
    import tvm_tirx
    from tvm_tirx.target import Target

    path = os.path.join(workdir, "mma_ceiling.py")
    with open(path, "w") as f:
        f.write(CEILING_SRC)
    spec = importlib.util.spec_from_file_location("mma_ceiling", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _, runner = _sched()
    blocks, iters = 132 * blocks_per_sm, 4096 * 8 // (mt * nt)
    f = mod.ceiling_kernel(blocks, iters, "float16" if dtype == "f16" else "bfloat16", mt, nt, toggle)
    exe = tvm_tirx.tirx.compile(f, target=Target({"kind": "cuda", "arch": arch}), pipeline="tirx")
    so = os.path.join(workdir, f"mma_ceiling_{blocks_per_sm}_{mt}x{nt}{'_toggle' if toggle else ''}.so")
    exe.export_library(so)
    fn = tvm_ffi.load_module(so)["main"]
    nab = 4 * mt + 2 * nt
    if toggle:
        vals = torch.empty((blocks * 256, 2 * nab), dtype=runner.torch_dtype(dtype), device="cuda").uniform_(-1, 1)
        masks = torch.randint(-(2**31), 2**31 - 1, (blocks * 256, nab), dtype=torch.int32, device="cuda")
        x = torch.cat([vals.view(torch.int32), masks & (0x83FF83FF - 2**32)], dim=1).contiguous()
    else:
        x = torch.randint(0, 2**15, (blocks * 256, nab), dtype=torch.int32, device="cuda")
    y = torch.empty((blocks * 256, 4 * mt * nt), dtype=torch.float32, device="cuda")
    ax, ay = tvm_ffi.from_dlpack(x), tvm_ffi.from_dlpack(y)
    call = lambda: fn(ax, ay)  # noqa: E731
    call()
    torch.cuda.synchronize()
    methods = args.timing.split(",")
    times, sus = time_methods(call, methods, args)
    flops = blocks * 8 * iters * 4 * mt * nt * 2 * 16 * 8 * 16
    tfs = {m: flops / (t * 1e-3) / 1e12 for m, t in times.items()}
    tf = tfs[methods[0]]
    log(f"ceiling mma.sync m16n8k16 {dtype} register-only{', toggling operands' if toggle else ''}, "
        f"{8 * blocks_per_sm} warps/SM, {mt * nt} accumulators/warp: "
        f"{times[methods[0]]:.3f} ms {tf:.1f} TFLOP/s  [{' '.join(f'{m}={v:6.1f}' for m, v in tfs.items())}]{_fmt_sus(sus)}")
    return tf


def _fmt_sus(sus: dict) -> str:
    return f"  [sustained: {sus['mhz']:.0f} MHz {sus['watts']:.0f} W]" if sus else ""


# ------------------------------------------------------------------------------------------------
# Triton's tutorial matmul (run with DISABLE_MMA_V3=1: its mma.sync path)
# ------------------------------------------------------------------------------------------------


def _triton_matmul():
    import triton
    import triton.language as tl

    configs = [
        triton.Config({"BM": 128, "BN": 256, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
        triton.Config({"BM": 128, "BN": 256, "BK": 32, "G": 8}, num_stages=4, num_warps=8),
        triton.Config({"BM": 256, "BN": 128, "BK": 32, "G": 8}, num_stages=4, num_warps=8),
        triton.Config({"BM": 128, "BN": 128, "BK": 32, "G": 8}, num_stages=4, num_warps=4),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "G": 8}, num_stages=4, num_warps=4),
        triton.Config({"BM": 128, "BN": 128, "BK": 64, "G": 8}, num_stages=3, num_warps=8),
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K", "sak", "sbn"])
    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr):
        pid = tl.program_id(0)
        num_m = tl.cdiv(M, BM)
        num_n = tl.cdiv(N, BN)
        width = G * num_n
        gid = pid // width
        first = gid * G
        gsz = min(num_m - first, G)
        pid_m = first + (pid % width) % gsz
        pid_n = (pid % width) // gsz
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
        b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BK, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK * sak
            b_ptrs += BK * sbk
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        c_ptrs = c_ptr + cm[:, None] * scm + cn[None, :] * scn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))

    def run(a, b, c, M, N, K, a_t, b_t):
        # a is op(A) = [M, K] view, b is op(B) = [K, N] view (strides carry the layout)
        grid = lambda meta: (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)  # noqa: E731
        kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                     c.stride(0), c.stride(1))

    return kernel, run


def _triton_mma_kind(autotuned) -> str:
    """Which MMA instructions the compiled Triton kernels use (best effort: wgmma / mma.sync)."""
    kinds = set()
    try:
        caches = autotuned.fn.device_caches
        for entry in caches.values():
            cache = entry[0] if isinstance(entry, tuple) else entry
            for compiled in cache.values():
                ptx = compiled.asm.get("ptx", "")
                if "wgmma" in ptx:
                    kinds.add("wgmma")
                if "mma.sync" in ptx:
                    kinds.add("mma.sync")
    except Exception as e:  # introspection is best-effort
        return f"? ({type(e).__name__})"
    return "+".join(sorted(kinds)) or "?"


# ------------------------------------------------------------------------------------------------
# benchmark
# ------------------------------------------------------------------------------------------------


def _layout_configs(args, cfg_names, dtype, layout):
    """Configs timed for one (dtype, layout): every one named by --configs; without --configs, the
    whole list for f16 nt and the first (the default) elsewhere."""
    return cfg_names if args.configs or (layout == "nt" and dtype == "f16") else cfg_names[:1]


def _bench_jobs(args, arch, workdir):
    sizes = [int(s) for s in args.sizes.split(",")]
    cfg_names = args.configs.split(",") if args.configs else list(CONFIGS)
    jobs = []
    for S in sizes:
        for dtype in args.dtypes.split(","):
            for layout in args.layouts.split(","):
                names = _layout_configs(args, cfg_names, dtype, layout)
                for name in names:
                    key = f"b_{S}_{dtype}_{layout}_{name}"
                    jobs.append((key, S, S, S, dtype, layout, "f32", CONFIGS[name], arch, workdir))
    return jobs


@functools.cache
def _cutlass_peers(so_path) -> dict:
    """``{(dtype, layout): [(name, run(a, b, c, M, N, K))]}``: the kernels a built
    ``cutlass_sm80_peer.cu`` exports (``cutlass_<dtype>_<layout>_<tile>``, listed by its
    ``cutlass_peer_names()``), loaded once per run. ``a`` and ``b`` are stored per the layout
    (``operand_shapes``), ``c`` is f32 [M, N]."""
    import ctypes

    import torch

    lib = ctypes.CDLL(os.path.abspath(so_path))
    lib.cutlass_peer_names.restype = ctypes.c_char_p
    peers = {}
    for name in filter(None, lib.cutlass_peer_names().decode().split(",")):
        _, dtype, layout, _tile = name.split("_", 3)
        f = getattr(lib, name)
        f.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_void_p]
        f.restype = ctypes.c_int

        def run(a, b, c, M, N, K, f=f, name=name):
            rc = f(a.data_ptr(), b.data_ptr(), c.data_ptr(), M, N, K, torch.cuda.current_stream().cuda_stream)
            if rc:
                raise RuntimeError(f"{name}: CUTLASS status {rc}")

        peers.setdefault((dtype, layout), []).append((name, run))
    return peers


def _random_operand(shape, torch_dtype, inputs):
    """A random GEMM operand: ``uniform`` draws U(-1, 1), ``normal`` draws N(0, 1) (``torch.randn``,
    as Triton's tutorial matmul does). The H200 runs mma.sync GEMMs at its power cap, and the power
    the tensor cores draw depends on the bits they switch, so the distribution moves the figures."""
    import torch

    t = torch.empty(shape, dtype=torch_dtype, device="cuda")
    return t.uniform_(-1, 1) if inputs == "uniform" else t.normal_()


def _f32_product(opa, opb):
    """The reference: torch's product of the f32-upcast operands, as a host numpy array."""
    import torch

    return torch.matmul(opa.float(), opb.float()).cpu().numpy()


def bench(args, log, workdir, arch):
    import numpy as np
    import torch

    gemm, runner = _sched()
    sizes = [int(s) for s in args.sizes.split(",")]
    cfg_names = args.configs.split(",") if args.configs else list(CONFIGS)
    layouts = args.layouts.split(",")
    dtypes = args.dtypes.split(",")
    jobs = _bench_jobs(args, arch, workdir)
    t = time.time()
    built = build_all(jobs, args.jobs, log, args.kernels)
    log(f"bench: built {len(jobs)} kernels in {time.time() - t:.1f} s")

    methods = args.timing.split(",")

    sus = {}

    def do_bench(fn):  # {method: ms}; the first method is the headline figure
        nonlocal sus
        times, sus = time_methods(fn, methods, args)
        return times

    def fmt(times):
        return " ".join(f"{m}={runner.tflops(M, N, K, t):6.1f}" for m, t in times.items()) + _fmt_sus(sus)

    tri_kernel, tri_run = _triton_matmul()
    results, wrong = [], []

    def checked_run(who, name, launch, out, case, ref) -> float:
        """Poison ``out``, run ``launch`` once and check it against ``ref()`` (the f32 product),
        then time it by every method; logged and recorded. Returns the headline TFLOP/s. A result
        further from the reference than its output dtype allows is logged WRONG and fails the run."""
        out.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        err_rel, ok = runner.check_output(out.float().cpu().numpy(), ref(), str(out.dtype).removeprefix("torch."))
        if not ok:
            wrong.append(f"{who} {name} {case}: rel_err {err_rel:.1e}")
        times = do_bench(launch)
        ms = times[methods[0]]
        tf = runner.tflops(M, N, K, ms)
        flag = "" if ok else " WRONG"
        log(f"{who.split('_')[0]:6s} {case['size']}^3 {case['dtype']} {case['layout']} {name:22s} {ms:8.3f} ms "
            f"{tf:7.1f} TFLOP/s rel_err={err_rel:.1e}{flag}  [{fmt(times)}]")
        results.append(dict(who=who, **case, config=name, ms=ms, tflops=tf, rel_err=err_rel, ok=ok, times=times, sustained=sus))
        return tf

    for S in sizes:
        M = N = K = S
        for dtype in dtypes:
            tdt = runner.torch_dtype(dtype)
            for layout in layouts:
                a_shape, b_shape = gemm.operand_shapes(M, N, K, layout)
                torch.manual_seed(S)
                a = _random_operand(a_shape, tdt, args.inputs)
                b = _random_operand(b_shape, tdt, args.inputs)
                c = torch.full((M, N), float("nan"), dtype=torch.float32, device="cuda")

                def operands(x, y):  # the stored operands as the A and B of torch.matmul / Triton
                    return (x.t() if layout[0] == "t" else x), (y.t() if layout[1] == "t" else y)

                opa, opb = operands(a, b)
                case = dict(size=S, dtype=dtype, layout=layout, inputs=args.inputs)
                ref = functools.cache(functools.partial(_f32_product, opa, opb))
                # --zeros: the same runs on all-zero inputs (the tensor cores switch no bits); exactly 0 out
                za, zb = (torch.zeros_like(a), torch.zeros_like(b)) if args.zeros else (None, None)
                zcase, zref = dict(case, inputs="zeros"), lambda: np.zeros((M, N), np.float32)
                names = _layout_configs(args, cfg_names, dtype, layout)
                ours = {}
                for name in names:
                    key = f"b_{S}_{dtype}_{layout}_{name}"
                    path, err = built[key]
                    if err:
                        continue
                    fn = runner.load_kernel(path)
                    ours[name] = checked_run("ours", name, runner.Launcher(fn, a, b, c), c, case, ref)
                    if args.zeros:
                        checked_run("ours", name + " zeros", runner.Launcher(fn, za, zb, c), c, zcase, zref)
                cut = {}
                if args.cutlass:  # CUTLASS 2.x Ampere kernels of this dtype and layout
                    cc = torch.empty((M, N), dtype=torch.float32, device="cuda")
                    for name, run in _cutlass_peers(args.cutlass).get((dtype, layout), []):
                        launch = functools.partial(run, a, b, cc, M, N, K)
                        cut[name] = checked_run("cutlass_sm80", name, launch, cc, case, ref)
                # Triton mma.sync path (f32 out like ours)
                tri = None
                if not args.no_triton and layout in args.triton_layouts.split(","):
                    ct = torch.empty((M, N), dtype=torch.float32, device="cuda")
                    fn_t = lambda: tri_run(opa, opb, ct, M, N, K, layout[0] == "t", layout[1] == "t")  # noqa: E731
                    fn_t()  # autotunes; the config it picks names the run
                    cfg = tri_kernel.best_config
                    name = (f"{cfg.kwargs['BM']}x{cfg.kwargs['BN']}x{cfg.kwargs['BK']}_w{cfg.num_warps}_s{cfg.num_stages}"
                            f" [{_triton_mma_kind(tri_kernel)}]")
                    tri = checked_run("triton_mma_sync", name, fn_t, ct, case, ref)
                # torch.matmul (cuBLAS, input-dtype output)
                c16 = torch.empty((M, N), dtype=tdt, device="cuda")
                fn_c = lambda: torch.matmul(opa, opb, out=c16)  # noqa: E731
                tt = checked_run("torch", f"torch.matmul ({dtype} out)", fn_c, c16, case, ref)
                if args.zeros:
                    zopa, zopb = operands(za, zb)
                    fn_z = lambda: torch.matmul(zopa, zopb, out=c16)  # noqa: E731
                    checked_run("torch", "torch.matmul zeros", fn_z, c16, zcase, zref)
                if ours:
                    bname = max(ours, key=ours.get)
                    line = f"SUMMARY {S}^3 {dtype} {layout}: ours {ours[bname]:.1f} ({bname})"
                    if cut:
                        cname = max(cut, key=cut.get)
                        line += f", cutlass-sm80 {cut[cname]:.1f} ({cname}), ours/cutlass {ours[bname] / cut[cname]:.2f}"
                    if tri:
                        line += f", triton-mma.sync {tri:.1f}, ours/triton {ours[bname] / tri:.2f}"
                    line += f", torch {tt:.1f}, ours/torch {ours[bname] / tt:.2f}"
                    log(line)
                del a, b, c, ref, za, zb
                torch.cuda.empty_cache()
    for w in wrong:
        log(f"WRONG {w}")
    for line in table_lines(peer_table(results)):  # last: the figures the run is for
        log(line)
    return results, wrong


PEER_LEAD = 1.12  # the lead over Triton's mma.sync path that every layout x dtype must show


def peer_table(results) -> list[dict]:
    """One row per (size, dtype, layout) of the benchmark's random-input runs, in run order: each
    contender's best headline TFLOP/s among its correct runs and the config that gave it (ours:
    ``--configs``; Triton: the autotuner's pick; CUTLASS: its tiles), and ours over Triton and
    over CUTLASS (None where a contender did not run)."""
    rows = {}
    for r in results:
        if r["inputs"] == "zeros" or not r["ok"]:
            continue
        row = rows.setdefault((r["size"], r["dtype"], r["layout"]), dict(size=r["size"], dtype=r["dtype"], layout=r["layout"]))
        who = r["who"]
        if who not in row or r["tflops"] > row[who]:
            row[who], row[who + "_config"] = r["tflops"], r["config"]
    for row in rows.values():
        for peer, key in (("triton_mma_sync", "ours/triton"), ("cutlass_sm80", "ours/cutlass")):
            row[key] = row["ours"] / row[peer] if "ours" in row and peer in row else None
    return list(rows.values())


def table_lines(rows) -> list[str]:
    """``peer_table`` as a markdown table, then the rows where ours trails: below ``PEER_LEAD`` x
    Triton's mma.sync path or below CUTLASS sm80."""
    def cell(row, who, short=False):
        if who not in row:
            return "–"
        config = row[who + "_config"]
        if who == "cutlass_sm80":  # cutlass_<dtype>_<layout>_<tile>: the tile says which
            config = config.split("_", 3)[-1]
        return f"{row[who]:.1f}" if short else f"{row[who]:.1f} ({config})"

    def ratio(x):
        return "–" if x is None else f"{x:.2f}"

    lines = ["| size | dtype | layout | ours | Triton mma.sync (autotuned) | CUTLASS sm80 (best tile) | ours/Triton "
             "| ours/CUTLASS | torch (wgmma) |", "|---|---|---|---|---|---|---|---|---|"]
    slow_t, slow_c = [], []
    for row in rows:
        case = f"{row['size']}^3 {row['dtype']} {row['layout']}"
        lines.append(f"| {row['size']}^3 | {row['dtype']} | {row['layout']} | {cell(row, 'ours')} "
                     f"| {cell(row, 'triton_mma_sync')} | {cell(row, 'cutlass_sm80')} | {ratio(row['ours/triton'])} "
                     f"| {ratio(row['ours/cutlass'])} | {cell(row, 'torch', short=True)} |")
        if row["ours/triton"] is not None and row["ours/triton"] < PEER_LEAD:
            slow_t.append(f"{case} ({row['ours/triton']:.2f})")
        if row["ours/cutlass"] is not None and row["ours/cutlass"] < 1:
            slow_c.append(f"{case} ({row['ours/cutlass']:.2f})")
    lines.append(f"below {PEER_LEAD}x Triton: {', '.join(slow_t) or 'none'}; below CUTLASS: {', '.join(slow_c) or 'none'}")
    return lines


def build_only(args, log):
    """Compile what --validate and --bench would run (no GPU needed): catches build failures."""
    workdir = args.kernels or os.path.join("/tmp", "cuda_gemm_build_only")  # --kernels: where to put them
    os.makedirs(workdir, exist_ok=True)
    args.jobs = max(1, args.jobs)
    fails = 0
    if args.validate:
        jobs = _validate_jobs(args.build_only, workdir)[0]
        built = build_all(jobs, args.jobs, log)
        fails += sum(1 for _, err in built.values() if err)
        log(f"build-only validate: {len(jobs) - fails}/{len(jobs)} built")
    if args.bench:
        jobs = _bench_jobs(args, args.build_only, workdir)
        built = build_all(jobs, args.jobs, log, args.kernels)  # keeps kernels already in --kernels
        bad = sum(1 for _, err in built.values() if err)
        fails += bad
        log(f"build-only bench: {len(jobs) - bad}/{len(jobs)} built")
    return int(fails > 0)


def ptxas_report(args, log, workdir, arch):
    """Registers and spills of each --bench kernel as TIRx's own device compiler builds it here
    (NVRTC on the GPU machine; its ptxas may allocate differently from a local nvcc)."""
    sys.path.insert(0, ROOT)
    from tvm_cdna4.tirx_private import cuda_compile_log

    _, runner = _sched()
    jobs = _bench_jobs(args, arch, workdir)
    built = build_all(jobs, args.jobs, log, args.kernels)
    report = {}
    for key, *_ in jobs:
        path, err = built[key]
        if err:
            continue
        with open(path[: -len(".so")] + ".cu") as f:
            text = cuda_compile_log(f.read(), arch)
        report[key] = runner.ptxas_usage(text)
        log(f"ptxas  {key}: {report[key]}")
    return report


def profile(args, log, workdir, arch):
    """Launch each --configs kernel (and each --cutlass peer) once, for ncu: nothing else runs."""
    import torch

    gemm, runner = _sched()
    S = int(args.sizes.split(",")[0])
    layout = args.layouts.split(",")[0]
    dtype = args.dtypes.split(",")[0]
    names = args.configs.split(",")
    jobs = [(f"b_{S}_{dtype}_{layout}_{n}", S, S, S, dtype, layout, "f32", CONFIGS[n], arch, workdir) for n in names]
    built = build_all(jobs, args.jobs, log, args.kernels)
    a_shape, b_shape = gemm.operand_shapes(S, S, S, layout)
    tdt = runner.torch_dtype(dtype)
    a = _random_operand(a_shape, tdt, args.inputs)
    b = _random_operand(b_shape, tdt, args.inputs)
    c = torch.empty((S, S), dtype=torch.float32, device="cuda")
    for key, *_ in jobs:
        path, err = built[key]
        if err:
            continue
        launch = runner.Launcher(runner.load_kernel(path), a, b, c)
        launch()
        torch.cuda.synchronize()
        log(f"profiled {key}")
    if args.cutlass:
        for name, run in _cutlass_peers(args.cutlass).get((dtype, layout), []):
            run(a, b, c, S, S, S)
            torch.cuda.synchronize()
            log(f"profiled {name}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--validate", action="store_true")
    p.add_argument("--seed", action="store_true", help="run the seed page's ldmatrix example")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--profile", action="store_true", help="only launch each --configs kernel once (run under ncu)")
    p.add_argument("--ptxas", action="store_true",
                   help="registers and spills of each --bench kernel from the device compiler TIRx uses (NVRTC)")
    p.add_argument("--ceiling", action="store_true", help="time a register-only mma.sync loop (same clocks)")
    p.add_argument("--ceiling-occupancy", action="store_true",
                   help="also time it at the GEMM's occupancy and ILP (8 warps/SM, 32 accumulators/warp)")
    p.add_argument("--ceiling-toggle", action="store_true",
                   help="both ceilings again with operands that change after every mma (GEMM-like power)")
    p.add_argument("--zeros", action="store_true", help="bench on all-zero inputs too (power depends on the data)")
    p.add_argument("--inputs", choices=("uniform", "normal"), default="uniform",
                   help="--bench/--profile operands: U(-1, 1) or N(0, 1) (torch.randn); power depends on the data")
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--dtypes", default="f16")
    p.add_argument("--layouts", default="nt")
    p.add_argument("--configs", default="", help=f"comma list of {list(CONFIGS)}; default all")
    p.add_argument("--no-triton", action="store_true")
    p.add_argument("--cutlass", default="", metavar="SO", help="built benchmarks/cutlass_sm80_peer.cu: time its kernels too")
    p.add_argument("--triton-layouts", default="nt", help="layouts Triton is timed on (autotuning is slow)")
    p.add_argument("--timing", default="flush,warm",
                   help="comma list of runtime.cuda.TIMING_METHODS (flush, warm) and sustain; the first is the headline")
    p.add_argument("--sustain-s", type=float, default=2.0, help="seconds of back-to-back calls for --timing sustain")
    p.add_argument("--kernels", default="", help="directory of prebuilt <key>.so kernels to reuse (with --build-only: where to write them)")
    p.add_argument("--warmup", type=int, default=25)
    p.add_argument("--rep", type=int, default=200)
    p.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    p.add_argument("--build-only", metavar="ARCH", help="no GPU: only compile the validation and bench kernels")
    args = p.parse_args(argv)

    os.makedirs(args.out, exist_ok=True)
    logf = open(os.path.join(args.out, "cuda_gemm_log.txt"), "a")

    def log(msg):
        print(msg, flush=True)
        logf.write(msg + "\n")
        logf.flush()

    gemm, runner = _sched()
    if args.build_only:
        return build_only(args, log)
    ok, why = runner.have_cuda_gpu()
    if not ok:
        log(f"no CUDA GPU: {why}")
        return 2
    import torch

    arch = runner.device_arch()
    log(f"=== {datetime.datetime.now().isoformat(timespec='seconds')} {torch.cuda.get_device_name(0)} arch={arch} "
        f"torch={torch.__version__} DISABLE_MMA_V3={os.environ.get('DISABLE_MMA_V3')} inputs={args.inputs}")
    workdir = os.path.join("/tmp", "cuda_gemm_build")
    os.makedirs(workdir, exist_ok=True)
    status = 0
    summary = {"inputs": args.inputs}
    if args.seed:
        summary["seed"] = seed_example(log, workdir)
        status |= not summary["seed"]
    if args.validate:
        fails, rows = validate(args, log, workdir, arch)
        summary["validate_failures"] = fails
        status |= fails > 0
    if args.ceiling:
        summary["ceiling_tflops"] = mma_ceiling(log, workdir, arch, args)
    if args.ceiling_occupancy:
        summary["ceiling_gemm_occupancy_tflops"] = mma_ceiling(log, workdir, arch, args, blocks_per_sm=1, mt=4, nt=8)
    if args.ceiling_toggle:
        summary["ceiling_toggle_tflops"] = mma_ceiling(log, workdir, arch, args, toggle=True)
        summary["ceiling_toggle_gemm_occupancy_tflops"] = mma_ceiling(log, workdir, arch, args, blocks_per_sm=1, mt=4,
                                                                      nt=8, toggle=True)
    if args.profile:
        profile(args, log, workdir, arch)
    if args.ptxas:
        summary["ptxas"] = ptxas_report(args, log, workdir, arch)
    if args.bench:
        summary["bench"], wrong = bench(args, log, workdir, arch)
        summary["peer_table"] = peer_table(summary["bench"])
        status |= bool(wrong)
    with open(os.path.join(args.out, "cuda_gemm_results.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    return int(bool(status))


if __name__ == "__main__":
    sys.exit(main())
