// Per-thread CUDA state that outlives its thread: a thread that ends gives
// its state (a stream and events, a graph cache) to the next thread that
// needs one on that device, instead of destroying it in a thread-local
// destructor. gRPC's sync API ends and starts the threads that run GPU
// requests inline, and a CUDA call from a thread-exit destructor runs after
// the CUDA runtime's own state for that thread is gone: cuBLASLt's handle
// destroyed there crashed the daemon (kernels/ops/gemm/cublas.cu, LtPool).
// A state changes threads only after its thread ended, when every request
// it ran had waited for its own kernels.
#pragma once

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace kerneld::server {

template <typename T>
class ThreadHandoff {
 public:
  // A state a thread that ended left for `device` into *out; false if none.
  bool Take(int device, T* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(device);
    if (it == free_.end() || it->second.empty()) return false;
    *out = std::move(it->second.back());
    it->second.pop_back();
    return true;
  }
  void Give(int device, T state) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[device].push_back(std::move(state));
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<T>> free_;  // at most the threads that ever ran at once
};

}  // namespace kerneld::server
