// softmax, CUDA launch plan: which kernel (per row or split row over a
// thread-block cluster) and its limits. Host-only, so that CPU tests can
// check the chooser and GPU tests can force a path; ops/softmax/cuda.cuh
// launches what it says.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

namespace kerneld::cuda::softmax {

constexpr int kMaxThreads = 512;  // block bound of the register-cached kernels
constexpr int kMaxCached = 32;    // floats cached per thread, at most
constexpr int64_t kRowCapacity = int64_t{kMaxThreads} * kMaxCached;  // elements a block caches
constexpr int kMaxCluster = 16;   // the H100's non-portable cluster limit (portable: 8)

// What the launcher needs to know of the device.
struct DeviceCaps {
  int index = 0;               // CUDA device ordinal
  int compute_capability = 0;  // major * 10 + minor
  int sm_count = 1;
};

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

inline int Pow2Ceil(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p <<= 1;
  return p;
}

// The one chooser. Split rows when one block a row would leave SMs idle
// (rows < sm_count) or a row is too long to cache in one block's registers
// (vocab > kRowCapacity: the per-row path would stream it twice), and the
// row is long enough to share (vocab >= kMinSplitVocab). C is the smallest
// power of 2 that puts a block on every SM (rows * C >= sm_count), raised to
// what caches the row (C * kRowCapacity >= vocab) and capped so that each
// block keeps at least kMinChunk elements; at most kMaxCluster. Rows longer
// than kMaxCluster * kRowCapacity (262144) stay per row. Needs sm_90.
constexpr int64_t kMinSplitVocab = 4096;
constexpr int64_t kMinChunk = 2048;
inline Plan ChoosePlan(int64_t rows, int64_t vocab, const DeviceCaps& dev) {
  Plan plan;
  if (dev.compute_capability < 90 || vocab < kMinSplitVocab) return plan;
  const int64_t sms = std::max(dev.sm_count, 1);
  if (rows >= sms && vocab <= kRowCapacity) return plan;
  const int need = Pow2Ceil((vocab + kRowCapacity - 1) / kRowCapacity);
  if (need > kMaxCluster) return plan;
  int c = std::min(Pow2Ceil((sms + rows - 1) / rows), kMaxCluster);
  while (c > 2 && vocab / c < kMinChunk) c >>= 1;
  c = std::max(c, need);
  if (c < 2 || rows * c > INT_MAX) return plan;
  plan.cluster = c;
  return plan;
}

}  // namespace kerneld::cuda::softmax
