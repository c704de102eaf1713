"""The sm90 cost model against the GPU: the model's best configs at medium and large M, each timed.

    python3 benchmarks/sm90_sweep.py --out $OUT [--top 6] [--ms 96,200,768,3000] [--no-hybrid]
    python3 benchmarks/sm90_sweep.py --out $OUT --swap-ab [--swap-top 1] [--ms 32,96,200]
    python3 benchmarks/sm90_sweep.py --out $OUT --widths 224,160 [--ms 768,3000]
    python3 benchmarks/sm90_sweep.py --widths 224,160 --model-only [--ms 768,3000]   (no GPU: the model's table)
    python3 benchmarks/sm90_sweep.py --out $OUT --waves [--ms 96,200,768,3000] [--model-only]
    python3 benchmarks/sm90_sweep.py --out $OUT --swap-clusters [--ms 96,144,200,240] [--projs qkv,o,down] [--model-only]

For each LLM projection of ``torch_gemm.MODELS`` (bf16, ``nt``) and each M of ``--ms``, the ``--top``
configs the cost model ranks first (``gemm_cost.ranked`` on the GPU present: ``devices.planned``; the hybrid
decomposition among them where the model ranks it there) and, unless ``--no-hybrid``, the best-ranked hybrid
config below them (``Sm90Config.decomposition="hybrid"``: the last wave's tiles split; its rank recorded),
or, where the model weighs none, the best with slices of ``--hybrid-min-slice`` k-tiles or more (default 1: the
short slices the model's ``MIN_SLICE_TILES`` keeps it from choosing, so that the timings can refit that rule;
recorded at a rank past every config the model weighs) are built as static-M kernels (``benchmarks/sm90_gemm.py``'s spawned build pool), each checked once against
torch's product, and timed (``sm90_gemm.bench``: CUDA graphs over input copies beyond the L2) beside
``torch.mm`` in the same run. Every row (config, the model's estimate, the measured time, cuBLAS's) goes to
``$OUT/sm90_sweep.json``: the data the model's fitted rates are checked and refitted against
(docs/sm90_gemm.md "Cost model"). The table printed last: per shape, the model's first choice, the fastest
measured config, and cuBLAS.

``--swap-ab`` (default M = 32, 96, 200): per shape, the model's first unswapped choice (rank ``"model"``:
``gemm_cost.ranked(..., swap=False)``) beside the
``--swap-top`` best-estimated swapped configs (``gemm_cost.swap_ab_ranked``: ``Sm90Config.swap_ab``, C^T = B A^T,
ranks ``"swap0"``, ...), each checked and timed as above, into ``$OUT/sm90_swap_ab.json``; the table: the model's
choice, the best swapped config, cuBLAS and their ratios (the timings ``benchmarks/sm90_fit.py --swap`` fits the
swap's terms to, docs/sm90_gemm.md "Swap AB").

``--widths`` (default M = 768, 3000): per shape, the first choice of the model without those tile widths (rank
``"old"``: ``gemm_cost.CANDIDATES`` less ``block_n`` in ``--widths``; the choice before them) beside the
best-ranked config of each width (ranks ``"w224"``, ...; the model's choice now is one of these or the old one),
each checked and timed as above, into ``$OUT/sm90_widths.json``; the table: old, each width, cuBLAS, and the best
width over old (docs/sm90_gemm.md "Tile widths"). ``--model-only`` prints, without a GPU, the model's old and new
choice and estimate per shape, static M and the M's dynamic bucket (``gemm_cost.choose_for_range`` over
``gemm_dynamic.planned_range``: what the torch op runs).

``--waves`` (default M = 96, 200, 768, 3000): per shape, the model's first choice before the wave-fitting widths
(``gemm_cost.wave_widths`` off: ``MAX_WAVES = 0``; rank ``"old"``) and with them (``"new"``), static M, and the same
two for the M's dynamic bucket (``"bucket-old"``, ``"bucket-new"``: ``choose_for_range``, the torch op's plan, built
here as a static-M kernel), one kernel per distinct config (ranks joined by ``=``), each checked and timed beside
cuBLAS into ``$OUT/sm90_waves.json`` (a shape whose four choices are one config is left out unless ``--all``); the table: each choice's time and tile, cuBLAS, and which won
(docs/sm90_gemm.md "Tile widths"). With ``--model-only``: the choices and their estimates, no GPU.

``--peers`` (default M = 200, 96; ``--projs`` keeps the projections named): per shape, the torch op's bucket plan (rank
``"bucket"``, built static), the same where ``gemm_cost.WEIGH_SPLIT_EPILOGUE`` moves it (``"bucket-split"``), the
model's static first choice (``"model"``), and cuBLAS's kernel of the shape (``PEERS``, read off its name: the tile
``block_m x block_n`` of C^T, tokens as wgmma's N, its K split) in our swapped kernel at our deepest ring
(``"peer"``) and at cuBLAS's stage count where that is deeper and fits (``"peer-deep"``; one consumer of 64 rows, two
of 64 or one of 128, the better estimated; no cluster), each checked and timed beside cuBLAS with the model's
estimate, into ``$OUT/sm90_peers.json``: where the estimate is wrong at small M, and how far cuBLAS's tilings go in
our kernel (issue 36's M = 200 rows; docs/sm90_gemm.md "Small M against cuBLAS"). ``--model-only``: the table of
those configs and their estimates, no GPU.

``--swap-clusters`` (default M = 96, 144, 200, 240, ``--projs`` default qkv, o, down): per shape, the swapped kernel at
each tile of ``--swap-tiles`` (default cuBLAS's 64x104/1, 128x104/2, 64x48/1) and at the model's swapped tile
(``gemm_cost.swap_ab_ranked``'s first, ``"model"``), each at the deepest ring, unsplit, alone (``"c1"``) and in
clusters of two token tiles with the weights multicast (``"c2"``: ``Sm90Config(swap_ab=True, cluster_m=2)``; left out
where M is one token tile: the pair's second CTA would load only zeros), each with its estimate, checked and timed beside
cuBLAS into ``$OUT/sm90_swap_clusters.json``; the table: per shape and tile c1, c2, c1 / c2 and both over cuBLAS
(docs/sm90_gemm.md "Clusters"). ``--model-only``: the jobs and their estimates, no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def shapes(models, projs=None):
    from torch_gemm import selected

    return selected(models, projs)


PEERS = os.path.join(HERE, "runs", "peer_kernels_h100_2026-12-06f.json")
"""The kernels cuBLAS ran on the twelve projections (``benchmarks/peer_kernels.py`` on an H100, torch 2.11)."""
PEER_NAME = re.compile(r"_tst_(\d+)x(\d+)_\d+x(\d+)_(\d+)x(\d+)_")
"""An ``nvjet`` kernel's name: its tile (rows of C^T: the weights' N, then tokens), K tile x stages, cluster."""


def peer_kernel(model: str, proj: str, M: int, path: str = PEERS) -> str | None:
    """The name of cuBLAS's GEMM kernel on a shape (``PEERS``), None where none was listed."""
    with open(path) as f:
        for r in json.load(f)["rows"]:
            if r["op"] == "matmul" and (r["model"], r["proj"], r["M"]) == (model, proj, M):
                return next((k for k, _ in r["kernels"] if "nvjet" in k), None)
    return None


