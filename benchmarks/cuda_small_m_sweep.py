"""Time a wide set of CUDA GEMM tilings at M = 64 and 128 on the Llama-3 projections (issue 24):
the data the cost model (``kernels.sm80.gemm_plan.estimate``) is fitted to.

    python3 benchmarks/cuda_small_m_sweep.py --out $OUT [--jobs 15] [--ms 64,128] [--budget-s 150]

For every (projection, M) of ``llm_linear.PROJECTIONS`` x ``--ms``, every tiling of ``sweep_configs``
(block_m 32/64/128, block_n 64/128/256, split_k 1/2/3/4, and stage / block_k / warp-grid
variants) is built in worker processes (``--jobs``), its device code compiled there too
(``runtime.cuda.precompile``), then loaded, validated against the f32 product (C poisoned with
NaN) and timed in this process (``runtime.cuda.bench_ms``, L2 flushed, median), shape after shape.
Each row also holds the cost model's estimate of the tiling. Output: ``$OUT/cuda_small_m_sweep.json``
(written after every shape), and a table of the best tiling per shape on stdout.
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

import cuda_gemm as cg  # noqa: E402  (the work tree on sys.path)
import llm_linear as ll  # noqa: E402

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git


def _cfg(bm, bn, split, wm=None, wn=4, bk=64, stages=4, **kw):
    wm = wm if wm is not None else (1 if bm <= 32 else 2)
    return dict(block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=wn, stages=stages, split_k=split, **kw)


GRID = {  # M: (block_m, block_n, split_k values)
    64: [(32, 64, (1, 2, 3, 4)), (32, 128, (1, 2, 3, 4)), (32, 256, (1,)), (64, 64, (1, 2, 4)), (64, 128, (1, 2, 4)),
         (64, 256, (1, 2))],
    128: [(32, 64, (1, 2)), (32, 128, (1, 2)), (64, 64, (1, 2, 4)), (64, 128, (1, 2, 3, 4)), (64, 256, (1, 2)),
          (128, 64, (1, 2, 4)), (128, 128, (1, 2, 3, 4)), (128, 256, (1, 2))],
}
VARIANTS = {
    64: [_cfg(64, 128, 1, stages=3), _cfg(64, 128, 2, stages=6), _cfg(32, 64, 1, bk=128, stages=3),
         _cfg(64, 64, 1, wm=1, wn=4), _cfg(64, 128, 1, bk=32, stages=6)],
    128: [_cfg(128, 128, 2, wm=4, wn=2), _cfg(128, 64, 2, wm=4, wn=2), _cfg(128, 128, 1, bk=32, stages=6),
          _cfg(64, 128, 2, stages=6), _cfg(64, 128, 1, stages=3), _cfg(32, 64, 1, bk=128, stages=3)],
}


def sweep_configs(M: int, K: int) -> list[dict]:
    """The tilings timed for one (M, K): ``GRID`` (block_m x block_n x split_k), then ``VARIANTS``
    (stages, block_k, warp grid), those whose K slices keep at least four k-tiles."""
    key = 64 if M <= 64 else 128
    out = [_cfg(bm, bn, s) for bm, bn, splits in GRID[key] for s in splits] + VARIANTS[key]
    kt = -(-K // 64)
    return [c for c in out if kt // c["split_k"] >= 4]


REDUCTIONS = (dict(reduction="atomic"), dict(reduction="ordered"), dict(reduction="ordered", reduce_vector=2))
REDUCTION_TILES = [(64, 128, 2), (128, 128, 4)]


def reduction_configs(M: int, K: int) -> list[dict]:
    """``--set reductions``: split-K tilings (``REDUCTION_TILES``) in each of the ``REDUCTIONS``."""
    return [_cfg(bm, bn, split, **red) for bm, bn, split in REDUCTION_TILES for red in REDUCTIONS if bm <= max(32, M)]


SETS = {"grid": sweep_configs, "reductions": reduction_configs}


def _build(job):
    """Worker: build, export and precompile one kernel; (key, path, seconds, error)."""
    key, M, N, K, cfg, arch, workdir = job
    t0 = time.time()
    try:
        gemm, runner = cg._sched()
        full = gemm.GemmConfig(**{**gemm.default_config("bf16").as_dict(), **cfg})
        exe = gemm.build(M, N, K, "bf16", "nt", "bf16", full, arch=arch)
        path = os.path.join(workdir, key + ".so")
        exe.export_library(path)
        try:
            runner.precompile(exe)
        except Exception as e:  # the load then compiles (slower, still right)
            return key, path, time.time() - t0, f"precompile: {type(e).__name__}: {e}"
        return key, path, time.time() - t0, None
    except Exception as e:  # report, don't crash the run
        return key, None, time.time() - t0, f"{type(e).__name__}: {e}"


def measure(name, M, N, K, cfgs, paths, log, rep_ms) -> list[dict]:
    import torch

    gemm, runner = cg._sched()
    a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty((N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
    ref = (a.float() @ w.float().T).cpu().numpy()
    rows = []
    for i, cfg in enumerate(cfgs):
        path = paths.get(f"{name}_{M}_{i}")
        full = gemm.GemmConfig(**{**gemm.default_config("bf16").as_dict(), **cfg})
        est = gemm.estimate(M, N, K, full, 2, gemm.Device())
        row = dict(name=name, M=M, N=N, K=K, config=cfg, est_us=est.time_s * 1e6, us=None)
        if path is not None:
            t0 = time.time()
            fn = runner.Kernel(runner.load_kernel(path), gemm.plan(M, N, K, "bf16", "nt", "bf16", full))
            row["load_s"] = time.time() - t0
            launch = runner.Launcher(fn, a, w, c)
            c.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            err, ok = runner.check_output(c.float().cpu().numpy(), ref, "bf16")
            row["err"] = err
            if ok:
                row["us"] = runner.bench_ms(launch, warmup_ms=5, rep_ms=rep_ms) * 1e3
            else:
                log(f"WRONG {name} M={M} {cfg} err={err}")
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ms", default="64,128")
    ap.add_argument("--set", default="grid", choices=sorted(SETS), help="grid: the tilings; reductions: split-K modes")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--rep-ms", type=int, default=15)
    ap.add_argument("--budget-s", type=float, default=1e9, help="stop timing after this many seconds")
    ap.add_argument("--arch", default=None)
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    args = ap.parse_args(argv)
    gemm, runner = cg._sched()
    arch = args.arch or runner.device_arch()
    t0 = time.time()

    def log(msg):
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    todo = [(name, M, *ll.PROJECTIONS[name]) for M in map(int, args.ms.split(",")) for name in ll.PROJECTIONS]
    workdir = tempfile.mkdtemp(prefix="sweep_")
    jobs, per = [], {}
    for name, M, N, K in todo:
        per[(name, M)] = SETS[args.set](M, K)
        jobs += [(f"{name}_{M}_{i}", M, N, K, cfg, arch, workdir) for i, cfg in enumerate(per[(name, M)])]
    log(f"building {len(jobs)} kernels on {args.jobs} workers")
    paths, build_s = {}, []
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for key, path, sec, err in pool.map(_build, jobs, chunksize=2):
            paths[key] = path
            build_s.append(sec)
            if err:
                log(f"BUILD FAIL {key}: {err}")
    log(f"built ({sum(build_s):.0f} worker-s)")
    rows, out = [], os.path.join(args.out, f"cuda_small_m_{'sweep' if args.set == 'grid' else args.set}.json")
    for name, M, N, K in todo:
        if time.time() - t0 > args.budget_s:
            log("budget spent: stopping")
            break
        rows += measure(name, M, N, K, per[(name, M)], paths, log, args.rep_ms)
        best = min((r for r in rows if r["name"] == name and r["M"] == M and r["us"]), key=lambda r: r["us"],
                   default=None)
        loads = [r.get("load_s", 0) for r in rows if r["name"] == name and r["M"] == M]
        log(f"{name} M={M}: best {best and round(best['us'], 1)} us {best and best['config']} "
            f"(load {max(loads):.2f} s max)")
        with open(out, "w") as f:
            json.dump(dict(arch=arch, seconds=time.time() - t0, build_worker_s=sum(build_s), rows=rows), f, indent=0)
    print("| shape | M | best µs | tiling | model's pick µs (measured) |")
    print("|---|---|---|---|---|")
    for name, M, N, K in todo:
        rs = [r for r in rows if r["name"] == name and r["M"] == M and r["us"]]
        if rs:
            best, pick = min(rs, key=lambda r: r["us"]), min(rs, key=lambda r: r["est_us"])
            print(f"| {name} | {M} | {best['us']:.1f} | {best['config']} | {pick['us']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
