// A unit of work handed to a device worker: one validated request, bound to
// one implementation, with the data it reads and writes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "kerneld/op.h"

namespace kerneld::server {

using SteadyTime = std::chrono::steady_clock::time_point;

// Arrival to now: the unit of every stage stamp below. One steady_clock read
// (tens of ns, no allocation), so every request carries them.
inline int64_t NsSince(SteadyTime t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

struct TaskTiming {
  int64_t queue_ns = 0;    // arrival to start of execution
  int64_t execute_ns = 0;  // the implementation itself (device time on GPUs)
  bool executed = false;   // false: refused at dequeue (deadline, cancelled)
  // Stages in ns since arrival (ExecutionInfo); 0 for a stage not reached.
  int64_t scheduled_ns = 0;    // handed to the worker (Submit)
  int64_t dequeued_ns = 0;     // taken by a worker thread, or run inline
  int64_t launched_ns = 0;     // the implementation called
  int64_t kernel_done_ns = 0;  // its work finished (GPU: stream synchronized)
};

struct Task {
  // The request in the one form it keeps from decode to the kernel
  // (kerneld/call.h): op, attrs, and views in schema order. The views may
  // live in host memory (inline request bytes, response buffers) or on a
  // device (registered buffers); the worker fills device, stream and pool,
  // and stages what its device cannot read directly.
  KernelContext call;
  const ImplDef* impl = nullptr;
  SteadyTime arrival;
  // Bytes of host memory the request reads and writes: DeviceWorker::Submit
  // runs a small request on the caller's thread (see set_inline_max_bytes).
  int64_t bytes = 0;
  int64_t scheduled_ns = 0;  // set by Submit
  // The queue's order (scheduler/fair_queue.h): higher priority first, with
  // aging; principals take turns within a priority.
  int priority = 0;
  std::string principal;
  // The scheduler's estimate of its execution time on this device (0:
  // unknown): the worker's pending_ns, read by placement by expected finish.
  int64_t estimate_ns = 0;
  // Checked when the task is dequeued: a request past its deadline or whose
  // caller went away is never executed.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::function<bool()> cancelled;
  // Called exactly once, from a worker thread or from Submit's caller (a task
  // run inline); not called when Submit refuses the task.
  std::function<void(Status, const TaskTiming&)> done;
};

}  // namespace kerneld::server
