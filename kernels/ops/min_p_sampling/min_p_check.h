// min_p_sampling's documented support, for its unit and gpu tests: p_j > 0
// and p_j >= min_p * max(p), the threshold in float32 as the kernels have it;
// and the checks both backends pass, each given its runner.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "op_runner.h"
#include "sampling_check.h"

namespace kerneld::testing {

inline std::vector<bool> MinPSupport(const std::vector<double>& p, double min_p) {
  const float t =
      static_cast<float>(min_p) * static_cast<float>(*std::max_element(p.begin(), p.end()));
  std::vector<bool> keep(p.size());
  for (size_t j = 0; j < p.size(); ++j) keep[j] = p[j] > 0 && static_cast<float>(p[j]) >= t;
  return keep;
}

// Runs min_p_sampling on one backend (RunOnCpu or RunOnCuda).
using MinPRun = std::function<OpRun(const HostTensors& inputs, const AttrMap& attrs)>;

// 200,000 draws of a skewed 64-token row: only the support, in proportion.
inline void ExpectMinPDistribution(const MinPRun& run) {
  std::mt19937_64 rng(7);
  const std::vector<double> row = SkewedRow(64, rng);
  const double min_p = 0.05;
  OpRun r = run({{"probs", Repeat(row, 200000)}}, {{"min_p", min_p}, {"seed", int64_t{3}}});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  const auto keep = MinPSupport(row, min_p);
  ASSERT_EQ(CheckSupport(r.outputs["samples"].values, keep), "");
  const DistributionCheck c = CompareDistribution(r.outputs["samples"].values, row, keep);
  EXPECT_GT(c.cosine, 0.999);
  EXPECT_LT(c.max_z, 5.0);
}

// The same seed gives the same samples; another seed others.
inline void ExpectMinPSeeded(const MinPRun& run) {
  std::mt19937_64 rng(11);
  HostTensors in = {{"probs", Repeat(SkewedRow(4097, rng), 64)}};
  auto samples = [&](int64_t seed) {
    OpRun r = run(in, {{"min_p", 0.01}, {"seed", seed}});
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    return r.outputs["samples"].values;
  };
  EXPECT_EQ(samples(5), samples(5));
  EXPECT_NE(samples(5), samples(6));
}

}  // namespace kerneld::testing
