// Statistical checks for the sampling ops (no deterministic reference exists
// for a random op): test rows, the exact support of a row, membership of
// the samples, and the empirical distribution against the renormalized one.
// Shared by the unit (cpu) and gpu (cuda) tests of every sampling op.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kerneld/host_tensor.h"

namespace kerneld::testing {

// `rows` copies of one probability row (float32-rounded).
inline HostTensor Repeat(const std::vector<double>& row, int64_t rows) {
  HostTensor t;
  t.dtype = DType::kFloat32;
  t.shape = {rows, static_cast<int64_t>(row.size())};
  t.values.reserve(static_cast<size_t>(rows) * row.size());
  for (int64_t r = 0; r < rows; ++r) t.values.insert(t.values.end(), row.begin(), row.end());
  return t;
}

// A skewed random row (roughly Zipf-like, as real LM distributions are),
// with some exact zeros, normalized to sum ~1.
inline std::vector<double> SkewedRow(int64_t v, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> p(static_cast<size_t>(v));
  double s = 0;
  for (auto& x : p) {
    const double r = u(rng);
    x = r < 0.05 ? 0.0 : std::pow(r, 6.0);
    s += x;
  }
  for (auto& x : p) x = static_cast<float>(x / s);
  return p;
}

// top_k_top_p_sampling's documented support: p_j > 0, fewer than top_k tokens larger than p_j
// (top_k = 0: off) and less than top_p of the row's mass above it (top_p = 1:
// off). Computed in double from the float32 probabilities.
inline std::vector<bool> SamplingSupport(const std::vector<double>& p, int64_t top_k,
                                         double top_p) {
  const size_t v = p.size();
  std::vector<double> sorted(p);
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  std::vector<double> prefix(v + 1, 0.0);  // prefix[i]: mass of sorted[0, i)
  for (size_t i = 0; i < v; ++i) prefix[i + 1] = prefix[i] + sorted[i];
  const double total = prefix[v];
  std::vector<bool> keep(v);
  for (size_t j = 0; j < v; ++j) {
    if (!(p[j] > 0)) continue;
    // Tokens strictly larger: the prefix of `sorted` before the first == p[j].
    const size_t above = static_cast<size_t>(
        std::lower_bound(sorted.begin(), sorted.end(), p[j], std::greater<double>()) -
        sorted.begin());
    const double mass = prefix[above];
    keep[j] =
        (top_k <= 0 || static_cast<int64_t>(above) < top_k) && (top_p >= 1 || mass < top_p * total);
  }
  return keep;
}

// "" when every sample is a kept index, else a description of the first that is not.
inline std::string CheckSupport(const std::vector<double>& samples, const std::vector<bool>& keep) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const double s = samples[i];
    if (!(s >= 0 && s < static_cast<double>(keep.size())) || !keep[static_cast<size_t>(s)])
      return "sample " + std::to_string(i) + " = " + std::to_string(s) + " is outside the support";
  }
  return "";
}

struct DistributionCheck {
  double cosine = 0;  // between the empirical and expected frequency vectors
  double max_z = 0;   // largest |count - n p| / sqrt(n p (1 - p)) over the bins
};

// Compares the histogram of `samples` with p restricted to `keep`, renormalized.
inline DistributionCheck CompareDistribution(const std::vector<double>& samples,
                                             const std::vector<double>& p,
                                             const std::vector<bool>& keep) {
  std::vector<double> counts(p.size(), 0.0), want(p.size(), 0.0);
  double mass = 0;
  for (size_t j = 0; j < p.size(); ++j)
    if (keep[j]) mass += p[j];
  for (size_t j = 0; j < p.size(); ++j) want[j] = keep[j] ? p[j] / mass : 0.0;
  for (double s : samples)
    if (s >= 0 && s < static_cast<double>(p.size())) counts[static_cast<size_t>(s)] += 1;
  DistributionCheck c;
  double dot = 0, nc = 0, nw = 0;
  const double n = static_cast<double>(samples.size());
  for (size_t j = 0; j < p.size(); ++j) {
    dot += counts[j] * want[j];
    nc += counts[j] * counts[j];
    nw += want[j] * want[j];
    const double var = n * want[j] * (1 - want[j]);
    if (var > 0)
      c.max_z = std::max(c.max_z, std::fabs(counts[j] - n * want[j]) / std::sqrt(var));
    else if (counts[j] > 0)
      c.max_z = INFINITY;  // a sample where none may land
  }
  c.cosine = dot / std::sqrt(nc * nw);
  return c;
}

}  // namespace kerneld::testing
