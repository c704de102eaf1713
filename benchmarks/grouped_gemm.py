"""Grouped GEMM (mixture of experts) on the H200: one launch of ``cuda_gemm.build_grouped`` against
``torch._grouped_mm`` and a loop of our own per-group launches; bf16 in and out, weights [G, N, K].

    python3 benchmarks/grouped_gemm.py --out $OUT           # the PROBLEMS on the GPU
    python3 benchmarks/grouped_gemm.py --gfx950 --out DIR   # CPU only: the gfx950 whole-GPU estimates of the PROBLEMS

The problems of issue 25 (``PROBLEMS``): 8 experts N = 28672, K = 4096 (Mixtral-like gate/up) at
8192 tokens; 256 experts N = 4096, K = 7168 (DeepSeek-V3-like) at 32768 tokens (prefill) and at 512
(decode). Routing: every token picks an expert uniformly at random (``--seed``), the tokens sorted by
expert (``group_sizes``; empty groups happen at decode counts). Contenders, each first checked against
the f32 product of the same inputs (C poisoned with NaN; ``runtime.cuda.tolerance("bf16")``, the
relative Frobenius error over all rows), then timed with ``runtime.cuda.bench_ms`` under each of
``--methods`` (default ``flush`` and ``clean``, benchmarks/journal/2026-12.md says why both):

* ``ours``: the grouped GEMM, one launch (the offsets read on the device; the kernel of the bucket of
  ``ceil(T / G)`` rows per group, ``kernels.gemm.grouped``);
* ``torch``: ``torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets[1:])`` (the cumulative group ends,
  int32; cuBLAS / CUTLASS grouped kernels on sm_90);
* ``loop``: one launch of our dynamic-M GEMM (``cuda_gemm.build_dynamic``) per group with rows, on row
  slices of x and C (the host knows the sizes: what a grouped kernel saves);
* ``silu``: ours with a per-group bias and SiLU fused (a gate/up layer; validated against its own f32
  reference, timed beside the plain kernel: the epilogue's cost).

Figures: time, TFLOP/s (2 T N K / time), TB/s (A, the weights of the groups with rows, C: the bytes
that must move), % of the roofline max(2 T N K / 660e12, bytes / 4.8e12) (``kernels.sm80.gemm_plan.Device``'s
``roof_*``), ours over torch and over the loop. Targets (issue 25): prefill >= 1.0x torch, decode >= 85 %
of the roofline, >= 1.5x the loop. Kernels build in ``--jobs`` worker processes first (build and
device-code caches), from the work tree with only TIRx, torch and Triton installed (no gfx950 import on
this path). Output: markdown on stdout and ``$OUT/grouped_gemm.md``, every figure in
``$OUT/grouped_gemm.json``.

``--candidates [SPEC,...]``: instead of the contenders, ours with each of a few tilings of the tile GEMM
(``BMxBNxBK/WMxWN/STAGES[/live][/cta]``, ``FLAGS``; default ``CANDIDATES``;
``cuda_gemm.build_grouped(..., config=)``) beside the cost model's choice and its estimate of each
(``kernels.sm80.gemm_plan.estimate`` with the groups), and ``torch._grouped_mm`` timed in the same run, in ``--rounds``
rounds over all of them (the median kept); each validated first; the problems default to the prefill
ones. Output ``$OUT/grouped_candidates.md`` / ``.json``: whether the model ranks the tilings as the GPU
does (docs/grouped_gemm.md, "The plan").

``--gfx950`` (no GPU): per problem the grouped gfx950 kernel of the same bucket, compiled (TIRx's LLVM,
llvm-mca for the main loop), and ``report.gpu_report`` of it doing ``kernels.gfx950.gemm_cost.grouped_work`` (G groups
of T / G rows): the MI355X whole-GPU estimate against its roofline (8 TB/s, the bf16 MFMA peak), beside
the planner's estimate (``planned_estimate``); ``$OUT/grouped_gemm_gfx950.md`` / ``.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import sys
import time

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PROBLEMS = {  # name: (G, N, K, T)
    "mixtral.gate_up prefill": (8, 28672, 4096, 8192),
    "deepseek-v3 prefill": (256, 4096, 7168, 32768),
    "deepseek-v3 decode": (256, 4096, 7168, 512),
}
DECODE_MAX_T = 4096  # problems with at most this many tokens are judged by the bandwidth target
TARGETS = {"prefill_vs_torch": 1.0, "decode_roofline": 0.85, "vs_loop": 1.5}
DTYPE, LAYOUT = "bf16", "nt"


def group_sizes(G: int, T: int, seed: int) -> list[int]:
    """Rows per expert when each of T tokens picks one of G experts uniformly at random."""
    import numpy as np

    return np.bincount(np.random.default_rng(seed).integers(0, G, T), minlength=G).astype(int).tolist()


def moved_bytes(sizes, N: int, K: int) -> int:
    """A, the weights of the groups with rows, C (bf16)."""
    from tvm_cdna4.kernels.gemm.grouped import moved_bytes as moved

    return moved(sizes, N, K, 2, 2)


CANDIDATES = ("128x256x64/2x4/4/live/cta", "128x256x64/2x4/4/live", "128x256x64/2x4/4/cta", "128x256x64/2x4/4")
"""``--candidates``' default tilings: the model's choice at 128 rows per group (128 x 256 x 64, 4 stages,
short tiles, ``GemmConfig.live_rows``, and the CTA-wide group search, ``GemmConfig.group_search``), each
of the two alone, and neither (the choice before them)."""


def parse_candidate(spec: str):
    """A ``--candidates`` tiling ``BMxBNxBK/WMxWN/STAGES[/live][/cta]`` (``128x256x64/2x4/4/live``; the
    options: ``FLAGS``) as a ``GemmConfig`` (its other fields the default's); a bad one exits naming the form."""
    from tvm_cdna4.kernels.sm80.gemm_plan import GemmConfig

    try:
        block, warps, stages, *flags = spec.split("/")
        if set(flags) - set(FLAGS) or len(set(flags)) < len(flags):
            raise ValueError(f"options {flags}: each of {FLAGS} at most once")
        bm, bn, bk = (int(x) for x in block.lower().split("x"))
        wm, wn = (int(x) for x in warps.lower().split("x"))
        cfg = GemmConfig(block_m=bm, block_n=bn, block_k=bk, warps_m=wm, warps_n=wn, stages=int(stages),
                         live_rows="live" in flags, group_search="cta" if "cta" in flags else "binary")
        cfg.check()
    except ValueError as err:
        raise SystemExit(f"--candidates {spec!r}: expected BMxBNxBK/WMxWN/STAGES[/live][/cta], e.g. 128x256x64/2x4/4 "
                         f"({err})")
    return cfg


FLAGS = ("live", "cta")
"""A ``--candidates`` spec's options: ``live`` short tiles (``GemmConfig.live_rows``), ``cta`` the CTA-wide
group search (``GemmConfig.group_search``)."""


def spec_of(cfg) -> str:
    """A tiling as a ``--candidates`` spec."""
    flags = ("/live" if getattr(cfg, "live_rows", False) else "") + (
        "/cta" if getattr(cfg, "group_search", "binary") == "cta" else "")
    return f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k}/{cfg.warps_m}x{cfg.warps_n}/{cfg.stages}{flags}"


