"""Why the sm90 GEMM does less work per clock than cuBLAS on the wide-N shapes at M >= 768 (stop 52, "widen"), and the
A/B that tells: per shape the torch op's bucket plan, the static plan and at most three candidate configs
(``CANDIDATES``), each a static kernel run back to back beside cuBLAS and the torch op at the SM clock and board power
they sustain (``sm90_power.row_for``: random and all-zero operands, the work per clock against the tensor cores' peak at
that clock), each checked against the f32 product first.

    python3 benchmarks/sm90_widen.py --out $OUT [--seconds 1] [--shapes 3000x14336x3584,768x37888x3584]
    python3 benchmarks/sm90_widen.py --model-only [--device H100]       (no GPU: the configs and their model rows)
    python3 benchmarks/sm90_widen.py --model-only --moves 40 [--ms 768,1200,3000,8192]   (and the bucket plans moved)

Each row carries the config's model figures (``model_row``): its tiles, the rounds of ``SMs`` tiles the persistent grid
runs (``ceil(tiles / SMs)``), ``fill`` (the tiles over the rounds' SM-tile slots), ``pad`` (C's area over the
computed tiles' area), ``useful`` = fill x pad (the share of the SM-tile slots doing C's work), the DRAM bytes of A and
B its order reads by ``gemm_order.order_bytes`` (and over A + B read once) and the cost model's estimate. The table
(``$OUT/sm90_widen.md`` / ``.json``, rewritten after each shape) adds the measured per-clock work and its ratio to
cuBLAS's, and the kernels cuBLAS launched (``peer_kernels.kernels_of``: nvjet names carry tile and cluster).

Why these (journal, "Stop 52: widen"): the H200's sustained rows (``runs/sm90_power_h200_2026-12-07d.md``) put ours at
82.0-83.5 % of the per-clock peak per *useful* slot on every shape (85.6 % at K = 18944), so the per-clock deficit on
the wide-N rows is the last round's idle SMs and M's padding: 3000x14336 in the 2561..3072 bucket's 128x256 tiles runs
10.18 rounds as 11 (useful 0.904 against 4096^3's 0.970), 768x37888 6.73 as 7 (0.961), where cuBLAS's H100 kernel at
768 (``nvjet_sm90_tst_192x192_64x4_2x1``) runs 6.00. The tile widths that fill the rounds there (240, 248) are
multiples of 8 that ``gemm_cost.wave_widths`` never offers past ``gemm_cost.MAX_WAVES`` rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # torch_gemm, sm90_power at call time; appended: a
# benchmark script never shadows a module of the tests (tests/contract_fuzz.py beside benchmarks/contract_fuzz.py)

TMA = dict(block_m=128, consumers=2, epilogue="tma")
"""The fields every candidate shares: 128 rows of two consumer warpgroups, C stored through TMA (the plans' own)."""

CANDIDATES = {
    (3000, 14336, 3584): (
        ("w240", dict(TMA, block_n=240, stages=3),
         "the tail: 1440 tiles in 11 rounds, the last 0.91 full (useful 0.964 against the bucket's 0.904 and the "
         "static 128x224's 0.947); the model's choice at M = 3000 where wave_widths reaches 11 rounds"),
        ("w240-m32", dict(TMA, block_n=240, stages=3, group_m=32),
         "w240 in the order of least modelled DRAM bytes (348 MB, 2.80x A + B, against g8's 410 MB, 3.30x): whether "
         "DRAM traffic costs work per clock at the power wall (stop 48's short timings at M = 3000 said no)"),
        ("w240-c2", dict(TMA, block_n=240, stages=3, cluster_m=2),
         "w240 in clusters of two tile rows, B multicast (each CTA pulls 128 + 120 rows from L2, not 128 + 240; "
         "cuBLAS's kernels run 2x1 / 1x2 clusters): whether L2-to-SM traffic costs at the power wall"),
    ),
    (768, 37888, 3584): (
        ("w248", dict(TMA, block_n=248, stages=3),
         "the tail: 918 tiles in 7 rounds, the last 0.95 full (useful 0.992 against 128x256's 0.961: 888 tiles, "
         "the last round 0.73 full); the model's choice, static and for the 513..768 bucket, where wave_widths "
         "reaches 7 rounds"),
        ("s4", dict(TMA, block_n=256, stages=4, epilogue_tile=64),
         "a fourth ring stage beside C staged 64 columns at a time (32 KB, not the whole tile's 64 KB; cuBLAS's "
         "192x192 ring is 4 deep): the tail unchanged"),
        ("c2", dict(TMA, block_n=256, stages=3, cluster_m=2),
         "B multicast to two tile rows (cuBLAS's 2x1 cluster): 128 + 128 rows from L2 a tile, not 128 + 256; "
         "the tail unchanged"),
    ),
    (3000, 37888, 3584): (
        ("m32", dict(TMA, block_n=256, stages=3, group_m=32),
         "control without a tail (26.91 rounds, useful 0.973): the plan in the order of least modelled DRAM bytes "
         "(876 MB, 2.99x, against 1043 MB, 3.56x)"),
    ),
    (768, 14336, 4096): (),  # control: the plan (128x224) runs 2.91 rounds, useful 0.970
}
"""Per (M, N, K): (rank, ``Sm90Config`` fields, why) of each candidate timed beside the plans."""
SHAPES = tuple(CANDIDATES)


def configs(shape, device) -> dict:
    """The configs of ``shape`` by rank: ``bucket`` (the torch op's plan: the dynamic-M bucket holding M, built static
    here; the torch op's own row is ``ours``), ``static`` (the cost model's static choice, where it differs), then
    ``CANDIDATES``'."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config, epilogue_choices, planned_loads

    M, N, K = shape
    out = {"bucket": bucket_config(shape, device)[1]}
    static = planned_loads(epilogue_choices(gemm_cost.choose_config(M, N, K, 2, device), Fusion(), "bf16"))
    if static != out["bucket"]:
        out["static"] = static
    for rank, fields, _ in CANDIDATES.get(tuple(shape), ()):
        out[rank] = Sm90Config(**fields)
    return out


def model_row(cfg, shape, device) -> dict:
    """``cfg``'s model figures on ``shape`` (the module docstring): tile, tiles, rounds, fill, pad, useful, the order's
    modelled A + B bytes and over the floor, the estimate."""
    from tvm_cdna4.kernels.common import ceil_div
    from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_order
    from tvm_cdna4.kernels.sm90.gemm_plan import cluster_units

    M, N, K = shape
    tm, tn = ceil_div(M, cfg.block_m), ceil_div(N, cfg.block_n)
    tiles, sms = tm * tn, device.units
    rounds = ceil_div(cluster_units(tm, tn, cfg.cluster_m, cfg.swap_ab), sms // cfg.cluster_m * cfg.cluster_m)
    fill, pad = tiles / (rounds * sms), M * N / (tm * cfg.block_m * tn * cfg.block_n)
    ab = gemm_order.order_bytes(cfg, M, N, K, min(tiles, sms), device.l2_bytes)
    tile = f"{cfg.block_m}x{cfg.block_n} s{cfg.stages}" + (f" et{cfg.epilogue_tile}" if cfg.epilogue_tile else "") + (
        f" {cfg.raster}{cfg.group_m}") + (f" c{cfg.cluster_m}" if cfg.cluster_m > 1 else "")
    return dict(tile=tile, tiles=tiles, rounds=rounds, fill=fill, pad=pad, useful=fill * pad, ab_mb=ab / 1e6,
                ab_floor=ab / ((M + N) * K * 2), est_us=gemm_cost.estimate(cfg, M, N, K, 2, device).total * 1e6)


def model_lines(shapes, device) -> list[str]:
    """The ``--model-only`` table: every config of every shape with its ``model_row``."""
    out = [f"The configs' model rows on {device.name} ({device.units} SMs)", "",
           "| M | N | K | rank | tile | tiles | rounds | fill | pad | useful | A+B MB | x floor | est us |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for shape in shapes:
        for rank, cfg in configs(shape, device).items():
            r = model_row(cfg, shape, device)
            out.append(f"| {' | '.join(map(str, shape))} | {rank} | {r['tile']} | {r['tiles']} | {r['rounds']} | "
                       f"{r['fill']:.3f} | {r['pad']:.3f} | {r['useful']:.3f} | {r['ab_mb']:.0f} | "
                       f"{r['ab_floor']:.2f} | {r['est_us']:.1f} |")
    return out


def bucket_config(shape, device):
    """The torch op's plan of ``shape``: the dynamic-M bucket holding M and its config."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.sm90 import gemm_dynamic

    M, N, K = shape
    bucket = next(b for b in gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", device) if b.lo <= M <= b.hi)
    return bucket, gemm_dynamic.plan_bucket(bucket, N, K, "bf16", "nt", "bf16", Fusion(), device).config


def moved_lines(max_waves: int, ms, device) -> list[str]:
    """The torch op's bucket plans (``torch_gemm.DEFAULT_MODELS``' projections at each M of ``ms``) that
    ``gemm_cost.MAX_WAVES = max_waves`` moves (``wave_widths`` offering widths that fill up to that many rounds), with
    their model rows before and after (where the config changes): what a torch-op A/B of that setting would time."""
    import torch_gemm
    from tvm_cdna4.kernels.sm90 import gemm_cost

    out = [f"Bucket plans gemm_cost.MAX_WAVES = {max_waves} moves (from {gemm_cost.MAX_WAVES}) on {device.name}", "",
           "| model | proj | M | N | K | bucket | tile | useful | est us | bucket after | tile after | useful | est us |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    default = gemm_cost.MAX_WAVES
    for model in torch_gemm.DEFAULT_MODELS:
        for proj, N, K in torch_gemm.projections(model):
            for M in ms:
                try:
                    before = bucket_config((M, N, K), device)
                    gemm_cost.MAX_WAVES = max_waves
                    after = bucket_config((M, N, K), device)
                finally:
                    gemm_cost.MAX_WAVES = default
                if before[1] != after[1]:  # the config (a bucket's range alone moving runs the same kernel at M)
                    cells = []
                    for b, cfg in (before, after):
                        r = model_row(cfg, (M, N, K), device)
                        cells.append(f"{b.lo}..{b.hi} | {r['tile']} | {r['useful']:.3f} | {r['est_us']:.1f}")
                    out.append(f"| {model} | {proj} | {M} | {N} | {K} | {' | '.join(cells)} |")
    return out


def table(rows, device: str) -> list[str]:
    """Per shape and contender: the model figures and the sustained run's, per clock over cuBLAS's."""
    out = [f"sm90 GEMM configs on wide-N shapes at the clock they sustain, bf16 nt, {device}", "",
           "| M | N | K | contender | tile | rounds | useful | A+B MB | est us | ok | TFLOP/s | SM MHz | W | per clock "
           "| zeros: per clock | per clock / cuBLAS |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    base = {(r["M"], r["N"], r["K"]): r["random_per_clock"] for r in rows if r["contender"] == "cuBLAS"}
    for r in rows:
        m = r.get("model") or {}
        cub = base.get((r["M"], r["N"], r["K"]))
        model = (f"{m['tile']} | {m['rounds']} | {m['useful']:.3f} | {m['ab_mb']:.0f} | {m['est_us']:.1f}" if m
                 else f"{r.get('kernel', '-')} | | | | ")
        out.append(f"| {r['M']} | {r['N']} | {r['K']} | {r['contender']} | {model} | {'y' if r['ok'] else 'NO'} | "
                   f"{r['random_tflops']:.0f} | {r['random_mhz']:.0f} | {r['random_watts']:.0f} | "
                   f"{100 * r['random_per_clock']:.1f} % | {100 * r['zeros_per_clock']:.1f} % | "
                   + (f"{r['random_per_clock'] / cub:.3f} |" if cub else "- |"))
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES), help="MxNxK,...")
    ap.add_argument("--seconds", type=float, default=1.0, help="each sustained run (its second half measured)")
    ap.add_argument("--model-only", action="store_true", help="no GPU: the configs' model rows")
    ap.add_argument("--device", default="H100", help="--model-only: the devices.DEVICES entry planned for")
    ap.add_argument("--moves", type=int, default=0, metavar="MAX_WAVES",
                    help="--model-only: also the torch op's bucket plans gemm_cost.MAX_WAVES = this moves (--ms)")
    ap.add_argument("--ms", default="768,1200,3000,8192", help="--moves: the M of each projection")
    ap.add_argument("--build-seconds", type=float, default=150.0, help="the static kernels' builds, at most")
    ap.add_argument("--out", default=".")
    return ap.parse_args(argv)


def built_kernels(shapes, device, seconds: float) -> dict:
    """Every shape's static kernels by (shape, rank): a launcher ``fn(x, w, y)`` and the config, or the build's error."""
    import attrs

    from sm90_gemm import build_all
    from tvm_cdna4.runtime.cuda import Kernel, load_build

    todo = [((shape, rank), shape, attrs.asdict(cfg)) for shape in shapes for rank, cfg in configs(shape, device).items()]
    built, out = build_all(todo, min(12, os.cpu_count() or 1), seconds), {}
    for key, _, _ in todo:
        value = built[key]
        if isinstance(value, str):
            out[key] = value
            continue
        kernel = Kernel(load_build(value[1]), value[0])
        out[key] = (lambda x, w, y, k=kernel: k.launch(x, w, y), value[0].config)
    return out


def cublas_kernels(torch, shape) -> list[str]:
    """The kernels ``torch.matmul`` launches on ``shape`` (``peer_kernels.kernels_of``)."""
    from peer_kernels import kernels_of

    M, N, K = shape
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
    return [name for name, _ in kernels_of(torch, lambda: torch.matmul(x, w.t())) if "emset" not in name]


def main(argv=None) -> int:
    args = parse(argv)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    from tvm_cdna4.kernels import devices

    if args.model_only:
        print("\n".join(model_lines(shapes, devices.DEVICES[args.device])))
        if args.moves:
            ms = [int(m) for m in args.ms.split(",")]
            print("\n" + "\n".join(moved_lines(args.moves, ms, devices.DEVICES[args.device])))
        return 0
    import torch

    import sm90_power
    import tvm_cdna4.torch as ours

    device, props = devices.planned("sm80"), torch.cuda.get_device_properties(0)
    print("\n".join(model_lines(shapes, device)), flush=True)
    kernels, rows = built_kernels(shapes, device, args.build_seconds), []
    os.makedirs(args.out, exist_ok=True)
    for shape in shapes:
        ranks = configs(shape, device)
        for rank in ranks:
            if isinstance(kernels[(shape, rank)], str):
                print(f"{shape} {rank}: not built: {kernels[(shape, rank)]}", flush=True)
        extra = {rank: kernels[(shape, rank)][0] for rank in ranks if not isinstance(kernels[(shape, rank)], str)}
        names = cublas_kernels(torch, shape)
        new = sm90_power.row_for(torch, ours, shape, args, props.multi_processor_count, extra=extra)
        for r in new:
            cfg = ranks.get("bucket" if r["contender"] == "ours" else r["contender"])
            r.update(model=model_row(cfg, shape, device) if cfg is not None else None, kernel=" ".join(names))
        rows += new
        print("\n".join(table(new, props.name)[4:]), flush=True)
        with open(os.path.join(args.out, "sm90_widen.md"), "w") as f:
            f.write("\n".join(table(rows, props.name)) + "\n\ncuBLAS: " + "; ".join(
                f"{r['M']}x{r['N']}x{r['K']} {r['kernel']}" for r in rows if r["contender"] == "cuBLAS") + "\n")
        with open(os.path.join(args.out, "sm90_widen.json"), "w") as f:
            json.dump(dict(device=props.name, planned=device.name, rows=rows), f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
