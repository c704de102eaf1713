#!/usr/bin/env bash
# B's ldmatrix offsets as view offsets in every layout (not only *n), measured on the H200 in one
# call: the current default kernels (kbench, ours only), the variant (kview: 128x256 default and
# 256x128 tiles, with Triton's mma.sync path and CUTLASS sm80), then the current default again
# (drift). nt and tt (B K-contiguous: the layouts the change touches), f16/bf16, 4096^3 and 8192^3.
# Kernels are prebuilt on the build machine: kbench/ from main, kview/ from the variant
# (`benchmarks/cuda_gemm.py --build-only sm_90 --bench ... --kernels kview`).
set -uo pipefail
OUT=${OUT:-/tmp/h200_view}
mkdir -p "$OUT/main" "$OUT/view" "$OUT/main2"
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
common="--bench --sizes 4096,8192 --dtypes f16,bf16 --layouts nt,tt --timing flush"
python3 benchmarks/cuda_gemm.py $common --configs 128x256x64_w2x4_s4 --kernels kbench --no-triton \
  --out "$OUT/main" > "$OUT/main/stdout.txt" 2>&1; echo "main exit $? at ${SECONDS} s"
timeout 400 python3 benchmarks/cuda_gemm.py $common --configs 128x256x64_w2x4_s4,256x128x64_w4x2_s4 --kernels kview \
  --cutlass kcut/cutlass_sm80_peer.so --triton-layouts nt,tt --out "$OUT/view" > "$OUT/view/stdout.txt" 2>&1
echo "view exit $? at ${SECONDS} s"
python3 benchmarks/cuda_gemm.py $common --configs 128x256x64_w2x4_s4 --kernels kbench --no-triton \
  --out "$OUT/main2" > "$OUT/main2/stdout.txt" 2>&1; echo "main2 exit $? at ${SECONDS} s"
for d in main view main2; do echo "== $d"; grep -E "^(prebuilt|BUILD FAIL|WRONG|SUMMARY|ours )" "$OUT/$d/stdout.txt"; done
