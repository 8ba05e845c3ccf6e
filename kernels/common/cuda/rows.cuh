// Shared pieces of the row-wise CUDA kernels (the norms and the gated
// activations): packed element access, float32 sums over a row's threads,
// the row walk and weight loads of the register-cached norm kernels, the
// launch shape for a row width, and the register-cache size dispatch.
// Framework-agnostic (no KernelContext, no Status): op headers
// (ops/<op>/cuda.cuh) include it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "common/cuda/block_reduce.cuh"
#include "common/cuda/launch.cuh"
#include "common/cuda/vec.cuh"

namespace kerneld::cuda {

// N elements of T moved by one load or store: N = 16 / sizeof(T) is the
// 128-bit vector path, N = 1 the scalar path (any H, any element offset).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <typename T>
inline constexpr int kVecN = 16 / static_cast<int>(sizeof(T));

#ifndef __CUDACC_RTC__  // host code: NVRTC compiles device code only
// The vector path needs every row start 16-byte aligned: the base pointers
// aligned and the row length a whole number of vectors.
template <typename T>
bool VectorRowsOk(int64_t row_len, std::initializer_list<const void*> ptrs) {
  if (row_len % kVecN<T> != 0) return false;
  for (const void* p : ptrs)
    if (!IsAligned16(p)) return false;
  return true;
}
#endif  // __CUDACC_RTC__

// The warp sum of block_reduce.cuh (one reduction tree for every kernel).
using blockops::WarpSum;

// Rows per block times 32: one partial sum per warp of each row.
inline constexpr int kRowScratch = 256;

// Sum of v over the threads of one row (threadIdx.x; blockDim.x a multiple
// of 32); every thread gets the total. Every thread of the block must call
// it: it synchronizes the block when a row spans several warps. Each warp
// then reduces the per-warp partials itself, which saves a broadcast. The
// partials' scratch is the function's own (one array a kernel, as
// ClusterRowSum's): every call of a kernel shares it, one after the other.
__device__ __forceinline__ float RowSum(float v) {
  __shared__ float scratch[kRowScratch];
  v = WarpSum(v);
  if (blockDim.x == 32) return v;
  float* s = scratch + threadIdx.y * 32;
  const unsigned lane = threadIdx.x & 31u;
  if (lane == 0) s[threadIdx.x >> 5] = v;
  __syncthreads();
  v = lane < (blockDim.x >> 5) ? s[lane] : 0.0f;
  v = WarpSum(v);
  __syncthreads();  // the scratch is free for the next RowSum
  return v;
}

// The row walk of the register-cached norm kernels: blockDim.y rows a
// block, grid-stride over the rows.
//   for (int64_t row0 = FirstBlockRow(); row0 < rows; row0 += BlockRowStride()) {
//     const auto [live, base] = RowSlot(row0, rows, units);
// Every thread runs every iteration, past the last row too (live false,
// base 0), because RowSum synchronizes the whole block. base is the row's
// first pack. (Plain expressions, not a loop taking a lambda: a lambda body
// compiled to different SASS.)
__device__ __forceinline__ int64_t FirstBlockRow() { return int64_t{blockIdx.x} * blockDim.y; }
__device__ __forceinline__ int64_t BlockRowStride() { return int64_t{gridDim.x} * blockDim.y; }

struct RowSlot {
  bool live;     // the block's last rows may run past the end
  int64_t base;  // row * units, 0 when not live
  __device__ __forceinline__ RowSlot(int64_t row0, int64_t rows, int units) {
    const int64_t row = row0 + threadIdx.y;
    live = row < rows;
    base = live ? row * units : 0;
  }
};

// A thread's weight packs in a register-cached norm kernel. With one pack a
// thread the weight is loaded with x, before the reduction: its DRAM
// latency then overlaps the reduction's instead of following it (rmsnorm
// 16 x 4096 float16: 4.45 -> 4.13 us). With more packs the extra registers
// cost more than they save (large bfloat16 rows), so it is loaded where it
// is used.
template <typename P, int kItems>
struct RowWeights {
  static constexpr bool kEarly = kItems == 1;
  P v[kItems];
  // Beside the load of x's pack k.
  __device__ __forceinline__ void LoadEarly(const P* w, int k, int u) {
    if constexpr (kEarly) v[k] = w[u];
  }
  // Where the output is computed: pack k, loaded now unless it was early.
  __device__ __forceinline__ const P& Get(const P* w, int k, int u) {
    if constexpr (!kEarly) v[k] = w[u];
    return v[k];
  }
};

#ifndef __CUDACC_RTC__  // the launch plans: host code, which NVRTC does not compile
// How a row-wise norm kernel covers its rows. `units` is the row length in
// packs. The row is cached in registers (`items` packs per thread) so that
// x is read from DRAM once; a row too wide for that (items == 0) goes to a
// kernel that streams it from global memory again (L2 hits).
struct RowPlan {
  int items = 0;
  dim3 block;
  unsigned grid = 1;
};

// The launch shape for `items` packs a thread (0: the streaming kernel's
// 1024-thread blocks): threads a row rounded up to a warp, and short rows
// share a block (at most kRowScratch / 32 rows, 256 threads).
inline RowPlan PlanRowsWithItems(int64_t rows, int64_t units, int items) {
  RowPlan p;
  p.items = items;
  int tpr = 1024;
  if (items > 0) {
    const int64_t threads = (units + items - 1) / items;
    tpr = static_cast<int>(std::max<int64_t>(32, (threads + 31) / 32 * 32));
  }
  const int rpb = std::max(1, 256 / tpr);
  p.block = dim3(static_cast<unsigned>(tpr), static_cast<unsigned>(rpb));
  const int64_t blocks = (rows + rpb - 1) / rpb;
  p.grid = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 30));
  return p;
}

