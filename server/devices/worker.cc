#include "devices/worker.h"

#include <exception>
#include <new>

#include "kerneld_lane/futex.h"

namespace kerneld::server {

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

DeviceWorker::DeviceWorker(DeviceInfo info, int threads, int capacity)
    : info_(std::move(info)), threads_(threads), capacity_(capacity) {}

DeviceWorker::~DeviceWorker() { Stop(); }

void DeviceWorker::Start() {
  for (int i = 0; i < threads_; ++i) pool_.emplace_back([this] { Loop(); });
}

bool DeviceWorker::Submit(std::unique_ptr<Task>& task) {
  // Read before the task is published: a pool thread may take it at once.
  const int64_t scheduled_ns = NsSince(task->arrival);
  if (adaptive_spin_ns_.load(std::memory_order_relaxed) > 0)
    last_submit_ns_.store(NowNs(), std::memory_order_relaxed);
  bool run_here = false;
  const int64_t estimate_ns = task->estimate_ns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    // Inline only when nothing waits (it would overtake queued work) and a
    // slot is free (the concurrency bound holds for inline runs too).
    // Only ops that were recently short here: a long one would hold the
    // receiving thread (and a stream's next read) for its whole run.
    run_here = task->bytes <= inline_max_bytes_ && queue_.empty() && running_ < threads_;
    if (run_here) {
      auto it = execute_estimate_ns_.find(task->call.op);
      run_here = it == execute_estimate_ns_.end() || it->second <= inline_max_ns_;
    }
    if (run_here) {
      ++running_;
    } else {
      if (static_cast<int>(queue_.size()) >= capacity_) return false;
      task->scheduled_ns = scheduled_ns;
      const int priority = task->priority;
      const std::string principal = task->principal;
      queue_.Push(std::move(task), priority, principal, NowNs());
      depth_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
    }
  }
  if (estimate_ns > 0) pending_ns_.fetch_add(estimate_ns, std::memory_order_relaxed);
  if (run_here) {
    task->scheduled_ns = scheduled_ns;
    RunInline(std::move(task));
  } else {
    cv_.notify_one();
  }
  return true;
}

void DeviceWorker::RunInline(std::unique_ptr<Task> task) {
  // The slot is given back however RunOne leaves (done may throw into the
  // caller, which answers the request itself).
  struct Release {
    DeviceWorker* w;
    const OpDef* op;
    int64_t execute_ns = -1;
    ~Release() {
      bool wake;
      {
        std::lock_guard<std::mutex> lock(w->mu_);
        --w->running_;
        if (execute_ns >= 0) w->RecordLocked(op, execute_ns);
        // A pool thread may wait for this slot; Stop waits for running_ == 0.
        wake = !w->queue_.empty() || w->stopping_;
      }
      if (wake) w->cv_.notify_all();
    }
  } release{this, task->call.op};
  release.execute_ns = RunOne(std::move(task));
}

void DeviceWorker::Stop() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ && pool_.empty() && running_ == 0) return;
  stopping_ = true;
  lock.unlock();
  cv_.notify_all();
  for (auto& t : pool_) t.join();
  pool_.clear();
  // Inline runs are on their callers' threads: the worker must outlive them.
  lock.lock();
  cv_.wait(lock, [this] { return running_ == 0; });
}

void DeviceWorker::ThreadStart() {
  for (const OpDef* op : OpRegistry::Global().List())
    for (const ImplDef& impl : op->impls)
      if (impl.thread_warm_up && !impl.requires_.RejectDevice(info_)) impl.thread_warm_up(info_);
}

void DeviceWorker::Loop() {
  ThreadStart();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Poll before sleeping (set_spin). depth_ is published under mu_ by
    // Submit; seeing it non-zero only says the lock is worth taking. Stop
    // is noticed after at most one spin.
    int64_t spin = spin_ns_.load(std::memory_order_relaxed);
    if (const int64_t adaptive = adaptive_spin_ns_.load(std::memory_order_relaxed);
        adaptive > spin && NowNs() - last_submit_ns_.load(std::memory_order_relaxed) < adaptive * 8)
      spin = adaptive;
    if (spin > 0 && queue_.empty()) {
      lock.unlock();
      const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin);
      while (depth_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < until)
        lane::CpuRelax();
      lock.lock();
    }
    cv_.wait(lock, [this] {
      return (stopping_ && queue_.empty()) || (!queue_.empty() && running_ < threads_);
    });
    if (queue_.empty()) return;  // stopping and drained
    std::unique_ptr<Task> task = queue_.Pop(NowNs());
    depth_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
    ++running_;
    const OpDef* op = task->call.op;
    lock.unlock();
    const int64_t execute_ns = RunOne(std::move(task));
    lock.lock();
    --running_;
    if (execute_ns >= 0) RecordLocked(op, execute_ns);
  }
}

void DeviceWorker::RecordLocked(const OpDef* op, int64_t execute_ns) {
  // First sample taken as is; then an average over about 8 runs, so one
  // slow run (a first-use warm-up) does not pin an op to the pool for long.
  auto [it, inserted] = execute_estimate_ns_.try_emplace(op, execute_ns);
  if (!inserted) it->second += (execute_ns - it->second) / 8;
}

int64_t DeviceWorker::ExecuteEstimateNs(const OpDef* op) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = execute_estimate_ns_.find(op);
  return it == execute_estimate_ns_.end() ? 0 : it->second;
}

int64_t DeviceWorker::RunOne(std::unique_ptr<Task> task) {
  TaskTiming timing;
  timing.scheduled_ns = task->scheduled_ns;
  timing.queue_ns = NsSince(task->arrival);
  timing.dequeued_ns = timing.queue_ns;
  Status st;
  // Deadline first: gRPC also marks a call whose deadline passed as cancelled.
  if (std::chrono::system_clock::now() >= task->deadline) {
    st = Status(StatusCode::kDeadlineExceeded, task->call.op->name + ": deadline passed after " +
                                                   std::to_string(timing.queue_ns / 1000) +
                                                   " us in the queue; not executed");
  } else if (task->cancelled && task->cancelled()) {
    st = Status(StatusCode::kCancelled,
                task->call.op->name + ": cancelled by the client before it ran");
  } else {
    inflight_.fetch_add(1, std::memory_order_relaxed);
    timing.executed = true;
    // A kernel that throws (std::bad_alloc for a large CPU workspace, say)
    // fails its request; it must not take the worker thread, and with it the
    // daemon, down.
    try {
      st = Execute(*task, &timing);
    } catch (const std::bad_alloc&) {
      st = ResourceExhausted(task->call.op->name + ": out of host memory while running on " +
                             info_.device.ToString() + "; retry later or send a smaller request");
    } catch (const std::exception& e) {
      st = Internal(task->call.op->name + ": " + info_.device.ToString() +
                    " failed: " + Sanitize(e.what()));
    }
    inflight_.fetch_sub(1, std::memory_order_relaxed);
  }
  const int64_t execute_ns = timing.executed ? timing.execute_ns : -1;
  if (task->estimate_ns > 0) pending_ns_.fetch_sub(task->estimate_ns, std::memory_order_relaxed);
  task->done(st, timing);
  return execute_ns;
}

}  // namespace kerneld::server
