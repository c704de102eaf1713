#!/bin/bash
# Issue 36 on an H100 / H200 (one device call, from the repository root; the TIRx / tvm-ffi wheels in
# $WHEELS, default .sm90tree/whl): the GPU tests of the sm90 GEMM and the torch op, then
# benchmarks/torch_gemm.py on the device's own target (sm90 on Hopper) at every M, then the sm80-class
# kernels (TVM_CDNA4_CUDA_TARGET=sm80) at M = 96 and 200 on the same card. Outputs under $OUT.
#
#   bash benchmarks/gpu_issue36.sh [torch_gemm.py options for the first run]
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
gpu_tests 150 "$OUT/pytest_gpu.log" -n 8 tests/kernels/sm90 tests/runtime/test_torch_target.py tests/runtime/test_torch_entry.py
timeout 270 python3 benchmarks/torch_gemm.py --calls 30 --reps 12 --out "$OUT" --tag auto "$@" 2>&1 | tee "$OUT/torch_gemm_auto.log" | tail -45
TVM_CDNA4_CUDA_TARGET=sm80 timeout 100 python3 benchmarks/torch_gemm.py --calls 30 --reps 12 --ms 96,200 --out "$OUT" --tag sm80 2>&1 \
  | tee "$OUT/torch_gemm_sm80.log" | tail -8
