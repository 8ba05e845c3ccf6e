// Scheduler: picks an implementation and a device for a validated request.
//
// Eligibility: an impl is a candidate on a device when its Requirements
// accept the device (kind, compute capability, health) and the request
// (dtypes, alignment, predicate). Ranking: an explicit backend wins;
// otherwise the highest static rank for this request (ImplDef::PriorityFor)
// says which kind of device runs it, and on each device of that kind the
// tuning table (tuning_table.h) picks among the impls it accepts; with
// --tuning=off, or for a bucket without measurements, the static rank
// picks. Placement: an explicit device; else where the data lives; else the
// earliest expected finish (placement.h). docs/architecture.md has the
// rules with their formulas.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "devices/device_manager.h"
#include "kerneld/op.h"
#include "scheduler/tuning_table.h"

namespace kerneld::server {

struct Placement {
  const ImplDef* impl = nullptr;
  DeviceWorker* worker = nullptr;
  TuningTicket ticket;      // given back with the run's time (Scheduler::Record)
  int64_t estimate_ns = 0;  // its expected execution time there (Task::estimate_ns)
};

class Scheduler {
 public:
  explicit Scheduler(const DeviceManager& devices, TuningOptions tuning = {});

  // `probe` is the request itself (kerneld/call.h prepared it): validated
  // inputs/outputs (views where they live, judged as staged per device) and
  // resolved attrs. backend: "" / "auto" or a name; device: "" or a name.
  Status Place(const OpDef& op, const KernelContext& probe, const std::string& backend,
               const std::string& device, Placement* out) const;

  // Per device: eligible, or why not (for ListKernels).
  std::vector<std::pair<DeviceInfo, std::optional<std::string>>> DeviceEligibility(
      const ImplDef& impl) const;

  // Every backend name this server knows, whether or not it can run here.
  std::vector<std::string> KnownBackends() const;
  // Backends with at least one implementation and an eligible device.
  std::vector<std::string> AvailableBackends() const;

  // A placed request ran for execute_ns (its ExecutionInfo.execute_ns).
  void Record(const TuningTicket& ticket, int64_t execute_ns) const {
    tuning_->Record(ticket, execute_ns);
  }
  TuningTable& tuning() const { return *tuning_; }
  // The device model a worker's measurements are keyed by ("cpu" for the CPU).
  static std::string ModelOf(const DeviceInfo& d);

 private:
  // Inline storage: Place runs on every request, and a host has few devices
  // and an op few implementations.
  using Ranked = absl::InlinedVector<std::pair<int, const ImplDef*>, 4>;
  using Targets = absl::InlinedVector<DeviceWorker*, 8>;
  // The success path: formats nothing. False when nothing accepts the
  // request (Place then explains why).
  bool PlaceFast(const OpDef& op, const KernelContext& probe, bool any_backend,
                 const Ranked& ranked, const Targets& targets, Placement* out) const;
  int ModelIdOf(const DeviceWorker* w) const;

  const DeviceManager& devices_;
  std::unique_ptr<TuningTable> tuning_;                      // mutable state behind a const Place
  std::vector<std::pair<const DeviceWorker*, int>> models_;  // worker -> ModelId
};

}  // namespace kerneld::server
