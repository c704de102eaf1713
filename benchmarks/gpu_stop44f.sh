#!/bin/bash
# Stop 44 (2026-12-06), the least device budget (about 260 s): the GPU tests of the sm90 GEMM's new kernels (tile
# widths 96 / 160 / 224; swap AB at a dynamic M and with a K split), then the torch op over the 12 projections at
# M = 32, 96, 200 and 768, 3000 (the plans the cost model now picks). Carry .sm90tree/whl; outputs under $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
gpu_tests 80 "$OUT/pytest_gpu_gemm.log" -n 8 tests/gpu/test_sm90_tile_widths_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py
mkdir -p "$OUT/small" "$OUT/large"
timeout 75 python3 benchmarks/torch_gemm.py --ms 32,96,200 --calls 30 --reps 10 --out "$OUT/small" 2>&1 | tee "$OUT/torch_gemm_small.log" | tail -8
timeout 80 python3 benchmarks/torch_gemm.py --ms 768,3000 --calls 30 --reps 10 --out "$OUT/large" 2>&1 | tee "$OUT/torch_gemm_large.log" | tail -8
