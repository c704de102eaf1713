#!/bin/bash
# Issue 24 on the H200, each mode one device call from the repository root (PYTHONPATH holding this
# tree and TIRx); outputs under $OUT (benchmarks/journal/2026-12.md, "LLM linear layers on the H200
# (2026-12-02, one call)", says what came out):
#
#   bash benchmarks/h200_issue24.sh probe   # the tuning time (M <= 128, 5 candidates), the decode and tile
#                                           # sweeps under flush and clean with torch beside them, Triton's
#                                           # wgmma against its mma.sync path at M = 64 / 128
#   bash benchmarks/h200_issue24.sh table   # the table: every M, ours default and tuned (the tuning
#                                           # timed), torch, Triton, under flush and clean; the GPU tests
source benchmarks/h200_preamble.sh
quick_gpu_tests() {  # the quick GPU tests: decode plans, split-K pairs, tuning, 16-bit outputs; $1 timeout, $2 log
  gpu_tests "$1" "$2" -n 8 tests/kernels/sm80/test_cuda_gemm.py tests/kernels/sm80/test_cuda_decode.py -k "decode or pairs or tune or low_precision"
}
case "$1" in
probe)
  timeout 270 python3 benchmarks/llm_linear.py --ms 1,16,64,128 --tune-top 5 --sweep --peers torch \
    --method flush,clean --rep-ms 15 --out "$OUT" 2>&1 | tee "$OUT/probe.log"
  timeout 120 python3 benchmarks/triton_wgmma_evidence.py --ms 64,128 --out "$OUT" 2>&1 | tee -a "$OUT/probe.log"
  ;;
table)
  timeout 400 python3 benchmarks/llm_linear.py --method flush,clean --out "$OUT" 2>&1 | tee "$OUT/table.log"
  quick_gpu_tests 80 "$OUT/pytest.log"
  ;;
*)
  echo "usage: $0 probe|table" >&2
  exit 2
  ;;
esac
