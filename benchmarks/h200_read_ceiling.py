"""The H200's streaming-read ceiling, and what the L2 flush of the timing method costs a memory-bound kernel.

    python3 benchmarks/h200_read_ceiling.py --out $OUT

A decode GEMM reads its weights once; its roofline is their bytes over the memory bandwidth. This
measures what a plain read reaches on this GPU, at the weight sizes of the LLM projections, so the
"% of the 4.8 TB/s roofline" of benchmarks/llm_linear.py can be read against a measured ceiling:

* ``read``: ``torch.sum`` over a bf16 tensor of that size (one pass, a scalar out);
* ``stream``: a Triton kernel that only reads (each program sums 16 KB of the tensor with 16-byte
  loads and writes one f32): the closest to a weight stream;
* ``copy``: a device-to-device copy, bytes read + written;
* ``torch.matmul`` of 1 x K by the N x K weights (cuBLAS's decode path).

Each is timed by ``runtime.cuda.bench_ms`` with the ``flush`` method (the L2 zeroed before each
call: its dirty lines are written back while the timed call streams) and with ``clean`` (the L2
filled by a read of a 256 MB buffer: nothing to write back), median of event-timed calls. Output: a
table on stdout and ``$OUT/h200_read_ceiling.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs")  # raw outputs of the runs kept in git

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SIZES_MB = (32, 64, 117, 168, 470, 940)  # 8b.o, -, 8b.down, 70b.qkv, 70b.down, 70b.gate_up weights
MATMULS = {"8b.down": (4096, 14336), "8b.gate_up": (28672, 4096), "70b.o": (8192, 8192),
           "70b.gate_up": (57344, 8192)}


def stream_reader():
    """A Triton read-only kernel: program i sums elements [i * BLOCK, (i + 1) * BLOCK) into out[i]."""
    import triton
    import triton.language as tl

    @triton.jit
    def _read(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs, mask=offs < n, other=0.0, eviction_policy="evict_first")
        tl.store(out_ptr + pid, tl.sum(v.to(tl.float32), axis=0))

    def run(x, out, block=8192):
        _read[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block, num_warps=8)

    return run


def main() -> None:
    import torch

    from tvm_cdna4.runtime import cuda as runner

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", RUNS), help="folder of the raw outputs (default: $OUT, else benchmarks/runs)")
    args = ap.parse_args()
    rows, methods = [], ("flush", "clean")
    stream = stream_reader()
    for mb in SIZES_MB:
        n = (mb << 20) // 2
        x = torch.randn(n, dtype=torch.bfloat16, device="cuda")
        y = torch.empty_like(x)
        s = torch.empty((), dtype=torch.float32, device="cuda")
        row = {"what": f"read {mb} MB", "bytes": 2 * n}
        for m in methods:
            row[m] = runner.bench_ms(lambda: torch.sum(x, dim=0, dtype=torch.float32, out=s), 10, 100, m)
        rows.append(row)
        out = torch.empty((n + 8191) // 8192, dtype=torch.float32, device="cuda")
        row = {"what": f"stream {mb} MB", "bytes": 2 * n}
        for m in methods:
            row[m] = runner.bench_ms(lambda: stream(x, out), 10, 100, m)
        rows.append(row)
        row = {"what": f"copy {mb} MB", "bytes": 4 * n}
        for m in methods:
            row[m] = runner.bench_ms(lambda: y.copy_(x), 10, 100, m)
        rows.append(row)
        del x, y
    for name, (N, K) in MATMULS.items():
        a = torch.randn(1, K, dtype=torch.bfloat16, device="cuda")
        w = torch.randn(N, K, dtype=torch.bfloat16, device="cuda")
        row = {"what": f"torch.matmul {name} 1x{N}x{K}", "bytes": 2 * (N * K + K + N)}
        for m in methods:
            row[m] = runner.bench_ms(lambda: torch.matmul(a, w.t()), 10, 100, m)
        rows.append(row)
    print("| what | bytes | flush µs (TB/s) | clean µs (TB/s) |")
    print("|---|---|---|---|")
    for r in rows:
        cells = [f"{r[m] * 1e3:.1f} ({r['bytes'] / (r[m] * 1e-3) / 1e12:.2f})" for m in methods]
        print(f"| {r['what']} | {r['bytes'] / 1e6:.0f} MB | {cells[0]} | {cells[1]} |")
    info = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "h200_read_ceiling.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
