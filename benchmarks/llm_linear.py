"""LLM linear layers on the H200: y = x · Wᵀ, bf16 in, bf16 out (layout nt), at every M.

    python3 benchmarks/llm_linear.py --method flush,clean --out $OUT   # the full table, both timings
    python3 benchmarks/llm_linear.py --quick --out $OUT                # a handful of shapes

The projections of Llama-3-8B and -70B (``PROJECTIONS``, N x K) at M = 1, 16, 64, 128, 1024, 4096
(``MS``). Per shape, every contender is validated once against the f32 product of the same inputs
(``runtime.cuda.tolerance("bf16")``; C poisoned with NaN first), then timed under each ``--method``
(``runtime.cuda.bench_ms``: ``flush``, the L2 zeroed before each call, or ``clean``, the L2 read;
``--rep-ms`` of repetitions):

* ours, default: the planner's choice (``kernels.sm80.gemm.choose_config``, the cost models of
  docs/cuda_gemm.md "Plans for every M" and "The decode kernel");
* ours, tuned: ``runtime.cuda.tune_problems`` over every shape with M <= 128 first (the cost
  models' first ``--tune-top`` candidates, default ``kernels.sm80.gemm.TUNE_TOP``, built in parallel and
  timed as they are built; the winner stored in the tuning cache, which ``kernels.sm80.gemm.tuned_config``
  reads back); its wall time is the "tuning a model's worth of shapes" figure (``tune_seconds``
  and ``tune_stats`` in the JSON). The stored winner is then built (a cache hit) and timed here
  like every contender; the tuning's own measurements are ``tuned_candidates``;
* ``torch.matmul`` (cuBLAS);
* Triton's mma.sync path (``DISABLE_MMA_V3=1``, set by benchmarks/cuda_gemm.py before Triton is
  imported): the best of ``TRITON_CONFIGS`` (16- to 128-row tiles), and a split-K variant
  (``TRITON_SPLITS`` slices, f32 atomics into a zeroed buffer, then the bf16 conversion; timed as
  the three launches) for M <= 128.

% of roofline = max(2MNK / 660e12, (A + B + C bytes) / 4.8e12) / time (``roofline_s``). Output per
method: a markdown table on stdout and in ``$OUT/llm_linear_<method>.md``, every figure in
``$OUT/llm_linear_<method>.json``. ``--ms 1,16`` keeps those M; ``--sweep`` adds the ``SWEEP`` grid of
decode configs at M <= 16; ``--peers torch`` times torch only, ``--no-peers`` neither.
Kernels build in parallel worker processes (``--jobs``), from the work tree with only TIRx, torch and
Triton installed (``kernels.sm80.gemm._sched``).
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

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git

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
    candidates of both kinds (``kernels.sm80.gemm.ranked_configs``) up to ``top``; with ``sweep`` and a
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
        out += [c for c in (gemm.DecodeConfig(w, rt, u, s, stages=st, line_copy=lc) for w, rt, u, st, s, lc in SWEEP)
                if c not in out and -(-K // (32 * c.unroll)) >= c.split_k * c.warps]
    if sweep and M in TILE_SWEEP:
        base = gemm.default_config("bf16")
        for bm, bn, bk, st, split in TILE_SWEEP[M]:
            kw = dict(reduction="ordered", reduce_vector=2) if split > 1 else {}
            c = gemm.GemmConfig(**{**base.as_dict(), **dict(block_m=bm, block_n=bn, block_k=bk, warps_m=1 if bm <= 32 else 2,
                                                         warps_n=4, stages=st, split_k=split, **kw)})
            if c not in out and -(-K // bk) >= 2 * split:
                out.append(c)
    return [c.as_dict() for c in out]


SWEEP = [(w, rt, u, st, 1, lc) for w, rt, u, st in ((4, 2, 2, 3), (8, 2, 2, 3), (4, 4, 2, 3), (4, 2, 2, 4), (4, 1, 2, 4),
                                                    (4, 2, 2, 6), (4, 4, 1, 4), (4, 2, 4, 3), (4, 1, 4, 4), (8, 1, 4, 3),
                                                    (2, 2, 2, 8))
         for lc in (False, True)]
"""(warps, row_tiles, unroll, stages, split_k, line_copy) of the decode sweep (``--sweep``, M <= 16: the copy
layouts, deeper pipelines and longer iterations; the earlier sweeps of benchmarks/journal/2026-12.md, "The decode
kernel", ran other grids)."""

TILE_SWEEP = {  # M: (block_m, block_n, block_k, stages, split_k); a split uses the ordered reduction by pairs
    16: [(16, 64, 128, 4, 1), (16, 64, 128, 4, 2), (16, 128, 128, 4, 1), (32, 128, 64, 4, 1)],
    64: [(64, 256, 64, 4, 2), (64, 256, 64, 4, 4), (64, 256, 64, 4, 6), (64, 128, 128, 3, 3), (64, 128, 128, 3, 6),
         (64, 128, 128, 4, 1), (64, 128, 128, 4, 2), (64, 128, 128, 4, 4), (64, 64, 128, 4, 1), (32, 128, 128, 4, 2)],
    128: [(128, 256, 64, 4, 2), (128, 256, 64, 4, 3), (128, 256, 64, 4, 4), (128, 256, 64, 4, 5), (128, 256, 64, 4, 6),
          (128, 128, 128, 3, 6), (128, 128, 128, 3, 8), (64, 256, 64, 4, 2), (64, 256, 64, 4, 4), (64, 128, 128, 4, 1),
          (64, 128, 128, 4, 2), (64, 128, 128, 4, 4)],
}
"""The tile sweep (``--sweep``): at M = 16 Triton's best decode tiling (16x64x128, 4 stages) and the 32x128
tile that streamed fastest at 70b.gate_up; at M = 64 and 128 wider tiles with more K slices (fewer L2
re-reads of the weights) and 4-stage 128-deep k-tiles; what the cost models are refitted to
(benchmarks/cost_model_fit.py)."""


def _est_us(M, N, K, cfg) -> float:
    """The cost model's time of ``cfg`` (either kind) in µs, bf16 out, on the H200's SM count."""
    gemm, _ = cg._sched()
    dev = gemm.Device()
    if isinstance(cfg, gemm.DecodeConfig):
        from tvm_cdna4.kernels.sm80.decode_plan import decode_estimate

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


def _validated(run, c, ref, runner) -> bool:
    """Poison C with NaN, run once, check against ``ref`` (the f32 product, on the GPU) within
    ``runtime.cuda.tolerance("bf16")`` (a C left NaN anywhere fails)."""
    import torch

    c.fill_(float("nan"))
    run()
    err = float(torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref).clamp_min(1e-30))
    return err <= runner.tolerance("bf16")


