"""Fit the sm90 cost model's rates (``kernels.sm90.gemm_cost``, those marked *fitted*) to H100 timings; CPU only.

    python benchmarks/sm90_fit.py [--start current|datasheet] [--rounds 4]

The timings: ``benchmarks/runs/sm90_sweep_h100_2026-12-06.json`` (``benchmarks/sm90_sweep.py``) and the
two tables of ``tests/kernels/sm90/test_sm90_gemm.py`` (``h100_timings``), each a config, a shape and
its median time. A coordinate search (each rate scaled by a ladder of factors in turn, the best kept,
``--rounds`` passes) minimizes the rms of ``log(measured / estimate)`` with the H100's ``DeviceSpec``.
It prints the rates, the rms and worst error, and the choice's loss on the swept shapes (the measured time
of the config the model ranks first over the fastest measured, of the configs timed there); the values in
``gemm_cost`` are these, rounded. ``WGMMA_FULL_N`` is chosen over 64..128 by the same error.

    python benchmarks/sm90_fit.py --swap

fits the swap's terms (``SWAP_FITTED``: ``FEW_CTAS``, ``SWAPPED_EFFICIENCY``) with the other rates as they are, to
those timings and the 72 of ``benchmarks/runs/sm90_swap_ab_h100_2026-12-06d.json`` (``benchmarks/sm90_sweep.py
--swap-ab``: M = 32, 96, 200 on the twelve projections, the model's unswapped choice and the best-estimated swapped
config each), the same search on the rms over both; it prints the rms of each set and on how many of the 36 shapes
the model ranks the faster of the two kernels first.

    python benchmarks/sm90_fit.py --split-epilogue

checks ``gemm_cost.WEIGH_SPLIT_EPILOGUE`` (a K split's C counted once a tile, the choice's split configs from registers)
against the static H100 timings (``split_timings``: the 167 and the wave sweeps' of ``WAVE_TIMINGS``): every split
tiling timed with both epilogues (``split_pairs``: TMA / registers measured and estimated), and the rms of the split
timings' log error with the flag off and on.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "kernels", "sm90")]

FITTED = ("TENSOR_EFFICIENCY", "ONE_CONSUMER", "HBM_EFFICIENCY", "SM_BYTES_PER_CLK", "OVERLAP", "STORE_EFFICIENCY",
          "STAGED_EPILOGUE", "REDUCTION_EFFICIENCY")
SHARES = {"TENSOR_EFFICIENCY", "ONE_CONSUMER", "HBM_EFFICIENCY", "STAGED_EPILOGUE", "REDUCTION_EFFICIENCY"}
"""Rates that are a share of a datasheet rate: at most 1."""
DATASHEET = dict(TENSOR_EFFICIENCY=0.75, ONE_CONSUMER=0.85, HBM_EFFICIENCY=0.8, SM_BYTES_PER_CLK=64, OVERLAP=4.0,
                 STORE_EFFICIENCY=0.35, STAGED_EPILOGUE=0.16, REDUCTION_EFFICIENCY=0.5)
"""``--start datasheet``: where the search starts (the rates before the 2026-12-06 sweep, and first guesses)."""
LADDER = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 1.02, 1.05, 1.1, 1.2, 1.4, 2)
SWAP_FITTED = ("FEW_CTAS", "SWAPPED_EFFICIENCY")
SWAP_TIMINGS = os.path.join(ROOT, "benchmarks", "runs", "sm90_swap_ab_h100_2026-12-06d.json")
SWAP_START = dict(FEW_CTAS=0.3, SWAPPED_EFFICIENCY=1.0)
"""``--swap``: where the search of the swap's terms starts."""
WAVE_TIMINGS = tuple(os.path.join(ROOT, "benchmarks", "runs", f"sm90_waves_{size}_h100_2026-12-06f.json")
                     for size in ("small", "large"))
"""``benchmarks/sm90_sweep.py --waves`` on an H100 (2026-12-06): M = 96 / 200 and 768 / 3000, twelve projections."""


def split_timings() -> list:
    """(config, M, N, K, us) of the static H100 timings ``--split-epilogue`` reads: the 167 and ``WAVE_TIMINGS``'."""
    from test_sm90_gemm import h100_timings

    return h100_timings() + [t for path in WAVE_TIMINGS for t in swap_timings(path)]


def split_pairs(data) -> list:
    """[(M, N, K, tma config, its us, registers config, its us)]: each K split (``decomposition="split-k"``) tiling of
    ``data`` timed with both epilogues, the fastest timing of each (their rings differ: TMA's staging takes room)."""
    import attrs

    best = {}
    for cfg, M, N, K, us in data:
        if cfg.decomposition != "split-k":
            continue
        key = (M, N, K, attrs.evolve(cfg, epilogue="registers", stages=2))
        if us < best.setdefault(key, {}).get(cfg.epilogue, (None, float("inf")))[1]:
            best[key][cfg.epilogue] = (cfg, us)
    return [(M, N, K, *d["tma"], *d["registers"]) for (M, N, K, _), d in best.items() if len(d) == 2]


