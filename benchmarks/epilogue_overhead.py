"""The fused epilogue on the H200 (issue 25): its cost against the plain GEMM, and its numpy-validated table.

    python3 benchmarks/epilogue_overhead.py --out $OUT                    # the overhead table
    python3 benchmarks/epilogue_overhead.py --validate-table --out $OUT   # the validated table

**Overhead** (default): per shape (``SHAPES``: 4096^3, and the Llama-3-8B qkv and down projections
at M = 1 and 16; bf16 in and out, layout nt) the plain GEMM and the fused ones (``FUSIONS``: bias +
silu + residual + row and column scales; bias + gelu), all on the planner's tiling of the plain
problem (``kernels.sm80.gemm.choose_config``: the same kernel but for its epilogue). Each kernel is first
validated (the plain one against the f32 product, ``runtime.cuda.check_output``; a fused one on
``runtime.cuda.grid_inputs``, its product exact, against ``kernels.gemm.epilogue.reference`` within
``error_bound``: ``runtime.cuda.check_fused``; C poisoned with NaN first), then timed on U(-1, 1)
operands (the same for every variant: tensor-core power depends on the data) with
``runtime.cuda.bench_ms`` (``--method``, default ``flush``: the L2 flushed before each call), in
``--rounds`` rounds over all variants of a shape, the median per variant kept. Overhead =
fused / plain - 1. Output: a markdown table on stdout and ``$OUT/epilogue_overhead.md``, every
figure in ``$OUT/epilogue_overhead.json``.

**Validated table** (``--validate-table``): every fusion of ``TABLE_FUSIONS`` (each step alone, all
together, bias + gelu) x dtype {f16, bf16} (C in the input dtype) x layout {nn, nt, tn, tt} at the
odd shape ``TABLE_SHAPE`` (the planner's tiling), plus the decode shapes ``DECODE_SHAPES`` (bf16,
nt: the decode kernel) with the two fusions of ``FUSIONS``, plus ``TILE_CASES`` (the 128-row tile,
odd N, split-K atomic and ordered); each row the largest error / bound and OK / FAIL. Output: ``$OUT/epilogue_validate.md`` and ``.json``; exit status 1 if a row fails.
``tests/kernels/sm80/test_cuda_epilogue.py`` runs the same table as a GPU test.

Kernels build in parallel worker processes (``--jobs``) from the work tree with only TIRx, torch and
Triton installed (``kernels.sm80.gemm._sched``: the CUDA schedule and runtime only).
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

import cuda_gemm as cg  # noqa: E402  (the work tree's CUDA schedule and runtime: cg._sched())

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git

SHAPES = [("4096^3", 4096, 4096, 4096), ("8b.qkv", 1, 6144, 4096), ("8b.down", 1, 4096, 14336),
          ("8b.qkv", 16, 6144, 4096), ("8b.down", 16, 4096, 14336)]
"""(name, M, N, K) of the overhead table (bf16, nt, bf16 out)."""

FUSIONS = {
    "all": dict(bias=True, activation="silu", residual=True, row_scale=True, col_scale=True),
    "bias+gelu": dict(bias=True, activation="gelu"),
}
"""The fused variants timed against the plain GEMM (``kernels.gemm.epilogue.Fusion`` fields)."""

TABLE_FUSIONS = {
    "row_scale": dict(row_scale=True), "col_scale": dict(col_scale=True), "bias": dict(bias=True),
    "relu": dict(activation="relu"), "silu": dict(activation="silu"), "gelu": dict(activation="gelu"),
    "residual": dict(residual=True), **FUSIONS,
}
"""Each step alone, then ``FUSIONS``: the fusions of the validated table."""

TABLE_SHAPE = (129, 250, 200)
"""The table's odd shape (M, N, K): M and N not multiples of any tile, K not of a k-tile."""

DECODE_SHAPES = [(1, 4096, 4096), (5, 1000, 4104), (16, 4095, 2056)]
"""Decode-kernel shapes of the validated table (bf16, nt; odd N and K included)."""

_SPLIT = dict(block_m=32, block_n=128, block_k=64, warps_m=1, warps_n=4, stages=3, split_k=4)
TILE_CASES = [
    dict(fusion="all", dtype="bf16", layout="tn", M=1000, N=1000, K=1000, config=None),  # 128-row tiles
    dict(fusion="all", dtype="f16", layout="nn", M=129, N=251, K=200, config=None),  # odd N: element stores
    dict(fusion="all", dtype="f16", layout="nt", M=33, N=1000, K=2048, config=dict(_SPLIT, reduction="atomic")),
    dict(fusion="bias+gelu", dtype="bf16", layout="tt", M=33, N=1000, K=2048,
         config=dict(_SPLIT, reduction="ordered", reduce_vector=2)),
]
"""More rows of the validated table: the planner's big tile, odd N, split-K (atomic and ordered) with
the fusion applied by each tile's last CTA (``config``: a ``GemmConfig`` as a dict, None: the planner's)."""

