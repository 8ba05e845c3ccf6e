// softmax, CUDA launch plan: which kernel (per row or split row over a
// thread-block cluster) and its limits. Host-only, so that CPU tests can
// check the chooser and GPU tests can force a path; ops/softmax/cuda.cuh
// launches what it says.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "common/cuda/device_caps.h"

namespace kerneld::cuda::softmax {

constexpr int kMaxThreads = 512;  // block bound of the register-cached kernels
constexpr int kMaxCached = 32;    // floats cached per thread, at most
constexpr int64_t kRowCapacity = int64_t{kMaxThreads} * kMaxCached;  // elements a block caches
constexpr int kMaxCluster = 16;  // the H100's non-portable cluster limit (portable: 8)

using ::kerneld::cuda::DeviceCaps;  // what the launcher needs to know of the device
using ::kerneld::cuda::Pow2Ceil;

// cluster 0: per-row kernels; >= 2: split rows over clusters of that many
// blocks. max_threads bounds the split-row block (a power of 2, 32..512).
struct Plan {
  int cluster = 0;
  int max_threads = kMaxThreads;
};

// For tests and labs: >= 0 forces the cluster size (0: per row); the plan is
// still raised to what fits (a row needs ceil(vocab / kRowCapacity) blocks)
// and falls back to per row where clusters cannot run.
inline std::atomic<int> g_force_cluster{-1};
inline std::atomic<int> g_force_threads{0};
// Split-row launches made (tests check that the path ran).
inline std::atomic<int64_t> g_cluster_launches{0};

// The one chooser. Split rows only where one block a row leaves SMs idle
// (rows < sm_count) and the row is too long for one block's registers
// (vocab > kRowCapacity: the per-row path streams it twice, 1 x 128256 took
// 32 us). Shorter rows (16 x 4096: 5.1 us per row, 6.0-6.7 split) and many
// rows (256 x 128256: 96 us per row, 109 split) stay per row (H100,
// a cluster sweep, bench/labs/README.md). C, a power of 2 up to kMaxCluster, is the larger of
//  - what gives a block at most kSplitChunk elements: 64 x 32768 took 9.5 us
//    in 8 blocks a row, 10.2-10.5 in 4; 64 x 50000 12.5 in 8, 13.3 in 16;
//  - what puts a block on half the SMs (rows * C >= sm_count / 2): 1 x 32768
//    6.2 us in 16 blocks, 6.9 in 4.
// Blocks of at most 4096 elements take 256 threads (16 x 32768 in 8: 6.9 us
// at 256, 7.5 at 512). Larger ones take 512 while the row's blocks fit on
// the SMs at once (1 x 128256 in 16: 7.2 us at 512, 7.8 at 256), else 256
// (64 x 128256 in 16: 21.2 us at 256, 23.1 at 512). Timings: float16 ->
// float32, L2 read-flushed, H200 (132 SMs), bench/labs/softmax_floor_lab's
// "softmax cluster" sweep, whose kernel is SoftmaxClusterKernel's. Needs
// sm_90 (clusters).
constexpr int64_t kSplitChunk = 6400;
constexpr int64_t kNarrowChunk = 4096;
inline Plan ChoosePlan(int64_t rows, int64_t vocab, const DeviceCaps& dev) {
  Plan plan;
  const int64_t sms = std::max(dev.sm_count, 1);
  if (dev.compute_capability < 90 || vocab <= kRowCapacity || rows >= sms) return plan;
  const int64_t fill = (sms + 2 * rows - 1) / (2 * rows);
  const int c = std::max(Pow2Ceil((vocab + kSplitChunk - 1) / kSplitChunk), Pow2Ceil(fill));
  if (c > kMaxCluster || rows * c > INT_MAX) {
    // Past 16 blocks of kSplitChunk: 16 blocks if they cache the row.
    if (vocab > kMaxCluster * kRowCapacity || rows * kMaxCluster > INT_MAX) return plan;
  }
  plan.cluster = std::min(c, kMaxCluster);
  const bool narrow = (vocab + plan.cluster - 1) / plan.cluster <= kNarrowChunk;
  // 256 threads must still cache the row in the cluster's blocks: past that
  // (vocab > 16 * 256 * 32 = 131072, e.g. 152064 or 256000) the launcher
  // would find no cluster size and stream the row one block a row.
  const bool fits_narrow = vocab <= int64_t{plan.cluster} * 256 * kMaxCached;
  plan.max_threads = narrow || (rows * plan.cluster > sms && fits_narrow) ? 256 : kMaxThreads;
  return plan;
}

}  // namespace kerneld::cuda::softmax
