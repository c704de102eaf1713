"""Where the sm90 torch op's time goes at small M, beside cuBLAS's kernel of the same shape; CPU only.

    python benchmarks/small_m_terms.py [--ms 200,96] [--device H200] [--timed PATH]

For each LLM projection of ``torch_gemm.DEFAULT_MODELS`` at each M, two kernels: ours (the torch op's bucket plan,
``gemm_dynamic.plan_bucket`` on ``--device``'s ``DeviceSpec``: the H200's by default, the numbers the H100 runs of
2026-12-06/07 planned with) and cuBLAS's (its ``nvjet`` kernel in ``sm90_sweep.PEERS``, read off the name: the tile of
C^T, tokens as its N; the K split the most of ``gemm_cost.splits`` whose units fill no more than the SMs). For each:
the tiles (rows x columns of the kernel's C), the CTAs, the work units a CTA runs and each one's k-tiles; the padding
of M (the tokens the tiles cover over M); how many tiles read each weight panel (``W reads``: concurrently, one wave,
so the L2 serves all but the first); the ring's bytes (stages x stage); the busiest CTA's tensor time at the dense
peak (``gemm_cost.TENSOR_FLOPS_PER_CLK`` at the H100's sustained ``CLOCK_HZ``); the DRAM floor (weights, x, y and a
split's f32 workspace written and read once, at ``--timed``'s read rate); the L2-to-SM bytes a CTA pulls and the
rate it needs to finish at the floor against the rate it ran at (``--timed``'s ``off`` time for ours, its cuBLAS
time for cuBLAS's; none where ``--device``'s plan is not the one timed); the model's estimate (``gemm_cost.estimate``
on the H100's ``DeviceSpec``: cuBLAS's tile in our swapped kernel, its cluster left out) and the measured time. The table is markdown (docs/sm90_gemm.md "Small M
against cuBLAS"), then ``model_check``'s: the estimate against the static timings at those M."""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]

TIMED = os.path.join(HERE, "runs", "torch_gemm_swapdyn_h100_2026-12-07.json")
"""The torch op beside torch.matmul on an H100 at M = 96 / 200 (``torch_gemm.py --swap-dynamic off,on``; ``off``: the
unswapped bucket plans)."""
RATE_RUN = os.path.join(HERE, "runs", "torch_gemm_swap_widths_small_h100_2026-12-06e.json")
"""A run whose ``meta.read_rate`` is the H100's measured read rate (``torch_gemm.read_rate``: a 4 GiB sum)."""
CLOCK_HZ = 1.755e9
"""The H100 SXM's SM clock under a long tensor load (its 700 W cap; ncu read 1.78 GHz on the M = 200 QKV kernel, the
datasheet's boost is ``DeviceSpec.clock_hz``): the tensor column's clock, not the model's."""


def kernel_terms(M: int, N: int, K: int, cfg, measured_us: float, rate: float, sms: int) -> dict:
    """The columns of one kernel (the module docstring) for ``cfg`` (a ``Sm90Config``) on (M, N, K), bf16, on ``sms``
    SMs."""
    from tvm_cdna4.kernels.common import ceil_div
    from tvm_cdna4.kernels.sm90 import gemm_cost
    from tvm_cdna4.kernels.sm90.gemm_plan import BLOCK_K

    rows, cols = (N, M) if cfg.swap_ab else (M, N)
    tm, tn = ceil_div(rows, cfg.block_m), ceil_div(cols, cfg.block_n)
    units = tm * tn * cfg.split_k
    ctas = min(units, sms)
    per, k_tiles = ceil_div(units, ctas), ceil_div(ceil_div(K, BLOCK_K), cfg.split_k)
    workspace = 2 * cfg.split_k * M * N * gemm_cost.WORKSPACE_BYTES if cfg.split_k > 1 else 0
    floor = (2 * (N * K + M * K + M * N) + workspace) / rate
    cta_bytes = per * cfg.stage_bytes() * k_tiles
    tensor = per * cfg.block_m * cfg.block_n * k_tiles * BLOCK_K * 2 / (gemm_cost.TENSOR_FLOPS_PER_CLK * CLOCK_HZ)
    return dict(tiles=f"{tm}x{tn}", ctas=ctas, units=per, k_tiles=k_tiles,
                pad=(tn * cfg.block_n if cfg.swap_ab else tm * cfg.block_m) / M, w_reads=tn if cfg.swap_ab else tm,
                ring_kb=cfg.stages * cfg.stage_bytes() / 1024, tensor_us=tensor * 1e6, floor_us=floor * 1e6,
                workspace_mb=workspace / 1e6, cta_mb=cta_bytes / 1e6, need_gbs=cta_bytes / floor / 1e9,
                ran_gbs=cta_bytes / (measured_us * 1e-6) / 1e9 if measured_us else None, measured_us=measured_us)


def peer_config(name: str, M: int, N: int, K: int, device):
    """cuBLAS's kernel ``name`` as our swapped config (``sm90_sweep.peer_configs``'s ``"peer"``) at cuBLAS's stage
    count, and whether our kernel has it; where it has not (96 rows a consumer), the same tile unchecked with one consumer and
    no split, for its counts only."""
    from sm90_sweep import PEER_NAME, peer_configs
    from tvm_cdna4.kernels.sm90.gemm_plan import Sm90Config

    import attrs

    bm, bn, stages = (int(v) for v in PEER_NAME.search(name).groups()[:3])
    found = peer_configs(name, M, N, K, device)
    if found:  # at cuBLAS's ring depth (the estimate does not count the stages)
        return attrs.evolve(found[0][1], stages=stages), True
    return Sm90Config(bm, bn, stages, 1, swap_ab=True, split_k=1), False