LAYOUTS = ("nn", "nt", "tn", "tt")


def table_cases() -> list[dict]:
    """The validated table's rows: (fusion name, dtype, layout) at ``TABLE_SHAPE``, then the decode shapes."""
    M, N, K = TABLE_SHAPE
    cases = [dict(fusion=name, dtype=dt, layout=lay, M=M, N=N, K=K)
             for name in TABLE_FUSIONS for dt in ("f16", "bf16") for lay in LAYOUTS]
    cases += [dict(fusion=name, dtype="bf16", layout="nt", M=M, N=N, K=K)
              for M, N, K in DECODE_SHAPES for name in FUSIONS]
    return cases + TILE_CASES


def _fusion(spec: dict | None):
    from tvm_cdna4.kernels.gemm.epilogue import Fusion

    return Fusion(**(spec or {}))


def _build(job):
    """Worker: build, export and precompile one kernel; (key, path, config dict, error)."""
    key, (M, N, K, dtype, layout), config, fusion, arch, workdir = job
    try:
        gemm, runner = cg._sched()
        cfg = gemm.config_from_dict(config) if config else None
        exe = gemm.build(M, N, K, dtype, layout, dtype, cfg, arch=arch, fusion=_fusion(fusion))
        path = os.path.join(workdir, key.replace("/", "_") + ".so")  # a persistent form's key holds "/p<ctas>"
        exe.export_library(path)
        runner.precompile(exe)
        return key, path, exe.config.as_dict(), None
    except Exception as e:  # report, don't crash the run
        return key, None, None, f"{type(e).__name__}: {e}"


def build_all(jobs: list, workers: int, log) -> dict:
    """{key: (path or None, config dict)} of every job, built in ``workers`` processes."""
    log(f"building {len(jobs)} kernels on {workers} workers")
    out = {}
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        for key, path, config, err in pool.map(_build, jobs):
            out[key] = (path, config)
            if err:
                log(f"BUILD FAIL {key}: {err}")
    log("built")
    return out


def load(path, M, N, K, dtype, layout, config, fusion):
    """A built kernel loaded as ``runtime.cuda.Kernel`` (its plan carries the fusion)."""
    gemm, runner = cg._sched()
    return runner.Kernel(runner.load_kernel(path),
                         gemm.plan(M, N, K, dtype, layout, dtype, gemm.config_from_dict(config), fusion=fusion))


def validate(fn, M, N, K, dtype, layout, fusion, seed=0) -> tuple[float, bool]:
    """A loaded kernel against numpy: the plain GEMM's relative error (``check_output``), a fused one's
    largest error / bound on exact products (``grid_inputs``, ``check_fused``)."""
    import numpy as np

    _, runner = cg._sched()
    rng = np.random.default_rng(seed)
    if fusion.empty:
        a, b = runner.random_inputs(M, N, K, dtype, layout, rng)
        return runner.check_output(runner.run_numpy(fn, a, b, M, N, dtype), runner.reference(a, b, layout), dtype)
    a, b = runner.grid_inputs(M, N, K, dtype, layout, rng)
    inputs = runner.fused_inputs(fusion, M, N, dtype, rng)
    return runner.check_fused(runner.run_numpy(fn, a, b, M, N, dtype, inputs), a, b, layout, fusion, inputs, dtype)


# ---- the validated table -------------------------------------------------------------------------


def validate_table(arch: str, workers: int, log, cases=None) -> list[dict]:
    """Build and validate ``cases`` (default ``table_cases()``); one row each: the case, the kernel's
    config and kind, the error ratio (``validate``) and ``ok``."""
    cases = cases or table_cases()
    workdir = tempfile.mkdtemp(prefix="epilogue_validate_")
    jobs = [(f"v{i}", (c["M"], c["N"], c["K"], c["dtype"], c["layout"]), c.get("config"), TABLE_FUSIONS[c["fusion"]],
             arch, workdir) for i, c in enumerate(cases)]
    built = build_all(jobs, workers, log)
    rows = []
    for i, c in enumerate(cases):
        path, config = built[f"v{i}"]
        row = dict(c, config=config, error=None, ok=False)  # the config built (the planner's where None)
        if path is not None:
            fusion = _fusion(TABLE_FUSIONS[c["fusion"]])
            fn = load(path, c["M"], c["N"], c["K"], c["dtype"], c["layout"], config, fusion)
            err, ok = validate(fn, c["M"], c["N"], c["K"], c["dtype"], c["layout"], fusion, seed=i)
            row.update(error=err, ok=bool(ok))
        rows.append(row)
        log(f"{c['fusion']:>10} {c['dtype']:>4} {c['layout']} {c['M']}x{c['N']}x{c['K']}: "
            f"{row['error']} {'OK' if row['ok'] else 'FAIL'}")
    return rows


