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

struct TaskTiming {
  int64_t queue_ns = 0;    // arrival to start of execution
  int64_t execute_ns = 0;  // the implementation itself (device time on GPUs)
  bool executed = false;   // false: refused at dequeue (deadline, cancelled)
};

struct Task {
  const OpDef* op = nullptr;
  const ImplDef* impl = nullptr;
  // Views in schema order. They may live in host memory (inline request
  // bytes, response buffers) or on a device (registered buffers); the worker
  // stages what its device cannot read directly.
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
  AttrMap attrs;
  SteadyTime arrival;
  // Checked when the task is dequeued: a request past its deadline or whose
  // caller went away is never executed.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::function<bool()> cancelled;
  // Called exactly once, from a worker thread (or the submitter on rejection).
  std::function<void(Status, const TaskTiming&)> done;
};

}  // namespace kerneld::server
