"""The sm90 cost model's zero-fill term (``gemm_cost.WEIGH_ZERO_FILL``, issue 36) against the H100's timings; CPU only.

    python benchmarks/sm90_zero_fill.py [--rates 12,15,20,24] [--rows] [--shift]

The torch-op rows (``TORCH``: ``benchmarks/torch_gemm.py`` runs through ``tvm_cdna4.torch.gemm`` on an H100, 2026-12-07):
``torch_gemm_partial`` (M = 256..384 on Phi-3-medium / Qwen2.5-7B QKV and o, the whole config a row), the ``finecut``
A/B's rows (M = 260 / 288 / 300 / 320, twelve projections, both settings) and the ``trim`` A/B's ``off`` rows (M = 96,
200, 260, 300, 1200; its ``on`` rows ran a trimmed form since replaced). An A/B row names its plan by
``torch_gemm.plan_label`` only: its bucket plan is rebuilt with this tree (the A/B's flag set; the H100 as the runs'
driver read it) and kept where the label is the run's. The static rows are ``benchmarks/sm90_fit.py``'s 167 and its
``--swap`` 72 (the H100's ``DeviceSpec``, as that script fits them). For the flag off, then on at ``FILL_BYTES_PER_CLK``
and each of ``--rates``, it prints each set's rms (and worst) of ``log(measured / estimate)``; ``--rows`` also prints
the partial run's rows, measured beside both estimates. The runs before stop 53 ran no shifted tile (``SHIFT_LAST`` off
where their plans are rebuilt); the ``shiftbox`` A/B (``SHIFT_RUN``) is a set of its own, and ``--shift`` prints its
pairs the shift changed: measured off / on beside the model's (with the term).

    python benchmarks/sm90_zero_fill.py --plans 129,200,260,300,450,600,768,1200,3000 [--device H200]

prints, for the twelve projections of ``benchmarks/torch_gemm.py`` at each M, the bucket plan with the flag off and on
(``torch_gemm.bucket_plan``, the H100's ``DeviceSpec`` or ``--device``'s) where they differ, both estimated by the model with the term
(the estimated gain: off's plan over on's), then per M the plans changed and the geo-mean gain.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = os.path.join(ROOT, "benchmarks", "runs")
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "tests", "kernels", "sm90")]
PARTIAL = "torch_gemm_partial_h100_2026-12-07c.json"
SHIFT = ("tvm_cdna4.kernels.sm90.gemm_shift", "SHIFT_LAST")
AB_RUNS = (  # (file, the flag's module, the flag, the settings kept, the flags the run ran without: (module, flag))
    ("torch_gemm_finecut_h100_2026-12-07c.json", "tvm_cdna4.kernels.sm90.gemm_dynamic", "FINE_CUTS", ("off", "on"),
     (SHIFT,)),
    ("torch_gemm_trim_h100_2026-12-07c.json", "tvm_cdna4.kernels.sm90.gemm_plan", "TRIM_LOADS", ("off",), (SHIFT,)),
)
SHIFT_RUN = ("torch_gemm_shift_h100_2026-12-07e.json", *SHIFT, ("off", "on"), ())
"""The ``shiftbox`` A/B (stop 53, ``gemm_shift.SHIFT_LAST``): its ``off`` rows zero-fill the last tile row, its ``on``
rows of the register epilogue load a shifted box (no fill, ``zero_rows`` 0), its TMA-store rows the same kernel twice:
``--shift`` weighs the term on them (was it fitted before any plan shifted)."""


def partial_rows() -> list:
    """The partial run's rows as ``(config, M, N, K, us)`` (its JSON's plan strings)."""
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    with open(os.path.join(RUNS, PARTIAL)) as f:
        rows = json.load(f)["rows"]
    return [(eval(r["plan"].split(" ", 1)[1], {"Sm90Config": Sm90Config}), r["M"], r["N"], r["K"], r["ours_graph_us"])
            for r in rows if r["ours_ok"]]


def ab_rows(device, runs=AB_RUNS) -> tuple[list, int]:
    """The A/B runs' rows whose rebuilt bucket plan (``torch_gemm.bucket_plan``; the flags a run ran without off)
    carries the run's label, and how many were not."""
    import importlib

    import torch_gemm as tg

    out, missed = [], 0
    for name, module, flag, settings, without in runs:
        mods = [(importlib.import_module(m), f) for m, f in ((module, flag), *without)]
        defaults = [getattr(m, f) for m, f in mods]
        with open(os.path.join(RUNS, name)) as f:
            rows = json.load(f)["rows"]
        try:
            for m, f in mods[1:]:
                setattr(m, f, False)
            for s in settings:
                setattr(mods[0][0], flag, s == "on")
                for r in rows:
                    p = tg.bucket_plan(r["N"], r["K"], r["M"], device)
                    if tg.plan_label(p) != r[f"plan_{s}"] or not hasattr(p.config, "swap_ab"):
                        missed += 1
                        continue
                    out.append((p.config, r["M"], r["N"], r["K"], r[f"ours_{s}_us"]))
        finally:
            for (m, f), d in zip(mods, defaults):
                setattr(m, f, d)
    return out, missed


