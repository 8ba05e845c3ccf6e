// rope's test inputs, shared by its unit and gpu tests: a head layout, a real
// rotary cache, and random q/k/positions over it.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "kerneld/host_tensor.h"
#include "op_runner.h"

namespace kerneld::testing {

struct RopeLayout {
  int64_t hq, hk, head, rot;
};

// A real rotary cache: cos(p * theta_i) | sin(p * theta_i), theta_i = 10000^(-2i/rot).
inline HostTensor RopeCache(int64_t max_pos, int64_t rot) {
  HostTensor c;
  c.dtype = DType::kFloat32;
  c.shape = {max_pos, rot};
  c.values.resize(static_cast<size_t>(max_pos * rot));
  for (int64_t p = 0; p < max_pos; ++p)
    for (int64_t i = 0; i < rot / 2; ++i) {
      const double a = static_cast<double>(p) *
                       std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(rot));
      c.values[static_cast<size_t>(p * rot + i)] = static_cast<float>(std::cos(a));
      c.values[static_cast<size_t>(p * rot + rot / 2 + i)] = static_cast<float>(std::sin(a));
    }
  return c;
}

inline HostTensors RopeInputs(DType dt, DType pos_dt, int64_t tokens, const RopeLayout& l,
                              std::mt19937_64& rng, int64_t max_pos = 4096) {
  HostTensors in;
  in["q"] = Random(dt, {tokens, l.hq, l.head}, rng);
  in["k"] = Random(dt, {tokens, l.hk, l.head}, rng);
  in["positions"] = Random(pos_dt, {tokens}, rng, 0, static_cast<double>(max_pos));
  in["cos_sin_cache"] = RopeCache(max_pos, l.rot);
  return in;
}

// The tolerance for rope in half types is 1e-2; float32 keeps 1e-5.
inline double RopeTol(DType dt) { return dt == DType::kFloat32 ? 1e-5 : 1e-2; }

}  // namespace kerneld::testing
