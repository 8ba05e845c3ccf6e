// The split-row plan of the row-wise norms (common/cuda/split_rows.cuh
// says why rows are split): when a row goes over a cluster of blocks, and
// the launch shape. Host code without CUDA types, so that CPU tests and
// GPU tests (plain C++) can check the chooser and force the path; the
// block bound is also the kernels' (NVRTC sees only that).
#pragma once

#include <cstdint>

namespace kerneld::cuda {

// The block bound of the split-row kernels.
inline constexpr int kSplitMaxThreads = 512;

}  // namespace kerneld::cuda

#ifndef __CUDACC_RTC__  // the plan: host code, which NVRTC does not compile
#include <algorithm>
#include <atomic>
#include <climits>

namespace kerneld::cuda {

// How a split row is launched: clusters of `cluster` blocks (0: not split),
// `chunk` packs a block, `items` packs a thread, `threads` a block.
struct SplitRowPlan {
  int cluster = 0;
  int items = 0;
  unsigned threads = 0;
  int64_t chunk = 0;
};

// Tests and benches: < 0 lets the plan choose, 0 never splits, >= 2 splits
// every row over clusters of that many blocks (raised to what caches the
// row), any width or row count.
inline std::atomic<int> g_force_split_rows{-1};
// Split-row launches made by the AOT launchers (tests check that the path ran).
inline std::atomic<int64_t> g_split_row_launches{0};

inline constexpr int kSplitMaxCluster = 16;          // the H100's non-portable limit
// Rows from 32 KiB (hidden 16384 in 16-bit types), at most kSplitMaxRows of
// them: measured on an H100 (2026-11-26, bench/jit_bench's 1row_us column),
// one block a row stays faster at hidden 8192 (4.5 against 5.5 us at 1-64
// rows) and at 64 rows (64 x 32768: 8.6 against 10.5 us); the split wins at
// 1-16 rows of 16384 (5.6 against 6.2) and 32768 (5.6-6.2 against 8.2-8.4).
inline constexpr int64_t kSplitMinRowBytes = 32768;
inline constexpr int64_t kSplitMaxRows = 32;
inline constexpr int64_t kSplitMinChunkBytes = 2048;

// The plan of `rows` rows of `units` packs of `pack_bytes` bytes, with at
// most `max_items` packs cached a thread. Split where one block a row leaves
// SMs idle (rows <= kSplitMaxRows) and the row is wide (>= 32 KiB: hidden
// 16384 in float16 / bfloat16, 8192 in float32). C, a power of 2 up to 16, is what
// puts a block on every SM (rows * C >= SMs), lowered while a block would
// get less than 2 KiB of the row (16 x 8192 float16: 8 blocks of 128 packs
// a row, not 16 of 64), raised while a block would need more than
// max_items packs a thread at 512 threads. A block takes the fewest packs a
// thread that keep it at <= 512 threads (few rows: spread a row's loads
// over the most threads, as PlanNormRows does).
inline SplitRowPlan PlanSplitRows(int64_t rows, int64_t units, int pack_bytes, int max_items,
                                  int sm_count, int compute_capability) {
  SplitRowPlan p;
  const int force = g_force_split_rows.load(std::memory_order_relaxed);
  if (compute_capability < 90 || rows <= 0 || units <= 0 || force == 0) return p;
  const int64_t sms = std::max(sm_count, 1);
  int c = 2;
  if (force >= 2) {
    c = std::min(force, kSplitMaxCluster);
  } else {
    if (rows >= sms || rows > kSplitMaxRows || units * pack_bytes < kSplitMinRowBytes) return p;
    const int64_t want = (sms + rows - 1) / rows;
    while (c < want && c < kSplitMaxCluster) c *= 2;
    while (c > 2 && (units + c - 1) / c * pack_bytes < kSplitMinChunkBytes) c /= 2;
  }
  const int64_t cap = int64_t{kSplitMaxThreads} * max_items;
  while (c < kSplitMaxCluster && (units + c - 1) / c > cap) c *= 2;
  const int64_t chunk = (units + c - 1) / c;
  if (chunk > cap || rows * c > INT_MAX) return p;
  for (int items = 1; items <= max_items; items *= 2) {
    const int64_t t = (chunk + items - 1) / items;
    if (t > kSplitMaxThreads) continue;
    p.cluster = c;
    p.items = items;
    p.chunk = chunk;
    p.threads = static_cast<unsigned>(std::max<int64_t>(32, (t + 31) / 32 * 32));
    return p;
  }
  return p;
}

}  // namespace kerneld::cuda
#endif  // __CUDACC_RTC__