def errors(cost, data, device) -> tuple[float, float]:
    """The rms and the worst of ``log(measured / estimate)``."""
    logs = [math.log(us * 1e-6 / cost.estimate(cfg, M, N, K, 2, device).total) for cfg, M, N, K, us in data]
    return math.sqrt(sum(x * x for x in logs) / len(logs)), max(map(abs, logs))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="", help="FILL_BYTES_PER_CLK values to weigh beside the package's")
    ap.add_argument("--rows", action="store_true", help="print the partial run's rows")
    ap.add_argument("--shift", action="store_true", help="print the shift A/B's shifted pairs, measured and estimated")
    ap.add_argument("--plans", default="", help="M values: the bucket plans the flag changes (no fit)")
    ap.add_argument("--device", default="H100", help="--plans: the DeviceSpec (devices.DEVICES' name)")
    args = ap.parse_args(argv)
    if args.plans:
        return plans([int(v) for v in args.plans.split(",")], args.device)
    import attrs
    import sm90_fit
    from test_sm90_gemm import h100_timings

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost as cost

    static, driver = devices.DEVICES["H100"], attrs.evolve(devices.DEVICES["H100"], hbm_bytes_s=sm90_resid_hbm())
    partial, (ab, missed), (shift, shift_missed) = partial_rows(), ab_rows(driver), ab_rows(driver, (SHIFT_RUN,))
    sets = (("partial", partial, driver), ("finecut + trim off", ab, driver), ("shift off + on", shift, driver),
            ("torch rows", partial + ab + shift, driver), ("static 167", h100_timings(), static),
            ("swap 72", sm90_fit.swap_timings(), static))
    print(f"{len(partial)} partial rows, {len(ab)} A/B rows ({missed} not rebuilt), {len(shift)} shift A/B rows "
          f"({shift_missed} not rebuilt)")
    print("| WEIGH_ZERO_FILL | FILL_BYTES_PER_CLK | " + " | ".join(f"{n} ({len(d)}) rms / worst" for n, d, _ in sets) + " |")
    print("|---|---|" + "---|" * len(sets))
    default, rate = cost.WEIGH_ZERO_FILL, cost.FILL_BYTES_PER_CLK
    try:
        for on, r in ((False, rate), *((True, float(v)) for v in [rate, *filter(None, args.rates.split(","))])):
            cost.WEIGH_ZERO_FILL, cost.FILL_BYTES_PER_CLK = on, r
            cells = [errors(cost, d, dev) for _, d, dev in sets]
            print(f"| {'on' if on else 'off'} | {r:g} | " + " | ".join(f"{a:.1%} / {b:.0%}" for a, b in cells) + " |")
        cost.FILL_BYTES_PER_CLK = rate
        if args.rows:
            print("\n| M | N | K | tile | zero rows | measured µs | estimate off | on |\n|---|---|---|---|---|---|---|---|")
            for cfg, M, N, K, us in partial:
                est = []
                for on in (False, True):
                    cost.WEIGH_ZERO_FILL = on
                    est.append(cost.estimate(cfg, M, N, K, 2, driver).total * 1e6)
                print(f"| {M} | {N} | {K} | {cfg.block_m}x{cfg.block_n} | {cost.zero_rows(cfg, *((N, M) if cfg.swap_ab else (M, N)))} | {us:.1f} | "
                      f"{est[0]:.1f} | {est[1]:.1f} |")
        if args.shift:
            shift_pairs(cost, shift, driver)
    finally:
        cost.WEIGH_ZERO_FILL, cost.FILL_BYTES_PER_CLK = default, rate
    return 0


