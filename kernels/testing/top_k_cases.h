// The cases top_k_mask_logits and top_k_renorm_probs share (their tests in
// kernels/ops/<op>/): the forms of the 'top_k' input, the CPU sweep of
// dtypes x shapes x forms, and the GPU loop over every launch path.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "op_runner.h"
#include "ops/top_k_mask_logits/plan.h"

namespace kerneld::testing {

// 'top_k' forms: 0, one k as [] int64; 1, one k as [1] int32; 2, a k per row
// drawn from [-2, vocab + 2) (keep-all values included).
inline HostTensor TopK(int form, int64_t rows, int64_t vocab, std::mt19937_64& rng) {
  if (form == 0) return {DType::kInt64, {}, {static_cast<double>(std::max<int64_t>(1, vocab / 3))}};
  if (form == 1) return {DType::kInt32, {1}, {static_cast<double>(std::min<int64_t>(50, vocab))}};
  return Random(DType::kInt32, {rows}, rng, -2, static_cast<double>(vocab + 2));
}

// dtype, {rows, vocab}, 'top_k' form.
using TopKParam = std::tuple<DType, std::pair<int64_t, int64_t>, int>;

inline std::string TopKName(const ::testing::TestParamInfo<TopKParam>& info) {
  const auto& [dt, shape, form] = info.param;
  return std::string(DTypeName(dt)) + "_" + std::to_string(shape.first) + "x" +
         std::to_string(shape.second) + "_k" + std::to_string(form);
}

// The CPU sweep: every float dtype, odd and pack-multiple vocabularies, every form.
inline auto TopKSweep() {
  return ::testing::Combine(::testing::Values(DType::kFloat16, DType::kBFloat16, DType::kFloat32),
                            ::testing::Values(std::pair<int64_t, int64_t>{1, 1},
                                              std::pair<int64_t, int64_t>{3, 127},
                                              std::pair<int64_t, int64_t>{2, 128},
                                              std::pair<int64_t, int64_t>{4, 4097},
                                              std::pair<int64_t, int64_t>{2, 32000}),
                            ::testing::Values(0, 1, 2));
}

// Forces the launch plan for one scope: the register plan's cluster size
// (-1: the chooser), or the shared-memory plan's (shared > 0; 16-bit types,
// sm_90+; the others keep the chooser's).
struct ForceCluster {
  explicit ForceCluster(int c) {
    cuda::top_k::g_force_cluster = c < 100 ? c : -1;
    cuda::top_k::g_force_shared = c < 100 ? -1 : c - 100;
  }
  ~ForceCluster() {
    cuda::top_k::g_force_cluster = -1;
    cuda::top_k::g_force_shared = -1;
  }
};

// Calls f(dtype, rows, vocab) on every launch path (the chooser's, streaming,
// one block a row, clusters of 4, the shared-memory plan on one block and
// on clusters of 2 and 4) x float dtype x decode shape over LLM
// vocabularies, with the path forced and the case traced.
inline void ForEachTopKGpuCase(const std::function<void(DType, int64_t, int64_t)>& f) {
  for (int force : {-1, 0, 1, 4, 101, 102, 104})
    for (DType dt : FloatTypes())
      for (auto [rows, vocab] : std::vector<std::pair<int64_t, int64_t>>{{1, 1},
                                                                         {3, 127},
                                                                         {2, 4096},
                                                                         {1, 32000},
                                                                         {16, 32000},
                                                                         {64, 32000},
                                                                         {1, 50257},
                                                                         {1, 128256},
                                                                         {16, 128256},
                                                                         {64, 128256}}) {
        SCOPED_TRACE(std::string(DTypeName(dt)) + " " + std::to_string(rows) + "x" +
                     std::to_string(vocab) + " force " + std::to_string(force));
        ForceCluster forced(force);
        f(dt, rows, vocab);
      }
}

// A k per row for the GPU cases: keep-all values (-1, 0, >= vocab) among them,
// at most 300 so the kept set stays a decode sampler's.
inline HostTensor GpuTopK(int64_t rows, int64_t vocab, std::mt19937_64& rng) {
  return Random(DType::kInt32, {rows}, rng, -1,
                static_cast<double>(std::min<int64_t>(vocab + 2, 300)));
}

}  // namespace kerneld::testing
