"""Which kernels the peers launch: the CUDA kernel names (and times) of ``torch.matmul`` (cuBLAS) on the projections of
``torch_gemm.DEFAULT_MODELS`` at every M of ``torch_gemm.MS``, of ``torch._scaled_mm`` at the fp8 benchmark's M, of
``torch._grouped_mm`` on ``torch_grouped_sm90``'s MoE prefills, and of SDPA's cuDNN backend on ``attention_sm90``'s
quick shapes, read from ``torch.profiler`` on one GPU (``--only`` picks parts).

    python3 benchmarks/peer_kernels.py --out $OUT

cuBLAS's and cuDNN's Hopper kernel names carry their design (tile ``128x256x64``, ``cluster2x1x1``, split-K /
stream-K, ``warpspecialized_cooperative`` or ``pingpong``): the configuration our cost model competes with, read
instead of guessed. Diagnostic: nothing here is a number of record; ``$OUT/peer_kernels.json`` has every row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def kernels_of(torch, fn, reps: int = 3) -> list[tuple[str, float]]:
    """(name, mean µs) of the CUDA kernels ``fn`` launches, after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out = []
    for e in prof.key_averages():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.count:
            out.append((e.key, getattr(e, "device_time_total", getattr(e, "cuda_time_total", 0.0)) / e.count))
    return out


def gemm_rows(torch, ms) -> list[dict]:
    import torch_gemm

    rows = []
    for model in torch_gemm.DEFAULT_MODELS:
        for proj, n, k in torch_gemm.projections(model):
            w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
            for m in ms:
                x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                rows.append(dict(op="matmul", model=model, proj=proj, M=m, N=n, K=k,
                                 kernels=kernels_of(torch, lambda: torch.matmul(x, w.t()))))
    return rows


def fp8_rows(torch, ms) -> list[dict]:
    import torch_gemm

    rows = []
    for proj, n, k in torch_gemm.projections("qwen2.5-7b"):
        w = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        sb = torch.ones(1, n, device="cuda")
        for m in ms:
            x = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            sa = torch.ones(m, 1, device="cuda")
            fn = lambda: torch._scaled_mm(x, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
            rows.append(dict(op="_scaled_mm", model="qwen2.5-7b", proj=proj, M=m, N=n, K=k, kernels=kernels_of(torch, fn)))
    return rows


def grouped_rows(torch, tokens_list) -> list[dict]:
    import torch_grouped_sm90 as tg

    rows = []
    for model, m in tg.MODELS.items():
        for proj, G, n, k in tg.projections(model):
            w = torch.randn(G, n, k, device="cuda", dtype=torch.bfloat16)
            for tokens in tokens_list:
                sizes = tg.sizes(G, m["top"], tokens, 1.0, 0)
                x = torch.randn(sum(sizes), k, device="cuda", dtype=torch.bfloat16)
                offs = torch.cumsum(torch.tensor(sizes, device="cuda", dtype=torch.int32), 0, dtype=torch.int32)
                fn = lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)  # noqa: E731
                rows.append(dict(op="_grouped_mm", model=model, proj=proj, tokens=tokens, G=G, N=n, K=k,
                                 kernels=kernels_of(torch, fn)))
    return rows


def attention_rows(torch) -> list[dict]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rows = []
    for d, heads, kv, (b, s) in [(128, 16, 16, (8, 2048)), (128, 16, 16, (4, 4096)), (64, 32, 32, (8, 2048))]:
        for causal in (False, True):
            q = torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16)
            v = torch.randn_like(k)

            def fn():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

            rows.append(dict(op="sdpa_cudnn", D=d, heads=heads, kv_heads=kv, B=b, S=s, causal=causal,
                             kernels=kernels_of(torch, fn)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ms", default="1,8,32,96,200,768,3000,8192", help="M of the bf16 GEMM rows")
    ap.add_argument("--fp8-ms", default="768,3000", help="M of the fp8 rows (Qwen2.5-7B's projections)")
    ap.add_argument("--grouped-tokens", default="2048,8192", help="tokens of the grouped (MoE) rows")
    ap.add_argument("--only", default="", help="comma-separated parts: gemm, fp8, grouped, attention (default all)")
    ap.add_argument("--out", default=".")
    args = ap.parse_args(argv)
    import torch

    ints = lambda text: [int(v) for v in text.split(",") if v]  # noqa: E731
    parts = {"gemm": lambda: gemm_rows(torch, ints(args.ms)), "fp8": lambda: fp8_rows(torch, ints(args.fp8_ms)),
             "grouped": lambda: grouped_rows(torch, ints(args.grouped_tokens)), "attention": lambda: attention_rows(torch)}
    rows = [r for name in (args.only.split(",") if args.only else parts) for r in parts[name]()]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "peer_kernels.json"), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), f, indent=1)
    for r in rows:
        what = {k: r[k] for k in r if k != "kernels"}
        for name, us in r["kernels"]:
            print(f"{json.dumps(what)}\t{us:8.1f} us\t{name[:200]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
