#!/bin/bash
# Stop 44 (2026-12-06), the GEMM part of gpu_stop44c.sh alone (about 350 s, for a short device budget): the GPU
# tests of the tile widths and of swap AB at a dynamic M / with a K split, then the torch op over the 12 projections
# at M = 32, 96, 200 (swap weighed) and 768, 3000, 8192 (the widths weighed). From the repository root; carry
# .sm90tree/whl; outputs under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
gpu_tests 120 "$OUT/pytest_gpu_gemm.log" -n 6 tests/gpu/test_sm90_tile_widths_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py \
  tests/gpu/test_sm90_swap_ab_gpu.py
mkdir -p "$OUT/small" "$OUT/large"
timeout 100 python3 benchmarks/torch_gemm.py --ms 32,96,200 --calls 30 --reps 12 --out "$OUT/small" 2>&1 | tee "$OUT/torch_gemm_small.log" | tail -8
timeout 110 python3 benchmarks/torch_gemm.py --ms 768,3000,8192 --calls 30 --reps 12 --out "$OUT/large" 2>&1 | tee "$OUT/torch_gemm_large.log" | tail -8
