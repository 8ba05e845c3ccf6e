// Scheduler: picks an implementation and a device for a validated request.
//
// Eligibility: an impl is a candidate on a device when its Requirements
// accept the device (kind, compute capability, health) and the request
// (dtypes, alignment, predicate). Ranking: an explicit backend wins;
// otherwise the highest priority for this request (ImplDef::PriorityFor: the
// static one, or a per-request one where an impl was measured faster).
// Placement: an explicit device; else where the data lives; else the least
// loaded eligible device.
#pragma once

#include <string>
#include <vector>

#include "devices/device_manager.h"
#include "kerneld/op.h"

namespace kerneld::server {

struct Placement {
  const ImplDef* impl = nullptr;
  DeviceWorker* worker = nullptr;
};

class Scheduler {
 public:
  explicit Scheduler(const DeviceManager& devices) : devices_(devices) {}

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

 private:
  const DeviceManager& devices_;
};

}  // namespace kerneld::server
