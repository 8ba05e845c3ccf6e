// A CUDA device: one worker thread per stream, pooled device and pinned
// memory, completion by polling an event, and sticky-error health tracking.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "devices/worker.h"

namespace kerneld::server {

class PinnedPool;

// final: its constructor starts threads that call the virtual ThreadStart.
class CudaWorker final : public DeviceWorker {
 public:
  // event_timing: execute_ns from CUDA timing events around the launch (the
  // kernel's own GPU time) instead of the host's launch-to-completion span;
  // the events cost a small request ~4 us and the tail more (--gpu_timing,
  // docs/performance.md).
  CudaWorker(DeviceInfo info, int streams, int capacity, bool event_timing = false);
  ~CudaWorker() override;

  bool healthy() const override { return healthy_.load(); }

 protected:
  Status Execute(Task& task, TaskTiming* timing) override;
  // This thread's stream and events, then the impls' thread_warm_up
  // (cuBLASLt's library and handle: ~0.1 s on the first gemm otherwise).
  void ThreadStart() override;

 private:
  Status Run(Task& task, TaskTiming* timing);
  // Makes this device current and its per-thread state ready, on a pool
  // thread or on a caller running a request inline (first use: warm-up).
  Status EnsureThreadState();
  std::atomic<bool> healthy_{true};
  std::mutex reason_mu_;
  std::string unhealthy_reason_;  // guarded by reason_mu_
  std::unique_ptr<PinnedPool> pinned_;
  const bool event_timing_;
};

}  // namespace kerneld::server