def peer_configs(name: str, M: int, N: int, K: int, device) -> list:
    """[(rank, config)]: cuBLAS's tile ``name`` in our swapped kernel (``Sm90Config.swap_ab``: its rows of N one or two
    consumers' of 64 rows or one of 128, the best estimated; ``split_k`` the most of ``gemm_cost.splits`` whose units
    fill no more than the SMs where cuBLAS splits K) at our deepest ring (``"peer"``) and, where cuBLAS's stage count is
    deeper and fits, at it (``"peer-deep"``); none where no such config passes ``Sm90Config.check``."""
    import attrs

    from tvm_cdna4.errors import ContractError
    from tvm_cdna4.kernels.common import ceil_div
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    bm, bn, stages = (int(v) for v in PEER_NAME.search(name).groups()[:3])
    tiles = ceil_div(N, bm) * ceil_div(M, bn)
    fits = [s for s in gemm_cost.splits(M, N, K) if tiles * s <= device.units]
    split = max(fits, default=1) if "splitK" in name else 1
    ring = ceil_div(ceil_div(K, 64), split)
    options = []
    for consumers in (1, 2):
        deepest = gemm_cost.deepest(bm, bn, consumers, device.smem_per_unit, ring)
        cfg = Sm90Config(bm, bn, deepest, consumers, split_k=split, swap_ab=True)
        try:
            cfg.check(device.smem_per_unit)
        except ContractError:
            continue
        options.append((gemm_cost.estimate(cfg, M, N, K, 2, device).total, cfg))
    if not options:
        return []
    cfg = min(options, key=lambda o: o[0])[1]
    out = [("peer", cfg)]
    try:
        deep = attrs.evolve(cfg, stages=stages)
        deep.check(device.smem_per_unit)
        out += [("peer-deep", deep)] if stages > cfg.stages else []
    except ContractError:
        pass
    return out


