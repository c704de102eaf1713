"""The sm90 grouped GEMM's configs timed one by one on the prefill shapes of ``torch_grouped_sm90.py``: the data
``gemm_cost.grouped_estimate`` is checked and refitted against.

    python3 benchmarks/torch_grouped_sm90.py --sweep --out $OUT            # both models, the prefill counts
    python3 benchmarks/grouped_sm90_sweep.py --models mixtral-8x7b --tokens 8192 --top 3 --out $OUT
    # the buckets GROUPED_ONE_CONSUMER moved (24, 48, 100 and 200 rows per group; docs/grouped_gemm.md)
    python3 benchmarks/grouped_sm90_sweep.py --models qwen3-30b-a3b --tokens 384,768,1600 --top 2 --out $OUT
    python3 benchmarks/grouped_sm90_sweep.py --models mixtral-8x7b --tokens 96,192,400,800 --top 2 --out $OUT

For every prefill shape (model, projection, token count; the same skewed routing as ``torch_grouped_sm90.py``,
``sizes``, the same seeds) the configs (``configs``): the grouped cost model's first ``--top`` at the shape's
rows per group (``gemm_cost.grouped_ranked``), the one the shape's bucket plans (``grouped_plan.plan_bucket``:
over the bucket's range of rows), the best with C stored from registers (the TMA-store claim's baseline), and the
model's first with ``group_m`` x2 (the tile order's L2 reuse: few large experts), and the best-ranked two-consumer,
64x256 and 64x128 one-consumer configs (``ONE_OR_TWO``). A decode count given to
``--tokens`` (e.g. Mixtral's 64 tokens: 16 rows per group, where the bucket keeps the sm80 grouped kernel) times
the sm90 kernel's configs there, the evidence for ``grouped_plan.DECODE_ROWS``. Each config is a static plan
(``gemm.build(problem, "sm90", config)``: that tiling for every bucket), built in ``--jobs`` spawned workers,
launched directly (``runtime.cuda.DynamicKernel``), checked once against the f32 product (C poisoned with NaN;
``runtime.cuda.tolerance("bf16")``), and timed in a CUDA graph of ``--calls`` calls over weight copies that
exceed three L2s (``torch_gemm._graph_seconds``), ``torch._grouped_mm`` beside it once per shape. Output: a
markdown table (per shape: each config's time, the model's estimate, its rank) in ``$OUT/grouped_sm90_sweep.md``
and every figure, with the group sizes and each config's estimate terms, in ``$OUT/grouped_sm90_sweep.json``.

``--walks`` (issue 36: the prefix walk, ``Sm90Config.tile_walk``) times, per prefill shape, the plan the torch op ran
before it (``old_plan``: the gaps walk, main at 258f349's plans) and the plan it runs now (``plan_bucket`` of the torch
op's bucket: the prefix walk), the model's first two configs and its first of two consumers at the shape's rows per
group, and the new plan's tiling on the dense kernel of M = T (``DENSE``: the per-unit time without groups), beside
``torch._grouped_mm``; output ``$OUT/grouped_sm90_walks.{md,json}`` (each row's busiest CTA's units and µs per unit)
with a per-shape summary (torch / old, torch / new). ``--plans`` prints the configs (and their estimates and the
busiest CTA's units on each walk, ``busiest_units``) without a GPU:

    python3 benchmarks/grouped_sm90_sweep.py --walks --calls 10 --reps 10 --out $OUT    # one H100 call, <= 120 s
    python3 benchmarks/grouped_sm90_sweep.py --walks --plans                             # no GPU
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.append(path)  # after PYTHONPATH: a package given there is the one measured

from torch_gemm import write_results  # noqa: E402
from torch_grouped_sm90 import MODELS, PREFILL, itertools_accumulate, projections, sizes  # noqa: E402

DENSE = "dense, M = T"
"""``--walks``' reference row: the new plan's tiling on the dense kernel (M = T rows times one expert's weights, no
groups): the per-unit time the grouped kernel's units are compared with (``unit_us``: µs per busiest-CTA unit)."""
ONE_OR_TWO = (("best two consumers", lambda c: c.consumers == 2),
              ("best 64x256 c1", lambda c: (c.block_m, c.block_n, c.consumers) == (64, 256, 1)),
              ("best 64x128 c1", lambda c: (c.block_m, c.block_n, c.consumers) == (64, 128, 1)))
