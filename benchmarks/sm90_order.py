"""The sm90 GEMM's persistent tile order (``Sm90Config.group_m``, ``raster``; ``kernels.sm90.gemm_order``, issue 36)
timed against itself and cuBLAS on an H100, each beside its modelled DRAM bytes of A and B.

    python3 benchmarks/sm90_order.py --out $OUT [--ms 3000[,768]] [--ranks g16,model] [--models ...] [--no-square]
    python3 benchmarks/sm90_order.py --model-only [--ms 3000,768]       (no GPU: the jobs and their modelled bytes)

For 4096^3 (plain and with a fused ``residual``, unless ``--no-square``) and each LLM projection of
``torch_gemm.MODELS`` (bf16, ``nt``, bf16 C) at each M of ``--ms``: the static kernel at the cost model's config
(``gemm.plan(problem, "sm90")``, its order ``group_m`` 8, ``raster`` "m": rank ``g8``) and the same config in the
orders ``g4``, ``g16`` (``group_m`` 4 / 16), ``n8`` (``raster="n"``, 8 tile columns a group) and ``model``
(``gemm_order.best_order``: the least modelled bytes), each only where its modelled bytes differ from ``g8``'s (the
same bytes: nothing for the model to learn) and its config from the others' (the projections: only ``--ranks``,
default ``g16,model``, beside ``g8``). Built in ``benchmarks/sm90_gemm.py``'s
spawned pool, checked once against torch's product and timed with CUDA graphs over input sets beyond the L2 beside
``torch.mm`` (``torch.addmm`` with the residual) in the same run (``sm90_clusters.run``). Rows go to
``$OUT/sm90_order.json``; the table (``$OUT/sm90_order.md``, printed last): per shape and order the modelled MB, us,
cuBLAS us, and the time over ``g8``'s; then per rank the geometric mean over the shapes it ran of g8 / it.
"""

from __future__ import annotations

import json
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

RANKS = {"g4": dict(group_m=4), "g16": dict(group_m=16), "n8": dict(group_m=8, raster="n")}
"""The fixed orders timed beside ``g8`` (the config's own) and the model's (``model``)."""


def order_jobs(args):
    """The build jobs (``sm90_gemm._build``'s: key, problem args, config dict) and each key's modelled MB of A and B."""
    import attrs

    from sm90_clusters import shapes
    from tvm_cdna4.kernels import devices, gemm
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90 import gemm_order

    device = devices.planned("sm80") if not args.model_only else devices.DEVICES[args.device]
    todo, modelled = [], {}
    for label, M, N, K, residual in shapes(args):
        fusion = Fusion(residual=True) if residual else Fusion()
        p = gemm.plan(gemm.GemmProblem(M, N, K, "bf16", "nt", "bf16", fusion), "sm90", sms=device.units)
        base, args_ = p.config, (M, N, K, "bf16", "bf16", fusion)
        rows, cols = (N, M) if base.swap_ab else (M, N)

        def mb(cfg):
            return round(gemm_order.order_bytes(cfg, rows, cols, K, p.ctas, device.l2_bytes) / 1e6, 1)

        variants = {"g8": base, **{rank: attrs.evolve(base, **f) for rank, f in RANKS.items()},
                    "model": gemm_order.best_order(base, rows, cols, K, p.ctas, device.l2_bytes)}
        seen, ranks = [], ("g4", "g16", "n8", "model") if label.startswith("4096^3") else args.ranks
        for rank, cfg in variants.items():
            if rank != "g8" and (rank not in ranks or mb(cfg) == mb(base) or cfg in seen):
                continue
            seen.append(cfg)
            todo.append(((label, M, rank), args_, attrs.asdict(cfg)))
            modelled[(label, M, rank)] = mb(cfg)
    return todo, modelled


def order_of(cfg: dict) -> str:
    return f"{cfg['raster']}{cfg['group_m']}"


def summary(rows) -> list[str]:
    """Per shape and order: modelled MB, us, cuBLAS us, g8 / it; then the geometric means per rank."""
    from sm90_clusters import tile

    by_shape, lines = {}, ["| shape | M | tile | rank | order | modelled A+B MB | us | cuBLAS us | g8 / this | "
                           "cuBLAS / this |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        by_shape.setdefault((r["shape"], r["M"]), {})[r["rank"]] = r
    gains = {}
    for (label, M), got in by_shape.items():
        g8 = got.get("g8", {}).get("us") if got.get("g8", {}).get("ok") else None
        for rank, r in got.items():
            if "us" not in r or not r["ok"]:
                lines.append(f"| {label} | {M} | - | {rank} | - | {r.get('mb', '-')} | "
                             f"{'FAIL' if 'us' in r else r.get('error', 'not built')[:60]} | - | - | - |")
                continue
            vs = g8 / r["us"] if g8 else None
            lines.append(f"| {label} | {M} | {tile(r['config'])} | {rank} | {order_of(r['config'])} | {r['mb']} | "
                         f"{r['us']:.1f} | {r['cublas_us']:.1f} | {f'{vs:.3f}' if vs else '-'} | "
                         f"{r['cublas_us'] / r['us']:.3f} |")
            if vs and rank != "g8":
                gains.setdefault(rank, []).append(vs)
    lines += ["", "| rank | shapes | geo-mean g8 / this |", "|---|---|---|"]
    for rank, vals in gains.items():
        lines.append(f"| {rank} | {len(vals)} | {math.exp(sum(map(math.log, vals)) / len(vals)):.3f} |")
    return lines


def main(argv=None) -> int:
    from sm90_clusters import parser

    ap = parser("3000", "modelled bytes")
    ap.add_argument("--ranks", type=lambda v: tuple(x for x in v.split(",") if x), default=("g16", "model"),
                    help="the orders timed beside g8 on the projections (4096^3: all of g4, g16, n8, model)")
    args = ap.parse_args(argv)
    todo, modelled = order_jobs(args)
    if args.model_only:
        from sm90_clusters import tile

        for key, _, cfg in todo:
            print(key, tile(cfg), order_of(cfg), modelled[key], "MB of A and B (modelled)")
        return 0
    import torch

    from sm90_clusters import run
    from sm90_gemm import build_all

    built = build_all(todo, args.workers, args.build_s)
    with open(os.path.join(args.out, "sm90_order_checks.jsonl"), "w") as log:
        rows = [{**r, "mb": modelled[(r["shape"], r["M"], r["rank"])]} for r in run(todo, built, log)]
    device = torch.cuda.get_device_name()
    with open(os.path.join(args.out, "sm90_order.json"), "w") as f:
        json.dump({"device": device, "rows": rows}, f, indent=1)
    table = summary(rows)
    with open(os.path.join(args.out, "sm90_order.md"), "w") as f:
        f.write("\n".join([device, "", *table, ""]))
    print(*table, sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
