"""Fit the sm90 attention cost model (``kernels.sm90.attention_cost``: ``FITTED`` and ``EXPOSED``) to H100 timings of
its configs; CPU only.

    python benchmarks/attention_sm90_fit.py [--runs FILE ...] [--rounds 5]

The timings: ``benchmarks/attention_sm90.py --configs sweep`` JSON files (each shape's TFLOP/s per config; default
the 2026-12-06 H100 sweep). Configs past the consumers' registers (``attention_cost.registers``, not candidates) are
left out. A coordinate search (each rate scaled by a ladder of factors in turn, the best kept, ``--rounds`` passes)
minimizes the rms of ``log(measured / estimate)`` (clocks at the H100's ``DeviceSpec`` clock) plus twice the log of
the choice's loss (the measured time of the config the model ranks first over the fastest timed, geometric mean
over the shapes). Prints the rates, the rms and the loss; the values in ``attention_cost`` are these, rounded.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="*", default=[os.path.join(os.path.dirname(__file__), r) for r in RUNS])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    data, clock = load(args.runs), DEVICES["H100"].clock_hz
    print(f"{len(data)} timings; now: rms %.3f, choice loss geo %.3f, worst %.3f" % scores(data, clock))
    search(data, clock, args.rounds)
    print("fitted: rms %.3f, choice loss geo %.3f, worst %.3f" % scores(data, clock))
    for name, get, _ in knobs():
        print(f"  {name} = {get():.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
