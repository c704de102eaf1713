// Peer kernels for the CUDA GEMM benchmark: CUTLASS 2.x Ampere GEMMs (cp.async multistage
// pipeline, ldmatrix, mma.sync m16n8k16; arch tag Sm80), f16 or bf16 inputs, f32 accumulation and
// f32 output C [M, N] row-major, for every BLAS layout of tvm_cdna4's GEMM (C = op(A) op(B)):
//   A: "n" = [M, K] row-major, "t" = [K, M] row-major (CUTLASS: [M, K] column-major)
//   B: "n" = [K, N] row-major, "t" = [N, K] row-major (CUTLASS: [K, N] column-major)
// (schedules/cuda_gemm.py `operand_shapes`). Each kernel is exported as
//   extern "C" int cutlass_<dtype>_<layout>_<tile>(const void* a, const void* b, float* c,
//                                                  int m, int n, int k, void* stream)
// (0: launched; 1: cannot implement; 2: initialize failed; 3: launch failed), and
// `cutlass_peer_names()` lists them, comma-separated. Timed by
// `benchmarks/cuda_gemm.py --bench --cutlass cutlass_sm80_peer.so`.
// Build (no GPU needed; CUTLASS headers from the nvidia-cutlass 4.2.0.0 wheel; 24 kernels, the two
// halves compiled in parallel):
//   pip download --no-deps nvidia-cutlass==4.2.0.0 -d /tmp/cutlass
//   python3 -m zipfile -e /tmp/cutlass/nvidia_cutlass-4.2.0.0-py3-none-any.whl /tmp/cutlass/x
//   F="-O3 -std=c++17 --expt-relaxed-constexpr -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -I/tmp/cutlass/x/cutlass_library/source/include"
//   nvcc $F -DPEER_PART=1 -c -o f16.o cutlass_sm80_peer.cu & nvcc $F -DPEER_PART=2 -c -o bf16.o cutlass_sm80_peer.cu & wait
//   nvcc -shared -o cutlass_sm80_peer.so f16.o bf16.o
// (without -DPEER_PART one object holds both dtypes: `nvcc $F -shared -o cutlass_sm80_peer.so cutlass_sm80_peer.cu`).
#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/gemm/device/gemm.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

namespace peer {
using cutlass::layout::ColumnMajor;
using cutlass::layout::RowMajor;

// element types by the benchmark's dtype names
struct f16 { using T = cutlass::half_t; };
struct bf16 { using T = cutlass::bfloat16_t; };

// CUTLASS layouts of A [M, K] and B [K, N] by the BLAS letters (see the head of the file)
struct nn { using A = RowMajor; using B = RowMajor; };
struct nt { using A = RowMajor; using B = ColumnMajor; };
struct tn { using A = ColumnMajor; using B = RowMajor; };
struct tt { using A = ColumnMajor; using B = ColumnMajor; };

template <typename D, typename L, int BM, int BN, int BK, int WM, int WN, int WK, int Stages>
using Sm80Gemm = cutlass::gemm::device::Gemm<
    typename D::T, typename L::A,                   // A [M, K]
    typename D::T, typename L::B,                   // B [K, N]
    float, RowMajor,                                // C [M, N]
    float,                                          // accumulator
    cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
    cutlass::gemm::GemmShape<BM, BN, BK>, cutlass::gemm::GemmShape<WM, WN, WK>,
    cutlass::gemm::GemmShape<16, 8, 16>,
    cutlass::epilogue::thread::LinearCombination<float, 4, float, float>,
    cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<8>, Stages>;

// C = op(A) op(B) on `s`; the leading dimensions follow from the layouts (packed operands)
template <typename G>
int run(const void* a, const void* b, float* c, int m, int n, int k, cudaStream_t s) {
  using A = typename G::ElementA;
  using B = typename G::ElementB;
  typename G::Arguments args({m, n, k}, {(const A*)a, G::LayoutA::packed({m, k})},
                             {(const B*)b, G::LayoutB::packed({k, n})}, {c, RowMajor::packed({m, n})},
                             {c, RowMajor::packed({m, n})}, {1.0f, 0.0f});
  G op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (op.initialize(args, nullptr, s) != cutlass::Status::kSuccess) return 2;
  return op(s) == cutlass::Status::kSuccess ? 0 : 3;
}
}  // namespace peer

// The tiles, each instantiated for every dtype x layout: the tile of our default (8 warps of
// 64x64, 128x256x64) and CUTLASS's best Ampere f16 tiles on the H200 (benchmarks/journal/2026-12.md, stop 11)
#define PEER_TILES(X, dt, lay)                                     \
  X(dt, lay, 128x256x64_w64x64_s3, 128, 256, 64, 64, 64, 64, 3)    \
  X(dt, lay, 256x128x64_w64x64_s3, 256, 128, 64, 64, 64, 64, 3)    \
  X(dt, lay, 128x256x32_w64x64_s4, 128, 256, 32, 64, 64, 32, 4)
#define PEER_LAYOUTS(X, dt) PEER_TILES(X, dt, nn) PEER_TILES(X, dt, nt) PEER_TILES(X, dt, tn) PEER_TILES(X, dt, tt)
#define PEER_ALL(X) PEER_LAYOUTS(X, f16) PEER_LAYOUTS(X, bf16)

#define PEER_DEFINE(dt, lay, tile, ...)                                                             \
  extern "C" int cutlass_##dt##_##lay##_##tile(const void* a, const void* b, float* c, int m, int n, \
                                               int k, void* s) {                                    \
    return peer::run<peer::Sm80Gemm<peer::dt, peer::lay, __VA_ARGS__>>(a, b, c, m, n, k,           \
                                                                        (cudaStream_t)s);           \
  }
#define PEER_NAME(dt, lay, tile, ...) "cutlass_" #dt "_" #lay "_" #tile ","

// -DPEER_PART=1 / 2: only the f16 / bf16 kernels (the two halves of a parallel build); the names
// list goes with the first
#if !defined(PEER_PART)
PEER_ALL(PEER_DEFINE)
#elif PEER_PART == 1
PEER_LAYOUTS(PEER_DEFINE, f16)
#else
PEER_LAYOUTS(PEER_DEFINE, bf16)
#endif

#if !defined(PEER_PART) || PEER_PART == 1
extern "C" const char* cutlass_peer_names() { return PEER_ALL(PEER_NAME); }
#endif
