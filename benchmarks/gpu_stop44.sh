#!/bin/bash
# What stop 44 (2026-12-06) ran and left for a GPU, by step, in device calls on an H100 / H200 (from the repository
# root; the TIRx / tvm-ffi wheels in $WHEELS, default .sm90tree/whl; carry .sm90tree/flashinfer for `flashinfer`;
# outputs under $OUT). Steps, each cut by its own timeout (seconds of wall on an H100 in brackets):
#   gemm        the GPU tests of the sm90 GEMM's tile widths (96 / 160 / 224, the TMA epilogue's tail map) and of swap
#               AB at a dynamic M / with a K split; the torch op over the 12 projections at M = 32, 96, 200 and 768,
#               3000 (what ran at 18:53 UTC, `--reps 10`) [~120]
#   widths      the static sweep of the 224 / 160 configs beside the old first choice at M = 768, 3000 [~120]
#   partitions  the paged decode at batch 8, mean 2k (fp8 / bf16 1.55x there) at forced partitions [~40]
#   flashinfer  issue 37's FlashInfer peer (benchmarks/gpu_flashinfer.sh; FI_* narrow it) [~280]
#   attention   every shape of benchmarks/attention_sm90.py at the cost model's configs (the TMA epilogue now
#               weighed), the kernel options at D 64, fp8 at the --quick shapes [~520]
# Two full calls: `bash benchmarks/gpu_stop44.sh widths partitions flashinfer`, `bash benchmarks/gpu_stop44.sh attention`.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
for step in "$@"; do
  case $step in
  gemm)
    gpu_tests 80 "$OUT/pytest_gpu_gemm.log" -n 8 tests/gpu/test_sm90_tile_widths_gpu.py tests/gpu/test_sm90_swap_dynamic_gpu.py
    mkdir -p "$OUT/small" "$OUT/large"
    timeout 75 python3 benchmarks/torch_gemm.py --ms 32,96,200 --calls 30 --reps 10 --out "$OUT/small" 2>&1 \
      | tee "$OUT/torch_gemm_small.log" | tail -8
    timeout 80 python3 benchmarks/torch_gemm.py --ms 768,3000 --calls 30 --reps 10 --out "$OUT/large" 2>&1 \
      | tee "$OUT/torch_gemm_large.log" | tail -8 ;;
  widths)
    mkdir -p "$OUT/widths"
    timeout 120 python3 benchmarks/sm90_sweep.py --ms 768,3000 --widths 224,160 --out "$OUT/widths" 2>&1 \
      | tee "$OUT/widths.log" | tail -30 ;;
  partitions)
    mkdir -p "$OUT/part"
    timeout 60 python3 benchmarks/paged_decode.py --sets bf16,fp8 --batches 8 --means 2048 --gqa 32/8 --no-peers \
      --partitions 128,192,256,384,512 --out "$OUT/part" 2>&1 | tee "$OUT/paged_partitions.log" | tail -12 ;;
  flashinfer)
    bash benchmarks/gpu_flashinfer.sh ;;
  attention)
    mkdir -p "$OUT/full" "$OUT/d64" "$OUT/fp8"
    timeout 300 python3 benchmarks/attention_sm90.py --no-sm80 --out "$OUT/full" 2>&1 | tee "$OUT/attention_full.log" | tail -48
    timeout 120 python3 benchmarks/attention_sm90.py --quick --head-dims 64 --no-sm80 --configs options --out "$OUT/d64" 2>&1 \
      | tee "$OUT/attention_d64_options.log" | tail -12
    timeout 90 python3 benchmarks/attention_sm90.py --quick --fp8 --no-sm80 --out "$OUT/fp8" 2>&1 | tee "$OUT/attention_fp8.log" | tail -12 ;;
  *) echo "unknown step $step (gemm, widths, partitions, flashinfer, attention)"; exit 2 ;;
  esac
done