inline RowPlan PlanNormRows(int64_t rows, int64_t units, int max_items, int sm_count = 0) {
  // Few rows: as few packs per thread as fit a row in one 1024-thread
  // block. At decode shapes this spreads a row's loads over the most
  // threads and SMs: rmsnorm 16 x 4096 float16 took 5.8 us with 4 packs a thread and 2
  // rows a block (the old plan), 4.1 us with one pack a thread (FlashInfer
  // 4.8 us; H100, bench lab, 2026-11-25). Short rows still share a block.
  // With the GPU full of rows, one pack a thread while a row fits 512
  // threads (mid 4096 x 4096 float16: 0.85 -> 0.91 x copy), else the plan
  // below: up to 128 threads a row with 1 or 2 packs each, from 4 packs on
  // up to 1024 threads (two packs a thread at 512 threads took large bfloat16
  // rows from 0.95 to 0.76 x copy).
  const bool many_rows = sm_count > 0 && rows >= 4 * int64_t{sm_count};
  int items = 0;
  for (int k : {1, 2, 4, 8}) {
    if (k > max_items) break;
    const int64_t fit = many_rows ? (k == 1 ? 512 : k < 4 ? 128 : 1024) : 1024;
    if (units <= int64_t{k} * fit) {
      items = k;
      break;
    }
  }
  return PlanRowsWithItems(rows, units, items);
}

// The largest register cache per thread: 8 single elements, or 4 vectors
// (8 vectors of bfloat16 converted to float32 overflow the 64 registers a
// 1024-thread block allows and spill). Wider rows take the streaming kernel.
template <int N>
inline constexpr int kMaxItems = N == 1 ? 8 : 4;

// Calls f(std::integral_constant<int, items>{}) for items in {1, 2, 4, 8}
// up to kMaxItems: one kernel instantiation per register-cache size. Any
// other count is a planning bug: cudaErrorInvalidConfiguration.
template <int kMaxItems, typename F>
cudaError_t DispatchItems(int items, F&& f) {
  switch (items) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      if constexpr (kMaxItems >= 4) return f(std::integral_constant<int, 4>{});
      break;
    case 8:
      if constexpr (kMaxItems >= 8) return f(std::integral_constant<int, 8>{});
      break;
    default:
      break;
  }
  return cudaErrorInvalidConfiguration;
}
#endif  // __CUDACC_RTC__

}  // namespace kerneld::cuda