def tune_all(todo, args, log) -> tuple[dict, dict]:
    """``runtime.cuda.tune_problems`` over every shape with M <= TUNE_MAX_M (the tuning a model's
    worth of shapes runs: candidates built in parallel and timed as they are built, winners
    stored); (results, the tuning's figures: ``tune_problems``' ``stats``)."""
    _, runner = cg._sched()
    problems = [(M, N, K, "bf16", "nt", "bf16") for _, M, N, K in todo if M <= TUNE_MAX_M]
    if not problems or args.tune_top < 1:
        return {}, {}
    stats = {}
    res = runner.tune_problems(problems, args.arch, top=args.tune_top, jobs=args.jobs, stats=stats)
    log(f"tuned {len(problems)} shapes x {args.tune_top} candidates in {stats['seconds']:.1f} s "
        f"({stats['kernels']} kernels, {stats['worker_s']:.0f} worker-s of building on {stats['workers']} workers, "
        f"{stats['timing_s']:.1f} s loading/checking/timing)")
    return res, stats


def contenders(M, N, K, built, args):
    """(key, config dict or None, launcher factory) of one shape: every built config of ours
    (``ours`` the planner's choice, ``tuned`` the stored tuning winner, ``cfg<i>`` the sweep's), then
    torch and Triton (its configs, and for M <= TUNE_MAX_M the split-K variant) as ``--peers`` asks."""
    import torch

    gemm, runner = cg._sched()
    out = []
    for key, cfg, path in built:
        if path is not None:
            p = gemm.plan(M, N, K, "bf16", "nt", "bf16", config_of(cfg))
            fn = runner.Kernel(runner.load_kernel(path), p)
            out.append((key, cfg, lambda a, w, c, fn=fn: runner.Launcher(fn, a, w, c)))
    if args.peers in ("torch", "all"):
        out.append(("torch", None, lambda a, w, c: (lambda: torch.matmul(a, w.T, out=c))))
    if args.peers == "all":
        launcher = _triton_kernels()
        tri = [cfg for cfg in TRITON_CONFIGS if cfg[0] <= max(16, 2 * M)]
        out += [(f"triton{list(cfg)}", None, lambda a, w, c, cfg=cfg: launcher(a, w, c, cfg)) for cfg in tri]
        if M <= TUNE_MAX_M:
            out += [(f"tritonsk{list(cfg)}", None, lambda a, w, c, cfg=cfg: launcher(a, w, c, cfg, TRITON_SPLITS))
                    for cfg in tri[:3]]
    return out


