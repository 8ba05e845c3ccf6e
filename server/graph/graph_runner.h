// ExecuteGraph's walk: the same admission as Execute (identity, rate limit,
// drain, the principal's in-flight quota; CallControl), then the whole
// graph validated (graph_plan.h), its tensors resolved (inline bytes, or
// buffers of the caller's principal, pinned until the answer), its memory
// counted against --max_inflight_mb, placed as one unit on one device by
// the scheduler (every step must have an eligible impl there), and run by
// that device's worker as one task (graph_exec.h).
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "buffers/buffer_registry.h"
#include "devices/device_manager.h"
#include "kerneld/v1/kerneld.pb.h"
#include "metrics/metrics.h"
#include "scheduler/scheduler.h"
#include "service/memory_budget.h"
#include "service/request_runner.h"

namespace kerneld::server {

class GraphRunner {
 public:
  // `budget`: the daemon's request memory (--max_inflight_mb); nullptr: one
  // of its own with that limit.
  GraphRunner(const Config& cfg, const DeviceManager& devices, const Scheduler& scheduler,
              Metrics& metrics, BufferRegistry* buffers, MemoryBudget* budget = nullptr);

  // Runs `req` and fills `resp`; `done` is called exactly once with the
  // final status (from a worker thread, or from this call). `req` and
  // `resp` stay alive until then. Nothing throws out of it.
  void Start(const v1::ExecuteGraphRequest& req, v1::ExecuteGraphResponse* resp, CallControl ctl,
             std::function<void(const Status&)> done);

  void BeginDrain() { draining_.store(true); }
  int inflight() const { return inflight_.load(); }

 private:
  struct Call;
  void StartImpl(const std::shared_ptr<Call>& call, CallControl ctl);

  const Config& cfg_;
  const DeviceManager& devices_;
  const Scheduler& scheduler_;
  Metrics& metrics_;
  BufferRegistry* buffers_;
  std::unique_ptr<MemoryBudget> own_budget_;
  MemoryBudget* budget_;
  std::atomic<bool> draining_{false};
  std::atomic<int> inflight_{0};
};

// The daemon's graph runner, for the handlers (null: ExecuteGraph answers
// UNIMPLEMENTED). Set before serving, cleared after.
void SetGraphRunner(GraphRunner* runner);
GraphRunner* CurrentGraphRunner();

}  // namespace kerneld::server
