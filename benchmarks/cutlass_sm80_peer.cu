// Peer kernels for the CUDA GEMM benchmark: CUTLASS 2.x Ampere GEMMs (cp.async multistage
// pipeline, ldmatrix, mma.sync m16n8k16; arch tag Sm80), f16 x f16 -> f32, A [M, K] row-major,
// B [N, K] row-major (layout "nt", C = A B^T), C [M, N] f32 row-major.
// Timed by `benchmarks/cuda_gemm.py --bench --cutlass cutlass_sm80_peer.so`, which reads the
// PEER names below. Build (no GPU needed; CUTLASS headers from the nvidia-cutlass 4.2.0.0 wheel):
//   pip download --no-deps nvidia-cutlass==4.2.0.0 -d /tmp/cutlass
//   python3 -m zipfile -e /tmp/cutlass/nvidia_cutlass-4.2.0.0-py3-none-any.whl /tmp/cutlass/x
//   nvcc -O3 -std=c++17 --expt-relaxed-constexpr -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 \
//        -I/tmp/cutlass/x/cutlass_library/source/include -o cutlass_sm80_peer.so cutlass_sm80_peer.cu
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

template <int BM, int BN, int BK, int WM, int WN, int WK, int Stages>
using Sm80Gemm = cutlass::gemm::device::Gemm<
    cutlass::half_t, cutlass::layout::RowMajor,     // A [M, K]
    cutlass::half_t, cutlass::layout::ColumnMajor,  // B [K, N] column-major = [N, K] row-major
    float, cutlass::layout::RowMajor,               // C [M, N]
    float,                                          // accumulator
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<BM, BN, BK>, cutlass::gemm::GemmShape<WM, WN, WK>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, Stages>;

template <typename G>
static int run(const void* a, const void* b, float* c, int m, int n, int k, cudaStream_t s) {
  typename G::Arguments args({m, n, k}, {(const cutlass::half_t*)a, k}, {(const cutlass::half_t*)b, k},
                             {c, n}, {c, n}, {1.0f, 0.0f});
  G op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (op.initialize(args, nullptr, s) != cutlass::Status::kSuccess) return 2;
  return op(s) == cutlass::Status::kSuccess ? 0 : 3;
}

#define PEER(name, ...) \
  extern "C" int name(const void* a, const void* b, float* c, int m, int n, int k, void* s) { \
    return run<Sm80Gemm<__VA_ARGS__>>(a, b, c, m, n, k, (cudaStream_t)s); }

// the tile of our default (8 warps of 64x64) and CUTLASS's usual Ampere f16 tiles
PEER(cutlass_128x256x64_w64x64_s3, 128, 256, 64, 64, 64, 64, 3)
PEER(cutlass_128x256x64_w64x64_s4, 128, 256, 64, 64, 64, 64, 4)
PEER(cutlass_256x128x64_w64x64_s3, 256, 128, 64, 64, 64, 64, 3)
PEER(cutlass_128x256x32_w64x64_s4, 128, 256, 32, 64, 64, 32, 4)
PEER(cutlass_256x128x32_w64x64_s4, 256, 128, 32, 64, 64, 32, 4)
PEER(cutlass_128x128x64_w64x64_s4, 128, 128, 64, 64, 64, 64, 4)
PEER(cutlass_128x128x32_w64x64_s5, 128, 128, 32, 64, 64, 32, 5)
