#!/bin/bash
# Stop 44 (2026-12-06), one device call on an H100 / H200 (from the repository root; carry .sm90tree/whl and
# .sm90tree/flashinfer; outputs under $OUT; about 580 s):
#   1. the sm90 GEMM's new plans: the GPU tests of the tile widths (96 / 160 / 224, the TMA epilogue's tail map) and
#      of swap AB at a dynamic M / with a K split; the torch op over the 12 projections at M = 32, 96, 200 (swap
#      weighed) and 768, 3000, 8192 (the widths weighed);
#   2. the paged decode's partition at batch 8, mean 2k (fp8 / bf16 1.55x there): ours at forced partitions;
#   3. issue 37's FlashInfer peer (benchmarks/gpu_flashinfer.sh's probe, then 12 paged rows: batch 8, 32, 64, mean
#      2k and 8k, GQA 32/8, bf16 and fp8, FlashInfer's two decode kernels and SDPA beside ours).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
gpu_tests 120 "$OUT/pytest_gpu_gemm.log" -n 6 tests/gpu/test_sm90_tile_widths_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py \
  tests/gpu/test_sm90_swap_ab_gpu.py
mkdir -p "$OUT/small" "$OUT/large"
timeout 100 python3 benchmarks/torch_gemm.py --ms 32,96,200 --calls 30 --reps 12 --out "$OUT/small" 2>&1 | tee "$OUT/torch_gemm_small.log" | tail -8
timeout 110 python3 benchmarks/torch_gemm.py --ms 768,3000,8192 --calls 30 --reps 12 --out "$OUT/large" 2>&1 | tee "$OUT/torch_gemm_large.log" | tail -8
mkdir -p "$OUT/part"
timeout 60 python3 benchmarks/paged_decode.py --sets bf16,fp8 --batches 8 --means 2048 --gqa 32/8 --no-peers \
  --partitions 128,192,256,384,512 --out "$OUT/part" 2>&1 | tee "$OUT/paged_partitions.log" | tail -12
sed -i 's/--batches 8,32,64 \\$/--batches 8,32,64 --gqa 32\/8 \\/; s/--means 2048,8192,32768 --gqa 32\/8,64\/8 --out/--means 2048,8192 --out/; s/^timeout 280 /timeout 130 /' benchmarks/gpu_flashinfer.sh
bash benchmarks/gpu_flashinfer.sh
