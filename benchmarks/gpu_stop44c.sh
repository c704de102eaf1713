#!/bin/bash
# Stop 44 (2026-12-06), one device call on an H100 / H200 (from the repository root; carry .sm90tree/whl and
# .sm90tree/flashinfer; outputs under $OUT; about 560 s):
#   1. issue 37's FlashInfer peer run (benchmarks/gpu_flashinfer.sh: paged rows, bf16 and fp8, FlashInfer's two
#      decode kernels and SDPA beside ours; cut at 250 s);
#   2. the sm90 GEMM's new tile widths (96 / 160 / 224 with the TMA epilogue's tail map): their GPU tests, the sweep
#      of the 224 / 160 configs beside the old first choice at M = 768, 3000, and the torch op at M = 768, 3000,
#      8192 over the 12 projections (the cost model now weighs them).
sed -i 's/^timeout 280 python3 benchmarks\/paged_decode.py/timeout 250 python3 benchmarks\/paged_decode.py/' benchmarks/gpu_flashinfer.sh
bash benchmarks/gpu_flashinfer.sh
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 TVM_CDNA4_CACHE_DIR=${TVM_CDNA4_CACHE_DIR:-/tmp/tvm_cdna4_cache}
source benchmarks/h200_preamble.sh
gpu_tests 60 "$OUT/pytest_gpu_widths.log" -n 4 tests/gpu/test_sm90_tile_widths_gpu.py
mkdir -p "$OUT/widths" "$OUT/gemm"
timeout 120 python3 benchmarks/sm90_sweep.py --ms 768,3000 --widths 224,160 --out "$OUT/widths" 2>&1 | tee "$OUT/widths.log" | tail -30
timeout 110 python3 benchmarks/torch_gemm.py --ms 768,3000,8192 --calls 30 --reps 12 --out "$OUT/gemm" 2>&1 | tee "$OUT/torch_gemm.log" | tail -16