def peer_jobs(args, device=None) -> list:
    """``--peers``: per shape and M, the bucket plan (and its ``WEIGH_SPLIT_EPILOGUE`` move), the static first choice
    and cuBLAS's tile in our kernel (``peer_configs``), one job per distinct config (ranks joined by ``=``)."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    device, out = device or devices.planned("sm80"), []
    for model, proj, N, K in shapes(args.models.split(","), args.projs.split(",") if args.projs else None):
        for M in map(int, args.ms.split(",")):
            (static, bucket), _ = model_choices(M, N, K, device)
            (_, split), _ = model_choices(M, N, K, device, WEIGH_SPLIT_EPILOGUE=True)
            name = peer_kernel(model, proj, M)
            configs = {}
            for rank, cfg in [("bucket", bucket), ("bucket-split", split), ("model", static),
                              *(peer_configs(name, M, N, K, device) if name else [])]:
                configs.setdefault(cfg, []).append(rank)
            for cfg, ranks in configs.items():
                t = gemm_cost.estimate(cfg, M, N, K, 2, device).total
                out.append(((model, proj, M, N, K, "=".join(ranks), round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
    return out


def peer_summary(rows) -> list[str]:
    """``--peers``: every config timed, its estimate against its time, and cuBLAS's time over it (markdown; a failed
    check leaves its row out), then per M the geometric mean of the estimate's error."""
    from torch_gemm import geomean
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    out = ["| model | proj | M | rank | tile | stages | est µs | µs | est/µs | cuBLAS µs | cuBLAS/ours |",
           "|---" * 11 + "|"]
    logs = {}
    for (model, proj, M, N, K), rs in by_shape(rows).items():
        for r in sorted(rs, key=lambda r: r["us"]):
            cfg = Sm90Config(**r["config"])
            logs.setdefault(M, []).append(r["est_us"] / r["us"])
            out.append(f"| {model} | {proj} | {M} | {r['rank']} | {_tile(cfg)} | {cfg.stages} | {r['est_us']:.1f} | "
                       f"{r['us']:.1f} | {r['est_us'] / r['us']:.2f} | {r['cublas_us']:.1f} | "
                       f"{r['cublas_us'] / r['us']:.2f}x |")
    out += ["", "| M | configs | geo-mean est/µs | min | max |", "|---|---|---|---|---|"]
    for M, v in sorted(logs.items()):
        geo = geomean(v)
        out.append(f"| {M} | {len(v)} | {geo:.3f} | {min(v):.3f} | {max(v):.3f} |")
    return out


