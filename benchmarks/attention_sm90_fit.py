"""Fit the sm90 attention cost model (``kernels.sm90.attention_cost``: ``FITTED`` and ``EXPOSED``) to H100 timings of
its configs; CPU only.

    python benchmarks/attention_sm90_fit.py [--runs FILE ...] [--rounds 5]
    python benchmarks/attention_sm90_fit.py --options [--runs FILE ...]
    python benchmarks/attention_sm90_fit.py --persistent [--runs FILE ...]
    python benchmarks/attention_sm90_fit.py --consumers [--runs FILE ...]

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

``--consumers``: ``attention_cost.CONSUMER_EXPOSED[3]`` and ``PINGPONG_LAG[3]``, from ``benchmarks/attention_sm90.py
--configs consumers`` JSON (default ``CONSUMER_RUNS``): each three-consumer config against the same config with two
(``consumer_pairs``); the pair (a grid of ``CONSUMER_STEP`` over 0 .. 1, each of ``CONSUMER_LAGS``) that minimizes the
rms of the log of their measured time ratio over the model's. Prints the rms at the priors and at each lag's best,
then, with ``attention_cost.WEIGH_CONSUMERS`` off and on,
the model's choice against the fastest timed config per shape (times: the geometric mean over the runs that timed
the shape) and how many shapes' choice is within ``CONSUMER_TOLERANCE`` of it.
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
CONSUMER_RUNS = ("runs/attention_sm90_3wg_h100_2026-12-07b.json", "runs/attention_sm90_3wg_16k_h100_2026-12-07b.json")
"""The H100 runs of three consumer warpgroups beside two (2026-12-07, ``gpu_stop45.sh stop49`` / ``attn3wg``): D 64, 8 x
2k and 4 x 4k tokens (in both runs) and 1 x 16k, 32 / 32 and 32 / 8 heads, causal or not; ping-pong, 3 stages, 64 /
128 keys at three consumers, persistent and not."""
CONSUMER_STEP = 0.05
CONSUMER_LAGS = (1, 2)
"""``PINGPONG_LAG[3]``'s readings: three consumers' ping-pong holding as many stages as two consumers', or one more."""
CONSUMER_TOLERANCE = 1.02
"""``--consumers``' count: a choice whose measured time is within this factor of the fastest timed config's (the
noise: cuDNN's own time moved 2-6 % between runs of one shape)."""
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
                    if cost.registers(p, c) <= cost.REGS[c.consumers][1]:
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


def consumer_pairs(data):
    """(problem, three-consumer config, its time, the same config with two consumers, its time) in ``data`` (one
    run's): 128-key tiles (two consumers' 64-key tiles were not timed; their error is the narrow S wgmma's, a rate of
    both counts)."""
    import attrs

    times = {(p, c): t for p, c, t in data}
    for (p, c), t in times.items():
        base = attrs.evolve(c, consumers=cost.CONSUMERS)
        if c.consumers != cost.CONSUMERS and (p, base) in times:
            yield p, c, t, base, times[p, base]


def fit_consumers(pairs) -> tuple:
    """(rms at the priors, {lag: (best ``CONSUMER_EXPOSED[3]``, its rms)}): ``--consumers``' grid (module
    docstring) over ``consumer_pairs``."""
    sms, now = DEVICES["H100"].units, (cost.CONSUMER_EXPOSED[3], cost.PINGPONG_LAG[3])
    base = [math.log(t / tb) + math.log(cost.estimate(p, b, sms)) for p, _, t, b, tb in pairs]

    def rms(value, lag):
        cost.CONSUMER_EXPOSED[3], cost.PINGPONG_LAG[3] = value, lag
        r = [y - math.log(cost.estimate(p, c, sms)) for y, (p, c, *_) in zip(base, pairs)]
        return math.sqrt(sum(x * x for x in r) / len(r))

    try:
        grid = [round(k * CONSUMER_STEP, 6) for k in range(round(1 / CONSUMER_STEP) + 1)]
        fits = {}
        for lag in CONSUMER_LAGS:
            best = min(grid, key=lambda v: rms(v, lag))
            fits[lag] = (best, rms(best, lag))
        return rms(*PRIOR_CONSUMERS), fits
    finally:
        cost.CONSUMER_EXPOSED[3], cost.PINGPONG_LAG[3] = now


