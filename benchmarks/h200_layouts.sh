#!/usr/bin/env bash
# Every layout ahead (issue 17): in ONE device call on the H200, at 4096^3 and 8192^3, layouts
# nn/nt/tn/tt x f16/bf16 inputs, f32 output: ours (default config, prebuilt), Triton's mma.sync path
# (DISABLE_MMA_V3=1, autotuned) and CUTLASS sm80, every output checked against the f32 product;
# then the validation grid (--validate) with the time that is left. Ends with the peer table.
#
# Prepared on the build machine (no GPU), from the repository root:
#   kcut/cutlass_sm80_peer.so   build command at the head of benchmarks/cutlass_sm80_peer.cu
#   kbench/  python3 benchmarks/cuda_gemm.py --build-only sm_90 --bench --sizes 4096,8192 --dtypes f16,bf16 \
#              --layouts nn,nt,tn,tt --configs 128x256x64_w2x4_s4 --kernels kbench && rm -f kbench/*.cu
#   kval.tar.xz  python3 benchmarks/cuda_gemm.py --build-only sm_90 --validate --kernels kval && rm -f kval/*.cu \
#              && tar cJf kval.tar.xz kval   (86 kernels, 11 MB as files, ~1 MB packed: the carry holds 64 MiB,
#              the wheels 48 of it; optional: validation kernels missing there are compiled on the device)
#   .whl/    Python 3.12 x86-64 wheels of apache-tvm-tirx==0.1.0a4 and apache-tvm-ffi==0.1.15.post2 (the GPU
#            machine has torch, triton and numpy, and no registry)
# On the device, with .whl, kcut, kbench (and kval.tar.xz) carried:  bash benchmarks/h200_layouts.sh
# Logs and JSON go to $OUT/bench and $OUT/validate. Exit status: the benchmark's (1 on a wrong
# result or a build failure), or'ed with validation's.
set -uo pipefail
OUT=${OUT:-/tmp/h200_layouts}
DEADLINE=${DEADLINE_S:-560}  # seconds after the start by which everything has ended (call limit 600)
mkdir -p "$OUT/bench" "$OUT/validate"
cd "$(dirname "$0")/.."

for need in .whl kcut/cutlass_sm80_peer.so kbench; do
  [ -e "$need" ] || { echo "missing $need: carry it with the work tree (see the head of $0)"; exit 2; }
done
[ -f kval.tar.xz ] && tar xJf kval.tar.xz
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/gpu.txt"
echo "installed at ${SECONDS} s; $(git rev-parse --short HEAD 2>/dev/null) $(nproc) cores"

timeout $((DEADLINE - SECONDS - 30)) python3 benchmarks/cuda_gemm.py --bench --sizes 4096,8192 \
  --dtypes f16,bf16 --layouts nn,nt,tn,tt --configs 128x256x64_w2x4_s4 --kernels kbench \
  --cutlass kcut/cutlass_sm80_peer.so --triton-layouts nn,nt,tn,tt --timing flush \
  --out "$OUT/bench" > "$OUT/bench/stdout.txt" 2>&1
bench=$?
echo "bench exit ${bench} at ${SECONDS} s"

left=$((DEADLINE - SECONDS))
if [ "$left" -ge 90 ]; then
  timeout "$left" python3 benchmarks/cuda_gemm.py --validate --kernels kval --out "$OUT/validate" \
    > "$OUT/validate/stdout.txt" 2>&1
  val=$?
  echo "validate exit ${val} at ${SECONDS} s (124: cut at the deadline)"
  grep -E "^(prebuilt|validation|FAIL|BUILD FAIL)" "$OUT/validate/stdout.txt"
else
  val=0
  echo "validation skipped: ${left} s left"
fi

grep -E "^(prebuilt|bench: built|BUILD FAIL|WRONG)" "$OUT/bench/stdout.txt"
tail -n 25 "$OUT/bench/stdout.txt"  # the peer table is the benchmark's last output
exit $((bench | val))