SILU = dict(bias=True, activation="silu")
"""The fused epilogue of the ``silu`` contender (a per-group bias, then SiLU)."""


def _build(job):
    """Worker: build one kernel (``("grouped", G, N, K, T, fused)`` or ``("dynamic", N, K, M)``) and
    compile its device code into the caches; (job, seconds, error or None)."""
    from tvm_cdna4.runtime.cuda import precompile
    from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm

    start = time.perf_counter()
    try:
        if job[0] == "grouped":
            _, G, N, K, T, fused, arch = job
            exe = cuda_gemm.build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE, arch, **(SILU if fused else {})).kernel_for(T)
        elif job[0] == "candidate":
            _, G, N, K, T, spec, arch = job
            exe = cuda_gemm.build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE, arch, config=parse_candidate(spec)).kernel_for(T)
        else:
            _, N, K, M, arch = job
            exe = cuda_gemm.build_dynamic(N, K, DTYPE, LAYOUT, DTYPE, arch).kernel_for(M)
        precompile(exe)
        return job, time.perf_counter() - start, None
    except Exception as err:  # reported in the table, not fatal to the other problems
        return job, time.perf_counter() - start, f"{type(err).__name__}: {err}"


def jobs_for(problems: dict, seed: int, arch: str) -> list[tuple]:
    """The kernels the GPU run needs: each problem's grouped kernel and one dynamic-M kernel per bucket its
    groups fall in (the loop)."""
    from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm

    jobs = []
    for G, N, K, T in problems.values():
        jobs += [("grouped", G, N, K, T, fused, arch) for fused in (False, True)]
        dyn = cuda_gemm.build_dynamic(N, K, DTYPE, LAYOUT, DTYPE, arch)
        seen = set()
        for m in group_sizes(G, T, seed):
            if m and dyn.bucket(m) not in seen:
                seen.add(dyn.bucket(m))
                jobs.append(("dynamic", N, K, m, arch))
    return jobs


