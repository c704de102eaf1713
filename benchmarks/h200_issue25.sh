#!/bin/bash
# Issue 25 on the H200, one device call per mode, from the repository root with PYTHONPATH holding this
# tree and TIRx (the tree is not pip-installed there: the pytest plugin is passed with -p); outputs under
# $OUT (benchmarks/journal/2026-12.md, "Issue 25 on the H200", says what came out):
#
#   bash benchmarks/h200_issue25.sh blocks    # the fused epilogue (validated table, overhead), dynamic M
#                                             # (GPU tests, against static M), tvm_cdna4.torch (graph
#                                             # capture, torch.compile), and issue 24's GPU tests
#   bash benchmarks/h200_issue25.sh grouped   # the grouped GEMM: GPU tests and benchmark
#   bash benchmarks/h200_issue25.sh gaps      # the three gaps of the first calls, re-measured (<= 300 s):
#                                             # dynamic M at 8b.down M = 128, the epilogue overhead table,
#                                             # the grouped prefill's candidate tilings against torch
#   bash benchmarks/h200_issue25.sh gaps2     # the two gaps left (h-gaps25): the grouped problems' short
#                                             # tiles and CTA-wide search against the plans before them and
#                                             # torch; the epilogue at 4096^3 with its persistent form and
#                                             # each step's share; 5 rounds, flush; the grouped GPU tests
#   bash benchmarks/h200_issue25.sh gaps3     # the residual through shared memory (opt-in, the /rs form)
#                                             # and persistent forms at 4096^3; the CTA-wide group search
source benchmarks/h200_preamble.sh
case "$1" in
blocks)
  timeout 170 python3 benchmarks/epilogue_overhead.py --validate-table --out "$OUT" 2>&1 | tee "$OUT/epilogue_table.log" | tail -30
  timeout 120 python3 benchmarks/epilogue_overhead.py --out "$OUT" 2>&1 | tee "$OUT/epilogue_overhead.log" | tail -20
  timeout 90 python3 benchmarks/dynamic_m.py --out "$OUT" 2>&1 | tee "$OUT/dynamic_m.log" | tail -15
  gpu_tests 150 "$OUT/pytest_blocks.log" -n 8 tests/kernels/gemm/test_dynamic_m.py tests/runtime/test_torch_entry.py tests/kernels/sm80/test_cuda_epilogue.py \
    tests/kernels/sm80/test_cuda_gemm.py tests/kernels/sm80/test_cuda_decode.py
  ;;
grouped)  # also: the epilogue overhead again (decode inputs prefetched), dynamic M again at 8b.down M = 128
  gpu_tests 120 "$OUT/pytest_grouped.log" -n 8 tests/kernels/gemm/test_grouped_gemm.py tests/kernels/sm80/test_cuda_gemm.py -k "grouped or decode_plans"
  timeout 270 python3 benchmarks/grouped_gemm.py --out "$OUT" 2>&1 | tee "$OUT/grouped.log" | tail -30
  timeout 80 python3 benchmarks/epilogue_overhead.py --out "$OUT" 2>&1 | tee "$OUT/epilogue_overhead.log" | tail -8
  timeout 60 python3 benchmarks/dynamic_m.py --shapes 4096x14336 --ms 128 --out "$OUT" 2>&1 | tee "$OUT/dynamic_m.log" | tail -4
  ;;
gaps)  # each benchmark validates its kernels on the GPU before timing them; the validated epilogue table and
       # the GPU tests of the changed kernels around them
  timeout 80 python3 benchmarks/epilogue_overhead.py --validate-table --out "$OUT" 2>&1 | tee "$OUT/epilogue_table.log" | tail -3
  timeout 60 python3 benchmarks/dynamic_m.py --shapes 4096x14336 --ms 128 --out "$OUT" 2>&1 | tee "$OUT/dynamic_m.log" | tail -4
  timeout 110 python3 benchmarks/epilogue_overhead.py --out "$OUT" 2>&1 | tee "$OUT/epilogue_overhead.log" | tail -8
  timeout 120 python3 benchmarks/grouped_gemm.py --candidates --problems "deepseek-v3 prefill" --methods flush,clean \
    --out "$OUT" 2>&1 | tee "$OUT/grouped_candidates.log" | tail -12
  gpu_tests 80 "$OUT/pytest_gaps.log" -n 8 tests/kernels/gemm/test_dynamic_m.py tests/kernels/gemm/test_grouped_gemm.py tests/kernels/sm80/test_cuda_epilogue.py
  ;;
