#!/bin/bash
# Stop 44 (2026-12-06), for a short device budget (about 470 s): the GEMM part (gpu_stop44d.sh: the GPU tests of the
# tile widths and of swap AB at a dynamic M / with a K split; the torch op over the 12 projections at M = 32, 96, 200
# and 768, 3000, 8192), then issue 37's FlashInfer peer on 8 paged rows (batch 8 and 64, mean 2k and 8k, GQA 32/8,
# bf16 and fp8). From the repository root; carry .sm90tree/whl and .sm90tree/flashinfer; outputs under $OUT.
sed -i 's/^gpu_tests 120 /gpu_tests 100 /; s/^timeout 100 python3 benchmarks\/torch_gemm.py/timeout 90 python3 benchmarks\/torch_gemm.py/; s/^timeout 110 python3 benchmarks\/torch_gemm.py/timeout 100 python3 benchmarks\/torch_gemm.py/' benchmarks/gpu_stop44d.sh
bash benchmarks/gpu_stop44d.sh
sed -i 's/--batches 8,32,64 \\$/--batches 8,64 --gqa 32\/8 \\/; s/--means 2048,8192,32768 --gqa 32\/8,64\/8 --out/--means 2048,8192 --out/; s/^timeout 280 /timeout 100 /; s/^if ! timeout 60 /if ! timeout 50 /; s/^  timeout 240 python3 benchmarks\/flashinfer_carry.py/  timeout 60 python3 benchmarks\/flashinfer_carry.py/' benchmarks/gpu_flashinfer.sh
bash benchmarks/gpu_flashinfer.sh