def kind_cell(config: dict | None) -> str:
    if not config:
        return "–"
    if config.get("kind") == "decode":
        return f"decode {16 * config['row_tiles']}r / {config['split_k']}"
    return f"{config['block_m']}x{config['block_n']} / {config['split_k']}"


def validate_lines(rows) -> list[str]:
    out = ["| epilogue | dtype | layout | M x N x K | kernel (tile / split) | error / bound | |", "|" + "---|" * 7]
    for r in rows:
        err = "–" if r["error"] is None else f"{r['error']:.3f}"
        out.append(f"| {r['fusion']} | {r['dtype']} | {r['layout']} | {r['M']}x{r['N']}x{r['K']} | "
                   f"{kind_cell(r['config'])} | {err} | {'OK' if r['ok'] else 'FAIL'} |")
    return out


# ---- the overhead table --------------------------------------------------------------------------


def forms_of(cfg: dict, ctas: tuple[int, ...], residual_stage: bool = False) -> dict:
    """``{suffix: config}``: the planner's config (suffix ""), and for a tile kernel its persistent form
    with each ``ctas`` > 0 (suffix ``/p<ctas>``; ``GemmConfig.ctas``) and, with ``residual_stage``, the
    residual through shared memory (suffix ``/rs``; ``GemmConfig.residual_stage``)."""
    out = {"": cfg}
    if cfg.get("kind", "tile") == "tile":
        out.update({f"/p{n}": dict(cfg, ctas=n) for n in ctas if n > 0})
        if residual_stage:
            out["/rs"] = dict(cfg, residual_stage=True)
    return out


def overhead_jobs(arch: str, workdir: str, shapes=SHAPES, ctas: tuple[int, ...] = (), fusions=tuple(FUSIONS),
                  residual_stage: bool = False) -> list:
    """One build per (shape, form, variant): the plain GEMM (``None``) and each of ``fusions`` (names of
    ``TABLE_FUSIONS``), all on the planner's config of the plain problem (and its persistent forms:
    ``forms_of``)."""
    gemm, _ = cg._sched()
    jobs = []
    for name, M, N, K in shapes:
        cfg = gemm.choose_config(M, N, K, "bf16", "nt", "bf16").as_dict()
        for suffix, form in forms_of(cfg, ctas, residual_stage).items():
            for variant in (None, *fusions):
                jobs.append((f"{name}_{M}_{variant or 'plain'}{suffix}", (M, N, K, "bf16", "nt"), form,
                             TABLE_FUSIONS.get(variant), arch, workdir))
    return jobs


