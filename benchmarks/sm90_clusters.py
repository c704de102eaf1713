"""The sm90 GEMM in clusters of two CTAs (``Sm90Config.cluster_m``; docs/sm90_gemm.md "Clusters") against itself
unclustered and cuBLAS, on an H100.

    python3 benchmarks/sm90_clusters.py --out $OUT [--ms 768,3000,8192] [--models ...] [--no-square]
    python3 benchmarks/sm90_clusters.py --model-only [--ms 768,3000,8192]        (no GPU: the jobs and estimates)
    python3 benchmarks/sm90_clusters.py --out $OUT --base bucket --ms 96,200 --no-square   (the torch op's configs)

For each LLM projection of ``torch_gemm.MODELS`` (bf16, ``nt``, bf16 C) at each M of ``--ms`` and for 4096^3 (also
with a fused ``residual``, unless ``--no-square``): the static kernel at the cost model's config
(``gemm.plan(problem, "sm90")``: the model's choice with the fused epilogue's choices; ``--base bucket``: the torch
op's, its dynamic-M bucket's config for M, unswapped while ``gemm_cost.WEIGH_SWAP_DYNAMIC`` is off) with ``cluster_m`` 1 (rank
``"c1"``) and 2 (``"c2"``: at the model's own width, the wave-fitting ones of 8 mod 16 too, 168 = 88 + 80 rows of B
a CTA, ``gemm_plan.b_shares``; where that config cannot run in a cluster, the row records why),
and the best-estimated clustered config (``gemm_cost.ranked(..., cluster=True)``'s first with ``cluster_m`` 2:
``"c2best"``, where it differs from ``"c2"``). Each is built in ``benchmarks/sm90_gemm.py``'s spawned pool, checked
once against torch's product (the fused residual: ``sm90_gemm.fused_error``), and timed with CUDA graphs over input
sets beyond the L2 (``sm90_gemm.timed``: ``torch_gemm._graph_seconds``) beside ``torch.mm`` (``torch.matmul``'s
kernel; for the residual, ``torch.addmm``) in the same run. Rows go to ``$OUT/sm90_clusters.json``; the table
(``$OUT/sm90_clusters.md``, printed last): per shape, c1, c2 (and c2best), cuBLAS, c2 / c1 and c1, c2 over cuBLAS;
the geometric means per M.

Each launch also records its residency (:func:`residency`): the driver's ``cuOccupancyMaxActiveClusters`` for the
kernel as built (its registers, the plan's threads and dynamic shared memory, ``clusterDim`` (``cluster_m``, 1, 1))
beside the grid's cluster count, so a run says whether the persistent grid is resident in one wave of clusters
(a grid that is not runs its last clusters after the first ones finish: a second wave). Without the driver's entry
point the row records why and the run goes on.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SQUARE = 4096


def shapes(args):
    """(label, M, N, K, residual) of the run."""
    from torch_gemm import projections

    out = [(f"{model} {proj}", M, N, K, False) for model in args.models.split(",") for proj, N, K in projections(model)
           for M in map(int, args.ms.split(","))]
    if args.square:
        out += [(f"{SQUARE}^3", SQUARE, SQUARE, SQUARE, False), (f"{SQUARE}^3 residual", SQUARE, SQUARE, SQUARE, True)]
    return out


def cluster_jobs(args):
    """The build jobs (``sm90_gemm._build``'s: key, problem args, config) of every shape: c1, c2 and c2best."""
    import attrs

    from tvm_cdna4.kernels import devices, gemm
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, epilogue_choices

    device = devices.planned("sm80") if not args.model_only else devices.DEVICES[args.device]
    todo, notes = [], {}
    for label, M, N, K, residual in shapes(args):
        fusion = Fusion(residual=True) if residual else Fusion()
        problem = gemm.GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion)
        base = gemm.plan(problem, "sm90", sms=device.units).config
        if args.base == "bucket":  # the torch op's config for M: its dynamic-M bucket's, run as a static kernel
            dynamic = gemm.build(gemm.GemmProblem(None, N, K, "bf16", "nt", "bf16", fusion), "sm90")
            base = epilogue_choices(dynamic.plan(M).config, fusion, "bf16")
        args_ = (M, N, K, "bf16", "bf16", fusion)
        todo.append(((label, M, "c1"), args_, attrs.asdict(base)))
        try:
            two = attrs.evolve(base, cluster_m=2)
            two.check(device.smem_per_unit)
            todo.append(((label, M, "c2"), args_, attrs.asdict(two)))
        except Exception as e:  # noqa: BLE001 (a ContractError: recorded)
            notes[(label, M, "c2")] = str(e)[:200]
        best = next(c for _, c in gemm_cost.ranked(M, N, K, 2, device, cluster=True) if c.cluster_m == 2)
        best = epilogue_choices(best, fusion, "bf16")  # the fused epilogue's choices, as the plan's
        if (label, M, "c2") in notes or best != attrs.evolve(base, cluster_m=2):
            todo.append(((label, M, "c2best"), args_, attrs.asdict(best)))
        for ctas in args.ctas:  # the persistent grid below the SMs: is the cluster grid resident as a whole?
            for cm in (1, 2):
                if (label, M, f"c{cm}") in notes:
                    continue
                todo.append(((label, M, f"c{cm} ctas={ctas}"), args_, attrs.asdict(attrs.evolve(base, cluster_m=cm,
                                                                                                 ctas=ctas))))
    for key, args_, cfg in todo:
        notes[key] = round(gemm_cost.estimate(Sm90Config(**cfg), *args_[:3], 2, device).total * 1e6, 2)
    return todo, notes


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
"""``CUlaunchAttributeID`` of the cluster shape (CUDA driver API, ``cuda.h``)."""
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
"""``CUfunction_attribute`` values (CUDA driver API, ``cuda.h``)."""


