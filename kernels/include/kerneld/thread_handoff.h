// Per-thread GPU state that outlives its thread: a thread that ends gives
// its state (a stream and events, a cuBLASLt handle and workspace, a graph
// cache) to the next thread that needs one on that device, instead of
// destroying it in a thread-local destructor. gRPC's sync API ends and
// starts the threads that run GPU requests inline, and a CUDA call from a
// thread-exit destructor runs after the CUDA runtime's own state for that
// thread is gone: cuBLASLt's handle destroyed there crashed the daemon
// (H100, 2026-11-27: SIGSEGV in cuCtxSynchronize under __call_tls_dtors).
// A state changes threads only after its thread ended, when every request
// it ran had waited for its own kernels, so nothing of it is in use.
// Host-only; the kernels' and the server's per-thread state both use it.
#pragma once

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace kerneld {

// The states threads that ended left, by device. Never destroyed (a
// function-local `new`): it holds at most as many states as threads ever
// held one at once.
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
  std::map<int, std::vector<T>> free_;
};

// One thread's states by device, as a thread_local: Get takes a state from
// `pool` when this thread holds none for the device (the caller makes one
// if that is still empty), and the destructor gives back every state held.
// `held` says whether a T holds a state.
template <typename T>
class HandedOffByDevice {
 public:
  using HeldFn = bool (*)(const T&);
  HandedOffByDevice(ThreadHandoff<T>& pool, HeldFn held) : pool_(pool), held_(held) {}
  ~HandedOffByDevice() {
    for (size_t d = 0; d < states_.size(); ++d)
      if (held_(states_[d])) pool_.Give(static_cast<int>(d), std::move(states_[d]));
  }
  HandedOffByDevice(const HandedOffByDevice&) = delete;
  HandedOffByDevice& operator=(const HandedOffByDevice&) = delete;

  T& Get(int device) {
    const auto d = static_cast<size_t>(device);
    if (states_.size() <= d) states_.resize(d + 1);
    T& state = states_[d];
    if (!held_(state)) (void)pool_.Take(device, &state);
    return state;
  }

 private:
  ThreadHandoff<T>& pool_;
  HeldFn held_;
  std::vector<T> states_;
};

}  // namespace kerneld
