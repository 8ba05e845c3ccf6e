// A small fixed thread pool for the CPU backend's intra-op parallelism.
//
// ParallelFor splits [0, n) into contiguous chunks of at least `grain`
// elements; the calling thread runs one chunk itself, so a pool of size 1
// (or a small n) costs no thread hand-off at all.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kerneld {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // fn(begin, end) over disjoint chunks covering [0, n); returns when done.
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& fn);

  // A process-wide pool sized to the machine.
  static ThreadPool& Default();

 private:
  void WorkerLoop();
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
};

// Runs fn over [0, n) on `pool`, or inline when pool is null.
inline void ParallelFor(ThreadPool* pool, int64_t n, int64_t grain,
                        const std::function<void(int64_t, int64_t)>& fn) {
  if (pool == nullptr || n <= grain) {
    if (n > 0) fn(0, n);
    return;
  }
  pool->ParallelFor(n, grain, fn);
}

}  // namespace kerneld
