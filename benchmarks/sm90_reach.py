"""Where the dynamic-M sm90 GEMM's switches move the torch op's buckets, per model projection; CPU only (the cost model).

    python benchmarks/sm90_reach.py [--models all] [--switches fine_cuts,zero_fill,trim_loads,zero_fill+trim_loads]
                                    [--device H100] [--buckets] [--out FILE]

For each projection of ``torch_gemm.MODELS`` (``--models``: ``all`` by default, or names) the bucket plans the torch op
makes (``gemm_dynamic.dynamic_buckets`` and ``plan_bucket``, bf16 ``nt``, no fusion, on ``--device``'s ``DeviceSpec``,
default the H100's) with each switch of ``--switches`` off and on (``torch_gemm.SWITCHES``' options; ``a+b`` sets both;
the other switches at the package's setting): the buckets' count each way and the M ranges whose plan changes (the
config, ``torch_gemm.plan_label`` shown), up to the last bucket. A change of ``Sm90Config.trim_loads`` alone is counted
apart (``TRIM_LOADS`` sets it on every sm90 bucket; the table lists only a changed choice of tile). Then per switch: the
shapes changed, the ranges and where they lie. ``--buckets`` also prints every shape's buckets at the package's
settings. The markdown goes to stdout and to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch_gemm as tg  # beside this script (it puts the repository after PYTHONPATH: a package given there is planned)

SWITCH_SETS = ("fine_cuts", "zero_fill", "trim_loads", "zero_fill+trim_loads")
"""``--switches``' default: the dynamic buckets' levers of stops 51-52 (``torch_gemm.SWITCHES``' options)."""


def bucket_plans(N: int, K: int, device) -> list[tuple[int, int, object]]:
    """``(lo, hi, plan)`` of each bucket the torch op makes for the bf16 ``nt`` projection (N, K) on ``device``, at the
    switches set now."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90.gemm_dynamic import dynamic_buckets, plan_bucket

    return [(b.lo, b.hi, plan_bucket(b, N, K, "bf16", "nt", "bf16", Fusion(), device))
            for b in dynamic_buckets(N, K, "bf16", "bf16", device)]


def choice(plan):
    """A plan's config without ``trim_loads`` (the tile choice the table compares)."""
    import attrs

    cfg = plan.config
    return attrs.evolve(cfg, trim_loads=False) if hasattr(cfg, "trim_loads") else cfg


def changes(off: list, on: list) -> tuple[list, int]:
    """The M ranges whose plan's choice differs between two bucket lists of one shape, ``(lo, hi, off's plan, on's
    plan)`` (adjacent ranges of the same two plans joined), and the buckets whose plan differs in ``trim_loads`` only."""
    edges = sorted({hi for _, hi, _ in off} | {hi for _, hi, _ in on})
    out, lo, trim_only = [], 1, 0
    for hi in edges:
        a = next(p for blo, bhi, p in off if blo <= hi <= bhi)
        b = next(p for blo, bhi, p in on if blo <= hi <= bhi)
        if choice(a) != choice(b):
            if out and out[-1][1] == lo - 1 and choice(out[-1][2]) == choice(a) and choice(out[-1][3]) == choice(b):
                out[-1] = (out[-1][0], hi, a, b)
            else:
                out.append((lo, hi, a, b))
        lo = hi + 1
    on_of = {(blo, bhi): b for blo, bhi, b in on}
    for alo, ahi, a in off:
        b = on_of.get((alo, ahi))
        trim_only += b is not None and a.config != b.config and choice(a) == choice(b)
    return out, trim_only


def reach(models, switch_sets, device) -> list[dict]:
    """Per switch set and shape: the buckets off / on, the changed ranges (``changes``) and the trim-only count."""
    defaults = tg.switch_values()
    rows = []
    try:
        for ss in switch_sets:
            for model, proj, N, K in tg.selected(models):
                got = {}
                for s in ("off", "on"):
                    tg.set_switches({o: s for o in ss.split("+")})
                    got[s] = bucket_plans(N, K, device)
                tg.restore_switches(defaults)
                ranges, trim_only = changes(got["off"], got["on"])
                rows.append(dict(switch=ss, model=model, proj=proj, N=N, K=K, off=len(got["off"]), on=len(got["on"]),
                                 ranges=ranges, trim_only=trim_only))
    finally:
        tg.restore_switches(defaults)
    return rows


def span(lo: int, hi: int, N: int) -> str:
    """A range of M in a cell: ``lo+`` for the last bucket (to ``dynamic_m.m_limit(N)``)."""
    from tvm_cdna4.kernels.gemm.dynamic_m import m_limit

    return f"{lo}+" if hi >= m_limit(N) else f"{lo}-{hi}"


def table(rows) -> list[str]:
    """The changed shapes (one line each: their ranges, off's plan -> on's), then per switch set the summary."""
    out = ["| switch (off -> on) | model | proj | N | K | buckets off / on | M: plan off -> on |", "|" + "---|" * 7]
    for r in rows:
        if not r["ranges"]:
            continue
        cells = "; ".join(f"{span(lo, hi, r['N'])}: {tg.plan_label(a)} -> {tg.plan_label(b)}"
                          for lo, hi, a, b in r["ranges"])
        out.append(f"| {r['switch']} | {r['model']} | {r['proj']} | {r['N']} | {r['K']} | {r['off']} / {r['on']} | "
                   f"{cells} |")
    out += ["", "| switch | shapes changed | ranges | M rows changed (<= 8192) | where (lo of each range) | "
            "trim flag only (buckets) |", "|" + "---|" * 6]
    for ss in dict.fromkeys(r["switch"] for r in rows):
        sub = [r for r in rows if r["switch"] == ss]
        ranges = [x for r in sub for x in r["ranges"]]
        rows_changed = sum(min(hi, 8192) - lo + 1 for lo, hi, _, _ in ranges if lo <= 8192)
        where = ", ".join(str(lo) for lo in sorted({lo for lo, _, _, _ in ranges})) or "-"
        out.append(f"| {ss} | {sum(bool(r['ranges']) for r in sub)} of {len(sub)} | {len(ranges)} | {rows_changed} | "
                   f"{where} | {sum(r['trim_only'] for r in sub)} |")
    return out


def bucket_table(models, device) -> list[str]:
    """``--buckets``: every shape's buckets at the package's settings, ``lo-hi plan`` each."""
    out = ["| model | proj | N | K | buckets (M: plan) |", "|---|---|---|---|---|"]
    for model, proj, N, K in tg.selected(models):
        cells = ", ".join(f"{span(lo, hi, N)} {tg.plan_label(p)}" for lo, hi, p in bucket_plans(N, K, device))
        out.append(f"| {model} | {proj} | {N} | {K} | {cells} |")
    return out


def main(argv=None) -> int:
    from tvm_cdna4.kernels import devices

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="all", help="all, or names of torch_gemm.MODELS")
    ap.add_argument("--switches", default=",".join(SWITCH_SETS),
                    help=f"options of torch_gemm.SWITCHES ({', '.join(tg.SWITCHES)}), a+b for both")
    ap.add_argument("--device", default="H100", choices=[k for k, v in devices.DEVICES.items() if v.target == "sm80"])
    ap.add_argument("--buckets", action="store_true", help="also every shape's buckets at the package's settings")
    ap.add_argument("--out", default=None, help="the markdown also into this file")
    args = ap.parse_args(argv)
    switch_sets = args.switches.split(",")
    bad = [o for ss in switch_sets for o in ss.split("+") if o not in tg.SWITCHES]
    if bad:
        raise SystemExit(f"--switches: options of {', '.join(tg.SWITCHES)}; found {', '.join(bad)}")
    models, device = tg.model_names(args.models), devices.DEVICES[args.device]
    lines = [f"`python benchmarks/{' '.join([os.path.basename(__file__), *(argv if argv is not None else sys.argv[1:])])}`"
             f" ({device.name}'s DeviceSpec)", "", *table(reach(models, switch_sets, device))]
    if args.buckets:
        lines += ["", *bucket_table(models, device)]
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
