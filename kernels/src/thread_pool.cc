#include "kerneld/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <latch>

namespace kerneld {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(threads, 1);
  // The caller runs a chunk too, so n threads need n - 1 workers.
  for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::Default() {
  static ThreadPool* pool = new ThreadPool(0);  // leaked: outlives static dtors
  return *pool;
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (stop_ && tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
  std::latch done(chunks - 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t c = 1; c < chunks; ++c) {
      int64_t b = c * per, e = std::min(n, b + per);
      tasks_.emplace_back([&fn, &done, b, e] {
        if (b < e) fn(b, e);
        done.count_down();
      });
    }
  }
  cv_.notify_all();
  fn(0, std::min(n, per));
  done.wait();
}

}  // namespace kerneld
