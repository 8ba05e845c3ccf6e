// The request's walk, shared by Execute and ExecuteStream: decode, resolve
// tensors, validate against the schema, schedule, submit to a device worker,
// and complete the response when the worker is done.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "buffers/buffer_registry.h"
#include "devices/device_manager.h"
#include "kerneld/v1/kerneld.pb.h"
#include "metrics/metrics.h"
#include "metrics/request_log.h"
#include "scheduler/scheduler.h"
#include "service/memory_budget.h"

namespace kerneld::server {

struct CallControl {
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  std::function<bool()> cancelled;   // may be empty
  Principal principal = kAnonymous;  // owner of the buffers it may reference
  Status refused;                    // not OK: answer this (authentication) and run nothing
  // The principal's requests in flight (null: not counted) and its quota
  // (0: none); docs/security.md.
  std::shared_ptr<std::atomic<int64_t>> principal_inflight;
  int64_t max_inflight = 0;
  // How it came: the `transport` label of its series.
  Transport transport = Transport::kGrpc;
};

class RequestRunner {
 public:
  RequestRunner(const Config& cfg, DeviceManager& devices, Metrics& metrics,
                BufferRegistry* buffers = nullptr, RequestLog* log = nullptr,
                TraceWriter* trace = nullptr);

  // Runs `req` and fills `resp` (outputs, info, status). `done` is called
  // exactly once with the final status, from a worker thread or (for a
  // request rejected before queueing) from this call. `req` and `resp` must
  // stay alive until then. Nothing throws out of it.
  void Start(const v1::ExecuteRequest& req, v1::ExecuteResponse* resp, CallControl ctl,
             std::function<void(const Status&)> done);

  // After this, new requests are refused with UNAVAILABLE.
  void BeginDrain() { draining_.store(true); }
  bool draining() const { return draining_.load(); }
  // Requests started and not yet completed.
  int inflight() const { return inflight_.load(); }

  const Scheduler& scheduler() const { return scheduler_; }
  const DeviceManager& devices() const { return devices_; }

 private:
  using DoneFn = std::function<void(const Status&)>;
  struct Call;  // one request's state, one allocation (request_runner.cc)
  // What the completion of a request on (impl, worker) labels and counts,
  // looked up once per pair: the success path then formats nothing.
  struct Target {
    // By Transport: each request's series by how it came.
    std::array<Metrics::Series*, kTransports> series{};
    std::string device_id;  // "cpu", "cuda:0"
  };
  struct PairHash {
    size_t operator()(const std::pair<const ImplDef*, const DeviceWorker*>& p) const {
      return std::hash<const void*>()(p.first) * 31 + std::hash<const void*>()(p.second);
    }
  };
  // The walk's steps (request_runner.cc). Refuse, Decode and Place answer a
  // request they end (Fail) and say so: true from Refuse, false from the
  // others.
  void StartImpl(const std::shared_ptr<Call>& call, CallControl ctl);
  bool Refuse(Call& c, CallControl& ctl);
  bool Decode(Call& c);
  bool Place(Call& c, Placement* place);
  void Submit(const std::shared_ptr<Call>& call, const Placement& place, CallControl& ctl);
  void Complete(Call& c, Status st, const TaskTiming& timing);
  void Fail(Call& c, const Status& st, const std::string& op_label, const std::string& backend,
            const std::string& device);
  const Target& TargetFor(const OpDef& op, const ImplDef& impl, const DeviceWorker& worker);

  const Config& cfg_;
  DeviceManager& devices_;
  Scheduler scheduler_;
  Metrics& metrics_;
  BufferRegistry* buffers_;
  RequestLog* log_;
  TraceWriter* trace_;
  std::atomic<bool> draining_{false};
  std::atomic<int> inflight_{0};
  MemoryBudget budget_;  // --max_inflight_mb
  std::shared_mutex targets_mu_;
  std::unordered_map<std::pair<const ImplDef*, const DeviceWorker*>, Target, PairHash> targets_;
};

}  // namespace kerneld::server
