// What the row-splitting launch plans (ops/softmax/plan.h,
// ops/top_k_mask_logits/plan.h) need to know of the device, and the
// power-of-2 rounding they size clusters with. Host-only plain C++, so that
// CPU tests can check the choosers.
#pragma once

#include <cstdint>

namespace kerneld::cuda {

struct DeviceCaps {
  int index = 0;               // CUDA device ordinal
  int compute_capability = 0;  // major * 10 + minor
  int sm_count = 1;
};

// The least power of 2 >= v (1 for v <= 1), at most 2^30.
inline int Pow2Ceil(int64_t v) {
  int p = 1;
  while (p < v && p < (1 << 30)) p <<= 1;
  return p;
}

}  // namespace kerneld::cuda
