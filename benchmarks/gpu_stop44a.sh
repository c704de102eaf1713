#!/bin/bash
# Stop 44's first attention call (2026-12-06) on an H100 / H200, from the repository root (TIRx / tvm-ffi wheels in
# $WHEELS, default .sm90tree/whl; outputs under $OUT; about 550 s):
#   1. every shape of benchmarks/attention_sm90.py (D 64 / 128, 2k-32k tokens, MHA / GQA, causal or not) at the cost
#      model's configs, the TMA epilogue now weighed (attention_cost.OPTION_RATES), beside cuDNN and FA2;
#   2. the kernel options at D 64 (--configs options: the rates were fitted at D 128 only);
#   3. fp8 e4m3 at the --quick shapes (D 128, 4k and 16k tokens), beside SDPA on their bf16 values.
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site ${WHEELS:-.sm90tree/whl}/*.whl
export PYTHONPATH=$PWD:/tmp/site
source benchmarks/h200_preamble.sh
mkdir -p "$OUT/full" "$OUT/d64" "$OUT/fp8"
timeout 300 python3 benchmarks/attention_sm90.py --no-sm80 --out "$OUT/full" 2>&1 | tee "$OUT/attention_full.log" | tail -48
timeout 130 python3 benchmarks/attention_sm90.py --quick --head-dims 64 --no-sm80 --configs options --out "$OUT/d64" 2>&1 \
  | tee "$OUT/attention_d64_options.log" | tail -12
timeout 100 python3 benchmarks/attention_sm90.py --quick --fp8 --no-sm80 --out "$OUT/fp8" 2>&1 | tee "$OUT/attention_fp8.log" | tail -12