"""The one- and two-consumer tiles every shape of the sweep times beside the model's first (``configs``): the evidence
for ``gemm_cost.GROUPED_ONE_CONSUMER`` (the plans it moved at 17-256 rows per group were these 64-row tiles)."""
CONFIG_FIELDS = ("block_m", "block_n", "stages", "consumers", "group_m", "epilogue", "epilogue_tile", "tile_walk")


def config_dict(cfg) -> dict:
    return {f: getattr(cfg, f) for f in CONFIG_FIELDS}


def config_name(cfg) -> str:
    return (f"{cfg.block_m}x{cfg.block_n} s{cfg.stages} c{cfg.consumers} g{cfg.group_m} {cfg.epilogue}"
            + (f"/{cfg.epilogue_tile}" if cfg.epilogue_tile else "") + f" {cfg.tile_walk}")


def configs(G: int, N: int, K: int, T: int, top: int) -> list[tuple[str, object]]:
    """(why, config) of one shape (the module docstring), each config once, the model's ranking first."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.gemm.grouped import row_bucket_table, rows_per_group
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.grouped_plan import Sm90GroupedPlan, plan_bucket

    dev = devices.DEVICES["H100"]
    rows = rows_per_group(T, G)
    ranked = gemm_cost.grouped_ranked(rows, G, N, K, 2, dev)
    bucket = next(b for b in row_bucket_table(T, G) if b.lo <= rows <= b.hi)
    out = [(f"model #{i + 1}", cfg) for i, (_, cfg) in enumerate(ranked[:top])]
    planned = plan_bucket(bucket, G, N, K, "bf16", "bf16", dev)
    if isinstance(planned, Sm90GroupedPlan):  # a decode bucket's (<= DECODE_ROWS rows per group) is sm80's
        out.append(("bucket plan", planned.config))
    out.append(("best registers", next(cfg for _, cfg in ranked if cfg.epilogue == "registers")))
    out.append(("model #1 group_m x2", attrs.evolve(ranked[0][1], group_m=2 * ranked[0][1].group_m)))
    for why, keep in ONE_OR_TWO:
        out.append((why, next(cfg for _, cfg in ranked if keep(cfg))))
    seen, unique = set(), []
    for why, cfg in out:
        if cfg not in seen:
            seen.add(cfg)
            unique.append((why, cfg))
    return unique


def torch_bucket_plan(G: int, N: int, K: int, T: int):
    """The config the torch op runs at T (``tvm_cdna4.torch.grouped_gemm``: the grouped GEMM of the whole int32 range
    of T, its bucket of ``ceil(T / G)`` rows per group planned by ``grouped_plan.plan_bucket``)."""
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.gemm.problem import GemmProblem
    from tvm_cdna4.kernels.sm90.gemm_target import build
    from tvm_cdna4.kernels.sm90.grouped_plan import plan_bucket

    bucket = build(GemmProblem(None, N, K, "bf16", "nt", "bf16", groups=G)).bucket(T)
    return plan_bucket(bucket, G, N, K, "bf16", "bf16", devices.DEVICES["H100"]).config


def old_plan(G: int, N: int, K: int, T: int):
    """The torch op's config before the prefix walk: ``torch_bucket_plan``'s tiling on the gaps walk, its ring as
    deep as the shared memory without the prefix's words (main at 258f349 planned exactly these at the eight
    prefill rows on the H100 until ``gemm_cost.GROUPED_ONE_CONSUMER`` moved Qwen3-30B-A3B's two 2048-token rows off
    its one-consumer 64x256 and 64x128 tiles: those two ran in
    ``benchmarks/runs/grouped_sm90_walks_h100_2026-12-06g.json``)."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    cfg = torch_bucket_plan(G, N, K, T)
    stages = gemm_cost.deepest(cfg.block_m, cfg.block_n, cfg.consumers, devices.DEVICES["H100"].smem_per_unit,
                               -(-K // 64), cfg.epilogue, cfg.epilogue_tile)
    return attrs.evolve(cfg, tile_walk="gaps", stages=stages)


def walk_configs(G: int, N: int, K: int, T: int) -> list[tuple[str, object]]:
    """(why, config) of ``--walks`` (the module docstring), each config once: the old plan, the new plan (the old
    tiling on the prefix walk where the choice kept it), the model's first two configs and its first with two
    consumer warpgroups at the shape's rows per group (not over the bucket's range: the one-consumer 64-row tiles a
    65-128 rows bucket plans measured 1.2x slower than 128x256 at 128 rows, docs/grouped_gemm.md), and the new
    plan's tiling on the dense kernel (``DENSE``)."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.gemm.grouped import rows_per_group
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import BARRIER_BYTES, prefix_bytes

    dev = devices.DEVICES["H100"]
    old, new = old_plan(G, N, K, T), torch_bucket_plan(G, N, K, T)
    ranked = gemm_cost.grouped_ranked(rows_per_group(T, G), G, N, K, 2, dev)
    out = [("old plan", old), ("new plan", new), ("model #1", ranked[0][1]), ("model #2", ranked[1][1]),
           ("best two consumers", next(cfg for _, cfg in ranked if cfg.consumers == 2)),
           (DENSE, attrs.evolve(new, tile_walk="gaps"))]
    fits = lambda c: (c.stages * c.stage_bytes() + c.staging_bytes() + prefix_bytes(G, c.tile_walk)  # noqa: E731
                      + BARRIER_BYTES <= dev.smem_per_unit)
    seen, unique = set(), []
    for why, cfg in out:
        if (why == DENSE, cfg) not in seen and fits(cfg):
            seen.add((why == DENSE, cfg))
            unique.append((why, cfg))
    return unique


def busiest_units(rows: list[int], G: int, N: int, cfg, sms: int) -> tuple[int, float]:
    """The units with rows the busiest persistent CTA runs on ``cfg``'s walk (the kernel's order: ``Sm90Plan.tile_of``
    over the walked row tiles, CTA ``u % ctas`` taking unit ``u``), and the even share (units with rows / CTAs)."""
    from tvm_cdna4.kernels.common import ceil_div
    from tvm_cdna4.kernels.gemm.dynamic_m import MBucket
    from tvm_cdna4.kernels.gemm.grouped import Groups, offsets_of
    from tvm_cdna4.kernels.sm90.grouped_plan import prefix_tiles

    offsets, tn = offsets_of(rows), ceil_div(N, cfg.block_n)
    groups, with_rows = Groups(G, cfg.block_m, MBucket(1, 1)), prefix_tiles(offsets_of(rows), cfg.block_m)[-1]
    tm = with_rows if cfg.tile_walk == "prefix" else groups.row_tiles(sum(rows))
    ctas, per = min(tm * tn, sms), cfg.group_m * tn
    load = [0] * ctas
    for u in range(tm * tn):
        first = u // per * cfg.group_m
        r = first + u % per % min(tm - first, cfg.group_m)
        if cfg.tile_walk == "prefix" or groups.locate(r, offsets) is not None:
            load[u % ctas] += 1
    return max(load), with_rows * tn / ctas


def print_plans(args) -> int:
    """``--plans``: every shape's configs, their estimates and ``busiest_units`` on the H100's SMs (no GPU)."""
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    dev = devices.DEVICES["H100"]
    for model, proj, G, N, K, tokens, rows in cases(args):
        T = sum(rows)
        pick = walk_configs if args.walks else (lambda *a: configs(*a, args.top))
        print(f"{model} {proj} tokens={tokens} T={T}: {-(-T // G)} rows per group, largest {max(rows)}, "
              f"empty {rows.count(0)}")
        for why, cfg in pick(G, N, K, T):
            if why == DENSE:
                est = gemm_cost.estimate(cfg, T, N, K, 2, dev).total * 1e6
                tiles = -(-T // cfg.block_m) * -(-N // cfg.block_n)
                busy, even = -(-tiles // min(tiles, dev.units)), tiles / min(tiles, dev.units)
            else:
                est = gemm_cost.grouped_estimate(cfg, -(-T // G), G, N, K, 2, dev).total * 1e6
                busy, even = busiest_units(rows, G, N, cfg, dev.units)
            print(f"  {config_name(cfg):36s} {why:24s} est {est:8.1f} us, busiest CTA {busy} units (even {even:.1f})")
    return 0


def walk_summary(rows) -> list[str]:
    """Per shape: the old and new plans' times (and µs per busiest-CTA unit, the dense kernel's beside them) and
    torch / each (``--walks``), then the geo-mean per model."""
    import math

    out = ["| model | proj | T | old µs (per unit) | new µs (per unit) | new / old speedup | dense µs per unit | "
           "torch µs | torch / old | torch / new |", "|" + "---|" * 10]
    ratios = {}
    for key in dict.fromkeys((r["model"], r["proj"], r["T"]) for r in rows):
        got = {r["why"]: r for r in rows if (r["model"], r["proj"], r["T"]) == key}
        if "old plan" not in got:
            continue
        old, new = got["old plan"], got.get("new plan", got["old plan"])
        dense = f"{got[DENSE]['unit_us']:.2f}" if DENSE in got else "-"
        ratios.setdefault(key[0], []).append((old["speedup"], new["speedup"]))
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {old['graph_us']:.1f} ({old['unit_us']:.2f}) | "
                   f"{new['graph_us']:.1f} ({new['unit_us']:.2f}) | {old['graph_us'] / new['graph_us']:.2f}x | {dense} | "
                   f"{new['torch_graph_us']:.1f} | {old['speedup']:.2f}x | {new['speedup']:.2f}x |")
    out += ["", "| model | geo-mean torch / old | geo-mean torch / new |", "|---|---|---|"]
    for model, pairs in ratios.items():
        gm = [math.prod(p[i] for p in pairs) ** (1 / len(pairs)) for i in (0, 1)]
        out.append(f"| {model} | {gm[0]:.2f}x | {gm[1]:.2f}x |")
    return out


def _build(job) -> str:
    """Worker: build one config's kernel of T's bucket (``DENSE``: the static dense kernel of M = T) and compile its
    device code (the timing process loads)."""
    G, N, K, T, fields, why = job
    from tvm_cdna4.kernels import gemm
    from tvm_cdna4.kernels.gemm.problem import GemmProblem
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config
    from tvm_cdna4.runtime.cuda import precompile

    cfg = Sm90Config(**fields)
    try:
        if why == DENSE:
            precompile(gemm.build(GemmProblem(T, N, K, "bf16", "nt", "bf16"), "sm90", cfg))
        else:
            precompile(gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16", groups=G), "sm90", cfg).kernel_for(T))
    except Exception as e:  # noqa: BLE001 -- one config's failure is reported, the others still timed
        return f"FAILED G={G} {N}x{K} T={T}: {config_name(cfg)} ({why}): {type(e).__name__}: {e}"
    return f"G={G} {N}x{K} T={T}: {config_name(cfg)} ({why})"


def cases(args) -> list[tuple]:
    """(model, proj, G, N, K, tokens, rows) of every prefill shape (``torch_grouped_sm90.main``'s routing)."""
    out = []
    for model in args.models.split(","):
        for n in (int(v) for v in args.tokens.split(",")):
            rows = sizes(MODELS[model]["experts"], MODELS[model]["top"], n, args.zipf, args.seed + n)
            out += [(model, proj, G, N, K, n, rows) for proj, G, N, K in projections(model)]
    return out


def time_shape(torch, case, plans, args) -> list[dict]:
    """Every config of one shape (and ``torch._grouped_mm`` once): checked, then timed."""
    from torch_gemm import _graph_seconds

    from tvm_cdna4.kernels import devices, gemm
    from tvm_cdna4.kernels.gemm.problem import GemmProblem
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.runtime.cuda import DynamicKernel, tolerance

    model, proj, G, N, K, tokens, rows = case
    T, dev = sum(rows), devices.DEVICES["H100"]
    copies = max(2, min(16, math.ceil(3 * torch.cuda.get_device_properties(0).L2_cache_size / (G * N * K * 2))))
    g = torch.Generator(device="cuda").manual_seed(tokens * 7919 + N + K)
    x = torch.randn(T, K, device="cuda", dtype=torch.bfloat16, generator=g)
    ws = [torch.randn(G, N, K, device="cuda", dtype=torch.bfloat16, generator=g) / math.sqrt(K) for _ in range(copies)]
    offsets = torch.tensor([0, *itertools_accumulate(rows)], dtype=torch.int32, device="cuda")
    y = torch.empty(T, N, device="cuda", dtype=torch.bfloat16)
    ref, lo = torch.empty(T, N, device="cuda"), 0
    for grp, m in enumerate(rows):
        ref[lo:lo + m] = x[lo:lo + m].float() @ ws[0][grp].float().t()
        lo += m
    calls = lambda fn: [(lambda w=w: fn(w)) for w in (ws * math.ceil(args.calls / copies))[:args.calls]]  # noqa: E731
    ends = offsets[1:].clone()
    torch_us = _graph_seconds(torch, calls(lambda w: torch._grouped_mm(x, w.transpose(-2, -1), offs=ends)), args.reps) * 1e6
    base = dict(model=model, proj=proj, G=G, N=N, K=K, tokens=tokens, T=T, rows_per_group=-(-T // G), sizes=rows,
                copies=copies, torch_graph_us=torch_us)
    out = []
    for why, cfg in plans:
        try:
            if why == DENSE:  # the same tiling on the dense kernel: M = T rows times group 0's weights
                from tvm_cdna4.runtime.cuda import Kernel, load_build

                p = gemm.plan(GemmProblem(T, N, K, "bf16", "nt", "bf16"), "sm90", cfg)
                kernel = Kernel(load_build(gemm.build(GemmProblem(T, N, K, "bf16", "nt", "bf16"), "sm90", cfg)), p)
                launch, want = (lambda w: kernel.launch(x, w[0], y)), x.float() @ ws[0][0].float().t()
                est = gemm_cost.estimate(cfg, T, N, K, 2, dev)
                busy = -(-p.tiles // min(p.tiles, dev.units))
            else:
                kernel = DynamicKernel(gemm.build(GemmProblem(None, N, K, "bf16", "nt", "bf16", groups=G), "sm90", cfg),
                                       device=x.device).kernel(T)
                launch, want = (lambda w: kernel.launch(x, w, y, offsets)), ref
                est = gemm_cost.grouped_estimate(cfg, -(-T // G), G, N, K, 2, dev)
                busy = busiest_units(rows, G, N, cfg, dev.units)[0]
            y.fill_(float("nan"))
            launch(ws[0])
            torch.cuda.synchronize()
            err = ((y.float() - want).norm() / want.norm()).item()
            us = _graph_seconds(torch, calls(launch), args.reps) * 1e6
            out.append(dict(base, why=why, config=config_dict(cfg), name=config_name(cfg), graph_us=us,
                            speedup=torch_us / us, err=err, ok=bool(torch.isfinite(y).all().item()) and err <= tolerance("bf16"),
                            estimate=est.to_json(), busiest_units=busy, unit_us=us / busy))
            print(f"{model} {proj} T={T} {config_name(cfg)} ({why}): {us:.1f} us, est {est.total * 1e6:.1f}, torch "
                  f"{torch_us:.1f} ({torch_us / us:.2f}x), ok={out[-1]['ok']}", flush=True)
        except Exception as e:  # noqa: BLE001 -- reported in its row; the other configs are still timed
            print(f"{model} {proj} T={T} {config_name(cfg)} ({why}): FAILED {type(e).__name__}: {e}", flush=True)
            out.append(dict(base, why=why, config=config_dict(cfg), name=config_name(cfg), graph_us=math.nan,
                            speedup=math.nan, ok=False, error=f"{type(e).__name__}: {e}", estimate={"us": math.nan},
                            busiest_units=0, unit_us=math.nan))
    ws.clear()  # the weight copies freed before the next shape's
    return out


def table(rows) -> list[str]:
    out = ["| model | proj | T | config | why | ours µs | model µs | torch µs | torch/ours | ok |", "|" + "---|" * 10]
    for r in rows:
        out.append(f"| {r['model']} | {r['proj']} | {r['T']} | {r['name']} | {r['why']} | {r['graph_us']:.1f} | "
                   f"{r['estimate']['us']:.1f} | {r['torch_graph_us']:.1f} | {r['speedup']:.2f}x | "
                   f"{'yes' if r['ok'] else 'NO'} |")
    return out


def add_arguments(ap) -> None:
    ap.add_argument("--top", type=int, default=3, help="the cost model's first configs per shape")
    ap.add_argument("--walks", action="store_true", help="the old plans (gaps walk) against the new (prefix walk), "
                    "each tiling on both walks (the module docstring)")
    ap.add_argument("--plans", action="store_true", help="print the configs, estimates and busiest CTAs; no GPU")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--tokens", default=",".join(map(str, PREFILL)))
    ap.add_argument("--zipf", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--out", default=".")
    add_arguments(ap)
    return run(ap.parse_args(argv))


def case_key(case) -> tuple:
    """(G, N, K, T) of a shape (a build job's first four fields)."""
    return (case[2], case[3], case[4], sum(case[6]))


def run(args) -> int:
    """The sweep of ``args`` (``main``'s options; ``torch_grouped_sm90.py --sweep`` passes its own)."""
    if args.plans:
        return print_plans(args)
    import torch

    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    t0 = time.time()
    pick = walk_configs if args.walks else (lambda G, N, K, T: configs(G, N, K, T, args.top))
    shapes = [(case, pick(case[2], case[3], case[4], sum(case[6]))) for case in cases(args)]
    jobs = [(G, N, K, sum(rows), config_dict(cfg), why) for (_, _, G, N, K, _, rows), plans in shapes for why, cfg in plans]
    failed = set()
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for job, line in zip(jobs, pool.map(_build, jobs)):
            print(line, flush=True)
            if line.startswith("FAILED"):
                failed.add((job[:4], job[5], Sm90Config(**job[4])))
    print(f"built {len(jobs)} kernels in {time.time() - t0:.0f} s on {args.jobs} workers", flush=True)
    shapes = [(case, [(why, cfg) for why, cfg in plans if (case_key(case), why, cfg) not in failed])
              for case, plans in shapes]
    rows = [r for case, plans in shapes for r in time_shape(torch, case, plans, args)]
    meta = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__, date=time.strftime("%Y-%m-%d"),
                zipf=args.zipf, seed=args.seed, calls=args.calls, reps=args.reps, seconds=time.time() - t0)
    name = "grouped_sm90_walks" if args.walks else "grouped_sm90_sweep"
    write_results(args.out, name, meta, rows, table(rows) + (["", *walk_summary(rows)] if args.walks else []))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
