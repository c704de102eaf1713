#!/bin/bash
# Issue 26 part 2 on the H200 (the sm80 attention forward), one device call, from the repository root
# with PYTHONPATH holding this tree and TIRx; outputs under $OUT (benchmarks/RESULTS.md, "Issue 26 on
# the H200", says what came out):
#
#   bash benchmarks/h200_issue26.sh [sweep|skew|default]   # GPU tests, then benchmarks/attention_h200.py
set -o pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 TVM_CDNA4_CACHE_DIR=/tmp/tvm_cdna4_cache
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)"
  nproc; } > "$OUT/env.txt" 2>&1
timeout 150 python3 -m pytest -q -p no:cacheprovider -p no:tvm_cdna4 -p tvm_cdna4.testing -m cuda -n 8 \
  tests/test_attention_sm80.py tests/test_torch_entry.py -k "gpu or attention" 2>&1 | tee "$OUT/pytest_attention.log" | tail -8
timeout 330 python3 benchmarks/attention_h200.py --configs "${1:-sweep}" --out "$OUT" 2>&1 | tee "$OUT/attention_h200.log" | tail -40