gaps2)  # builds first, all at once (three candidate sets and the epilogue kernels), then the timings one by one;
        # at most 8 files come back: env.txt, gaps2.log, epilogue_overhead.json, grouped_candidates_{ds,mx,dc}.json
  W=$(mktemp -d); L="$OUT/gaps2.log"
  DS="128x256x64/2x4/4,128x256x64/2x4/4/live,128x256x64/2x4/4/cta,128x256x64/2x4/4/live/cta"
  MX="128x256x64/2x4/4,128x256x64/2x4/4/live/cta"
  DC="16x64x64/1x4/4,16x64x64/1x4/4/cta,16x128x64/1x4/4/cta"
  G="python3 benchmarks/grouped_gemm.py --methods flush --rounds 5 --out $W"
  E="python3 benchmarks/epilogue_overhead.py --shapes 4096^3 --ctas 132 --fusions all,bias+gelu,silu,residual --rounds 5"
  timeout 150 $G --build-only --jobs 5 --candidates "$DS" --problems "deepseek-v3 prefill" > "$W/build_ds.log" 2>&1 &
  timeout 150 $G --build-only --jobs 3 --candidates "$MX" --problems "mixtral.gate_up prefill" > "$W/build_mx.log" 2>&1 &
  timeout 150 $G --build-only --jobs 3 --candidates "$DC" --problems "deepseek-v3 decode" > "$W/build_dc.log" 2>&1 &
  wait
  cat "$W"/build_*.log >> "$L"
  timeout 200 $E --jobs 15 --out "$W" 2>&1 | tee -a "$L" | tail -n 8
  cp "$W/epilogue_overhead.json" "$OUT/" 2>/dev/null
  for P in "ds:deepseek-v3 prefill:$DS" "mx:mixtral.gate_up prefill:$MX" "dc:deepseek-v3 decode:$DC"; do
    IFS=: read -r tag problem specs <<< "$P"
    timeout 120 $G --candidates "$specs" --problems "$problem" 2>&1 | tee -a "$L" | tail -n 6
    cp "$W/grouped_candidates.json" "$OUT/grouped_candidates_$tag.json" 2>/dev/null
  done
  gpu_tests 90 "$W/pytest.log" -n 4 tests/kernels/gemm/test_grouped_gemm.py; cat "$W/pytest.log" >> "$L"
  ;;
gaps3)  # the residual through shared memory (the /rs form: GemmConfig.residual_stage, opt-in) and the CTA-wide
        # group search, against the plans without them and torch; 5 rounds, flush. (The call of 2026-12-02
        # ran this at 3323dc2, where the residual stage was the default: its "before" was a checkout of main
        # in $BASE, timed first in the same call.)
  W=$(mktemp -d); L="$OUT/gaps3.log"
  G="python3 benchmarks/grouped_gemm.py --methods flush --rounds 5 --out $W"
  E="python3 benchmarks/epilogue_overhead.py --shapes 4096^3 --rounds 5 --jobs 15"
  timeout 100 $G --build-only --jobs 4 --candidates "128x256x64/2x4/4,128x256x64/2x4/4/cta" \
    --problems "deepseek-v3 prefill,mixtral.gate_up prefill" > "$W/build_grouped.log" 2>&1
  cat "$W/build_grouped.log" >> "$L"
  timeout 150 $E --fusions all,bias+gelu,residual,silu --ctas 132 --residual-stage --out "$W" 2>&1 | tee -a "$L" | tail -n 5
  cp "$W/epilogue_overhead.json" "$OUT/" 2>/dev/null
  for P in "ds:deepseek-v3 prefill" "mx:mixtral.gate_up prefill"; do
    timeout 100 $G --candidates "128x256x64/2x4/4,128x256x64/2x4/4/cta" --problems "${P#*:}" 2>&1 | tee -a "$L" | tail -n 4
    cp "$W/grouped_candidates.json" "$OUT/grouped_candidates_${P%%:*}.json" 2>/dev/null
  done
  ;;
*)
  echo "usage: $0 blocks|grouped|gaps|gaps2|gaps3" >&2
  exit 2
  ;;
esac