def _reference(x, w, sizes):
    """f32 ``x[rows of g] @ w[g].T`` per group, [T, N]."""
    import torch

    out = torch.zeros((x.shape[0], w.shape[1]), dtype=torch.float32, device=x.device)
    lo = 0
    for g, m in enumerate(sizes):
        if m:
            out[lo:lo + m] = x[lo:lo + m].float() @ w[g].float().T
        lo += m
    return out


def contenders(G, N, K, sizes, x, w, offsets, c, bias, arch):
    """``{name: (call, output tensor)}``: ours, torch's ``_grouped_mm``, the loop of our launches, ours with
    the bias and SiLU fused."""
    import torch
    import tvm_ffi

    from tvm_cdna4.runtime.cuda import DynamicKernel
    from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm

    T = x.shape[0]
    grouped = DynamicKernel(cuda_gemm.build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE, arch)).kernel(T)
    packed = [tvm_ffi.from_dlpack(t) for t in (x, w, c, offsets)]
    fused = DynamicKernel(cuda_gemm.build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE, arch, **SILU)).kernel(T)
    fused_args = [*packed, tvm_ffi.from_dlpack(bias)]
    dyn = DynamicKernel(cuda_gemm.build_dynamic(N, K, DTYPE, LAYOUT, DTYPE, arch))
    calls, lo = [], 0
    for g, m in enumerate(sizes):
        if m:
            calls.append((dyn.kernel(m), [tvm_ffi.from_dlpack(t) for t in (x[lo:lo + m], w[g], c[lo:lo + m])]))
        lo += m
    ends, wt, box = offsets[1:].clone(), w.transpose(-2, -1), {}  # torch's offs: the group ends, own allocation

    def torch_call():
        box["out"] = torch._grouped_mm(x, wt, offs=ends)

    def loop_call():
        for fn, args in calls:
            fn(*args)

    return {"ours": (lambda: grouped(*packed), lambda: c), "torch": (torch_call, lambda: box["out"]),
            "loop": (loop_call, lambda: c), "silu": (lambda: fused(*fused_args), lambda: c)}