def time_shape(name, M, N, K, built, args, log) -> dict:
    """Validate, then time every variant (and form: ``forms_of``) of one shape in ``args.rounds`` rounds
    over all of them; µs per variant."""
    import numpy as np
    import torch

    _, runner = cg._sched()
    a = torch.empty((M, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    w = torch.empty((N, K), dtype=torch.bfloat16, device="cuda").uniform_(-1, 1)
    c = torch.empty((M, N), dtype=torch.bfloat16, device="cuda")
    row = dict(name=name, M=M, N=N, K=K, us={}, error={}, ok={})
    launches = {}
    keys = [k[len(f"{name}_{M}_"):] for k in built if k.startswith(f"{name}_{M}_")]
    for variant in keys:
        path, config = built[f"{name}_{M}_{variant}"]
        if path is None:
            continue
        fusion = _fusion(TABLE_FUSIONS.get(variant.split("/")[0]))
        fn = load(path, M, N, K, "bf16", "nt", config, fusion)
        err, ok = validate(fn, M, N, K, "bf16", "nt", fusion)
        row["error"][variant], row["ok"][variant] = err, bool(ok)
        row.setdefault("configs", {})[variant] = config
        if variant == "plain":
            row["config"] = config
        if not ok:
            log(f"WRONG {name} M={M} {variant}: {err}")
            continue
        launches[variant] = runner.Launcher(fn, a, w, c, runner.torch_inputs(fusion, M, N, "bf16"))
    times = {v: [] for v in launches}
    for _ in range(args.rounds):
        for v, launch in launches.items():
            times[v].append(runner.bench_ms(launch, warmup_ms=10, rep_ms=args.rep_ms, method=args.method) * 1e3)
    row["us"] = {v: float(np.median(t)) for v, t in times.items()}
    row["rounds_us"] = times
    return row


def overhead_lines(rows, fusions=tuple(FUSIONS)) -> list[str]:
    """One line per shape and form: the plain GEMM's µs, each fusion's µs and its overhead against the
    plain GEMM of the same form, and (a persistent form) against the planner's plain kernel."""
    head = " | ".join(f"{v} µs (overhead)" for v in fusions)
    out = [f"| shape | M x N x K | kernel (tile / split) | plain µs | {head} |", "|" + "---|" * (4 + len(fusions))]
    for r in rows:
        base = r["us"].get("plain")
        for suffix in sorted({k[len(k.split("/")[0]):] for k in r["us"]}):
            plain = r["us"].get("plain" + suffix)
            cells = []
            for v in fusions:
                t = r["us"].get(v + suffix)
                cell = "–" if t is None or plain is None else f"{t:.1f} ({100 * (t / plain - 1):+.1f} %"
                if suffix and t is not None and base:
                    cell += f"; {100 * (t / base - 1):+.1f} % against the plain kernel"
                cells.append(cell if cell == "–" else cell + ")")
            kernel = kind_cell((r.get("configs") or {}).get("plain" + suffix, r.get("config"))) + suffix
            out.append(f"| {r['name']} | {r['M']}x{r['N']}x{r['K']} | {kernel} | "
                       f"{'–' if plain is None else f'{plain:.1f}'} | " + " | ".join(cells) + " |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--validate-table", action="store_true", help="the numpy-validated table instead of the timing")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds over all variants of a shape (median kept)")
    ap.add_argument("--rep-ms", type=int, default=100, help="bench_ms repetition time per call")
    ap.add_argument("--method", default="flush", choices=("flush", "clean", "warm"), help="runtime.cuda.bench_ms method")
    ap.add_argument("--shapes", default=None, help=f"comma-separated names of the overhead table's shapes "
                    f"(default: all of {sorted({s[0] for s in SHAPES})})")
    ap.add_argument("--fusions", default=",".join(FUSIONS), help="the overhead table's fused variants: names of "
                    f"{list(TABLE_FUSIONS)}")
    ap.add_argument("--ctas", default="", help="also time the persistent form of tile kernels with these CTA counts "
                    "(comma-separated, e.g. 132: GemmConfig.ctas)")
    ap.add_argument("--residual-stage", action="store_true", help="also time the tile kernels with the residual "
                    "through shared memory (GemmConfig.residual_stage: the /rs form)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--arch", default=None, help="default: the GPU's (sm_90 on the H200)")
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    args = ap.parse_args(argv)
    _, runner = cg._sched()
    ok, why = runner.have_cuda_gpu()
    if not ok:
        print(f"error: needs an NVIDIA GPU ({why})", file=sys.stderr)
        return 2
    args.arch = args.arch or runner.device_arch()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()

    def log(msg):
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    if args.validate_table:
        rows = validate_table(args.arch, args.jobs, log)
        stem, lines = "epilogue_validate", validate_lines(rows)
        status = 0 if all(r["ok"] for r in rows) else 1
    else:
        shapes = [s for s in SHAPES if args.shapes is None or s[0] in args.shapes.split(",")]
        ctas = tuple(int(n) for n in args.ctas.split(",") if n)
        fusions = tuple(args.fusions.split(","))
        unknown = [f for f in fusions if f not in TABLE_FUSIONS]
        if unknown:
            raise SystemExit(f"--fusions {unknown}: choose from {list(TABLE_FUSIONS)}")
        built = build_all(overhead_jobs(args.arch, tempfile.mkdtemp(prefix="epilogue_overhead_"), shapes, ctas,
                                        fusions, args.residual_stage), args.jobs, log)
        rows = []
        for name, M, N, K in shapes:
            rows.append(time_shape(name, M, N, K, built, args, log))
            log(f"{name} M={M}: {rows[-1]['us']}")
        stem, lines = "epilogue_overhead", overhead_lines(rows, fusions)
        status = 0 if all(all(r["ok"].values()) and len(r["ok"]) >= 1 + len(fusions) for r in rows) else 1
    print("\n".join(lines))
    with open(os.path.join(args.out, stem + ".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, stem + ".json"), "w") as f:
        json.dump(dict(arch=args.arch, method=args.method, seconds=time.time() - t0, rows=rows), f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
