#!/bin/bash
# Issue 37's FlashInfer peer in one device call on an H100 / H200 (from the repository root; the TIRx / tvm-ffi
# wheels in $WHEELS, default .sm90tree/whl; FlashInfer 0.6.6 in $FLASHINFER_CARRIED, default .sm90tree/flashinfer,
# written here by `python benchmarks/flashinfer_carry.py`; the device tool's carry list: both folders; outputs
# under $OUT; about 4 min):
#   1. the carried FlashInfer probed (import, the wrapper, its four decode modules loaded: built here for sm_90a,
#      so nothing compiles; where one fails to load, FLASHINFER_CARRIED_JIT=1 and the device JITs them, ~1-2 min);
#   2. benchmarks/paged_decode.py's bf16 and fp8 sets at batch 8, 32, 64, mean contexts 2k, 8k, 32k, GQA 32/8 and
#      64/8 (36 rows) with FlashInfer's CUDA-core and tensor-core decode and torch SDPA beside ours.
# FI_BATCHES, FI_MEANS, FI_GQA and FI_S (its timeout, default 280 s) narrow the run for a short device budget.
# The benchmark writes each row as it goes ($OUT/paged_decode.partial.jsonl); a run cut by its timeout keeps them.
#
#   bash benchmarks/gpu_flashinfer.sh
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
FI=${FLASHINFER_CARRIED:-.sm90tree/flashinfer}
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/flashinfer}
cat "$FI/CARRIED.json" > "$OUT/flashinfer_carried.json" 2>&1
if ! timeout 60 python3 benchmarks/flashinfer_carry.py --probe "$FI" > "$OUT/flashinfer_probe.log" 2>&1; then
  echo "the carried modules did not load (flashinfer_probe.log): FlashInfer JITs them here" \
    | tee -a "$OUT/flashinfer_probe.log"
  export FLASHINFER_CARRIED_JIT=1
  timeout 240 python3 benchmarks/flashinfer_carry.py --probe "$FI" >> "$OUT/flashinfer_probe.log" 2>&1
fi
tail -c 1500 "$OUT/flashinfer_probe.log"
timeout ${FI_S:-280} python3 benchmarks/paged_decode.py --flashinfer "$FI" --sets bf16,fp8 --batches ${FI_BATCHES:-8,32,64} \
  --means ${FI_MEANS:-2048,8192,32768} --gqa ${FI_GQA:-32/8,64/8} --out "$OUT" 2>&1 | tee "$OUT/paged_decode.log" | tail -60
