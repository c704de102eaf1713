"""Fit the sm90 attention cost model (``kernels.sm90.attention_cost``: ``FITTED`` and ``EXPOSED``) to H100 timings of
its configs; CPU only.

    python benchmarks/attention_sm90_fit.py [--runs FILE ...] [--rounds 5]
    python benchmarks/attention_sm90_fit.py --options [--runs FILE ...]
    python benchmarks/attention_sm90_fit.py --persistent [--runs FILE ...]

The timings: ``benchmarks/attention_sm90.py --configs sweep`` JSON files (each shape's TFLOP/s per config; default
the 2026-12-06 H100 sweep). Configs past the consumers' registers (``attention_cost.registers``, not candidates) are
left out. A coordinate search (each rate scaled by a ladder of factors in turn, the best kept, ``--rounds`` passes)
minimizes the rms of ``log(measured / estimate)`` (clocks at the H100's ``DeviceSpec`` clock) plus twice the log of
the choice's loss (the measured time of the config the model ranks first over the fastest timed, geometric mean
over the shapes). Prints the rates, the rms and the loss; the values in ``attention_cost`` are these, rounded.

``--options``: the kernel options' rates (``attention_cost.OPTION_RATES``) apart, from ``benchmarks/attention_sm90.py
--configs options`` JSON (default ``OPTION_RUNS``): each config with one option alone against the same config
without it, one CTA per item (``OPTION_GROUPS``); linear least squares of the log ratio of their times, minus the
model's ratio without the rates, on each rate's effect on the estimate (its finite difference). Prints the rates and
the rms before and after.

``--persistent``: ``attention_cost.PERSISTENT_ITEM_CLOCKS`` alone, from the same ``--configs options`` JSON (default
``PERSISTENT_RUNS``): each persistent config against the same config on one CTA an item; the value (a grid of
``PERSISTENT_STEP`` clocks about the best of a coarser one) that minimizes the rms of the log of their measured time
ratio over the model's. Prints the rms at today's value and at the fitted one, and the choice loss (the measured time of the config the model ranks
first over the fastest timed, geometric mean over the shapes) at both.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tvm_cdna4.kernels.attention.problem import AttentionProblem  # noqa: E402
from tvm_cdna4.kernels.devices import DEVICES  # noqa: E402
from tvm_cdna4.kernels.sm90 import attention_cost as cost  # noqa: E402
from tvm_cdna4.kernels.sm90.attention_plan import Sm90AttentionConfig  # noqa: E402

RUNS = ("runs/attention_sm90_sweep_sections_h100_2026-12-06c.json",)
"""The fitted run (D 128); ``--runs`` adds others (``runs/attention_sm90_sweep_d64_h100_2026-12-06c.json``: D 64, held
out of the fit, the rates checked on it)."""
OPTION_RUNS = ("runs/attention_sm90_options_h100_2026-12-06d.json", "runs/attention_sm90_d64_options_h100_2026-12-06f.json",
               "runs/attention_sm90_options_2k_h100_2026-12-06f.json")
"""The H100 runs the kernel options' rates are fitted to, each head dim's apart (D 128 and D 64, 4k and 16k tokens a
sequence, MHA / GQA, causal or not)."""
PERSISTENT_RUNS = ("runs/attention_sm90_options_h100_2026-12-07.json",)
"""The H100 run of the persistent CTAs with Q released at the last S (docs/sm90_attention.md): 16 shapes at 2k and 4k
tokens a sequence, D 64 and 128, MHA / GQA, causal or not, each persistent and not, both epilogues."""
PERSISTENT_STEP = 250
PERSISTENT_COARSE = 1000
LADDER = (0.5, 0.7, 0.85, 0.95, 1.05, 1.2, 1.4, 2)
SHARES = {"TENSOR_EFFICIENCY"}
"""Rates that are a share of a datasheet rate (and ``EXPOSED``'s): at most 1."""


def load(paths):
    """(problem, config, seconds) of every candidate-legal config timed in ``paths``."""
    names = {"AttentionProblem": AttentionProblem, "Sm90AttentionConfig": Sm90AttentionConfig}
    data = []
    for path in paths:
        for row in json.load(open(path))["rows"]:
            p = eval(row["problem"], names)  # noqa: S307: the benchmark's own repr of attrs records
            for label, tflops in row["tflops"].items():
                if label.startswith("sm90 "):
                    c = eval(label[5:], names)  # noqa: S307
                    if cost.registers(p, c) <= cost.CONSUMER_REGS:
                        data.append((p, c, p.flops() / tflops / 1e12))
    return data


def scores(data, clock: float):
    """(rms of log(measured / estimate), geometric-mean choice loss, worst choice loss)."""
    est = {(p, c): cost.estimate(p, c, DEVICES["H100"].units) / clock for p, c, _ in data}
    logs = [math.log(t / est[p, c]) for p, c, t in data]
    shapes = {}
    for p, c, t in data:
        shapes.setdefault(p, []).append((est[p, c], t))
    losses = [min(runs)[1] / min(t for _, t in runs) for runs in shapes.values()]
    return (math.sqrt(sum(x * x for x in logs) / len(logs)), math.exp(sum(map(math.log, losses)) / len(losses)),
            max(losses))


def knobs():
    """(name, get, set) of every fitted rate."""
    out = [(n, (lambda n=n: getattr(cost, n)), (lambda v, n=n: setattr(cost, n, v))) for n in cost.FITTED]
    for key in cost.SCHEDULES:
        out.append((f"EXPOSED{key}", (lambda k=key: cost.EXPOSED[k]), (lambda v, k=key: cost.EXPOSED.__setitem__(k, v))))
    return out


def search(data, clock: float, rounds: int):
    def objective():
        rms, loss, _ = scores(data, clock)
        return rms + 2 * math.log(loss)
    for _ in range(rounds):
        for name, get, put in knobs():
            base = get()
            best = (objective(), base)
            for f in LADDER:
                v = base * f
                if (name in SHARES or name.startswith("EXPOSED")) and v > 1:
                    continue
                put(v)
                o = objective()
                if o < best[0]:
                    best = (o, v)
            put(best[1])


OPTION_GROUPS = ((("SPLIT_BARRIER_CLOCKS",), dict(split_kv_barrier=True, epilogue="registers")),
                 (("TMA_EPILOGUE_TILE_CLOCKS", "TMA_EPILOGUE_ITEM_CLOCKS"), dict(split_kv_barrier=False, epilogue="tma")))
"""Each option's rates and the configs that have that option alone: fitted to the pairs (such a config, the same
without options) only, so that one option's effect is not read into another's."""
NONNEGATIVE = ("TMA_EPILOGUE_ITEM_CLOCKS",)
"""Rates that are a wait, never a saving (the TMA epilogue's per item: the bulk store's read of the Q tile waited for
before Q is released or the CTA retires): a negative least-squares value is held at 0 and the others refitted (D 64's
pairs alone gave -690 clocks an item, i.e. the epilogue paying on the shortest items, which the 2k pairs contradict)."""


def fit_options(data) -> tuple:
    """(rates, rms before, rms after): ``--options``'s least squares (the module docstring), one option at a time
    over the pairs differing by it alone (``OPTION_GROUPS``), apart for each head dim (the rates are keyed by it);
    the rms over all those pairs. ``rates``: ``{name: {head_dim: value}}``."""
    import attrs
    import numpy as np

    sms, times = DEVICES["H100"].units, {(p, c): t for p, c, t in data}
    saved = {n: dict(getattr(cost, n)) for n in cost.OPTION_RATES}
    for n in cost.OPTION_RATES:
        setattr(cost, n, {hd: 0 for hd in saved[n]})
    rates, before, after = {n: {} for n in cost.OPTION_RATES}, [], []
    for hd, (names, option) in ((hd, g) for hd in sorted({p.head_dim for p, _, _ in data}) for g in OPTION_GROUPS):
        rows, ys = [], []
        for p, c, t in data:
            base = attrs.evolve(c, split_kv_barrier=False, epilogue="registers")
            if p.head_dim != hd or c.persistent or attrs.evolve(base, **option) != c or (p, base) not in times:
                continue
            e0 = cost.estimate(p, c, sms)
            grad = []
            for n in names:
                getattr(cost, n)[hd] = 1000
                grad.append((cost.estimate(p, c, sms) - e0) / 1000 / e0)
                getattr(cost, n)[hd] = 0
            rows.append(grad)
            ys.append(math.log(t / times[p, base]) - math.log(e0 / cost.estimate(p, base, sms)))
        if not rows:
            continue
        a, y = np.array(rows), np.array(ys)
        x = np.linalg.lstsq(a, y, rcond=None)[0]
        waits = [k for k, n in enumerate(names) if n in NONNEGATIVE and x[k] < 0]
        if waits:  # a wait's clocks are >= 0: held at 0, the other rates refitted without it
            keep = [k for k in range(len(names)) if k not in waits]
            x = np.zeros(len(names))
            x[keep] = np.linalg.lstsq(a[:, keep], y, rcond=None)[0]
        for n, v in zip(names, map(float, x)):
            rates[n][hd] = v
        before += list(y)
        after += list(y - a @ x)
    for n, v in saved.items():
        setattr(cost, n, v)
    rms = lambda r: float(np.sqrt(np.mean(np.square(r))))  # noqa: E731
    return rates, rms(before), rms(after)


def persistent_pairs(data):
    """(problem, persistent config, its time, the same config on one CTA an item, its time) in ``data``."""
    import attrs

    times = {(p, c): t for p, c, t in data}
    for (p, c), t in times.items():
        base = attrs.evolve(c, persistent=False)
        if c.persistent and (p, base) in times:
            yield p, c, t, base, times[p, base]


def choice_loss(data) -> float:
    """The measured time of the config ``attention_cost.choose`` ranks first over the fastest timed, geometric mean
    over the shapes whose first choice was timed."""
    sms, shapes = DEVICES["H100"].units, {}
    for p, c, t in data:
        shapes.setdefault(p, {})[c] = t
    chosen = {p: cost.choose(p, sms) for p in shapes}
    losses = [cs[chosen[p]] / min(cs.values()) for p, cs in shapes.items() if chosen[p] in cs]
    return math.exp(sum(map(math.log, losses)) / len(losses)) if losses else float("nan")


def fit_persistent(data) -> tuple:
    """(fitted value, rms now, rms fitted, loss now, loss fitted): ``--persistent``'s search (module docstring): the
    best of a grid of ``PERSISTENT_COARSE`` steps up to twice ``ITEM_CLOCKS``, then of ``PERSISTENT_STEP`` steps
    around it; the one-CTA-an-item estimates (which the rate does not enter) computed once."""
    sms, pairs, now = DEVICES["H100"].units, list(persistent_pairs(data)), cost.PERSISTENT_ITEM_CLOCKS
    base = [math.log(t / tb) + math.log(cost.estimate(p, b, sms)) for p, _, t, b, tb in pairs]

    def rms(value):
        cost.PERSISTENT_ITEM_CLOCKS = value
        r = [y - math.log(cost.estimate(p, c, sms)) for y, (p, c, *_) in zip(base, pairs)]
        return math.sqrt(sum(x * x for x in r) / len(r))

    try:
        coarse = min(range(PERSISTENT_COARSE, 2 * cost.ITEM_CLOCKS, PERSISTENT_COARSE), key=rms)
        best = min(range(max(PERSISTENT_STEP, coarse - PERSISTENT_COARSE), coarse + PERSISTENT_COARSE + 1,
                         PERSISTENT_STEP), key=rms)
        out = (best, rms(now), rms(best))
        cost.PERSISTENT_ITEM_CLOCKS = now
        loss_now = choice_loss(data)
        cost.PERSISTENT_ITEM_CLOCKS = best
        return out + (loss_now, choice_loss(data))
    finally:
        cost.PERSISTENT_ITEM_CLOCKS = now


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--options", action="store_true", help="fit the kernel options' rates (OPTION_RATES)")
    ap.add_argument("--persistent", action="store_true", help="fit PERSISTENT_ITEM_CLOCKS")
    args = ap.parse_args(argv)
    here = os.path.dirname(__file__)
    default = OPTION_RUNS if args.options else PERSISTENT_RUNS if args.persistent else RUNS
    runs = args.runs or [os.path.join(here, r) for r in default]
    if args.persistent:
        best, rms_now, rms_best, loss_now, loss_best = fit_persistent(load(runs))
        print(f"persistent pairs: rms {rms_now:.4f} at PERSISTENT_ITEM_CLOCKS = {cost.PERSISTENT_ITEM_CLOCKS}, "
              f"{rms_best:.4f} at {best}; choice loss geo {loss_now:.4f} -> {loss_best:.4f}")
        return 0
    if args.options:
        rates, before, after = fit_options(load(runs))
        print(f"option pairs: rms {before:.4f} without the rates, {after:.4f} with them")
        for name, by_dim in rates.items():
            print(f"  {name} = {{{', '.join(f'{hd}: {v:.4g}' for hd, v in sorted(by_dim.items()))}}}")
        return 0
    data, clock = load(runs), DEVICES["H100"].clock_hz
    print(f"{len(data)} timings; now: rms %.3f, choice loss geo %.3f, worst %.3f" % scores(data, clock))
    search(data, clock, args.rounds)
    print("fitted: rms %.3f, choice loss geo %.3f, worst %.3f" % scores(data, clock))
    for name, get, _ in knobs():
        print(f"  {name} = {get():.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
