// The CUDA launch plan of the top-k kernels (top_k_mask_logits,
// top_k_renorm_probs): how many blocks share a row and how each caches its
// part. Host-only, so that CPU tests can check the chooser and GPU tests can
// force a path; ops/top_k_mask_logits/cuda.cuh launches what it says.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "common/cuda/device_caps.h"

namespace kerneld::cuda::top_k {

constexpr int kMaxThreads = 512;  // block bound of the register-cached kernel
constexpr int kMinThreads = 256;  // one thread a histogram bin
constexpr int kMaxItems = 16;     // packs cached per thread, at most
constexpr int kMaxKeys = 32;      // keys (elements) cached per thread, at most
constexpr int kMaxCluster = 16;   // the H100's non-portable cluster limit (portable: 8)
constexpr int kStreamThreads = 1024;

using ::kerneld::cuda::DeviceCaps;  // what the launcher needs to know of the device
using ::kerneld::cuda::Pow2Ceil;

// cluster >= 1: the register-cached kernel, each row split over `cluster`
// blocks (a thread-block cluster when > 1, sm_90+) of `threads` threads
// caching `items` packs (of `n` elements) each. cluster 0: the streaming kernel (one block a
// row, the row re-read from L2 each radix round).
struct Plan {
  int cluster = 0;
  int threads = kStreamThreads;
  int items = 0;
};

// For tests and labs: >= 0 forces the cluster size (0: streaming), still
// raised to what caches a row.
inline std::atomic<int> g_force_cluster{-1};

// The one chooser, over rows of `units` packs of `n` elements. Each block
// takes at most kSplitElements elements (~16 a thread at 512 threads) and
// the row's blocks put at least half the SMs to work: a decode batch (1-64
// rows) over a 32k-128k vocabulary in one block a row would leave most SMs
// idle, as softmax found (ops/softmax/plan.h). Clusters need sm_90; before
// that a row that one block cannot cache streams.
constexpr int64_t kSplitElements = 8192;
// From this many rows on, a row gets the fewest blocks that cache it: the
// rows alone fill the SMs, and every block more a row adds a round of
// cluster barriers (64 x 32000, H100, 2026-11-26: 2 blocks a row 14-19 us,
// 4 blocks 19-23 us, bench/labs/top_k_lab.cu).
constexpr int64_t kManyRows = 48;
// max_cluster: the largest cluster to plan (a launch refused at 16 blocks,
// which needs every SM of a GPC free, plans again with the portable 8).
// elem_bytes: 2-byte types take twice the elements a block, since their
// kernel runs two blocks an SM (16 x 128256, H100, 2026-11-26: 8 blocks a
// row 18.8 us, 16 blocks 22.6 us).
inline Plan ChoosePlan(int64_t rows, int64_t units, int n, const DeviceCaps& dev, int force = -1,
                       int max_cluster = kMaxCluster, int elem_bytes = 4) {
  Plan plan;
  if (force == 0 || rows <= 0) return plan;
  const int64_t sms = std::max(dev.sm_count, 1);
  const bool clusters = dev.compute_capability >= 90;
  int c = 1;
  if (force > 0) {
    c = force;
  } else if (clusters && rows < kManyRows) {
    const int64_t fill = (sms + 2 * rows - 1) / (2 * rows);
    const int64_t split = std::max<int64_t>(1, kSplitElements * (elem_bytes == 2 ? 2 : 1) / n);
    c = std::min(max_cluster, std::max(Pow2Ceil((units + split - 1) / split), Pow2Ceil(fill)));
  }
  for (; c <= (clusters ? max_cluster : 1); c *= 2) {
    if (rows > INT_MAX / c) break;
    const int64_t chunk = (units + c - 1) / c;
    for (int items = 1; items <= kMaxItems && items * n <= kMaxKeys; items *= 2) {
      const int64_t t = (chunk + items - 1) / items;
      if (t > kMaxThreads) continue;
      plan.cluster = c;
      plan.items = items;
      plan.threads = static_cast<int>(std::max<int64_t>(kMinThreads, (t + 31) / 32 * 32));
      return plan;
    }
  }
  return plan;  // streams
}

// The shared-memory plan (16-bit types on sm_90+): a row split over a
// cluster of `cluster` blocks of kSharedThreads threads, each caching its
// part as keys in dynamic shared memory, one block an SM; one wave where
// the register plan needs two (64 x 128256: 8 blocks a row, 2 an SM, 512
// blocks; here 2 a row, 128 blocks). cluster 0: not this plan.
constexpr int kSharedThreads = 1024;
// Dynamic shared memory a block may cache (the H100 and H200 allow 227 KiB
// a block; SelectShared takes ~2 KiB of the rest).
constexpr int64_t kSharedCacheBytes = 200 * 1024;
// For tests and labs: -1 the chooser, 0 never, c > 0 this cluster size
// (raised to what caches a row; at most 8).
inline std::atomic<int> g_force_shared{-1};
// For labs: the shared plan's block size (0: kSharedThreads).
inline std::atomic<int> g_shared_threads{0};

// From how many rows, and how long a row, the shared plan serves (16-bit
// types; bench/labs/top_k_lab.cu): where the register plan splits a row
// over 8 or more blocks and the rows alone fill the GPU.
constexpr int64_t kSharedMinVocab = 65536;

inline int ChooseSharedCluster(int64_t rows, int64_t vocab, int elem_bytes, const DeviceCaps& dev,
                               int force_shared = -1, int force_cluster = -1) {
  if (elem_bytes != 2 || dev.compute_capability < 90 || rows <= 0 || force_shared == 0) return 0;
  if (force_shared < 0 && (force_cluster >= 0 || rows < kManyRows || vocab < kSharedMinVocab))
    return 0;
  // At most the portable 8 blocks: a 16-block cluster of blocks that each
  // fill an SM would need every SM of a GPC free.
  const int64_t bytes = vocab * elem_bytes;
  int c = std::min(std::max(1, force_shared), 8);
  while (c < 8 && (bytes + c - 1) / c > kSharedCacheBytes) c *= 2;
  if ((bytes + c - 1) / c > kSharedCacheBytes || rows > INT_MAX / c) return 0;
  return c;
}

}  // namespace kerneld::cuda::top_k
