"""fp8 (e4m3) projections through ``tvm_cdna4.torch.gemm`` beside ``torch._scaled_mm`` (rowwise scales), on one
Hopper GPU.

    python3 benchmarks/torch_fp8_gemm.py --out $OUT            # the Llama-3-8B set at M = 768, 3000, 8192

y = (x_q · W_qᵀ) · s_x[m] · s_W[n]: ``x_q`` [M, K] and ``W_q`` [N, K] float8_e4m3fn, quantized per token and per
output channel (absmax / 448) with f32 scales ``s_x`` [M] and ``s_W`` [N], bf16 out. Ours: ``tvm_cdna4.torch.gemm(
x_q, W_q, row_scale=s_x, col_scale=s_W)`` (the sm90 fp8 kernel, the scales in its fused epilogue); torch's:
``torch._scaled_mm(x_q, W_q.t(), scale_a=s_x[:, None], scale_b=s_W[None, :], out_dtype=torch.bfloat16)``.

Method (``benchmarks/torch_gemm.py``'s, whose helpers it reuses): every kernel is built first in ``--jobs``
worker processes (build and device-code caches), then each contender is checked once against the f32 product of
the dequantized inputs (C poisoned with NaN first; ``runtime.cuda.tolerance("bf16")``) and timed in one CUDA
graph of ``--calls`` calls over weight copies whose bytes exceed three L2s, replayed ``--reps`` times (the
median). The roofline is ``max(2MNK / fp8 peak, bytes / read rate)``, the fp8 peak the bf16 datasheet peak
times ``kernels.sm90.gemm_cost.TENSOR_RATE["fp8"]``. The table (markdown) is printed last; every figure is in
``$OUT/torch_fp8_gemm.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.append(path)  # after PYTHONPATH: a package given there is the one measured

from torch_gemm import DENSE_BF16_FLOPS, _graph_seconds, by_m, read_rate, write_results  # noqa: E402

LLAMA3_8B = (("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336))
"""(name, N, K) of Llama-3-8B's projections (Hugging Face config.json: hidden 4096, 32 heads, 8 kv heads of
128, intermediate 14336; QKV and gate/up fused)."""
MS = (768, 3000, 8192)


def _problem(N: int, K: int):
    """The problem ``tvm_cdna4.torch.gemm`` plans for fp8 inputs with both scales, bf16 out (dynamic M)."""
    from tvm_cdna4.kernels.gemm.epilogue import Fusion
    from tvm_cdna4.kernels.gemm.problem import GemmProblem

    return GemmProblem(None, N, K, "fp8", "nt", "bf16", Fusion(row_scale=True, col_scale=True))


def _prebuild(job) -> str:
    """Worker: build the sm90 fp8 kernel of M's bucket through the build cache and compile its device code
    (``torch_gemm._prebuild``'s way), so that the timing process only loads."""
    N, K, M = job
    from tvm_cdna4.kernels.sm90.gemm_target import build
    from tvm_cdna4.runtime.cuda import precompile

    dyn = build(_problem(N, K))
    precompile(dyn.kernel_for(M))
    return f"{N}x{K} M={M}: bucket {dyn.bucket(M).describe()}"


def quantized(torch, rows: int, K: int, spread: float, gen):
    """Rows of uniform data in [-spread, spread] quantized to e4m3 by their absmax: (fp8 [rows, K], f32 [rows])."""
    x = torch.empty(rows, K, device="cuda").uniform_(-spread, spread, generator=gen)
    scale = x.abs().amax(1) / torch.finfo(torch.float8_e4m3fn).max
    return (x / scale[:, None]).to(torch.float8_e4m3fn), scale.float()


def measure(torch, ours, proj, M, N, K, args, rate) -> dict:
    from tvm_cdna4.kernels.sm90.gemm_cost import TENSOR_RATE
    from tvm_cdna4.runtime.cuda import tolerance

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    copies = max(2, min(64, math.ceil(3 * l2 / (N * K))))
    g = torch.Generator(device="cuda").manual_seed(M * 7919 + N + K)
    x, sx = quantized(torch, M, K, 3.0, g)
    ws = [quantized(torch, N, K, 1 / math.sqrt(K), g) for _ in range(copies)]
    y = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    w0, sw0 = ws[0]
    ref = (x.float() * sx[:, None]) @ (w0.float() * sw0[:, None]).t()
    contenders = {
        "ours": lambda w, sw: ours.gemm(x, w, row_scale=sx, col_scale=sw, out=y),
        # its own output (allocated from the graph's pool when captured): no copy into y is timed
        "torch": lambda w, sw: torch._scaled_mm(x, w.t(), scale_a=sx[:, None], scale_b=sw[None, :],
                                                out_dtype=torch.bfloat16),
    }
    row = dict(proj=proj, M=M, N=N, K=K, copies=copies)
    flops, bytes_ = 2 * M * N * K, M * K + N * K + 2 * M * N
    roof = max(flops / (DENSE_BF16_FLOPS * TENSOR_RATE["fp8"]), bytes_ / rate)
    row["roofline_us"] = roof * 1e6
    for name, fn in contenders.items():
        y.fill_(float("nan"))
        got = fn(*ws[0])
        torch.cuda.synchronize()
        err = ((got.float() - ref).norm() / ref.norm()).item()
        row[f"{name}_err"], row[f"{name}_ok"] = err, bool(torch.isfinite(got).all().item()) and err <= tolerance("bf16")
        calls = [(lambda w=w: fn(*w)) for w in (ws * math.ceil(args.calls / copies))[:args.calls]]
        row[f"{name}_graph_us"] = _graph_seconds(torch, calls, args.reps) * 1e6
        row[f"{name}_roofline"] = roof * 1e6 / row[f"{name}_graph_us"]
        row[f"{name}_tflops"] = flops / row[f"{name}_graph_us"] / 1e6
    row["speedup"] = row["torch_graph_us"] / row["ours_graph_us"]
    del ws
    return row


def table(rows) -> list[str]:
    out = ["| proj | M | N | K | ours µs | _scaled_mm µs | ours/_scaled_mm speed | ours TFLOP/s | _scaled_mm TFLOP/s "
           "| ours % roof | ok (err ours, theirs) |", "|" + "---|" * 11]
    for r in rows:
        out.append(f"| {r['proj']} | {r['M']} | {r['N']} | {r['K']} | {r['ours_graph_us']:.1f} | "
                   f"{r['torch_graph_us']:.1f} | {r['speedup']:.2f}x | {r['ours_tflops']:.0f} | {r['torch_tflops']:.0f} | "
                   f"{100 * r['ours_roofline']:.0f} | {'yes' if r['ours_ok'] and r['torch_ok'] else 'NO'} "
                   f"({r['ours_err']:.1e}, {r['torch_err']:.1e}) |")
    return out + ["", *by_m(rows, "speedup", "ours/_scaled_mm")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default=",".join(map(str, MS)))
    ap.add_argument("--calls", type=int, default=20, help="calls per graph")
    ap.add_argument("--reps", type=int, default=10, help="graph replays (the median)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    import torch

    import tvm_cdna4.torch as ours

    arch, target = ours.cuda_target(torch.device("cuda", 0))
    if target != "sm90":
        print(f"fp8 runs on the sm90 kernel only; this GPU is {arch} (target {target})", file=sys.stderr)
        return 2
    ms = [int(v) for v in args.ms.split(",")]
    t0 = time.time()
    jobs = sorted({(N, K, M) for _, N, K in LLAMA3_8B for M in ms})
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as pool:
        for line in pool.map(_prebuild, jobs):
            print(line, flush=True)
    print(f"built {len(jobs)} (shape, bucket) kernels in {time.time() - t0:.0f} s on {args.jobs} workers", flush=True)
    rate = read_rate(torch)
    name = torch.cuda.get_device_name(0)
    print(f"{name}: read rate {rate / 1e12:.2f} TB/s (4 GiB sum)", flush=True)
    rows = []
    for proj, N, K in LLAMA3_8B:
        for M in ms:
            rows.append(measure(torch, ours, proj, M, N, K, args, rate))
            r = rows[-1]
            print(f"{proj} M={M}: ours {r['ours_graph_us']:.1f} us, _scaled_mm {r['torch_graph_us']:.1f} us "
                  f"({r['speedup']:.2f}x), ok={r['ours_ok']}/{r['torch_ok']}", flush=True)
    meta = dict(device=name, arch=arch, target=target, read_rate=rate, torch=torch.__version__,
                date=time.strftime("%Y-%m-%d"), calls=args.calls, reps=args.reps,
                seconds=time.time() - t0)
    write_results(args.out, "torch_fp8_gemm", meta, rows, table(rows))
    return 0 if all(r["ours_ok"] and r["torch_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
