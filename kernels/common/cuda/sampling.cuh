// Device helpers the sampling kernels share (min_p_sampling,
// top_k_top_p_sampling): one block a row, each thread owning a contiguous
// chunk of it, and each row's own random stream.
#pragma once

#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <cstdint>

namespace kerneld::cuda {

// The chunk [begin, end) of a row of `vocab` values that thread `tid`
// (this one) owns, `chunk` values a thread in thread order (empty past the
// row's end). tid is the int the kernels' block scans name owners by.
struct ThreadChunk {
  int64_t begin, end;
  int tid;
};

__device__ __forceinline__ ThreadChunk ThreadChunkOf(int64_t vocab, int64_t chunk) {
  const int64_t first = int64_t{threadIdx.x} * chunk;
  const int64_t begin = first < vocab ? first : vocab;
  return {begin, begin + chunk < vocab ? begin + chunk : vocab, static_cast<int>(threadIdx.x)};
}

// Row r's random stream: Philox subsequence r of `seed`, so that a row's
// draw depends on neither the other rows nor the grid.
// (Initialized in place: a state returned by value compiled to other SASS
// in top_k_top_p_sampling.)
__device__ __forceinline__ void InitRowRng(unsigned long long seed, int64_t r,
                                           curandStatePhilox4_32_10_t* rng) {
  curand_init(seed, static_cast<unsigned long long>(r), 0, rng);
}

}  // namespace kerneld::cuda