def measure(name, G, N, K, T, seed, arch, methods) -> dict:
    """Validate, then time, every contender on one problem."""
    import torch

    from tvm_cdna4.runtime import cuda as runner
    from tvm_cdna4.kernels.sm80.gemm_plan import Device
    from tvm_cdna4.kernels.gemm.grouped import offsets_of

    sizes = group_sizes(G, T, seed)
    x = torch.empty((T, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty((G, N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    offsets = torch.tensor(offsets_of(sizes), dtype=torch.int32, device="cuda")
    c = torch.empty((T, N), dtype=torch.bfloat16, device="cuda")
    bias = torch.empty((G, N), dtype=torch.float32, device="cuda").uniform_(-1, 1)
    ref = _reference(x, w, sizes)

    def silu_ref():  # the gate/up layer: silu(x @ w[g].T + bias[g])
        rows = torch.repeat_interleave(torch.arange(G, device="cuda"), torch.tensor(sizes, device="cuda"))
        return torch.nn.functional.silu(ref + bias[rows])

    flops, nbytes, dev = 2 * T * N * K, moved_bytes(sizes, N, K), Device()
    roof = max(flops / dev.roof_flops, nbytes / dev.roof_bytes_s)
    row = {"problem": name, "G": G, "N": N, "K": K, "T": T, "empty_groups": sizes.count(0), "max_rows": max(sizes),
           "bytes": nbytes, "bytes_all_weights": 2 * (T * K + G * N * K + T * N), "roofline_us": roof * 1e6}
    for who, (call, output) in contenders(G, N, K, sizes, x, w, offsets, c, bias, arch).items():
        try:
            c.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            out, want = output().float(), silu_ref() if who == "silu" else ref
            err = float(torch.linalg.norm(out - want) / torch.linalg.norm(want))
        except Exception as e:  # a contender that cannot run this problem is reported, not timed
            row[who] = {"error": f"{type(e).__name__}: {e}"}
            continue
        cell = {"rel_err": err, "ok": err <= runner.tolerance(DTYPE)}
        if cell["ok"]:
            for method in methods:
                us = runner.bench_ms(call, method=method) * 1e3
                cell[method] = {"us": us, "tflops": flops / us / 1e6, "tbs": nbytes / us / 1e6,
                                "roofline": roof * 1e6 / us}
        row[who] = cell
        del out, want
    del x, w, c, ref, bias
    torch.cuda.empty_cache()
    return row


def verdicts(row, method: str) -> dict:
    """Ours against the targets under ``method`` (None where a figure is missing)."""
    def us(who):
        return row.get(who, {}).get(method, {}).get("us")

    ours, torch_us, loop = us("ours"), us("torch"), us("loop")
    out = {"vs_torch": torch_us / ours if ours and torch_us else None, "vs_loop": loop / ours if ours and loop else None,
           "roofline": row["roofline_us"] / ours if ours else None}
    if row["T"] <= DECODE_MAX_T:
        out["target_met"] = None if ours is None else (out["roofline"] >= TARGETS["decode_roofline"]
                                                       and (out["vs_loop"] or 0) >= TARGETS["vs_loop"])
    else:
        out["target_met"] = None if ours is None else ((out["vs_torch"] or 0) >= TARGETS["prefill_vs_torch"]
                                                       and (out["vs_loop"] or 0) >= TARGETS["vs_loop"])
    return out


def table(rows, methods) -> list[str]:
    lines = ["| problem | method | ours µs (TFLOP/s, TB/s, % roof) | torch._grouped_mm µs (TFLOP/s, TB/s, % roof) | "
             "loop µs | ours + bias + SiLU µs | ours / torch | ours / loop | target | rel err (ours, torch, loop, SiLU) |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def cell(r, who, method):
        c = r.get(who, {})
        if "error" in c:
            return "error"
        if method not in c:
            return "FAIL" if c else "-"
        f = c[method]
        return f"{f['us']:.1f} ({f['tflops']:.0f}, {f['tbs']:.2f}, {100 * f['roofline']:.0f} %)"

    def ratio(x):
        return "-" if x is None else f"{x:.2f}x"

    for r in rows:
        errs = ", ".join(f"{r[w]['rel_err']:.1e}" if "rel_err" in r.get(w, {}) else "-"
                         for w in ("ours", "torch", "loop", "silu"))
        for method in methods:
            v = verdicts(r, method)
            met = {True: "met", False: "NOT met", None: "-"}[v["target_met"]]
            loop, silu = (r.get(w, {}).get(method, {}).get("us") for w in ("loop", "silu"))
            lines.append(f"| {r['problem']} G={r['G']} N={r['N']} K={r['K']} T={r['T']} ({r['empty_groups']} empty) | "
                         f"{method} | {cell(r, 'ours', method)} | {cell(r, 'torch', method)} | "
                         f"{'-' if loop is None else f'{loop:.1f}'} | {'-' if silu is None else f'{silu:.1f}'} | "
                         f"{ratio(v['vs_torch'])} | {ratio(v['vs_loop'])} | {met} | {errs} |")
    return lines


def gpu_main(args) -> int:
    from tvm_cdna4.runtime import cuda as runner

    ok, why = runner.have_cuda_gpu()
    if not ok:
        print(f"grouped_gemm.py needs an NVIDIA GPU (or --gfx950): {why}", file=sys.stderr)
        return 2
    arch, problems, methods = runner.device_arch(), _problems(args), args.methods.split(",")
    if args.candidates:
        return candidates_main(args, arch, methods)
    start = time.perf_counter()
    jobs = jobs_for(problems, args.seed, arch)
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        built = list(pool.map(_build, jobs))
    for job, seconds, err in built:
        print(f"built {job[:-1]} in {seconds:.0f} s" + (f": {err}" if err else ""), flush=True)
    rows = []
    for name, (G, N, K, T) in problems.items():
        rows.append(measure(name, G, N, K, T, args.seed, arch, methods))
        print(json.dumps({k: v for k, v in rows[-1].items() if k in ("problem", "ours", "torch", "loop")}), flush=True)
    lines = table(rows, methods)
    print("\n".join(lines))
    meta = {"device": runner.have_cuda_gpu()[1], "arch": arch, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "methods": methods, "seed": args.seed, "targets": TARGETS, "seconds": time.perf_counter() - start,
            "build_seconds": {str(j[:-1]): s for j, s, _ in built}, "versions": _versions()}
    _write(args.out, "grouped_gemm", lines, {**meta, "rows": rows,
                                             "verdicts": {r["problem"]: {m: verdicts(r, m) for m in methods} for r in rows}})
    return 0 if all(r.get("ours", {}).get("ok") for r in rows) else 1


def _problem_tensors(G, N, K, T, seed):
    """x, w, offsets (device) and the f32 reference of one problem (uniform routing, ``group_sizes``)."""
    import torch

    from tvm_cdna4.kernels.gemm.grouped import offsets_of

    sizes = group_sizes(G, T, seed)
    x = torch.empty((T, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty((G, N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    offsets = torch.tensor(offsets_of(sizes), dtype=torch.int32, device="cuda")
    return sizes, x, w, offsets, _reference(x, w, sizes)


def _timed(call, output, ref, methods, flops, rounds: int = 1) -> dict:
    """Validate ``call`` (its ``output()`` against ``ref``), then time it under ``methods`` (``rounds`` 0:
    validate only; the caller times it with ``_rounds``)."""
    import torch

    from tvm_cdna4.runtime import cuda as runner

    call()
    torch.cuda.synchronize()
    err = float(torch.linalg.norm(output().float() - ref) / torch.linalg.norm(ref))
    cell = {"rel_err": err, "ok": err <= runner.tolerance(DTYPE)}
    if cell["ok"] and rounds:
        _rounds({"call": call}, {"call": cell}, methods, flops, rounds)
    return cell


def _rounds(calls: dict, cells: dict, methods, flops, rounds: int) -> None:
    """Time every call of ``calls`` under each method in ``rounds`` rounds over all of them (interleaved, so
    that drifts of the clock or the board touch every contender alike); into ``cells[who][method]`` the
    median µs, its TFLOP/s and every round's µs."""
    import statistics

    from tvm_cdna4.runtime import cuda as runner

    for method in methods:
        times = {who: [] for who in calls}
        for _ in range(rounds):
            for who, call in calls.items():
                times[who].append(runner.bench_ms(call, method=method) * 1e3)
        for who, ts in times.items():
            us = statistics.median(ts)
            cells[who][method] = {"us": us, "tflops": flops / us / 1e6, "rounds_us": ts}


def measure_candidates(name, G, N, K, T, seed, arch, methods, specs, rounds=1) -> dict:
    """torch's ``_grouped_mm`` and ours with each tiling of ``specs``, each validated, then timed in
    ``rounds`` rounds over all of them (the median per contender and method kept, every round's figure in
    ``rounds_us``); the model's estimate of each (``kernels.sm80.gemm_plan.estimate`` at ``ceil(T / G)`` rows per group)
    and its own choice."""
    import torch
    import tvm_ffi

    from tvm_cdna4.runtime.cuda import DynamicKernel
    from tvm_cdna4.kernels.sm80 import gemm as cuda_gemm
    from tvm_cdna4.kernels.sm80.gemm_plan import Device, estimate
    from tvm_cdna4.kernels.gemm.grouped import rows_per_group

    sizes, x, w, offsets, ref = _problem_tensors(G, N, K, T, seed)
    c, flops, rows = torch.empty((T, N), dtype=torch.bfloat16, device="cuda"), 2 * T * N * K, rows_per_group(T, G)
    chosen = cuda_gemm.build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE, arch).plan(T).config
    row = {"problem": name, "G": G, "N": N, "K": K, "T": T, "rows_per_group": rows, "max_rows": max(sizes),
           "model_choice": spec_of(chosen), "candidates": {}}
    ends, wt, box = offsets[1:].clone(), w.transpose(-2, -1), {}

    def torch_call():
        box["out"] = torch._grouped_mm(x, wt, offs=ends)

    calls = {"torch": torch_call}
    row["torch"] = _timed(torch_call, lambda: box["out"], ref, methods, flops, rounds=0)
    packed = [tvm_ffi.from_dlpack(t) for t in (x, w, c, offsets)]
    for spec in specs:
        cfg = parse_candidate(spec)
        model_us = estimate(rows, N, K, cfg, 2, Device(), G).time_s * 1e6
        try:
            fn = DynamicKernel(cuda_gemm.build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE, arch, config=cfg)).kernel(T)
        except Exception as err:  # a tiling that does not plan or build is reported, not fatal
            row["candidates"][spec] = {"model_us": model_us, "error": f"{type(err).__name__}: {err}"}
            continue
        c.fill_(float("nan"))
        calls[spec] = lambda fn=fn: fn(*packed)
        row["candidates"][spec] = {"model_us": model_us, **_timed(calls[spec], lambda: c, ref, methods, flops, rounds=0)}
    cells = {who: row["torch"] if who == "torch" else row["candidates"][who] for who in calls}
    _rounds({who: call for who, call in calls.items() if cells[who]["ok"]}, cells, methods, flops, rounds)
    del x, w, c, ref
    torch.cuda.empty_cache()
    return row


def candidates_table(rows, methods) -> list[str]:
    lines = ["| problem | tiling | model's choice | model µs | " + " | ".join(f"{m} µs (TFLOP/s)" for m in methods)
             + " | ours / torch (" + methods[0] + ") | rel err |", "|---|---|---|---|" + "---|" * len(methods) + "---|---|"]
    for r in rows:
        torch_us = r["torch"].get(methods[0], {}).get("us")
        times = " | ".join(f"{r['torch'][m]['us']:.1f} ({r['torch'][m]['tflops']:.0f})" if m in r["torch"] else "FAIL"
                           for m in methods)
        lines.append(f"| {r['problem']} (T / G = {r['rows_per_group']}) | torch._grouped_mm | - | - | {times} | 1.00x | "
                     f"{r['torch']['rel_err']:.1e} |")
        for spec, cell in r["candidates"].items():
            if "error" in cell:
                lines.append(f"| | {spec} | {'yes' if spec == r['model_choice'] else ''} | {cell['model_us']:.0f} | "
                             + " | ".join("error" for _ in methods) + f" | - | {cell['error'][:60]} |")
                continue
            times = " | ".join(f"{cell[m]['us']:.1f} ({cell[m]['tflops']:.0f})" if m in cell else "FAIL" for m in methods)
            us = cell.get(methods[0], {}).get("us")
            ratio = f"{torch_us / us:.2f}x" if us and torch_us else "-"
            lines.append(f"| | {spec} | {'yes' if spec == r['model_choice'] else ''} | {cell['model_us']:.0f} | {times} | "
                         f"{ratio} | {cell['rel_err']:.1e} |")
    return lines


def candidates_main(args, arch, methods) -> int:
    specs = args.candidates.split(",")
    for spec in specs:
        parse_candidate(spec)  # a bad spec exits before any build
    problems = _problems(args) if args.problems else {k: v for k, v in PROBLEMS.items() if v[3] > DECODE_MAX_T}
    jobs = [("candidate", G, N, K, T, spec, arch) for G, N, K, T in problems.values() for spec in specs]
    jobs += [("grouped", G, N, K, T, False, arch) for G, N, K, T in problems.values()]  # the model's choice
    start = time.perf_counter()
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for job, seconds, err in pool.map(_build, jobs):
            print(f"built {job[:-1]} in {seconds:.0f} s" + (f": {err}" if err else ""), flush=True)
    if args.build_only:
        return 0
    rows = [measure_candidates(name, G, N, K, T, args.seed, arch, methods, specs, args.rounds)
            for name, (G, N, K, T) in problems.items()]
    lines = candidates_table(rows, methods)
    print("\n".join(lines))
    _write(args.out, "grouped_candidates", lines, {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                                   "arch": arch, "methods": methods, "seed": args.seed, "rows": rows,
                                                   "seconds": time.perf_counter() - start, "versions": _versions()})
    return 0 if all(c.get("ok") for r in rows for c in r["candidates"].values()) else 1


def _versions() -> dict:
    out = {}
    for mod in ("torch", "triton", "tvm_tirx"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = None
    return out


def _write(folder, stem, lines, data) -> None:
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{stem}.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(folder, f"{stem}.json"), "w") as f:
        json.dump(data, f, indent=1, default=str)


def _problems(args) -> dict:
    if not args.problems:
        return PROBLEMS
    wanted = args.problems.split(",")
    unknown = [p for p in wanted if p not in PROBLEMS]
    if unknown:
        raise SystemExit(f"unknown problems {unknown}; choose from {list(PROBLEMS)}")
    return {p: PROBLEMS[p] for p in wanted}


def gfx950_row(name, G, N, K, T, seed) -> dict:
    """The gfx950 estimates of one problem: the compiled kernel's (llvm-mca) and the planner's."""
    import attrs

    from tvm_cdna4.report import gpu_report, kernel_report
    from tvm_cdna4.kernels.gfx950.gemm_cost import grouped_work
    from tvm_cdna4.kernels.gfx950.gemm import build_grouped, build_plan
    from tvm_cdna4.kernels.gfx950.gemm_plan import plan_gfx950_gemm, planned_estimate

    grp = build_grouped(G, N, K, DTYPE, LAYOUT, DTYPE)
    plan = grp.plan(T)
    g = plan.grid.grouping
    static = plan_gfx950_gemm(g.rows.representative, N, K, DTYPE, LAYOUT, DTYPE, plan.config)
    planned = planned_estimate(static, groups=G)
    result = build_plan(plan)
    est = gpu_report(kernel_report(result.asm, result.kernel()), grouped_work(plan, T))
    info = result.kernel()
    return {"problem": name, "G": G, "N": N, "K": K, "T": T, "empty_groups": group_sizes(G, T, seed).count(0),
            "bucket": g.rows.describe(), "tile": list(plan.block), "waves_m": plan.config.waves_m,
            "vgprs": info.vgprs, "lds_bytes": info.lds_bytes, "planned": planned.as_dict(),
            "estimate": est.as_dict() if est else None, "config": attrs.asdict(plan.config)}


def gfx950_table(rows) -> list[str]:
    lines = ["| problem | tile (rows/group bucket) | VGPRs | estimate µs | TFLOP/s | TB/s | % of roofline | bound | "
             "planner's µs (% roof) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        e, p = r["estimate"], r["planned"]
        flops = 2 * r["T"] * r["N"] * r["K"]
        tile = "x".join(map(str, r["tile"])) + f" ({r['bucket']})"
        if e is None:
            lines.append(f"| {r['problem']} | {tile} | {r['vgprs']} | - | - | - | - | - | "
                         f"{1e6 * p['time_s']:.1f} ({100 * p['roofline_fraction']:.0f} %) |")
            continue
        lines.append(f"| {r['problem']} G={r['G']} N={r['N']} K={r['K']} T={r['T']} | {tile} | {r['vgprs']} | "
                     f"{1e6 * e['time_s']:.1f} | {flops / e['time_s'] / 1e12:.0f} | {e['hbm_bytes'] / e['time_s'] / 1e12:.2f} | "
                     f"{100 * e['roofline_fraction']:.0f} % | {e['bound']} | {1e6 * p['time_s']:.1f} "
                     f"({100 * p['roofline_fraction']:.0f} %) |")
    return lines


def gfx950_main(args) -> int:
    rows = [gfx950_row(name, *prob, args.seed) for name, prob in _problems(args).items()]
    lines = gfx950_table(rows)
    print("\n".join(lines))
    _write(args.out, "grouped_gemm_gfx950", lines, {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                                                    "seed": args.seed, "rows": rows})
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gfx950", action="store_true", help="CPU only: the gfx950 whole-GPU estimates of the problems")
    ap.add_argument("--problems", default=None, help=f"comma-separated names of {list(PROBLEMS)} (default: all)")
    ap.add_argument("--methods", default="flush,clean", help="runtime.cuda.bench_ms methods, comma-separated")
    ap.add_argument("--seed", type=int, default=0, help="routing seed")
    ap.add_argument("--candidates", nargs="?", const=",".join(CANDIDATES), default=None, metavar="SPEC,...",
                    help="time ours with these tilings (BMxBNxBK/WMxWN/STAGES[/live][/cta]; default: CANDIDATES) against the "
                         "model's choice and torch instead of the contenders (default problems: the prefill ones)")
    ap.add_argument("--build-only", action="store_true", help="--candidates: build the kernels (into the caches), "
                    "time nothing")
    ap.add_argument("--rounds", type=int, default=1, help="--candidates: timing rounds over all contenders (median kept)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    args = ap.parse_args(argv)
    return gfx950_main(args) if args.gfx950 else gpu_main(args)


if __name__ == "__main__":
    sys.exit(main())
