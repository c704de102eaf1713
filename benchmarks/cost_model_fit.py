"""How well the CUDA cost models (``kernels.sm80.gemm_plan.estimate``, ``kernels.sm80.decode_plan.decode_estimate``) rank
measured configs, and the fit of their ``Device`` constants to sweeps (``benchmarks/cuda_small_m_sweep.py``,
``benchmarks/llm_linear.py --sweep``).

    python benchmarks/cost_model_fit.py benchmarks/runs/cuda_small_m_sweep_h200_2026-12-01.json [MORE.json ...] [--fit]
    python benchmarks/cost_model_fit.py benchmarks/runs/llm_linear_flush_probe_h200_2026-12-02.json --ms 1,16 --fit-decode

Per (projection, M): Spearman's rank correlation between estimated and measured times over the
configs that ran (either kernel: a decode config is estimated by the decode model), and whether the
model's pick (least estimate) measured within 5 % of the best. ``--fit`` searches ``FIT_GRID`` (a
coarse grid over the tile model's Device constants) for the setting that puts the most picks within
5 %, then the highest mean rank correlation; ``--fit-decode`` searches ``DECODE_GRID`` for the decode
model's constants of least mean |log(estimate / measured)| over the decode configs. ``--ms`` keeps
those M.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def load_rows(*paths: str) -> list[dict]:
    """The measured rows (``us`` set) of sweeps (``cuda_small_m_sweep.py``) and of ``llm_linear.py``
    runs (each shape's ``all`` configs of ``--sweep`` and its ``tuned_candidates``), as (name, M, N, K,
    config, us) rows; a config measured twice in one run keeps the ``all`` figure."""
    rows = []
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["rows"]:
                if "tuned_candidates" in r or "all" in r:
                    seen = {json.dumps(a["config"], sort_keys=True): a["seconds"] * 1e6 for a in r.get("all", [])
                            if a.get("seconds")}
                    for c in r.get("tuned_candidates", []):
                        if c.get("us"):
                            seen.setdefault(json.dumps(c["config"], sort_keys=True), c["us"])
                    rows += [dict(name=r["name"], M=r["M"], N=r["N"], K=r["K"], config=json.loads(k), us=us)
                             for k, us in seen.items()]
                elif r.get("us"):
                    rows.append(r)
    return rows


def _ranks(xs: list[float]) -> list[float]:
    order = sorted(range(len(xs)), key=xs.__getitem__)
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation (Pearson's of the ranks, ties averaged)."""
    rx, ry = _ranks(xs), _ranks(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else 0.0


def _config(gemm, cfg: dict):
    if cfg.get("kind") == "decode":
        return gemm.config_from_dict(cfg)
    return gemm.GemmConfig(**{**gemm.default_config("bf16").as_dict(), **{k: v for k, v in cfg.items() if k != "kind"}})


def estimate_us(gemm, M, N, K, cfg, dev) -> float:
    """The model's time of a config of either kernel (bf16 out), in µs."""
    if isinstance(cfg, gemm.DecodeConfig):
        from tvm_cdna4.kernels.sm80.decode_plan import decode_estimate

        return decode_estimate(M, N, K, cfg, 2, dev).time_s * 1e6
    return gemm.estimate(M, N, K, cfg, 2, dev).time_s * 1e6


def evaluate(rows: list[dict], dev=None) -> list[dict]:
    """Per shape: ``rho`` (estimate vs measured ranks), ``pick_us`` (the measured time of the model's
    pick), ``best_us``, ``pick_ratio`` = pick / best, ``est_pick_us`` (its estimate)."""
    from tvm_cdna4.kernels.sm80 import gemm

    dev = dev or gemm.Device()
    shapes: dict = {}
    for r in rows:
        shapes.setdefault((r["name"], r["M"], r["N"], r["K"]), []).append(r)
    out = []
    for (name, M, N, K), rs in shapes.items():
        est = [estimate_us(gemm, M, N, K, _config(gemm, r["config"]), dev) for r in rs]
        us = [r["us"] for r in rs]
        pick = min(range(len(rs)), key=lambda i: (est[i], i))
        best = min(us)
        out.append(dict(name=name, M=M, N=N, K=K, n=len(rs), rho=spearman(est, us), pick_us=us[pick], best_us=best,
                        pick_ratio=us[pick] / best, est_pick_us=est[pick], pick=rs[pick]["config"],
                        best=rs[us.index(best)]["config"]))
    return out


def decode_error(rows: list[dict], dev=None) -> float:
    """Mean |log(estimate / measured)| of the decode model over the rows' decode configs."""
    import math

    from tvm_cdna4.kernels.sm80 import gemm

    dev = dev or gemm.Device()
    errs = [abs(math.log(estimate_us(gemm, r["M"], r["N"], r["K"], _config(gemm, r["config"]), dev) / r["us"]))
            for r in rows if r["config"].get("kind") == "decode"]
    return sum(errs) / max(1, len(errs))


def summary(per_shape: list[dict]) -> dict:
    """Shapes, picks within 5 % of the best, mean rank correlation, worst pick ratio."""
    return dict(shapes=len(per_shape), within_5pct=sum(s["pick_ratio"] <= 1.05 for s in per_shape),
                mean_pick_ratio=sum(s["pick_ratio"] for s in per_shape) / max(1, len(per_shape)),
                mean_rho=sum(s["rho"] for s in per_shape) / max(1, len(per_shape)),
                worst_ratio=max((s["pick_ratio"] for s in per_shape), default=0.0))


FIT_GRID = {  # Device fields searched by --fit, one at a time (coordinate descent)
    "sm_bytes_s": (40e9, 60e9, 80e9, 100e9, 120e9, 150e9, 200e9),
    "latency_s": (0.5e-6, 0.75e-6, 1e-6, 1.25e-6, 1.5e-6, 2e-6, 2.5e-6),
    "smem_bytes_clk": (64.0, 96.0, 128.0, 192.0),
    "wave_s": (0.5e-6, 1e-6, 2e-6, 3e-6, 4e-6),
    "atomic_s": (3e10, 5e10, 7e10, 1e11, 1.5e11, 2e11),
    "split_s": (0.5e-6, 1.5e-6, 3e-6, 5e-6, 8e-6, 12e-6),
    "l2_bytes_s": (6e12, 8e12, 10e12, 12e12),
    "hbm_bytes_s": (3e12, 3.5e12, 4e12, 4.8e12),
    "overlap": (0.0, 0.1, 0.3, 0.5),
    "issue_warps": (1, 4, 8, 12, 16),
    "pairs_s": (1e11, 1.5e11, 2e11, 3e11, 4e11, 6e11, 1e12),
}


def score(s: dict) -> float:
    """Picks within 5 % of the best first, then the mean rank correlation."""
    return s["within_5pct"] + s["mean_rho"]


def fit(rows: list[dict], passes: int = 3) -> tuple[dict, dict]:
    """Coordinate descent over ``FIT_GRID`` from the current defaults: each field in turn takes the
    grid value of the best ``score``; ``passes`` rounds."""
    from tvm_cdna4.kernels.sm80 import gemm

    point = {k: getattr(gemm.Device(), k) for k in FIT_GRID}
    best = summary(evaluate(rows, gemm.Device(**point)))
    for _ in range(passes):
        for key, values in FIT_GRID.items():
            for v in values:
                trial = {**point, key: v}
                s = summary(evaluate(rows, gemm.Device(**trial)))
                if score(s) > score(best) + 1e-9:
                    point, best = trial, s
    return point, best


DECODE_GRID = {  # the decode model's Device fields searched by --fit-decode
    "decode_bytes_s": (4.0e12, 4.3e12, 4.5e12, 4.8e12, 5.0e12),
    "decode_sm_bytes_s": (30e9, 40e9, 50e9, 70e9, 100e9),
    "decode_latency_s": (0.5e-6, 0.75e-6, 1e-6, 1.5e-6, 2e-6),
    "stream_ramp_s": (1e-6, 3e-6, 5e-6, 7e-6),
    "dirty_bytes": (0.0, 30e6, 60e6),
    "half_line": (1.0, 1.05, 1.1, 1.15),
}


def fit_decode(rows: list[dict], passes: int = 3) -> tuple[dict, float]:
    """Coordinate descent over ``DECODE_GRID`` from the current defaults, least ``decode_error``."""
    from tvm_cdna4.kernels.sm80 import gemm

    point = {k: getattr(gemm.Device(), k) for k in DECODE_GRID}
    best = decode_error(rows, gemm.Device(**point))
    for _ in range(passes):
        for key, values in DECODE_GRID.items():
            for v in values:
                trial = {**point, key: v}
                e = decode_error(rows, gemm.Device(**trial))
                if e < best - 1e-12:
                    point, best = trial, e
    return point, best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sweep", nargs="+", help="sweep / llm_linear JSON files (their rows pooled)")
    ap.add_argument("--ms", default=None, help="comma-separated M values to keep (default: all)")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--fit-decode", action="store_true")
    args = ap.parse_args(argv)
    rows = load_rows(*args.sweep)
    if args.ms:
        rows = [r for r in rows if r["M"] in {int(m) for m in args.ms.split(",")}]
    per = evaluate(rows)
    print("| shape | M | configs | rho | model's pick µs | best µs | pick / best | estimate µs |")
    print("|---|---|---|---|---|---|---|---|")
    for s in per:
        print(f"| {s['name']} | {s['M']} | {s['n']} | {s['rho']:.2f} | {s['pick_us']:.1f} | {s['best_us']:.1f} | "
              f"{s['pick_ratio']:.2f} | {s['est_pick_us']:.1f} |")
    print(summary(per), "decode mean |log(est/measured)|:", round(decode_error(rows), 4))
    if args.fit:
        point, s = fit(rows)
        print("fit:", point, s)
    if args.fit_decode:
        point, e = fit_decode(rows)
        print("fit-decode:", point, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