class _Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class _AttrValue(ctypes.Union):  # CUlaunchAttributeValue: 64 bytes, pointer-aligned
    _fields_ = [("pad", ctypes.c_char * 64), ("clusterDim", _Dim3), ("handle", ctypes.c_void_p)]


class _Attr(ctypes.Structure):  # CUlaunchAttribute: the id, padded to 8 bytes, then the value
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", _AttrValue)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_Attr)),
                ("numAttrs", ctypes.c_uint)]


def launch_config(grid: int, block: int, smem: int, cluster: int):
    """(config, attribute) of a 1-D launch of ``grid`` CTAs of ``block`` threads in clusters of ``cluster`` along x
    (the attribute returned too: the config points at it)."""
    attr = _Attr(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
    attr.value.clusterDim = _Dim3(cluster, 1, 1)
    cfg = _LaunchConfig(grid, 1, 1, block, 1, 1, smem, None, ctypes.pointer(attr), 1)
    return cfg, attr


def kernel_name(source: str) -> str:
    """The ``__global__`` function of a build's CUDA source."""
    return re.search(r"__global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(", source).group(1)


def wave_line(label: str, rank: str, r: dict) -> str:
    """One row's residency in words."""
    if "max_active_clusters" not in r:
        return f"residency {label} M={r.get('M')} {rank}: {r.get('residency', 'not measured')}"
    fits = "one wave" if r["max_active_clusters"] >= r["grid_clusters"] else "MORE THAN ONE WAVE"
    return (f"residency {label} M={r.get('M')} {rank}: grid {r['grid_clusters']} clusters of {r['cluster']}, at most "
            f"{r['max_active_clusters']} active ({fits}); {r['regs']} registers, {r['smem']} B dynamic smem")


def residency_summary(rows) -> str:
    """One line: how many timed launches were measured resident in one wave of clusters, the (grid clusters, most
    active) pairs seen, and the launches that were not measured."""
    timed_ = [r for r in rows if "us" in r]
    measured = [r for r in timed_ if "max_active_clusters" in r]
    one = sum(r["max_active_clusters"] >= r["grid_clusters"] for r in measured)
    pairs = sorted({(r["cluster"], r["grid_clusters"], r["max_active_clusters"]) for r in measured})
    seen = ", ".join(f"clusters of {c}: grid {g}, at most {a} active" for c, g, a in pairs)
    skipped = sorted({r["residency"] for r in timed_ if "max_active_clusters" not in r and "residency" in r})
    return (f"residency: {one} of {len(measured)} measured launches one wave ({seen or 'none measured'})"
            + (f"; {len(timed_) - len(measured)} not measured: {'; '.join(skipped)}" if len(measured) < len(timed_)
               else ""))


def residency(build, p) -> dict:
    """The launch's residency: ``grid_clusters`` (the plan's ``ctas`` over ``cluster_m``), ``max_active_clusters``
    (``cuOccupancyMaxActiveClusters`` of the kernel as built: its device code through the device-code cache, loaded
    with ``cuModuleLoadData``), ``regs``; or ``residency``: why it was not measured."""
    cm = p.config.cluster_m
    out = dict(cluster=cm, grid_clusters=p.ctas // cm, smem=p.smem_bytes)
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        occupancy = lib.cuOccupancyMaxActiveClusters
    except (OSError, AttributeError) as e:
        return {"residency": f"skipped: no driver entry point cuOccupancyMaxActiveClusters ({e})"}
    from tvm_cdna4.runtime.cuda import device_code_cache

    binary, fmt = device_code_cache()(build.source, build.device_config)
    binary = bytes(binary) + (b"\0" if fmt == "ptx" else b"")
    module, func, regs, n = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int(), ctypes.c_int()
    steps = [("cuModuleLoadData", lambda: lib.cuModuleLoadData(ctypes.byref(module), binary)),
             ("cuModuleGetFunction", lambda: lib.cuModuleGetFunction(ctypes.byref(func), module,
                                                                     kernel_name(build.source).encode())),
             ("cuFuncSetAttribute", lambda: lib.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                                   p.smem_bytes)),
             ("cuFuncGetAttribute", lambda: lib.cuFuncGetAttribute(ctypes.byref(regs), CU_FUNC_ATTRIBUTE_NUM_REGS, func))]
    cfg, _attr = launch_config(p.ctas, p.config.threads, p.smem_bytes, cm)
    steps.append(("cuOccupancyMaxActiveClusters", lambda: occupancy(ctypes.byref(n), func, ctypes.byref(cfg))))
    try:
        for name, call in steps:
            status = call()
            if status:
                return {**out, "residency": f"skipped: {name} returned CUresult {status}"}
    finally:
        if module.value:
            lib.cuModuleUnload(module)
    return {**out, "max_active_clusters": n.value, "regs": regs.value}


def tile(cfg: dict) -> str:
    return (f"{cfg['block_m']}x{cfg['block_n']} s{cfg['stages']}" + (" tma" if cfg["epilogue"] == "tma" else "")
            + (f"/{cfg['epilogue_tile']}" if cfg.get("epilogue_tile") else "") + (" c2" if cfg.get("cluster_m") == 2 else ""))


def run(todo, built, log):
    """Check and time every built job; the rows."""
    import torch

    from sm90_gemm import L2_BYTES, check, fused_error, fused_tensors, timed
    from tvm_cdna4.runtime.cuda import Kernel, load_build

    rows, cublas = [], {}
    for key, args_, _ in todo:
        label, M, rank = key
        N, K = args_[1], args_[2]
        row = dict(shape=label, M=M, N=N, K=K, rank=rank)
        value = built[key]
        if isinstance(value, str):
            rows.append({**row, "error": value})
            continue
        p, b, _, cfg = value
        kernel = Kernel(load_build(b), p)
        per = (M * K + N * K + (M * N if p.fusion.residual else 0)) * 2
        sets = max(2, min(64, -(-3 * L2_BYTES // per)))
        a = [torch.randn(M, K, device="cuda").to(torch.bfloat16) for _ in range(sets)]
        w = [torch.randn(N, K, device="cuda").to(torch.bfloat16) for _ in range(sets)]
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        if p.fusion.residual:
            inputs = fused_tensors(p, M, N, sets)
            kernel.launch(a[0], w[0], c, inputs[0]["residual"])
            torch.cuda.synchronize()
            err = fused_error(p, a[0], w[0], c, inputs[0])
            ok = err <= 1e-2 and not torch.isnan(c.float()).any().item()
            ours = timed(lambda i: kernel.launch(a[i], w[i], c, inputs[i]["residual"]), sets)
            theirs = cublas.get((label, M)) or timed(lambda i: torch.addmm(inputs[i]["residual"], a[i], w[i].t(), out=c),
                                                      sets)
        else:
            ok, err = check(kernel, p, (M, N, K, "bf16", "bf16"), log)
            ours = timed(lambda i: kernel.launch(a[i], w[i], c), sets)
            theirs = cublas.get((label, M)) or timed(lambda i: torch.mm(a[i], w[i].t(), out=c), sets)
        cublas[(label, M)] = theirs
        rows.append({**row, "config": cfg, "ok": ok, "err": err, "us": ours * 1e6, "cublas_us": theirs * 1e6,
                     **residency(b, p)})
        print(json.dumps(rows[-1]), flush=True)
        print(wave_line(label, rank, rows[-1]), flush=True)
        torch.cuda.empty_cache()
    return rows


def summary(rows) -> list[str]:
    """Per shape: c1, c2, c2best (us, tile), cuBLAS, c2 / c1 (speed-up), c1 and the best clustered over cuBLAS; the
    geometric means per M."""
    shapes_ = {}
    for r in rows:
        shapes_.setdefault((r["shape"], r["M"]), {})[r["rank"]] = r
    lines = ["| shape | M | c1 | c2 | c2best | cuBLAS us | c1/c2 | cuBLAS/c1 | cuBLAS/best c2 |",
             "|---|---|---|---|---|---|---|---|---|"]
    by_m = {}
    for (label, M), got in shapes_.items():
        def cell(rank):
            r = got.get(rank)
            if r is None:
                return "-", None
            if "us" not in r or not r["ok"]:
                return "FAIL" if "us" in r else "not built", None
            return f"{r['us']:.1f} ({tile(r['config'])})", r["us"]
        (c1, t1), (c2, t2), (cb, tb) = cell("c1"), cell("c2"), cell("c2best")
        ref = next((r["cublas_us"] for r in got.values() if "cublas_us" in r), None)
        best2 = min([t for t in (t2, tb) if t], default=None)
        ratio = lambda x, y: f"{x / y:.3f}" if x and y else "-"  # noqa: E731
        lines.append(f"| {label} | {M} | {c1} | {c2} | {cb} | {ref:.1f} | {ratio(t1, best2)} | {ratio(ref, t1)} | "
                     f"{ratio(ref, best2)} |" if ref else f"| {label} | {M} | {c1} | {c2} | {cb} | - | - | - | - |")
        if ref and t1 and best2:
            by_m.setdefault(M, []).append((ref / t1, ref / best2, ref / min(t1, best2)))
    lines += ["", "| M | shapes | geo-mean cuBLAS/c1 | cuBLAS/best c2 | cuBLAS/best of both |", "|---|---|---|---|---|"]
    for M, vals in sorted(by_m.items()):
        geo = [math.exp(sum(math.log(v[i]) for v in vals) / len(vals)) for i in range(3)]
        lines.append(f"| {M} | {len(vals)} | {geo[0]:.3f} | {geo[1]:.3f} | {geo[2]:.3f} |")
    return lines


def parser(ms: str, printed: str) -> argparse.ArgumentParser:
    """The options of this script and of ``sm90_order.py``: ``--ms`` defaults to ``ms``; ``--model-only`` prints the
    jobs and their ``printed`` (what the model says of each)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--models", default="qwen2.5-7b,gemma-2-9b,phi-3-medium")
    ap.add_argument("--ms", default=ms)
    ap.add_argument("--no-square", dest="square", action="store_false", help="leave out 4096^3 (and its residual)")
    ap.add_argument("--model-only", action="store_true", help=f"print the jobs and their {printed}; time nothing")
    ap.add_argument("--device", default="H100", help="with --model-only: the DeviceSpec (kernels.devices.DEVICES)")
    ap.add_argument("--workers", type=int, default=min(14, os.cpu_count() or 1))
    ap.add_argument("--build-s", type=float, default=600)
    return ap


def main(argv=None) -> int:
    ap = parser("768,3000,8192", "estimates")
    ap.add_argument("--base", choices=("static", "bucket"), default="static",
                    help="c1's config: the static plan's (default) or the torch op's dynamic-M bucket's for M")
    ap.add_argument("--ctas", type=lambda v: [int(x) for x in v.split(",") if x], default=[],
                    help="also time c1 and c2 with these persistent grids (even counts), e.g. 120,64")
    args = ap.parse_args(argv)
    todo, notes = cluster_jobs(args)
    if args.model_only:
        for key, _, cfg in todo:
            print(key, tile(cfg), notes[key], "us (estimate)")
        for key, why in notes.items():
            if isinstance(why, str):
                print(key, "not run:", why)
        return 0
    import torch

    from sm90_gemm import build_all

    built = build_all(todo, args.workers, args.build_s)
    with open(os.path.join(args.out, "sm90_clusters_checks.jsonl"), "w") as log:
        rows = run(todo, built, log)
    for key, why in notes.items():
        if isinstance(why, str):
            rows.append(dict(shape=key[0], M=key[1], rank=key[2], error=why))
    device = torch.cuda.get_device_name()
    with open(os.path.join(args.out, "sm90_clusters.json"), "w") as f:
        json.dump({"device": device, "rows": rows}, f, indent=1)
    table = summary(rows)
    with open(os.path.join(args.out, "sm90_clusters.md"), "w") as f:
        f.write("\n".join([device, "", *table, "", residency_summary(rows), "",
                            *(wave_line(r["shape"], r["rank"], r) for r in rows if "us" in r), ""]))
    print(*table, sep="\n")
    print(residency_summary(rows))
    for r in rows:
        if "ctas=" in r["rank"] and "us" in r:
            print(f"{r['shape']} M={r['M']} {r['rank']}: {r['us']:.1f} us (cuBLAS {r['cublas_us']:.1f}) ok={r['ok']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
