"""The sm90 GEMM cost model's residuals (issue 36): measured / estimate by today's ``gemm_cost.estimate``; CPU only.

    python benchmarks/sm90_resid.py [--lo 129 --hi 1024] [--out benchmarks/runs/sm90_resid_cpu_2026-12-07c.md]

Rows: every timed H100 row whose whole ``Sm90Config`` is known. The static sweeps' JSONs (``STATIC``) carry it; the
torch-op runs (``TORCH_RUNS``: ``benchmarks/torch_gemm.py`` A/Bs, a plan string a row) do not, so each bucket plan is
rebuilt with the tree that ran it (the journal's device record: ``git archive <commit> tvm_cdna4`` into a temporary
folder, ``gemm_dynamic.plan_bucket`` there in a subprocess, the run's switch set, the H100 as the driver read it) and
a row is kept only where the rebuilt plan's ``torch_gemm.plan_label`` equals the run's string. Each row's features
(consumers, the partial last tile of M, ``block_n % 16``, waves, epilogue, stages, K, swapped, static / dynamic M)
are printed beside the ratio, then the geo-mean ratio of each feature's classes over the rows of ``--lo..--hi``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "benchmarks", "runs")
TORCH_RUNS = (  # (file, tree commit: the journal's stop 50 device record, the A/B's option or None)
    ("torch_gemm_refine2_h100_2026-12-07b.json", "dca8979", "refine_buckets"),
    ("torch_gemm_refine_h100_2026-12-07b.json", "54bc250", "refine_buckets"),
    ("torch_gemm_swapone_h100_2026-12-07b.json", "54bc250", "swap_dynamic"),
    ("torch_gemm_splitepi_h100_2026-12-07b.json", "a92eeaa", "split_epilogue"),
    ("torch_gemm_swapstore_h100_2026-12-07b.json", "a92eeaa", "swap_dynamic"),
    ("torch_gemm_m96_200_h100_2026-12-07b.json", "a92eeaa", None),
    ("torch_gemm_h100_2026-12-07b.json", "a92eeaa", None),
    ("torch_gemm_final_h100_2026-12-07b.json", "12b4b52", None),
)
STATIC = ("sm90_sweep_h100_2026-12-06.json", "sm90_waves_small_h100_2026-12-06f.json",
          "sm90_waves_large_h100_2026-12-06f.json", "sm90_swap_ab_h100_2026-12-06d.json",
          "sm90_swap_static_m200_h100_2026-12-07b.json", "sm90_peers_m200_h100_2026-12-07b.json",
          "sm90_peers_m96_h100_2026-12-07b.json")
SWITCH = {"refine_buckets": ("tvm_cdna4.kernels.sm90.gemm_dynamic", "REFINE_BUCKETS"),
          "swap_dynamic": ("tvm_cdna4.kernels.sm90.gemm_cost", "WEIGH_SWAP_DYNAMIC"),
          "split_epilogue": ("tvm_cdna4.kernels.sm90.gemm_cost", "WEIGH_SPLIT_EPILOGUE")}
DRIVER_HBM = 3352320000000.0
"""The H100's HBM bandwidth as the runs' driver read it (their JSON ``meta.planned``)."""


def h100():
    import attrs

    from tvm_cdna4.kernels import devices

    return attrs.evolve(devices.DEVICES["H100"], hbm_bytes_s=DRIVER_HBM)


def rebuild(jobs: list) -> list:
    """In a tree's process (``--rebuild``): each job ``(option, setting, N, K, M)`` -> its bucket plan's config and
    label, or None for a plan that is not an ``Sm90Config`` (the decode kernel)."""
    import importlib

    import attrs

    sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
    from torch_gemm import bucket_plan, plan_label

    out = []
    for option, setting, N, K, M in jobs:
        if option:
            mod, flag = SWITCH[option]
            setattr(importlib.import_module(mod), flag, setting == "on")
        p = bucket_plan(N, K, M, h100())
        c = getattr(p, "config", None)
        ok = hasattr(c, "swap_ab")
        out.append(dict(label=plan_label(p), config=attrs.asdict(c) if ok else None,
                        bucket=[p.dynamic_m.lo, p.dynamic_m.hi] if ok else None))
    return out


def torch_rows() -> list:
    """(run file, row, setting, us, plan string) of every torch-op row, rebuilt in its tree."""
    by_tree = {}
    for name, commit, option in TORCH_RUNS:
        with open(os.path.join(RUNS, name)) as f:
            rows = json.load(f)["rows"]
        for r in rows:
            if "plan_off" in r:
                for s in ("off", "on"):
                    by_tree.setdefault(commit, []).append((name, r, option, s, r[f"ours_{s}_us"], r[f"plan_{s}"]))
            elif r.get("ours_ok", True):
                by_tree.setdefault(commit, []).append((name, r, None, None, r["ours_graph_us"], r.get("tile")))
    out = []
    for commit, items in by_tree.items():
        with tempfile.TemporaryDirectory() as tree:
            subprocess.run(f"git -C {ROOT} archive {commit} tvm_cdna4 benchmarks/torch_gemm.py | tar -x -C {tree}",
                           shell=True, check=True)
            jobs = [(opt, s, r["N"], r["K"], r["M"]) for _, r, opt, s, _, _ in items]
            res = subprocess.run([sys.executable, os.path.abspath(__file__), "--rebuild"], cwd=tree, check=True,
                                 input=json.dumps(jobs), capture_output=True, text=True,
                                 env=dict(os.environ, PYTHONPATH=tree))
            for (name, r, opt, s, us, label), got in zip(items, json.loads(res.stdout.splitlines()[-1])):
                out.append(dict(src=f"{name.split('_h100')[0]}:{s or '-'}", commit=commit, model=r["model"],
                                proj=r["proj"], M=r["M"], N=r["N"], K=r["K"], us=us, label=label, got=got,
                                dynamic=True))
    return out


def static_rows() -> list:
    out = []
    for name in STATIC:
        with open(os.path.join(RUNS, name)) as f:
            rows = json.load(f)["rows"]
        for r in rows:
            if r.get("ok", True) and "config" in r and r.get("us"):
                out.append(dict(src=name.split("_h100")[0], model=r["model"], proj=r["proj"], M=r["M"], N=r["N"],
                                K=r["K"], us=r["us"], got=dict(config=r["config"], label=None), dynamic=False))
    return out


def features(cfg, M: int, N: int, K: int, units: int) -> dict:
    from tvm_cdna4.kernels.common import ceil_div

    rows, cols = (N, M) if cfg.swap_ab else (M, N)
    tiles = ceil_div(rows, cfg.block_m) * ceil_div(cols, cfg.block_n)
    tail = rows % cfg.block_m
    return dict(consumers=cfg.consumers, block_m=cfg.block_m, n16="n%16=0" if cfg.block_n % 16 == 0 else "n%16=8",
                m_tail=("full" if tail == 0 else f"last tile {tail / cfg.block_m:.0%}"), waves=tiles / units,
                epilogue=cfg.epilogue, stages=cfg.stages, K=K, swap=cfg.swap_ab, split=cfg.split_k,
                tail_frac=(tail or cfg.block_m) / cfg.block_m, m_tiles=ceil_div(rows, cfg.block_m))


def residuals() -> list:
    import attrs

    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    device, fields = h100(), {f.name for f in attrs.fields(Sm90Config)}
    out = []
    for row in torch_rows() + static_rows():
        got = row.pop("got")
        if got["config"] is None or (row.get("label") is not None and got["label"] != row["label"]):
            row["rejected"] = got["label"]
            out.append(row)
            continue
        cfg = Sm90Config(**{k: v for k, v in got["config"].items() if k in fields})
        est = gemm_cost.estimate(cfg, row["M"], row["N"], row["K"], 2, device)
        row.update(cfg=cfg, est_us=est.total * 1e6, ratio=row["us"] / (est.total * 1e6), terms=est.to_json(),
                   **features(cfg, row["M"], row["N"], row["K"], device.units))
        out.append(row)
    return out


def geo(xs) -> float:
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def report(rows: list, lo: int, hi: int) -> list[str]:
    ok = [r for r in rows if "ratio" in r]
    rejected = [r for r in rows if "rejected" in r]
    lines = [f"{len(ok)} rows kept ({sum(r['dynamic'] for r in ok)} torch-op, {sum(not r['dynamic'] for r in ok)} "
             f"static); {len(rejected)} torch-op rows rejected (decode plans, or the rebuilt label differs)", "",
             "| src | model | proj | M | N | K | tile | cons | stages | epi | split | swap | waves | last tile | "
             "est µs | measured µs | measured/est |", "|" + "---|" * 17]
    band = sorted((r for r in ok if lo <= r["M"] <= hi), key=lambda r: (r["M"], r["model"], r["proj"], r["src"]))
    for r in band:
        c = r["cfg"]
        lines.append(f"| {r['src']} | {r['model']} | {r['proj']} | {r['M']} | {r['N']} | {r['K']} | "
                     f"{c.block_m}x{c.block_n} | {c.consumers} | {c.stages} | {c.epilogue} | {c.split_k} | "
                     f"{'y' if c.swap_ab else ''} | {r['waves']:.2f} | {r['tail_frac']:.2f} | {r['est_us']:.1f} | "
                     f"{r['us']:.1f} | {r['ratio']:.3f} |")
    lines += ["", f"Geo-mean measured/est by feature, M = {lo}..{hi} (n rows):", "",
              "| feature | class | dynamic (torch op) | static |", "|---|---|---|---|"]

    def classes(key, fn=lambda r, k: r[k]):
        for v in sorted({str(fn(r, key)) for r in band}):
            cell = []
            for dyn in (True, False):
                s = [r["ratio"] for r in band if str(fn(r, key)) == v and r["dynamic"] == dyn]
                cell.append(f"{geo(s):.3f} ({len(s)})" if s else "-")
            lines.append(f"| {key} | {v} | {cell[0]} | {cell[1]} |")

    for key in ("consumers", "n16", "epilogue", "swap", "split"):
        classes(key)
    classes("waves", lambda r, k: "<=1" if r[k] <= 1 else ("1-2" if r[k] <= 2 else ">2"))
    classes("tail_frac", lambda r, k: "full" if r[k] == 1 else ("<=0.5" if r[k] <= 0.5 else ">0.5"))
    classes("stages", lambda r, k: "<=4" if r[k] <= 4 else ">4")
    classes("K", lambda r, k: "K>=14336" if r[k] >= 14336 else "K<=5120")
    classes("row tiles (2 consumers, <= 1 wave)", lambda r, k: (
        f"M={r['M']}: {r['m_tiles']} x {r['block_m']} rows, last {r['tail_frac']:.2f}" if r["consumers"] == 2 and r["waves"] <= 1
        and not r["swap"] else "other"))
    return lines + [""] + noise(ok)


def noise(ok: list) -> list[str]:
    """The same config timed twice in one A/B call (both settings planned it alike): on / off, the spread of the
    measurement that no term of the estimate can explain."""
    pairs = {}
    for r in ok:
        src, _, setting = r["src"].partition(":")
        if setting in ("off", "on"):
            pairs.setdefault((src, r["model"], r["proj"], r["M"]), {})[setting] = r
    same = sorted(((v["on"]["us"] / v["off"]["us"], k) for k, v in pairs.items()
                   if len(v) == 2 and v["on"]["cfg"] == v["off"]["cfg"]), key=lambda x: -abs(math.log(x[0])))
    rms = math.sqrt(sum(math.log(x) ** 2 for x, _ in same) / len(same))
    return [f"Noise: {len(same)} torch-op rows whose plan both settings of an A/B call ran: on / off rms {rms:.1%} "
            "(log); the widest: " + ", ".join(f"{k[1]} {k[2]} M={k[3]} ({k[0]}) {x:.2f}x" for x, k in same[:6])]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rebuild", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lo", type=int, default=129)
    ap.add_argument("--hi", type=int, default=1024)
    ap.add_argument("--out", default=None, help="write the table (markdown) here too")
    ap.add_argument("--json", default=None, help="write every kept row (features, terms) here")
    args = ap.parse_args(argv)
    if args.rebuild:
        print(json.dumps(rebuild(json.loads(sys.stdin.read()))))
        return 0
    sys.path.insert(0, ROOT)
    rows = residuals()
    lines = report(rows, args.lo, args.hi)
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        keep = [{k: (str(v) if k == "cfg" else v) for k, v in r.items()} for r in rows]
        with open(args.json, "w") as f:
            json.dump(keep, f, indent=0, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