def jobs(args):
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    device = devices.planned("sm80")
    out = []
    for model, proj, N, K in shapes(args.models.split(",")):
        for M in map(int, args.ms.split(",")):
            ranked = gemm_cost.ranked(M, N, K, 2, device)
            # the hybrid weighed here whatever the choice does (gemm_cost.WEIGH_HYBRID): this sweep is its timing
            wide = (gemm_cost.ranked(M, N, K, 2, device, min_slice=args.hybrid_min_slice, hybrid=True) if args.hybrid
                    else ranked)
            for rank, (t, cfg) in picks(ranked, args.top, args.hybrid, wide):
                out.append(((model, proj, M, N, K, rank, round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
    return out


def swap_jobs(args):
    """``--swap-ab``: per shape and M, the model's first unswapped choice and the ``--swap-top`` best swapped configs."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    device = devices.planned("sm80")
    out = []
    for model, proj, N, K in shapes(args.models.split(",")):
        for M in map(int, args.ms.split(",")):
            t, cfg = gemm_cost.ranked(M, N, K, 2, device, swap=False)[0]
            out.append(((model, proj, M, N, K, "model", round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
            for i, (t, cfg) in enumerate(gemm_cost.swap_ab_ranked(M, N, K, 2, device)[:args.swap_top]):
                out.append(((model, proj, M, N, K, f"swap{i}", round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
    return out


SWAP_TILES = "64x104/1,128x104/2,64x48/1"
"""``--swap-clusters``' tiles: cuBLAS's swapped tiles at M = 96-256 on the H100 (``PEERS``: ``64x104``, ``128x104``,
``64x48``; rows of N / consumers)."""


def swap_cluster_jobs(args, device=None):
    """``--swap-clusters``: per shape and M, each swapped tile (``SWAP_TILES`` and the model's) with ``cluster_m`` 1 and,
    where M spans two token tiles or more, 2 (ranks ``"64x104/1 c1"``, ...; the model's ``"model 64x200/1 c1"``)."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    device = device or devices.planned("sm80")
    out = []
    for model, proj, N, K in shapes(args.models.split(","), (args.projs or "qkv,o,down").split(",")):
        for M in map(int, args.ms.split(",")):
            tiles = [("", tuple(int(v) for v in t.replace("/", "x").split("x"))) for t in args.swap_tiles.split(",")]
            mine = gemm_cost.swap_ab_ranked(M, N, K, 2, device)[0][1]
            tiles.append(("model ", (mine.block_m, mine.block_n, mine.consumers)))
            for prefix, (bm, bn, consumers) in tiles:
                ring = gemm_cost.deepest(bm, bn, consumers, device.smem_per_unit, -(-K // 64))
                one = Sm90Config(bm, bn, ring, consumers, swap_ab=True)
                for cfg in (one, attrs.evolve(one, cluster_m=2)) if M > bn else (one,):
                    rank = f"{prefix}{bm}x{bn}/{consumers} c{cfg.cluster_m}"
                    t = gemm_cost.estimate(cfg, M, N, K, 2, device).total
                    out.append(((model, proj, M, N, K, rank, round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
    return out


def swap_cluster_summary(rows) -> list[str]:
    """``--swap-clusters``: per shape and tile, c1 and c2 (µs), c1 / c2, each over cuBLAS; the geometric mean of c1 / c2
    per M (markdown; a failed check leaves its row out)."""
    from torch_gemm import geomean

    out = ["| model | proj | M | tile | c1 µs | c2 µs | c1/c2 | cuBLAS µs | cuBLAS/c1 | cuBLAS/c2 |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    ratios = {}
    for (model, proj, M, N, K), rs in by_shape(rows).items():
        at = {r["rank"]: r for r in rs}
        for rank in sorted(r for r in at if r.endswith(" c1")):
            one, two, c = at[rank], at.get(rank[:-1] + "2"), at[rank]["cublas_us"]
            cells = (f"{two['us']:.1f} | {one['us'] / two['us']:.2f}x" if two else "- | -")
            out.append(f"| {model} | {proj} | {M} | {rank[:-3]} | {one['us']:.1f} | {cells} | {c:.1f} | "
                       f"{c / one['us']:.2f}x | " + (f"{c / two['us']:.2f}x |" if two else "- |"))
            if two:
                ratios.setdefault(M, []).append(one["us"] / two["us"])
    out += ["", "| M | pairs | geo-mean c1/c2 | min | max |", "|---|---|---|---|---|"]
    out += [f"| {M} | {len(v)} | {geomean(v):.3f} | {min(v):.2f} | {max(v):.2f} |" for M, v in sorted(ratios.items())]
    return out


def swap_cluster_model_table(args) -> list[str]:
    """``--swap-clusters --model-only``: every job and its estimate on ``--device`` (markdown)."""
    from tvm_cdna4.kernels import devices

    out = [f"{args.device}: the configs --swap-clusters times and their estimates", "",
           "| model | proj | M | rank | stages | est µs |", "|---|---|---|---|---|---|"]
    for (model, proj, M, _, _, rank, est), _, cfg in swap_cluster_jobs(args, devices.DEVICES[args.device]):
        out.append(f"| {model} | {proj} | {M} | {rank} | {cfg['stages']} | {est} |")
    return out


def without_widths(widths):
    """``gemm_cost.CANDIDATES`` less the tiles ``block_n`` in ``widths`` (the candidates before them)."""
    from tvm_cdna4.kernels.sm90 import gemm_cost

    return tuple(c for c in gemm_cost.CANDIDATES if c[1] not in widths)


def width_jobs(args):
    """``--widths``: per shape and M, the old model's first choice and the best-ranked config of each width."""
    import attrs

    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    device, widths, out = devices.planned("sm80"), tuple(map(int, args.widths.split(","))), []
    for model, proj, N, K in shapes(args.models.split(",")):
        for M in map(int, args.ms.split(",")):
            everything = gemm_cost.ranked(M, N, K, 2, device)
            old = [(t, c) for t, c in everything if (c.block_m, c.block_n, c.consumers) in without_widths(widths)]
            firsts = [("old", old[0])] + [(f"w{w}", next(tc for tc in everything if tc[1].block_n == w)) for w in widths]
            for rank, (t, cfg) in firsts:
                out.append(((model, proj, M, N, K, rank, round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
    return out


WAVE_RANKS = ("old", "new", "bucket-old", "bucket-new")


def model_choices(M: int, N: int, K: int, device, **model) -> tuple:
    """The cost model's choice at a static M and for M's dynamic bucket (``choose_for_range`` over
    ``gemm_dynamic.planned_range`` of the problem's buckets, ``refined`` where ``REFINE_BUCKETS``: the torch op's plan),
    with ``gemm_cost``'s globals set to ``model`` meanwhile (the model before a change: ``CANDIDATES`` without some
    widths, ``MAX_WAVES=0``): ((static, bucket), the bucket)."""
    from tvm_cdna4.kernels.sm90 import gemm_cost, gemm_dynamic

    saved = {name: getattr(gemm_cost, name) for name in model}
    for name, value in model.items():
        setattr(gemm_cost, name, value)
    try:
        bucket = next(b for b in gemm_dynamic.dynamic_buckets(N, K, "bf16", "bf16", device) if M in b)
        return (gemm_cost.choose_config(M, N, K, 2, device), gemm_cost.choose_for_range(
            *gemm_dynamic.planned_range(bucket), N, K, 2, device, m_max=bucket.hi)), bucket
    finally:
        for name, value in saved.items():
            setattr(gemm_cost, name, value)


def wave_choices(M: int, N: int, K: int, device) -> list:
    """``--waves``: [(ranks, estimate s, config)]: the model's choice without the wave-fitting widths and with them,
    static and for M's dynamic bucket (``WAVE_RANKS``), one entry per distinct config (its ranks joined by ``=``)."""
    from tvm_cdna4.kernels.sm90 import gemm_cost

    (old, old_bucket), _ = model_choices(M, N, K, device, MAX_WAVES=0)
    (new, new_bucket), _ = model_choices(M, N, K, device)
    configs = {}
    for rank, cfg in zip(WAVE_RANKS, (old, new, old_bucket, new_bucket)):
        configs.setdefault(cfg, []).append(rank)
    return [("=".join(ranks), gemm_cost.estimate(cfg, M, N, K, 2, device).total, cfg) for cfg, ranks in configs.items()]


def wave_jobs(args, device=None):
    """``--waves``: the jobs of ``wave_choices`` for every shape and M (on ``device``, default the GPU present)."""
    import attrs

    from tvm_cdna4.kernels import devices

    device, out = device or devices.planned("sm80"), []
    for model, proj, N, K in shapes(args.models.split(",")):
        for M in map(int, args.ms.split(",")):
            choices = wave_choices(M, N, K, device)
            if len(choices) == 1 and not getattr(args, "all", False):
                continue  # one config for all four: nothing the wave-fitting widths changed (--all times it too)
            for rank, t, cfg in choices:
                out.append(((model, proj, M, N, K, rank, round(t * 1e6, 2)), (M, N, K), attrs.asdict(cfg)))
    return out


def wave_model_table(args) -> list[str]:
    """``--waves --model-only``: per shape, each choice's tile and estimate (us; markdown, no GPU)."""
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    out = [f"{args.device}: the model's choice before / with the wave-fitting widths (estimates, us)", "",
           "| model | proj | M | N | K | " + " | ".join(WAVE_RANKS) + " |", "|---" * (5 + len(WAVE_RANKS)) + "|"]
    by = {}
    for (model, proj, M, N, K, ranks, us), _, cfg in wave_jobs(args, devices.DEVICES[args.device]):
        for rank in ranks.split("="):
            by.setdefault((model, proj, M, N, K), {})[rank] = f"{_tile(Sm90Config(**cfg))} {us:.1f}"
    for key, cells in by.items():
        out.append("| " + " | ".join(map(str, key)) + " | " + " | ".join(cells[r] for r in WAVE_RANKS) + " |")
    return out


def peer_model_table(args) -> list[str]:
    """``--peers --model-only``: every config ``peer_jobs`` would time and its estimate on ``--device`` (markdown)."""
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    out = [f"{args.device}: the configs --peers times and their estimates", "",
           "| model | proj | M | rank | tile | stages | est µs |", "|---" * 7 + "|"]
    for (model, proj, M, N, K, rank, us), _, cfg in peer_jobs(args, devices.DEVICES[args.device]):
        c = Sm90Config(**cfg)
        out.append(f"| {model} | {proj} | {M} | {rank} | {_tile(c)} | {c.stages} | {us:.1f} |")
    return out


def model_table(args) -> list[str]:
    """``--model-only``: per shape and M, the model's choice and estimate without and with ``--widths``, static and
    for the M's dynamic bucket (markdown; no GPU)."""
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    device, widths = devices.DEVICES[args.device], tuple(map(int, args.widths.split(",")))
    out = [f"{args.device}: the model's choice without / with block_n in {widths} (estimates, us)", "",
           "| model | proj | M | N | K | old | new | est old | est new | old/new | bucket | bucket old | bucket new | "
           "est old | est new | old/new |", "|---" * 16 + "|"]
    for model, proj, N, K in shapes(args.models.split(",")):
        for M in map(int, args.ms.split(",")):
            before, bucket = model_choices(M, N, K, device, CANDIDATES=without_widths(widths))
            picked = [before, model_choices(M, N, K, device)[0]]
            est = [[gemm_cost.estimate(c, M, N, K, 2, device).total * 1e6 for c in pair] for pair in picked]
            out.append(f"| {model} | {proj} | {M} | {N} | {K} | {_tile(picked[0][0])} | {_tile(picked[1][0])} | "
                       f"{est[0][0]:.1f} | {est[1][0]:.1f} | {est[0][0] / est[1][0]:.3f} | {bucket.describe()} | "
                       f"{_tile(picked[0][1])} | {_tile(picked[1][1])} | {est[0][1]:.1f} | {est[1][1]:.1f} | "
                       f"{est[0][1] / est[1][1]:.3f} |")
    return out


def _tile(cfg) -> str:
    split = f" k{cfg.split_k}" if cfg.split_k > 1 else ""
    return f"{cfg.block_m}x{cfg.block_n}/{cfg.consumers} {cfg.epilogue}{split}" + (" swap" if cfg.swap_ab else "")


def picks(ranked, top: int, hybrid: bool = True, wide=()) -> list:
    """(rank, (estimate, config)) of the ``top`` first of ``ranked`` and, with ``hybrid`` and none among them,
    the first hybrid config of ``ranked`` (at its rank) or else of ``wide`` (``ranked`` with shorter slices
    allowed), at ``len(ranked)`` + its rank there: past every config the model weighs."""
    out = list(enumerate(ranked[:top]))
    first = [(i, rc) for i, rc in enumerate(ranked) if rc[1].decomposition == "hybrid"][:1] or [
        (len(ranked) + i, rc) for i, rc in enumerate(wide) if rc[1].decomposition == "hybrid"][:1]
    if hybrid and first and all(cfg.decomposition != "hybrid" for _, (_, cfg) in out):
        out.append(first[0])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--models", default="qwen2.5-7b,gemma-2-9b,phi-3-medium")
    ap.add_argument("--ms", default=None, help="the M values (default 96,200,768,3000; with --swap-ab 32,96,200)")
    ap.add_argument("--swap-ab", action="store_true",
                    help="time the best-estimated swapped configs (Sm90Config.swap_ab) beside the model's choice")
    ap.add_argument("--swap-top", type=int, default=1, help="with --swap-ab: the swapped configs per shape")
    ap.add_argument("--widths", default=None, help="tile widths (block_n, e.g. 224,160) timed beside the model's "
                    "choice without them")
    ap.add_argument("--waves", action="store_true", help="time the model's choice with the wave-fitting widths (gemm_cost."
                    "wave_widths) beside its choice without them, static and the M's bucket")
    ap.add_argument("--all", action="store_true", help="with --waves: also the shapes whose four choices are one config")
    ap.add_argument("--peers", action="store_true", help="time the bucket plan, the model's choice and cuBLAS's tile "
                    "of each shape (PEERS) in our swapped kernel, each beside its estimate")
    ap.add_argument("--swap-clusters", action="store_true", help="time the swapped tiles (--swap-tiles and the model's) "
                    "alone and in clusters of two token tiles (cluster_m=2, the weights multicast) beside cuBLAS")
    ap.add_argument("--swap-tiles", default=SWAP_TILES, help="with --swap-clusters: BMxBN/CONSUMERS tiles of C^T")
    ap.add_argument("--projs", default=None, help="only these projections (qkv,o,gate_up,down; default every one)")
    ap.add_argument("--model-only", action="store_true", help="with --widths or --waves: print the model's table, time nothing")
    ap.add_argument("--device", default="H100", help="with --model-only: the DeviceSpec (kernels.devices.DEVICES)")
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--no-hybrid", dest="hybrid", action="store_false",
                    help="time the --top configs only (not also the best-ranked hybrid below them)")
    ap.add_argument("--hybrid-min-slice", type=int, default=1,
                    help="the shortest K slice (k-tiles) of the extra hybrid config (the model's rule: MIN_SLICE_TILES)")
    ap.add_argument("--workers", type=int, default=min(14, os.cpu_count() or 1))
    ap.add_argument("--build-s", type=float, default=300)
    args = ap.parse_args(argv)
    args.ms = args.ms or ("32,96,200" if args.swap_ab else "768,3000" if args.widths else "200,96" if args.peers
                          else "96,144,200,240" if args.swap_clusters else "96,200,768,3000")
    if args.model_only:
        print(*(swap_cluster_model_table if args.swap_clusters else peer_model_table if args.peers else wave_model_table
                if args.waves else model_table)(args), sep="\n")
        return 0
    import torch

    from sm90_gemm import bench, build_all, check
    from tvm_cdna4.runtime.cuda import Kernel, load_build

    mode = ("swap_ab" if args.swap_ab else "widths" if args.widths else "waves" if args.waves else
            "peers" if args.peers else "swap_clusters" if args.swap_clusters else "sweep")
    todo = {"swap_ab": swap_jobs, "widths": width_jobs, "waves": wave_jobs, "peers": peer_jobs,
            "swap_clusters": swap_cluster_jobs, "sweep": jobs}[mode](args)
    built = build_all(todo, args.workers, args.build_s)
    rows, cublas = [], {}
    name = f"sm90_{mode}"
    with open(os.path.join(args.out, f"{name}_checks.jsonl"), "w") as log:
        for key, shape, _ in todo:
            value = built[key]
            model, proj, M, N, K, rank, est_us = key
            row = dict(model=model, proj=proj, M=M, N=N, K=K, rank=rank, est_us=est_us)
            if isinstance(value, str):
                rows.append({**row, "error": value})
                continue
            p, b, _, cfg = value
            kernel = Kernel(load_build(b), p)
            ok, err = check(kernel, p, (*shape, "bf16", "bf16"), log)
            ours, theirs = bench(kernel, (*shape, "bf16", "bf16"))
            cublas.setdefault((M, N, K), theirs)
            rows.append({**row, "config": cfg, "ok": ok, "err": err, "us": ours * 1e6,
                         "cublas_us": cublas[(M, N, K)] * 1e6})
            print(json.dumps(rows[-1]), flush=True)
            torch.cuda.empty_cache()
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    table = {"swap_ab": swap_summary, "widths": width_summary, "waves": wave_summary, "peers": peer_summary,
             "swap_clusters": swap_cluster_summary, "sweep": summary}[mode](rows)
    with open(os.path.join(args.out, f"{name}.md"), "w") as f:
        f.write("\n".join([torch.cuda.get_device_name(), "", *table, ""]))
    print(*table, sep="\n")
    return 0


def by_shape(rows) -> dict:
    """The rows that ran and passed their check, grouped by (model, proj, M, N, K)."""
    groups = {}
    for r in rows:
        if "us" in r and r["ok"]:
            groups.setdefault((r["model"], r["proj"], r["M"], r["N"], r["K"]), []).append(r)
    return groups


def summary(rows) -> list[str]:
    """Per shape: the model's first choice (its decomposition), the fastest measured, the fastest hybrid, cuBLAS
    (markdown)."""
    out = ["| model | proj | M | N | K | model's choice µs | best measured µs (rank) | best hybrid µs (rank) | cuBLAS µs | "
           "choice/cuBLAS | best/cuBLAS |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, proj, M, N, K), rs in by_shape(rows).items():
        first = min(rs, key=lambda r: r["rank"])
        best = min(rs, key=lambda r: r["us"])
        c = first["cublas_us"]
        hybrids = [r for r in rs if r["config"].get("decomposition") == "hybrid"]
        hyb = min(hybrids, key=lambda r: r["us"]) if hybrids else None
        way = first["config"].get("decomposition", "data-parallel")
        out.append(f"| {model} | {proj} | {M} | {N} | {K} | {first['us']:.1f} ({way}) | {best['us']:.1f} ({best['rank']}) | "
                   + (f"{hyb['us']:.1f} ({hyb['rank']}) | " if hyb else "- | ")
                   + f"{c:.1f} | {c / first['us']:.2f}x | {c / best['us']:.2f}x |")
    return out


def width_summary(rows) -> list[str]:
    """``--widths``: per shape, the old model's choice, each width's best-ranked config, cuBLAS, and the best width's
    speedup over the old choice (markdown; a failed check leaves its row out)."""
    ranks = sorted({r["rank"] for r in rows if r["rank"] != "old"})
    out = ["| model | proj | M | N | K | old µs (tile) | " + " | ".join(f"{w} µs" for w in ranks) + " | cuBLAS µs | "
           "old/cuBLAS | best/cuBLAS | best/old |", "|---" * (10 + len(ranks)) + "|"]
    for (model, proj, M, N, K), rs in by_shape(rows).items():
        old = [r for r in rs if r["rank"] == "old"]
        if not old:
            continue
        at = {r["rank"]: r["us"] for r in rs}
        best, c, o = min(at.values()), old[0]["cublas_us"], old[0]["us"]
        cells = " | ".join(f"{at[w]:.1f}" if w in at else "-" for w in ranks)
        out.append(f"| {model} | {proj} | {M} | {N} | {K} | {o:.1f} ({old[0]['config']['block_n']}) | {cells} | {c:.1f} | "
                   f"{c / o:.2f}x | {c / best:.2f}x | {o / best:.2f}x |")
    return out


def wave_summary(rows) -> list[str]:
    """``--waves``: per shape, each choice's time (its tile), cuBLAS, and which won: the new choice over the old (static
    and bucket), the best of them over cuBLAS (markdown; a failed check leaves its row out)."""
    out = ["| model | proj | M | N | K | " + " | ".join(f"{r} µs (tile)" for r in WAVE_RANKS) + " | cuBLAS µs | "
           "new/old | bucket new/old | best/cuBLAS | winner |", "|---" * (10 + len(WAVE_RANKS)) + "|"]
    for (model, proj, M, N, K), rs in by_shape(rows).items():
        at = {rank: r for r in rs for rank in r["rank"].split("=")}
        if any(rank not in at for rank in WAVE_RANKS):
            continue
        us = {rank: at[rank]["us"] for rank in WAVE_RANKS}
        c = rs[0]["cublas_us"]
        cells = " | ".join(f"{us[r]:.1f} ({at[r]['config']['block_m']}x{at[r]['config']['block_n']})" for r in WAVE_RANKS)
        winner = min([*WAVE_RANKS, "cuBLAS"], key=lambda r: c if r == "cuBLAS" else us[r])
        out.append(f"| {model} | {proj} | {M} | {N} | {K} | {cells} | {c:.1f} | {us['old'] / us['new']:.2f}x | "
                   f"{us['bucket-old'] / us['bucket-new']:.2f}x | {c / min(us.values()):.2f}x | {winner} |")
    return out


def swap_summary(rows) -> list[str]:
    """``--swap-ab``: per shape, the model's choice, the best swapped config (its tile), cuBLAS, and the ratios
    (markdown; a failed check leaves its row out)."""
    out = ["| model | proj | M | N | K | model's choice µs | best swap µs (tile) | cuBLAS µs | model/cuBLAS | "
           "swap/cuBLAS | swap speedup |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, proj, M, N, K), rs in by_shape(rows).items():
        first = [r for r in rs if r["rank"] == "model"]
        swaps = [r for r in rs if r["rank"] != "model"]
        if not first or not swaps:
            continue
        ours, best, c = first[0]["us"], min(swaps, key=lambda r: r["us"]), first[0]["cublas_us"]
        tile = f"{best['config']['block_m']}x{best['config']['block_n']}/{best['config']['consumers']}"
        out.append(f"| {model} | {proj} | {M} | {N} | {K} | {ours:.1f} | {best['us']:.1f} ({tile}) | {c:.1f} | "
                   f"{c / ours:.2f}x | {c / best['us']:.2f}x | {ours / best['us']:.2f}x |")
    return out


if __name__ == "__main__":
    sys.exit(main())