def split_check(cost, device) -> int:
    """``--split-epilogue``: the pairs (TMA / registers, measured and estimated) and the split timings' rms."""
    data = split_timings()
    split = [t for t in data if t[0].decomposition == "split-k"]
    print("| M | N | K | tile | split | TMA stages | registers stages | TMA / registers measured | estimated (off) |")
    print("|---|---|---|---|---|---|---|---|---|")
    ratios = []
    for M, N, K, t, t_us, r, r_us in split_pairs(data):
        est = cost.estimate(t, M, N, K, 2, device).total / cost.estimate(r, M, N, K, 2, device).total
        ratios.append(t_us / r_us)
        print(f"| {M} | {N} | {K} | {t.block_m}x{t.block_n} | {t.split_k} | {t.stages} | {r.stages} | "
              f"{t_us / r_us:.3f} | {est:.3f} |")
    print(f"\n{len(ratios)} pairs: TMA / registers geo-mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    for flag in (False, True):
        cost.WEIGH_SPLIT_EPILOGUE = flag
        rms, worst = errors(cost, split, device)
        print(f"WEIGH_SPLIT_EPILOGUE = {flag}: {len(split)} split timings, rms {rms:.1%}, worst {worst:.1%} "
              "(log error)")
    cost.WEIGH_SPLIT_EPILOGUE = False
    return 0


def swap_timings(path: str = SWAP_TIMINGS) -> list:
    """The swap timings (``sm90_sweep.py --swap-ab``'s JSON) as ``(config, M, N, K, us)``."""
    import json

    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    with open(path) as f:
        rows = json.load(f)["rows"]
    return [(Sm90Config(**r["config"]), r["M"], r["N"], r["K"], r["us"]) for r in rows if r.get("ok", True)]


def ranked_right(cost, data, device) -> tuple[int, int]:
    """(shapes whose fastest measured config the model estimates fastest, shapes)."""
    shapes = {}
    for cfg, M, N, K, us in data:
        shapes.setdefault((M, N, K), []).append((cost.estimate(cfg, M, N, K, 2, device).total, us))
    return sum(min(runs)[1] == min(u for _, u in runs) for runs in shapes.values()), len(shapes)


def errors(cost, data, device):
    logs = [math.log(us * 1e-6 / cost.estimate(cfg, M, N, K, 2, device).total) for cfg, M, N, K, us in data]
    return math.sqrt(sum(x * x for x in logs) / len(logs)), max(map(abs, logs))


def choice_loss(cost, data, device):
    shapes = {}
    for cfg, M, N, K, us in data:
        shapes.setdefault((M, N, K), []).append((cost.estimate(cfg, M, N, K, 2, device).total, us))
    losses = [min(runs)[1] / min(u for _, u in runs) for runs in shapes.values() if len(runs) > 1]
    return math.exp(sum(map(math.log, losses)) / len(losses)), max(losses)


def search(cost, data, device, rounds: int, names=FITTED):
    for _ in range(rounds):
        for name in names:
            best = (errors(cost, data, device)[0], getattr(cost, name))
            for f in LADDER:
                v = best[1] * f
                if name in SHARES and v > 1:
                    continue
                setattr(cost, name, v)
                e = errors(cost, data, device)[0]
                if e < best[0]:
                    best = (e, v)
            setattr(cost, name, best[1])
    return errors(cost, data, device)[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", choices=("current", "datasheet"), default="current")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--swap", action="store_true", help="fit the swap's terms (SWAP_FITTED) to both sets of timings")
    ap.add_argument("--split-epilogue", action="store_true", help="check gemm_cost.WEIGH_SPLIT_EPILOGUE against the "
                    "split timings (no fit)")
    args = ap.parse_args(argv)
    from test_sm90_gemm import h100_timings
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost as cost

    device, data = devices.DEVICES["H100"], h100_timings()
    if args.split_epilogue:
        return split_check(cost, device)
    if args.swap:
        return fit_swap(cost, data, swap_timings(), device, args.rounds)
    if args.start == "datasheet":
        for k, v in DATASHEET.items():
            setattr(cost, k, v)
    results = {}
    for full_n in (64, 96, 128):
        cost.WGMMA_FULL_N = full_n
        results[full_n] = (search(cost, data, device, args.rounds), {k: getattr(cost, k) for k in FITTED})
    full_n = min(results, key=lambda n: results[n][0])
    cost.WGMMA_FULL_N = full_n
    for k, v in results[full_n][1].items():
        setattr(cost, k, v)
    print(f"{len(data)} timings; WGMMA_FULL_N = {full_n}")
    for k in FITTED:
        print(f"  {k} = {getattr(cost, k):.3g}")
    rms, worst = errors(cost, data, device)
    geo, most = choice_loss(cost, data[:144], device)
    print(f"rms {rms:.1%}, worst {worst:.1%} (log error); the first-ranked config's loss on the swept shapes: "
          f"{geo - 1:.1%} geometric mean, {most - 1:.1%} at worst")
    return 0


def fit_swap(cost, data, swapped, device, rounds: int) -> int:
    """``--swap``: the swap's terms fitted to both sets, printed with each set's rms and the ranking."""
    for k, v in SWAP_START.items():
        setattr(cost, k, v)
    search(cost, data + swapped, device, rounds, SWAP_FITTED)
    print(f"{len(data)} + {len(swapped)} timings")
    for k in SWAP_FITTED:
        print(f"  {k} = {getattr(cost, k):.3g}")
    for name, rows in (("the 167", data), ("the swap's", swapped)):
        rms, worst = errors(cost, rows, device)
        print(f"{name}: rms {rms:.1%}, worst {worst:.1%} (log error)")
    right, shapes = ranked_right(cost, swapped, device)
    print(f"the faster of the two measured kernels ranked first on {right} of {shapes} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
