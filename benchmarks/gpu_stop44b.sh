#!/bin/bash
# Stop 44 (2026-12-06), one device call on an H100 / H200 (from the repository root; carry .sm90tree/whl and
# .sm90tree/flashinfer; outputs under $OUT; about 540 s):
#   1. issue 37's FlashInfer peer run (benchmarks/gpu_flashinfer.sh: 36 paged rows, bf16 and fp8, FlashInfer's two
#      decode kernels and SDPA beside ours);
#   2. the attention kernel options at D 64 (the rates were fitted at D 128 only) and fp8 e4m3 at the --quick shapes.
bash benchmarks/gpu_flashinfer.sh
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 TVM_CDNA4_CACHE_DIR=${TVM_CDNA4_CACHE_DIR:-/tmp/tvm_cdna4_cache}
mkdir -p "$OUT/d64" "$OUT/fp8"
timeout 120 python3 benchmarks/attention_sm90.py --quick --head-dims 64 --no-sm80 --configs options --out "$OUT/d64" 2>&1 \
  | tee "$OUT/attention_d64_options.log" | tail -12
timeout 90 python3 benchmarks/attention_sm90.py --quick --fp8 --no-sm80 --out "$OUT/fp8" 2>&1 | tee "$OUT/attention_fp8.log" | tail -12
