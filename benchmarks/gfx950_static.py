"""Static performance table of the gfx950 GEMM schedules (compiled code + llvm-mca; no GPU).

Run: python benchmarks/gfx950_static.py [--size 4096]
For each dtype's default config (layout nn: A read with wide LDS loads, B with ds_read_tr where the
type has one) prints the main-loop instruction mix, llvm-mca cycles per iteration against the
catalog's MFMA-bound cycles, the MFMA-pipe share, registers, LDS, scratch and waves per SIMD, and
LDS reads per MFMA with ds_read_tr against the per-element ("scalar transpose") path.
These are static estimates from llvm-mca's single-wave model, not measurements.
"""

from __future__ import annotations

import argparse
import time

import attrs

import tvm_cdna4
from tvm_cdna4.kernels.gfx950.gemm import DTYPES, default_config, gfx950_gemm
from tvm_cdna4.kernels.gfx950.mx_gemm import MX_FORMATS, default_mx_config, gfx950_mx_gemm
from tvm_cdna4.report import loop_report


def row(name, func):
    result = tvm_cdna4.build(func)
    info, loop = result.kernel(), loop_report(result.asm)
    lds = loop.mix.get("lds_read", 0) + loop.mix.get("lds_read_tr", 0)
    mca = f"{loop.mca_cycles:.0f}" if loop.mca_cycles else "n/a"
    share = f"{100 * loop.mfma_share:.0f}%" if loop.mfma_share else "n/a"
    return (f"| {name} | {loop.mix.get('mfma', 0)} | {loop.mix.get('lds_read', 0)}+{loop.mix.get('lds_read_tr', 0)}tr | "
            f"{loop.mix.get('global', 0)} | {loop.mix.get('valu', 0)} | {loop.mix.get('waitcnt', 0)} | "
            f"{loop.mfma_bound_cycles} | {mca} | {share} | {info.vgprs}/{info.agprs} | {info.lds_bytes} | "
            f"{info.scratch_bytes} | {info.waves_per_simd()} | {lds / max(loop.mix.get('mfma', 1), 1):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    n = args.size
    print(f"# {time.strftime('%Y-%m-%d')}, {n}^3, layout nn (MX: nt), default configs")
    print("| kernel | MFMA | LDS reads | global | VALU | waitcnt | MFMA-bound cycles | llvm-mca cycles | "
          "MFMA-pipe share | VGPR/AGPR | LDS B | scratch B | waves/SIMD | LDS reads/MFMA |")
    print("|" + "---|" * 15)
    for dtype in DTYPES:
        cfg = default_config(dtype)
        print(row(f"{dtype} {cfg.block_m}x{cfg.block_n}x{cfg.block_k} {cfg.mfma}", gfx950_gemm(n, n, n, dtype, "nn", config=cfg)), flush=True)
    for dtype in ("f16", "bf16"):
        cfg = default_config(dtype)
        for label, variant in (("scalar-transpose path (no ds_read_tr)", attrs.evolve(cfg, transpose_loads=False)),
                               ("32x32 MFMA", attrs.evolve(cfg, mfma="32x32")),
                               ("not interleaved (interleave=False)", attrs.evolve(cfg, interleave=False))):
            print(row(f"{dtype} {label}", gfx950_gemm(n, n, n, dtype, "nn", config=variant)), flush=True)
    for dtype in MX_FORMATS:
        mx = default_mx_config(dtype)
        print(row(f"{dtype} {mx.block_m}x{mx.block_n}x{mx.block_k} 16x16x128", gfx950_mx_gemm(n, n, n, dtype, config=mx)),
              flush=True)


if __name__ == "__main__":
    main()
