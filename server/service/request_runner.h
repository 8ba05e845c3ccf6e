// The request's walk, shared by Execute and ExecuteStream: decode, resolve
// tensors, validate against the schema, schedule, submit to a device worker,
// and complete the response when the worker is done.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

#include "buffers/buffer_registry.h"
#include "devices/device_manager.h"
#include "kerneld/v1/kerneld.pb.h"
#include "metrics/metrics.h"
#include "metrics/request_log.h"
#include "scheduler/scheduler.h"

namespace kerneld::server {

struct CallControl {
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::function<bool()> cancelled;  // may be empty
  Principal principal = kAnonymous;  // owner of the buffers it may reference
};

class RequestRunner {
 public:
  RequestRunner(const Config& cfg, DeviceManager& devices, Metrics& metrics, BufferRegistry* buffers = nullptr,
                RequestLog* log = nullptr, TraceWriter* trace = nullptr)
      : cfg_(cfg), devices_(devices), scheduler_(devices), metrics_(metrics), buffers_(buffers), log_(log),
        trace_(trace) {}

  // Runs `req` and fills `resp` (outputs, info, status). `done` is called
  // exactly once with the final status, from a worker thread or (for a
  // request rejected before queueing) from this call. `req` and `resp` must
  // stay alive until then.
  void Start(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
             std::function<void(const Status&)> done);

  // After this, new requests are refused with UNAVAILABLE.
  void BeginDrain() { draining_.store(true); }
  // Requests started and not yet completed.
  int inflight() const { return inflight_.load(); }

  const Scheduler& scheduler() const { return scheduler_; }
  const DeviceManager& devices() const { return devices_; }

 private:
  const Config& cfg_;
  DeviceManager& devices_;
  Scheduler scheduler_;
  Metrics& metrics_;
  BufferRegistry* buffers_;
  RequestLog* log_;
  TraceWriter* trace_;
  std::atomic<bool> draining_{false};
  std::atomic<int> inflight_{0};
};

}  // namespace kerneld::server