PRIOR_CONSUMERS = (0.5, 2)
"""``CONSUMER_EXPOSED[3]`` and ``PINGPONG_LAG[3]`` before the fit (stop 49's priors: half the exposed softmax, the
last consumer a stage further behind)."""


def label(c) -> str:
    """A config in a few words: keys, stages, persistent or grid, consumers, schedule, epilogue."""
    schedule = "ping-pong" if c.pingpong else "overlap" if c.overlap else "plain"
    return (f"{c.block_kv} keys s{c.stages} {'persistent' if c.persistent else 'grid'} {c.consumers} wg {schedule}"
            + ("" if c.epilogue == "registers" else f" {c.epilogue}"))


def consumer_choices(data, weigh: bool) -> list:
    """(problem, chosen config, fastest timed config, measured time of the choice over the fastest's, or None where
    the choice was not timed) per shape, with ``WEIGH_CONSUMERS`` at ``weigh``: each config's time the geometric mean
    over the runs that timed the shape."""
    sms, shapes, saved = DEVICES["H100"].units, {}, cost.WEIGH_CONSUMERS
    for p, c, t in data:
        shapes.setdefault(p, {}).setdefault(c, []).append(math.log(t))
    cost.WEIGH_CONSUMERS = weigh
    try:
        out = []
        for p, runs in shapes.items():
            times = {c: math.exp(sum(v) / len(v)) for c, v in runs.items()}
            best, chosen = min(times, key=times.get), cost.choose(p, sms, DEVICES["H100"].smem_per_unit)
            out.append((p, chosen, best, times[chosen] / times[best] if chosen in times else None))
        return out
    finally:
        cost.WEIGH_CONSUMERS = saved


def print_consumers(runs) -> None:
    """``--consumers``' output (module docstring): pairs within each run, the choices over all of them."""
    pairs = [pair for run in runs for pair in consumer_pairs(load([run]))]
    rms_prior, fits = fit_consumers(pairs)
    data = load(runs)
    print(f"{len(pairs)} pairs (3 / 2 consumers): rms {rms_prior:.4f} at the priors (CONSUMER_EXPOSED[3], "
          f"PINGPONG_LAG[3]) = {PRIOR_CONSUMERS}; attention_cost: {(cost.CONSUMER_EXPOSED[3], cost.PINGPONG_LAG[3])}")
    for lag, (best, rms) in fits.items():
        print(f"  PINGPONG_LAG[3] = {lag}: CONSUMER_EXPOSED[3] = {best:.2f}, rms {rms:.4f}")
    for weigh in (False, True):
        rows = consumer_choices(data, weigh)
        print(f"WEIGH_CONSUMERS = {weigh}:")
        for p, chosen, fastest, loss in rows:
            shape = f"{p.batch} x {p.seq_q} {p.heads}/{p.kv_heads}{' causal' if p.causal else ''}"
            print(f"  {shape:<24} chose {label(chosen):<38} fastest {label(fastest):<38} "
                  + (f"{loss:.3f}" if loss else "untimed"))
        near = sum(1 for *_, loss in rows if loss and loss <= CONSUMER_TOLERANCE)
        print(f"  the choice within {CONSUMER_TOLERANCE - 1:.0%} of the fastest timed on {near} of {len(rows)} shapes")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="*")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--options", action="store_true", help="fit the kernel options' rates (OPTION_RATES)")
    ap.add_argument("--persistent", action="store_true", help="fit PERSISTENT_ITEM_CLOCKS")
    ap.add_argument("--consumers", action="store_true", help="fit CONSUMER_EXPOSED[3]; the choices at D 64")
    args = ap.parse_args(argv)
    here = os.path.dirname(__file__)
    default = (OPTION_RUNS if args.options else PERSISTENT_RUNS if args.persistent else CONSUMER_RUNS if args.consumers
               else RUNS)
    runs = args.runs or [os.path.join(here, r) for r in default]
    if args.consumers:
        print_consumers(runs)
        return 0
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
