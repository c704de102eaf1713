"""LLM linear layers on the H200: y = x · Wᵀ, bf16 in, bf16 out (layout nt), at every M.

    python3 benchmarks/llm_linear.py --out $OUT            # the full table (8 projections x 6 M)
    python3 benchmarks/llm_linear.py --quick --out $OUT    # a handful of shapes

The projections of Llama-3-8B and -70B (``PROJECTIONS``, N x K) at M = 1, 16, 64, 128, 1024, 4096
(``MS``). Per shape, every contender is validated against the f32 product of the same inputs
(``runtime.cuda.tolerance("bf16")``; C poisoned with NaN first) before it is timed
(``runtime.cuda.bench_ms``, L2 flushed before each call):

* ours, default: the planner's choice (``cuda_gemm.choose_config``, the cost model of
  docs/cuda_gemm.md "Plans for every M");
* ours, tuned: ``runtime.cuda.tune_problems`` over every shape with M <= 128 first (the cost
  model's first ``--tune-top`` candidates, default ``cuda_gemm.TUNE_TOP``, built in parallel and
  timed; the winner stored in the tuning cache, which ``cuda_gemm.tuned_config`` reads back); its
  wall time is the "tuning a model's worth of shapes" figure (``tune_seconds`` in the JSON);
* ``torch.matmul`` (cuBLAS);
* Triton's mma.sync path (``DISABLE_MMA_V3=1``, set by benchmarks/cuda_gemm.py before Triton is
  imported): the best of ``TRITON_CONFIGS`` (16- to 128-row tiles), and a split-K variant
  (``TRITON_SPLITS`` slices, f32 atomics into a zeroed buffer, then the bf16 conversion; timed as
  the three launches) for M <= 128.

% of roofline = max(2MNK / 660e12, (A + B + C bytes) / 4.8e12) / time (``roofline_s``). Output: a
markdown table on stdout and in ``$OUT/llm_linear_<method>.md``, every figure in
``$OUT/llm_linear_<method>.json`` (``--method``: ``runtime.cuda.bench_ms``'s ``flush``, the L2 zeroed
before each call, or ``clean``, the L2 read). ``--ms 1,16`` keeps those M; ``--sweep`` adds the
``SWEEP`` grid of decode configs at M <= 16; ``--no-peers`` skips torch and Triton.
Kernels build in parallel worker processes (``--jobs``), from the work tree with only TIRx, torch and
Triton installed (``cuda_gemm._sched``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import cuda_gemm as cg  # noqa: E402  (sets DISABLE_MMA_V3=1 before Triton is imported)

PEAK_FLOPS = 660e12
HBM_BYTES_S = 4.8e12
PROJECTIONS = {  # name: (N, K) of y[M, N] = x[M, K] · W[N, K]ᵀ
    "8b.qkv": (6144, 4096), "8b.o": (4096, 4096), "8b.gate_up": (28672, 4096), "8b.down": (4096, 14336),
    "70b.qkv": (10240, 8192), "70b.o": (8192, 8192), "70b.gate_up": (57344, 8192), "70b.down": (8192, 28672),
}
MS = (1, 16, 64, 128, 1024, 4096)
QUICK = [("8b.o", 1), ("8b.down", 16), ("70b.gate_up", 16), ("8b.qkv", 128), ("8b.o", 4096)]
TUNE_MAX_M = 128
TRITON_CONFIGS = [(16, 64, 128, 4, 4), (16, 128, 64, 4, 4), (32, 64, 128, 4, 4), (32, 128, 64, 4, 4),
                  (64, 128, 64, 4, 4), (128, 128, 64, 4, 8)]  # (BM, BN, BK, stages, warps)
TRITON_SPLITS = 4


def shapes(quick: bool = False) -> list[tuple[str, int, int, int]]:
    """(name, M, N, K) of the table: every projection at every M, or the ``--quick`` handful."""
    if quick:
        return [(name, M, *PROJECTIONS[name]) for name, M in QUICK]
    return [(name, M, *PROJECTIONS[name]) for M in MS for name in PROJECTIONS]


def problem_bytes(M: int, N: int, K: int, elem: int = 2) -> int:
    """A, B and C once (bf16)."""
    return elem * (M * K + N * K + M * N)


def roofline_s(M: int, N: int, K: int) -> float:
    """max(FLOPs / 660 TFLOP/s, bytes / 4.8 TB/s)."""
    return max(2.0 * M * N * K / PEAK_FLOPS, problem_bytes(M, N, K) / HBM_BYTES_S)


def roofline_pct(M: int, N: int, K: int, seconds: float) -> float:
    return 100.0 * roofline_s(M, N, K) / seconds


def our_configs(M, N, K, top: int, sweep: bool = False) -> list[dict]:
    """The default (planner's) choice first (tile GEMM or decode kernel), then the cost model's next
    candidates of both kinds (``cuda_gemm.ranked_configs``) up to ``top``; with ``sweep`` and a
    decode-sized problem, also the ``SWEEP`` grid of decode configs (the cost model's calibration)."""
    gemm, _ = cg._sched()
    default = gemm.choose_config(M, N, K, "bf16", "nt", "bf16")
    out = [default]
    if M <= TUNE_MAX_M:
        for cfg in gemm.ranked_configs(M, N, K, "bf16", "nt", "bf16"):
            if len(out) >= top:
                break
            try:
                gemm.plan(M, N, K, "bf16", "nt", "bf16", cfg)
            except ValueError:
                continue
            if cfg not in out:
                out.append(cfg)
    if sweep and M <= 16:
        iters = K // 128
        out += [c for c in (gemm.DecodeConfig(w, rt, u, s, stages=st, line_copy=lc) for w, rt, u, st, s, lc in SWEEP)
                if c not in out and iters >= c.split_k * c.warps]
    return [c.as_dict() for c in out]


SWEEP = [(w, rt, 2, st, 1, lc) for w, rt, st in ((4, 2, 3), (8, 2, 3), (4, 4, 3), (4, 2, 4), (8, 2, 4), (4, 4, 4))
         for lc in (False, True)]
"""(warps, row_tiles, unroll, stages, split_k, line_copy) of the decode sweep (``--sweep``; the
earlier sweeps of benchmarks/RESULTS.md, "The decode kernel", ran other grids)."""


def _est_us(M, N, K, cfg) -> float:
    """The cost model's time of ``cfg`` (either kind) in µs, bf16 out, on the H200's SM count."""
    gemm, _ = cg._sched()
    dev = gemm.Device()
    if isinstance(cfg, gemm.DecodeConfig):
        from tvm_cdna4.schedules.cuda_decode_plan import decode_estimate

        return decode_estimate(M, N, K, cfg, 2, dev).time_s * 1e6
    return gemm.estimate(M, N, K, cfg, 2, dev).time_s * 1e6


def config_of(d: dict):
    """A config (either kind) from its ``as_dict``."""
    gemm, _ = cg._sched()
    return gemm.config_from_dict(d)


def _build(job):
    """Worker: build and export one kernel; (key, path, error)."""
    key, M, N, K, cfg, arch, workdir = job
    try:
        gemm, _ = cg._sched()
        exe = gemm.build(M, N, K, "bf16", "nt", "bf16", config_of(cfg), arch=arch)
        path = os.path.join(workdir, key + ".so")
        exe.export_library(path)
        runner = cg._sched()[1]
        runner.precompile(exe)  # the device compile here, in parallel: the timing process only loads
        return key, path, None
    except Exception as e:  # report, don't crash the run
        return key, None, f"{type(e).__name__}: {e}"


def _triton_kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbn, sbk, k_per,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, ATOMIC: tl.constexpr):
        pid_n = tl.program_id(0)
        pid_m = tl.program_id(1)
        ks = tl.program_id(2)
        rm = (pid_m * BM + tl.arange(0, BM)) % M
        rn = (pid_n * BN + tl.arange(0, BN)) % N
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(ks * k_per, tl.minimum(K, (ks + 1) * k_per), BK):
            rk = k0 + tl.arange(0, BK)
            a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak, mask=rk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + rn[None, :] * sbn + rk[:, None] * sbk, mask=rk[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        cm = pid_m * BM + tl.arange(0, BM)
        cn = pid_n * BN + tl.arange(0, BN)
        mask = (cm[:, None] < M) & (cn[None, :] < N)
        if ATOMIC:
            tl.atomic_add(c_ptr + cm[:, None] * N + cn[None, :], acc, mask=mask)
        else:
            tl.store(c_ptr + cm[:, None] * N + cn[None, :], acc.to(tl.bfloat16), mask=mask)

    def launcher(a, w, c, cfg, splits=1):
        import torch

        bm, bn, bk, stages, warps = cfg
        M, K = a.shape
        N = w.shape[0]
        k_per = triton.cdiv(triton.cdiv(K, splits), bk) * bk
        grid = (triton.cdiv(N, bn), triton.cdiv(M, bm), splits)
        if splits == 1:
            return lambda: kernel[grid](a, w, c, M, N, K, a.stride(0), a.stride(1), w.stride(0), w.stride(1), k_per,
                                        BM=bm, BN=bn, BK=bk, ATOMIC=False, num_stages=stages, num_warps=warps)
        c32 = torch.empty((M, N), dtype=torch.float32, device="cuda")

        def run():
            c32.zero_()
            kernel[grid](a, w, c32, M, N, K, a.stride(0), a.stride(1), w.stride(0), w.stride(1), k_per,
                         BM=bm, BN=bn, BK=bk, ATOMIC=True, num_stages=stages, num_warps=warps)
            c.copy_(c32)
        return run

    return launcher


METHOD = ["flush"]
"""``runtime.cuda.bench_ms``'s timing method of this run (``--method``)."""


def _checked_time(run, c, ref, runner) -> float | None:
    """Poison C, run once, validate against ``ref``; then the median time in seconds (None if wrong)."""
    import torch

    c.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    _, ok = runner.check_output(c.float().cpu().numpy(), ref, "bf16")
    return runner.bench_ms(run, warmup_ms=10, rep_ms=60, method=METHOD[0]) * 1e-3 if ok else None


def tune_all(todo, args, log) -> tuple[dict, float]:
    """``runtime.cuda.tune_problems`` over every shape with M <= TUNE_MAX_M (the tuning a model's
    worth of shapes runs: candidates built in parallel, timed, winners stored); (results, seconds)."""
    _, runner = cg._sched()
    problems = [(M, N, K, "bf16", "nt", "bf16") for _, M, N, K in todo if M <= TUNE_MAX_M]
    if not problems or args.tune_top < 1:
        return {}, 0.0
    t0 = time.time()
    res = runner.tune_problems(problems, args.arch, top=args.tune_top, jobs=args.jobs)
    sec = time.time() - t0
    log(f"tuned {len(problems)} shapes x {args.tune_top} candidates in {sec:.1f} s")
    return res, sec


def measure(name, M, N, K, built, args, log, tuned=None) -> dict:
    """Every contender on one shape; seconds per contender (None: failed validation or build)."""
    import torch

    gemm, runner = cg._sched()
    a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty((N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
    ref = (a.float() @ w.float().T).cpu().numpy()
    row = dict(name=name, M=M, N=N, K=K, roofline_us=roofline_s(M, N, K) * 1e6)
    ours = {}
    for i, (cfg, path) in enumerate(built):
        if path is None:
            continue
        p = gemm.plan(M, N, K, "bf16", "nt", "bf16", config_of(cfg))
        ours[i] = _checked_time(runner.Launcher(runner.Kernel(runner.load_kernel(path), p), a, w, c), c, ref, runner)
        if ours[i] is None:
            log(f"WRONG ours {name} M={M} config {cfg}")
    row["ours"] = ours.get(0)
    row["ours_config"] = built[0][0]
    row["ours_est_us"] = _est_us(M, N, K, config_of(built[0][0]))
    if tuned:  # tune_problems' measurements; the stored winner is what a build without a config reads
        best = tuned["config"]
        row["tuned"], row["tuned_config"] = tuned["seconds"][best], best.as_dict()
        row["tuned_est_us"] = _est_us(M, N, K, best)
        row["tuned_candidates"] = [dict(config=c.as_dict(), us=t * 1e6, est_us=_est_us(M, N, K, c))
                                   for c, t in tuned["seconds"].items()]
        row["tuned_read_back"] = gemm.tuned_config(M, N, K, "bf16", "nt", "bf16", args.arch) == best
    if len(built) > 1:  # --sweep: every config built for this shape
        row["all"] = [dict(config=cfg, seconds=ours.get(i)) for i, (cfg, _) in enumerate(built)]
    if args.no_peers:
        return row
    row["torch"] = _checked_time(lambda: torch.matmul(a, w.T, out=c), c, ref, runner)
    launcher = _triton_kernels()
    tri = {cfg: _checked_time(launcher(a, w, c, cfg), c, ref, runner) for cfg in TRITON_CONFIGS if cfg[0] <= max(16, 2 * M)}
    tri = {k: v for k, v in tri.items() if v is not None}
    row["triton"], row["triton_config"] = (min(tri.values()), list(min(tri, key=tri.get))) if tri else (None, None)
    if M <= TUNE_MAX_M:
        cfgs = [cfg for cfg in TRITON_CONFIGS if cfg[0] <= max(16, 2 * M)][:3]
        sk = {cfg: _checked_time(launcher(a, w, c, cfg, TRITON_SPLITS), c, ref, runner) for cfg in cfgs}
        sk = {k: v for k, v in sk.items() if v is not None}
        row["triton_splitk"] = min(sk.values()) if sk else None
    return row


def plan_cell(cfg: dict) -> str:
    """The plan column: ``bm x bn / split`` of a tile, ``decode bm / split`` of the decode kernel."""
    if cfg.get("kind") == "decode":
        return f"decode {16 * cfg.get('row_tiles', 0)}r x{cfg.get('warps')}w u{cfg.get('unroll')} / {cfg.get('split_k')}"
    return f"{cfg.get('block_m')}x{cfg.get('block_n')} / {cfg.get('split_k')}"


def table(rows) -> list[str]:
    """The markdown table: µs and % of roofline per contender, ours / torch and ours / Triton."""
    def cell(r, key):
        t = r.get(key)
        return "–" if t is None else f"{t * 1e6:.1f} ({roofline_pct(r['M'], r['N'], r['K'], t):.0f} %)"

    def ratio(r, key):
        ours = min(x for x in (r.get("ours"), r.get("tuned")) if x is not None) if r.get("ours") else None
        peer = r.get(key)
        return "–" if ours is None or peer is None else f"{peer / ours:.2f}x"

    out = ["| shape | M x N x K | ours µs (% roof) | ours tuned | torch | Triton mma.sync | Triton split-K | "
           "ours plan (bm x bn / split) | vs torch | vs Triton |", "|" + "---|" * 10]
    for r in rows:
        cfg = r.get("ours_config") or {}
        out.append(f"| {r['name']} | {r['M']}x{r['N']}x{r['K']} | {cell(r, 'ours')} | {cell(r, 'tuned')} | "
                   f"{cell(r, 'torch')} | {cell(r, 'triton')} | {cell(r, 'triton_splitk')} | "
                   f"{plan_cell(cfg)} | {ratio(r, 'torch')} | "
                   f"{ratio(r, 'triton')} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a handful of shapes (QUICK)")
    ap.add_argument("--tune-top", type=int, default=None, help="candidates timed per shape for 'tuned' (M <= 128; "
                    "default cuda_gemm.TUNE_TOP; 0: no tuning)")
    ap.add_argument("--ms", default=None, help="comma-separated M values (default: MS)")
    ap.add_argument("--sweep", action="store_true", help="M <= 16: also time the SWEEP grid of decode configs")
    ap.add_argument("--no-peers", action="store_true", help="skip torch and Triton")
    ap.add_argument("--method", default="flush", choices=("flush", "clean", "warm"),
                    help="runtime.cuda.bench_ms timing method (flush: L2 zeroed, dirty; clean: L2 read)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--arch", default=None, help="default: the GPU's (sm_90 on the H200)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)
    METHOD[0] = args.method
    _, runner = cg._sched()
    args.arch = args.arch or runner.device_arch()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    def log(msg):
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    gemm, _ = cg._sched()
    args.tune_top = gemm.TUNE_TOP if args.tune_top is None else args.tune_top
    todo = shapes(args.quick)
    if args.ms:
        todo = [t for t in todo if t[1] in {int(m) for m in args.ms.split(",")}]
    tuned, tune_s = tune_all(todo, args, log)
    workdir = tempfile.mkdtemp(prefix="llm_linear_")
    jobs, per_shape = [], {}
    for name, M, N, K in todo:
        cfgs = our_configs(M, N, K, 1, args.sweep)
        per_shape[(name, M)] = cfgs
        jobs += [(f"{name}_{M}_{i}", M, N, K, cfg, args.arch, workdir) for i, cfg in enumerate(cfgs)]
    log(f"building {len(jobs)} kernels for {len(todo)} shapes on {args.jobs} workers")
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        paths = {}
        for key, path, err in pool.map(_build, jobs):
            paths[key] = path
            if err:
                log(f"BUILD FAIL {key}: {err}")
    log("built")
    rows = []
    for name, M, N, K in todo:
        built = [(cfg, paths.get(f"{name}_{M}_{i}")) for i, cfg in enumerate(per_shape[(name, M)])]
        rows.append(measure(name, M, N, K, built, args, log, tuned.get((M, N, K, "bf16", "nt", "bf16"))))
        with open(os.path.join(args.out, f"llm_linear_{args.method}.json"), "w") as f:  # so far (a run cut short keeps it)
            json.dump(dict(arch=args.arch, method=args.method, seconds=time.time() - t0, rows=rows), f, indent=1)
        log(f"{name} M={M}: ours {rows[-1].get('ours')} torch {rows[-1].get('torch')} triton {rows[-1].get('triton')}")
    lines = table(rows)
    print("\n".join(lines))
    with open(os.path.join(args.out, f"llm_linear_{args.method}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, f"llm_linear_{args.method}.json"), "w") as f:
        json.dump(dict(arch=args.arch, method=args.method, seconds=time.time() - t0, tune_seconds=tune_s,
                       tune_top=args.tune_top, tuned_shapes=len(tuned), rows=rows), f, indent=1)
    wrong = [r["name"] for r in rows if r.get("ours") is None]
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
