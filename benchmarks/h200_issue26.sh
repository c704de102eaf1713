#!/bin/bash
# Issue 26 part 2 on the H200 (the sm80 attention forward), one device call, from the repository root
# with PYTHONPATH holding this tree and TIRx; outputs under $OUT (benchmarks/journal/2026-12.md, "Issue 26 on
# the H200", says what came out):
#
#   bash benchmarks/h200_issue26.sh [sweep|skew|mbarrier|lazy|m2|final|default]   # GPU tests, then
#                                     # benchmarks/attention_h200.py --configs (its SWEEPS)
source benchmarks/h200_preamble.sh
gpu_tests 150 "$OUT/pytest_attention.log" -n 8 tests/kernels/sm80/test_attention_sm80.py tests/runtime/test_torch_entry.py -k "gpu or attention"
timeout 330 python3 benchmarks/attention_h200.py --configs "${1:-sweep}" --out "$OUT" 2>&1 | tee "$OUT/attention_h200.log" | tail -40
