// A device worker: a bounded queue and the threads that drain it. At most
// `threads` requests run at once: on the pool's threads, or (short requests
// arriving while the queue is empty and a slot is free) on the thread that
// submitted them, which saves the hand-off and the wake-up of a sleeping
// pool thread (tens of microseconds; the larger part of a small request's
// server time). "Short" is judged twice: by bytes, and by how long the op
// recently took on this device, because an inline run holds the receiving
// gRPC thread: a stream reads nothing more until it returns.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "devices/task.h"
#include "scheduler/fair_queue.h"

namespace kerneld::server {

class DeviceWorker {
 public:
  DeviceWorker(DeviceInfo info, int threads, int capacity);
  virtual ~DeviceWorker();

  const DeviceInfo& info() const { return info_; }
  // Queues the task, or runs it before returning when it is small (see
  // set_inline_max_bytes), nothing is queued and a slot is free; either way
  // task->done is called once. False (task untouched, done not called) when
  // the queue is full or the worker is stopping: the caller answers
  // RESOURCE_EXHAUSTED / UNAVAILABLE.
  bool Submit(std::unique_ptr<Task>& task);
  int queue_depth() const { return depth_.load(std::memory_order_relaxed); }
  // The estimates (Task::estimate_ns) of the tasks queued or running here.
  int64_t pending_ns() const { return pending_ns_.load(std::memory_order_relaxed); }
  // Device memory free, as last published (set_free_memory); -1 unknown.
  int64_t free_memory() const { return free_memory_.load(std::memory_order_relaxed); }
  void set_free_memory(int64_t bytes) { free_memory_.store(bytes, std::memory_order_relaxed); }
  // A waiting task gains one priority level per `ns` waited (FairQueue).
  // Set before the first Submit.
  void set_priority_aging(std::chrono::nanoseconds ns) { queue_.set_aging_ns(ns.count()); }
  int inflight() const { return inflight_.load(std::memory_order_relaxed); }
  int capacity() const { return capacity_; }
  int threads() const { return threads_; }  // requests it runs at once
  // False once a sticky error made the device unusable.
  virtual bool healthy() const { return true; }
  // info() with the current health.
  DeviceInfo Snapshot() const {
    DeviceInfo d = info_;
    d.healthy = healthy();
    return d;
  }
  // Finishes queued work, then joins the threads.
  void Stop();
  // How long an idle thread polls the queue before it sleeps on the
  // condition variable (0: sleeps at once). Waking a sleeping thread costs
  // tens of microseconds (measured on the H100 host: queue time p50 44-48
  // us with the daemon otherwise idle); polling trades a core for that.
  void set_spin(std::chrono::microseconds spin) {
    spin_ns_.store(spin.count() * 1000, std::memory_order_relaxed);
  }
  // Adaptive polling: an idle thread polls up to `max` only while the
  // device is busy, i.e. a task was submitted within the last `max` x 8;
  // after a quiet spell it sleeps at once, so an idle daemon costs no CPU.
  // Combined with set_spin, the longer of the two applies. 0: off.
  void set_adaptive_spin(std::chrono::microseconds max) {
    adaptive_spin_ns_.store(max.count() * 1000, std::memory_order_relaxed);
  }
  // Tasks of at most this many bytes (Task::bytes) may run on the
  // submitting thread; negative: never. Set before the first Submit.
  void set_inline_max_bytes(int64_t bytes) { inline_max_bytes_ = bytes; }
  // An op whose recent execution time on this device (a moving average of
  // its runs, inline or not) exceeds this runs on the pool. Set before the
  // first Submit.
  void set_inline_max_ns(int64_t ns) { inline_max_ns_ = ns; }
  // The moving average for `op` (0: never run here). For tests.
  int64_t ExecuteEstimateNs(const OpDef* op);

 protected:
  // Runs one task on this device; returns the status and fills execute_ns.
  virtual Status Execute(Task& task, TaskTiming* timing) = 0;
  // Runs once on each worker thread before it takes tasks; tasks queued
  // meanwhile wait. The default calls ImplDef::thread_warm_up of every
  // registered impl that accepts this device; a derived worker sets up its
  // per-thread state first, then calls this.
  virtual void ThreadStart();
  void Start();  // derived constructors call this once ready

  DeviceInfo info_;

 private:
  void Loop();
  // Returns the execution time, or -1 when the task was refused unexecuted.
  int64_t RunOne(std::unique_ptr<Task> task);
  // Folds one execution time into the op's average; mu_ held.
  void RecordLocked(const OpDef* op, int64_t execute_ns);
  // Runs a task on the submitting thread; its slot is already taken.
  void RunInline(std::unique_ptr<Task> task);

  int threads_;
  int capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  FairQueue<std::unique_ptr<Task>> queue_;  // guarded by mu_
  bool stopping_ = false;
  int running_ = 0;  // tasks executing (pool and inline), at most threads_
  std::atomic<int> depth_{0};
  std::atomic<int64_t> spin_ns_{0};
  std::atomic<int64_t> adaptive_spin_ns_{0};
  // steady_clock ns of the last Submit, for the adaptive spin.
  std::atomic<int64_t> last_submit_ns_{0};
  std::atomic<int> inflight_{0};
  std::atomic<int64_t> pending_ns_{0};
  std::atomic<int64_t> free_memory_{-1};
  int64_t inline_max_bytes_ = -1;
  int64_t inline_max_ns_ = 100'000;
  // Per-op moving average of execute_ns on this device; guarded by mu_,
  // which Submit and both completion paths take anyway.
  absl::flat_hash_map<const OpDef*, int64_t> execute_estimate_ns_;
  std::vector<std::thread> pool_;
};

}  // namespace kerneld::server
