// The host side of kernel_bench's timing method, for what runs on the CPU:
// warm-up runs first, then the median of `reps` wall-clock (steady_clock)
// runs. No L2 flush: a CPU run is timed as the CPU worker times a request
// (server/devices/cpu_worker.cc). Its GPU counterpart is gpu_timing.h.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "kerneld/status.h"

namespace kerneld {

// The median of `reps` (at least 1) runs of f(), each timed alone, after
// `warmup` untimed runs; f's first error stops it.
inline Status WallMedianNs(int warmup, int reps, const std::function<Status()>& f, int64_t* ns) {
  for (int i = 0; i < warmup; ++i) KERNELD_RETURN_IF_ERROR(f());
  std::vector<int64_t> t;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    KERNELD_RETURN_IF_ERROR(f());
    t.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
  *ns = t[t.size() / 2];
  return Status::Ok();
}

}  // namespace kerneld
