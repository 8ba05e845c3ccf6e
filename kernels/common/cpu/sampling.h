// The CPU sampling ops' shared steps: the input check, the uniforms
// (counter-based, from (seed, row), so a row's draw depends on nothing but
// its own inputs and the seed; the CUDA impls use Philox on the same
// counter), and the inverse-CDF draw over the tokens a threshold keeps.
// Mass is summed in double: the CPU backend is the reference the CUDA one is
// checked against statistically.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "kerneld/status.h"

namespace kerneld::cpu {

inline uint64_t SplitMix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A uniform in [0, 1) from the counter (seed, row).
inline double Uniform(uint64_t seed, uint64_t row) {
  const uint64_t z = SplitMix64(SplitMix64(seed) ^ SplitMix64(row + 0x632be59bd9b4e019ull));
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// Bad data is a client error, found before anything is sampled: every
// probability finite and non-negative, every row with positive mass.
inline Status CheckProbRows(const std::string& op, const float* p, int64_t rows, int64_t v) {
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int64_t i = 0; i < v; ++i) {
      const float x = p[r * v + i];
      if (!std::isfinite(x) || x < 0)
        return InvalidArgument(op + ": probs[" + std::to_string(r) + ", " + std::to_string(i) +
                               "] = " + std::to_string(x) +
                               " is not a finite non-negative probability");
      total += x;
    }
    if (!(total > 0))
      return InvalidArgument(op + ": probs row " + std::to_string(r) + " has no positive mass");
  }
  return Status::Ok();
}

// Row r's sample among the tokens with p > 0 and p >= t: u = Uniform(seed,
// r) times their mass, then the first kept token whose running mass in index
// order exceeds u (the last kept one when u rounds up to the mass).
inline int32_t DrawAbove(const float* row, int64_t v, float t, uint64_t seed, uint64_t r) {
  auto kept = [&](int64_t i) { return row[i] > 0 && row[i] >= t; };
  double mass = 0;
  for (int64_t i = 0; i < v; ++i)
    if (kept(i)) mass += row[i];
  const double u = Uniform(seed, r) * mass;
  int64_t last = -1;
  double cum = 0;
  for (int64_t i = 0; i < v; ++i) {
    if (!kept(i)) continue;
    last = i;
    cum += row[i];
    if (cum > u) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last);
}

}  // namespace kerneld::cpu
