"""The sm90 GEMM and cuBLAS at large M against the tensor cores' peak at the clock they sustain (issue 36's
"geometric mean >= 1.05x torch.matmul at M >= 768"): each contender runs back to back for a few seconds while
``nvidia-smi`` samples the SM clock and the board power every 20 ms.

Why: a large-M bf16 GEMM on an H100 / H200 SXM runs into the board's power limit, and the SM clock drops to hold it
(on the H200, 2026-11-30, cuBLAS ran at 1425-1485 MHz on random data and 1725 MHz on zeros: the journal's stop-9
record, ``benchmarks/cuda_gemm.py --sustain``). A kernel's speed is then its work per clock times a clock the power
sets. This script prints, per shape and contender: TFLOP/s, the median SM clock and power of the run's second half,
the work per clock as a fraction of the tensor cores' dense peak at that clock (SMs x the cost model's
``gemm_cost.TENSOR_FLOPS_PER_CLK`` x clock),
and the same with all-zero operands (nothing toggles: the power falls, the clock rises where power was what held it).
Reading: where both contenders sit at the power limit and cuBLAS already does ``f`` of the per-clock peak, running
1.05x faster than it needs ``1.05 f`` of it at the same clock, or the same work for 5 % less energy.

    python3 benchmarks/sm90_power.py --out DIR [--shapes 4096x4096x4096,3000x14336x3584] [--seconds 2]

Each contender is checked against the f32 product first (relative Frobenius error within the bf16 tolerance of
``tvm_cdna4.runtime.cuda.tolerance``). Needs an sm_90 GPU and ``nvidia-smi``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from gpu_clocks import sustained_chunks
from tvm_cdna4.kernels.sm90.gemm_cost import TENSOR_FLOPS_PER_CLK

SHAPES = ((4096, 4096, 4096), (8192, 4096, 4096), (3000, 14336, 3584), (8192, 3584, 18944), (768, 37888, 3584))
"""(M, N, K): 4096^3, and projections of the torch-op table at M >= 768 (Qwen2.5-7B gate/up and down; Gemma-2-9B's
14336-wide up half at 3000)."""


def sustained(fn, seconds: float) -> dict:
    """Back-to-back ``fn()`` (a CUDA graph replay) for ``seconds``: the median seconds a replay over chunks of four,
    and the median SM clock (MHz) and board power (W) ``nvidia-smi`` sampled every 20 ms; the first half warm-up."""
    chunks, steady = sustained_chunks(fn, 4, seconds)
    return dict(s=statistics.median(chunks[len(chunks) // 2:]), **steady)


def graph_of(torch, fn, calls: int):
    """A CUDA graph of ``calls`` calls of ``fn`` (warmed on a side stream first) and its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def calls_for(flops: float) -> int:
    """The calls a graph replay holds: about 2 ms of work at 800 TFLOP/s."""
    return max(1, int(2e-3 * 800e12 / flops))


def contenders(torch, ours, x, w, y):
    return {"ours": lambda: ours.gemm(x, w, out=y), "cuBLAS": lambda: torch.matmul(x, w.t(), out=y)}


def row_for(torch, ours, shape, args, sms: int, device: str = "cuda", extra=None) -> list[dict]:
    """The rows of one shape: each contender (``contenders``, then ``extra``'s: name -> ``fn(x, w, y)``, e.g. static
    kernels of other configs, ``benchmarks/sm90_widen.py``) checked, then run sustained on random and on all-zero
    operands."""
    from tvm_cdna4.runtime.cuda import tolerance

    M, N, K = shape
    g = torch.Generator(device=device).manual_seed(M + N + K)
    x = torch.randn(M, K, device=device, dtype=torch.bfloat16, generator=g)
    w = torch.randn(N, K, device=device, dtype=torch.bfloat16, generator=g) / K ** 0.5
    y = torch.empty(M, N, device=device, dtype=torch.bfloat16)
    ref = x.float() @ w.float().t()
    x0, w0 = x.clone(), w.clone()  # each contender zeroes x and w for its all-zero run
    flops = 2 * M * N * K
    rows = []
    more = {name: (lambda f=f: f(x, w, y)) for name, f in (extra or {}).items()}
    for name, fn in {**contenders(torch, ours, x, w, y), **more}.items():
        y.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        err = ((y.float() - ref).norm() / ref.norm()).item()
        ok = bool(torch.isfinite(y).all().item()) and err <= tolerance("bf16")
        calls = calls_for(flops)
        rnd = sustained(lambda r=graph_of(torch, fn, calls): r(), args.seconds)
        x.zero_(), w.zero_()
        zero = sustained(lambda r=graph_of(torch, fn, calls): r(), args.seconds)
        x.copy_(x0), w.copy_(w0)  # the next contender's check and random run: the operands of ``ref``
        row = dict(M=M, N=N, K=K, contender=name, ok=ok, err=err)
        for tag, r in (("random", rnd), ("zeros", zero)):
            tflops = flops * calls / r["s"] / 1e12
            row.update({f"{tag}_tflops": tflops, f"{tag}_mhz": r["mhz"], f"{tag}_watts": r["watts"],
                        f"{tag}_per_clock": tflops * 1e12 / (sms * TENSOR_FLOPS_PER_CLK * r["mhz"] * 1e6)})
        rows.append(row)
    return rows


def table(rows, device: str) -> list[str]:
    out = [f"sm90 GEMM and cuBLAS at the clock they sustain, bf16 nt, {device} (random operands / all zeros)", "",
           "| M | N | K | contender | ok | TFLOP/s | SM MHz | W | of the peak at that clock | zeros: TFLOP/s | MHz | W |"
           " per clock |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['M']} | {r['N']} | {r['K']} | {r['contender']} | {'y' if r['ok'] else 'NO'} | "
                   f"{r['random_tflops']:.0f} | {r['random_mhz']:.0f} | {r['random_watts']:.0f} | "
                   f"{100 * r['random_per_clock']:.1f} % | {r['zeros_tflops']:.0f} | {r['zeros_mhz']:.0f} | "
                   f"{r['zeros_watts']:.0f} | {100 * r['zeros_per_clock']:.1f} % |")
    return out


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES), help="MxNxK,...")
    ap.add_argument("--seconds", type=float, default=2.0, help="each sustained run (its second half measured)")
    ap.add_argument("--out", default=".")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    import torch

    import tvm_cdna4.torch as ours

    props = torch.cuda.get_device_properties(0)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    rows = []
    print("\n".join(table(rows, props.name)), flush=True)
    for shape in shapes:  # each shape's rows printed and the files rewritten as they come (a step's timeout keeps them)
        new = row_for(torch, ours, shape, args, props.multi_processor_count)
        rows += new
        print("\n".join(table(new, props.name)[len(table([], props.name)):]), flush=True)
        with open(os.path.join(args.out, "sm90_power.md"), "w") as f:
            f.write("\n".join(table(rows, props.name)) + "\n")
        with open(os.path.join(args.out, "sm90_power.json"), "w") as f:
            json.dump(dict(device=props.name, rows=rows), f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
