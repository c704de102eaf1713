# Sourced by the benchmarks/h200_issue*.sh device scripts (from the repository root, PYTHONPATH holding
# this tree and TIRx): pipefail, $OUT (default .), the environment of the run in $OUT/env.txt (GPU, driver,
# power cap, clocks, torch / cuDNN / Triton versions, cores), and gpu_tests.
set -o pipefail
OUT=${OUT:-.}
export PYTHONUNBUFFERED=1 TVM_CDNA4_CACHE_DIR=${TVM_CDNA4_CACHE_DIR:-/tmp/tvm_cdna4_cache}
{ nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'triton', triton.__version__)"
  nproc; } > "$OUT/env.txt" 2>&1
gpu_tests() {  # pytest -m cuda with the project's plugin; $1 timeout, $2 log, the rest: files and options
  local limit=$1 log=$2; shift 2
  timeout "$limit" python3 -m pytest -q -p no:cacheprovider -p no:tvm_cdna4 -p tvm_cdna4.testing -m cuda "$@" 2>&1 | tee "$log" | tail -15
}
