// The CPU sampling ops' uniforms: counter-based, from (seed, row), so a
// row's draw depends on nothing but its own inputs and the seed (the CUDA
// impls use Philox on the same counter).
#pragma once

#include <cstdint>

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

}  // namespace kerneld::cpu