def table(ms, device_name: str, timed: str) -> list[str]:
    from sm90_sweep import peer_kernel
    from torch_gemm import DEFAULT_MODELS, bucket_plan, plan_label, selected
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    device, h100 = devices.DEVICES[device_name], devices.DEVICES["H100"]
    with open(timed) as f:
        runs = {(r["model"], r["proj"], r["M"]): r for r in json.load(f)["rows"]}
    with open(RATE_RUN) as f:
        rate = json.load(f)["meta"]["read_rate"]
    out = [f"Plans on the {device.name} DeviceSpec; read rate {rate / 1e12:.2f} TB/s; tensor at "
           f"{CLOCK_HZ / 1e9:.3f} GHz; model: gemm_cost.estimate on the H100's", "",
           "| shape | kernel | tile | tiles | CTAs | units/CTA | k-tiles/unit | M pad | W reads | ring KB | "
           "tensor µs | DRAM floor µs | split ws MB | L2->SM MB/CTA | GB/s/CTA needed | GB/s/CTA ran | model µs | "
           "measured µs |",
           "|---" * 18 + "|"]
    for M in ms:
        for model, proj, N, K in selected(DEFAULT_MODELS):
            run = runs.get((model, proj, M))
            name = peer_kernel(model, proj, M)
            if run is None or name is None:
                continue
            ours = bucket_plan(N, K, M, device)
            theirs, ours_kernel = peer_config(name, M, N, K, h100)
            tile = name.split("_tst_")[1].split("_TNT")[0]
            ran = plan_label(ours) == run["plan_off"]  # the timed plan (another --device's may differ)
            for who, cfg, label, us, est in (
                    ("ours", ours.config, plan_label(ours), run["ours_off_us"] if ran else None, True),
                    ("cuBLAS", theirs, tile, run["cublas_us"], ours_kernel)):
                t = kernel_terms(M, N, K, cfg, us, rate, h100.units)
                model_us = f"{gemm_cost.estimate(cfg, M, N, K, 2, h100).total * 1e6:.1f}" if est else "-"
                ran_cells = f"{t['ran_gbs']:.0f} | {model_us} | {us:.1f} |" if us else f"- | {model_us} | - |"
                out.append(f"| {model} {proj} M={M} | {who} | {label} | {t['tiles']} | {t['ctas']} | {t['units']} | "
                           f"{t['k_tiles']} | {t['pad']:.2f} | {t['w_reads']} | {t['ring_kb']:.0f} | "
                           f"{t['tensor_us']:.1f} | {t['floor_us']:.1f} | {t['workspace_mb']:.1f} | {t['cta_mb']:.2f} | "
                           f"{t['need_gbs']:.0f} | " + ran_cells)
    return out


STATIC = tuple(os.path.join(HERE, "runs", f) for f in (
    "sm90_sweep_h100_2026-12-06.json", "sm90_waves_small_h100_2026-12-06f.json", "sm90_swap_ab_h100_2026-12-06d.json"))
"""The static-M timings of ``benchmarks/sm90_sweep.py`` on an H100 (2026-12-06: the model's first configs, the
wave-fitting widths, the swapped configs) that ``model_check`` reads at the table's M."""


def model_check(ms) -> list[str]:
    """The estimate (``gemm_cost.estimate``, the H100's ``DeviceSpec``) against the static timings at ``ms``
    (``STATIC``, each config's fastest; the torch op's are the table's rows), by kind of config: the geometric mean of
    estimate / measured, the rms of its log and the worst (markdown)."""
    import math

    from sm90_fit import swap_timings
    from tvm_cdna4.kernels import devices
    from tvm_cdna4.kernels.sm90 import gemm_cost

    h100, best = devices.DEVICES["H100"], {}
    for path in STATIC:
        for cfg, M, N, K, us in swap_timings(path):
            if M in ms:
                best[(cfg, M, N, K)] = min(us, best.get((cfg, M, N, K), us))
    logs = [(cfg, math.log(gemm_cost.estimate(cfg, M, N, K, 2, h100).total * 1e6 / us))
            for (cfg, M, N, K), us in best.items()]
    kinds = {"every config": lambda c: True, "swapped": lambda c: c.swap_ab, "K split": lambda c: c.split_k > 1,
             "one consumer": lambda c: c.consumers == 1, "two consumers": lambda c: c.consumers == 2,
             "TMA epilogue": lambda c: c.epilogue == "tma"}
    out = [f"The estimate (H100 DeviceSpec) against the static timings at M = {', '.join(map(str, ms))}", "",
           "| configs | n | geo-mean est/measured | rms (log) | worst |", "|---|---|---|---|---|"]
    for name, keep in kinds.items():
        xs = [x for c, x in logs if keep(c)]
        rms = math.sqrt(sum(x * x for x in xs) / len(xs))
        out.append(f"| {name} | {len(xs)} | {math.exp(sum(xs) / len(xs)):.3f} | {rms:.3f} | "
                   f"{math.exp(max(xs, key=abs)):.3f} |")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default="200,96")
    ap.add_argument("--device", default="H200", help="the DeviceSpec the bucket plans are made for "
                    "(kernels.devices.DEVICES)")
    ap.add_argument("--timed", default=TIMED, help="a torch_gemm.py --swap-dynamic off,on table (JSON) of the same M")
    args = ap.parse_args(argv)
    ms = [int(m) for m in args.ms.split(",")]
    print(*table(ms, args.device, args.timed), "", *model_check(ms), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