def shift_pairs(cost, rows: list, device) -> None:
    """``--shift``: the shift A/B's pairs whose ``on`` plan shifted (``ab_rows``' order: every ``off`` row, then every
    ``on`` row): measured off / on beside the model's (the term on), and the rms of the ratios' log error."""
    cost.WEIGH_ZERO_FILL = True
    half = len(rows) // 2
    pairs = [(a, b) for a, b in zip(rows[:half], rows[half:]) if b[0].shift_last and a[1:4] == b[1:4]]
    print("\n| M | N | K | tile | zero rows off | measured off µs | on µs | off/on | estimate off | on | off/on |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    logs = []
    for (c0, M, N, K, us0), (c1, _, _, _, us1) in pairs:
        e0, e1 = (cost.estimate(c, M, N, K, 2, device).total * 1e6 for c in (c0, c1))
        logs.append(math.log((us0 / us1) / (e0 / e1)))
        rows_off = cost.zero_rows(c0, *((N, M) if c0.swap_ab else (M, N)))
        print(f"| {M} | {N} | {K} | {c0.block_m}x{c0.block_n}{' swap' if c0.swap_ab else ''} | {rows_off} | "
              f"{us0:.1f} | {us1:.1f} | {us0 / us1:.2f}x | {e0:.1f} | {e1:.1f} | {e0 / e1:.2f}x |")
    print(f"\n{len(pairs)} shifted pairs: rms of log(measured off/on / estimated off/on) "
          f"{math.sqrt(sum(x * x for x in logs) / max(len(logs), 1)):.1%}, worst {max(map(abs, logs), default=0):.0%}")


def plans(ms: list, device_name: str = "H100") -> int:
    """``--plans``: the bucket plans ``WEIGH_ZERO_FILL`` changes and their estimated gain (the module docstring)."""
    import math

    import torch_gemm as tg

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost as cost

    device, default, gains = devices.DEVICES[device_name], cost.WEIGH_ZERO_FILL, {m: [] for m in ms}
    print("| model | proj | N | K | M | bucket off | plan off | bucket on | plan on | est off's plan µs | on's | gain |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    try:
        for model, proj, N, K in tg.selected(tg.DEFAULT_MODELS):
            for M in ms:
                got = {}
                for on in (False, True):
                    cost.WEIGH_ZERO_FILL = on
                    got[on] = tg.bucket_plan(N, K, M, device)
                est = [cost.estimate(got[on].config, M, N, K, 2, device).total * 1e6  # the model with the term
                       if hasattr(got[on].config, "swap_ab") else math.nan for on in (False, True)]
                gains[M].append(est[0] / est[1] if est[1] == est[1] and est[0] == est[0] else 1.0)
                if tg.plan_label(got[False]) != tg.plan_label(got[True]) or got[False].dynamic_m != got[True].dynamic_m:
                    b = [f"{got[on].dynamic_m.lo}-{got[on].dynamic_m.hi}" for on in (False, True)]
                    print(f"| {model} | {proj} | {N} | {K} | {M} | {b[0]} | {tg.plan_label(got[False])} | {b[1]} | "
                          f"{tg.plan_label(got[True])} | {est[0]:.1f} | {est[1]:.1f} | {est[0] / est[1]:.2f}x |", flush=True)
    finally:
        cost.WEIGH_ZERO_FILL = default
    print("\n| M | plans changed | geo-mean estimated gain | most |\n|---|---|---|---|")
    for M, g in gains.items():
        print(f"| {M} | {sum(x != 1.0 for x in g)} of {len(g)} | {math.exp(sum(map(math.log, g)) / len(g)):.3f}x | "
              f"{max(g):.2f}x |")
    return 0


def sm90_resid_hbm() -> float:
    """The H100's HBM bandwidth as the torch runs' driver read it (``sm90_resid.DRIVER_HBM``)."""
    import sm90_resid

    return sm90_resid.DRIVER_HBM


if __name__ == "__main__":
    sys.exit(main())
