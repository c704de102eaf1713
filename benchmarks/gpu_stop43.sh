#!/bin/bash
# What stop 43 (2026-12-06) left for a GPU, in one device call on an H100 / H200 (from the repository root; the
# TIRx / tvm-ffi wheels in $WHEELS, default .sm90tree/whl; outputs under $OUT; about 540 s):
#   1. the GPU tests of the work merged without a GPU: the sm90 attention (the fp8 accumulation bound, the configs
#      now built as written, split K / V barriers, the TMA epilogue), paged decode, the swap-AB GEMM;
#   2. the sm90 attention's opt-in options beside each --quick shape's default (benchmarks/attention_sm90.py
#      --configs options);
#   3. the swap-AB GEMM beside the cost model's choice at M = 32, 96, 200 (benchmarks/sm90_sweep.py --swap-ab).
# Each step writes as it goes; a step cut by its timeout keeps what it wrote.
#
#   bash benchmarks/gpu_stop43.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
gpu_tests 200 "$OUT/pytest_gpu.log" -n 8 tests/gpu/test_sm90_attention_gpu.py tests/gpu/test_paged_attention_gpu.py \
  tests/gpu/test_sm90_swap_ab_gpu.py
mkdir -p "$OUT/attn"
timeout 150 python3 benchmarks/attention_sm90.py --quick --no-sm80 --configs options --out "$OUT/attn" 2>&1 \
  | tee "$OUT/attention_options.log" | tail -12
timeout 180 python3 benchmarks/sm90_sweep.py --swap-ab --out "$OUT" 2>&1 | tee "$OUT/swap_ab.log" | tail -40
