// kernel_bench's timing method as a library (bench/kernel_bench.cu,
// --flush-l2-clean): before each timed run the L2 is flushed by reading 2 x
// L2 of other memory (a read leaves no dirty lines whose write-back the
// timed kernel would pay for), the run is timed with CUDA events, three
// runs first as warm-up, and the median of N is the time. Used where a
// kernel is timed outside the bench: EvaluateKernel in the daemon (the
// built-in op and a device copy) and in the sandbox worker (the user
// kernel). No CUDA headers here; streams are void*. Built with CUDA only.
#pragma once

#include <cstddef>
#include <functional>

#include "kerneld/status.h"

namespace kerneld {

// 2 x L2 of device memory to read between runs, on one device.
class L2ReadFlush {
 public:
  L2ReadFlush() = default;
  ~L2ReadFlush();
  L2ReadFlush(const L2ReadFlush&) = delete;
  L2ReadFlush& operator=(const L2ReadFlush&) = delete;

  // Allocates on the current device (cudaSetDevice first).
  Status Init();
  // Reads the whole buffer on `stream`, bypassing L1.
  Status Flush(void* stream) const;

 private:
  void* buf_ = nullptr;
  size_t bytes_ = 0;
  unsigned* sink_ = nullptr;
  int sms_ = 1;
};

// The median of `reps` (at least 1) runs of f() on `stream`, each after
// flush.Flush, in microseconds; f's first error stops it.
Status FlushedMedianUs(void* stream, int reps, const L2ReadFlush& flush,
                       const std::function<Status()>& f, double* us);

}  // namespace kerneld
