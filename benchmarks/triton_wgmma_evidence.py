"""How much of cuBLAS's lead at M = 64-128 is the Hopper instruction class (issue 24).

    python3 benchmarks/triton_wgmma_evidence.py --out $OUT [--ms 64,128] [--method flush]

Ours is an sm_80-class kernel (``mma.sync`` fed by ``cp.async`` + ``ldmatrix``); torch's cuBLAS runs
Hopper kernels (``wgmma`` with TMA). To separate the instruction class from the tiling, the same Triton
kernel (``llm_linear._triton_kernels``: one source, the same tile configs) is compiled twice, in two
child processes with their own Triton caches: with ``DISABLE_MMA_V3=1`` (Triton lowers ``tl.dot`` to
``mma.sync``, the peer of every table) and with ``DISABLE_MMA_V3=0`` (Triton's Hopper path: ``wgmma``
where the tile allows it). Every config is validated against the f32 product (C poisoned with NaN)
and timed by ``runtime.cuda.bench_ms``; the compiled PTX of each config says which instruction it
uses (``instr``: "wgmma" or "mma.sync"), so a config that falls back to ``mma.sync`` in the Hopper
run is seen as such. torch.matmul is timed in both children (a check on the run-to-run spread), and
the names of the kernels cuBLAS launches are read once per M with torch's profiler.

Output: ``$OUT/triton_wgmma.json`` (every config of both runs) and a table on stdout: per shape torch,
the best Triton config of each instruction class, and wgmma's gain over mma.sync. The Triton kernel
loads its tiles with plain (``cp.async``-pipelined) loads in both runs, like ours (``tma`` in the JSON:
whether the PTX holds a bulk tensor copy): the gain is the instruction class's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

MODES = {"mma.sync": "1", "wgmma": "0"}
"""The two runs: their ``DISABLE_MMA_V3`` value."""
CONFIGS = [(16, 64, 128, 4, 4), (32, 64, 128, 4, 4), (32, 128, 64, 4, 4), (64, 64, 64, 4, 4), (64, 128, 64, 4, 4),
           (64, 128, 128, 3, 4), (64, 256, 64, 3, 8), (128, 64, 64, 4, 4), (128, 128, 64, 4, 8), (128, 256, 64, 3, 8)]
"""(BM, BN, BK, stages, warps): ``llm_linear.TRITON_CONFIGS`` and the 64- to 128-row tiles a warp group
takes (Triton's Hopper tutorial configs among them); those with BM > 2M are skipped."""


def instruction(ptx: str) -> str:
    """The MMA instruction class of a compiled kernel's PTX."""
    if "wgmma.mma_async" in ptx:
        return "wgmma"
    return "mma.sync" if "mma.sync" in ptx else "none"


def child(mode: str, ms: list[int], method: str, rep_ms: int, path: str) -> None:
    """One run (this process's ``DISABLE_MMA_V3``): every shape, torch and every Triton config (in the
    Hopper run those of 64 rows or more: a warp group's MMA is 64 rows); written to ``path`` after
    every shape."""
    import torch

    import cuda_gemm as cg
    import llm_linear as ll

    _, runner = cg._sched()
    launcher = ll._triton_kernels()
    rows = []
    for M in ms:
        for name, (N, K) in ll.PROJECTIONS.items():
            a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
            w = torch.empty((N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
            c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
            ref = a.float() @ w.float().T
            row = dict(name=name, M=M, N=N, K=K, mode=mode, configs=[])
            if ll._validated(lambda: torch.matmul(a, w.T, out=c), c, ref, runner):
                row["torch"] = runner.bench_ms(lambda: torch.matmul(a, w.T, out=c), rep_ms=rep_ms, method=method) * 1e-3
            for cfg in (x for x in CONFIGS if x[0] <= max(16, 2 * M) and (mode == "mma.sync" or x[0] >= 64)):
                run = launcher(a, w, c, cfg)
                entry = dict(config=list(cfg), seconds=None)
                try:
                    compiled = run()
                    ptx = compiled.asm.get("ptx", "")
                    entry["instr"], entry["tma"] = instruction(ptx), "cp.async.bulk.tensor" in ptx
                    if ll._validated(run, c, ref, runner):
                        entry["seconds"] = runner.bench_ms(run, rep_ms=rep_ms, method=method) * 1e-3
                except Exception as e:  # a config Triton cannot compile (shared memory) is reported, not fatal
                    entry["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                row["configs"].append(entry)
            rows.append(row)
            print(f"{mode} {name} M={M}: torch {row.get('torch')} best "
                  f"{min((e['seconds'] for e in row['configs'] if e['seconds']), default=None)}", flush=True)
            with open(path, "w") as f:
                json.dump(dict(mode=mode, rows=rows), f)
    with open(path, "w") as f:
        json.dump(dict(mode=mode, rows=rows, cublas_kernels=cublas_kernels(ms)), f)


def cublas_kernels(ms: list[int]) -> dict:
    """The CUDA kernels torch.matmul launches for 8b.qkv at each M (torch's profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    out = {}
    for M in ms:
        a = torch.randn((M, 4096), dtype=torch.bfloat16, device="cuda")
        w = torch.randn((6144, 4096), dtype=torch.bfloat16, device="cuda")
        torch.matmul(a, w.T)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, w.T)
            torch.cuda.synchronize()
        out[str(M)] = sorted({e.key for e in prof.key_averages()})
    return out


def best(row: dict, instr: str | None = None) -> tuple[float | None, list | None, str | None]:
    """The fastest validated config of a run (of instruction class ``instr`` when given)."""
    ok = [e for e in row["configs"] if e.get("seconds") and instr in (None, e.get("instr"))]
    if not ok:
        return None, None, None
    e = min(ok, key=lambda e: e["seconds"])
    return e["seconds"], e["config"], e.get("instr")


def table(runs: dict) -> list[str]:
    """Per shape: torch (each run), the best Triton config of each run (of the Hopper run: among the
    configs compiled to wgmma), and wgmma's gain over mma.sync."""
    out = ["| shape | M x N x K | torch µs | Triton mma.sync µs (config) | Triton wgmma µs (config) | "
           "wgmma / mma.sync |", "|" + "---|" * 6]
    by = {m: {(r["name"], r["M"]): r for r in runs[m]["rows"]} for m in runs if runs[m]}
    keys = next(iter(by.values())).keys() if by else []
    for key in keys:
        rs = {m: by[m].get(key) for m in by}
        r0 = next(r for r in rs.values() if r)
        torch_us = " / ".join(f"{r['torch'] * 1e6:.1f}" for r in rs.values() if r and r.get("torch"))
        cells, secs = [], {}
        for m in MODES:
            s, cfg, _ = best(rs[m], m) if rs.get(m) else (None, None, None)
            secs[m] = s
            cells.append("–" if s is None else f"{s * 1e6:.1f} ({cfg})")
        gain = f"{secs['mma.sync'] / secs['wgmma']:.2f}x" if secs.get("mma.sync") and secs.get("wgmma") else "–"
        out.append(f"| {key[0]} | {key[1]}x{r0['N']}x{r0['K']} | {torch_us} | {cells[0]} | {cells[1]} | {gain} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ms", default="64,128")
    ap.add_argument("--method", default="flush")
    ap.add_argument("--rep-ms", type=int, default=20)
    ap.add_argument("--mode", choices=sorted(MODES), help="(internal) run one mode in this process")
    ap.add_argument("--json", help="(internal) where the child writes its run")
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    args = ap.parse_args(argv)
    ms = [int(m) for m in args.ms.split(",")]
    if args.mode:  # the child: DISABLE_MMA_V3 was set by the parent before Triton was imported
        child(args.mode, ms, args.method, args.rep_ms, args.json)
        return 0
    runs, tmp = {}, tempfile.mkdtemp(prefix="triton_wgmma_")
    for mode, flag in MODES.items():
        path = os.path.join(tmp, mode + ".json")
        env = dict(os.environ, DISABLE_MMA_V3=flag, TRITON_CACHE_DIR=os.path.join(tmp, "cache_" + mode))
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", mode, "--json", path, "--ms", args.ms,
                            "--method", args.method, "--rep-ms", str(args.rep_ms)], env=env)
        runs[mode] = json.load(open(path)) if os.path.exists(path) else None  # a run cut short keeps its shapes
        if r.returncode:
            print(f"{mode} run exited {r.returncode}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "triton_wgmma.json"), "w") as f:
        json.dump(dict(method=args.method, runs=runs), f, indent=1)
    print("\n".join(table(runs)))
    return 0 if all(runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