def measure(name, M, N, K, built, args, log, tuned=None) -> dict:
    """Every contender on one shape, validated once (C poisoned, checked against the f32 product), then
    timed under each ``--method``: ``{method: row}``, seconds per contender (None: wrong or not built)."""
    import torch

    gemm, runner = cg._sched()
    a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty((N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
    ref = a.float() @ w.float().T
    runs = {}
    for key, _cfg, make in contenders(M, N, K, built, args):
        run = make(a, w, c)
        if _validated(run, c, ref, runner):
            runs[key] = run
        else:
            log(f"WRONG {key} {name} M={M} {_cfg or ''}")
    cfgs = {key: cfg for key, cfg, _ in built}
    rows = {}
    for method in args.methods:
        sec = {key: runner.bench_ms(run, warmup_ms=10, rep_ms=args.rep_ms, method=method) * 1e-3
               for key, run in runs.items()}
        rows[method] = _row(name, M, N, K, sec, cfgs, tuned, args)
    return rows


def _row(name, M, N, K, sec, cfgs, tuned, args) -> dict:
    """One method's row of ``measure``: ours, tuned, torch, the best Triton config and split-K variant."""
    gemm, _ = cg._sched()
    row = dict(name=name, M=M, N=N, K=K, roofline_us=roofline_s(M, N, K) * 1e6, ours=sec.get("ours"),
               ours_config=cfgs["ours"], ours_est_us=_est_us(M, N, K, config_of(cfgs["ours"])))
    if tuned:  # the stored winner, timed here like every contender (tuned_us: what the tuning measured)
        best = tuned["config"]
        row["tuned"] = sec.get("tuned") if "tuned" in cfgs else sec.get("ours")
        row["tuned_config"], row["tuned_est_us"] = best.as_dict(), _est_us(M, N, K, best)
        row["tuned_candidates"] = [dict(config=c.as_dict(), us=t * 1e6, est_us=_est_us(M, N, K, c))
                                   for c, t in tuned["seconds"].items()]
        row["tuned_read_back"] = gemm.tuned_config(M, N, K, "bf16", "nt", "bf16", args.arch) == best
    sweep = [k for k in cfgs if k.startswith("cfg")]
    if sweep:  # --sweep: every config built for this shape
        row["all"] = [dict(config=cfgs[k], seconds=sec.get(k)) for k in ["ours", *(["tuned"] if "tuned" in cfgs else []),
                                                                          *sweep]]
    if "torch" in sec:
        row["torch"] = sec["torch"]
    tri = {k: v for k, v in sec.items() if k.startswith("triton[")}
    if tri:
        row["triton"], row["triton_config"] = min(tri.values()), json.loads(min(tri, key=tri.get)[6:])
    sk = [v for k, v in sec.items() if k.startswith("tritonsk")]
    if sk:
        row["triton_splitk"] = min(sk)
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
                    "default kernels.sm80.gemm.TUNE_TOP; 0: no tuning)")
    ap.add_argument("--ms", default=None, help="comma-separated M values (default: MS)")
    ap.add_argument("--sweep", action="store_true", help="M <= 16: also time the SWEEP grid of decode configs")
    ap.add_argument("--peers", default="all", choices=("all", "torch", "none"), help="torch and Triton, torch only, none")
    ap.add_argument("--no-peers", dest="peers", action="store_const", const="none", help="--peers none")
    ap.add_argument("--method", default="flush", help="comma-separated runtime.cuda.bench_ms timing methods, "
                    "each shape timed under every one (flush: L2 zeroed, dirty; clean: L2 read; warm)")
    ap.add_argument("--rep-ms", type=int, default=60, help="bench_ms repetition time per contender and method")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--arch", default=None, help="default: the GPU's (sm_90 on the H200)")
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    args = ap.parse_args(argv)
    _, runner = cg._sched()
    args.methods = args.method.split(",")
    for m in args.methods:
        if m not in runner.TIMING_METHODS:
            ap.error(f"--method {m!r}: use {', '.join(runner.TIMING_METHODS)}")
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
    tuned, tune_stats = tune_all(todo, args, log)
    paths = build_all(todo, tuned, args, log)
    rows = {m: [] for m in args.methods}
    for name, M, N, K in todo:
        got = measure(name, M, N, K, paths[(name, M)], args, log, tuned.get((M, N, K, "bf16", "nt", "bf16")))
        for m in args.methods:
            rows[m].append(got[m])
            _write(args, m, rows[m], t0, tune_stats, len(tuned))  # so far (a run cut short keeps it)
        r = got[args.methods[0]]
        log(f"{name} M={M}: ours {r.get('ours')} tuned {r.get('tuned')} torch {r.get('torch')} triton {r.get('triton')}")
    for m in args.methods:
        lines = table(rows[m])
        print(f"\n{m}:\n" + "\n".join(lines))
        with open(os.path.join(args.out, f"llm_linear_{m}.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
    wrong = [r["name"] for r in rows[args.methods[0]] if r.get("ours") is None]
    return 1 if wrong else 0


def build_all(todo, tuned, args, log) -> dict:
    """Build every config of ours in worker processes: per shape the planner's choice (``ours``), the
    stored tuning winner where it differs (``tuned``) and the ``--sweep`` configs (``cfg<i>``);
    ``{(name, M): [(key, config dict, path or None)]}``."""
    gemm, _ = cg._sched()
    workdir = tempfile.mkdtemp(prefix="llm_linear_")
    jobs, per_shape = [], {}
    for name, M, N, K in todo:
        cfgs = our_configs(M, N, K, 1, args.sweep)
        keyed = [("ours", cfgs[0])]
        best = tuned.get((M, N, K, "bf16", "nt", "bf16"))
        if best and best["config"].as_dict() != cfgs[0]:
            keyed.append(("tuned", best["config"].as_dict()))
        keyed += [(f"cfg{i}", cfg) for i, cfg in enumerate(cfgs[1:]) if best is None or cfg != best["config"].as_dict()]
        per_shape[(name, M)] = keyed
        jobs += [(f"{name}_{M}_{key}", M, N, K, cfg, args.arch, workdir) for key, cfg in keyed]
    log(f"building {len(jobs)} kernels for {len(todo)} shapes on {args.jobs} workers")
    paths = {}
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for key, path, err in pool.map(_build, jobs):
            paths[key] = path
            if err:
                log(f"BUILD FAIL {key}: {err}")
    log("built")
    return {(name, M): [(key, cfg, paths.get(f"{name}_{M}_{key}")) for key, cfg in keyed]
            for (name, M), keyed in per_shape.items()}


def _write(args, method, rows, t0, tune_stats, tuned_shapes):
    with open(os.path.join(args.out, f"llm_linear_{method}.json"), "w") as f:
        json.dump(dict(arch=args.arch, method=method, methods=args.methods, seconds=time.time() - t0,
                       tune_seconds=tune_stats.get("seconds", 0.0), tune_stats=tune_stats, tune_top=args.tune_top,
                       tuned_shapes=tuned_shapes, rep_ms=args.rep_ms, rows=rows), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
